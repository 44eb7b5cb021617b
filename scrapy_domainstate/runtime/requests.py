"""The request flow: what happens to a request before it is sent.

:class:`RequestFlow` (a part of :class:`~scrapy_domainstate.runtime.lifecycle.DomainStateManager`)
decides each request from its domain's record: the send gate (a learning domain's request is
decided when its download slot has room), the lead gate (a new domain's first request goes
alone, as its probe; an antibot-soft domain's first fetch; an antibot-hard domain's canary), the route (skip, fetch, browser), the
optional HEAD probe, first sight with a shared-state service, the robots.txt request, and
the skip before the scheduler (``DomainStateQueueFilter``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy import signals as scrapy_signals
from scrapy.exceptions import IgnoreRequest
from scrapy.utils.asyncio import call_later
from scrapy.utils.defer import maybe_deferred_to_future

from scrapy_domainstate.core import routing
from scrapy_domainstate.core.keys import domain_key, host_of, purpose_key, request_keys
from scrapy_domainstate.core.policy import Decision, Policy
from scrapy_domainstate.core.record import Method, State
from scrapy_domainstate.runtime.adoption import adopt
from scrapy_domainstate.runtime.meta import (
    LEARNING,
    META_DECISION,
    META_FORCE,
    META_LEAD,
    META_LEAD_DEAD,
    META_NO_RETRY,
    META_OUT,
    META_REISSUE,
    META_REPEAT,
    META_SEEN,
    PER_REQUEST_KEYS,
    Flags,
)
from scrapy_domainstate.runtime.outcomes import OutcomeFlow
from scrapy_domainstate.runtime.probes import META_PROBE, probe_request, send_probe

if TYPE_CHECKING:
    from scrapy.http import Request
    from twisted.internet.defer import Deferred


logger = logging.getLogger(__name__)


class RequestFlow(OutcomeFlow):
    """The request flow of a :class:`DomainStateManager`."""

    # ------------------------------------------------------------ requests

    def key(self, url: str) -> str:
        return domain_key(url, self.config.per_hostname)

    def _decide(
        self, domain: str, now: float, host: str | None = None, url: str | None = None
    ) -> tuple[Decision, State, float | None]:
        """The decision for ``domain``; with ``host`` (the URL's :func:`~.keys.host_fact_key`), also
        that host's facts (a host that is neither the registrable domain nor its ``www.`` has
        its own dead/cold record). A spider with a purpose of its own (``items``, a callable)
        also reads what the site is worth to it (:meth:`Policy.decide_with_worth`). With
        ``url``, what the URL itself changes (a cold domain's contact page, :meth:`Policy.for_url`)."""
        try:
            decided = self.store.decide(domain, now)
            if host is not None:
                decided = Policy.decide_with_host(decided, self.store.decide(host, now))
            if self.purpose is not None:
                decided = self.policy.decide_with_worth(
                    decided, self.store.decide(purpose_key(host or domain, self.purpose), now)
                )
        except Exception:
            self.telemetry.store_failed("read")
            return Decision.FETCH, State.UNKNOWN, None
        if url is not None and decided[0] is Decision.SKIP and decided[1] is State.COLD:
            return self.policy.for_url(Decision.SKIP, State.COLD, url), State.COLD, decided[2]
        return decided

    def _store_keys(self, domain: str, host: str | None) -> tuple[str, ...]:
        """The record keys :meth:`_decide` reads for a request."""
        keys: tuple[str, ...] = (domain,) if host is None else (domain, host)
        if self.purpose is not None:
            keys += (purpose_key(host or domain, self.purpose),)
        return keys

    def _mark(self, request: Request, domain: str, state: State, expires: float | None, method: str) -> None:
        # ``_value_``, not ``.value``: the Enum property costs a Python call per read.
        request.meta[META_OUT] = {"domain": domain, "state": state._value_, "expires_at": expires, "method": method}

    def _flags(self, request: Request) -> Flags:
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
        url = request.url
        if not meta.keys().isdisjoint(PER_REQUEST_KEYS):  # (one C call when none rides along)
            _drop_per_request(meta, url, seen is not None)
        robots = url.endswith("/robots.txt") and bool(meta.get("dont_obey_robotstxt"))
        domain, host = request_keys(url, self.config.per_hostname)
        # Scrapy stores URLs with a lowercase scheme (``safe_url_string``).
        admitted = routing.admit_of(robots, url.partition(":")[0], domain, meta.get(META_REISSUE) == url)
        if admitted is not None and admitted.action is routing.Action.PASS:
            if robots and domain:
                pending = self.store.prefetch(self._store_keys(domain, host)) if self._prefetch else None
                if pending is not None:
                    return self._robots_txt_after_read(pending, request, domain, host)
                self._robots_txt(request, domain, host)
            return None  # robots.txt, file:, data:...: neither decided nor evidence
        if domain not in self._seen:
            self._see(domain)
        # The URL and its host-facts key ride along for the outcome's record.
        meta[META_SEEN] = (retries, redirects, url, host)
        if repeat:
            meta[META_REPEAT] = repeat
        if self._prefetch:
            pending = self.store.prefetch(self._store_keys(domain, host))
            if pending is not None:
                return self._decide_after_read(pending, request, domain, host, self._flags(request), admitted)
        return self._decide_now(request, domain, host, self._flags(request), admitted)

    async def _decide_after_read(
        self,
        pending: Deferred[None],
        request: Request,
        domain: str,
        host: str | None,
        flags: Flags,
        admitted: routing.Route | None,
    ) -> None:
        """A request whose records the store is reading: decided once they are in (it alone waits)."""
        await maybe_deferred_to_future(pending)
        pending_decision = self._decide_now(request, domain, host, flags, admitted)
        if pending_decision is not None:
            await pending_decision

    async def _robots_txt_after_read(
        self, pending: Deferred[None], request: Request, domain: str, host: str | None
    ) -> None:
        await maybe_deferred_to_future(pending)
        self._robots_txt(request, domain, host)

    def before_queue_read(self, request: Request) -> Deferred[None] | None:
        """The store's read of a request's records when they are not cached yet (a Deferred
        for the filter's asynchronous paths to await), else ``None``."""
        if not self._prefetch or request.meta.get(META_FORCE) or request.errback is not None:
            return None
        domain, host = request_keys(request.url, self.config.per_hostname)
        if not domain:
            return None
        pending: Deferred[None] | None = self.store.prefetch(self._store_keys(domain, host))
        return pending

    def skips_before_queue(self, request: Request) -> bool:
        """Whether a request about to be scheduled is dropped now (the skip-before-queue filter).

        Only what the downloader middleware would skip at once with no wait: a domain (or
        host) the memory holds dead, cold or browser-only without a browser, or a URL marked
        dead; and only for a request without an errback (one with an errback is skipped by the
        downloader middleware, whose ``IgnoreRequest`` reaches it). A domain still being learned (unknown, antibot-soft) always goes on, and so does
        a request whose record the store has not cached yet (:meth:`DomainStore.prefetch`:
        the filter never waits for the network). A dropped request is counted and logged here
        exactly as the downloader middleware counts its skips; one that goes on is decided
        (and counted) there, once.
        """
        meta = request.meta
        if meta.get(META_PROBE) or meta.get(META_FORCE) or request.errback is not None:
            return False  # (an errback gets its IgnoreRequest from the downloader middleware, as ever)
        url = request.url
        domain, host = request_keys(url, self.config.per_hostname)
        if not domain or not url.startswith(("http://", "https://")) or url.endswith("/robots.txt"):
            return False
        if self._prefetch and self.store.prefetch(self._store_keys(domain, host)) is not None:
            return False  # not cached: decided (after its read) by the downloader middleware
        now = self.clock()
        if self.dead_urls.is_dead(domain, lambda: self._fingerprint(request), now):
            route, state, expires = routing.SKIP_URL_DEAD, State.DEAD, None
        else:
            decision, state, expires = self._decide(domain, now, host, url)
            if state in LEARNING or decision not in routing.MAY_SKIP:
                return False  # (only a skip or a browser-only decision can be a skip route)
            leads = self.leads
            if not leads.is_open(domain) and (
                leads.busy(domain) or self.policy.leads(state, decision, domain in self._canaries)
            ):
                # an antibot-hard domain's canary is still to go, or its outcome to come (it
                # may reopen the domain): decided when sent, as the downloader middleware does
                return False
            route = routing.route_of(decision, *self._flags(request))
        if route.action is not routing.Action.SKIP:
            return False
        if domain not in self._seen:
            self._see(domain)
        try:
            self._go(request, domain, route, state, expires)
        except IgnoreRequest:
            self.telemetry.inc("skip/before_queue")
            return True
        return False  # (not reached: a SKIP route raises)

    def _connect_left(self) -> None:
        if not self._left_connected and not self.downloaded_middleware:
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
        flags: Flags,
        admitted: routing.Route | None,
    ) -> None:
        await maybe_deferred_to_future(waiter)
        self.telemetry.inc("gate/waited")
        pending = self._decide_now(request, domain, host, flags, admitted, gated=True)
        if pending is not None:
            await pending

    def left_downloader(self, request: Request, failed: bool) -> None:
        """``request`` left the downloader (``failed``: with an exception), seen by
        :class:`~scrapy_domainstate.middleware.DomainStateDownloadedMiddleware` before any other
        middleware. Its place goes back also when its response never comes back to this
        middleware (retried or redirected above it, a failure raised above it); with requests
        waiting for it, after the response's own way back, where its outcome is recorded first.
        A lead's response that ends above this middleware (a redirect) releases the requests
        waiting for it then; a lead's failure that does was retried or re-issued there: the
        copy leads on (:meth:`_decide_now`), its outcome releases them (or the wait's timeout)."""
        self.gate.left(request, lambda leave, req: call_later(0, leave, req))
        if not failed and request.meta.get(META_LEAD) == request.url:
            call_later(0, self._release_lead, request)

    def request_left_downloader(self, request: Request, spider: Any = None) -> None:
        """Scrapy's ``request_left_downloader``, when the downloaded middleware is not installed
        (sent before the way back: a failure is not told from a response)."""
        self.left_downloader(request, failed=False)

    def _decide_now(
        self,
        request: Request,
        domain: str,
        host: str | None,
        flags: Flags,
        admitted: routing.Route | None,
        gated: bool = False,
    ) -> Any:
        now = self.clock()
        if admitted is not None:  # a browser re-issue: goes as tab, not decided again
            self._go(request, domain, admitted, *self._decide(domain, now)[1:])
            return None
        if not flags[0] and self.dead_urls.is_dead(domain, lambda: self._fingerprint(request), now):  # (not forced)
            self._go(request, domain, routing.SKIP_URL_DEAD, State.DEAD, None)
        decision, state, expires = self._decide(domain, now, host, request.url)
        # The lead's own copy (its failure was retried or re-issued above this middleware): it
        # leads on, and takes no place in the gate, where the requests waiting for it hold them.
        leads_on = request.meta.get(META_LEAD) == request.url and self.leads.busy(domain)
        if not gated and state in LEARNING and not leads_on:
            # A domain still being learned can turn dead or cold any moment: decide again
            # when the request is about to be sent (the other states hold for a crawl).
            waiter = self._enter_gate(request)
            if waiter is not None:
                return self._decide_when_sent(waiter, request, domain, host, flags, admitted)
        if flags[0] or self.leads.is_open(domain):
            lead = None
        elif leads_on:
            lead = None
            if state is State.ANTIBOT_HARD:
                decision = Decision.FETCH_THEN_BROWSER  # a canary's copy is a plain fetch too
        else:
            lead = self._lead(domain, state, decision)
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

    def _lead(self, domain: str, state: State, decision: Decision) -> bool | None:
        """Whether this request leads its domain (False), waits for the lead's outcome (True), or
        neither (None): the first request of an unknown domain (its probe, unless the HEAD probe is
        on), of an ``antibot-soft`` one (its answer may make it hard) and of an ``antibot-hard``
        one (its canary) go alone. For a request not forced, of a domain whose lead is not open
        (the caller checks both: a known domain's lead is open for the crawl)."""
        leads = self.leads
        if not self._engine_running():
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
        self, request: Request, domain: str, host: str | None, flags: Flags, admitted: routing.Route | None
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
        """RobotsTxtMiddleware's download: none for a domain the plugin skips (a cold one's is
        sent when its contact pages are fetched: they obey it too)."""
        decision, state, _ = self._decide(domain, self.clock(), host)
        if state is State.COLD and self.policy.cold_contacts:
            decision = Decision.FETCH
        force, browser, browser_route = self._flags(request)
        facts = routing.RequestFacts(
            robots=True, domain=domain, force=force, browser=browser, browser_route=browser_route
        )
        if routing.robots_txt(facts, decision).action is routing.Action.SKIP:
            self.telemetry.inc("robotstxt/skipped")
            raise IgnoreRequest(f"scrapy-domainstate: no robots.txt request to {domain}: it is {state}")

    def _engine_running(self) -> bool:
        """A probe can be downloaded (not so in component tests: no engine, no spider)."""
        try:
            return self.crawler.engine is not None and self.crawler.spider is not None
        except RuntimeError:  # Scrapy >= 2.14: "Crawler.engine is not set yet"
            return False

    def _go(
        self,
        request: Request,
        domain: str,
        route: routing.Route,
        state: State,
        expires: float | None,
    ) -> None:
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
                raise IgnoreRequest(f"scrapy-domainstate: skipping {request.url}: this URL answered 404/410 (dead URL)")
            self.telemetry.skipped(domain, state.value)
            self.telemetry.debug("Skipping %s: %s is %s", request.url, domain, state)
            if route.reason == routing.NO_BROWSER:
                raise IgnoreRequest(
                    f"scrapy-domainstate: skipping {request.url}: domain {domain} is {state} "
                    "(browser only, and no browser is configured)"
                )
            raise IgnoreRequest(f"scrapy-domainstate: skipping {request.url}: domain {domain} is {state}")
        if self.pauses.paused and host_of(request.url) in self.pauses.paused:
            # (checked when sent: requests held for a lead or by the gate were decided before)
            self.gate.leave(request)
            self._mark(request, domain, state, expires, "skip")
            self.telemetry.skipped(domain, "paused")
            raise IgnoreRequest(f"scrapy-domainstate: skipping {request.url}: its host is paused for this crawl")
        self.polite.prime(request, domain, self._polite_record)
        if route.forced and not repeat:
            self.telemetry.inc("forced")
        meta = request.meta
        if route.to_browser:
            meta.update(self.browser.meta_for(meta))
        decision = route.decision
        if decision is not None:
            meta[META_DECISION] = decision._value_
        method = route.action._value_  # (route.method, without its property call)
        self._mark(request, domain, state, expires, method)
        if decision is not None and self.telemetry.debug_on:
            # (without a browser route, a fetch-then-browser request is a plain fetch)
            shown = decision if route.to_browser or self.browser.enabled else method
            self.telemetry.debug("%s %s: %s is %s", shown, request.url, domain, state)

    async def _probe_then_route(
        self, request: Request, domain: str, host: str | None, flags: Flags, probe: bool = True
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


def _drop_per_request(meta: dict[str, Any], url: str, copy: bool) -> None:
    """Drop what this plugin wrote for another download (:data:`PER_REQUEST_KEYS`), and the
    ``dont_retry`` it set. A ``copy`` (of a request decided before) of a lead, for the same URL,
    keeps its lead: its failure was retried or re-issued above this middleware, and it is
    decided as the lead while that lead is in flight."""
    lead = meta.get(META_LEAD) if copy else None
    if meta.get(META_NO_RETRY):
        meta.pop("dont_retry", None)
    for key in PER_REQUEST_KEYS:
        meta.pop(key, None)
    if lead == url:
        meta[META_LEAD] = url


def _repeat(seen: tuple[Any, ...], retries: int, redirects: int) -> str | None:
    """``retry`` or ``redirect`` when this request (``retries``, ``redirects``) is a copy of one
    decided before (``seen``: its ``META_SEEN``)."""
    if retries > seen[0]:
        return "retry"
    if redirects > seen[1]:
        return "redirect"
    return None
