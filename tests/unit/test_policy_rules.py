"""The rules docs/SPEC.md section 2 (revised) settles, one table per rule (issue 10, section 2).

Each table row is a sequence of observations on a fake clock and what the policy must
make of it; every row fails when its rule breaks. ``Sim`` and the step helpers are the
ones of ``test_policy.py``.
"""

from __future__ import annotations

import pytest

from scrapy_domainstate.core.keys import host_fact_key
from scrapy_domainstate.core.policy import SHELL_RENDER, Decision, Policy
from scrapy_domainstate.core.record import DomainStat, Method, RecentEntry, State
from scrapy_domainstate.store.codec import decode, decode_decision, encode
from tests.unit.test_policy import (
    ANTIBOT,
    BLOCK,
    CONTACT,
    DAY,
    DEAD,
    DOMAIN,
    EMPTY,
    HTTP_ERR,
    NET_ERR,
    NO_VERDICT,
    F,
    H,
    T,
    cfg,
    hard,
    into,
    sim,
    step,
)

HOUR = 3600.0
WEEK = 7 * DAY
#: A visit: (seconds since the previous one, its observations).
Visit = tuple[float, list]


def visits(config, plan: list[Visit]):
    """Feed visits (each after its gap) and return the sim."""
    s = sim(config)
    for gap, steps in plan:
        s.advance(gap)
        s.feed(steps)
    return s


# =====================================================================
# Rule 1: the soft -> hard streak counts plain requests only; 429 for neither
# =====================================================================

A403 = step(F, ANTIBOT, "cloudflare:cf-ray", 403)
HEAD_CHALLENGE = step(H, ANTIBOT, "cloudflare:cf-mitigated", 403)
RATE = step(F, ANTIBOT, "rate-limit", 429)
RENDER_PASSED = step(T, CONTACT)
RENDER_WALL = step(T, ANTIBOT, "challenge:cloudflare", 403)

STREAK = [
    ("three-plain", [HEAD_CHALLENGE, A403, A403], State.ANTIBOT_HARD),
    ("renders-between-do-not-break", [A403, RENDER_PASSED, A403, RENDER_PASSED, A403], State.ANTIBOT_HARD),
    ("renders-do-not-extend", [A403, RENDER_WALL, A403, RENDER_WALL], State.ANTIBOT_SOFT),
    ("renders-alone-never", [RENDER_WALL] * 6, State.ANTIBOT_SOFT),
    ("429s-never", [RATE] * 6, State.ANTIBOT_SOFT),
    ("429-does-not-extend", [A403, RATE, A403], State.ANTIBOT_SOFT),
    ("429-does-not-break", [A403, A403, RATE, A403], State.ANTIBOT_HARD),
    ("plain-ok-breaks", [A403, A403, step(F, CONTACT), A403], State.ANTIBOT_SOFT),
    ("plain-error-breaks", [A403, A403, step(F, HTTP_ERR, status=500), A403], State.ANTIBOT_SOFT),
    ("hard-block-at-once", [hard(T)], State.ANTIBOT_HARD),
]


@pytest.mark.parametrize(("steps", "expected"), [r[1:] for r in STREAK], ids=[r[0] for r in STREAK])
def test_rule1_antibot_streak_of_plain_requests(steps, expected):
    assert sim(steps=steps).state is expected


def test_rule1_a_wall_that_was_hard_is_hard_again_at_its_first_challenge():
    s = sim(steps=[A403] * 3)
    assert s.state is State.ANTIBOT_HARD
    s.at(s.stat.state_expires_at)  # hard -> soft, recent cleared
    assert s.record.state is State.ANTIBOT_SOFT and s.record.recent == []
    s.see(F, ANTIBOT, "cloudflare:cf-ray", 403)
    assert s.state is State.ANTIBOT_HARD  # its lifetime plain fetches (3, none passed) carry the streak


def test_rule1_walls_on_two_visits_add_up_across_an_expiry():
    # a two-page wall: two challenges on its first visit (soft), its soft verdict runs out
    # before the next visit; that visit's first challenge is the third in a row: hard
    s = sim(steps=[A403, A403])
    assert s.state is State.ANTIBOT_SOFT
    s.at(s.stat.state_expires_at)  # soft -> unknown, recent cleared
    assert s.record.state is State.UNKNOWN and s.record.recent == []
    s.see(F, ANTIBOT, "cloudflare:cf-ray", 403)
    assert s.state is State.ANTIBOT_HARD  # 2 cleared + 1 in recent, no plain fetch ever passed


