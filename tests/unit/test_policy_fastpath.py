"""``Policy.observe``'s inlined hot path gives exactly what the plain composition gives.

The reference below is ``observe`` as it was written before the hot path was inlined: the
record as it stands (``Policy.current``), a copy, the counters, the entry, browser
learning, the rule that fires, the transition. Over random outcome sequences (any method,
outcome, status and error class; times that jump past every TTL or go back) both must
return equal records and equal transitions, and neither may touch its input.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.policy import SHELL_RENDER, Policy, Transition, _count
from scrapy_domainstate.core.record import DomainStat, Method, Outcome, RecentEntry, State
from tests import T0

DAY = 86400.0


def reference_observe(
    policy: Policy, stat: DomainStat | None, domain: str, entry: RecentEntry
) -> tuple[DomainStat, Transition | None]:
    now = entry.at
    before = policy.current(stat, domain, now)
    start_state = stat.state if stat is not None else State.UNKNOWN
    new = before.copy() if before is stat else before
    new.last_seen = max(new.last_seen, now)
    new.first_seen = min(new.first_seen, now) if new.first_seen else now
    if entry.method is Method.HEAD:
        new.probed_at = now
    if entry.outcome is Outcome.NO_VERDICT:
        return new, policy._transition(domain, start_state, new, now, "expired")
    _count(new, entry)
    new.recent.append(entry)
    overflow = len(new.recent) - policy.config.recent_size
    if overflow > 0:
        del new.recent[:overflow]
    policy._learn_browser(new, entry)
    reason = policy._next(new, entry)
    if reason is not None:
        target, why = reason
        if target is not new.state:
            why = policy._enter(new, target, why, now)
            return new, policy._transition(domain, start_state, new, now, why)
        if target is State.ANTIBOT_SOFT:
            new.state_expires_at = policy.expiry(target, now)
    return new, policy._transition(domain, start_state, new, now, "expired")


ERRORS = [None, None, "timeout", "http:503", "dns", "challenge:cloudflare:title", "block:cloudflare:1020", SHELL_RENDER]


@st.composite
def sequences(draw: st.DrawFn) -> list[RecentEntry]:
    """Outcomes drawn from a small alphabet of a few kinds per sequence, so that streaks
    (dead, antibot, cold, friendly, shell renders) form and their rules fire."""
    kinds = draw(
        st.lists(
            st.tuples(
                st.sampled_from(list(Method)),
                st.sampled_from(list(Outcome)),
                st.sampled_from([None, 200, 403, 404, 429, 503]),
                st.sampled_from(ERRORS),
            ),
            min_size=1,
            max_size=4,
        )
    )
    at, out = T0, []
    for _ in range(draw(st.integers(min_value=1, max_value=60))):
        at += draw(st.sampled_from([0.0, 1.0, 600.0, 3 * 3600.0, DAY, 8 * DAY, 40 * DAY, 100 * DAY, -50.0]))
        out.append(RecentEntry(at, *draw(st.sampled_from(kinds))))
    return out


CONFIGS = [
    Config(),
    Config(recent_size=5, cold_threshold=3, friendly_min_fetches=2, browser_learn=2, head_probe=False),
    Config(renewal_clears_recent=True, dead_threshold=1, antibot_hard_threshold=1),
]


@settings(max_examples=400, deadline=None)
@given(sequences(), st.sampled_from(range(len(CONFIGS))), st.sampled_from(list(State)))
def test_observe_is_the_plain_composition(entries: list[RecentEntry], config: int, start: State) -> None:
    policy = Policy(CONFIGS[config])
    fast: DomainStat | None = None
    slow: DomainStat | None = None
    if start is not State.UNKNOWN:  # a record forced into a state first, as operators do
        fast = slow = policy.set_state(policy.new("example.com", T0), start, T0)
    for entry in entries:
        before = fast.copy() if fast is not None else None
        fast_out, fast_transition = policy.observe(fast, "example.com", entry)
        slow_out, slow_transition = reference_observe(policy, slow, "example.com", entry)
        assert fast_out == slow_out
        assert fast_transition == slow_transition
        assert fast == before  # the input is never mutated
        assert fast_out is not fast
        fast, slow = fast_out, slow_out


@settings(max_examples=300, deadline=None)
@given(
    sequences(),
    st.sampled_from(range(len(CONFIGS))),
    st.sampled_from([-7200.0, -50.0, 0.0, 1.0, 600.0, DAY, 8 * DAY, 40 * DAY]),
)
def test_the_decision_from_a_header_is_the_whole_records(entries: list[RecentEntry], config: int, later: float) -> None:
    """``Policy.header_decision`` (what a store decides from a record's header) answers only
    when it is ``Policy.decision``'s answer on the whole record, and always while the record
    stands (``Policy.stands``: ``current`` would return it unchanged)."""
    policy = Policy(CONFIGS[config])
    stat: DomainStat | None = None
    for entry in entries:
        stat, _ = policy.observe(stat, "example.com", entry)
    assert stat is not None
    now = entries[-1].at + later
    before = stat.copy()
    whole = policy.decision(stat, "example.com", now)
    current = policy.current(stat, "example.com", now)
    assert whole == (policy.decide(current, now), current.state, current.state_expires_at)
    header = policy.header_decision(
        stat.state, stat.state_expires_at, stat.state_changed_at, stat.probed_at, bool(stat.browser_since), now
    )
    assert header is None or header == whole
    assert policy.stands(stat, now) == (current is stat)
    if policy.stands(stat, now):
        assert header == whole
    assert stat == before
    new = policy.new("example.com", now)
    assert policy.decision(None, "example.com", now) == (policy.decide(None, now), new.state, new.state_expires_at)
