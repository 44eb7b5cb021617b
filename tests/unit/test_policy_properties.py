"""Properties of the state machine over random outcome sequences (hypothesis).

A sequence is a list of ``(method, outcome, hard block?, time step)`` fed to
``Policy.observe`` with a clock that only moves forward; the time steps include
the exact TTLs, so expiries land on their boundaries too.
"""

from __future__ import annotations

import copy

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scrapy_domainstate.core.clock import DAY
from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.policy import Decision, Policy
from scrapy_domainstate.core.record import DomainStat, Method, Outcome, RecentEntry, State
from tests import T0

DOMAIN = "example.com"
COUNTERS = ("fetch_total", "fetch_ok", "fetch_ok_empty", "tab_total", "tab_ok")
VERDICTS = [o for o in Outcome if o is not Outcome.NO_VERDICT]

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

time_steps = st.one_of(
    st.sampled_from([0.0, 1.0, 60.0, 7 * DAY, 30 * DAY, 90 * DAY]),  # the TTLs themselves: exact boundaries
    st.floats(min_value=0.0, max_value=3600.0, allow_nan=False),
    st.floats(min_value=0.0, max_value=120 * DAY, allow_nan=False),
)


@st.composite
def observations(draw):
    method = draw(st.sampled_from(list(Method)))
    # A HEAD probe may say nothing; a fetch or a tab always gives a verdict.
    outcome = draw(st.sampled_from(list(Outcome) if method is Method.HEAD else VERDICTS))
    block = outcome is Outcome.ANTIBOT and draw(st.booleans())
    status = draw(st.sampled_from([None, 200, 403, 404, 429, 503]))
    return method, outcome, block, status, draw(time_steps)


sequences = st.lists(observations(), max_size=60)


@st.composite
def configs(draw):
    recent = draw(st.integers(min_value=1, max_value=30))
    threshold = st.integers(min_value=1, max_value=recent)
    ttl_values = st.sampled_from([None, 1.0, 60.0, 3600.0, DAY, 7 * DAY, 90 * DAY])
    ttl = draw(st.dictionaries(st.sampled_from([s.value for s in State]), ttl_values, max_size=6))
    window = draw(threshold)
    return Config.from_settings(
        {
            "DOMAINSTATE_RECENT_SIZE": recent,
            "DOMAINSTATE_DEAD_THRESHOLD": draw(threshold),
            "DOMAINSTATE_ANTIBOT_HARD_THRESHOLD": draw(threshold),
            "DOMAINSTATE_COLD_THRESHOLD": draw(threshold),
            "DOMAINSTATE_FRIENDLY_WINDOW": window,
            "DOMAINSTATE_FRIENDLY_MIN_FETCHES": draw(st.integers(min_value=1, max_value=window)),
            "DOMAINSTATE_FRIENDLY_DEMOTE": draw(threshold),
            "DOMAINSTATE_FRIENDLY_RATIO": draw(st.floats(min_value=0.0, max_value=1.0)),
            "DOMAINSTATE_HEAD_PROBE": draw(st.booleans()),
            "DOMAINSTATE_TTL": ttl,
        }
    )


any_config = st.one_of(st.just(Config.from_settings({})), configs())


def entries(seq):
    t = T0
    for method, outcome, block, status, dt in seq:
        t += dt
        error_class = "block:cloudflare:1020" if block else None
        yield RecentEntry(t, method, outcome, status, error_class)


def run(policy: Policy, seq) -> tuple[DomainStat | None, list]:
    stat = None
    transitions = []
    for entry in entries(seq):
        stat, tr = policy.observe(stat, DOMAIN, entry)
        transitions.append(tr)
    return stat, transitions


def expected_decision(policy: Policy, rec: DomainStat) -> Decision:
    if rec.state is State.UNKNOWN:
        if policy.config.head_probe and not rec.probed_at:
            return Decision.PROBE
        return Decision.FETCH_THEN_BROWSER
    return {
        State.DEAD: Decision.SKIP,
        State.COLD: Decision.SKIP,
        State.ANTIBOT_SOFT: Decision.FETCH_THEN_BROWSER,
        State.ANTIBOT_HARD: Decision.BROWSER,
        State.FRIENDLY: Decision.FETCH_THEN_BROWSER if policy.config.friendly_fallback else Decision.FETCH,
    }[rec.state]