def test_rule1_walls_across_an_expiry_still_need_the_threshold():
    s = sim(steps=[A403])
    s.at(s.stat.state_expires_at)
    s.see(F, ANTIBOT, "cloudflare:cf-ray", 403)
    assert s.state is State.ANTIBOT_SOFT  # 1 cleared + 1: two in a row, not three


def test_rule1_the_lifetime_streak_never_for_a_site_whose_plain_fetch_passed():
    s = sim(steps=[step(F, CONTACT), A403, A403, A403])
    assert s.state is State.ANTIBOT_SOFT
    s.at(s.stat.state_expires_at)  # soft -> unknown, recent cleared
    s.see(F, ANTIBOT, "cloudflare:cf-ray", 403)
    assert s.state is State.ANTIBOT_SOFT  # one plain fetch passed, long ago: never hard by the lifetime


def test_rule1_the_lifetime_streak_not_past_a_breaker():
    s = sim(steps=[A403] * 3)
    s.at(s.stat.state_expires_at)
    s.see(F, HTTP_ERR, status=500)  # a plain answer that is not a wall, since the expiry
    s.see(F, ANTIBOT, "cloudflare:cf-ray", 403)
    assert s.state is State.ANTIBOT_SOFT


# =====================================================================
# Rule 2: cold only for a domain that never yielded a useful page (lifetime)
# =====================================================================

COLD = [
    ("never-useful", [(0, [step(F, EMPTY)] * 5)], State.COLD),
    ("never-useful-any-method", [(0, [step(T, EMPTY), step(F, EMPTY)] * 3)], State.COLD),
    ("useful-fetch-once", [(0, [step(F, CONTACT)] + [step(F, EMPTY)] * 8)], State.UNKNOWN),
    ("useful-render-once", [(0, [step(T, CONTACT)] + [step(F, EMPTY)] * 8)], State.UNKNOWN),
    # the lifetime counters survive expiry: a contact two months ago still counts
    ("useful-long-ago", [(0, [step(F, CONTACT)]), (60 * DAY, [step(F, EMPTY)] * 8)], State.UNKNOWN),
    ("useful-while-soft", [(0, [A403, step(T, CONTACT)]), (30 * DAY, [step(F, EMPTY)] * 6)], State.UNKNOWN),
    ("empty-streak-across-weekly-visits", [(0, [step(F, EMPTY)] * 3), (WEEK + 1, [step(F, EMPTY)] * 2)], State.COLD),
    # an expiry cleared recent (antibot-soft ran out): the lifetime empty fetches carry the streak
    ("streak-carried-across-an-expiry", [(0, [A403] + [step(F, EMPTY)] * 4), (WEEK + 1, [step(F, EMPTY)])], State.COLD),
    # ... but not past anything in recent that breaks it
    (
        "lifetime-count-not-past-a-breaker",
        [(0, [step(F, EMPTY)] * 4 + [step(F, NET_ERR)]), (WEEK + 1, [step(F, EMPTY)] * 2)],
        State.UNKNOWN,
    ),
    (
        "lifetime-count-not-for-renders",
        [(0, [A403] + [step(T, EMPTY)] * 4), (WEEK + 1, [step(F, EMPTY)])],
        State.UNKNOWN,
    ),
]


def test_rule2_an_expired_cold_verdict_is_confirmed_by_one_empty_page():
    s = into(State.COLD)  # 5 empty fetches
    s.at(s.stat.state_expires_at)
    assert s.record.state is State.UNKNOWN and s.record.recent == []
    s.see(F, EMPTY)
    assert s.state is State.COLD  # the confirmation visit costs one page
    s.at(s.stat.state_expires_at)
    s.see(F, CONTACT)
    s.see(F, EMPTY)
    assert s.state is State.UNKNOWN  # once useful, never cold


@pytest.mark.parametrize(("plan", "expected"), [r[1:] for r in COLD], ids=[r[0] for r in COLD])
def test_rule2_cold_needs_a_domain_that_never_yielded(plan, expected):
    s = visits(None, plan)
    assert s.state is expected
    if expected is State.UNKNOWN:
        assert State.COLD not in {t.new for t in s.transitions}


