"""The domain state machine: pure functions of a record, an observation and the clock.

No Scrapy, no I/O; ``now`` is always passed in, so a simulator or a test can
drive it with a fake clock. States and their rules (``docs/SPEC.md`` section 2, revised)::

    unknown ──2 dead signals──────────────▶ dead         (skip; 12 h hold after one visit,
       │                                                  30 d once confirmed on a later
       │                                                  visit, doubling up to 180 d)
       │ ──any antibot signal─────────────▶ antibot-soft (fetch, browser fallback,
       │                                                  7 d sliding → unknown)
       │        antibot-soft ──3 antibot plain requests in a row, no plain pass in recent /
       │                       hard block──▶ antibot-hard (browser only but a canary per
       │                                                  visit; a plain pass → soft;
       │                                                  90 d → antibot-soft)
       │ ──≥70 % useful of last ≤10 fetches (≥5 in its life)──▶ friendly (fetch with
       │                                                  browser fallback, no TTL; 5 failed
       │                                                  fetches → unknown, an antibot
       │                                                  outcome → antibot-soft)
       └─ (any live state) 10 ok-empty in a row over two visits, never a useful page
                                                  ──▶ cold (skip, 90 d)
    (any state) a parked home page (a parking or for-sale lander) ──▶ dead, reason
                                                  ``parked (<service>)``: one signal is enough,
                                                  held and confirmed like any dead

Streaks are counted from the tail of ``recent``, so they reset on any outcome
that breaks them. The antibot streak reads plain requests only (a render neither
breaks nor extends it; a 429 neither). Lifetime counters survive expiry.

Navigation pages (``items``: follow-ups, no item) neither extend nor break the
empty streak and are not in friendly's ratio.

Facts live beside the state: a domain learned as client-rendered
(``browser_since``) is rendered at once while ``unknown`` or ``antibot-soft``;
every fact of a host that is neither the registrable domain nor its ``www.`` is
kept in a record of its own (:meth:`Policy.for_host`, :meth:`Policy.decide_with_host`);
what a site is worth to a purpose other than contacts is kept in a record of its
own too (:meth:`Policy.decide_with_worth`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from scrapy_domainstate.core.clock import FUTURE_MARGIN
from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.keys import names_contacts
from scrapy_domainstate.core.record import FETCHED, DomainStat, Method, Outcome, RecentEntry, State

#: ``error_class`` of a render that followed a plain fetch answered with a
#: script-only shell (the shell itself is not evidence): the browser-learning rule reads it.
SHELL_RENDER = "js-shell"
#: A rate limit: an antibot outcome that neither extends nor breaks the antibot streak.
RATE_LIMIT_STATUS = 429
#: The error class of a pause (``paused:timeout``): a host that stopped answering for a visit.
PAUSED_PREFIX = "paused:"
#: ``error_class`` of a friendly domain's page recorded as navigation without a contact scan
#: (:meth:`Policy.usefulness_moves`).
NOT_SCANNED = "not-scanned"

__all__ = ["Decision", "Policy", "Transition", "parked_service"]


class Decision(str, Enum):
    SKIP = "skip"
    PROBE = "probe"
    FETCH = "fetch"
    FETCH_THEN_BROWSER = "fetch-then-browser"
    BROWSER = "browser"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class Transition:
    domain: str
    old: State
    new: State
    at: float
    reason: str


#: Where a state goes when its TTL runs out.
EXPIRES_TO = {
    State.UNKNOWN: State.UNKNOWN,
    State.DEAD: State.UNKNOWN,
    State.ANTIBOT_SOFT: State.UNKNOWN,
    State.ANTIBOT_HARD: State.ANTIBOT_SOFT,
    State.FRIENDLY: State.UNKNOWN,
    State.COLD: State.UNKNOWN,
}

_DECISIONS = {
    State.DEAD: Decision.SKIP,
    State.COLD: Decision.SKIP,
    State.ANTIBOT_SOFT: Decision.FETCH_THEN_BROWSER,
    State.ANTIBOT_HARD: Decision.BROWSER,
    State.FRIENDLY: Decision.FETCH,
}

_FAILED = frozenset({Outcome.HTTP_ERROR, Outcome.NETWORK_ERROR, Outcome.ANTIBOT, Outcome.DEAD})
#: ``error_class`` prefix of an invalid certificate's dead signal.
_TLS_PREFIX = "tls:"
_SUCCESS = FETCHED
_COLD_FROM = frozenset({State.UNKNOWN, State.ANTIBOT_SOFT, State.ANTIBOT_HARD, State.FRIENDLY})


def parked_service(error_class: str | None) -> str:
    """The service of a ``parked`` outcome's ``'parked:<service>'`` evidence (``'unknown'``)."""
    prefix, _, service = (error_class or "").partition(":")
    return service if prefix == "parked" and service else "unknown"


