"""Clock jumps both ways (issue 22, break 6): stamps past ``now`` are brought back to it.

A clock that ran ahead and was set back (or a clock set back from the right time) leaves
records stamped in the future. Without the clamp they held their state for the jump on top of
their TTL, sorted as the most recently seen, and a dead verdict confirmed across the jump
held for 30 days.
"""

from __future__ import annotations

from scrapy_domainstate.core.clock import DAY, FUTURE_MARGIN, HOUR
from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.policy import Decision, Policy
from scrapy_domainstate.core.record import DomainStat, Method, Outcome, RecentEntry, State
from tests import T0

JUMP = 2 * DAY


def dns(at: float) -> RecentEntry:
    return RecentEntry(at, Method.FETCH, Outcome.DEAD, 0, "dns")


def ok(at: float) -> RecentEntry:
    return RecentEntry(at, Method.FETCH, Outcome.OK_CONTACT, 200)


def observe(policy: Policy, stat: DomainStat | None, *entries: RecentEntry) -> DomainStat:
    for entry in entries:
        stat, _ = policy.observe(stat, "x.example", entry)
    assert stat is not None
    return stat


def test_a_dead_hold_made_while_the_clock_ran_ahead_is_checked_again_once_it_is_set_back() -> None:
    policy = Policy(Config())
    ahead = observe(policy, None, dns(T0 + JUMP), dns(T0 + JUMP + 5))
    assert ahead.state is State.DEAD and ahead.state_expires_at == T0 + JUMP + 5 + 12 * HOUR
    # The clock is set back to the right time, a minute later.
    now = T0 + 60
    assert policy.decide(ahead, now) is not Decision.SKIP  # before: skipped for 2.5 days
    assert policy.current(ahead, "x.example", now).state is State.UNKNOWN
    # The other way, a jump forward: the hold is over early, nothing is clamped.
    later = T0 + JUMP * 2
    assert policy.decide(ahead, later) is not Decision.SKIP
    assert policy.current(ahead, "x.example", later).last_seen == T0 + JUMP + 5


def test_two_dns_failures_seconds_apart_across_a_jump_do_not_confirm_dead_for_32_days() -> None:
    policy = Policy(Config())
    first = observe(policy, None, dns(T0), dns(T0 + 1))  # one visit: held 12 h
    assert first.dead_visits == 1
    # The clock jumps 2 days ahead: seconds later, two more failures "confirm" it.
    confirmed = observe(policy, first, dns(T0 + JUMP + 10), dns(T0 + JUMP + 12))
    assert confirmed.state is State.DEAD and confirmed.dead_visits == 2
    assert confirmed.state_expires_at is not None and confirmed.state_expires_at >= T0 + 32 * DAY
    # Set back to the right time: the confirmation was judged on future stamps.
    now = T0 + 120
    assert policy.decide(confirmed, now) is not Decision.SKIP
    again = observe(policy, confirmed, dns(now), dns(now + 5))
    assert again.state is State.DEAD
    assert again.dead_visits == 1  # one visit again: a hold, not 30 days
    assert again.state_expires_at == now + 5 + 12 * HOUR
    assert again.last_seen == now + 5 and again.dead_at == now  # re-stamped when first seen again
    # A flush re-applying entries buffered before (older than what a peer wrote) clamps nothing.
    from scrapy_domainstate.store.base import apply_entries

    replayed = apply_entries(policy, again, "x.example", [dns(now - HOUR)])
    assert replayed.state_changed_at == again.state_changed_at and replayed.last_seen == now + 5


def test_last_seen_from_the_future_is_clamped_by_the_next_outcome() -> None:
    policy = Policy(Config())
    stat = observe(policy, None, ok(T0 + JUMP))
    back = observe(policy, stat, ok(T0))
    assert back.last_seen == T0  # before: last_seen only grew
    assert back.first_seen == T0
    # Within the margin, stamps are trusted (two processes' clocks differ a little).
    near = observe(policy, stat, ok(T0 + JUMP - FUTURE_MARGIN / 2))
    assert near.last_seen == T0 + JUMP


def test_a_clock_set_back_from_the_right_time_keeps_ttls_their_length() -> None:
    """The other direction: stamps made with the right clock are in the future of a clock set back."""
    policy = Policy(Config())
    stat = policy.set_state(policy.new("x.example", T0), State.ANTIBOT_SOFT, T0)
    ttl = stat.state_expires_at - T0  # type: ignore[operator]
    now = T0 - JUMP
    current = policy.current(stat, "x.example", now)
    assert current.state is State.ANTIBOT_SOFT
    assert current.state_changed_at == now and current.state_expires_at == now + ttl
    # A cold verdict from the "future" is checked again.
    cold = policy.set_state(policy.new("y.example", T0), State.COLD, T0)
    assert policy.decide(cold, now) is not Decision.SKIP
