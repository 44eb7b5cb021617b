"""The per-crawler runtime: built and wired here, its flows in their own modules.

One :class:`DomainStateManager` per crawler (``DomainStateManager.for_crawler``, also
``crawler.domainstate``). This module builds it (the config, the policy, the classifier,
the store and the helpers) and wires its lifecycle once (open at ``spider_opened``, flush
on a timer, flush and close at ``spider_closed``, whichever component built it); the
inspection the shell and ``explain`` use lives here too. What it does per request lives in
three flows it is made of:

- :mod:`scrapy_domainstate.runtime.requests`: a request before it is sent;
- :mod:`scrapy_domainstate.runtime.outcomes`: a response or failure after it, recorded;
- :mod:`scrapy_domainstate.runtime.manners`: politeness, pauses and the blocked-crawl alarm.

The components (``middleware``, ``spidermw``, ``pipeline``, ``extension``) call the flows'
methods on the manager.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from scrapy import signals as scrapy_signals
from scrapy.exceptions import CloseSpider, NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import task

from scrapy_domainstate.core.config import Config, ConfigError, log_unknown_settings
from scrapy_domainstate.core.keys import domain_key, is_site_root, purpose_key
from scrapy_domainstate.core.policy import Policy
from scrapy_domainstate.detect.classify import Classifier
from scrapy_domainstate.detect.verdict import Verdict
from scrapy_domainstate.detect.wallrules import spider_settings
from scrapy_domainstate.runtime import registry as _registry
from scrapy_domainstate.runtime.alarm import BlockedAlarm
from scrapy_domainstate.runtime.browser import BrowserRoute, wake_shell_engine
from scrapy_domainstate.runtime.deadurls import DeadUrls
from scrapy_domainstate.runtime.failures import quiet_startup_failures
from scrapy_domainstate.runtime.polite import HostPauses, Politeness
from scrapy_domainstate.runtime.probes import LeadGate, ProbeGate
from scrapy_domainstate.runtime.sendgate import SendGate
from scrapy_domainstate.runtime.sources import OutcomeSource
from scrapy_domainstate.runtime.startup import startup_message
from scrapy_domainstate.runtime.switch import off_reason, report_off
from scrapy_domainstate.runtime.telemetry import Telemetry
from scrapy_domainstate.store import DomainStore, create_store
from scrapy_domainstate.tools.crawllog import CrawlSummary, append_crawl
from scrapy_domainstate.tools.explain import explain_lines, response_lines
from scrapy_domainstate.tools.showtext import look, show_lines

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.statscollectors import StatsCollector
    from twisted.internet.defer import Deferred

from scrapy_domainstate.runtime.requests import RequestFlow

logger = logging.getLogger(__name__)


class DomainStateManager(RequestFlow):
    """The per-crawler runtime (see the module's docstring)."""

    def __init__(self, crawler: Crawler, config: Config) -> None:
        self.crawler = crawler
        self.config = config
        self.policy = Policy(config)
        self.classifier = Classifier(config)
        self.store: DomainStore = create_store(config, self.policy)
        #: The store reads over the network (the Redis store's read cache): a request whose
        #: records are not cached waits for them (:meth:`DomainStore.prefetch`), not the reactor.
        self._prefetch = type(self.store).prefetch is not DomainStore.prefetch
        self.outcomes = OutcomeSource(config)
        #: ``items`` or a callable's path: this spider's usefulness lives in its own records.
        self.purpose = self.outcomes.purpose
        self.telemetry = Telemetry(crawler, config.stats_per_domain)
        self.probes = ProbeGate(
            config.probe_timeout,
            on_wait=lambda: self.telemetry.inc("probe/waited"),
            on_timeout=lambda: self.telemetry.inc("probe/wait_timeout"),
        )
        self.clock: Callable[[], float] = time.time
        self.opened = False
        self._open_failed: str | None = None
        self.remote: Any = None
        self._timer: task.LoopingCall | None = None
        self._froze = False
        self._cert_verdicts: dict[str, Verdict | None] = {}
        #: the domains this crawl decided, for ``state_at_close/{state}``: at most
        #: DOMAINSTATE_MAX_DOMAINS (the store keeps no more; see :meth:`_see`)
        self._seen: set[str] = set()
        self._seen_capped = False
        #: antibot-hard domains whose canary (one plain fetch per crawl) was sent
        self._canaries: set[str] = set()
        self.leads = LeadGate(
            config.probe_timeout,
            on_wait=lambda: self.telemetry.inc("probe/waited"),
            on_timeout=lambda: self.telemetry.inc("probe/wait_timeout"),
        )
        #: domains this crawler asked the remote service about (first sight without a probe)
        self._asked: set[str] = set()
        self.browser = BrowserRoute.from_crawler(crawler, config, self.classifier)
        self.polite = Politeness(config, crawler, lambda: self.clock())  # noqa: PLW0108 (tests swap the clock)
        self.pauses = HostPauses(config.pause_after)
        self.alarm = BlockedAlarm(config.blocked_share, config.blocked_window)
        self.dead_urls = DeadUrls(self.store, config.url_dead_ttl, self.telemetry.store_failed)
        self.gate = SendGate()
        #: ``request_left_downloader`` is connected when the gate is first used: Scrapy sends it
        #: for every request, and a receiver costs each of them a few microseconds.
        self._left_connected = False
        #: Set by :class:`~scrapy_domainstate.middleware.DomainStateDownloadedMiddleware`: it sees
        #: each download as it leaves the downloader, in place of the two Scrapy signals (after
        #: Scrapy's pause in its exception path: a lead's failure is recorded before it is released).
        self.downloaded_middleware = False
        #: Set by :class:`~scrapy_domainstate.middleware.DomainStateMiddleware`.
        self.deciding = False
        self._warned_downloaded = False
        #: Set by :class:`~scrapy_domainstate.pipeline.DomainStatePipeline`: a store that cannot
        #: open fails the crawl's start (exit status 1).
        self.exit_status_on_failure = False
        self._opened_at = 0.0

    # ------------------------------------------------------------ lifecycle

    @classmethod
    def for_crawler(cls, crawler: Crawler) -> DomainStateManager:
        """The crawler's manager, built (and its lifecycle wired) on first use.

        ``NotConfigured`` when the plugin is off; :class:`ConfigError` for a bad setting.
        """
        manager = getattr(crawler, "domainstate", None)
        if manager is None:
            quiet_startup_failures(crawler.settings)
            try:
                config = Config.from_settings(spider_settings(crawler.settings, getattr(crawler, "spider", None)))
            except ConfigError as exc:
                # A bad value must stop the crawl at start-up, not silently disable it.
                raise ConfigError(f"scrapy-domainstate: {exc}") from exc
            log_unknown_settings(crawler.settings, crawler)
            reason = off_reason(config, getattr(crawler, "spider", None))
            if reason is not None:
                report_off(crawler, reason)  # one INFO line per crawler
                raise NotConfigured  # bare: Scrapy logs a NotConfigured message as a WARNING
            manager = cls(crawler, config)
            # Shared by the components, and public (``scrapy shell``, user code).
            crawler.domainstate = manager  # type: ignore[attr-defined]
            # Once per crawler, whichever component comes first: a middleware listed
            # alone still opens, flushes and closes the store.
            crawler.signals.connect(manager.spider_opened, signal=scrapy_signals.spider_opened)
            crawler.signals.connect(manager.spider_closed, signal=scrapy_signals.spider_closed)
            if config.politeness:
                # (sent before the slot sends its next request: a middleware sees it too late)
                crawler.signals.connect(manager.response_downloaded, signal=scrapy_signals.response_downloaded)
        return manager

    @property
    def stats(self) -> StatsCollector:
        """The crawler's stats, with the counts this plugin keeps locally added first."""
        self.telemetry.publish()
        return self.crawler.stats

    def spider_opened(self, spider: Any = None) -> None:
        # (every component is built by now: without the downloaded middleware, Scrapy's signals)
        if self.deciding and not self.downloaded_middleware and not self._warned_downloaded:
            self._warned_downloaded = True
            logger.warning(
                "scrapy-domainstate: DOWNLOADER_MIDDLEWARES lists DomainStateMiddleware but not "
                "DomainStateDownloadedMiddleware (README, Enable: the manual equivalent); Scrapy's "
                "request_left_downloader signal stands in for it, and a domain's first request that "
                "fails lets its other requests go before its failure is recorded",
                extra={"crawler": self.crawler},
            )
        self.open()
        wake_shell_engine(self.crawler)  # scrapy shell: its first fetch() can open the spider too early
        # Start-up is over: what exists now (Scrapy, Twisted, the settings, the suffix
        # list, ...) lives as long as the crawl. Frozen, the garbage collector no longer
        # walks it on every full collection of the crawl (O(1); undone at close, so
        # nothing frozen outlives the crawl uncollected).
        gc.freeze()
        self._froze = True
        interval = self.config.flush_interval
        if interval > 0 and self._timer is None:
            self._timer = task.LoopingCall(self.flush)
            self._timer.start(interval, now=False)

    async def spider_closed(self, spider: Any = None, reason: str = "") -> None:
        if self._timer is not None and self._timer.running:
            self._timer.stop()
        self._timer = None
        self.gate.close()
        self.leads.close()
        if self._open_failed is not None:
            # A failed start closes the spider as "shutdown": say why (CoreStats set it first).
            self.stats.set_value("finish_reason", self._open_failed)
            if not self.exit_status_on_failure:
                self.telemetry.exit_status_zero()
        done = self.close()
        if done is not None:  # the remote client drains its reports
            await maybe_deferred_to_future(done)

    def spider_enabled(self) -> bool:
        spider = self.crawler.spider
        return spider is None or getattr(spider, "domainstate_enabled", True)

    def open(self) -> None:
        """Open the store and the remote client (``spider_opened``).

        When either cannot start (store unreachable, bad ``DOMAINSTATE_REMOTE_URL``), log why and
        raise :class:`~scrapy.exceptions.CloseSpider` (reason ``domainstate_unavailable``):
        Scrapy then closes the spider before its first request instead of crawling on without
        the domains' memory.
        """
        if self.opened:
            return
        if self._open_failed is not None:
            raise CloseSpider(self._open_failed)
        domain_key("example.com")  # load the bundled suffix list now, not on the first request
        self.policy.crawl_started = self.clock()  # (an earlier visit's dead holds end: Policy._ended)
        self.classifier.prepare()  # and the scan databases
        try:
            self.store.open()
        except Exception as exc:
            self._refuse(f"cannot open the store ({self.store.describe()})", "store", exc)
        if self.config.remote_url:
            from scrapy_domainstate.fleet.remote import RemoteClient

            try:
                self.remote = RemoteClient.from_config(self.config)
            except Exception as exc:
                with contextlib.suppress(Exception):
                    self.store.close()
                self._refuse("cannot use the shared-state service", "remote", exc)
        # The store's commits and fsyncs leave the reactor thread (in a crawl; the store's own
        # API used outside one stays synchronous).
        from twisted.internet import reactor

        self.store.write_behind(reactor.callFromThread)  # type: ignore[attr-defined]
        self.opened = True
        self._opened_at = self.clock()
        _registry.register(self)
        self.telemetry.started(
            *startup_message(self.config, self.store.describe(), self.browser, self.classifier.engine)
        )

    def _refuse(self, what: str, part: str, exc: Exception) -> NoReturn:
        self._open_failed = "domainstate_unavailable"
        self.telemetry.refused(what, part, exc)
        raise CloseSpider(self._open_failed) from exc

    def close(self) -> Deferred[None] | None:
        """Flush and close the store; returns a Deferred while the remote client drains."""
        if not self.opened:
            return None
        self._save_manners()
        self.flush()
        self._state_stats()
        self.telemetry.store_counters(self.store)
        self._summarize()
        try:
            self.store.close()
        except Exception:
            self.telemetry.store_failed("close")
        self.telemetry.publish()
        self.opened = False
        if self._froze:
            self._froze = False
            gc.unfreeze()
        if self.remote is None:
            return None
        remote, self.remote = self.remote, None
        done: Deferred[None] = remote.close()
        # after close(): its last round of reports is counted too
        done.addBoth(lambda _: self.telemetry.remote_counters(remote.counters()))
        return done

    def flush(self) -> None:
        try:
            self.store.flush()
        except Exception:
            self.telemetry.store_failed("flush")
        self.telemetry.publish()

    def _summarize(self) -> None:
        """The close summary: logged, and kept in the store's crawl log for the report."""
        self.telemetry.publish()  # the counts kept since the last flush, into Scrapy's stats
        spider = self.crawler.spider
        summary = CrawlSummary.from_stats(
            self.stats.get_stats(),
            started=self._opened_at,
            finished=self.clock(),
            spider=str(getattr(spider, "name", "") or ""),
            store=self.store.describe(),
        )
        self.telemetry.summary(summary)
        try:
            append_crawl(self.store, summary)
        except Exception:
            self.telemetry.store_failed("crawl_log")

    def _see(self, domain: str) -> None:
        """Remember a domain for the close tally, up to DOMAINSTATE_MAX_DOMAINS of them.

        Past the cap, new domains are decided and recorded as ever; only the tally
        leaves them out (said once at INFO and in ``domainstate/seen_capped``). The store
        keeps no more records than the cap either: a crawl past it evicts its oldest.
        """
        cap = self.config.max_domains
        if len(self._seen) < cap:
            self._seen.add(domain)
        elif not self._seen_capped:
            self._seen_capped = True
            self.telemetry.seen_capped(cap)

    def _state_stats(self) -> None:
        now = self.clock()
        purpose, store = self.purpose, self.store
        for domain in self._seen:
            try:
                if purpose is None:
                    state = store.current(domain, now).state
                else:  # what the site is, and what it is worth to this spider
                    worth = store.current(purpose_key(domain, purpose), now).state
                    state = Policy.state_for_purpose(store.current(domain, now).state, worth)
            except Exception:
                self.telemetry.store_failed("read")
                return
            self.telemetry.inc(f"state_at_close/{state}")

    # ------------------------------------------------------------ inspection

    def inspect(self, url: str) -> Inspection:
        """The record and the decision for a URL (for ``scrapy shell``): a dict that prints as
        ``scrapy domainstate show`` does."""
        domain = self.key(url)
        now = self.clock()
        shown = look(self.store, url, domain, now, self.browser.enabled)
        return Inspection(
            {
                "domain": domain,
                "state": shown.state.value,
                "decision": shown.decision.value,
                "record": shown.current,
            },
            show_lines(shown),
        )

    def explain(self, target: str | Response) -> Inspection:
        """Why a URL's domain is in its state and what would change it (``scrapy domainstate
        explain URL``); given a response (``fetch()`` in ``scrapy shell``), the classifier's
        verdict on it and the rule that fired (``explain URL --response FILE``)."""
        if not isinstance(target, str):  # a Scrapy response
            verdict = self.classifier.response(
                target.status, target.headers, target.body, target.url, is_site_root(target.url)
            )
            lines = response_lines(self.classifier, target.url, target.status, target.headers, target.body)
            return Inspection(
                {"url": target.url, "outcome": verdict.outcome.value, "evidence": verdict.error_class}, lines
            )
        domain = self.key(target)
        shown = look(self.store, target, domain, self.clock(), self.browser.enabled)
        return Inspection(
            {"domain": domain, "state": shown.state.value, "decision": shown.decision.value, "record": shown.current},
            explain_lines(shown, self.config, self.classifier),
        )


class Inspection(dict[str, Any]):
    """``domainstate(url)`` in ``scrapy shell``: the keys ``domain``, ``state``, ``decision`` and
    ``record``; shown (its ``repr``) as ``scrapy domainstate show`` prints the domain."""

    def __init__(self, values: dict[str, Any], lines: list[str]) -> None:
        super().__init__(values)
        self.lines = lines

    def __repr__(self) -> str:
        return "\n".join(self.lines)
