"""The client of a shared domain-state service (docs/SPEC.md section 7).

A fleet of crawlers shares verdicts through a small HTTP service (``scrapy domainstate
serve`` runs the reference one, :mod:`scrapy_domainstate.service`; the API is described in
``docs/openapi.yaml``):

* :meth:`RemoteClient.lookup` asks for the state of a domain seen for the first time.
  Lookups are batched (one ``GET /api/scrape/domain-state?domains=a,b,c`` per batch of up
  to 100 domains collected for at most 50 ms) and always *succeed*: with a
  :class:`RemoteVerdict`, or with ``None`` when the service does not know the domain, is
  slow, down, or answers garbage.
* :meth:`RemoteClient.report` queues a local verdict (``dead``, ``antibot-hard``); reports
  are sent in batched ``POST`` requests, fire-and-forget, from a bounded queue.
* :func:`adopt` decides whether a remote verdict replaces the local state: only with a
  consensus above ``DOMAINSTATE_REMOTE_CONSENSUS`` among at least
  ``DOMAINSTATE_REMOTE_MIN_REPORTERS`` distinct reporters, and only when it is newer than
  the local verdict.

The service is never trusted to behave: every call has a hard timeout, answers are capped
in size and validated field by field, and a circuit breaker stops calling a failing
service for a cool-down period. None of this raises into the crawl: failures are counted
(:meth:`RemoteClient.counters`) and logged, and the crawl goes on as if no service were
configured.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from ipaddress import IPv6Address, ip_address
from typing import Any
from urllib.parse import urlsplit

from twisted.internet.defer import Deferred, succeed
from twisted.internet.endpoints import HostnameEndpoint, TCP4ClientEndpoint, TCP6ClientEndpoint, wrapClientTLS
from twisted.internet.protocol import Protocol
from twisted.python.failure import Failure
from twisted.web.client import Agent, BrowserLikePolicyForHTTPS, HTTPConnectionPool, ResponseDone
from twisted.web.http import PotentialDataLoss
from twisted.web.http_headers import Headers
from twisted.web.iweb import UNKNOWN_LENGTH, IAgentEndpointFactory, IBodyProducer
from zope.interface import implementer

from ._breaker import CircuitBreaker
from .config import Config, ConfigError
from .record import DomainStat, State

__all__ = [
    "API_PATH",
    "MAX_BATCH",
    "MAX_DOMAIN_LENGTH",
    "MAX_EVIDENCE",
    "MAX_SKEW",
    "CircuitBreaker",
    "InvalidResponse",
    "RemoteClient",
    "RemoteVerdict",
    "adopt",
    "adoption_ttl",
    "is_domain_key",
    "parse_lookup_response",
]

logger = logging.getLogger(__name__)

#: Path of the API, relative to ``DOMAINSTATE_REMOTE_URL``.
API_PATH = "/api/scrape/domain-state"
#: Most domains in one lookup, and most reports in one POST (the service's limits).
MAX_BATCH = 100
#: Longest domain key the API accepts (a DNS name's limit).
MAX_DOMAIN_LENGTH = 253
#: Longest ``evidence`` string of a report.
MAX_EVIDENCE = 200
#: Seconds a ``last_seen`` may lie in the future (clock skew between machines).
MAX_SKEW = 300.0

_STATES = {s.value: s for s in State}
_LABEL_RE = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


def is_domain_key(text: object) -> bool:
    """Whether ``text`` is a domain key the API accepts.

    Lowercase LDH labels (IDNs in their ``xn--`` form) of 1-63 characters, at most 253
    characters in all; or an IPv4 address; or an IPv6 address in its compressed form. This
    is the syntax of the keys :func:`scrapy_domainstate.keys.domain_key` produces, except
    the shortened ``...#digest`` keys of overlong hosts, which are never shared.
    """
    if not isinstance(text, str) or not text or len(text) > MAX_DOMAIN_LENGTH:
        return False
    if ":" in text:
        try:
            return IPv6Address(text).compressed == text
        except ValueError:
            return False
    return all(_LABEL_RE.fullmatch(label) for label in text.split("."))


# ---------------------------------------------------------------- verdicts


@dataclass(frozen=True, slots=True)
class RemoteVerdict:
    """What the service says about one domain."""

    domain: str
    state: State
    #: Share of the distinct reporters that agree with ``state`` (0..1).
    consensus: float
    #: Distinct reporters with a current vote on the domain.
    reporters: int
    #: The newest observation behind ``state`` (epoch seconds).
    last_seen: float
    #: When the verdict runs out (``None``: the state has no TTL).
    expires_at: float | None = None
    #: Reporters that voted for ``state`` (``None``: the service did not say).
    agreeing: int | None = None

    @property
    def supporters(self) -> int:
        """Reporters agreeing (without ``agreeing``: every reporter, the rule before it existed)."""
        return self.reporters if self.agreeing is None else self.agreeing

    @property
    def support(self) -> float:
        """The share agreeing once a single dissenter is set aside (see :func:`adopt`)."""
        dissenting = self.reporters - self.supporters
        if dissenting <= 0:
            return self.consensus
        if dissenting == 1:
            return 1.0
        return self.supporters / (self.reporters - 1)


def adopt(
    local: DomainStat | None, remote: RemoteVerdict | None, config: Config, now: float | None = None
) -> State | None:
    """The state to adopt from ``remote``, or ``None`` to keep the local one.

    A remote verdict counts only when at least ``config.remote_min_reporters`` distinct
    reporters agree on it and its support is strictly above ``config.remote_consensus``.
    The support is the share of the reporters agreeing once *one* dissenter is set aside
    (``agreeing / (reporters - 1)`` when anybody dissents): a single reporter, honest
    or not, cannot veto what enough others agree on (1 dissenter against 3, 4 or 5 agreeing
    reporters: adopted), while two or more dissenters still count (3 against 2: 0.75, not
    adopted). Votes for ``unknown`` are no verdict: the service leaves them out. It then
    replaces the local state when:

    * there is no local verdict (no record, or an ``unknown`` one): the remote state is
      adopted unless the local record holds evidence (a ``recent`` entry) newer than the
      remote ``last_seen``;
    * the local record has a verdict that disagrees: the newer ``last_seen`` wins, so the
      remote state is adopted only when ``remote.last_seen > local.last_seen``.

    With ``now``, a remote verdict that has already expired is never adopted. Pure: no I/O.
    """
    if remote is None:
        return None
    if not (remote.support > config.remote_consensus and remote.supporters >= config.remote_min_reporters):
        return None
    if now is not None and remote.expires_at is not None and remote.expires_at <= now:
        return None
    if local is None:
        return None if remote.state is State.UNKNOWN else remote.state
    if local.state is remote.state:
        return None
    if local.state is State.UNKNOWN:
        # "unknown" is no verdict; only fresh local evidence outweighs the fleet's.
        local_time = max((e.at for e in local.recent), default=0.0)
    else:
        local_time = local.last_seen
    return remote.state if remote.last_seen > local_time else None


def adoption_ttl(remote: RemoteVerdict, now: float) -> float | None:
    """The ``ttl`` to give ``DomainStore.set_state`` when adopting ``remote``.

    The remote verdict's remaining lifetime, so an adopted state runs out when the fleet's
    evidence does (``None``: the state has no TTL). At least one second.
    """
    if remote.expires_at is None:
        return None
    return max(remote.expires_at - now, 1.0)


class InvalidResponse(ValueError):
    """The service answered something that is not a valid answer."""


def _reject_constant(name: str) -> float:
    raise ValueError(f"non-finite number {name}")


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:  # an integer of hundreds of digits: not a number we can use
        return None
    return value if math.isfinite(value) else None


def _parse_verdict(domain: str, entry: object, now: float) -> RemoteVerdict | None:
    if not isinstance(entry, dict):
        return None
    state = _STATES.get(entry.get("state")) if isinstance(entry.get("state"), str) else None
    consensus = _number(entry.get("consensus"))
    reporters = entry.get("reporters")
    last_seen = _number(entry.get("last_seen"))
    expires_raw = entry.get("expires_at")
    expires_at = None if expires_raw is None else _number(expires_raw)
    agreeing = entry.get("agreeing")
    if agreeing is not None and (
        isinstance(agreeing, bool) or not isinstance(agreeing, int) or not 1 <= agreeing <= reporters
    ):
        return None
    if (
        state is None
        or consensus is None
        or not 0.0 <= consensus <= 1.0
        or isinstance(reporters, bool)
        or not isinstance(reporters, int)
        or not 1 <= reporters <= 10**9
        or last_seen is None
        or not 0.0 <= last_seen <= now + MAX_SKEW  # a "future" verdict would win every conflict
        or (expires_raw is not None and expires_at is None)
    ):
        return None
    return RemoteVerdict(domain, state, consensus, reporters, last_seen, expires_at, agreeing)


def parse_lookup_response(
    body: bytes, requested: Iterable[str], now: float | None = None
) -> tuple[dict[str, RemoteVerdict], int]:
    """Validate a lookup answer: ``({domain: verdict}, number of invalid entries)``.

    Raises :class:`InvalidResponse` when the body as a whole is not a valid answer
    (not UTF-8 JSON, not ``{"domains": {...}}``). An entry with a wrong type, an unknown
    state, an out-of-range number or a ``last_seen`` in the future is dropped and counted;
    entries for domains that were not asked for are ignored.
    """
    now = time.time() if now is None else now
    try:
        data = json.loads(body.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise InvalidResponse(f"not JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("domains"), dict):
        raise InvalidResponse('not an object of the form {"domains": {...}}')
    answers = data["domains"]
    verdicts: dict[str, RemoteVerdict] = {}
    invalid = 0
    for domain in requested:
        if domain not in answers:
            continue
        try:
            verdict = _parse_verdict(domain, answers[domain], now)
        except (TypeError, ValueError, OverflowError, AttributeError):  # one bad entry, not the batch
            verdict = None
        if verdict is None:
            invalid += 1
        else:
            verdicts[domain] = verdict
    return verdicts, invalid


# ------------------------------------------------------------------ HTTP


class _TooLarge(Exception):
    pass


class _Timeout(Exception):
    pass


class _HTTPStatus(Exception):
    def __init__(self, code: int, body: bytes) -> None:
        super().__init__(f"HTTP {code}: {body[:200]!r}")
        self.code = code


@implementer(IBodyProducer)
class _Body:
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
        if self.transport is not None:
            self.transport.stopProducing()

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
            self.finished.errback(_TooLarge(f"response body larger than {self.limit} bytes"))
        elif reason is not None and reason.check(ResponseDone, PotentialDataLoss):
            self.finished.callback(b"".join(self.chunks))
        else:
            self.finished.errback(reason)


@implementer(IAgentEndpointFactory)
class _Endpoints:
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


def _read_capped(response: Any, limit: int) -> Deferred[bytes]:
    proto: _CappedBody

    def cancel(_: Deferred[bytes]) -> None:
        if proto.transport is not None:
            proto.transport.stopProducing()

    finished: Deferred[bytes] = Deferred(cancel)
    length = response.length
    proto = _CappedBody(finished, limit, None if length is UNKNOWN_LENGTH else length)
    response.deliverBody(proto)
    return finished


# ----------------------------------------------------------------- client

_COUNTERS = (
    "lookups",
    "hits",
    "adopted",
    "errors",
    "timeouts",
    "invalid",
    "breaker_open",
    "skipped",
    "batches",
    "reported",
    "dropped",
)


def _endpoint(url: str) -> bytes:
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


class RemoteClient:
    """Batched, bounded, fail-safe client of the shared domain-state service.

    Build it with :meth:`from_config` (``None`` when ``DOMAINSTATE_REMOTE_URL`` is unset).
    Every public method is safe to call from the crawl: none raises, none waits longer
    than ``batch_delay + config.remote_timeout``. Counters are plain attributes (see
    :meth:`counters`).
    """

    def __init__(
        self,
        config: Config,
        *,
        reactor: Any = None,
        batch_delay: float = 0.05,
        batch_size: int = MAX_BATCH,
        report_delay: float = 1.0,
        report_queue: int = 10_000,
        failure_threshold: int = 3,
        cooldown: float = 30.0,
        max_body: int = 1 << 20,
        max_in_flight: int = 8,
        max_query: int = 8000,
    ) -> None:
        if not config.remote_url:
            raise ConfigError("DOMAINSTATE_REMOTE_URL is not set")
        token = config.remote_token
        if token is not None and (_CONTROL_RE.search(token) or not token.isascii()):
            raise ConfigError("DOMAINSTATE_REMOTE_TOKEN must be printable ASCII")
        if reactor is None:
            from twisted.internet import reactor as default_reactor

            reactor = default_reactor
        self.config = config
        self.url = _endpoint(config.remote_url)
        self.timeout = config.remote_timeout
        self.batch_delay = batch_delay
        self.batch_size = max(1, min(batch_size, MAX_BATCH))
        self.report_delay = report_delay
        self.max_body = max_body
        self.max_in_flight = max_in_flight
        self.max_query = max_query
        self._reactor = reactor
        self._headers = {b"Accept": [b"application/json"], b"User-Agent": [b"scrapy-domainstate"]}
        if token:
            self._headers[b"Authorization"] = [b"Bearer " + token.encode("ascii")]
        else:
            logger.warning("DOMAINSTATE_REMOTE_URL is set but DOMAINSTATE_REMOTE_TOKEN is not: the service will refuse")
        self._pool = HTTPConnectionPool(reactor, persistent=True)
        self._pool.maxPersistentPerHost = max_in_flight
        self._agent = Agent.usingEndpointFactory(reactor, _Endpoints(reactor, self.timeout), pool=self._pool)
        self.breaker = CircuitBreaker(failure_threshold, cooldown, reactor.seconds)
        self.clock: Callable[[], float] = time.time
        # lookups waiting for their batch: domain -> waiters
        self._pending: dict[str, list[Deferred[RemoteVerdict | None]]] = {}
        # lookups whose batch is in flight: domain -> waiters
        self._sent: dict[str, list[Deferred[RemoteVerdict | None]]] = {}
        self._pending_bytes = 0
        self._lookup_timer: Any = None
        self._reports: deque[dict[str, Any]] = deque(maxlen=max(1, report_queue))
        self._report_timer: Any = None
        self._posting = False
        self._in_flight: set[Deferred[Any]] = set()
        self._closed = False
        self._warned: set[str] = set()
        # counters (see counters())
        self.lookups = 0
        self.hits = 0
        self.adopted = 0
        self.errors = 0
        self.timeouts = 0
        self.invalid = 0
        self.breaker_open = 0
        self.skipped = 0
        self.batches = 0
        self.reported = 0
        self.dropped = 0

    @classmethod
    def from_config(cls, config: Config, **kwargs: Any) -> RemoteClient | None:
        """The client for ``config``; ``None`` when no service is configured."""
        if not config.remote_url:
            return None
        return cls(config, **kwargs)

    def counters(self) -> dict[str, int]:
        """Every counter, for stats as ``domainstate/remote/<name>``.

        ``lookups`` calls of :meth:`lookup`; ``hits`` of them answered with a verdict;
        ``adopted`` verdicts adopted (through :meth:`adopt`); ``errors`` failed calls
        (timeouts, refused connections, HTTP errors, garbage); ``timeouts`` of them timed
        out; ``invalid`` malformed entries dropped from otherwise valid answers;
        ``breaker_open`` times the circuit breaker opened; ``skipped`` lookups answered
        ``None`` at once (breaker open, too many calls in flight, not a shareable key, client
        closed); ``batches`` lookup requests sent; ``reported`` reports the service accepted
        a batch of; ``dropped`` reports lost (queue overflow, failed POST, closed client).
        """
        return {name: getattr(self, name) for name in _COUNTERS}

    # -------------------------------------------------------------- lookups

    def lookup(self, domain: str) -> Deferred[RemoteVerdict | None]:
        """The service's verdict on ``domain``; fires with ``None`` when there is none.

        Never errbacks. Fires at the latest ``batch_delay + remote_timeout`` seconds later,
        at once when the breaker is open.
        """
        self.lookups += 1
        if self._closed or not is_domain_key(domain) or not self.breaker.allow():
            self.skipped += 1
            return succeed(None)
        d: Deferred[RemoteVerdict | None] = Deferred()
        waiters = self._pending.get(domain) or self._sent.get(domain)
        if waiters is not None:  # already asked: share the answer
            waiters.append(d)
            return d
        if self._pending and self._pending_bytes + len(domain) + 1 > self.max_query:
            self._flush_lookups()
        self._pending[domain] = [d]
        self._pending_bytes += len(domain) + 1
        if len(self._pending) >= self.batch_size:
            self._flush_lookups()
        elif self._lookup_timer is None:
            self._lookup_timer = self._reactor.callLater(self.batch_delay, self._flush_lookups)
        return d

    def _flush_lookups(self) -> None:
        if self._lookup_timer is not None:
            if self._lookup_timer.active():
                self._lookup_timer.cancel()
            self._lookup_timer = None
        batch, self._pending, self._pending_bytes = self._pending, {}, 0
        if not batch:
            return
        if not self.breaker.allow() or len(self._in_flight) >= self.max_in_flight:
            self.skipped += sum(len(w) for w in batch.values())
            _resolve(batch, {})
            return
        self.breaker.started()
        self.batches += 1
        url = self.url + b"?domains=" + ",".join(batch).encode("ascii")
        d = self._call(b"GET", url, None)
        self._sent.update(batch)
        d.addCallback(self._got_lookup, batch)
        d.addErrback(self._failed, "lookup")

        def answer(result: object) -> None:
            for domain, waiters in batch.items():
                if self._sent.get(domain) is waiters:
                    del self._sent[domain]
            _resolve(batch, result or {})

        d.addBoth(answer)

    def _got_lookup(self, body: bytes, batch: Mapping[str, Any]) -> dict[str, RemoteVerdict]:
        verdicts, invalid = parse_lookup_response(body, batch, self.clock())
        self._succeeded()
        self.invalid += invalid
        if invalid:
            self._warn_once("invalid", "domainstate remote service sent %d malformed entries: ignored", invalid)
        self.hits += sum(len(batch[d]) for d in verdicts)
        return verdicts

    # -------------------------------------------------------------- adoption

    def adopt(self, local: DomainStat | None, remote: RemoteVerdict | None, now: float | None = None) -> State | None:
        """:func:`adopt` with this client's config; counts ``adopted``."""
        state = adopt(local, remote, self.config, now)
        if state is not None:
            self.adopted += 1
        return state

    # --------------------------------------------------------------- reports

    def report(self, domain: str, state: State | str, last_seen: float, evidence: str | None = None) -> bool:
        """Queue a local verdict for the service; ``False`` when it cannot be shared.

        Fire-and-forget: reports are POSTed in batches; when the queue is full the oldest
        report is dropped (counted in ``dropped``). ``last_seen`` is clamped to now.
        """
        try:
            state = State(state)
        except ValueError:
            return False
        seen = _number(last_seen)
        if not is_domain_key(domain) or seen is None or seen <= 0:
            return False
        if self._closed:
            self.dropped += 1
            return False
        report: dict[str, Any] = {"domain": domain, "state": state.value, "last_seen": min(seen, self.clock())}
        if evidence:
            text = _CONTROL_RE.sub(" ", str(evidence))[:MAX_EVIDENCE]
            report["evidence"] = text
        if len(self._reports) == self._reports.maxlen:
            self.dropped += 1
        self._reports.append(report)
        if len(self._reports) >= self.batch_size and not self._posting:
            self._flush_reports()
        else:
            self._schedule_reports(self.report_delay)
        return True

    def _schedule_reports(self, delay: float) -> None:
        if self._report_timer is None and not self._closed:
            self._report_timer = self._reactor.callLater(delay, self._flush_reports)

    def _flush_reports(self) -> None:
        if self._report_timer is not None:
            if self._report_timer.active():
                self._report_timer.cancel()
            self._report_timer = None
        if not self._reports or self._posting or self._closed:
            return
        if not self.breaker.allow():
            self._schedule_reports(max(self.breaker.remaining(), self.report_delay))
            return
        self._post([self._reports.popleft() for _ in range(min(self.batch_size, len(self._reports)))])

    def _post(self, batch: list[dict[str, Any]]) -> None:
        self.breaker.started()
        self._posting = True
        body = json.dumps({"reports": batch}, separators=(",", ":")).encode("utf-8")
        d = self._call(b"POST", self.url, body)

        def posted(_: bytes) -> None:
            self._succeeded()
            self.reported += len(batch)

        def failed(failure: Failure) -> None:
            self.dropped += len(batch)
            self._failed(failure, "report")

        def done(_: object) -> None:
            self._posting = False
            if self._reports and not self._closed:
                if len(self._reports) >= self.batch_size:
                    self._flush_reports()
                else:
                    self._schedule_reports(self.report_delay)

        d.addCallbacks(posted, failed)
        d.addBoth(done)
        d.addErrback(lambda f: logger.error("domainstate remote: %s", f.getErrorMessage()))

    # ------------------------------------------------------------------ HTTP

    def _call(self, method: bytes, url: bytes, body: bytes | None) -> Deferred[bytes]:
        headers = Headers(self._headers)
        producer = None
        if body is not None:
            headers.setRawHeaders(b"Content-Type", [b"application/json"])
            producer = _Body(body)
        d = self._agent.request(method, url, headers, producer)
        d.addCallback(self._read)
        timed_out: list[bool] = []

        def on_timeout() -> None:
            timed_out.append(True)
            d.cancel()  # aborts the connection, whatever stage the call is at

        timer = self._reactor.callLater(self.timeout, on_timeout)
        self._in_flight.add(d)

        def finish(result: object) -> object:
            self._in_flight.discard(d)
            if timer.active():
                timer.cancel()
            if timed_out and isinstance(result, Failure):
                return Failure(_Timeout(f"no answer within {self.timeout:g} s"))
            return result

        d.addBoth(finish)
        return d

    def _read(self, response: Any) -> Deferred[bytes]:
        d = _read_capped(response, self.max_body)
        if response.code != 200:

            def status(body: bytes) -> bytes:
                raise _HTTPStatus(response.code, body)

            d.addCallback(status)
        return d

    def _succeeded(self) -> None:
        if self.breaker.success():
            logger.info("domainstate remote service answers again: circuit breaker closed")

    def _failed(self, failure: Failure, what: str) -> None:
        self.errors += 1
        timeout = bool(failure.check(_Timeout))
        if timeout:
            self.timeouts += 1
        elif failure.check(_HTTPStatus) and failure.value.code in (401, 403):
            self._warn_once("auth", "domainstate remote service refused the token: %s", failure.getErrorMessage())
        if what == "report" and failure.check(_HTTPStatus) and failure.value.code == 400:
            self._warn_once("report400", "domainstate remote service rejected reports: %s", failure.getErrorMessage())
        if self.breaker.failure(hard=timeout):
            self.breaker_open += 1
            logger.warning(
                "domainstate remote service failing (%s: %s): not calling it for %g s",
                what,
                failure.getErrorMessage() or failure.type.__name__,
                self.breaker.cooldown,
            )
        else:
            logger.debug("domainstate remote %s failed: %s", what, failure.getErrorMessage())

    def _warn_once(self, key: str, msg: str, *args: object) -> None:
        if key not in self._warned:
            self._warned.add(key)
            logger.warning(msg, *args)
        else:
            logger.debug(msg, *args)

    # -------------------------------------------------------------- closing

    def close(self) -> Deferred[None]:
        """Answer pending lookups with ``None``, send the queued reports (bounded by the
        timeout), and close the connections. Fires when done; never errbacks."""
        if self._closed:
            return succeed(None)
        self._closed = True
        if self._lookup_timer is not None and self._lookup_timer.active():
            self._lookup_timer.cancel()
        self._lookup_timer = None
        pending, self._pending = self._pending, {}
        self.skipped += sum(len(w) for w in pending.values())
        _resolve(pending, {})
        if self._report_timer is not None and self._report_timer.active():
            self._report_timer.cancel()
        self._report_timer = None
        # A last round of reports, as many batches as may be in flight at once.
        while self._reports and self.breaker.allow() and len(self._in_flight) < self.max_in_flight:
            self._post([self._reports.popleft() for _ in range(min(self.batch_size, len(self._reports)))])
        self.dropped += len(self._reports)
        self._reports.clear()
        from twisted.internet.defer import DeferredList

        done: Deferred[Any] = DeferredList([_quiet(d) for d in self._in_flight])
        done.addCallback(lambda _: self._pool.closeCachedConnections())
        done.addErrback(lambda _: None)
        return done


def _quiet(d: Deferred[Any]) -> Deferred[None]:
    """A Deferred firing (with None) when ``d`` fires, leaving ``d``'s own chain alone."""
    out: Deferred[None] = Deferred()

    def fire(result: object) -> object:
        if not out.called:
            out.callback(None)
        return result

    d.addBoth(fire)
    return out


def _resolve(batch: Mapping[str, list[Deferred[RemoteVerdict | None]]], verdicts: object) -> None:
    answers = verdicts if isinstance(verdicts, dict) else {}
    for domain, waiters in batch.items():
        verdict = answers.get(domain)
        for d in waiters:
            if not d.called:
                d.callback(verdict)
