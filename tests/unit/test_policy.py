"""The pure state machine against docs/SPEC.md section 2, one test per table row and settled rule.

Every test moves a fake clock explicitly: nothing here reads the wall clock, and
nothing touches Scrapy or the disk. A :class:`Sim` feeds observations to a
:class:`Policy` the way the extension does (``observe`` with the previous record)
and reads the record back the way the middleware does (``current``/``decide``).
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field

import pytest

from scrapy_domainstate.core.clock import DAY
from scrapy_domainstate.core.config import DEFAULT_TTL, Config
from scrapy_domainstate.core.policy import Decision, Policy, Transition
from scrapy_domainstate.core.record import DomainStat, Method, Outcome, RecentEntry, State
from tests import T0

DOMAIN = "example.com"

H, F, T = Method.HEAD, Method.FETCH, Method.TAB
CONTACT = Outcome.OK_CONTACT
EMPTY = Outcome.OK_EMPTY
HTTP_ERR = Outcome.HTTP_ERROR
NET_ERR = Outcome.NETWORK_ERROR
ANTIBOT = Outcome.ANTIBOT
DEAD = Outcome.DEAD
NO_VERDICT = Outcome.NO_VERDICT

#: Hard-block verdict (docs/SPEC.md section 2 "antibot-hard": cf-mitigated: block, error 1020, DataDome t=bv).
BLOCK = "block:cloudflare:1020"


def step(method: Method, outcome: Outcome, error_class: str | None = None, status: int | None = None):
    return (method, outcome, error_class, status)


def hard(method: Method = F):
    return step(method, ANTIBOT, BLOCK, 403)


#: The state table's literal readings (the seed's: cold after 5 empty pages in one visit, a
#: 1-day dead hold, the HEAD probe, friendly fetch-only), which the tables of this file and of
#: test_policy_rules.py drive the mechanisms with. The revised defaults (docs/SPEC.md section 2,
#: revised again) have their own tables in test_policy_rules_r2.py.
SEED_READINGS = {
    "cold_threshold": 5,
    "cold_confirm_after": 0,
    "dead_hold": DAY,
    "head_probe": True,
    "probe_alone": False,
    "friendly_fallback": False,
}


def cfg(**settings) -> Config:
    merged = {**SEED_READINGS, **settings}
    return Config.from_settings({f"DOMAINSTATE_{k.upper()}": v for k, v in merged.items()})


@dataclass
class Sim:
    """A domain's record driven through a policy with an explicit clock."""

    policy: Policy = field(default_factory=lambda: Policy(cfg()))
    t: float = T0
    stat: DomainStat | None = None
    transitions: list[Transition] = field(default_factory=list)

    def see(self, method, outcome, error_class=None, status=None, *, dt: float = 1.0) -> Sim:
        self.t += dt
        entry = RecentEntry(self.t, method, outcome, status, error_class)
        self.stat, tr = self.policy.observe(self.stat, DOMAIN, entry)
        if tr is not None:
            self.transitions.append(tr)
        return self

    def feed(self, steps, *, dt: float = 1.0) -> Sim:
        for s in steps:
            self.see(*s, dt=dt)
        return self

    def advance(self, seconds: float) -> Sim:
        self.t += seconds
        return self

    def at(self, when: float) -> Sim:
        assert when >= self.t, "the clock only moves forward"
        self.t = when
        return self

    @property
    def record(self) -> DomainStat:
        return self.policy.current(self.stat, DOMAIN, self.t)

    @property
    def state(self) -> State:
        return self.record.state

    def decide(self) -> Decision:
        return self.policy.decide(self.stat, self.t)


def sim(config: Config | None = None, steps=(), **kw) -> Sim:
    s = Sim(policy=Policy(config or cfg()), **kw)
    return s.feed(steps)


def into(state: State, config: Config | None = None) -> Sim:
    """A domain brought into ``state`` by observations only (no ``set_state``)."""
    s = sim(config)
    paths = {
        State.UNKNOWN: [step(H, NO_VERDICT, status=200)],
        State.DEAD: [step(H, DEAD, "dns"), step(F, DEAD, "dns")],
        State.ANTIBOT_SOFT: [step(F, ANTIBOT, "cloudflare:challenge", 403)],
        State.ANTIBOT_HARD: [hard()],
        State.FRIENDLY: [step(F, CONTACT)] * 5,
        State.COLD: [step(F, EMPTY)] * 5,
    }
    s.feed(paths[state])
    assert s.state is state
    return s


# =====================================================================
# The state table, row by row: "entered when"
# =====================================================================