def _empty_streak(recent: list[RecentEntry]) -> list[RecentEntry]:
    """The ``ok-empty`` entries in a row, from the tail, newest first (navigation pages
    neither extend nor break the streak)."""
    streak = []
    for entry in reversed(recent):
        outcome = entry.outcome
        if outcome is Outcome.NAVIGATION:
            continue
        if outcome is not Outcome.OK_EMPTY:
            break
        streak.append(entry)
    return streak


def _plain(entry: RecentEntry) -> bool:
    """A plain request (HEAD, GET) that met no rate limit: what the antibot streak reads."""
    return entry.method is not Method.TAB and entry.status != RATE_LIMIT_STATUS


def _antibot_streak(recent: list[RecentEntry]) -> int:
    """Antibot outcomes of plain requests (HEAD, GET) in a row, from the tail.

    Renders are skipped (they neither break nor extend it), and so are 429s."""
    n = 0
    for entry in reversed(recent):
        if not _plain(entry):
            continue
        if entry.outcome is not Outcome.ANTIBOT:
            break
        n += 1
    return n


def _plain_passed(recent: list[RecentEntry]) -> bool:
    """Whether a plain fetch in the recent history got a page (a site whose walls stand only
    part of the time is never ``antibot-hard``)."""
    return any(e.method is Method.FETCH and e.outcome in _SUCCESS for e in recent)


#: Visits a pause needs to confirm dead on a host that never answered (dead signals need 2).
_PAUSE_CONFIRM_VISITS = 3


def _paused(stat: DomainStat) -> bool:
    """Whether the record's last entry is a host pause (its requests timed out in a row)."""
    return bool(stat.recent) and (stat.recent[-1].error_class or "").startswith(PAUSED_PREFIX)


def _count(stat: DomainStat, entry: RecentEntry) -> None:
    """Add one observation to the record's lifetime counters."""
    if entry.method is Method.FETCH:
        stat.fetch_total += 1
        if entry.outcome is Outcome.OK_CONTACT:
            stat.fetch_ok += 1
        elif entry.outcome is Outcome.OK_EMPTY:
            stat.fetch_ok_empty += 1
    elif entry.method is Method.TAB:
        stat.tab_total += 1
        if entry.outcome is Outcome.OK_CONTACT:
            stat.tab_ok += 1
    if entry.outcome in _SUCCESS:
        stat.dead_visits = 0  # seen alive: a later dead verdict starts a new chain


def _shell_renders(recent: list[RecentEntry]) -> int:
    """Pages in a row whose plain fetch was a shell that the browser then rendered."""
    n = 0
    for entry in reversed(recent):
        if entry.method is Method.HEAD:
            continue
        if not (entry.method is Method.TAB and entry.error_class == SHELL_RENDER and entry.outcome in _SUCCESS):
            break
        n += 1
    return n


_HOST_SKIP = frozenset({State.DEAD, State.COLD})


