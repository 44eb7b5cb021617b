"""The HEAD probe: one per domain, and the requests that wait for its verdict.

:class:`ProbeGate` lets the first request to a new domain do the first-sight work (ask the
shared-state service, send the HEAD probe) while the other requests to that domain wait
for it, each at most ``timeout`` seconds. :func:`probe_request` builds the HEAD from the
request it stands for, and :func:`send_probe` downloads it through the engine and turns the
answer into a verdict with the evidence rules.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import IgnoreRequest
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred

from scrapy_domainstate.core.keys import is_site_root
from scrapy_domainstate.detect import evidence

if TYPE_CHECKING:
    from scrapy.core.engine import ExecutionEngine
    from scrapy.http import Request

    from scrapy_domainstate.detect.classify import Classifier
    from scrapy_domainstate.detect.verdict import Verdict

__all__ = ["META_PROBE", "LeadGate", "ProbeGate", "probe_request", "send_probe"]

#: Request meta key of the plugin's own HEAD probes.
META_PROBE = "domainstate_probe"
#: Request meta a HEAD probe keeps from its request: how the request reaches the site (its
#: proxy, source address, slot, cookie session) applies to its probe too.
_TRANSPORT_META = (
    "proxy",
    "bindaddress",
    "download_slot",
    "cookiejar",
    "dont_merge_cookies",
    "impersonate",
)


class ProbeGate:
    """First-sight work once per domain; concurrent requests wait for it."""

    def __init__(self, timeout: float, on_wait: Callable[[], None], on_timeout: Callable[[], None]) -> None:
        self.timeout = timeout
        self._on_wait = on_wait
        self._on_timeout = on_timeout
        self._waiters: dict[str, list[Deferred[None]]] = {}

    def busy(self, domain: str) -> bool:
        """A first-sight task for ``domain`` is running."""
        return domain in self._waiters

    async def once(self, domain: str, work: Callable[[], Awaitable[None]]) -> None:
        """Run ``work`` if no one is running it for ``domain``, else wait for it to end."""
        waiters = self._waiters.get(domain)
        if waiters is None:
            self._waiters[domain] = []
            try:
                await work()
            finally:
                for waiting in self._waiters.pop(domain, []):
                    if not waiting.called:
                        waiting.callback(None)
            return
        from twisted.internet import reactor

        waiter: Deferred[None] = Deferred()
        waiters.append(waiter)
        self._on_wait()
        waiter.addTimeout(self.timeout, reactor, onTimeoutCancel=self._timed_out)
        await maybe_deferred_to_future(waiter)

    def _timed_out(self, result: Any, timeout: float) -> None:
        self._on_timeout()


class LeadGate:
    """A domain's first request of a crawl goes alone (docs/SPEC.md section 2, "the probe").

    The first request takes the lead (:meth:`take`); the domain's other requests :meth:`wait` (each
    at most ``timeout`` seconds) until its outcome is recorded (:meth:`release`). An
    outcome that opens the domain (anything but a dead signal) lets every request go from then
    on; after a dead signal the next request leads in turn (it confirms the signal or clears
    it), so a dead domain costs two requests and its other pages are never sent. The canary of
    an ``antibot-hard`` domain leads the same way. State for one crawl (one visit).
    """

    def __init__(self, timeout: float, on_wait: Callable[[], None], on_timeout: Callable[[], None]) -> None:
        self.timeout = timeout
        self._on_wait = on_wait
        self._on_timeout = on_timeout
        self._open: set[str] = set()
        self._busy: dict[str, list[Deferred[None]]] = {}

    def is_open(self, domain: str) -> bool:
        return domain in self._open

    def busy(self, domain: str) -> bool:
        """A lead of ``domain`` is in flight."""
        return domain in self._busy

    def take(self, domain: str) -> None:
        self._busy.setdefault(domain, [])

    def open(self, domain: str) -> None:
        """Let every request of ``domain`` go, without a lead (a domain decided otherwise)."""
        self._open.add(domain)

    def release(self, domain: str, opened: bool) -> None:
        """The lead's outcome is recorded: wake the requests waiting for it."""
        if opened:
            self._open.add(domain)
        for waiting in self._busy.pop(domain, ()):
            if not waiting.called:
                waiting.callback(None)

    async def wait(self, domain: str) -> None:
        """Wait for the lead's outcome; when it takes longer than ``timeout``, the domain opens
        (its requests go as decided, none waits for that lead again)."""
        from twisted.internet import reactor

        waiter: Deferred[None] = Deferred()
        self._busy.setdefault(domain, []).append(waiter)
        self._on_wait()

        def timed_out(result: Any, timeout: float) -> None:
            self._on_timeout()
            self.release(domain, True)

        waiter.addTimeout(self.timeout, reactor, onTimeoutCancel=timed_out)
        await maybe_deferred_to_future(waiter)

    def close(self) -> None:
        for domain in list(self._busy):
            self.release(domain, True)


def probe_request(request: Request, timeout: float) -> Request:
    """The HEAD probe for ``request``: no retry, no redirect, every status, not robots-checked."""
    return request.replace(
        method="HEAD",
        body=b"",
        dont_filter=True,
        callback=None,
        errback=None,
        meta={
            **{k: request.meta[k] for k in _TRANSPORT_META if k in request.meta},
            META_PROBE: True,
            "dont_retry": True,
            "dont_redirect": True,
            "handle_httpstatus_all": True,
            "download_timeout": timeout,
            "dont_obey_robotstxt": True,
        },
    )


async def send_probe(engine: ExecutionEngine, probe: Request, classifier: Classifier) -> Verdict | None:
    """Download the probe; its verdict, or ``None`` when it was dropped (``IgnoreRequest``)."""
    try:
        response = await engine.download_async(probe)
    except IgnoreRequest:
        return None
    except Exception as exc:
        return classifier.failure(exc)
    # From Scrapy's HTTP cache: not evidence, but stamped so the probe is not repeated.
    cached = "cached" in response.flags
    antibot = None if cached else classifier.antibot(response.status, response.headers, b"", probe.url)
    return evidence.probe_verdict(response.status, antibot, is_site_root(probe.url), cached)
