"""The client of the shared domain-state service: batched, bounded, fail-safe.

:class:`RemoteClient` asks the service about domains seen for the first time (batched
``GET`` lookups) and queues the crawler's own verdicts for it (batched ``POST`` reports,
fire-and-forget). Every call has a hard timeout, answers are capped and validated
(:mod:`.protocol`), and a circuit breaker stops calling a failing service; nothing raises
into the crawl.
"""

from __future__ import annotations

import json
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from twisted.internet.defer import Deferred, DeferredList, succeed
from twisted.python.failure import Failure
from twisted.web.client import Agent, HTTPConnectionPool
from twisted.web.http_headers import Headers

from scrapy_domainstate.core.breaker import CircuitBreaker
from scrapy_domainstate.core.config import Config, ConfigError
from scrapy_domainstate.core.record import DomainStat, State
from scrapy_domainstate.fleet.protocol import (
    MAX_BATCH,
    MAX_EVIDENCE,
    finite_number,
    has_control,
    is_domain_key,
    parse_lookup_response,
    without_control,
)
from scrapy_domainstate.fleet.transport import BodyProducer, Endpoints, HTTPStatus, Timeout, api_url, read_capped
from scrapy_domainstate.fleet.verdicts import RemoteVerdict, adopt

__all__ = ["RemoteClient"]

# The name users know (and filter on) since the client lived in scrapy_domainstate/fleet/remote.py.
logger = logging.getLogger(__name__)

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
        if token is not None and (has_control(token) or not token.isascii()):
            raise ConfigError("DOMAINSTATE_REMOTE_TOKEN must be printable ASCII")
        if reactor is None:
            from twisted.internet import reactor as default_reactor

            reactor = default_reactor
        self.config = config
        self.url = api_url(config.remote_url)
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
        self._agent = Agent.usingEndpointFactory(reactor, Endpoints(reactor, self.timeout), pool=self._pool)
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
        seen = finite_number(last_seen)
        if not is_domain_key(domain) or seen is None or seen <= 0:
            return False
        if self._closed:
            self.dropped += 1
            return False
        report: dict[str, Any] = {"domain": domain, "state": state.value, "last_seen": min(seen, self.clock())}
        if evidence:
            text = without_control(str(evidence))[:MAX_EVIDENCE]
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
            producer = BodyProducer(body)
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
                return Failure(Timeout(f"no answer within {self.timeout:g} s"))
            return result

        d.addBoth(finish)
        return d

    def _read(self, response: Any) -> Deferred[bytes]:
        d = read_capped(response, self.max_body)
        if response.code != 200:

            def status(body: bytes) -> bytes:
                raise HTTPStatus(response.code, body)

            d.addCallback(status)
        return d

    def _succeeded(self) -> None:
        if self.breaker.success():
            logger.info("domainstate remote service answers again: circuit breaker closed")

    def _failed(self, failure: Failure, what: str) -> None:
        self.errors += 1
        timeout = bool(failure.check(Timeout))
        status = failure.value.code if isinstance(failure.value, HTTPStatus) else None
        if timeout:
            self.timeouts += 1
        elif status in (401, 403):
            self._warn_once("auth", "domainstate remote service refused the token: %s", failure.getErrorMessage())
        if what == "report" and status == 400:
            self._warn_once("report400", "domainstate remote service rejected reports: %s", failure.getErrorMessage())
        if self.breaker.failure(hard=timeout):
            self.breaker_open += 1
            logger.warning(
                "domainstate remote service failing (%s: %s): not calling it for %g s",
                what,
                failure.getErrorMessage() or type(failure.value).__name__,
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
