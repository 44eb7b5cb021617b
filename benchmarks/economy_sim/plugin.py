"""scrapy-domainstate's path through one host visit, as the middleware's manager takes it.

The real :class:`~scrapy_domainstate.core.policy.Policy` and store decide and record; the
plugin's evidence module (through :class:`.answers.Judge`) says what each answer means.
Per page: a URL marked dead is skipped; otherwise ``store.decide``, combined with the
host's own record when the host is not the registrable domain (host facts); PROBE sends
one HEAD (no retries), recorded, and decides again (every request of the domain waits for
that verdict); SKIP sends nothing; FETCH one GET; FETCH_THEN_BROWSER one GET and, when the
evidence module says so, one render; BROWSER one render. Up to ``concurrency`` requests of
a host are decided before the earlier ones' outcomes return, as with Scrapy's
``CONCURRENT_REQUESTS_PER_DOMAIN``; except that, as the manager's lead gate does, an unknown
host's first request of a visit goes alone (its probe, with ``DOMAINSTATE_PROBE_ALONE`` and no
HEAD probe: after a dead signal the next request leads in turn) and so do the first request
of an ``antibot-soft`` host (its answer may make it hard) and of an ``antibot-hard`` host (its
canary: a plain fetch with the browser fallback).
"""

from __future__ import annotations

from collections import deque
from typing import Any

from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.policy import Decision, Policy
from scrapy_domainstate.core.record import Method, Outcome, RecentEntry, State
from scrapy_domainstate.detect import evidence
from scrapy_domainstate.detect.verdict import Verdict
from scrapy_domainstate.store.base import DomainStore

from . import world as w
from .answers import FAILURES, VERDICTS, Judge
from .manners import Manners
from .world import Page

__all__ = ["PluginVisit"]

SKIP, PROBE, FTB, BROWSER = Decision.SKIP, Decision.PROBE, Decision.FETCH_THEN_BROWSER, Decision.BROWSER
HEAD, GET, TAB = Method.HEAD, Method.FETCH, Method.TAB
_INF = float("inf")
_PAUSED = Verdict(Outcome.DEAD, None, "paused:timeout")
#: Paths of the simulated URLs: a page whose URL names contacts gets one of the first (by page),
#: any other non-root page one of the second. The plugin's own matcher reads them.
_CONTACT_PATHS = ("contact", "impressum", "about-us", "kontakt", "team", "legal-notice", "contacto", "chi-siamo")
_OTHER_PATHS = ("products/item-{}", "news/{}", "services/{}", "blog/post-{}")


