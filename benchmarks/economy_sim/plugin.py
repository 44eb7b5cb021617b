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
HEAD probe: after a dead signal the next request leads in turn) and so does the first request
of an ``antibot-hard`` host (its canary: a plain fetch with the browser fallback).
"""

from __future__ import annotations

from collections import deque
from typing import Any

from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.policy import Decision, Policy
from scrapy_domainstate.core.record import Method, Outcome, RecentEntry, State
from scrapy_domainstate.detect import evidence
from scrapy_domainstate.store.base import DomainStore

from . import world as w
from .answers import Judge
from .world import Page

__all__ = ["PluginVisit"]

SKIP, PROBE, FTB, BROWSER = Decision.SKIP, Decision.PROBE, Decision.FETCH_THEN_BROWSER, Decision.BROWSER
HEAD, GET, TAB = Method.HEAD, Method.FETCH, Method.TAB
_INF = float("inf")


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
        if decision is PROBE:
            self.requests += 1
            self.heads += 1
            self._record_verdict(host, now, HEAD, self.judge.probe(p[2], page == 0))
            decision, state = self._decide(host, now)
            if decision is PROBE:  # no verdict stamped: the middleware goes on as unknown
                decision = FTB
        return decision, state

    # ------------------------------------------------------------ outcomes

    def _close(self, host: int, page: int, p: Page, decision: Decision, at: float) -> bool:
        """Record what a sent request got (and its browser re-issue); True if contacts were found."""
        get, tab, _, has = p
        contact = has is True  # what the plugin's classifier says (a misjudged page: empty)
        judge = self.judge
        nav = self.navs is not None and page < self.navs[host]
        if decision is BROWSER:
            answer = judge.answer(tab, True, False, contact, navigation=nav)
            if answer.record is not None:
                self._record_verdict(host, at + 1.0, TAB, answer.record)
            return bool(has) and tab == w.OK
        answer = judge.answer(get, False, decision is FTB, contact, navigation=nav)
        if answer.record is not None:
            self._record_verdict(host, at + 0.5, GET, answer.record)
        if answer.url_dead:
            self.store.mark_url_dead(f"{host}/{page}", at + self.url_dead_ttl)
            self._marked.add(host)
        if not answer.reissue:
            return bool(has) and get == w.OK
        self.requests += 1
        self.renders += 1
        shell = answer.reason == evidence.JS_SHELL
        rendered = judge.answer(tab, True, True, contact, reissued=True, after_shell=shell, navigation=nav)
        if rendered.record is not None:
            self._record_verdict(host, at + 1.0, TAB, rendered.record)
        return bool(has) and tab == w.OK

    # ------------------------------------------------------------ a visit

    def visit(self, host: int, pages: list[Page], now: float, pace: float) -> int:
        """One visit of a host's pages from ``now``; returns a bit per page whose contacts were found."""
        self.requests = self.renders = self.heads = 0
        self._decided = None
        found = 0
        why: list[tuple[Decision, State | str]] = []
        inflight: deque[tuple[int, Decision, float]] = deque()
        window = self.window
        opened = canaried = False
        for page, p in enumerate(pages):
            if len(inflight) >= window:  # the outcome of the oldest request in flight returns
                found |= self._finish(host, pages, inflight.popleft())
            decision, state = self._open(host, page, p, now)
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
                if lead:  # alone: its outcome is in before the next page is decided
                    for sent in inflight:
                        found |= self._finish(host, pages, sent)
                    inflight.clear()
                    self._last = None
                    found |= self._finish(host, pages, (page, decision, now))
                    opened = self._last is not Outcome.DEAD
                else:
                    inflight.append((page, decision, now))
            now += pace
        for sent in inflight:
            found |= self._finish(host, pages, sent)
        self.why = why
        return found

    def _finish(self, host: int, pages: list[Page], sent: tuple[int, Decision, float]) -> int:
        page, decision, at = sent
        return self._close(host, page, pages[page], decision, at) << page