ENTERED_WHEN = [
    # -- unknown: first sight
    ("unknown/first-sight", [], State.UNKNOWN),
    ("unknown/no-verdict-probe", [step(H, NO_VERDICT, status=405)], State.UNKNOWN),
    # -- dead: two consecutive dead signals while unknown; HEAD + confirming GET count as two
    ("dead/head+get", [step(H, DEAD, "dns"), step(F, DEAD, "dns")], State.DEAD),
    ("dead/get+get", [step(F, DEAD, "refused"), step(F, DEAD, "refused")], State.DEAD),
    ("dead/head+get-404-root", [step(H, DEAD, status=404), step(F, DEAD, status=404)], State.DEAD),
    ("dead/get+tab", [step(F, DEAD, "tls"), step(T, DEAD, "tls")], State.DEAD),
    ("dead/head-alone", [step(H, DEAD, status=404)], State.UNKNOWN),
    ("dead/get-alone", [step(F, DEAD, "dns")], State.UNKNOWN),
    ("dead/head+head", [step(H, DEAD, "dns"), step(H, DEAD, "dns")], State.UNKNOWN),
    ("dead/broken-by-network-error", [step(F, DEAD), step(F, NET_ERR, "timeout"), step(F, DEAD)], State.UNKNOWN),
    ("dead/broken-by-http-error", [step(H, DEAD), step(F, HTTP_ERR, status=500), step(F, DEAD)], State.UNKNOWN),
    ("dead/broken-by-ok", [step(F, DEAD), step(F, EMPTY), step(F, DEAD)], State.UNKNOWN),
    ("dead/no-verdict-head-does-not-break", [step(F, DEAD), step(H, NO_VERDICT), step(F, DEAD)], State.DEAD),
    ("dead/timeouts-never", [step(F, NET_ERR, "timeout")] * 20, State.UNKNOWN),
    # -- antibot-soft: any antibot signal on unknown (HEAD cf-mitigated, 403/503 cf-ray, 429, challenge page)
    ("soft/head-cf-mitigated", [step(H, ANTIBOT, "cloudflare:cf-mitigated", 403)], State.ANTIBOT_SOFT),
    ("soft/403-cf-ray", [step(F, ANTIBOT, "cloudflare:cf-ray", 403)], State.ANTIBOT_SOFT),
    ("soft/503-cf-ray", [step(F, ANTIBOT, "cloudflare:cf-ray", 503)], State.ANTIBOT_SOFT),
    ("soft/429", [step(F, ANTIBOT, "rate-limit", 429)], State.ANTIBOT_SOFT),
    ("soft/challenge-page-202", [step(F, ANTIBOT, "awswaf:challenge", 202)], State.ANTIBOT_SOFT),
    ("soft/two-antibot", [step(H, ANTIBOT), step(F, ANTIBOT)], State.ANTIBOT_SOFT),
    # -- antibot-hard: 3 consecutive antibot outcomes of plain requests (HEAD, GET), or a
    #    hard-block verdict. docs/SPEC.md section 2 (revised): a render neither breaks nor extends the
    #    streak, and a 429 counts for neither (rows 3-any-layer, 3-fetch and 3-tab changed).
    ("hard/3-plain", [step(H, ANTIBOT), step(F, ANTIBOT), step(F, ANTIBOT)], State.ANTIBOT_HARD),
    ("hard/3-any-layer", [step(H, ANTIBOT), step(F, ANTIBOT), step(T, ANTIBOT)], State.ANTIBOT_SOFT),
    ("hard/3-fetch", [step(F, ANTIBOT, "cloudflare:cf-ray", 403)] * 3, State.ANTIBOT_HARD),
    ("hard/3-fetch-429", [step(F, ANTIBOT, status=429)] * 3, State.ANTIBOT_SOFT),
    ("hard/3-tab", [step(T, ANTIBOT)] * 3, State.ANTIBOT_SOFT),
    (
        "hard/render-ok-does-not-break",
        [step(F, ANTIBOT), step(F, ANTIBOT), step(T, CONTACT), step(F, ANTIBOT)],
        State.ANTIBOT_HARD,
    ),
    (
        "hard/429-does-not-break",
        [step(F, ANTIBOT), step(F, ANTIBOT), step(F, ANTIBOT, status=429), step(H, ANTIBOT)],
        State.ANTIBOT_HARD,
    ),
    (
        "hard/plain-ok-breaks",
        [step(F, ANTIBOT), step(F, ANTIBOT), step(F, CONTACT), step(F, ANTIBOT)],
        State.ANTIBOT_SOFT,
    ),
    ("hard/block-head", [hard(H)], State.ANTIBOT_HARD),
    ("hard/block-fetch", [hard(F)], State.ANTIBOT_HARD),
    ("hard/block-tab", [hard(T)], State.ANTIBOT_HARD),
    ("hard/block-from-soft", [step(F, ANTIBOT), hard(T)], State.ANTIBOT_HARD),
    ("hard/datadome-ban", [step(F, ANTIBOT, "block:datadome:t=bv", 403)], State.ANTIBOT_HARD),
    (
        "hard/streak-reset-by-ok",
        [step(F, ANTIBOT), step(F, ANTIBOT), step(T, CONTACT), step(T, ANTIBOT)],
        State.ANTIBOT_SOFT,
    ),
    # -- friendly: >= 70 % ok-contact of the last 10 fetches, >= 5 fetches
    ("friendly/5-of-5", [step(F, CONTACT)] * 5, State.FRIENDLY),
    ("friendly/4-fetches", [step(F, CONTACT)] * 4, State.UNKNOWN),
    ("friendly/4-of-5", [step(F, HTTP_ERR, status=500)] + [step(F, CONTACT)] * 4, State.FRIENDLY),
    ("friendly/3-of-5", [step(F, EMPTY)] * 2 + [step(F, CONTACT)] * 3, State.UNKNOWN),
    ("friendly/7-of-10", [step(F, EMPTY)] * 3 + [step(F, CONTACT)] * 7, State.FRIENDLY),
    ("friendly/6-of-10", [step(F, HTTP_ERR, status=500)] * 4 + [step(F, CONTACT)] * 6, State.UNKNOWN),
    ("friendly/window-slides", [step(F, HTTP_ERR, status=500)] * 4 + [step(F, CONTACT)] * 7, State.FRIENDLY),
    ("friendly/tabs-do-not-count", [step(T, CONTACT)] * 10, State.UNKNOWN),
    ("friendly/heads-do-not-count", [step(H, NO_VERDICT)] + [step(F, CONTACT)] * 4, State.UNKNOWN),
    # -- cold: 5 consecutive ok-empty outcomes, any method
    ("cold/5-fetch", [step(F, EMPTY)] * 5, State.COLD),
    ("cold/5-any-method", [step(F, EMPTY), step(T, EMPTY)] * 2 + [step(F, EMPTY)], State.COLD),
    ("cold/4", [step(F, EMPTY)] * 4, State.UNKNOWN),
    ("cold/broken-by-network-error", [step(F, EMPTY)] * 4 + [step(F, NET_ERR)] + [step(F, EMPTY)] * 4, State.UNKNOWN),
    ("cold/broken-by-contact", [step(F, EMPTY)] * 4 + [step(T, CONTACT)] + [step(F, EMPTY)] * 4, State.UNKNOWN),
]


@pytest.mark.parametrize(("steps", "expected"), [c[1:] for c in ENTERED_WHEN], ids=[c[0] for c in ENTERED_WHEN])
def test_state_table_entered_when(steps, expected):
    s = sim(steps=steps)
    assert s.state is expected
    if expected is not State.UNKNOWN:
        # The transition is reported, from unknown, at the time of the deciding outcome.
        assert s.transitions[-1].new is expected
        assert s.transitions[0].old is State.UNKNOWN
        assert s.stat.state_changed_at == s.transitions[-1].at


# =====================================================================
# "decision"
# =====================================================================

DECISIONS = [
    (State.DEAD, Decision.SKIP),
    (State.ANTIBOT_SOFT, Decision.FETCH_THEN_BROWSER),
    (State.ANTIBOT_HARD, Decision.BROWSER),
    (State.FRIENDLY, Decision.FETCH),
    (State.COLD, Decision.SKIP),
]


@pytest.mark.parametrize(("state", "decision"), DECISIONS, ids=[d[0].value for d in DECISIONS])
def test_state_table_decision(state, decision):
    s = into(state)
    assert s.decide() is decision
    # Same answer from a forced state (operator `set`, import, remote consensus).
    policy = s.policy
    forced = policy.set_state(policy.new(DOMAIN, T0), state, T0)
    assert policy.decide(forced, T0 + 1) is decision
    assert policy.decide_state(state, 0.0, T0) is decision


def test_state_table_decision_unknown_full_pipeline():
    s = sim()
    assert s.policy.decide(None, T0) is Decision.PROBE  # first sight
    assert s.decide() is Decision.PROBE
    s.see(H, NO_VERDICT, status=405)
    assert s.decide() is Decision.FETCH_THEN_BROWSER  # HEAD -> GET -> browser fallback
    s.see(F, HTTP_ERR, status=500)
    assert s.decide() is Decision.FETCH_THEN_BROWSER


# =====================================================================
# "TTL"
# =====================================================================

