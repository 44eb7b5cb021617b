"""The manners flow: being polite to each site while the crawl runs.

:class:`MannersFlow` (a part of :class:`~scrapy_domainstate.runtime.lifecycle.DomainStateManager`)
slows a download slot on 429/503 (``response_downloaded``), pauses a host that keeps timing
out and drains its queue, raises the blocked-crawl alarm, and keeps each domain's learned
delay for the next crawl (:mod:`scrapy_domainstate.runtime.polite`,
:mod:`scrapy_domainstate.runtime.alarm`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import IgnoreRequest
from scrapy.utils.defer import deferred_from_coro

from scrapy_domainstate import signals
from scrapy_domainstate.core.keys import host_of
from scrapy_domainstate.core.record import DomainStat, Method, Outcome, State
from scrapy_domainstate.detect.verdict import Verdict
from scrapy_domainstate.runtime.meta import (
    META_NO_RETRY,
    META_OUT,
)
from scrapy_domainstate.runtime.parts import Parts
from scrapy_domainstate.runtime.polite import polite_key

if TYPE_CHECKING:
    from scrapy.http import Request, Response


logger = logging.getLogger(__name__)


class MannersFlow(Parts):
    """The manners flow of a :class:`DomainStateManager`."""

    # ------------------------------------------------------------ manners

    def response_downloaded(self, response: Response, request: Request, spider: Any = None) -> None:
        """Every downloaded response, retried ones too: a 429/503 slows its slot at once."""
        out = request.meta.get(META_OUT)
        if self.polite.downloaded(response, request, out.get("domain") if out else None):
            hostname = host_of(request.url)
            # Not retried (RetryMiddleware reads it after this): its retry would be skipped as
            # paused, and the answer that paused the host never reach the record.
            meta = request.meta
            if not meta.get("dont_retry"):
                meta["dont_retry"] = meta[META_NO_RETRY] = True
            if self.pauses.pause(hostname):
                self._drain(request, hostname)
                self.telemetry.inc("paused_hosts")
                logger.warning(
                    "scrapy-domainstate: pausing %s for the rest of this crawl: it asks for Retry-After %s, "
                    "more than DOMAINSTATE_POLITE_MAX_DELAY (%g s); the next crawl starts it at that delay",
                    hostname,
                    (response.headers.get(b"Retry-After") or b"").decode("latin-1", "replace"),
                    self.config.polite_max_delay,
                    extra={"crawler": self.crawler},
                )

    def _manners(self, request: Request, domain: str, method: Method, verdict: Verdict) -> None:
        """After a response: the slot back up to its floor, the host's failure streak broken,
        the blocked-crawl alarm fed with a plain response."""
        self.polite.enforce(request)
        if self.pauses.tracking:
            self.pauses.succeeded(host_of(request.url))
        if method is not Method.TAB and self.alarm.observe(domain, verdict.outcome is Outcome.ANTIBOT):
            self._blocked()

    def _blocked(self) -> None:
        walls, responses, domains = self.alarm.figures()
        self.telemetry.inc("blocked")
        logger.warning(
            "scrapy-domainstate: this crawl looks blocked: %d of the last %d responses (from %d domains) "
            "are anti-bot walls. The cause is likely the crawler (its IP or its fingerprint), not the "
            "sites: new anti-bot verdicts are held as suspect (not recorded) until the share falls "
            "below half; check the proxy or the browser%s",
            walls,
            responses,
            domains,
            "; closing the spider (DOMAINSTATE_BLOCKED_CLOSE)" if self.config.blocked_close else "",
            extra={"crawler": self.crawler},
        )
        self.crawler.signals.send_catch_log(
            signal=signals.crawl_blocked,
            walls=walls,
            responses=responses,
            domains=domains,
            spider=getattr(self.crawler, "spider", None),
        )
        if self.config.blocked_close and self._engine_running():
            deferred_from_coro(self.crawler.engine.close_spider_async(reason="domainstate_blocked"))

    def _paused(self, hostname: str, domain: str, request: Request, verdict: Verdict) -> None:
        """A host that keeps timing out is paused for the crawl; the pause is recorded as the
        visit's dead verdict (the policy holds it for the visit, and confirms ``dead`` only on a
        host that never answered, after three paused visits)."""
        self.telemetry.inc("paused_hosts")
        logger.warning(
            "scrapy-domainstate: pausing %s for the rest of this crawl: %d %s failures in a row; "
            "its queued requests are not sent (domainstate/skip/paused), it is tried again next crawl",
            hostname,
            self.pauses.after,
            verdict.error_class,
            extra={"crawler": self.crawler},
        )
        self.record(domain, Method.FETCH, Verdict(Outcome.DEAD, None, f"paused:{verdict.error_class}"), request)

    def _drain(self, request: Request, hostname: str) -> None:
        """Drop the requests of a paused host that wait in its download slot's queue (decided
        already: a slot with a delay queues them there)."""
        downloader = getattr(self.crawler.engine, "downloader", None) if self._engine_running() else None
        slot = None if downloader is None else downloader.slots.get(downloader.get_slot_key(request))
        if slot is None:
            return
        for queued in [q for q in slot.queue if host_of(q[0].url) == hostname]:
            slot.queue.remove(queued)
            waiting, deferred = queued
            out = waiting.meta.get(META_OUT)
            if out:
                self._mark(waiting, out["domain"], State(out["state"]), out.get("expires_at"), "skip")
                self.telemetry.skipped(out["domain"], "paused")
            deferred.errback(
                IgnoreRequest(f"scrapy-domainstate: skipping {waiting.url}: its host is paused for this crawl")
            )

    def _polite_record(self, domain: str) -> DomainStat | None:
        try:
            return self.store.get(polite_key(domain))
        except Exception:
            self.telemetry.store_failed("read")
            return None

    def _save_manners(self) -> None:
        """At close: the learned delays, for the next crawl (and the fleet)."""
        keep, drop = self.polite.records(self.clock())
        try:
            if keep:
                self.store.put_many(keep)
            for key in drop:
                self.store.delete(key)
        except Exception:
            self.telemetry.store_failed("write")
