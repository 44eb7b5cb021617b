"""What a download failure says about a domain: the exception (or the Twisted ``Failure``) a
request ended with, read down its chain of causes, as a ``dead`` or ``network-error`` verdict.

Pure as the rest of the floor: Scrapy's and Twisted's exception classes are imported lazily, at
the first failure, so importing this module pulls in neither.
"""

from __future__ import annotations

import errno
import socket
import ssl
from collections.abc import Iterable
from functools import cache
from typing import Any

from scrapy_domainstate.core.record import Outcome
from scrapy_domainstate.detect.verdict import Verdict

__all__ = ["failure_verdict"]


def failure_verdict(exc: BaseException) -> Verdict:
    """Classify a download exception (or a Twisted ``Failure`` wrapping one).

    ``dead``: DNS "no such name" (``'dns'``), connection refused (``'refused'``), TLS
    handshake or certificate failures (``'tls:handshake'``, ``'tls:expired'``, ...).
    ``network-error``: temporary DNS failures (``'dns-temporary'``), timeouts, proxy
    failures, lost connections and anything unknown (the exception class name).
    """
    try:
        return _failure(exc)
    except Exception:
        return Verdict(Outcome.NETWORK_ERROR, None, _class_name(exc) if isinstance(exc, BaseException) else None)


def _failure(exc: Any) -> Verdict:
    exc = _unwrap_failure(exc)
    if not isinstance(exc, BaseException):
        return Verdict(Outcome.NETWORK_ERROR, None, "unknown", browser_fixable=True)
    types = _failure_types()
    nodes = _causes(exc)

    def any_of(key: str) -> bool:
        return any(isinstance(n, types[key]) for n in nodes)

    def os_errno(*codes: int) -> bool:
        return any(isinstance(n, OSError) and n.errno in codes for n in nodes)

    response = getattr(exc, "response", None)
    if type(exc).__name__ == "HttpError" and isinstance(getattr(response, "status", None), int):
        status = response.status  # type: ignore[union-attr]
        return Verdict(Outcome.HTTP_ERROR, status, f"http:{status}", browser_fixable=status in (403, 503))
    if _named(nodes, "Proxy", "TunnelError"):
        return Verdict(Outcome.NETWORK_ERROR, None, "proxy")
    if any(isinstance(n, types["tls"]) for n in nodes) or _named(nodes, "SSL", "Certificate"):
        return _tls_verdict(nodes, types)
    if any_of("dns") or _named(nodes, "DNS", "Resolve"):
        return _dns_verdict(nodes, types)
    if any_of("timeout") or os_errno(errno.ETIMEDOUT):
        return Verdict(Outcome.NETWORK_ERROR, None, "timeout", browser_fixable=True)
    if any_of("unreachable") or os_errno(errno.ENETUNREACH, errno.EHOSTUNREACH):
        return Verdict(Outcome.NETWORK_ERROR, None, "unreachable")
    if any_of("refused") or os_errno(errno.ECONNREFUSED):
        return Verdict(Outcome.DEAD, None, "refused")
    if any_of("cancelled"):
        return Verdict(Outcome.NETWORK_ERROR, None, "cancelled")
    # The most specific cause under the wrappers names it: DownloadFailedError(
    # ResponseFailed([ConnectionLost])) -> 'ConnectionLost'.
    wrapper = types["wrapper"]
    named = next((n for n in nodes if not isinstance(n, wrapper)), exc)
    return Verdict(Outcome.NETWORK_ERROR, None, _class_name(named), browser_fixable=True)


@cache
def _failure_types() -> dict[str, tuple[type[BaseException], ...]]:
    from scrapy import exceptions as sx
    from twisted.internet import defer
    from twisted.internet import error as tx
    from twisted.names import error as nx
    from twisted.web import _newclient as nc

    tls: tuple[type[BaseException], ...] = (ssl.SSLError, ssl.CertificateError)
    try:
        from OpenSSL import SSL

        tls += (SSL.Error,)
    except ImportError:  # pragma: no cover - pyOpenSSL comes with Scrapy
        pass

    def scrapy_own(*names: str) -> tuple[type[BaseException], ...]:
        """Scrapy's own download errors of these names (2.19 added most; older ones raise Twisted's)."""
        return tuple(getattr(sx, name) for name in names if hasattr(sx, name))

    return {
        "tls": tls,
        "dns": (
            *scrapy_own("CannotResolveHostError"),
            tx.DNSLookupError,
            socket.gaierror,
            nx.DNSNameError,
            nx.DNSServerError,
        ),
        "dns_temporary": (nx.DNSServerError, nx.DNSQueryTimeoutError),
        "refused": (*scrapy_own("DownloadConnectionRefusedError"), tx.ConnectionRefusedError, ConnectionRefusedError),
        "timeout": (
            *scrapy_own("DownloadTimeoutError"),
            tx.TimeoutError,
            tx.TCPTimedOutError,
            TimeoutError,
            defer.TimeoutError,
        ),
        "unreachable": (tx.NoRouteError,),
        "cancelled": (*scrapy_own("DownloadCancelledError"), defer.CancelledError, tx.ConnectingCancelledError),
        "wrapper": (*scrapy_own("DownloadFailedError"), nc._WrapperException),
        "never_received": (nc.ResponseNeverReceived,),
        "response_failed": (nc.ResponseFailed,),
    }