TTLS = [
    (State.UNKNOWN, 7 * DAY),
    (State.DEAD, 30 * DAY),
    (State.ANTIBOT_SOFT, 7 * DAY),
    (State.ANTIBOT_HARD, 90 * DAY),
    (State.FRIENDLY, None),
    (State.COLD, 90 * DAY),
]


def test_default_ttls_are_the_spec_table():
    assert dict(Config.from_settings({}).ttl) == dict(TTLS)
    assert dict(TTLS) == DEFAULT_TTL


#: docs/SPEC.md section 2 (revised): one visit's dead signals only hold the domain (1 d); the 30 d
#: TTL applies once a later visit confirms it (test_policy_rules.py covers the chain).
FIRST_ENTRY_TTL = {State.DEAD: DAY}


@pytest.mark.parametrize(("state", "ttl"), TTLS, ids=[t[0].value for t in TTLS])
def test_state_table_ttl(state, ttl):
    s = into(state)
    ttl = FIRST_ENTRY_TTL.get(state, ttl)
    entered = s.stat.state_changed_at
    if ttl is None:
        assert s.stat.state_expires_at is None
        s.advance(10 * 365 * DAY)
        assert s.state is state
        return
    assert s.stat.state_expires_at == entered + ttl
    s.at(entered + ttl - 0.001)
    assert s.state is state
    s.at(entered + ttl)  # exactly at the expiry: expired
    assert s.state is dict(ON_EXPIRY)[state]
    assert s.record.state_changed_at == entered + ttl
    assert s.record.state_expires_at > s.t


# =====================================================================
# "on expiry"
# =====================================================================

ON_EXPIRY = [
    (State.UNKNOWN, State.UNKNOWN),
    (State.DEAD, State.UNKNOWN),
    (State.ANTIBOT_SOFT, State.UNKNOWN),
    (State.ANTIBOT_HARD, State.ANTIBOT_SOFT),
    (State.COLD, State.UNKNOWN),
]


@pytest.mark.parametrize(("state", "after"), ON_EXPIRY, ids=[e[0].value for e in ON_EXPIRY])
def test_state_table_on_expiry(state, after):
    s = into(state)
    s.see(T, HTTP_ERR, status=500)  # changes no state, gives `recent` something to clear
    assert s.stat.state is state
    before = s.stat.copy()
    s.at(before.state_expires_at)
    rec = s.record
    assert rec.state is after
    # history cleared; docs/SPEC.md section 2 (revised) leaves unknown's own renewal to measurement:
    # by default it keeps `recent` (DOMAINSTATE_RENEWAL_CLEARS_RECENT, test_policy_rules.py)
    assert rec.recent == ([] if state is not State.UNKNOWN else before.recent)
    assert rec.state_changed_at == before.state_expires_at
    assert rec.state_expires_at == before.state_expires_at + DEFAULT_TTL[after]
    assert rec.probed_at == 0.0
    # counters stay
    for name in ("fetch_total", "fetch_ok", "fetch_ok_empty", "tab_total", "tab_ok", "first_seen", "last_seen"):
        assert getattr(rec, name) == getattr(before, name)
    # the record read is not changed by reading it
    assert s.stat == before
    # and the next observation starts from the expired state
    n = len(s.transitions)
    s.see(T, CONTACT)
    assert s.stat.state is after
    assert len(s.transitions) == n + (state is not after)
    if state is not after:
        assert (s.transitions[-1].old, s.transitions[-1].new) == (state, after)


@pytest.mark.parametrize(
    "failure",
    # (an antibot outcome moves a friendly domain to antibot-soft at once: docs/SPEC.md section 2 revised)
    [step(F, HTTP_ERR, status=500), step(F, NET_ERR, "timeout"), step(F, DEAD, "dns")],
    ids=["http-error", "network-error", "dead"],
)
def test_state_table_friendly_on_expiry_is_five_failed_fetches(failure):
    s = into(State.FRIENDLY)
    s.feed([failure] * 4)
    assert s.state is State.FRIENDLY
    assert s.decide() is Decision.FETCH
    s.feed([failure])
    assert s.state is State.UNKNOWN
    assert s.transitions[-1].old is State.FRIENDLY
    assert s.transitions[-1].new is State.UNKNOWN
    assert s.stat.state_expires_at == s.t + 7 * DAY
    # "then is re-probed"
    assert s.decide() is Decision.PROBE


def test_friendly_demotion_is_its_expiry_recent_cleared_counters_kept():
    s = into(State.FRIENDLY)
    s.feed([step(F, DEAD, "dns")] * 5)
    rec = s.record
    assert rec.state is State.UNKNOWN
    assert rec.recent == []
    assert (rec.fetch_total, rec.fetch_ok) == (10, 5)


def test_after_friendly_demotion_head_dead_alone_is_not_dead():
    """Dead signals seen while friendly are friendly failures, not dead signals of the new unknown period."""
    s = into(State.FRIENDLY)
    s.feed([step(F, DEAD, "dns")] * 5)
    assert s.state is State.UNKNOWN
    s.see(H, DEAD, "dns")
    assert s.state is State.UNKNOWN  # never dead from HEAD alone
    s.see(F, DEAD, "dns")
    assert s.state is State.DEAD  # the confirming GET


def test_after_friendly_demotion_one_get_dead_is_not_dead():
    s = into(State.FRIENDLY)
    s.feed([step(F, DEAD, "refused")] * 5)
    s.see(F, DEAD, "refused")
    assert s.state is State.UNKNOWN
    s.see(F, DEAD, "refused")
    assert s.state is State.DEAD


def test_after_friendly_demotion_antibot_streak_starts_over():
    s = into(State.FRIENDLY)
    s.feed([step(F, NET_ERR, "timeout")] * 5)
    assert s.state is State.UNKNOWN
    s.see(H, ANTIBOT, status=403)
    assert s.state is State.ANTIBOT_SOFT
    s.see(F, ANTIBOT, status=403)
    assert s.state is State.ANTIBOT_SOFT  # two in a row, the friendly era counts for nothing


# =====================================================================
# Settled rules
# =====================================================================


def test_probe_once_per_period():
    s = sim()
    assert s.decide() is Decision.PROBE
    s.see(H, NO_VERDICT, status=200)
    assert s.stat.probed_at == s.t
    for _ in range(5):
        s.see(F, HTTP_ERR, status=500)
        assert s.decide() is Decision.FETCH_THEN_BROWSER
    # A new unknown period (TTL expiry) probes again, once.
    s.at(s.stat.state_expires_at)
    assert s.decide() is Decision.PROBE
    s.see(H, NO_VERDICT, status=405, dt=0)
    assert s.decide() is Decision.FETCH_THEN_BROWSER