class Policy:
    """Answers two questions: what to do for a domain now, and where an outcome moves it."""

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or Config()
        self._ttl = dict(self.config.ttl)
        #: rule 3's option: a cold domain's contact pages are fetched
        self.cold_contacts = self.config.cold_contact_pages and self.config.outcome == "contacts"
        #: a friendly domain's pages are recorded unscanned (:meth:`usefulness_moves`)
        self.skips_friendly_scan = not self.config.scan_friendly and self.config.outcome == "contacts"
        #: When this process's crawl began (the manager sets it when the spider opens; the
        #: simulator at each round). A ``dead`` hold made on an earlier visit (at least
        #: ``DOMAINSTATE_DEAD_CONFIRM_AFTER`` before it) is over for this crawl (:meth:`_ended`): a hold is for
        #: the rest of the visit that found it, and a daily crawl can come back in under 12 h.
        #: 0 outside a crawl (the command line, the service): holds last their TTL.
        self.crawl_started = 0.0

    # ------------------------------------------------------------ helpers

    def new(self, domain: str, now: float) -> DomainStat:
        """A record for a domain seen for the first time."""
        return DomainStat(
            domain=domain,
            state=State.UNKNOWN,
            first_seen=now,
            last_seen=now,
            state_changed_at=now,
            state_expires_at=self.expiry(State.UNKNOWN, now),
        )

    def expiry(self, state: State, now: float) -> float | None:
        ttl = self._ttl[state]
        return None if ttl is None else now + ttl

    def is_expired(self, stat: DomainStat, now: float) -> bool:
        return stat.state_expires_at is not None and now >= stat.state_expires_at

    def _ended(self, state: State, changed_at: float, expires: float | None, now: float) -> bool:
        """Whether a state's time is up at ``now``: it expired, or it is a ``dead`` hold (not a
        confirmed verdict) made on a visit before this crawl, which is the later visit that
        confirms it or finds the host again. (:meth:`is_expired` alone says what the sweep may
        delete: a hold is not deleted.)"""
        if expires is None:
            return False
        if now >= expires:
            return True
        return (
            state is State.DEAD
            and self.crawl_started - changed_at >= self.config.dead_confirm_after
            and expires - changed_at <= self.config.dead_hold
        )

    def _lapse(self, stat: DomainStat, now: float) -> None:
        """End a state whose time is up (:meth:`_ended`): an earlier visit's hold from when this
        crawl began."""
        expires = stat.state_expires_at
        if expires is not None and now < expires:
            stat.state_expires_at = min(max(self.crawl_started, stat.state_changed_at), now)
        self._expire(stat, now)

    def current(self, stat: DomainStat | None, domain: str, now: float) -> DomainStat:
        """The record as it stands at ``now``: new if missing, lazily expired, its future
        stamps brought back to ``now`` (see :meth:`_rebase_future`).

        Returns ``stat`` itself when nothing changes, a modified copy otherwise.
        """
        if stat is None:
            return self.new(domain, now)
        if stat.state_changed_at > now + FUTURE_MARGIN or stat.last_seen > now + FUTURE_MARGIN:
            stat = stat.copy()
            self._rebase_future(stat, now)
        if self._ended(stat.state, stat.state_changed_at, stat.state_expires_at, now):
            stat = stat.copy()
            self._lapse(stat, now)
        return stat

    def _rebase_future(self, stat: DomainStat, now: float) -> None:
        """Bring stamps made while the clock ran ahead (more than FUTURE_MARGIN past ``now``)
        back to ``now``.

        Such a record would otherwise hold its state for the jump on top of its TTL and sort
        as the most recently seen until the clock caught up. A skip verdict (dead, cold) made
        on those stamps is not trusted: it expires now, so the domain is checked again; a
        dead verdict *confirmed* on them (a "later visit" that may have been seconds later,
        across the jump) counts as one visit again. Other states keep their TTL's length,
        from ``now``.
        """
        limit = now + FUTURE_MARGIN
        if stat.last_seen > limit:
            stat.last_seen = now
        if stat.first_seen > limit:
            stat.first_seen = now
        if stat.probed_at > limit:
            stat.probed_at = now
        if stat.browser_since > limit:
            stat.browser_since = now
        if stat.dead_at > limit:
            stat.dead_at = now
            if stat.dead_visits >= 2:
                stat.dead_visits -= 1
        if stat.state_changed_at > limit:
            if stat.state in _HOST_SKIP:
                stat.state_expires_at = now
            elif stat.state_expires_at is not None:
                stat.state_expires_at = now + max(0.0, stat.state_expires_at - stat.state_changed_at)
            stat.state_changed_at = now

    def _expire(self, stat: DomainStat, now: float) -> None:
        # A record can sit unread through several TTLs (antibot-hard -> soft ->
        # unknown): walk the chain from the old expiry, so the result does not
        # depend on when it is read.
        while stat.state_expires_at is not None and now >= stat.state_expires_at:
            at = stat.state_expires_at
            new_state = EXPIRES_TO[stat.state]
            ttl = self._ttl[new_state]
            if new_state is stat.state and ttl is not None and now - at >= ttl:
                # unknown -> unknown: skip the whole periods at once, so a read
                # stays O(1) however long the record sat unread (1 s TTL, 1 year).
                at += ((now - at) // ttl) * ttl
            renewal = new_state is stat.state
            stat.state = new_state
            stat.state_changed_at = at
            stat.state_expires_at = self.expiry(new_state, at)
            if not renewal or self.config.renewal_clears_recent:
                stat.recent = []
            stat.probed_at = 0.0

    def set_state(self, stat: DomainStat, state: State, now: float, ttl: float | None = -1.0) -> DomainStat:
        """Force a state (operators, imports, remote consensus). ``ttl=-1``: the state's default."""
        stat = stat.copy()
        stat.state = state
        stat.state_changed_at = now
        stat.state_expires_at = self.expiry(state, now) if ttl == -1.0 else (None if ttl is None else now + ttl)
        stat.probed_at = 0.0
        if state is State.UNKNOWN:
            # Back to re-evaluation, like an expiry: old streaks must not carry over
            # (one dead-looking HEAD plus an old dead entry would make it dead at once).
            stat.recent = []
        return stat

    # ----------------------------------------------------------- decisions

    def decide_state(self, state: State, probed_at: float, changed_at: float, browser: bool = False) -> Decision:
        """The decision from the header fields (``browser``: learned as needing the browser)."""
        if browser and (state is State.UNKNOWN or state is State.ANTIBOT_SOFT):
            return Decision.BROWSER
        if state is State.UNKNOWN:
            if self.config.head_probe and not probed_at:
                return Decision.PROBE
            return Decision.FETCH_THEN_BROWSER
        if state is State.FRIENDLY and self.config.friendly_fallback:
            return Decision.FETCH_THEN_BROWSER
        return _DECISIONS[state]

    def for_url(self, decision: Decision, state: State, url: str) -> Decision:
        """The domain's decision for one URL. Rule 3's option (``DOMAINSTATE_COLD_CONTACT_PAGES``,
        contacts outcome only): a page whose URL says it holds contacts (:func:`.keys.names_contacts`)
        is fetched while the domain is ``cold``; the rest of a cold domain is skipped."""
        if decision is Decision.SKIP and state is State.COLD and self.cold_contacts and names_contacts(url):
            return Decision.FETCH
        return decision

    def usefulness_moves(self, stat: DomainStat | None, now: float) -> bool:
        """Whether what a fetched page holds (useful or empty) can move this record, i.e. whether
        the page is worth a contact scan. Not for a ``friendly`` domain that has yielded a useful
        page: a domain that ever did is never ``cold``, and ``friendly`` leaves only on failures
        and walls. Such a page is recorded as :data:`NOT_SCANNED` navigation (it proves the site
        alive and breaks the failure and anti-bot streaks, like any fetched page). Always True
        with ``DOMAINSTATE_SCAN_FRIENDLY`` or an outcome source other than contacts; True when
        the state has run out at ``now`` (a ``friendly`` TTL of the user's: the page is the
        first evidence of the new ``unknown`` period, and counts toward ``friendly`` again)."""
        return (
            not self.skips_friendly_scan
            or stat is None
            or stat.state is not State.FRIENDLY
            or stat.fetch_ok + stat.tab_ok == 0
            or (stat.state_expires_at is not None and stat.state_expires_at <= now)
        )

    def leads(self, state: State, decision: Decision, canaried: bool) -> bool:
        """Whether a domain's first request of a visit goes alone, the others waiting for its
        outcome: an ``unknown`` domain's probe (with ``probe_alone`` and no HEAD probe), an
        ``antibot-soft`` domain's first fetch (with ``probe_alone``), or an ``antibot-hard``
        domain's canary (once per visit, ``canaried``: sent already). The canary is sent as a
        plain fetch with the browser fallback (``Decision.FETCH_THEN_BROWSER``)."""
        if state is State.UNKNOWN:
            cfg = self.config
            return cfg.probe_alone and not cfg.head_probe and decision is Decision.FETCH_THEN_BROWSER
        if state is State.ANTIBOT_SOFT:
            # its first answer may make it hard (a wall whose plain fetches never passed): the
            # other pages then go to the browser without a plain fetch each
            return self.config.probe_alone and decision is Decision.FETCH_THEN_BROWSER and not canaried
        return state is State.ANTIBOT_HARD and decision is Decision.BROWSER and not canaried

    def decide(self, stat: DomainStat | None, now: float) -> Decision:
        """What to do with a request for this domain at ``now``."""
        if stat is None:
            return Decision.PROBE if self.config.head_probe else Decision.FETCH_THEN_BROWSER
        if stat.state_changed_at > now + FUTURE_MARGIN or self._ended(
            stat.state, stat.state_changed_at, stat.state_expires_at, now
        ):
            stat = self.current(stat, stat.domain, now)
        return self.decide_state(stat.state, stat.probed_at, stat.state_changed_at, bool(stat.browser_since))

    def decision(self, stat: DomainStat | None, domain: str, now: float) -> tuple[Decision, State, float | None]:
        """``(decision, state, state_expires_at)`` of a whole record at ``now`` (``None``: not
        stored, decided as a new domain). What a store's :meth:`~.DomainStore.decide` answers."""
        if stat is None:
            return self.decide(None, now), State.UNKNOWN, self.expiry(State.UNKNOWN, now)
        stat = self.current(stat, domain, now)
        return self.decide(stat, now), stat.state, stat.state_expires_at

    def header_decision(
        self, state: State, expires: float | None, changed_at: float, probed_at: float, browser: bool, now: float
    ) -> tuple[Decision, State, float | None] | None:
        """:meth:`decision` from a record's header fields alone (``codec.decode_decision``), or
        ``None`` when they are not enough: the state has expired (the expiry chain needs the
        whole record) or was stamped by a clock that ran ahead."""
        # (``expires is not None`` first: a state with no TTL, such as friendly, costs no call here)
        if changed_at > now + FUTURE_MARGIN or (expires is not None and self._ended(state, changed_at, expires, now)):
            return None
        return self.decide_state(state, probed_at, changed_at, browser), state, expires

    def stands(self, stat: DomainStat, now: float) -> bool:
        """Whether ``stat`` is the record as it stands at ``now`` (:meth:`current` would return it
        unchanged): its state not expired, no stamp of a clock that ran ahead."""
        limit = now + FUTURE_MARGIN
        return (
            stat.state_changed_at <= limit
            and stat.last_seen <= limit
            and not self._ended(stat.state, stat.state_changed_at, stat.state_expires_at, now)
        )

    # ------------------------------------------------------------ outcomes

    def observe(
        self, stat: DomainStat | None, domain: str, entry: RecentEntry, rebase: bool = True
    ) -> tuple[DomainStat, Transition | None]:
        """Apply one observation; returns the new record and the transition, if any.

        Never mutates ``stat``. ``rebase``: ``entry`` is fresh (its time is the clock's now),
        so the record's stamps past it are brought back (:meth:`_rebase_future`); a store
        re-applying buffered entries, which may be older than what another process wrote
        meanwhile, passes False.
        """
        # The hot path of every download: current() and _transition() inlined, the
        # common checks done here before any call (same rules, same order).
        now = entry.at
        if stat is None:
            start_state = State.UNKNOWN
            new = self.new(domain, now)
        else:
            start_state = stat.state
            new = stat.copy()
            if rebase and (new.state_changed_at > now + FUTURE_MARGIN or new.last_seen > now + FUTURE_MARGIN):
                self._rebase_future(new, now)
            if self._ended(new.state, new.state_changed_at, new.state_expires_at, now):
                self._lapse(new, now)
        new.last_seen = max(new.last_seen, now)
        # Entries from several processes may arrive out of order.
        if not new.first_seen or now < new.first_seen:
            new.first_seen = now

        method = entry.method
        if method is Method.HEAD:
            new.probed_at = now
        if entry.outcome is Outcome.NO_VERDICT:
            return new, None if start_state is new.state else Transition(domain, start_state, new.state, now, "expired")

        _count(new, entry)
        recent = new.recent
        recent.append(entry)
        overflow = len(recent) - self.config.recent_size
        if overflow > 0:
            del recent[:overflow]
        if new.browser_since or (method is Method.TAB and entry.error_class == SHELL_RENDER):
            self._learn_browser(new, entry)

        reason = self._next(new, entry)
        if reason is not None:
            target, why = reason
            if target is not new.state:
                why = self._enter(new, target, why, now)
                return new, self._transition(domain, start_state, new, now, why)
            if target is State.ANTIBOT_SOFT:
                # Sliding TTL: every new antibot signal restarts it.
                new.state_expires_at = self.expiry(target, now)
        return new, None if start_state is new.state else Transition(domain, start_state, new.state, now, "expired")

    def _enter(self, new: DomainStat, target: State, why: str, now: float) -> str:
        """Move ``new`` into ``target`` at ``now``; returns ``why`` with any dead-hold detail."""
        if new.state is State.FRIENDLY and target is State.UNKNOWN:
            # Demotion is friendly's "on expiry" (docs/SPEC.md section 2): `recent` is
            # cleared as on any expiry, so no friendly-era failure counts as a
            # dead or antibot signal of the new unknown period.
            new.recent = []
        new.state = target
        new.state_changed_at = now
        if target is State.DEAD:
            new.state_expires_at, held = self._dead_expiry(new, now)
            why = f"{why}; {held}"
        else:
            new.state_expires_at = self.expiry(target, now)
        if target is State.UNKNOWN:
            new.probed_at = 0.0
        return why

    def _learn_browser(self, stat: DomainStat, entry: RecentEntry) -> None:
        """Rule 7: pages whose plain fetch is a shell the browser renders make the domain
        browser-first; after ``browser_learn_ttl`` plain fetches are tried again."""
        cfg = self.config
        if stat.browser_since:
            if entry.at - stat.browser_since >= cfg.browser_learn_ttl or (
                entry.method is Method.FETCH and entry.outcome in _SUCCESS and entry.error_class != SHELL_RENDER
            ):
                stat.browser_since = 0.0
        elif (
            entry.method is Method.TAB
            and entry.error_class == SHELL_RENDER
            and _shell_renders(stat.recent) >= min(cfg.browser_learn, cfg.recent_size)
        ):
            stat.browser_since = entry.at

    def _dead_expiry(self, stat: DomainStat, now: float) -> tuple[float | None, str]:
        """Rule 4: one visit's dead signals hold the domain; a later visit confirms it.

        A pause (the host's requests timed out in a row) is weaker: a timeout is not a dead
        signal. On a host that has answered (a page, useful or empty) it is held for its visit
        and never confirmed, since such a host is down part of the time, not gone; on a host
        that never answered, pauses on :data:`_PAUSE_CONFIRM_VISITS` visits confirm it. Dead
        signals on a host that has answered are confirmed on the third visit, not the second."""
        cfg = self.config
        full = self._ttl[State.DEAD]
        paused = _paused(stat)
        answered = stat.fetch_ok + stat.fetch_ok_empty + stat.tab_ok
        if paused and answered:
            ttl = cfg.dead_hold if full is None else min(cfg.dead_hold, full)
            return now + ttl, f"held {ttl:g} s (timeouts on a host that has answered: never confirmed)"
        if not stat.dead_visits or self._later_visit(stat, now):
            stat.dead_visits += 1
            stat.dead_at = now
        # A host that has answered before needs one visit more (a DNS outage on two visits in a
        # row is far likelier than on three); one that never did, two.
        need = _PAUSE_CONFIRM_VISITS if paused or answered else 2
        if stat.dead_visits < need:
            ttl = cfg.dead_hold if full is None else min(cfg.dead_hold, full)
            return now + ttl, f"held {ttl:g} s until a later visit confirms it"
        if full is None:
            return None, f"confirmed on visit {stat.dead_visits}"
        ttl = min(full * 2.0 ** min(stat.dead_visits - need, 64), max(cfg.dead_ttl_max, full))
        return now + ttl, f"confirmed on visit {stat.dead_visits}, for {ttl:g} s"

    @staticmethod
    def _transition(domain: str, old: State, new: DomainStat, now: float, why: str) -> Transition | None:
        if old is new.state:
            return None
        return Transition(domain, old, new.state, now, why)

    def _next(self, stat: DomainStat, entry: RecentEntry) -> tuple[State, str] | None:
        """The rule that fires for this entry, as ``(target state, reason)``."""
        cfg = self.config
        state = stat.state
        outcome = entry.outcome

        if outcome is Outcome.ANTIBOT:
            return self._antibot(stat, entry)

        if outcome is Outcome.PARKED:
            return self._parked(stat, entry)

        if (
            outcome is Outcome.OK_EMPTY
            and state in _COLD_FROM
            and stat.fetch_ok + stat.tab_ok == 0
            and entry.at - stat.first_seen >= cfg.cold_confirm_after
            and self._cold_streak(stat)
        ):
            # Confirmed across visits: the domain was known (never useful) an earlier visit ago.
            return State.COLD, f"{cfg.cold_threshold} ok-empty outcomes in a row, never a useful page in two visits"

        if state is State.UNKNOWN:
            if outcome is Outcome.DEAD:
                return self._maybe_dead(stat, entry)
            if entry.method is Method.FETCH and outcome is Outcome.OK_CONTACT:
                return self._maybe_friendly(stat)
            return None

        if state is State.FRIENDLY:
            if entry.method is Method.FETCH and outcome in _FAILED:
                return self._friendly_failure(stat)
            return None

        if state is State.ANTIBOT_HARD:
            if entry.method is Method.FETCH and outcome in _SUCCESS:
                # The visit's canary (a plain fetch) passed: the wall is down or soft now.
                return State.ANTIBOT_SOFT, "a plain fetch passed (canary)"
            return None

        # A forced fetch found the site alive / useful again: re-evaluate.
        if (state is State.DEAD and outcome in _SUCCESS) or (state is State.COLD and outcome is Outcome.OK_CONTACT):
            return State.UNKNOWN, f"{outcome} while {state}"
        return None

    def _antibot(self, stat: DomainStat, entry: RecentEntry) -> tuple[State, str] | None:
        cfg = self.config
        state = stat.state
        if state in (State.DEAD, State.COLD):
            return None
        if entry.is_hard_block:
            return State.ANTIBOT_HARD, f"hard block ({entry.error_class})"
        if state is State.FRIENDLY:
            return State.ANTIBOT_SOFT, f"antibot while friendly ({entry.error_class or entry.status or 'challenge'})"
        if _plain(entry) and not _plain_passed(stat.recent) and self._hard_streak(stat):
            return (
                State.ANTIBOT_HARD,
                f"{cfg.antibot_hard_threshold} antibot outcomes of plain requests in a row, none ever passed",
            )
        if state is State.ANTIBOT_HARD:
            return None
        return State.ANTIBOT_SOFT, f"antibot ({entry.error_class or entry.status or 'challenge'})"

    @staticmethod
    def _parked(stat: DomainStat, entry: RecentEntry) -> tuple[State, str] | None:
        """A parking or for-sale home page: a dead signal that needs no second one (a registrar
        or parking service answers every visit with it). Held and confirmed like any dead."""
        if stat.state is State.DEAD or entry.method is Method.HEAD:
            return None
        return State.DEAD, f"parked ({parked_service(entry.error_class)})"

    def _hard_streak(self, stat: DomainStat) -> bool:
        """Whether the antibot streak of plain requests reaches the hard threshold.

        Read from ``recent``; when every plain request in ``recent`` met a wall and no plain
        fetch of the domain ever got a page (lifetime counters), the plain fetches no longer in
        ``recent`` (an expiry cleared them) stand for the part of the streak the expiry cleared
        and count with those in it: a wall that was hard on an earlier visit is hard again at
        its first challenge, not its third, and a two-page wall whose ``antibot-soft`` verdict
        ran out between visits is hard at the next visit's first challenge."""
        threshold = self.config.antibot_hard_threshold
        recent = stat.recent
        if _antibot_streak(recent) >= threshold:
            return True
        plain = [e for e in recent if _plain(e)]
        if stat.fetch_ok + stat.fetch_ok_empty or any(e.outcome is not Outcome.ANTIBOT for e in plain):
            return False
        # (every plain entry is a wall here, so with nothing cleared this is the streak above)
        cleared = stat.fetch_total - sum(1 for e in recent if e.method is Method.FETCH)
        return cleared + len(plain) >= threshold

    def _cold_streak(self, stat: DomainStat) -> bool:
        """Whether a never-useful domain's empty streak reaches the cold threshold.

        The streak is read from ``recent``; when nothing in ``recent`` breaks it (its entries are
        all empty or navigation pages, as after an expiry cleared it), the lifetime count of empty
        fetches stands for the part an expiry cleared. So a cold verdict that ran out is confirmed
        by the next visit's first empty page, as a dead one is by its first dead signal."""
        threshold = self.config.cold_threshold
        recent = stat.recent
        streak = len(_empty_streak(recent))
        if streak >= threshold:
            return True
        unbroken = all(e.outcome is Outcome.OK_EMPTY or e.outcome is Outcome.NAVIGATION for e in recent)
        return unbroken and stat.fetch_ok_empty >= threshold

    def _later_visit(self, stat: DomainStat, at: float) -> bool:
        """Whether ``at`` is a later visit than the record's last dead verdict (``dead_at``)."""
        return at - stat.dead_at >= self.config.dead_confirm_after

    def _maybe_dead(self, stat: DomainStat, entry: RecentEntry) -> tuple[State, str] | None:
        # The dead signals in a row, across unknown's renewals too (recent outlives them; every
        # other way into unknown clears it): a root that answered 404 on the last visit and answers
        # 404 again is two signals, however many weeks apart, with nothing alive in between.
        streak = []
        for e in reversed(stat.recent):
            if e.outcome is not Outcome.DEAD:
                break
            streak.append(e)
        if stat.fetch_ok + stat.tab_ok and all(e.error_class and e.error_class.startswith(_TLS_PREFIX) for e in streak):
            return None  # a site that yielded useful pages is never dead by its certificate alone
        if len(streak) >= self.config.dead_threshold and any(e.method is not Method.HEAD for e in streak):
            return State.DEAD, f"{len(streak)} dead signals in a row ({entry.error_class or entry.status})"
        if streak and (streak[0].error_class or "").startswith(PAUSED_PREFIX):
            # A host paused for a visit (its requests timed out N times in a row): the pause sums
            # up its own streak, so it is a visit's dead verdict by itself (held, then confirmed).
            return State.DEAD, f"paused ({streak[0].error_class})"
        if streak and stat.dead_visits and entry.method is not Method.HEAD and self._later_visit(stat, entry.at):
            # The confirmation visit costs one request: an earlier visit's dead verdict (not
            # broken since by any answer) is confirmed by this visit's first dead signal.
            return State.DEAD, f"a dead signal confirms an earlier visit's ({entry.error_class or entry.status})"
        return None

    def _maybe_friendly(self, stat: DomainStat) -> tuple[State, str] | None:
        cfg = self.config
        if stat.fetch_total < cfg.friendly_min_fetches:
            return None
        # Navigation pages are neither useful nor empty: not in the ratio.
        window = [e for e in stat.recent if e.method is Method.FETCH and e.outcome is not Outcome.NAVIGATION][
            -cfg.friendly_window :
        ]
        if len(window) < min(cfg.friendly_min_window, cfg.friendly_window):
            return None
        ok = sum(1 for e in window if e.outcome is Outcome.OK_CONTACT)
        if ok >= cfg.friendly_ratio * len(window) - 1e-9:
            return State.FRIENDLY, f"{ok}/{len(window)} recent fetches were useful ({stat.fetch_total} in all)"
        return None

    def _friendly_failure(self, stat: DomainStat) -> tuple[State, str] | None:
        n = 0
        for e in reversed(stat.recent):
            if e.method is not Method.FETCH:
                continue
            if e.outcome not in _FAILED:
                break
            n += 1
        if n >= self.config.friendly_demote:
            return State.UNKNOWN, f"{n} failed fetches in a row"
        return None

    # ---------------------------------------------------------- host facts

    @staticmethod
    def for_host(entry: RecentEntry) -> bool:
        """Rule 5: does this outcome of a request to a non-root host go to the host's record?

        Every outcome is the host's: dead signals, usefulness (``cold``, ``friendly``), anti-bot
        and needs-browser evidence (docs/SPEC.md section 2, "facts per hostname")."""
        return entry.outcome is not Outcome.NO_VERDICT

    @staticmethod
    def for_domain(entry: RecentEntry) -> bool:
        """Does this outcome of a request to a non-root host also go to the domain's record?

        Nothing that is a fact of the host: its dead signals, usefulness, anti-bot and
        needs-browser evidence are its own (docs/SPEC.md section 2, "facts per hostname"); the
        domain's record is its root host's, and the prior of a host never seen."""
        return False

    @staticmethod
    def host_entry(entry: RecentEntry) -> RecentEntry | None:
        """What the host's record gets of an outcome of a request to it: the entry itself
        (:meth:`for_host`), or, for a HEAD probe whose verdict is the domain's, a
        ``no-verdict`` HEAD (the host's probe of the period was sent), or nothing."""
        if Policy.for_host(entry):
            return entry
        if entry.method is Method.HEAD:
            return RecentEntry(entry.at, Method.HEAD, Outcome.NO_VERDICT, entry.status, entry.error_class)
        return None

    @staticmethod
    def domain_entry(entry: RecentEntry) -> RecentEntry | None:
        """What the domain's record gets of an outcome of a request to a non-root host: for a
        HEAD probe, a ``no-verdict`` HEAD (the probe of the period was sent); else nothing
        (:meth:`for_domain`: every fact of the host is its own)."""
        if entry.method is Method.HEAD:
            return RecentEntry(entry.at, Method.HEAD, Outcome.NO_VERDICT, entry.status, entry.error_class)
        return None

    @staticmethod
    def decide_with_host(
        domain: tuple[Decision, State, float | None], host: tuple[Decision, State, float | None] | None
    ) -> tuple[Decision, State, float | None]:
        """The decision for a request to a non-root host: the host's own ``dead`` or ``cold``
        skips it; a host with a record of its own is decided by it (its anti-bot, friendly and
        needs-browser evidence are its own); the domain's own ``dead`` or ``cold`` are its root
        host's facts, never its siblings'. A host never seen takes the registered domain's
        decision as its prior. Both as ``store.decide`` returns them."""
        if host is None:
            return domain
        if host[1] in _HOST_SKIP:
            return Decision.SKIP, host[1], host[2]
        if domain[1] in _HOST_SKIP or host[1] is not State.UNKNOWN or host[2] is not None:
            # The root's dead/cold are its own; a host with a record of its own is decided by it
            # (one walled host never sends its siblings to the browser).
            return host
        return domain  # a host never seen: the registered domain's state is its prior

    # ------------------------------------------------------------- purposes

    @staticmethod
    def state_for_purpose(site: State, worth: State) -> State:
        """The state of a site for a spider with a purpose of its own (listings, the close
        summary): what the site *is* (dead, anti-bot) from its shared record, else what it is
        *worth* to this spider (``friendly``, ``cold``) from its purpose record, else ``unknown``
        (the shared record's ``friendly``/``cold`` are the default purpose's verdicts)."""
        if site is State.DEAD or site is State.ANTIBOT_SOFT or site is State.ANTIBOT_HARD:
            return site
        return worth if worth is State.FRIENDLY or worth is State.COLD else State.UNKNOWN

    def decide_with_worth(
        self, site: tuple[Decision, State, float | None], worth: tuple[Decision, State, float | None]
    ) -> tuple[Decision, State, float | None]:
        """The decision for a spider whose outcome source is not the default (``items``, a
        callable): ``site`` from the site's shared record (what it *is*: dead, anti-bot, needs
        the browser), ``worth`` from its record for this purpose (:func:`~.keys.purpose_key`:
        what it is *worth* to this spider). The purpose's own ``cold`` skips; the shared
        record's ``cold`` and ``friendly`` are the default purpose's verdicts on its worth, so
        this spider fetches such a site as it would a known one with no verdict of its own."""
        if worth[1] is State.COLD:
            return Decision.SKIP, State.COLD, worth[2]
        if site[1] is State.COLD or site[1] is State.FRIENDLY:
            state = State.FRIENDLY if worth[1] is State.FRIENDLY else State.UNKNOWN
            return self.decide_state(state, 1.0, 0.0), worth[1], worth[2]
        return site