# =====================================================================
# Rule 3: friendly's ">= 5 fetches" is the lifetime fetch_total; the ratio reads recent
# =====================================================================

FRIENDLY = [
    # (settings, visits, expected)
    ("5-in-one-visit", {}, [(0, [step(F, CONTACT)] * 5)], State.FRIENDLY),
    ("4-in-all", {}, [(0, [step(F, CONTACT)] * 4)], State.UNKNOWN),
    ("3+2-across-visits", {}, [(0, [step(F, CONTACT)] * 3), (WEEK + 1, [step(F, CONTACT)] * 2)], State.FRIENDLY),
    (
        "lifetime-with-cleared-recent",
        {"renewal_clears_recent": True},
        [(0, [step(F, CONTACT)] * 4), (WEEK + 1, [step(F, CONTACT)] * 3)],
        State.FRIENDLY,
    ),
    (
        "min-window-with-cleared-recent",
        {"renewal_clears_recent": True},
        [(0, [step(F, CONTACT)] * 4), (WEEK + 1, [step(F, CONTACT)] * 2)],
        State.UNKNOWN,
    ),
    (
        "min-window-1",
        {"renewal_clears_recent": True, "friendly_min_window": 1},
        [(0, [step(F, CONTACT)] * 4), (WEEK + 1, [step(F, CONTACT)])],
        State.FRIENDLY,
    ),
    ("ratio-over-the-last-10", {}, [(0, [step(F, EMPTY)] * 4 + [step(F, CONTACT)] * 7)], State.FRIENDLY),
    ("ratio-too-low", {}, [(0, [step(F, EMPTY)] * 4 + [step(F, CONTACT)] * 6)], State.UNKNOWN),
    ("renders-are-not-fetches", {}, [(0, [step(T, CONTACT)] * 4 + [step(F, CONTACT)])], State.UNKNOWN),
]


@pytest.mark.parametrize(("settings", "plan", "expected"), [r[1:] for r in FRIENDLY], ids=[r[0] for r in FRIENDLY])
def test_rule3_friendly_counts_lifetime_fetches(settings, plan, expected):
    assert visits(cfg(**settings), plan).state is expected


# =====================================================================
# Rule 4: dead is confirmed across visits
# =====================================================================

DNS2 = [step(H, DEAD, "dns"), step(F, DEAD, "dns")]
DNS1 = [step(F, DEAD, "dns")]
ALIVE = [step(F, CONTACT)]

DEAD_CHAIN = [
    # visits, then the dead TTL expected after each visit (None: not dead after it)
    ("one-visit-holds-1d", [(0, DNS2)], [DAY]),
    ("confirmed-on-a-later-visit", [(0, DNS2), (DAY + 1, DNS2)], [DAY, 30 * DAY]),
    (
        "doubling-up-to-180",
        [(0, DNS2), (DAY + 1, DNS2), (31 * DAY, DNS2), (61 * DAY, DNS2), (121 * DAY, DNS2), (181 * DAY, DNS2)],
        [DAY, 30 * DAY, 60 * DAY, 120 * DAY, 180 * DAY, 180 * DAY],
    ),
    # an operator reset within the hour: the same visit, still a hold
    ("same-visit-within-an-hour", [(0, DNS2), ("reset", 10 * 60), (0, DNS2)], [DAY, None, DAY]),
    ("later-visit-after-an-hour", [(0, DNS2), ("reset", 2 * HOUR), (0, DNS2)], [DAY, None, 30 * DAY]),
    # seen alive between: the chain starts again
    ("alive-between", [(0, DNS2), (DAY + 1, ALIVE), (WEEK + 1, DNS2)], [DAY, None, DAY]),
    # a week-long outage seen on two visits is confirmed; a one-visit outage costs a day
    ("one-visit-outage", [(0, DNS2), (DAY + 1, ALIVE * 3)], [DAY, None]),
    # the confirmation visit costs one request: its first dead signal confirms the earlier verdict
    ("confirmed-by-one-request", [(0, DNS2), (DAY + 1, DNS1)], [DAY, 30 * DAY]),
    ("reconfirmed-by-one-request", [(0, DNS2), (DAY + 1, DNS1), (31 * DAY, DNS1)], [DAY, 30 * DAY, 60 * DAY]),
    # ... but not by a HEAD alone, nor within the visit, nor after an answer broke the chain
    ("a-head-does-not-confirm", [(0, DNS2), (DAY + 1, [step(H, DEAD, "dns")])], [DAY, None]),
    ("same-visit-one-signal", [(0, DNS2), ("reset", 10 * 60), (0, DNS1)], [DAY, None, None]),
    ("alive-then-one-signal", [(0, DNS2), (DAY + 1, ALIVE), (WEEK + 1, DNS1)], [DAY, None, None]),
    # a first visit still needs two signals (never dead from one request)
    ("one-signal-first-visit", [(0, DNS1)], [None]),
]