@pytest.mark.parametrize("status", [200, 301, 405, 501, 500, 503])
def test_no_verdict_head_only_stamps_probed_at(status):
    s = sim()
    s.see(H, NO_VERDICT, status=status)
    rec = s.stat
    assert rec.recent == []
    assert rec.probed_at == s.t
    assert rec.state is State.UNKNOWN
    assert s.transitions == []
    for name in ("fetch_total", "fetch_ok", "fetch_ok_empty", "tab_total", "tab_ok"):
        assert getattr(rec, name) == 0
    assert rec.state_expires_at == rec.first_seen + 7 * DAY


def test_probe_after_any_return_to_unknown():
    # dead -> (30 d) -> unknown: probe again
    s = into(State.DEAD)
    assert s.stat.probed_at
    s.at(s.stat.state_expires_at)
    assert s.decide() is Decision.PROBE
    # antibot-soft -> (7 d) -> unknown: probe again
    s = into(State.ANTIBOT_SOFT)
    s.see(H, NO_VERDICT, dt=0)
    s.at(s.stat.state_expires_at)
    assert s.decide() is Decision.PROBE


@pytest.mark.parametrize("head_probe", [False, "false", "0", "off"])
def test_head_probe_off_never_probes(head_probe):
    config = cfg(head_probe=head_probe)
    policy = Policy(config)
    assert policy.decide(None, T0) is Decision.FETCH_THEN_BROWSER
    for state in State:
        s = into(state, config)
        assert s.decide() is not Decision.PROBE
        assert policy.decide_state(state, 0.0, T0) is not Decision.PROBE
        s.at(s.stat.state_expires_at or s.t)
        assert s.decide() is not Decision.PROBE
    assert sim(config).decide() is Decision.FETCH_THEN_BROWSER


@pytest.mark.parametrize("n", [1, 2, 5, 20])
def test_never_dead_from_head_alone(n):
    s = sim(steps=[step(H, DEAD, "dns")] * n)
    assert s.state is State.UNKNOWN
    # even when one dead signal would be enough
    s = sim(cfg(dead_threshold=1), [step(H, DEAD, status=404)] * n)
    assert s.state is State.UNKNOWN
    s.see(F, DEAD, status=404)
    assert s.state is State.DEAD


def test_dead_only_from_unknown_friendly_counts_failures():
    s = into(State.FRIENDLY)
    s.feed([step(F, DEAD, "dns")] * 2)
    assert s.state is State.FRIENDLY
    s.feed([step(F, DEAD, "dns")] * 2)
    assert s.state is State.FRIENDLY
    s.see(F, DEAD, "dns")
    assert s.state is State.UNKNOWN  # demoted, not dead
    assert State.DEAD not in {t.new for t in s.transitions}


@pytest.mark.parametrize("state", [State.ANTIBOT_SOFT, State.ANTIBOT_HARD, State.COLD])
def test_dead_only_from_unknown_other_states(state):
    s = into(state)
    s.feed([step(T if state is State.ANTIBOT_HARD else F, DEAD, "dns")] * 6)
    assert s.state is state


def test_dead_needs_consecutive_signals_custom_threshold():
    config = cfg(dead_threshold=3)
    s = sim(config, [step(H, DEAD), step(F, DEAD)])
    assert s.state is State.UNKNOWN
    s.see(F, DEAD)
    assert s.state is State.DEAD
    s = sim(config, [step(H, DEAD), step(F, DEAD), step(F, NET_ERR), step(F, DEAD), step(F, DEAD)])
    assert s.state is State.UNKNOWN


def test_antibot_streak_resets_on_any_non_antibot_outcome():
    # of a plain request (docs/SPEC.md section 2 revised: renders neither break nor extend the streak)
    for breaker in (CONTACT, EMPTY, HTTP_ERR, NET_ERR, DEAD):
        s = sim(steps=[step(F, ANTIBOT), step(F, ANTIBOT), step(F, breaker), step(F, ANTIBOT)])
        assert s.state is State.ANTIBOT_SOFT, breaker
        s.see(H, ANTIBOT)
        assert s.state is State.ANTIBOT_SOFT, breaker
        s.see(T, breaker)  # a render: no effect on the streak
        s.see(F, ANTIBOT)
        # docs/SPEC.md section 2 (revised again): hard only when no plain fetch in `recent` passed; a
        # page fetched (contacts or empty) is such a pass, a failure is not.
        passed = breaker in (CONTACT, EMPTY)
        assert s.state is (State.ANTIBOT_SOFT if passed else State.ANTIBOT_HARD), breaker


def test_antibot_two_vs_three():
    s = sim(steps=[step(F, ANTIBOT, status=403)] * 2)
    assert s.state is State.ANTIBOT_SOFT
    assert s.decide() is Decision.FETCH_THEN_BROWSER
    s.see(T, ANTIBOT)  # a render does not extend the streak (docs/SPEC.md section 2 revised)
    assert s.state is State.ANTIBOT_SOFT
    s.see(H, ANTIBOT, status=403)
    assert s.state is State.ANTIBOT_HARD
    assert s.decide() is Decision.BROWSER
    assert [(t.old, t.new) for t in s.transitions] == [
        (State.UNKNOWN, State.ANTIBOT_SOFT),
        (State.ANTIBOT_SOFT, State.ANTIBOT_HARD),
    ]


def test_antibot_hard_stays_hard_on_more_antibot_and_keeps_its_ttl():
    s = into(State.ANTIBOT_HARD)
    expires = s.stat.state_expires_at
    s.feed([step(T, ANTIBOT)] * 4 + [hard(T)], dt=DAY)
    assert s.state is State.ANTIBOT_HARD
    assert s.stat.state_expires_at == expires  # only antibot-soft slides


def test_empty_streak_resets_on_any_non_empty_outcome():
    for breaker in (CONTACT, HTTP_ERR, NET_ERR, ANTIBOT, DEAD):
        s = sim(steps=[step(F, EMPTY)] * 4 + [step(F, breaker)] + [step(F, EMPTY)] * 4)
        assert s.state is not State.COLD, breaker
    s = sim(steps=[step(F, EMPTY)] * 4 + [step(H, NO_VERDICT)] + [step(F, EMPTY)])
    assert s.state is State.COLD  # a no-verdict probe is no outcome


def test_friendly_failure_streak_resets_on_successful_fetch():
    for success in (CONTACT, EMPTY):
        s = into(State.FRIENDLY)
        s.feed([step(F, HTTP_ERR, status=500)] * 4 + [step(F, success)] + [step(F, NET_ERR)] * 4)
        assert s.state is State.FRIENDLY, success
        s.see(F, NET_ERR)
        assert s.state is State.UNKNOWN, success


