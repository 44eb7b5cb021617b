"""The crawler side's HTTP calls to the service: capped bodies, fast-failing connections.

Twisted's ``Agent`` does the HTTP; this module bounds it: an answer larger than its limit
is dropped with its connection (:func:`read_capped`), a refused connection is noticed at
once (:class:`Endpoints`), and the errors a call ends with are typed (:class:`Timeout`,
:class:`HTTPStatus`, :class:`TooLarge`) so the client can count them.
"""

from __future__ import annotations

from ipaddress import ip_address
from typing import Any, cast
from urllib.parse import urlsplit

from twisted.internet.defer import Deferred, succeed
from twisted.internet.endpoints import HostnameEndpoint, TCP4ClientEndpoint, TCP6ClientEndpoint, wrapClientTLS
from twisted.internet.interfaces import IPushProducer
from twisted.internet.protocol import Protocol
from twisted.python.failure import Failure
from twisted.web.client import BrowserLikePolicyForHTTPS, ResponseDone
from twisted.web.http import PotentialDataLoss
from twisted.web.iweb import UNKNOWN_LENGTH, IAgentEndpointFactory, IBodyProducer
from zope.interface import implementer

from scrapy_domainstate.core.config import ConfigError
from scrapy_domainstate.fleet.protocol import API_PATH

__all__ = ["BodyProducer", "Endpoints", "HTTPStatus", "Timeout", "TooLarge", "api_url", "read_capped"]


class TooLarge(Exception):
    """The answer's body is larger than the limit."""


class Timeout(Exception):
    """No answer within the timeout."""


class HTTPStatus(Exception):
    """An answer other than 200."""

    def __init__(self, code: int, body: bytes) -> None:
        super().__init__(f"HTTP {code}: {body[:200]!r}")
        self.code = code


def api_url(url: str) -> bytes:
    """The API's URL for ``DOMAINSTATE_REMOTE_URL`` (its path appended unless already there).

    Raises :class:`ConfigError` for anything but an ASCII http(s) URL without credentials,
    query or fragment.
    """
    name = "DOMAINSTATE_REMOTE_URL"
    try:
        parts = urlsplit(url.strip())
        _ = parts.port  # raises ValueError for a bad port
    except ValueError:
        raise ConfigError(f"{name} is not a valid URL: {url!r}") from None
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.query
        or parts.fragment
        or "@" in parts.netloc
        or not url.isascii()
    ):
        raise ConfigError(f"{name} must be an ASCII http(s) URL without credentials, query or fragment, got {url!r}")
    path = parts.path.rstrip("/")
    if not path.endswith(API_PATH):
        path += API_PATH
    return f"{parts.scheme}://{parts.netloc}{path}".encode("ascii")


@implementer(IBodyProducer)
class BodyProducer:
    """A request body given in full."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self.length = len(data)

    def startProducing(self, consumer: Any) -> Deferred[None]:
        consumer.write(self._data)
        return succeed(None)

    def pauseProducing(self) -> None:
        pass

    def resumeProducing(self) -> None:
        pass

    def stopProducing(self) -> None:
        pass


class _CappedBody(Protocol):
    """Collects a response body of at most ``limit`` bytes; drops the connection beyond."""

    def __init__(self, finished: Deferred[bytes], limit: int, expected: int | None) -> None:
        self.finished = finished
        self.limit = limit
        self.expected = expected
        self.chunks: list[bytes] = []
        self.size = 0
        self.too_large = False

    def connectionMade(self) -> None:
        if self.expected is not None and self.expected > self.limit:
            self._abort()

    def _abort(self) -> None:
        self.too_large = True
        self.stop()

    def stop(self) -> None:
        """Drop the connection: the body's transport is the response's producer."""
        if self.transport is not None:
            cast(IPushProducer, self.transport).stopProducing()

    def dataReceived(self, data: bytes) -> None:
        if self.too_large:
            return
        self.size += len(data)
        if self.size > self.limit:
            self.chunks = []
            self._abort()
            return
        self.chunks.append(data)

    def connectionLost(self, reason: Failure = None) -> None:  # type: ignore[assignment]
        if self.finished.called:
            return
        if self.too_large:
            self.finished.errback(TooLarge(f"response body larger than {self.limit} bytes"))
        elif reason is not None and reason.check(ResponseDone, PotentialDataLoss):
            self.finished.callback(b"".join(self.chunks))
        else:
            self.finished.errback(reason)


@implementer(IAgentEndpointFactory)
class Endpoints:
    """TCP (TLS for https) endpoints that notice a refused connection at once.

    Twisted's default ``HostnameEndpoint`` only reports a failed attempt at its next
    ``attemptDelay`` tick (0.3 s); an IP literal needs no resolution at all.
    """

    def __init__(self, reactor: Any, timeout: float) -> None:
        self._reactor = reactor
        self._timeout = timeout
        self._tls = BrowserLikePolicyForHTTPS()

    def endpointForURI(self, uri: Any) -> Any:
        host = uri.host.decode("ascii")
        try:
            ip = ip_address(host)
        except ValueError:
            endpoint: Any = HostnameEndpoint(self._reactor, host, uri.port, timeout=self._timeout, attemptDelay=0.05)
        else:
            cls = TCP6ClientEndpoint if ip.version == 6 else TCP4ClientEndpoint
            endpoint = cls(self._reactor, host, uri.port, timeout=self._timeout)
        if uri.scheme == b"https":
            endpoint = wrapClientTLS(self._tls.creatorForNetloc(uri.host, uri.port), endpoint)
        return endpoint


def read_capped(response: Any, limit: int) -> Deferred[bytes]:
    """The body of ``response``; errbacks with :class:`TooLarge` beyond ``limit`` bytes."""
    proto: _CappedBody

    def cancel(_: Deferred[bytes]) -> None:
        proto.stop()

    finished: Deferred[bytes] = Deferred(cancel)
    length = response.length
    proto = _CappedBody(finished, limit, None if length is UNKNOWN_LENGTH else length)
    response.deliverBody(proto)
    return finished