#: A host pause as the runtime records it: its requests timed out N times in a row.
PAUSE = [step(F, DEAD, "paused:timeout")]
PAUSE_CHAIN = [
    # a host that never answered: pauses on three visits confirm it dead (dead signals need two)
    ("never-answered-confirmed-on-the-third", [(0, PAUSE), (DAY + 1, PAUSE), (DAY + 1, PAUSE)], [DAY, DAY, 30 * DAY]),
    # a host that has answered is down part of the time: held for the visit, never confirmed
    (
        "useful-then-paused-held-each-visit",
        [(0, ALIVE), (DAY + 1, PAUSE), (DAY + 1, PAUSE), (DAY + 1, PAUSE), (DAY + 1, PAUSE)],
        [None, DAY, DAY, DAY, DAY],
    ),
    (
        "empty-pages-count-as-answers",
        [(0, [step(F, EMPTY)]), (DAY + 1, PAUSE), (DAY + 1, PAUSE), (DAY + 1, PAUSE)],
        [None, DAY, DAY, DAY],
    ),
    ("useful-then-back", [(0, ALIVE), (DAY + 1, PAUSE), (DAY + 1, ALIVE)], [None, DAY, None]),
    # real dead signals on a host that answered before are confirmed on the third visit (a DNS
    # outage on two visits in a row is likelier than on three); the third costs one request
    (
        "useful-then-dns-confirmed-on-the-third",
        [(0, ALIVE), (DAY + 1, DNS2), (DAY + 1, DNS2), (DAY + 1, DNS1)],
        [None, DAY, DAY, 30 * DAY],
    ),
    (
        "empty-then-dns-confirmed-on-the-third",
        [(0, [step(F, EMPTY)]), (DAY + 1, DNS2), (DAY + 1, DNS2), (DAY + 1, DNS2), (31 * DAY, DNS1)],
        [None, DAY, DAY, 30 * DAY, 60 * DAY],
    ),
    (
        "useful-then-two-outages-then-back",
        [(0, ALIVE), (DAY + 1, DNS2), (DAY + 1, DNS2), (DAY + 1, ALIVE)],
        [None, DAY, DAY, None],
    ),
]


@pytest.mark.parametrize(
    ("plan", "ttls"), [r[1:] for r in DEAD_CHAIN + PAUSE_CHAIN], ids=[r[0] for r in DEAD_CHAIN + PAUSE_CHAIN]
)
def test_rule4_dead_confirmed_across_visits(plan, ttls):
    s = sim()
    for (gap, steps), ttl in zip(plan, ttls, strict=True):
        if gap == "reset":
            s.advance(steps)
            s.stat = s.policy.set_state(s.stat, State.UNKNOWN, s.t)
        else:
            s.advance(gap)
            s.feed(steps)
        if ttl is None:
            assert s.state is not State.DEAD
        else:
            assert s.state is State.DEAD
            assert s.stat.state_expires_at == pytest.approx(s.t + ttl)
            assert s.decide() is Decision.SKIP


def test_rule4_hold_and_cap_settings():
    s = visits(cfg(dead_hold=3600, dead_ttl_max=40 * DAY), [(0, DNS2), (2 * HOUR, DNS2), (31 * DAY, DNS2)])
    assert s.stat.state_expires_at == s.t + 40 * DAY  # 60 d capped at 40
    s = visits(cfg(ttl={"dead": 600}), [(0, DNS2)])
    assert s.stat.state_expires_at == s.t + 600  # the hold never exceeds the dead TTL
    s = visits(cfg(ttl={"dead": None}), [(0, DNS2), (2 * DAY, DNS2)])
    assert s.stat.state_expires_at is None  # confirmed, and dead never expires