@pytest.mark.parametrize("state", [State.UNKNOWN, State.ANTIBOT_SOFT, State.ANTIBOT_HARD, State.FRIENDLY])
def test_cold_reachable_from(state):
    if state is State.FRIENDLY:
        # A domain made friendly by its fetches has yielded useful pages: never cold (SPEC
        # section 2 revised). One set friendly by an operator, with no useful page, can be.
        s = sim()
        s.stat = s.policy.set_state(s.policy.new(DOMAIN, s.t), State.FRIENDLY, s.t)
    else:
        s = into(state)
    method = T if state is State.ANTIBOT_HARD else F  # browser only on antibot-hard
    s.feed([step(method, EMPTY)] * 4)
    assert s.state is state
    s.see(method, EMPTY)
    assert s.state is State.COLD
    assert s.transitions[-1].old is state
    assert s.decide() is Decision.SKIP
    assert s.stat.state_expires_at == s.t + 90 * DAY


def test_cold_not_from_dead():
    s = into(State.DEAD)
    s.see(F, EMPTY)  # a forced fetch: the site is alive again
    assert s.state is State.UNKNOWN
    s.feed([step(F, EMPTY)] * 3)
    assert s.state is State.UNKNOWN
    s.see(F, EMPTY)
    assert s.state is State.COLD


def test_sliding_antibot_soft_ttl():
    s = into(State.ANTIBOT_SOFT)
    entered = s.t
    assert s.stat.state_expires_at == entered + 7 * DAY
    # a non-antibot outcome does not restart it
    s.see(F, CONTACT, dt=DAY)
    assert s.stat.state_expires_at == entered + 7 * DAY
    # a new antibot signal (any layer) restarts it
    s.see(T, ANTIBOT, dt=5 * DAY)
    second = s.t
    assert s.stat.state_expires_at == second + 7 * DAY
    assert s.stat.state_changed_at == entered  # sliding is not re-entering
    s.at(entered + 7 * DAY)
    assert s.state is State.ANTIBOT_SOFT  # the first deadline passed, the slid one not
    s.at(second + 7 * DAY - 0.001)
    assert s.state is State.ANTIBOT_SOFT
    s.at(second + 7 * DAY)
    assert s.state is State.UNKNOWN


def test_sliding_antibot_soft_ttl_head_signal():
    s = into(State.ANTIBOT_SOFT)
    s.see(F, CONTACT, dt=3 * DAY)
    s.see(H, ANTIBOT, "cloudflare:cf-mitigated", dt=3 * DAY)
    assert s.stat.state_expires_at == s.t + 7 * DAY


def test_antibot_hard_expires_to_soft_then_unknown():
    s = into(State.ANTIBOT_HARD)
    hard_expiry = s.stat.state_expires_at
    s.at(hard_expiry - 1)
    assert s.state is State.ANTIBOT_HARD
    assert s.decide() is Decision.BROWSER
    s.at(hard_expiry)
    assert s.state is State.ANTIBOT_SOFT
    assert s.decide() is Decision.FETCH_THEN_BROWSER
    assert s.record.state_expires_at == hard_expiry + 7 * DAY
    s.at(hard_expiry + 7 * DAY)
    assert s.state is State.UNKNOWN
    assert s.decide() is Decision.PROBE


def test_expiry_walks_the_chain_when_read_long_after():
    s = into(State.ANTIBOT_HARD)
    hard_expiry = s.stat.state_expires_at
    s.at(hard_expiry + 7 * DAY + 3 * DAY)  # read once, long after both deadlines
    rec = s.record
    assert rec.state is State.UNKNOWN
    assert rec.state_changed_at == hard_expiry + 7 * DAY
    assert rec.state_expires_at == hard_expiry + 14 * DAY
    # same answer as reading at every step
    step_by_step = s.policy.current(s.stat, DOMAIN, hard_expiry)
    step_by_step = s.policy.current(step_by_step, DOMAIN, hard_expiry + 7 * DAY)
    step_by_step = s.policy.current(step_by_step, DOMAIN, s.t)
    assert step_by_step == rec


def test_expiry_of_a_record_unread_for_many_periods_is_exact_and_fast():
    """unknown -> unknown repeats every TTL: a record unread for a year is one cheap read (docs/SPEC.md section 8)."""
    policy = Policy(cfg(ttl={"unknown": 1}))
    stat = policy.new(DOMAIN, T0)
    now = T0 + 365 * DAY + 0.5
    started = time.perf_counter()
    rec = policy.current(stat, DOMAIN, now)
    assert time.perf_counter() - started < 0.5
    assert rec.state is State.UNKNOWN
    assert rec.state_changed_at == T0 + 365 * DAY
    assert rec.state_expires_at == T0 + 365 * DAY + 1
    assert policy.decide(stat, now) is Decision.PROBE


def test_antibot_on_an_expired_soft_domain_is_no_state_change():
    """soft --7 d--> unknown --antibot--> soft: stored soft, still soft, no "state changed" event."""
    s = into(State.ANTIBOT_SOFT)
    s.at(s.stat.state_expires_at + DAY)
    n = len(s.transitions)
    s.see(F, ANTIBOT, status=429, dt=0)
    assert s.state is State.ANTIBOT_SOFT
    assert s.stat.state_expires_at == s.t + 7 * DAY
    assert s.stat.state_changed_at == s.t
    assert len(s.transitions) == n


def test_no_transition_ever_has_old_equal_new():
    s = into(State.ANTIBOT_HARD)
    s.at(s.stat.state_expires_at)  # -> antibot-soft, lazily
    s.see(*hard(T), dt=0)  # -> antibot-hard again
    assert s.state is State.ANTIBOT_HARD
    assert s.stat.state_expires_at == s.t + 90 * DAY
    assert all(t.old is not t.new for t in s.transitions)


def test_antibot_after_hard_expired_to_soft_slides_soft():
    s = into(State.ANTIBOT_HARD)
    s.at(s.stat.state_expires_at + DAY)
    s.see(F, ANTIBOT, status=429, dt=0)
    assert s.state is State.ANTIBOT_SOFT
    assert s.stat.state_expires_at == s.t + 7 * DAY


def test_lazy_expiry_clears_recent_keeps_counters():
    s = sim(steps=[step(F, CONTACT), step(F, EMPTY), step(T, CONTACT), step(T, EMPTY), step(F, HTTP_ERR)])
    s.see(F, DEAD, dt=DAY)
    s.see(F, DEAD, dt=DAY)
    assert s.state is State.DEAD
    stored = s.stat
    s.at(stored.state_expires_at)
    rec = s.record
    assert rec is not stored
    assert rec.state is State.UNKNOWN
    assert rec.recent == []
    assert stored.recent  # the stored record is untouched
    assert (rec.fetch_total, rec.fetch_ok, rec.fetch_ok_empty, rec.tab_total, rec.tab_ok) == (5, 1, 1, 2, 1)
    # the dead streak does not survive the expiry: a HEAD with the old entries would make it dead
    s.see(H, DEAD, dt=0)
    assert s.state is State.UNKNOWN
    # (the visit chain does: this later visit's first dead GET counts as its second visit; the
    # host has answered before, so it is held again, and a third visit confirms it)
    s.see(F, DEAD, dt=0)
    assert s.state is State.DEAD
    assert s.stat.state_expires_at == s.t + DAY
    s.see(F, DEAD, dt=DAY + 1)
    assert s.state is State.DEAD
    assert s.stat.state_expires_at == s.t + 30 * DAY