class PluginVisit:
    """Drives the store through host visits; ``requests``/``renders``/``heads`` count the last one."""

    def __init__(
        self,
        store: DomainStore,
        config: Config,
        judge: Judge,
        names: list[str],
        hosts: list[str | None],
        window: int,
        navs: list[int] | None = None,
        world: w.World | None = None,
    ) -> None:
        self.store = store
        self.judge = judge
        self.names = names
        self.hosts = hosts
        self.window = window
        self.url_dead_ttl = config.url_dead_ttl
        #: per host, its leading navigation pages; only the items outcome tells them apart
        #: (under contacts they are pages without contacts, ok-empty)
        self.navs = navs if navs is not None and config.outcome != "contacts" else None
        self.policy = Policy(config)
        #: the outcome recorded last (a lead's tells whether the host is open)
        self._last: Outcome | None = None
        #: canaries sent (the close summary's count)
        self.canaries = 0
        self._marked: set[int] = set()  # hosts with URLs marked dead (the manager's per-domain mark)
        self.requests = self.renders = self.heads = 0
        #: the plugin's politeness and host pauses (a round is a crawl: :meth:`start_round`)
        self.manners = Manners(config, store)
        self.politeness = config.politeness
        self.bursts = world.burst if world is not None else [0] * len(names)
        self.retry_afters = world.retry_after if world is not None else [0] * len(names)
        self.discover = world.discover if world is not None else False
        self.contact_urls = world.contact_urls if world is not None else [0] * len(names)
        #: the robots.txt a cold domain gets when its contact pages may be fetched (none sent)
        self.robots_only = False
        self.retries = world.retries if world is not None else 2
        self._host_names = [h or n for h, n in zip(hosts, names, strict=True)]
        #: this visit: requests sent to a rate-limited host at full speed, whether the root gave a page
        self._fast = 0
        self._got = False
        #: 429s to bursts this round, and pages sent again after one
        self.limited = 0
        self._decided: tuple[Decision, State, float] | None = None
        #: (decision, state) of each page of the last visit.
        self.why: list[tuple[Decision, State | str]] = []

    # ------------------------------------------------------------ recording

    def _record(self, host: int, entry: RecentEntry) -> None:
        self._decided = None  # the records changed: decide again
        self._last = entry.outcome
        hkey = self.hosts[host]
        if hkey is None:
            self.store.record(self.names[host], entry)
            return
        to_host = Policy.host_entry(entry)
        if to_host is not None:
            self.store.record(hkey, to_host)
        to_domain = Policy.domain_entry(entry)
        if to_domain is not None:
            self.store.record(self.names[host], to_domain)

    def _record_verdict(self, host: int, at: float, method: Method, verdict: Any) -> None:
        self._record(host, RecentEntry(at, method, verdict.outcome, verdict.status, verdict.error_class))

    # ------------------------------------------------------------ deciding

    def _decide(self, host: int, now: float) -> tuple[Decision, State]:
        # A decision depends on the records and, through their expiry, on the clock only: until
        # something is recorded or a record expires, the next request gets the same answer
        # (the manager asks the store each time; the simulator saves the reads).
        cached = self._decided
        if cached is not None and now < cached[2]:
            return cached[0], cached[1]
        decision, state, expires = self.store.decide(self.names[host], now)
        until = _INF if expires is None else expires
        hkey = self.hosts[host]
        if hkey is not None:
            hosted = self.store.decide(hkey, now)
            if hosted[2] is not None:
                until = min(until, hosted[2])
            decision, state, _ = Policy.decide_with_host((decision, state, expires), hosted)
        self._decided = (decision, state, until)
        return decision, state

    def _url(self, host: int, page: int) -> str:
        if not page:
            return f"http://{self._host_names[host]}/"
        if self.contact_urls[host] >> page & 1:
            path = _CONTACT_PATHS[(host + page) % len(_CONTACT_PATHS)]
        else:
            path = _OTHER_PATHS[(host + page) % len(_OTHER_PATHS)].format(page)
        return f"http://{self._host_names[host]}/{path}"

    def _url_dead(self, host: int, page: int, now: float) -> bool:
        if host not in self._marked:
            return False
        until = self.store.url_dead_until(f"{host}/{page}")
        return until is not None and until > now

    def _open(self, host: int, page: int, p: Page, now: float) -> tuple[Decision, State | str]:
        """Decide one request; send the HEAD probe when that is the decision."""
        if self._url_dead(host, page, now):
            return SKIP, "url-dead"
        decision, state = self._decide(host, now)
        if decision is SKIP and state is State.COLD:
            decision = self.policy.for_url(decision, state, self._url(host, page))
            self.robots_only = self.policy.cold_contacts
        if decision is PROBE:
            self.requests += 1
            self.heads += 1
            self._record_verdict(host, now, HEAD, self.judge.probe(p[2], page == 0))
            decision, state = self._decide(host, now)
            if decision is PROBE:  # no verdict stamped: the middleware goes on as unknown
                decision = FTB
        return decision, state

    # ------------------------------------------------------------ outcomes

    def _limited(self, host: int, p: Page, decision: Decision, at: float) -> Page:
        """A request sent at full speed past a rate-limited host's burst got 429 with Retry-After:
        the plugin's politeness slows the slot (its real rule), and Scrapy's RetryMiddleware sends
        the request again through it; the retry passes when the slot now waits long enough. The
        plugin (below RetryMiddleware) sees only the final answer."""
        self.limited += 1
        name, domain = self._host_names[host], self.names[host]
        ra = self.retry_afters[host]
        limited = (w.BURST_LIMITED, w.BURST_LIMITED, p[2], p[3])
        if self.politeness and self.manners.answered(name, domain, 429, ra, at):
            self.manners.pauses.pause(name)  # Retry-After over the cap: paused, the retry dropped
            return limited
        tries, passed = 0, False
        while tries < self.retries and not passed:
            tries += 1
            passed = self.manners.send(name, domain, at) * self.bursts[host] >= ra
            if not passed and self.politeness:
                self.manners.answered(name, domain, 429, ra, at)
        self.requests += tries
        if decision is BROWSER:
            self.renders += tries
        return p if passed else limited

    def _close(self, host: int, page: int, p: Page, decision: Decision, at: float, limited: bool = False) -> bool:
        """Record what a sent request got (and its browser re-issue); True if contacts were found."""
        if limited:
            p = self._limited(host, p, decision, at)
        get, tab, _, has = p
        contact = has is True  # what the plugin's classifier says (a misjudged page: empty)
        judge = self.judge
        nav = self.navs is not None and page < self.navs[host]
        if decision is BROWSER:
            answer = judge.answer(tab, True, False, contact, navigation=nav)
            self._manners(host, tab, at + 1.0)
            if answer.record is not None:
                self._record_verdict(host, at + 1.0, TAB, answer.record)
            self._got = self._got or tab == w.OK
            return bool(has) and tab == w.OK
        # (the runtime's rule: a friendly domain's fetched page is not scanned for contacts; read
        # at the time the page is recorded)
        scanned = self.hosts[host] is not None or self.policy.usefulness_moves(
            self.store.get(self.names[host]), at + 0.5
        )
        answer = judge.answer(get, False, decision is FTB, contact, navigation=nav, scanned=scanned)
        reissue = answer.reissue
        if self._manners(host, get, at + 0.5) and reissue and get in FAILURES:
            reissue = False  # the host keeps timing out: a browser would wait for the same server
        if answer.record is not None:
            self._record_verdict(host, at + 0.5, GET, answer.record)
        if answer.url_dead:
            self.store.mark_url_dead(f"{host}/{page}", at + self.url_dead_ttl)
            self._marked.add(host)
        if not reissue:
            self._got = self._got or get == w.OK
            return bool(has) and get == w.OK
        self.requests += 1
        self.renders += 1
        shell = answer.reason == evidence.JS_SHELL
        rendered = judge.answer(tab, True, True, contact, reissued=True, after_shell=shell, navigation=nav)
        self._manners(host, tab, at + 1.0)
        if rendered.record is not None:
            self._record_verdict(host, at + 1.0, TAB, rendered.record)
        self._got = self._got or tab == w.OK
        return bool(has) and tab == w.OK

    def _manners(self, host: int, result: int, at: float) -> bool:
        """The manager's host pauses on an answer (a failure streak, a pause recorded as the
        visit's dead verdict) and a rate-limited host's slot on a success. True when the host's
        last requests failed this way (``HostPauses.failing``)."""
        pauses = self.manners.pauses
        name = self._host_names[host]
        if result in FAILURES:
            if pauses.failed(name, VERDICTS[result].error_class):
                self._record_verdict(host, at, GET, _PAUSED)
            return pauses.failing(name)
        if pauses.tracking:
            pauses.succeeded(name)
        if self.bursts[host] and self.politeness and result == w.OK:
            self.manners.answered(name, self.names[host], 200, None, at)
        return False

    # ------------------------------------------------------------ a visit

    def visit(self, host: int, pages: list[Page], now: float, pace: float) -> int:
        """One visit of a host's pages from ``now``; returns a bit per page whose contacts were found."""
        self.requests = self.renders = self.heads = 0
        self._decided = None
        self._fast = 0
        self._got = False
        self.robots_only = False
        name = self._host_names[host]
        burst = self.bursts[host]
        paused = self.manners.pauses.paused
        found = 0
        why: list[tuple[Decision, State | str]] = []
        inflight: deque[tuple[int, Decision, float, bool]] = deque()
        window = self.window
        opened = canaried = False
        for page, p in enumerate(pages):
            if page == 1 and self.discover and not self._got:
                # pages discovered from the root: it gave no page, no other URL is known
                why.extend((SKIP, "undiscovered") for _ in pages[1:])
                break
            if len(inflight) >= window:  # the outcome of the oldest request in flight returns
                found |= self._finish(host, pages, inflight.popleft())
            decision, state = (SKIP, "paused") if paused and name in paused else self._open(host, page, p, now)
            # (the manager skips a paused host's requests when they are sent)
            lead = False
            if not opened and decision is not SKIP:
                lead = self.policy.leads(state, decision, canaried)
                if lead and state is State.ANTIBOT_HARD:  # its canary: a plain fetch, browser fallback
                    canaried = True
                    decision = FTB
                    self.canaries += 1
                elif not lead and state is not State.UNKNOWN:
                    opened = True
            why.append((decision, state))
            if decision is not SKIP:
                self.requests += 1
                self.renders += decision is BROWSER
                limited = burst > 0 and self._at_full_speed(host, name, burst, now)
                if lead or (self.discover and page == 0):
                    # alone: its outcome is in before the next page is decided (a root whose
                    # links are the other pages is, too)
                    for sent in inflight:
                        found |= self._finish(host, pages, sent)
                    inflight.clear()
                    self._last = None
                    found |= self._finish(host, pages, (page, decision, now, limited))
                    if lead:
                        opened = self._last is not Outcome.DEAD
                else:
                    inflight.append((page, decision, now, limited))
            now += pace
        for sent in inflight:
            found |= self._finish(host, pages, sent)
        self.why = why
        return found

    def _at_full_speed(self, host: int, name: str, burst: int, now: float) -> bool:
        """A request to a rate-limited host leaves its slot: True when it goes past the burst at
        full speed (the slot's delay, the plugin's politeness, too short for the host's limit)."""
        if self.manners.send(name, self.names[host], now) * burst >= self.retry_afters[host]:
            return False
        self._fast += 1
        return self._fast > burst

    def _finish(self, host: int, pages: list[Page], sent: tuple[int, Decision, float, bool]) -> int:
        page, decision, at, limited = sent
        return self._close(host, page, pages[page], decision, at, limited) << page

    def start_round(self, now: float) -> None:
        """A crawl begins: the manners start afresh (the learned delays are in the store), and
        the dead holds of earlier visits end (as the manager's open)."""
        self.manners.start(now)
        self.store.policy.crawl_started = now

    def end_round(self, now: float) -> None:
        """A crawl ends: its learned delays are saved, as the manager does when it closes."""
        self.manners.end(now)
