"""The per-domain record (``DomainStat``) and its vocabulary: states, methods, outcomes.

Pure data: no Scrapy, no I/O. How the stores keep a record on disk or in Redis (a
versioned, compact binary encoding) is :mod:`scrapy_domainstate.store.codec`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

__all__ = [
    "DomainStat",
    "Method",
    "Outcome",
    "RecentEntry",
    "State",
    "parse_state",
]


class State(str, Enum):
    UNKNOWN = "unknown"
    DEAD = "dead"
    ANTIBOT_SOFT = "antibot-soft"
    ANTIBOT_HARD = "antibot-hard"
    FRIENDLY = "friendly"
    COLD = "cold"

    def __str__(self) -> str:
        return self.value


def parse_state(value: State | str) -> State:
    """A state from its name (``"dead"``, ``" Antibot-Soft "``), as the command and the API read
    it; :class:`ValueError` naming the valid states for anything else."""
    if isinstance(value, State):
        return value
    try:
        return State(str(value).strip().lower())
    except ValueError:
        valid = ", ".join(s.value for s in State)
        raise ValueError(f"unknown state {value!r}; valid states: {valid}") from None


class Method(str, Enum):
    HEAD = "head"
    FETCH = "fetch"
    TAB = "tab"

    def __str__(self) -> str:
        return self.value


class Outcome(str, Enum):
    OK_CONTACT = "ok-contact"
    OK_EMPTY = "ok-empty"
    HTTP_ERROR = "http-error"
    NETWORK_ERROR = "network-error"
    ANTIBOT = "antibot"
    DEAD = "dead"
    #: A HEAD probe that says nothing either way (2xx/3xx, 405/501 "HEAD not
    #: supported", 5xx): the policy stamps ``probed_at`` and keeps no entry.
    NO_VERDICT = "no-verdict"
    #: A fetched page that was neither useful nor empty: under ``DOMAINSTATE_OUTCOME='items'``
    #: (or a callable that returned None) its callback yielded follow-up requests to the same
    #: site and no items (a home or category page). It proves the site alive and breaks the
    #: anti-bot and failure streaks, but neither extends nor breaks the empty streak behind
    #: ``cold`` and is not in ``friendly``'s ratio. In a record that keeps the site facts of a
    #: purpose other than the default (:func:`~scrapy_domainstate.core.keys.purpose_key`), every
    #: page that was fetched is recorded as navigation: its worth is kept apart.
    #: (Added in 0.3, after the others: the entry codes of older records are unchanged.)
    NAVIGATION = "navigation"
    #: The site's home page is a parking or for-sale page (a registrar's, a parking service's,
    #: a domain marketplace's): fetched, never useful (its "buy this domain" e-mail is not a
    #: contact), a dead signal that needs no second one (:mod:`scrapy_domainstate.core.policy`).
    #: ``error_class`` is ``'parked:<service>'``. (Added after navigation: older codes unchanged.)
    PARKED = "parked"

    def __str__(self) -> str:
        return self.value


#: Outcomes of a page that was fetched (useful, empty or navigation): the site is alive.
FETCHED = frozenset({Outcome.OK_CONTACT, Outcome.OK_EMPTY, Outcome.NAVIGATION})

#: ``error_class`` prefix of an antibot verdict that is a hard block (firewall
#: rule, IP ban): it sends the domain straight to ``antibot-hard``.
HARD_BLOCK_PREFIX = "block:"


@dataclass(slots=True)
class RecentEntry:
    at: float
    method: Method
    outcome: Outcome
    status: int | None = None
    error_class: str | None = None

    @property
    def is_hard_block(self) -> bool:
        return self.outcome is Outcome.ANTIBOT and bool(
            self.error_class and self.error_class.startswith(HARD_BLOCK_PREFIX)
        )


@dataclass(slots=True)
class DomainStat:
    domain: str
    state: State = State.UNKNOWN
    recent: list[RecentEntry] = field(default_factory=list)
    fetch_total: int = 0
    fetch_ok: int = 0
    fetch_ok_empty: int = 0
    tab_total: int = 0
    tab_ok: int = 0
    first_seen: float = 0.0
    last_seen: float = 0.0
    state_changed_at: float = 0.0
    #: ``None``: the state has no TTL (``friendly``).
    state_expires_at: float | None = None
    #: When the HEAD probe of the current period ran (0: not yet).
    probed_at: float = 0.0
    # -- added in 0.2 (docs/SPEC.md section 2, revised); encoded after the entries, see _extension().
    #: Visits whose dead signals made the domain dead, in a row (0: none since it was last
    #: seen alive). 1: a one-visit hold; n >= 2: confirmed, the dead TTL doubles each time.
    dead_visits: int = 0
    #: When the last counted dead verdict was entered (0: never).
    dead_at: float = 0.0
    #: Since when the domain is known to need the browser (client-rendered: its plain
    #: fetches get script-only shells the browser renders). 0: not learned.
    browser_since: float = 0.0

    def copy(self) -> DomainStat:
        # Positional, in field order (tests/unit/test_record.py checks every field is copied):
        # about twice as fast as keywords.
        return DomainStat(
            self.domain,
            self.state,
            list(self.recent),
            self.fetch_total,
            self.fetch_ok,
            self.fetch_ok_empty,
            self.tab_total,
            self.tab_ok,
            self.first_seen,
            self.last_seen,
            self.state_changed_at,
            self.state_expires_at,
            self.probed_at,
            self.dead_visits,
            self.dead_at,
            self.browser_since,
        )