def test_current_returns_the_record_itself_when_nothing_changes():
    s = into(State.COLD)
    assert s.policy.current(s.stat, DOMAIN, s.t + DAY) is s.stat
    fresh = s.policy.current(None, DOMAIN, T0)
    assert fresh.state is State.UNKNOWN
    assert (fresh.first_seen, fresh.last_seen, fresh.state_changed_at) == (T0, T0, T0)
    assert fresh.state_expires_at == T0 + 7 * DAY


def test_friendly_only_from_unknown():
    s = into(State.ANTIBOT_SOFT)
    s.feed([step(F, CONTACT)] * 10)
    assert s.state is State.ANTIBOT_SOFT
    s = into(State.ANTIBOT_HARD)
    s.feed([step(T, CONTACT)] * 10)
    assert s.state is State.ANTIBOT_HARD
    s.feed([step(F, CONTACT)] * 10)  # a plain fetch passed (the canary): back to soft, never friendly
    assert s.state is State.ANTIBOT_SOFT
    s = into(State.COLD)
    s.feed([step(F, EMPTY)] * 10)
    assert s.state is State.COLD


def test_friendly_antibot_goes_soft_at_once_not_hard():
    # docs/SPEC.md section 2 (revised): an antibot outcome on a friendly domain -> antibot-soft at once
    # (it used to count as one of five friendly failures).
    s = into(State.FRIENDLY)
    s.see(F, ANTIBOT, status=429)
    assert s.state is State.ANTIBOT_SOFT
    assert s.decide() is Decision.FETCH_THEN_BROWSER


def test_friendly_hard_block_goes_hard():
    s = into(State.FRIENDLY)
    s.see(*hard(F))
    assert s.state is State.ANTIBOT_HARD


def test_friendly_window_restarts_after_expiry():
    """The ratio reads ``recent``, which an expiry clears; ">= 5 fetches" is the lifetime
    ``fetch_total`` (docs/SPEC.md section 2 revised): with ``recent`` cleared, the new period needs
    only DOMAINSTATE_FRIENDLY_MIN_WINDOW (3) fetches, not 5."""
    s = sim(cfg(renewal_clears_recent=True), [step(F, CONTACT)] * 4)
    s.at(s.stat.state_expires_at)
    s.see(F, CONTACT, dt=0)
    assert s.state is State.UNKNOWN
    assert s.stat.fetch_total == 5
    s.see(F, CONTACT)
    assert s.state is State.UNKNOWN
    s.see(F, CONTACT)
    assert s.state is State.FRIENDLY


@pytest.mark.parametrize(("ok", "expected"), [(69, State.UNKNOWN), (70, State.FRIENDLY)])
def test_friendly_69_vs_70_percent(ok, expected):
    config = cfg(recent_size=100, friendly_window=100, friendly_min_fetches=100)
    steps = [step(F, HTTP_ERR, status=500)] * (100 - ok) + [step(F, CONTACT)] * ok
    s = sim(config, steps)
    assert s.state is expected


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [(CONTACT, State.UNKNOWN), (EMPTY, State.UNKNOWN), (HTTP_ERR, State.DEAD), (NET_ERR, State.DEAD)],
)
def test_forced_fetch_on_dead(outcome, expected):
    s = into(State.DEAD)
    assert s.decide() is Decision.SKIP
    fetched = s.stat.fetch_total
    s.see(F, outcome)  # domainstate_force=True: the outcome is still recorded
    assert s.state is expected
    assert s.stat.fetch_total == fetched + 1
    if expected is State.UNKNOWN:
        assert s.transitions[-1].old is State.DEAD
        assert s.decide() is Decision.PROBE


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [(CONTACT, State.UNKNOWN), (EMPTY, State.COLD), (HTTP_ERR, State.COLD), (ANTIBOT, State.COLD)],
)
def test_forced_fetch_on_cold(outcome, expected):
    s = into(State.COLD)
    expires = s.stat.state_expires_at
    s.see(F, outcome)
    assert s.state is expected
    if expected is State.COLD:
        assert s.stat.state_expires_at == expires


# =====================================================================
# Custom configuration changes behaviour
# =====================================================================


def test_custom_thresholds_change_behaviour():
    config = Config.from_settings(
        {
            "DOMAINSTATE_ANTIBOT_HARD_THRESHOLD": "2",
            "DOMAINSTATE_COLD_THRESHOLD": 2,
            "DOMAINSTATE_COLD_CONFIRM_AFTER": 0,  # cold within one visit, as the threshold alone says
            "DOMAINSTATE_FRIENDLY_MIN_FETCHES": "3",
            "DOMAINSTATE_FRIENDLY_WINDOW": 3,
            "DOMAINSTATE_FRIENDLY_RATIO": "0.6",
            "DOMAINSTATE_FRIENDLY_DEMOTE": 2,
        }
    )
    assert sim(config, [step(F, ANTIBOT)] * 2).state is State.ANTIBOT_HARD
    assert sim(config, [step(F, EMPTY)] * 2).state is State.COLD
    assert sim(config, [step(F, CONTACT)] * 2).state is State.UNKNOWN
    assert sim(config, [step(F, HTTP_ERR), step(F, CONTACT), step(F, CONTACT)]).state is State.FRIENDLY
    s = sim(config, [step(F, CONTACT)] * 3)
    assert s.state is State.FRIENDLY
    s.see(F, HTTP_ERR)
    assert s.state is State.FRIENDLY
    s.see(F, HTTP_ERR)
    assert s.state is State.UNKNOWN


def test_antibot_threshold_one_goes_hard_from_unknown():
    assert sim(cfg(antibot_hard_threshold=1), [step(F, ANTIBOT)]).state is State.ANTIBOT_HARD


def test_partial_ttl_dict_merges_with_defaults():
    config = cfg(ttl={"dead": 60, "antibot-soft": 3600})
    assert config.ttl[State.DEAD] == 60
    assert config.ttl[State.ANTIBOT_SOFT] == 3600
    for state in (State.UNKNOWN, State.ANTIBOT_HARD, State.FRIENDLY, State.COLD):
        assert config.ttl[state] == DEFAULT_TTL[state]
    s = into(State.DEAD, config)
    assert s.stat.state_expires_at == s.t + 60
    s.advance(60)
    assert s.state is State.UNKNOWN
    s = into(State.COLD, config)
    assert s.stat.state_expires_at == s.t + 90 * DAY
    s = into(State.ANTIBOT_HARD, config)
    s.at(s.stat.state_expires_at)
    assert s.record.state_expires_at == s.t + 3600