def _causes(exc: BaseException, limit: int = 32) -> list[BaseException]:
    """``exc`` and what it wraps: ``__cause__``/``__context__``, Twisted ``reasons``
    (Failures), aiohttp's ``os_error``/``certificate_error``; breadth first, bounded."""
    seen: set[int] = set()
    out: list[BaseException] = []
    queue: list[Any] = [exc]
    while queue and len(out) < limit:
        item = _unwrap_failure(queue.pop(0))
        if not isinstance(item, BaseException) or id(item) in seen:
            continue
        seen.add(id(item))
        out.append(item)
        queue.extend(x for x in (item.__cause__, item.__context__) if x is not None)
        reasons = getattr(item, "reasons", None)
        if isinstance(reasons, (list, tuple)):
            queue.extend(reasons)
        for attr in ("os_error", "certificate_error"):
            inner = getattr(item, attr, None)
            if isinstance(inner, BaseException):
                queue.append(inner)
    return out


def _unwrap_failure(item: Any) -> Any:
    """The exception inside a Twisted ``Failure`` (itself a ``BaseException`` since Twisted 24)."""
    value = getattr(item, "value", None)
    if isinstance(value, BaseException) and type(item).__name__ == "Failure":
        return value
    return item


def _messages(nodes: Iterable[BaseException]) -> str:
    parts = []
    for node in nodes:
        try:
            parts.append(str(node))
        except Exception:
            continue
    return " ".join(parts).lower()


_TLS_VERIFY_CODES = {
    9: "tls:expired",
    10: "tls:expired",
    18: "tls:self-signed",
    19: "tls:self-signed",
    62: "tls:hostname",
}


def _tls_verdict(nodes: list[BaseException], types: dict[str, tuple[type[BaseException], ...]]) -> Verdict:
    """A TLS failure: a network error when the stream broke mid-response, else dead."""
    mid_stream = any(
        isinstance(n, types["response_failed"]) and not isinstance(n, types["never_received"]) for n in nodes
    ) or _named(nodes, "ReadError", "PayloadError")
    if mid_stream:
        return Verdict(Outcome.NETWORK_ERROR, None, "tls:stream", browser_fixable=True)
    return Verdict(Outcome.DEAD, None, _tls_detail(nodes))


def _dns_verdict(nodes: list[BaseException], types: dict[str, tuple[type[BaseException], ...]]) -> Verdict:
    """A DNS failure: temporary (a network error) or the name does not resolve (dead)."""
    text = _messages(nodes)
    temporary = (
        any(isinstance(n, types["dns_temporary"]) for n in nodes)
        or any(isinstance(n, socket.gaierror) and n.errno == socket.EAI_AGAIN for n in nodes)
        or any(word in text for word in ("temporary", "try again", "servfail", "timeout", "timed out"))
    )
    if temporary:
        return Verdict(Outcome.NETWORK_ERROR, None, "dns-temporary")
    return Verdict(Outcome.DEAD, None, "dns")


def _tls_detail(nodes: list[BaseException]) -> str:
    for node in nodes:
        code = getattr(node, "verify_code", None)
        if isinstance(code, int) and code in _TLS_VERIFY_CODES:
            return _TLS_VERIFY_CODES[code]
    text = _messages(nodes)
    if "certificate has expired" in text or "certificate is not yet valid" in text:
        return "tls:expired"
    if "self signed" in text or "self-signed" in text:
        return "tls:self-signed"
    if "hostname mismatch" in text or "doesn't match" in text or "does not match" in text:
        return "tls:hostname"
    return "tls:handshake"


def _class_name(exc: BaseException) -> str:
    return type(exc).__name__[:64] or "Exception"


def _named(nodes: Iterable[BaseException], *needles: str) -> bool:
    return any(needle in type(node).__name__ for node in nodes for needle in needles)
