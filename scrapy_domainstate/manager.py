"""The per-crawler runtime behind the middlewares and the extension: lifecycle and glue.

One :class:`DomainStateManager` per crawler (``DomainStateManager.for_crawler``, also
``crawler.domainstate``). It owns the config, the policy, the classifier and the store,
wires the lifecycle once (open at ``spider_opened``, flush on a timer, flush and close at
``spider_closed``, whichever component built it), and glues the pure parts to Scrapy:

- :mod:`._routing`: a request's facts and its domain's decision -> where it goes;
- :mod:`._browser`: whether a browser handler answers the browser meta, what it rendered,
  and the meta of a render (the challenge wait, no HTTP cache);
- :mod:`._evidence`: what a response, a failure or a HEAD probe means for the record;
- :mod:`._probes`: one HEAD probe per new domain, the other requests waiting for it;
- :mod:`._adoption`: the first sight of a domain with a shared-state service;
- :mod:`._deadurls`: the URLs that answered 404/410 off the root;
- :mod:`._outcomes`: whether a fetched page was useful (contacts, items or a callable);
- :mod:`._sendgate`: a request decided when its download slot has room, not on entry;
- :mod:`._telemetry`: stats, signals and log lines (:mod:`._startup`, :mod:`.crawllog`);
- :mod:`._registry`: the running plugins, read by :mod:`.shell`.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from scrapy import signals as scrapy_signals
from scrapy.exceptions import CloseSpider, IgnoreRequest, NotConfigured
from scrapy.utils.asyncio import call_later
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from twisted.internet import task

from . import _evidence as evidence
from . import _registry, signals
from . import _routing as routing
from ._adoption import adopt
from ._alarm import BlockedAlarm
from ._browser import BrowserRoute, is_launch_failure, wake_shell_engine
from ._deadurls import DeadUrls
from ._failures import quiet_startup_failures
from ._outcomes import CALLBACK, META_OUTCOME, OutcomeSource
from ._polite import HostPauses, Politeness, polite_key
from ._probes import META_PROBE, LeadGate, ProbeGate, probe_request, send_probe
from ._sendgate import SendGate
from ._showtext import look, show_lines
from ._startup import startup_message
from ._switch import off_reason, report_off
from ._telemetry import Telemetry
from .classify import Classifier, Verdict
from .config import Config, ConfigError, log_unknown_settings
from .crawllog import CrawlSummary, append_crawl
from .keys import domain_key, host_fact_key, host_of, is_site_root, purpose_key, request_keys
from .policy import Decision, Policy, Transition
from .record import DomainStat, Method, Outcome, RecentEntry, State
from .store import DomainStore, create_store

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Request, Response
    from scrapy.statscollectors import StatsCollector
    from twisted.internet.defer import Deferred

__all__ = ["META_FORCE", "META_OUT", "META_OUTCOME", "META_PROBE", "DomainStateManager"]

#: Request meta key (in): fetch even when the plugin would skip.
META_FORCE = "domainstate_force"
#: Request/response meta key (out): ``{"domain", "state", "expires_at", "method"}``.
META_OUT = "domainstate"
#: Internal meta keys (``META_PROBE`` and ``META_OUTCOME`` are kept importable from here).
META_REISSUE = "domainstate_reissued"
META_DECISION = "_domainstate_decision"
META_PENDING = "_domainstate_pending"
#: ``(retry_times, redirects, url, host facts key)`` when the request was decided: a copy that
#: comes back with more is a retry or a redirect of it (``repeat/{retry,redirect}``), not a new
#: decision; the record of its outcome reads the host key (of that URL) from here.
META_SEEN = "_domainstate_seen"
META_REPEAT = "_domainstate_repeat"
#: The URL of a browser re-issue of a plain fetch that got a script-only shell (its render
#: is the evidence that teaches the domain it needs the browser).
META_AFTER_SHELL = "_domainstate_after_shell"
#: The URL of a request that leads its domain (its probe, or an antibot-hard domain's canary):
#: the domain's other requests wait for its outcome (:class:`._probes.LeadGate`).
META_LEAD = "_domainstate_lead"
#: Set on a lead whose outcome was a dead signal (the next request leads in turn).
META_LEAD_DEAD = "_domainstate_lead_dead"
#: Meta this plugin writes for one download; dropped from a request before it is decided.
_PER_REQUEST_KEYS = (META_OUT, META_DECISION, META_PENDING, META_REPEAT, META_LEAD, META_LEAD_DEAD)
_UNDECIDED = ("skip", None)
_REPORTED = (State.DEAD, State.ANTIBOT_HARD)
_FTB = Decision.FETCH_THEN_BROWSER.value
_DEAD_STATUSES = (404, 410)
#: States whose requests wait for room in their download slot before they are decided.
_LEARNING = frozenset({State.UNKNOWN, State.ANTIBOT_SOFT})
# The pure judgements of :mod:`._evidence`, memoised: their inputs are small immutable values
# that repeat from one response to the next (a few facts, a few verdicts), and building the
# frozen dataclasses costs more than looking them up.
_facts = functools.lru_cache(maxsize=1024)(evidence.Facts)
_judge = functools.lru_cache(maxsize=4096)(evidence.judge_response)
_with_usefulness = functools.lru_cache(maxsize=4096)(evidence.with_usefulness)
logger = logging.getLogger("scrapy_domainstate")

#: ``(force, browser, browser_route)`` of a request (see :meth:`DomainStateManager._flags`).
_Flags = tuple[bool, bool, bool]


class DomainStateManager:
    def __init__(self, crawler: Crawler, config: Config) -> None:
        self.crawler = crawler
        self.config = config
        self.policy = Policy(config)
        self.classifier = Classifier(config)
        self.store: DomainStore = create_store(config, self.policy)
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
                config = Config.from_settings(crawler.settings)
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
                crawler.signals.connect(manager.response_downloaded, signal=scrapy_signals.response_downloaded)
        return manager

    @property
    def stats(self) -> StatsCollector:
        """The crawler's stats, with the counts this plugin keeps locally added first."""
        self.telemetry.publish()
        return self.crawler.stats

    def spider_opened(self, spider: Any = None) -> None:
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
        self.classifier.prepare()  # and the scan databases
        try:
            self.store.open()
        except Exception as exc:
            self._refuse(f"cannot open the store ({self.store.describe()})", "store", exc)
        if self.config.remote_url:
            from .remote import RemoteClient

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
        for domain in self._seen:
            try:
                stat = self.store.current(domain, now)
            except Exception:
                self.telemetry.store_failed("read")
                return
            self.telemetry.inc(f"state_at_close/{stat.state}")

    # ------------------------------------------------------------ requests

    def key(self, url: str) -> str:
        return domain_key(url, self.config.per_hostname)

    def _decide(self, domain: str, now: float, host: str | None = None) -> tuple[Decision, State, float | None]:
        """The decision for ``domain``; with ``host`` (the URL's :func:`~.keys.host_fact_key`), also
        that host's facts (a host that is neither the registrable domain nor its ``www.`` has
        its own dead/cold record). A spider with a purpose of its own (``items``, a callable)
        also reads what the site is worth to it (:meth:`Policy.decide_with_worth`)."""
        try:
            decided = self.store.decide(domain, now)
            if host is not None:
                decided = Policy.decide_with_host(decided, self.store.decide(host, now))
            if self.purpose is None:
                return decided
            return self.policy.decide_with_worth(
                decided, self.store.decide(purpose_key(host or domain, self.purpose), now)
            )
        except Exception:
            self.telemetry.store_failed("read")
            return Decision.FETCH, State.UNKNOWN, None

    def _mark(self, request: Request, domain: str, state: State, expires: float | None, method: str) -> None:
        # ``_value_``, not ``.value``: the Enum property costs a Python call per read.
        request.meta[META_OUT] = {"domain": domain, "state": state._value_, "expires_at": expires, "method": method}

    def _flags(self, request: Request) -> _Flags:
        """``(force, browser, browser_route)`` of a request, as :func:`._routing.route_of` reads them."""
        browser_route = self.browser.reaches(request)
        return (
            bool(request.meta.get(META_FORCE)),
            browser_route and self.browser.has_meta(request),
            browser_route,
        )

    def before_request(self, request: Request) -> Any:
        """The middleware's ``process_request``: None, or a coroutine when a probe is awaited."""
        meta = request.meta
        if meta.get(META_PROBE):
            return None
        retries = meta.get("retry_times", 0)
        redirects = len(meta.get("redirect_urls", ()))
        seen = meta.get(META_SEEN)
        repeat = None if seen is None else _repeat(seen, retries, redirects)
        # Spiders often build requests with ``meta=response.meta``: what this plugin wrote
        # for the parent (its decision, its pending outcome) must not ride along.
        for key in _PER_REQUEST_KEYS:
            meta.pop(key, None)
        url = request.url
        robots = url.endswith("/robots.txt") and bool(meta.get("dont_obey_robotstxt"))
        domain, host = request_keys(url, self.config.per_hostname)
        # Scrapy stores URLs with a lowercase scheme (``safe_url_string``).
        admitted = routing.admit_of(robots, url.partition(":")[0], domain, meta.get(META_REISSUE) == url)
        if admitted is not None and admitted.action is routing.Action.PASS:
            if robots and domain:
                self._robots_txt(request, domain, host)
            return None  # robots.txt, file:, data:...: neither decided nor evidence
        if domain not in self._seen:
            self._see(domain)
        # The URL and its host-facts key ride along for the outcome's record.
        meta[META_SEEN] = (retries, redirects, url, host)
        if repeat:
            meta[META_REPEAT] = repeat
        return self._decide_now(request, domain, host, self._flags(request), admitted)

    def _connect_left(self) -> None:
        if not self._left_connected:
            self._left_connected = True
            self.crawler.signals.connect(self.request_left_downloader, signal=scrapy_signals.request_left_downloader)

    def _enter_gate(self, request: Request) -> Deferred[None] | None:
        """Wait here, not in the download slot's queue, so the request is decided when sent."""
        if not self._engine_running():
            return None
        self._connect_left()
        self.gate.leave(request)  # a retry's or a redirect's copy: the place of the original
        downloader = self.crawler.engine.downloader
        key = downloader.get_slot_key(request)
        slot = downloader.slots.get(key)
        if slot is not None:
            limit = slot.concurrency
        else:  # as Downloader._get_slot() will make it
            limit = downloader.per_slot_settings.get(key, {}).get(
                "concurrency", downloader.ip_concurrency or downloader.domain_concurrency
            )
        return self.gate.enter(request, key, limit)

    async def _decide_when_sent(
        self,
        waiter: Deferred[None],
        request: Request,
        domain: str,
        host: str | None,
        flags: _Flags,
        admitted: routing.Route | None,
    ) -> None:
        await maybe_deferred_to_future(waiter)
        self.telemetry.inc("gate/waited")
        pending = self._decide_now(request, domain, host, flags, admitted, gated=True)
        if pending is not None:
            await pending

    def request_left_downloader(self, request: Request, spider: Any = None) -> None:
        """Give the request's place back also when its response never comes back to this
        middleware (retried or redirected above it, a failure raised above it); with
        requests waiting for it, after the response's own way back, where its outcome is
        recorded first."""
        self.gate.left(request, lambda leave, req: call_later(0, leave, req))
        if request.meta.get(META_LEAD) == request.url:
            # A lead whose response never comes back here (retried or redirected above this
            # middleware): once its way back is over, the requests waiting for it go on.
            call_later(0, self._release_lead, request)

    def _decide_now(
        self,
        request: Request,
        domain: str,
        host: str | None,
        flags: _Flags,
        admitted: routing.Route | None,
        gated: bool = False,
    ) -> Any:
        now = self.clock()
        if admitted is not None:  # a browser re-issue: goes as tab, not decided again
            self._go(request, domain, admitted, *self._decide(domain, now)[1:])
            return None
        skip = routing.dead_url_of(flags[0])
        if skip is not None and self.dead_urls.is_dead(domain, lambda: self._fingerprint(request), now):
            self._go(request, domain, skip, State.DEAD, None)
        decision, state, expires = self._decide(domain, now, host)
        if not gated and state in _LEARNING:
            # A domain still being learned can turn dead or cold any moment: decide again
            # when the request is about to be sent (the other states hold for a crawl).
            waiter = self._enter_gate(request)
            if waiter is not None:
                return self._decide_when_sent(waiter, request, domain, host, flags, admitted)
        lead = self._lead(domain, state, decision, flags[0])
        if lead is not None:
            if lead:  # another request leads this domain: decide again once its outcome is in
                return self._after_lead(request, domain, host, flags, admitted)
            request.meta[META_LEAD] = request.url
            if state is State.ANTIBOT_HARD:
                # The visit's first request to a hard domain is a plain fetch (its canary): when it
                # passes, the domain goes back to antibot-soft; when it fails, the browser retries it.
                self._canaries.add(domain)
                self.telemetry.inc("canary")
                decision = Decision.FETCH_THEN_BROWSER
        # First sight of a domain: ask the fleet, with or without a HEAD probe to follow.
        # (a request that arrives while the answer is awaited waits for it, as for a probe)
        ask = (
            self.remote is not None
            and state is State.UNKNOWN
            and (domain not in self._asked or self.probes.busy(domain))
        )
        can_wait = (ask or decision is Decision.PROBE) and self._engine_running()
        route = routing.route_of(decision, *flags, can_wait, ask)
        if route.action is routing.Action.WAIT:
            return self._probe_then_route(request, domain, host, flags, probe=route.probe)
        self._go(request, domain, route, state, expires)
        return None

    def _lead(self, domain: str, state: State, decision: Decision, force: bool) -> bool | None:
        """Whether this request leads its domain (False), waits for the lead's outcome (True), or
        neither (None): the first request of an unknown domain (its probe, unless the HEAD probe is
        on) and of an ``antibot-hard`` one (its canary) go alone."""
        leads = self.leads
        if force or leads.is_open(domain) or not self._engine_running():
            return None
        if leads.busy(domain):
            return True  # (its lead's outcome may change the state: decided again after it)
        if not self.policy.leads(state, decision, domain in self._canaries):
            if state is not State.UNKNOWN:
                leads.open(domain)  # known: the domain's requests go as decided
            return None
        leads.take(domain)
        self._connect_left()
        return False

    async def _after_lead(
        self, request: Request, domain: str, host: str | None, flags: _Flags, admitted: routing.Route | None
    ) -> None:
        await self.leads.wait(domain)
        pending = self._decide_now(request, domain, host, flags, admitted, gated=True)
        if pending is not None:
            await pending

    def _release_lead(self, request: Request) -> None:
        """The lead's outcome is in (or it will have none): the requests waiting for it go on."""
        meta = request.meta
        if meta.get(META_LEAD) != request.url:
            return
        del meta[META_LEAD]
        out = meta.get(META_OUT)
        if out:
            self.leads.release(out["domain"], not meta.pop(META_LEAD_DEAD, False))

    def _robots_txt(self, request: Request, domain: str, host: str | None) -> None:
        """RobotsTxtMiddleware's download: none for a domain the plugin skips."""
        decision, state, _ = self._decide(domain, self.clock(), host)
        force, browser, browser_route = self._flags(request)
        facts = routing.RequestFacts(
            robots=True, domain=domain, force=force, browser=browser, browser_route=browser_route
        )
        if routing.robots_txt(facts, decision).action is routing.Action.SKIP:
            self.telemetry.inc("robotstxt/skipped")
            raise IgnoreRequest(f"domainstate: no robots.txt request to {domain}: it is {state}")

    def _engine_running(self) -> bool:
        """A probe can be downloaded (not so in component tests: no engine, no spider)."""
        try:
            return self.crawler.engine is not None and self.crawler.spider is not None
        except RuntimeError:  # Scrapy >= 2.14: "Crawler.engine is not set yet"
            return False

    def _go(self, request: Request, domain: str, route: routing.Route, state: State, expires: float | None) -> None:
        """Act on a route: count it, mark the request, skip it or send it on."""
        repeat = request.meta.get(META_REPEAT)
        skip = route.action is routing.Action.SKIP
        if route.counted is not None or skip:
            self.telemetry.decision(route.counted or Decision.SKIP, repeat)
        if skip:
            self.gate.leave(request)
            self._mark(request, domain, state, expires, "skip")
            if route.reason == routing.URL_DEAD:
                self.telemetry.skipped(domain, "dead-url")
                self.telemetry.inc("url_dead/skipped")
                raise IgnoreRequest(f"domainstate: skipping {request.url}: this URL answered 404/410 (dead URL)")
            self.telemetry.skipped(domain, state.value)
            self.telemetry.debug("Skipping %s: %s is %s", request.url, domain, state)
            if route.reason == routing.NO_BROWSER:
                raise IgnoreRequest(
                    f"domainstate: skipping {request.url}: domain {domain} is {state} "
                    "(browser only, and no browser is configured)"
                )
            raise IgnoreRequest(f"domainstate: skipping {request.url}: domain {domain} is {state}")
        if self.pauses.paused and host_of(request.url) in self.pauses.paused:
            # (checked when sent: requests held for a lead or by the gate were decided before)
            self.gate.leave(request)
            self._mark(request, domain, state, expires, "skip")
            self.telemetry.skipped(domain, "paused")
            raise IgnoreRequest(f"domainstate: skipping {request.url}: its host is paused for this crawl")
        self.polite.prime(request, domain, self._polite_record)
        if route.forced and not repeat:
            self.telemetry.inc("forced")
        if route.to_browser:
            request.meta.update(self.browser.meta_for(request.meta))
        if route.decision is not None:
            request.meta[META_DECISION] = route.decision._value_
        self._mark(request, domain, state, expires, route.method)
        if route.decision is not None:
            # (without a browser route, a fetch-then-browser request is a plain fetch)
            shown = route.decision if route.to_browser or self.browser.enabled else route.method
            self.telemetry.debug("%s %s: %s is %s", shown, request.url, domain, state)

    async def _probe_then_route(
        self, request: Request, domain: str, host: str | None, flags: _Flags, probe: bool = True
    ) -> None:
        await self.probes.once(domain, lambda: self._first_sight(request, domain, probe))
        decision, state, expires = self._decide(domain, self.clock(), host)
        # (a PROBE again: no verdict stamped, the store failing or the probe's record lost: go on)
        self._go(request, domain, routing.route_of(decision, *flags), state, expires)

    async def _first_sight(self, request: Request, domain: str, probe: bool) -> None:
        self._asked.add(domain)
        if not await self._ask_remote(domain) and probe:
            await self._probe(request, domain)

    async def _ask_remote(self, domain: str) -> bool:
        """First sight: adopt the fleet's verdict when its consensus is strong. True if adopted."""
        if self.remote is None:
            return False
        adopted = await adopt(self.remote, self.store, domain, self.clock, self.telemetry.store_failed)
        if adopted is None:
            return False
        self.telemetry.adopted(domain, *adopted)
        return True

    async def _probe(self, request: Request, domain: str) -> None:
        self.telemetry.decision(Decision.PROBE)
        self.telemetry.count(domain, Method.HEAD.value)
        assert self.crawler.engine is not None
        verdict = await send_probe(
            self.crawler.engine, probe_request(request, self.config.probe_timeout), self.classifier
        )
        if verdict is not None:
            self.record(domain, Method.HEAD, verdict, request)

    # ----------------------------------------------------------- outcomes

    def _fingerprint(self, request: Request) -> str:
        return self.crawler.request_fingerprinter.fingerprint(request).hex()

    def record(
        self, domain: str, method: Method, verdict: Verdict, request: Request | None = None
    ) -> tuple[DomainStat, Transition | None] | None:
        """Record one outcome; send the signals, count the stats, log a state change.

        The outcome of a request to a host with host facts (:func:`~.keys.host_fact_key`) goes
        to the host's record as :meth:`Policy.host_entry` says, and to the domain's as
        :meth:`Policy.domain_entry` says; the domain's record and transition are returned."""
        entry = RecentEntry(self.clock(), method, verdict.outcome, verdict.status, verdict.error_class)
        host = None if request is None else self._host_facts_key(request)
        if verdict.outcome is Outcome.DEAD and request is not None and META_LEAD in request.meta:
            request.meta[META_LEAD_DEAD] = True
        if self.purpose is not None and verdict.success:
            # What the page was worth goes to this purpose's record; the site's shared record
            # learns only that the page was fetched (alive, past any wall, rendered or not).
            self._record_entry(purpose_key(host or domain, self.purpose), entry, verdict, request)
            entry = RecentEntry(entry.at, method, Outcome.NAVIGATION, entry.status, entry.error_class)
            counted = False
        else:
            counted = True
        if host is not None:
            to_host = Policy.host_entry(entry)
            if to_host is not None:
                self._record_entry(host, to_host, verdict, request, counted)
            to_domain = Policy.domain_entry(entry)
            if to_domain is None:
                return None
            entry = to_domain
        return self._record_entry(domain, entry, verdict, request, counted)

    def _host_facts_key(self, request: Request) -> str | None:
        """The request's :func:`~.keys.host_fact_key`, as worked out when it was decided."""
        seen = request.meta.get(META_SEEN)
        if seen is not None and len(seen) == 4 and seen[2] == request.url:
            host: str | None = seen[3]
            return host
        return host_fact_key(request.url, self.config.per_hostname)

    def _record_entry(
        self, domain: str, entry: RecentEntry, verdict: Verdict, request: Request | None, counted: bool = True
    ) -> tuple[DomainStat, Transition | None] | None:
        """Apply ``entry`` to one record; ``counted=False``: the outcome was counted (and
        signalled) with the purpose's record already."""
        try:
            stat, transition = self.store.record(domain, entry)
        except Exception:
            self.telemetry.store_failed("write")
            return None
        telemetry = self.telemetry
        if counted:
            telemetry.recorded(domain, entry, stat, request)
        if not self.store.pending:  # the store just flushed a batch: the stats follow it
            telemetry.publish()
        if transition is not None:
            self.telemetry.changed(domain, transition, stat, request)
            if self.remote is not None and transition.new in _REPORTED:
                self.remote.report(domain, transition.new, stat.last_seen, verdict.error_class)
        return stat, transition

    def _evidence_facts(self, request: Request, response: Response | None = None) -> evidence.Facts:
        """The facts of one download. A render is what the browser handler produced (the
        ``DOMAINSTATE_BROWSER_RENDERED`` check); a failure of a request sent to the browser
        is the browser's."""
        meta = request.meta
        url = request.url
        browser_route = self.browser.reaches(request)
        sent_to_browser = browser_route and self.browser.has_meta(request)
        if response is None:
            status, cached, rendered, is_root = None, False, sent_to_browser, False
        else:
            status = response.status
            cached = "cached" in response.flags
            rendered = sent_to_browser if cached else self.browser.rendered(response)
            # Only a 404/410 asks whether the URL is the site root (dead site or dead URL).
            is_root = status in _DEAD_STATUSES and is_site_root(response.url)
        return _facts(
            Method.TAB if rendered else Method.FETCH,
            status,
            is_root,
            cached,
            False,  # robots: robots.txt downloads never get here
            meta.get(META_REISSUE) == url,
            meta.get(META_DECISION) == _FTB,
            browser_route,
            sent_to_browser and not rendered,
            meta.get(META_AFTER_SHELL) == url,
        )

    def after_response(self, request: Request, response: Response) -> Request | Response:
        """The middleware's ``process_response``; the request's place in the gate goes back after."""
        try:
            return self._after_response(request, response)
        finally:
            self.gate.leave(request)
            if META_PENDING not in request.meta:  # (else once the callback's outcome is recorded)
                self._release_lead(request)

    def _after_response(self, request: Request, response: Response) -> Request | Response:
        meta = request.meta
        out = meta.get(META_OUT)
        if meta.get(META_PROBE) or not out or out.get("method") in _UNDECIDED:
            return response
        domain = out["domain"]
        facts = self._evidence_facts(request, response)
        if facts.cached:
            # Not sent after all: served from Scrapy's HTTP cache, not evidence. A cached wall
            # still goes to the browser (renders never come from the cache).
            meta[META_OUT] = dict(out, method="cache")
            self.telemetry.count(domain, "cache")
            cached_verdict = None
            if facts.fallback and facts.browser_route and facts.method is Method.FETCH and not facts.reissued:
                cached_verdict = self.classifier.response(
                    response.status, response.headers, response.body, response.url, facts.is_root
                )
            judged = evidence.judge_response(facts, cached_verdict)
            return self._reissue(request, "cached wall") if judged.reissue else response
        self.telemetry.count(domain, out["method"])
        if facts.unrendered:
            # Sent to the browser, answered by something else: evidence of neither kind.
            self.telemetry.inc("browser/not_rendered")
            self.telemetry.inc("not_evidence")
            return response
        verdict, passed = evidence.response_verdict(
            self.classifier, facts.method, response.status, response.headers, response.body, response.url, facts.is_root
        )
        self._manners(request, domain, facts.method, verdict)
        certificate = None
        if verdict.outcome is not Outcome.ANTIBOT and response.url.startswith("https:"):
            certificate = self._certificate_verdict(response)
            if certificate is not None and not verdict.success:
                verdict, certificate = certificate, None
        judged = _judge(facts, verdict, passed)
        if judged.usefulness:
            # One path whatever decides usefulness: the verdict (its status, a passed wall, the
            # js-shell mark) is judged above; only "was this page useful?" comes from the source.
            useful = self.outcomes.useful(response)
            if useful == CALLBACK:
                # The callback decides (the spider middleware calls record_items).
                assert judged.record is not None
                meta[META_PENDING] = (domain, facts.method, judged.record, certificate)
                return self._delivered(request, response, judged)
            judged = self._useful_or_certificate(judged, useful if isinstance(useful, Outcome) else None, certificate)
        return self._apply(request, response, domain, facts.method, judged)

    @staticmethod
    def _useful_or_certificate(
        judged: evidence.Evidence, useful: Outcome | None, certificate: Verdict | None
    ) -> evidence.Evidence:
        """A fetched page's evidence once its usefulness is known. An invalid certificate is a
        dead signal only for a page that was not useful: a site that serves useful pages
        behind a bad certificate is misconfigured, not abandoned (docs/SPEC.md section 2)."""
        if certificate is not None and useful is Outcome.OK_EMPTY:
            return evidence.Evidence(record=certificate, passed=judged.passed)
        return _with_usefulness(judged, useful)

    def _delivered(self, request: Request, response: Response, judged: evidence.Evidence) -> Response:
        """The response as the callback gets it: a wall the browser got past is delivered as the
        page it rendered (a 200)."""
        if judged.passed:
            request.meta[META_OUT] = dict(request.meta[META_OUT], original_status=response.status)
            return response.replace(status=200)
        return response

    def _apply(
        self, request: Request, response: Response, domain: str, method: Method, judged: evidence.Evidence
    ) -> Request | Response:
        """Act on what a response means: record it, re-issue it, mark its URL dead."""
        if judged.record is None:
            self.telemetry.inc("not_evidence")
            if judged.url_dead:
                self._mark_url_dead(request)
            return self._reissue(request, judged.reason) if judged.reissue else response
        if self.alarm.on and judged.record.outcome is Outcome.ANTIBOT:
            self.telemetry.inc("antibot_suspect")  # the crawler is blocked, not (only) this site
        else:
            self.record(domain, method, judged.record, request)
        if method is Method.TAB and not judged.record.success:
            self._hard_render_failed(request)
        if judged.reissue:
            return self._reissue(request, judged.record.outcome)
        return self._delivered(request, response, judged)

    def _hard_render_failed(self, request: Request) -> None:
        """A render of an ``antibot-hard`` domain that got no page (the close summary shows them)."""
        out = request.meta.get(META_OUT)
        if out and out.get("state") == State.ANTIBOT_HARD._value_:
            self.telemetry.inc("hard_render_failed")

    def after_exception(self, request: Request, exception: BaseException) -> Request | None:
        """The middleware's ``process_exception``; the request's place in the gate goes back after."""
        try:
            return self._after_exception(request, exception)
        finally:
            self.gate.leave(request)
            self._release_lead(request)

    def _after_exception(self, request: Request, exception: BaseException) -> Request | None:
        meta = request.meta
        if meta.get("dont_obey_robotstxt") and request.url.endswith("/robots.txt"):
            self._robots_failed(exception)
            return None
        out = meta.get(META_OUT)
        if meta.get(META_PROBE) or not out or out.get("method") in _UNDECIDED:
            return None
        if isinstance(exception, IgnoreRequest):
            # Decided and sent on, then dropped by another component (its process_request).
            self.telemetry.count(out["domain"], "dropped")
            return None
        if is_launch_failure(exception):
            return self._without_browser(request, exception)
        self.telemetry.count(out["domain"], out["method"])
        facts = self._evidence_facts(request)
        verdict = self.classifier.failure(exception)
        judged = evidence.judge_failure(facts, verdict)
        hostname = host_of(request.url)
        if self.pauses.failed(hostname, verdict.error_class):
            self._paused(hostname, out["domain"], request, verdict)
            self._drain(request, hostname)
        if judged.reissue and self.pauses.failing(hostname) and verdict.outcome is Outcome.NETWORK_ERROR:
            # The server keeps timing out: a browser would wait for the same server.
            judged = evidence.Evidence(record=judged.record, reason=judged.reason)
            self.telemetry.inc("browser_reissue_skipped/failing_host")
        self.record(out["domain"], facts.method, verdict, request)
        if facts.method is Method.TAB:
            self._hard_render_failed(request)
        return self._reissue(request, verdict.outcome) if judged.reissue else None

    def _without_browser(self, request: Request, exception: BaseException) -> Request:
        """The browser did not launch: the route goes off (once), nothing is recorded as a
        render, and the request is decided again without a browser. A re-issue is dropped:
        its plain fetch was the page, and it was recorded."""
        if self.browser.enabled:
            self.browser.launch_failed(self.crawler, exception)
        self.telemetry.inc("browser/launch_failed_requests")
        if request.meta.get(META_REISSUE) == request.url:
            raise IgnoreRequest(f"domainstate: not rendered, the browser did not launch ({self.browser.reason})")
        drop = self.browser.render_keys
        meta = {k: v for k, v in request.meta.items() if k not in drop and k != META_DECISION}
        return request.replace(dont_filter=True, meta=meta)

    # ------------------------------------------------------------ manners

    def response_downloaded(self, response: Response, request: Request, spider: Any = None) -> None:
        """Every downloaded response, retried ones too: a 429/503 slows its slot at once."""
        out = request.meta.get(META_OUT)
        if self.polite.downloaded(response, request, out.get("domain") if out else None):
            hostname = host_of(request.url)
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
        """A host that keeps timing out is paused for the crawl; the pause is a dead signal, so
        pauses on two visits confirm ``dead`` as other dead signals do."""
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
            deferred.errback(IgnoreRequest(f"domainstate: skipping {waiting.url}: its host is paused for this crawl"))

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

    def _robots_failed(self, exception: BaseException) -> None:
        """RobotsTxtMiddleware logs an ERROR with a traceback for every robots.txt it cannot
        reach; the site's own requests say what is wrong with it (and are recorded). A
        robots.txt that failed to download (DNS, refused, timeout, TLS) is ignored instead."""
        if isinstance(exception, IgnoreRequest):
            return
        if self.classifier.failure(exception).outcome in (Outcome.DEAD, Outcome.NETWORK_ERROR):
            self.telemetry.inc("robotstxt/unreachable")
            raise IgnoreRequest(f"domainstate: robots.txt unreachable ({type(exception).__name__}): {exception}")

    def _reissue(self, request: Request, why: object) -> Request:
        self.telemetry.inc("browser_reissue")
        meta = dict(request.meta)
        meta.update(self.browser.meta_for(request.meta))
        # The URL, not True: a request built later from a copy of this meta is not a re-issue.
        meta[META_REISSUE] = request.url
        meta.pop(META_LEAD, None)  # (the lead's outcome is in: the re-issue leads nothing)
        if why == evidence.JS_SHELL:
            meta[META_AFTER_SHELL] = request.url  # its render teaches the domain it needs the browser
        meta.pop(META_DECISION, None)
        self.telemetry.debug("Re-issuing %s in the browser (%s)", request.url, why)
        return request.replace(dont_filter=True, meta=meta)

    def _mark_url_dead(self, request: Request) -> None:
        domain = request.meta[META_OUT]["domain"]
        if self.dead_urls.mark(domain, lambda: self._fingerprint(request), self.clock()):
            self.telemetry.inc("url_dead/marked")

    def _certificate_verdict(self, response: Response) -> Verdict | None:
        host = host_of(response.url)
        if host in self._cert_verdicts:
            return self._cert_verdicts[host]
        verdict = self.classifier.certificate(response.certificate, host, self.clock())
        if len(self._cert_verdicts) > 10000:
            self._cert_verdicts.clear()
        self._cert_verdicts[host] = verdict
        return verdict

    def pending_site(self, response: Response) -> str | None:
        """The site key of a response whose outcome waits for its callback, or ``None``."""
        pending = response.meta.get(META_PENDING)
        return None if pending is None else str(pending[0])

    def record_items(self, response: Response, n_items: int, n_follow: int = 0) -> None:
        """The spider middleware's hook (``DOMAINSTATE_OUTCOME='items'``, or a callable that
        returned None): ``n_items`` items and ``n_follow`` follow-up requests to the same site."""
        pending = response.meta.pop(META_PENDING, None)
        if pending is None:
            return
        try:
            self._record_items(response, pending, n_items, n_follow)
        finally:
            if response.request is not None:
                self._release_lead(response.request)

    def _record_items(self, response: Response, pending: tuple[Any, ...], n_items: int, n_follow: int) -> None:
        domain, method, verdict, certificate = pending
        outcome = self.outcomes.from_count(
            n_items, response.meta.get(META_OUTCOME), response.url, n_follow, self.outcomes.from_items
        )
        judged = self._useful_or_certificate(evidence.Evidence(record=verdict, usefulness=True), outcome, certificate)
        if judged.record is None:
            self.telemetry.inc("not_evidence")
            return
        self.record(domain, method, judged.record, response.request)

    # ------------------------------------------------------------ inspection

    def inspect(self, url: str) -> Inspection:
        """The record and the decision for a URL (for ``scrapy shell``): a dict that prints as
        ``scrapy domainstate show`` does."""
        domain = self.key(url)
        now = self.clock()
        shown = look(self.store, url, domain, now)
        return Inspection(
            {
                "domain": domain,
                "state": shown.state.value,
                "decision": shown.decision.value,
                "record": shown.current,
            },
            show_lines(shown),
        )


class Inspection(dict[str, Any]):
    """``domainstate(url)`` in ``scrapy shell``: the keys ``domain``, ``state``, ``decision`` and
    ``record``; shown (its ``repr``) as ``scrapy domainstate show`` prints the domain."""

    def __init__(self, values: dict[str, Any], lines: list[str]) -> None:
        super().__init__(values)
        self.lines = lines

    def __repr__(self) -> str:
        return "\n".join(self.lines)


def _repeat(seen: tuple[Any, ...], retries: int, redirects: int) -> str | None:
    """``retry`` or ``redirect`` when this request (``retries``, ``redirects``) is a copy of one
    decided before (``seen``: its ``META_SEEN``)."""
    if retries > seen[0]:
        return "retry"
    if redirects > seen[1]:
        return "redirect"
    return None