def test_ttl_none_means_never_expires_and_friendly_can_get_one():
    config = cfg(ttl='{"cold": null, "friendly": 86400}')
    s = into(State.COLD, config)
    assert s.stat.state_expires_at is None
    s.advance(3650 * DAY)
    assert s.state is State.COLD
    s = into(State.FRIENDLY, config)
    assert s.stat.state_expires_at == s.t + DAY
    s.advance(DAY)
    assert s.state is State.UNKNOWN


def test_recent_size_caps_history():
    config = cfg(recent_size=5, friendly_window=5)
    s = sim(config, [step(F, HTTP_ERR)] * 12)
    assert len(s.stat.recent) == 5
    assert s.stat.recent[-1].at == s.t  # FIFO: the newest kept
    assert s.stat.fetch_total == 12


# =====================================================================
# Purity
# =====================================================================


@pytest.mark.parametrize("state", list(State))
def test_observe_never_mutates_its_input(state):
    s = into(state)
    s.feed([step(F, HTTP_ERR)])  # a non-empty recent
    stored = s.stat
    snapshot = copy.deepcopy(stored)
    for entry in (
        RecentEntry(s.t + 1, F, CONTACT),
        RecentEntry(s.t + 1, H, NO_VERDICT),
        RecentEntry(s.t + 1, T, ANTIBOT, 403, BLOCK),
        RecentEntry(s.t + 1, F, DEAD, None, "dns"),
        RecentEntry(s.t + 365 * DAY, F, EMPTY),  # with a lazy expiry on the way
    ):
        new, _ = s.policy.observe(stored, DOMAIN, entry)
        assert new is not stored
        assert new.recent is not stored.recent
        assert stored == snapshot
    s.policy.decide(stored, s.t + 365 * DAY)
    s.policy.current(stored, DOMAIN, s.t + 365 * DAY)
    s.policy.set_state(stored, State.DEAD, s.t)
    assert stored == snapshot


def test_observe_first_sight_from_none():
    policy = Policy(Config.from_settings({}))
    new, tr = policy.observe(None, DOMAIN, RecentEntry(T0, F, CONTACT))
    assert tr is None
    assert new.domain == DOMAIN
    assert (new.first_seen, new.last_seen) == (T0, T0)
    assert (new.fetch_total, new.fetch_ok) == (1, 1)


def test_transition_carries_reason_and_time():
    s = sim(steps=[step(H, DEAD, "dns"), step(F, DEAD, "dns")])
    (tr,) = s.transitions
    assert (tr.domain, tr.old, tr.new, tr.at) == (DOMAIN, State.UNKNOWN, State.DEAD, s.t)
    assert isinstance(tr.reason, str)
    assert tr.reason


def test_set_state_ttls():
    policy = Policy(cfg())  # (the HEAD probe of the seed's readings)
    stat = policy.new(DOMAIN, T0)
    assert policy.set_state(stat, State.DEAD, T0 + 5).state_expires_at == T0 + 5 + 30 * DAY
    assert policy.set_state(stat, State.DEAD, T0, ttl=60).state_expires_at == T0 + 60
    assert policy.set_state(stat, State.DEAD, T0, ttl=None).state_expires_at is None
    forced = policy.set_state(stat, State.UNKNOWN, T0)
    assert forced.probed_at == 0.0
    assert policy.decide(forced, T0) is Decision.PROBE


def test_counters():
    s = sim(
        steps=[
            step(H, DEAD),
            step(F, CONTACT),
            step(F, EMPTY),
            step(F, HTTP_ERR),
            step(T, CONTACT),
            step(T, EMPTY),
            step(T, ANTIBOT),
        ]
    )
    rec = s.stat
    assert (rec.fetch_total, rec.fetch_ok, rec.fetch_ok_empty) == (3, 1, 1)
    assert (rec.tab_total, rec.tab_ok) == (3, 1)
    assert rec.last_seen == s.t
    assert rec.first_seen == T0 + 1


def test_set_state_to_unknown_clears_the_history_so_one_head_cannot_make_it_dead() -> None:
    policy = Policy()
    stat = None
    for at in (1.0, 2.0):
        stat, _ = policy.observe(stat, "d.example", RecentEntry(at, Method.FETCH, Outcome.DEAD, None, "dns"))
    assert stat is not None and stat.state is State.DEAD
    reset = policy.set_state(stat, State.UNKNOWN, 10.0)
    assert reset.recent == [] and reset.fetch_total == 2
    after, _ = policy.observe(reset, "d.example", RecentEntry(11.0, Method.HEAD, Outcome.DEAD, 404, "http:404"))
    assert after.state is State.UNKNOWN


# ------------------------------------------------------------------ a hold ends with its visit
HOUR = 3600.0


def _held_at_t0() -> Sim:
    """A never-answered domain held dead by one visit's two DNS failures (the 1-day hold)."""
    s = into(State.DEAD)
    assert s.stat is not None and s.stat.state_expires_at == s.t + DAY
    return s


def test_a_crawl_that_begins_after_the_hold_ends_it():
    # A daily crawl can come back in under the hold (its order differs from day to day): the
    # hold is the rest of the visit that found it, so the next crawl tries the domain again.
    s = _held_at_t0()
    s.policy.crawl_started = s.t + 3 * HOUR
    s.at(s.t + 3 * HOUR + 5)
    assert s.state is State.UNKNOWN
    assert s.decide() is not Decision.SKIP
    # ... and its first dead signal confirms the earlier visit's verdict, for the full TTL
    s.see(F, DEAD, "dns")
    assert s.state is State.DEAD
    assert s.stat.state_expires_at == s.t + 30 * DAY


def test_a_hold_stands_for_a_restart_within_the_hour_and_outside_a_crawl():
    s = _held_at_t0()
    assert s.policy.crawl_started == 0.0  # (no crawl: the command line, the service)
    s.at(s.t + 3 * HOUR)
    assert s.state is State.DEAD and s.decide() is Decision.SKIP
    s.policy.crawl_started = s.t - 3 * HOUR + 30 * 60  # a restart 30 min after the verdict
    assert s.state is State.DEAD and s.decide() is Decision.SKIP
    assert s.policy.stands(s.stat, s.t)


def test_a_confirmed_dead_verdict_outlives_later_crawls():
    s = _held_at_t0()
    s.see(F, DEAD, "dns", dt=DAY + 1)
    assert s.stat.state_expires_at == s.t + 30 * DAY
    s.policy.crawl_started = s.t + 2 * DAY
    s.at(s.t + 2 * DAY + 1)
    assert s.state is State.DEAD and s.decide() is Decision.SKIP
    assert s.policy.header_decision(State.DEAD, s.stat.state_expires_at, s.stat.state_changed_at, 0.0, False, s.t)


def test_an_earlier_visits_hold_is_not_served_from_the_header_or_taken_as_standing():
    s = _held_at_t0()
    s.policy.crawl_started = s.t + 2 * HOUR
    s.at(s.t + 2 * HOUR + 1)
    stat = s.stat
    assert s.policy.header_decision(State.DEAD, stat.state_expires_at, stat.state_changed_at, 0.0, False, s.t) is None
    assert not s.policy.stands(stat, s.t)
    # observe() on the held record starts from the hold's end, as current() does
    s.see(F, CONTACT, status=200, dt=0)
    assert s.state is State.UNKNOWN and s.stat.fetch_ok == 1


