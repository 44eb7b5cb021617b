"""Stats, signals and log lines of the plugin, in one place.

Stats are ``domainstate/...`` keys (per-domain keys only with
``DOMAINSTATE_STATS_PER_DOMAIN``). The per-request counts are kept here and added to
Scrapy's stats by :meth:`Telemetry.publish` (at each store flush and at close, so the stats
read at close are exact): an increment of Scrapy 2.19's stats collector costs several
microseconds, a local one a few tens of nanoseconds. Logs go to the ``scrapy_domainstate`` logger with
``extra={"crawler": ...}``: DEBUG per request, INFO per state change, WARNING once when the
store degrades, ERROR when the plugin cannot start.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from pydispatch import dispatcher

from scrapy_domainstate import signals
from scrapy_domainstate.core.policy import NOT_SCANNED, Decision
from scrapy_domainstate.core.record import Outcome

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Request

    from scrapy_domainstate.core.policy import Transition
    from scrapy_domainstate.core.record import DomainStat, RecentEntry
    from scrapy_domainstate.tools.crawllog import CrawlSummary

__all__ = ["Telemetry", "logger"]

logger = logging.getLogger(__name__)

#: Stats keys, formatted once (an f-string of an Enum per request adds up).
_DECISION_KEYS = {d: f"domainstate/decision/{d.value}" for d in Decision}
_OUTCOME_KEYS = {o: f"domainstate/outcome/{o.value}" for o in Outcome}
_METHOD_KEYS = {m: f"domainstate/method/{m}" for m in ("fetch", "tab", "head", "skip", "cache")}
#: Store counters exported at close when non-zero.
_STORE_COUNTERS = (
    "corrupt_records",
    "evicted",
    "errors",
    "dropped",
    "short_circuits",
    "conflicts",
    "slow_calls",
    "emptied",
)


class Telemetry:
    def __init__(self, crawler: Crawler, per_domain: bool) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.per_domain = per_domain
        self._extra = {"crawler": crawler}
        self._warned_store = False
        # Scrapy filters log levels in its handler, not the logger: a disabled
        # DEBUG line still costs a LogRecord. Decide once.
        level = crawler.settings.get("LOG_LEVEL", "DEBUG")
        self.debug_on = crawler.settings.getbool("LOG_ENABLED", True) and level in ("DEBUG", logging.DEBUG)
        self._sender_id = id(crawler.signals.sender)
        self._any_id = id(dispatcher.Any)
        #: Counts not yet added to Scrapy's stats (see :meth:`publish`).
        self._counts: dict[str, int] = {}

    def _add(self, key: str) -> None:
        counts = self._counts
        counts[key] = counts.get(key, 0) + 1

    def publish(self) -> None:
        """Add the counts kept since the last call to Scrapy's stats."""
        if not self._counts:
            return
        counts, self._counts = self._counts, {}
        inc = self.stats.inc_value
        for key, n in counts.items():
            inc(key, n)

    def inc(self, key: str) -> None:
        self._add(f"domainstate/{key}")

    def debug(self, msg: str, *args: Any) -> None:
        if self.debug_on:
            logger.debug(msg, *args, extra=self._extra)

    # ------------------------------------------------------------ requests

    def count(self, domain: str, method: str) -> None:
        """``method/{method}`` counts what was sent (or skipped, or served from the cache):
        a routed request is counted when its response or failure comes back."""
        self._add(_METHOD_KEYS.get(method) or f"domainstate/method/{method}")
        if self.per_domain:
            self._add(f"domainstate/domain/{domain}/{method}")

    def decision(self, decision: Decision, repeat: str | None = None) -> None:
        """One decided request: ``decision/{decision}``; a request decided again after a
        retry or a redirect counts once more as ``repeat/{retry,redirect}`` instead."""
        if repeat:
            self._add(f"domainstate/repeat/{repeat}")
        else:
            self._add(_DECISION_KEYS[decision])

    def skipped(self, domain: str, reason: str) -> None:
        """A skip: ``method/skip`` and ``skip/{reason}`` (a state, or ``dead-url``)."""
        self.count(domain, "skip")
        self._add(f"domainstate/skip/{reason}")

    def started(self, message: str, args: tuple[Any, ...]) -> None:
        """The start-up line (see :mod:`._startup`)."""
        logger.info(message, *args, extra=self._extra)

    def summary(self, summary: CrawlSummary) -> None:
        """The close summary: one INFO line (see :mod:`.crawllog`)."""
        message, args = summary.log_message()
        logger.info(message, *args, extra=self._extra)

    def seen_capped(self, cap: int) -> None:
        """The crawl met more domains than the close tally keeps (DOMAINSTATE_MAX_DOMAINS)."""
        self.stats.set_value("domainstate/seen_capped", cap)
        logger.info(
            "scrapy-domainstate: this crawl has met %d domains (DOMAINSTATE_MAX_DOMAINS): "
            "state_at_close/{state} counts those, not the ones met after; decisions and records "
            "are not affected",
            cap,
            extra=self._extra,
        )

    def exit_status_zero(self) -> None:
        logger.warning(
            "scrapy-domainstate: the store did not open, yet `scrapy crawl` will exit with status 0: Scrapy "
            "sets a non-zero status only when a crawl fails to start, and the plugin opens its store there "
            'only through its item pipeline (ITEM_PIPELINES = {"scrapy_domainstate.DomainStatePipeline": 0}, '
            "which the add-on enables)",
            extra=self._extra,
        )

    # ------------------------------------------------------------ outcomes

    def recorded(self, domain: str, entry: RecentEntry, stat: DomainStat, request: Request | None) -> None:
        """An outcome was recorded: its stat (a friendly domain's page not scanned for contacts:
        ``not_scanned`` too, one of the ``outcome/navigation`` pages), and ``outcome_recorded``
        when someone listens."""
        self._add(_OUTCOME_KEYS[entry.outcome])
        if entry.error_class == NOT_SCANNED:
            self._add("domainstate/not_scanned")
        if self._listened(signals.outcome_recorded):
            self.crawler.signals.send_catch_log(
                signals.outcome_recorded,
                domain=domain,
                entry=entry,
                stat=stat,
                request=request,
                spider=self.crawler.spider,
            )

    def changed(self, domain: str, transition: Transition, stat: DomainStat, request: Request | None) -> None:
        """A state changed: its stat, an INFO line and ``state_changed``."""
        self._add(f"domainstate/transition/{transition.old}/{transition.new}")
        logger.info(
            "Domain %s: %s -> %s (%s)",
            domain,
            transition.old,
            transition.new,
            transition.reason,
            extra=self._extra,
        )
        self.crawler.signals.send_catch_log(
            signals.state_changed, transition=transition, stat=stat, request=request, spider=self.crawler.spider
        )

    def _listened(self, signal: object) -> bool:
        """Whether a receiver is connected for ``signal`` (what ``send_catch_log`` would call).

        Reads pydispatch's connection table (``connections[id(sender)][signal]``, the
        table ``getAllReceivers`` walks) in a few dictionary lookups instead of running
        that generator for every outcome. Dead weak references are removed from the
        table by pydispatch itself when their receiver goes.
        """
        connections = dispatcher.connections
        # (both senders written out: no tuple and loop per outcome)
        table = connections.get(self._sender_id)
        if table and (table.get(signal) or table.get(dispatcher.Any)):
            return True
        table = connections.get(self._any_id)
        return bool(table and (table.get(signal) or table.get(dispatcher.Any)))

    # ------------------------------------------------------------ the store and the fleet

    def store_failed(self, what: str) -> None:
        """A store call failed: counted, and one WARNING per crawl that says what the crawl does
        meanwhile, for the kind of call that failed first (a store that refuses writes, such as
        a Redis at ``maxmemory``, still serves decisions)."""
        self._add("domainstate/store_error")
        self._add(f"domainstate/store_error/{what}")
        if self._warned_store:
            return
        self._warned_store = True
        consequence = (
            "decisions fall back to 'fetch' and outcomes stay buffered until it recovers"
            if what == "read"
            else "outcomes stay buffered until it recovers; decisions read it while it answers"
        )
        logger.warning("scrapy-domainstate: the store failed (%s); %s", what, consequence, extra=self._extra)

    def refused(self, what: str, part: str, exc: Exception) -> None:
        self.stats.set_value(f"domainstate/open_error/{part}", 1)
        logger.error(
            "scrapy-domainstate: %s: %s. Closing the spider before its first request rather than crawling "
            "without the domains' memory; fix it, or set DOMAINSTATE_ENABLED=False to crawl without the plugin",
            what,
            str(exc).rstrip("."),
            extra=self._extra,
        )

    def store_counters(self, store: object) -> None:
        for name in _STORE_COUNTERS:
            value = getattr(store, name, 0)
            if isinstance(value, int) and value:
                self.stats.set_value(f"domainstate/store/{name}", value)

    def remote_counters(self, counters: dict[str, int]) -> None:
        for name, value in counters.items():
            if value:
                self.stats.set_value(f"domainstate/remote/{name}", value)

    def adopted(self, domain: str, state: object, verdict: Any) -> None:
        self._add(f"domainstate/remote/adopted/{state}")
        logger.info(
            "Domain %s: adopted %s from the shared-state service (consensus %.2f of %d reporters)",
            domain,
            state,
            verdict.consensus,
            verdict.reporters,
            extra=self._extra,
        )