@SETTINGS
@given(config=any_config, seq=sequences, read_after=time_steps)
def test_invariants_at_every_step(config, seq, read_after):
    policy = Policy(config)
    stat: DomainStat | None = None
    for entry in entries(seq):
        before = copy.deepcopy(stat)
        new, tr = policy.observe(stat, DOMAIN, entry)

        # observe never mutates its input
        assert stat == before
        # the state is always one of six
        assert isinstance(new.state, State)
        # recent never exceeds its cap
        assert len(new.recent) <= config.recent_size
        # counters never decrease, last_seen neither
        if stat is not None:
            for name in (*COUNTERS, "last_seen"):
                assert getattr(new, name) >= getattr(stat, name), name
        # the record returned is live at the time of the observation
        assert new.state_expires_at is None or new.state_expires_at > entry.at
        assert new.state_changed_at <= entry.at
        assert new.first_seen <= new.last_seen == entry.at
        # a transition is reported exactly when the state changed
        old = State.UNKNOWN if stat is None else stat.state
        assert (tr is not None) == (new.state is not old)
        if tr is not None:
            assert (tr.old, tr.new, tr.at, tr.domain) == (old, new.state, entry.at, DOMAIN)
        # entries kept are the newest ones, in order, and no "no verdict" is kept
        assert all(e.outcome is not Outcome.NO_VERDICT for e in new.recent)
        assert [e.at for e in new.recent] == sorted(e.at for e in new.recent)
        if entry.outcome is not Outcome.NO_VERDICT and new.recent:
            assert new.recent[-1] is entry
        if entry.method is Method.HEAD and not (tr is not None and tr.new is State.UNKNOWN):
            assert new.probed_at == entry.at  # (a move back to unknown starts a new, unprobed period)
        stat = new

    # reading later: never an expired state, decision consistent with the state
    now = (stat.last_seen if stat is not None else T0) + read_after
    rec = policy.current(stat, DOMAIN, now)
    assert isinstance(rec.state, State)
    assert rec.state_expires_at is None or rec.state_expires_at > now
    assert len(rec.recent) <= config.recent_size
    decision = policy.decide(stat, now)
    assert isinstance(decision, Decision)
    assert decision is expected_decision(policy, rec)
    if not config.head_probe:
        assert decision is not Decision.PROBE


@SETTINGS
@given(config=any_config, seq=sequences)
def test_same_sequence_same_record(config, seq):
    first = run(Policy(config), seq)
    second = run(Policy(config), seq)
    assert first == second
    # and a record stored and read back between observations gives the same end record
    policy = Policy(config)
    stat = None
    for entry in entries(seq):
        stat, _ = policy.observe(copy.deepcopy(stat), DOMAIN, entry)
    assert stat == first[0]


@SETTINGS
@given(config=any_config, seq=sequences)
def test_counters_count_the_entries_fed(config, seq):
    stat, _ = run(Policy(config), seq)
    fed = list(entries(seq))
    if stat is None:
        assert fed == []
        return
    fetches = [e for e in fed if e.method is Method.FETCH]
    tabs = [e for e in fed if e.method is Method.TAB]
    assert stat.fetch_total == len(fetches)
    assert stat.fetch_ok == sum(e.outcome is Outcome.OK_CONTACT for e in fetches)
    assert stat.fetch_ok_empty == sum(e.outcome is Outcome.OK_EMPTY for e in fetches)
    assert stat.tab_total == len(tabs)
    assert stat.tab_ok == sum(e.outcome is Outcome.OK_CONTACT for e in tabs)
    assert stat.first_seen == fed[0].at
    assert stat.last_seen == fed[-1].at


@SETTINGS
@given(seq=sequences, reads=st.lists(time_steps, min_size=1, max_size=10))
def test_current_never_returns_an_expired_state(seq, reads):
    """Reading repeatedly at later times is the same as reading once (expiry walks the chain)."""
    policy = Policy(Config.from_settings({}))
    stat, _ = run(policy, seq)
    if stat is None:
        stat = policy.new(DOMAIN, T0)
    now = stat.last_seen
    rec = stat
    for dt in reads:
        now += dt
        rec = policy.current(rec, DOMAIN, now)
        assert rec.state_expires_at is None or rec.state_expires_at > now
        once = policy.current(stat, DOMAIN, now)
        assert once.state is rec.state
        assert once.state_expires_at == rec.state_expires_at


@SETTINGS
@given(seq=sequences)
def test_transitions_follow_the_entry_rules(seq):
    """dead only from unknown, on two dead signals in a row not all HEAD (across unknown's renewals), on one non-HEAD dead
    signal that confirms an earlier visit's dead verdict (a chain no answer broke, an hour or more
    after it), or on one parked page (a fetched page, from any other state); friendly and cold sources."""
    policy = Policy(Config.from_settings({}))
    stat = None
    for entry in entries(seq):
        live = policy.current(stat, DOMAIN, entry.at)
        old = live.state
        chain, chain_at = live.dead_visits, live.dead_at
        stat, tr = policy.observe(stat, DOMAIN, entry)
        if tr is not None and tr.new is State.DEAD and entry.outcome is Outcome.PARKED:
            assert entry.method is not Method.HEAD
            assert old is not State.DEAD
        elif tr is not None and tr.new is State.DEAD:
            assert old is State.UNKNOWN
            assert entry.outcome is Outcome.DEAD
            # two consecutive dead signals in `recent`, not all from HEAD (`recent` outlives
            # unknown's own renewal, so the streak spans it; every other way into unknown clears it)
            streak = []
            for e in reversed(stat.recent):
                if e.outcome is not Outcome.DEAD:
                    break
                streak.append(e)
            confirms = bool(chain) and entry.method is not Method.HEAD and entry.at - chain_at >= 3600
            assert confirms or len(streak) >= 2
            assert any(e.method is not Method.HEAD for e in streak)
        if tr is not None and tr.new is State.FRIENDLY:
            assert old is State.UNKNOWN
        if tr is not None and tr.new is State.COLD:
            assert old in (State.UNKNOWN, State.ANTIBOT_SOFT, State.ANTIBOT_HARD, State.FRIENDLY)
            assert entry.outcome is Outcome.OK_EMPTY