def test_rule4_chain_survives_storage():
    s = visits(None, [(0, DNS2)])
    stored = decode(encode(s.stat))
    assert (stored.dead_visits, stored.dead_at) == (1, s.stat.dead_at)
    s.stat = stored
    s.advance(DAY + 1).feed(DNS2)
    assert s.stat.state_expires_at == s.t + 30 * DAY


# =====================================================================
# Rule 5: host facts under a shared eTLD+1 key
# =====================================================================

HOST_KEYS = [
    ("https://shop.example.com/x", False, "shop.example.com"),
    ("https://example.com/", False, None),
    ("https://www.example.com/", False, None),
    ("https://a.b.example.co.uk/", False, "a.b.example.co.uk"),
    ("https://alice.github.io/", False, None),  # a private suffix: alice.github.io is the site
    ("https://shop.example.com/", True, None),  # per hostname: everything is the host's already
    ("http://10.0.0.1/", False, None),
]


@pytest.mark.parametrize(("url", "per_hostname", "key"), HOST_KEYS, ids=[f"{r[0]}-{r[1]}" for r in HOST_KEYS])
def test_rule5_host_fact_key(url, per_hostname, key):
    assert host_fact_key(url, per_hostname) == key


ROUTES = [
    # outcome -> (host record?, domain record?): docs/SPEC.md section 2 (revised again), every
    # fact of a host is its own: dead signals, usefulness, anti-bot and friendly evidence
    (step(F, DEAD, "dns"), True, False),
    (step(F, EMPTY), True, False),
    (step(F, CONTACT), True, False),
    (step(F, NET_ERR, "timeout"), True, False),
    (step(F, HTTP_ERR, status=500), True, False),
    (step(F, ANTIBOT, "cloudflare:cf-ray", 403), True, False),
    (hard(F), True, False),
]


@pytest.mark.parametrize(("s", "to_host", "to_domain"), ROUTES, ids=[f"{r[0][1]}-{r[0][2]}" for r in ROUTES])
def test_rule5_which_record_an_outcome_goes_to(s, to_host, to_domain):
    method, outcome, error_class, status = s
    entry = RecentEntry(1.0, method, outcome, status, error_class)
    assert Policy.for_host(entry) is to_host
    assert Policy.for_domain(entry) is to_domain


def _host_sim(host_steps, domain_steps, policy: Policy | None = None):
    """A host record and its domain's record, fed as the manager/simulator route them
    (the seed's readings unless ``policy`` is given)."""
    policy = policy or Policy(cfg())
    host = domain = None
    t = 1_700_000_000.0
    for steps, is_host in ((host_steps, True), ([step(H, NO_VERDICT), *domain_steps], False)):
        for method, outcome, error_class, status in steps:
            t += 1
            entry = RecentEntry(t, method, outcome, status, error_class)
            if is_host:
                to_host = Policy.host_entry(entry)
                if to_host is not None:
                    host, _ = policy.observe(host, "shop.example.com", to_host)
                to_domain = Policy.domain_entry(entry)
                if to_domain is not None:
                    domain, _ = policy.observe(domain, "example.com", to_domain)
            else:
                domain, _ = policy.observe(domain, "example.com", entry)
    return policy, host, domain, t


HOST_FACTS = [
    # (the subdomain's outcomes, the registrable domain's own outcomes) -> decision for the
    # subdomain, for the domain itself
    ("dead-subdomain", DNS2, [step(F, CONTACT)], Decision.SKIP, Decision.FETCH_THEN_BROWSER),
    ("empty-subdomain", [step(F, EMPTY)] * 5, [step(F, CONTACT)], Decision.SKIP, Decision.FETCH_THEN_BROWSER),
    # the root's dead signals are the root host's: a live subdomain decides from its own
    # record (not probed yet: it probes). (The root cannot go cold while a subdomain yields.)
    ("dead-root-live-subdomain", [step(F, CONTACT)], DNS2, Decision.PROBE, Decision.SKIP),
    (
        "dead-root-probed-subdomain",
        [step(H, NO_VERDICT), step(F, CONTACT)],
        DNS2,
        Decision.FETCH_THEN_BROWSER,
        Decision.SKIP,
    ),
    # a walled subdomain walls itself, not the site; each host is friendly for itself
    ("walled-subdomain-walls-itself", [A403] * 3, [], Decision.BROWSER, Decision.FETCH_THEN_BROWSER),
    ("friendly-per-host", [step(F, CONTACT)] * 5, [step(F, CONTACT)] * 2, Decision.FETCH, Decision.FETCH_THEN_BROWSER),
    # client rendering is the host's own: the subdomain renders at once, the domain does not learn it
    (
        "client-rendered-subdomain",
        [step(H, NO_VERDICT), step(T, CONTACT, SHELL_RENDER), step(T, CONTACT, SHELL_RENDER)],
        [],
        Decision.BROWSER,
        Decision.FETCH_THEN_BROWSER,
    ),
]