# ------------------------------------------------- which pages are worth a contact scan (issue 23)

USEFULNESS_MOVES = [
    # (id, state, fetch_ok, tab_ok, config, moves)
    ("friendly-useful", State.FRIENDLY, 4, 0, {}, False),
    ("friendly-rendered-useful", State.FRIENDLY, 0, 2, {}, False),
    ("friendly-never-useful", State.FRIENDLY, 0, 0, {}, True),  # (set by hand or adopted: may turn cold)
    ("unknown-useful", State.UNKNOWN, 4, 0, {}, True),  # (its ratio makes it friendly)
    ("soft", State.ANTIBOT_SOFT, 4, 0, {}, True),
    ("hard", State.ANTIBOT_HARD, 4, 0, {}, True),
    ("cold", State.COLD, 0, 0, {}, True),
    ("dead", State.DEAD, 0, 0, {}, True),
    ("scan-friendly-setting", State.FRIENDLY, 4, 0, {"scan_friendly": True}, True),
    ("items-outcome", State.FRIENDLY, 4, 0, {"outcome": "items"}, True),
]


@pytest.mark.parametrize(
    ("state", "fetch_ok", "tab_ok", "config", "moves"),
    [r[1:] for r in USEFULNESS_MOVES],
    ids=[r[0] for r in USEFULNESS_MOVES],
)
def test_usefulness_moves_a_record_unless_it_is_friendly_and_has_been_useful(
    state: State, fetch_ok: int, tab_ok: int, config: dict[str, object], moves: bool
) -> None:
    policy = Policy(Config(**config))  # type: ignore[arg-type]
    stat = DomainStat(domain="a.example", state=state, fetch_ok=fetch_ok, tab_ok=tab_ok, fetch_total=fetch_ok + 5)
    assert policy.usefulness_moves(stat, T0) is moves
    assert policy.usefulness_moves(None, T0) is True  # a new domain's page
    # a friendly state that has run out (a TTL of the user's): its page is scanned again
    stat.state_expires_at = T0
    assert policy.usefulness_moves(stat, T0) is True
    assert policy.usefulness_moves(stat, T0 - 1) is moves


@pytest.mark.parametrize(("scanned", "friendly_at"), [(True, 2), (False, 3)])
def test_a_parked_friendly_domain_found_useful_again_re_learns_friendly(scanned: bool, friendly_at: int) -> None:
    """The one path where unscanned pages give another state than scanned ones (docs/SPEC.md,
    "A friendly domain's pages are not scanned"): a parked page ends friendly at once, and the
    useful pages a forced fetch then finds meet a ``recent`` of navigation entries."""
    from scrapy_domainstate.core.policy import NOT_SCANNED

    policy = Policy(Config())
    stat, at = None, T0
    for _ in range(12):
        at += 1
        stat, _ = policy.observe(stat, "a.example", RecentEntry(at, Method.FETCH, Outcome.OK_CONTACT, 200))
    for _ in range(policy.config.recent_size):  # friendly long enough to fill ``recent``
        at += 1
        if scanned:
            entry = RecentEntry(at, Method.FETCH, Outcome.OK_CONTACT, 200)
        else:
            entry = RecentEntry(at, Method.FETCH, Outcome.NAVIGATION, 200, NOT_SCANNED)
        stat, _ = policy.observe(stat, "a.example", entry)
    at += 1
    stat, _ = policy.observe(stat, "a.example", RecentEntry(at, Method.FETCH, Outcome.PARKED, 200, "parked:x"))
    assert stat.state is State.DEAD
    states = []
    for _ in range(4):
        at += 1
        stat, _ = policy.observe(stat, "a.example", RecentEntry(at, Method.FETCH, Outcome.OK_CONTACT, 200))
        states.append(stat.state)
    assert states.index(State.FRIENDLY) + 1 == friendly_at, states


def test_an_unscanned_page_moves_a_friendly_record_as_a_useful_one_would() -> None:
    """What the rule claims, with the default thresholds: for a friendly domain that has been
    useful, recording a page as ``not-scanned`` navigation gives the same state, after any run of
    outcomes, as recording it as the useful or empty page it was (a demotion needs 5 failed
    fetches in a row, so friendly's window of 10 at 70 % is past them before it can fill again)."""
    import random

    from scrapy_domainstate.core.policy import NOT_SCANNED

    policy = Policy(Config())
    rng = random.Random(3)
    plain = [Outcome.OK_CONTACT, Outcome.OK_EMPTY, Outcome.HTTP_ERROR, Outcome.NETWORK_ERROR, Outcome.ANTIBOT]
    for _ in range(3000):
        judged = unscanned = None
        at = T0
        for _ in range(12):  # friendly first
            at += 1
            judged, _ = policy.observe(judged, "a.example", RecentEntry(at, Method.FETCH, Outcome.OK_CONTACT, 200))
        assert judged is not None and judged.state is State.FRIENDLY
        unscanned = copy.deepcopy(judged)
        for _ in range(rng.randrange(1, 30)):
            at += rng.choice((1.0, 3600.0, 2 * DAY))
            outcome = rng.choice(plain)
            status = 200 if outcome in (Outcome.OK_CONTACT, Outcome.OK_EMPTY) else 503
            entry = RecentEntry(at, Method.FETCH, outcome, status)
            judged, _ = policy.observe(judged, "a.example", entry)
            if outcome in (Outcome.OK_CONTACT, Outcome.OK_EMPTY) and not policy.usefulness_moves(unscanned, at):
                entry = RecentEntry(at, Method.FETCH, Outcome.NAVIGATION, 200, NOT_SCANNED)
            unscanned, _ = policy.observe(unscanned, "a.example", entry)
            assert unscanned.state is judged.state, (unscanned.recent, judged.recent)


@pytest.mark.parametrize(
    ("site", "worth", "shown"),
    [
        (State.UNKNOWN, State.FRIENDLY, State.FRIENDLY),  # an items spider's shop
        (State.UNKNOWN, State.COLD, State.COLD),
        (State.FRIENDLY, State.UNKNOWN, State.UNKNOWN),  # the contacts spider's verdict, not this one's
        (State.COLD, State.FRIENDLY, State.FRIENDLY),
        (State.DEAD, State.FRIENDLY, State.DEAD),  # what the site is comes first
        (State.ANTIBOT_HARD, State.COLD, State.ANTIBOT_HARD),
        (State.ANTIBOT_SOFT, State.UNKNOWN, State.ANTIBOT_SOFT),
    ],
)
def test_the_state_a_purpose_shows(site: State, worth: State, shown: State) -> None:
    assert Policy.state_for_purpose(site, worth) is shown