@pytest.mark.parametrize(
    ("host_steps", "domain_steps", "host_decision", "domain_decision"),
    [r[1:] for r in HOST_FACTS],
    ids=[r[0] for r in HOST_FACTS],
)
def test_rule5_host_facts_do_not_take_siblings_down(host_steps, domain_steps, host_decision, domain_decision):
    policy, host, domain, t = _host_sim(host_steps, domain_steps)
    dom = policy.current(domain, "example.com", t)
    dom_d = (policy.decide(dom, t), dom.state, dom.state_expires_at)
    h = policy.current(host, "shop.example.com", t)
    host_d = (policy.decide(h, t), h.state, h.state_expires_at)
    assert Policy.decide_with_host(dom_d, host_d)[0] is host_decision
    assert dom_d[0] is domain_decision


# =====================================================================
# Rule 6: an antibot outcome on a friendly domain -> antibot-soft at once
# =====================================================================

ON_FRIENDLY = [
    (A403, State.ANTIBOT_SOFT),
    (RATE, State.ANTIBOT_SOFT),
    (HEAD_CHALLENGE, State.ANTIBOT_SOFT),
    (step(F, ANTIBOT, "awswaf:challenge", 202), State.ANTIBOT_SOFT),
    (hard(F), State.ANTIBOT_HARD),
    (step(F, HTTP_ERR, status=500), State.FRIENDLY),
]


@pytest.mark.parametrize(("s", "expected"), ON_FRIENDLY, ids=[f"{r[0][2]}-{r[0][3]}" for r in ON_FRIENDLY])
def test_rule6_antibot_on_friendly_goes_soft_at_once(s, expected):
    sm = into(State.FRIENDLY)
    sm.see(*s)
    assert sm.state is expected
    if expected is State.ANTIBOT_SOFT:
        assert sm.decide() is Decision.FETCH_THEN_BROWSER
        assert sm.transitions[-1].old is State.FRIENDLY


# =====================================================================
# Rule 7: client-rendered sites are learned as needing the browser
# =====================================================================

SHELL = step(T, CONTACT, SHELL_RENDER)  # a render that followed a script-only shell
SHELL_EMPTY = step(T, EMPTY, SHELL_RENDER)

LEARN = [
    ("two-shells-rendered", {}, [step(H, NO_VERDICT), SHELL, SHELL_EMPTY], Decision.BROWSER),
    ("one-shell", {}, [step(H, NO_VERDICT), SHELL], Decision.FETCH_THEN_BROWSER),
    ("real-page-between", {}, [SHELL, step(F, CONTACT), SHELL], Decision.FETCH_THEN_BROWSER),
    ("failed-render-between", {}, [SHELL, step(T, NET_ERR, "timeout"), SHELL], Decision.FETCH_THEN_BROWSER),
    ("learn-after-3", {"browser_learn": 3}, [SHELL, SHELL], Decision.FETCH_THEN_BROWSER),
    ("learn-after-1", {"browser_learn": 1}, [SHELL], Decision.BROWSER),
    ("while-soft", {}, [A403, SHELL, SHELL], Decision.BROWSER),
    ("not-dead", {}, [SHELL, SHELL, step(T, DEAD, "dns"), step(T, DEAD, "dns")], Decision.SKIP),
    ("learned-then-plain-page", {}, [SHELL, SHELL, step(F, CONTACT)], Decision.FETCH_THEN_BROWSER),
]


@pytest.mark.parametrize(("settings", "steps", "decision"), [r[1:] for r in LEARN], ids=[r[0] for r in LEARN])
def test_rule7_client_rendered_sites_render_at_once(settings, steps, decision):
    s = sim(cfg(**settings), [step(H, NO_VERDICT), *steps])  # probed: no PROBE decision
    assert s.decide() is decision
    assert s.state in set(State)  # still one of the six
    # the fast decision path (header only) agrees with the record
    state, _, changed, probed, browser = decode_decision(encode(s.stat))
    assert s.policy.decide_state(state, probed, changed, browser) is s.policy.decide(s.stat, s.t)


def test_rule7_learned_browser_is_checked_again_after_its_ttl():
    s = sim(cfg(browser_learn_ttl=10 * DAY), [step(H, NO_VERDICT), SHELL, SHELL])
    assert s.decide() is Decision.BROWSER
    s.see(T, CONTACT, dt=5 * DAY)
    assert s.decide() is Decision.BROWSER
    s.see(T, CONTACT, dt=6 * DAY)  # 11 days after it was learned
    assert s.stat.browser_since == 0.0
    assert s.decide() is Decision.PROBE  # (a new unknown period) then a plain fetch


def test_rule7_flag_round_trips_and_old_records_decode():
    stat = sim(steps=[SHELL, SHELL]).stat
    assert stat.browser_since
    assert decode(encode(stat)) == stat
    plain = DomainStat(DOMAIN, recent=[RecentEntry(10.0, Method.FETCH, CONTACT)], first_seen=10.0)
    raw = encode(plain)
    assert decode(raw) == plain
    assert decode_decision(raw)[4] is False


# =====================================================================
# Rule 8: does unknown -> unknown expiry clear recent? (measured: it keeps it)
# =====================================================================


@pytest.mark.parametrize(("clears", "kept"), [(False, 3), (True, 0)])
def test_rule8_renewal_and_recent(clears, kept):
    s = sim(cfg(renewal_clears_recent=clears), [step(F, EMPTY)] * 3)
    s.advance(WEEK + 1)
    rec = s.record
    assert rec.state is State.UNKNOWN
    assert len(rec.recent) == kept
    assert rec.probed_at == 0.0  # a new period is probed again either way
    s.feed([step(F, EMPTY)] * 2)
    # cold either way: a cleared recent's streak is carried by the lifetime count of empty fetches
    assert s.state is State.COLD


def test_rule8_other_expiries_always_clear_recent():
    for state in (State.DEAD, State.ANTIBOT_SOFT, State.COLD):
        s = into(state)
        s.at(s.stat.state_expires_at)
        assert s.record.recent == [], state


def test_rule8_dead_signals_in_a_row_span_unknowns_renewal():
    # A root that answered 404 on the last visit (one signal: its other URLs' 404s mark only
    # themselves) and answers 404 again, a week and a renewal of unknown later, with nothing
    # alive in between: two dead signals in a row, held like any visit's verdict.
    s = sim(steps=[step(F, DEAD, "http:404")])
    s.advance(WEEK + 1)
    s.see(F, DEAD, "http:404")
    assert s.state is State.DEAD
    assert s.record.state_expires_at == s.t + s.policy.config.dead_hold  # one verdict: the hold, not 30 d


def test_rule8_an_answer_between_two_visits_signals_breaks_the_streak():
    s = sim(steps=[step(F, DEAD, "dns"), step(F, EMPTY)])
    s.advance(WEEK + 1)
    s.see(F, DEAD, "dns")
    assert s.state is State.UNKNOWN
    s.see(F, DEAD, "dns")
    assert s.state is State.DEAD


def test_block_constant_is_a_hard_block():
    assert RecentEntry(1.0, F, ANTIBOT, 403, BLOCK).is_hard_block


def test_rule7_the_evidence_module_marks_the_render_of_a_shell():
    from scrapy_domainstate.detect import evidence
    from scrapy_domainstate.detect.verdict import Verdict

    page = Verdict(CONTACT, 200)
    shell = Verdict(EMPTY, 200, "js-shell", browser_fixable=True)
    # the plain fetch that got a shell: not evidence, re-issued
    judged = evidence.judge_response(evidence.Facts(Method.FETCH, 200, fallback=True), shell)
    assert judged.record is None and judged.reissue and judged.reason == evidence.JS_SHELL
    # its render: recorded with the marker the browser-learning rule reads
    rendered = evidence.judge_response(evidence.Facts(Method.TAB, 200, reissued=True, after_shell=True), page)
    rendered = evidence.with_usefulness(rendered, CONTACT)
    assert rendered.record is not None and rendered.record.error_class == SHELL_RENDER
    # any other render: no marker
    other = evidence.judge_response(evidence.Facts(Method.TAB, 200, reissued=True), page)
    assert evidence.with_usefulness(other, CONTACT).record.error_class is None
