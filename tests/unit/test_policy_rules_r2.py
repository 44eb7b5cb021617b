"""The rules of docs/SPEC.md section 2 as revised again (issue 20), with the shipped defaults.

One table per rule; each row is a sequence of visits on a fake clock and what the policy must
make of it, and every row fails when its rule breaks. The tables of test_policy.py and
test_policy_rules.py drive the same mechanisms with the seed's literal readings.
"""

from __future__ import annotations

import pytest

from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.policy import Decision, Policy
from scrapy_domainstate.core.record import Outcome, State
from tests.unit.test_policy import ANTIBOT, BLOCK, CONTACT, DAY, DEAD, EMPTY, HTTP_ERR, NET_ERR, F, H, Sim, T, step
from tests.unit.test_policy_rules import _host_sim

HOUR = 3600.0
NAV = step(F, Outcome.NAVIGATION)
A403 = step(F, ANTIBOT, "cloudflare:cf-ray", 403)


def defaults() -> Policy:
    return Policy(Config.from_settings({}))


def run(plan: list[tuple[float, list]]) -> Sim:
    """Visits ``(seconds since the previous visit, observations)`` under the shipped defaults."""
    s = Sim(policy=defaults())
    for gap, steps in plan:
        s.advance(gap)
        s.feed(steps)
    return s


# =====================================================================
# Rule 1: friendly falls back to the browser (DOMAINSTATE_FRIENDLY_FALLBACK on by default)
# =====================================================================


def test_rule1_friendly_falls_back_by_default() -> None:
    s = run([(0, [step(F, CONTACT)] * 5)])
    assert s.state is State.FRIENDLY
    assert s.decide() is Decision.FETCH_THEN_BROWSER


# =====================================================================
# Rule 3: cold is confirmed across visits; navigation is neither useful nor empty
# =====================================================================

COLD = [
    ("one-visit-never", [(0, [step(F, EMPTY)] * 20)], State.UNKNOWN),
    ("two-visits-10-empty", [(0, [step(F, EMPTY)] * 5), (DAY, [step(F, EMPTY)] * 5)], State.COLD),
    ("two-visits-9-empty", [(0, [step(F, EMPTY)] * 5), (DAY, [step(F, EMPTY)] * 4)], State.UNKNOWN),
    ("within-the-hour", [(0, [step(F, EMPTY)] * 5), (HOUR / 2, [step(F, EMPTY)] * 5)], State.UNKNOWN),
    ("navigation-neither-extends", [(0, [NAV] * 10), (DAY, [NAV] * 10)], State.UNKNOWN),
    (
        "navigation-does-not-break",
        [(0, [step(F, EMPTY), NAV] * 5), (DAY, [NAV, step(F, EMPTY)] * 5)],
        State.COLD,
    ),
    (
        "one-useful-page-ever",
        [(0, [step(F, CONTACT)] + [step(F, EMPTY)] * 9), (DAY, [step(F, EMPTY)] * 10)],
        State.UNKNOWN,
    ),
    ("renders-count-as-pages", [(0, [step(T, EMPTY)] * 5), (DAY, [step(T, EMPTY)] * 5)], State.COLD),
]


@pytest.mark.parametrize(("plan", "expected"), [r[1:] for r in COLD], ids=[r[0] for r in COLD])
def test_rule3_cold_spans_two_visits(plan, expected) -> None:
    assert run(plan).state is expected


def test_rule3_navigation_is_not_in_the_friendly_ratio() -> None:
    # 3 useful of 10 fetches is 30 %; without the 7 navigation pages it is 3 of 3
    s = run([(0, [NAV, NAV, step(F, CONTACT), NAV, NAV, step(F, CONTACT), NAV, NAV, NAV, step(F, CONTACT)])])
    assert s.record.fetch_total == 10
    assert s.state is State.FRIENDLY


# =====================================================================
# Rule 4: antibot-hard only when plain fetches never pass; the canary brings it back
# =====================================================================

HARD = [
    ("three-plain-never-passed", [A403] * 3, State.ANTIBOT_HARD),
    ("a-pass-before", [step(F, CONTACT), A403, A403, A403], State.ANTIBOT_SOFT),
    ("an-empty-pass-before", [step(F, EMPTY), A403, A403, A403, A403], State.ANTIBOT_SOFT),
    ("a-render-is-no-plain-pass", [step(T, CONTACT), A403, A403, A403], State.ANTIBOT_HARD),
    ("a-failure-is-no-pass", [step(F, HTTP_ERR, status=500), A403, A403, A403], State.ANTIBOT_HARD),
    ("a-hard-block-stands", [step(F, CONTACT), step(F, ANTIBOT, BLOCK, 403)], State.ANTIBOT_HARD),
]


@pytest.mark.parametrize(("steps", "expected"), [r[1:] for r in HARD], ids=[r[0] for r in HARD])
def test_rule4_hard_only_when_plain_fetches_never_pass(steps, expected) -> None:
    assert run([(0, steps)]).state is expected


CANARY = [
    ("plain-pass-goes-soft", step(F, CONTACT), State.ANTIBOT_SOFT),
    ("plain-empty-pass-goes-soft", step(F, EMPTY), State.ANTIBOT_SOFT),
    ("render-pass-stays-hard", step(T, CONTACT), State.ANTIBOT_HARD),
    ("plain-wall-stays-hard", A403, State.ANTIBOT_HARD),
    ("network-error-stays-hard", step(F, NET_ERR, "timeout"), State.ANTIBOT_HARD),
]


@pytest.mark.parametrize(("canary", "expected"), [r[1:] for r in CANARY], ids=[r[0] for r in CANARY])
def test_rule4_the_canary(canary, expected) -> None:
    s = run([(0, [A403] * 3)])
    assert s.state is State.ANTIBOT_HARD
    s.advance(DAY).see(*canary)
    assert s.state is expected


# =====================================================================
# Rule 5: a dead hold that ends before the next daily visit; confirmed on a later one
# =====================================================================

DNS = step(F, DEAD, "dns")


def test_rule5_one_visit_dead_hold_ends_before_the_next_daily_visit() -> None:
    s = run([(0, [DNS, DNS])])
    assert s.state is State.DEAD
    s.advance(12 * HOUR - 60)
    assert s.state is State.DEAD
    s.advance(120)
    assert s.state is State.UNKNOWN  # the next daily visit (24 h on) probes it again
    s.advance(12 * HOUR).feed([DNS, DNS])
    assert s.state is State.DEAD
    assert s.record.state_expires_at == pytest.approx(s.t + 30 * DAY)  # confirmed: 30 d


# =====================================================================
# Rule 6: anti-bot, friendly and needs-browser evidence per hostname
# =====================================================================


def _host_and_domain(host_steps: list, domain_steps: list) -> tuple[tuple, tuple]:
    """The domain's and the host's decisions, as ``store.decide`` gives them, with the defaults."""
    policy, host, domain, t = _host_sim(host_steps, domain_steps, defaults())
    dom = policy.current(domain, "example.com", t)
    h = policy.current(host, "shop.example.com", t)
    host_d = (
        (policy.decide(None, t), State.UNKNOWN, None)
        if host is None
        else (policy.decide(h, t), h.state, h.state_expires_at)
    )
    return (policy.decide(dom, t), dom.state, dom.state_expires_at), host_d


HOSTS = [
    # a walled root: a sibling with pages of its own is fetched as itself, not rendered
    ("walled-root-friendly-host", [step(F, CONTACT)] * 5, [step(F, ANTIBOT, BLOCK, 403)], Decision.FETCH_THEN_BROWSER),
    # a sibling never seen takes the registered domain's state as its prior
    ("never-seen-host-takes-the-prior", [], [step(F, ANTIBOT, BLOCK, 403)], Decision.BROWSER),
    # a walled host is hard for itself
    ("walled-host-is-hard", [step(F, ANTIBOT, BLOCK, 403)], [step(F, CONTACT)] * 5, Decision.BROWSER),
    ("empty-host-is-cold-for-itself", [step(F, EMPTY)] * 10, [step(F, CONTACT)] * 5, Decision.FETCH_THEN_BROWSER),
]


@pytest.mark.parametrize(("host_steps", "domain_steps", "expected"), [r[1:] for r in HOSTS], ids=[r[0] for r in HOSTS])
def test_rule6_evidence_per_hostname(host_steps, domain_steps, expected) -> None:
    domain, host = _host_and_domain(host_steps, domain_steps)
    assert Policy.decide_with_host(domain, host)[0] is expected


def test_rule6_a_walled_host_does_not_make_its_root_hard() -> None:
    domain, host = _host_and_domain([step(F, ANTIBOT, BLOCK, 403)], [step(F, CONTACT)] * 5)
    assert host[1] is State.ANTIBOT_HARD
    assert domain[0] is not Decision.BROWSER or domain[1] is not State.ANTIBOT_HARD


# =====================================================================
# Certificates: a site that yielded useful pages is never dead by its certificate alone
# =====================================================================

TLS = [
    ("never-useful", [step(F, DEAD, "tls:expired"), step(F, DEAD, "tls:expired")], State.DEAD),
    ("useful-before", [step(F, CONTACT), step(F, DEAD, "tls:expired"), step(F, DEAD, "tls:expired")], State.UNKNOWN),
    ("useful-before-dns-still-dead", [step(F, CONTACT), DNS, DNS], State.DEAD),
    (
        "rendered-useful-before",
        [step(T, CONTACT), step(F, DEAD, "tls:hostname"), step(F, DEAD, "tls:hostname")],
        State.UNKNOWN,
    ),
]


@pytest.mark.parametrize(("steps", "expected"), [r[1:] for r in TLS], ids=[r[0] for r in TLS])
def test_certificates_never_kill_a_useful_site(steps, expected) -> None:
    assert run([(0, steps)]).state is expected


# =====================================================================
# Purposes: what a site is worth to a spider is its own
# =====================================================================

SITE_UNKNOWN = (Decision.FETCH_THEN_BROWSER, State.UNKNOWN, 1.0)
WORTH = [
    ("own-cold-skips", SITE_UNKNOWN, (Decision.SKIP, State.COLD, 9.0), Decision.SKIP),
    (
        "default-purpose-cold-does-not",
        (Decision.SKIP, State.COLD, 9.0),
        (Decision.FETCH_THEN_BROWSER, State.UNKNOWN, None),
        Decision.FETCH_THEN_BROWSER,
    ),
    (
        "default-purpose-friendly",
        (Decision.FETCH_THEN_BROWSER, State.FRIENDLY, None),
        SITE_UNKNOWN,
        Decision.FETCH_THEN_BROWSER,
    ),
    ("dead-is-shared", (Decision.SKIP, State.DEAD, 9.0), SITE_UNKNOWN, Decision.SKIP),
    ("hard-is-shared", (Decision.BROWSER, State.ANTIBOT_HARD, 9.0), SITE_UNKNOWN, Decision.BROWSER),
    ("probe-is-shared", (Decision.PROBE, State.UNKNOWN, None), SITE_UNKNOWN, Decision.PROBE),
]


@pytest.mark.parametrize(("site", "worth", "expected"), [r[1:] for r in WORTH], ids=[r[0] for r in WORTH])
def test_worth_per_purpose(site, worth, expected) -> None:
    assert defaults().decide_with_worth(site, worth)[0] is expected


def test_a_head_probe_is_still_the_seed_pipeline() -> None:
    policy = Policy(Config.from_settings({"DOMAINSTATE_HEAD_PROBE": True}))
    assert policy.decide(None, 1.0) is Decision.PROBE
    assert defaults().decide(None, 1.0) is Decision.FETCH_THEN_BROWSER
    assert H  # (the HEAD method of the tables)


LEADS = [
    # (state, decision, canary sent, config) -> the first request goes alone
    ("unknown-probe", State.UNKNOWN, Decision.FETCH_THEN_BROWSER, False, {}, True),
    (
        "unknown-head-probe-instead",
        State.UNKNOWN,
        Decision.FETCH_THEN_BROWSER,
        False,
        {"DOMAINSTATE_HEAD_PROBE": True},
        False,
    ),
    ("unknown-no-probe", State.UNKNOWN, Decision.FETCH_THEN_BROWSER, False, {"DOMAINSTATE_PROBE_ALONE": False}, False),
    ("unknown-learned-browser", State.UNKNOWN, Decision.BROWSER, False, {}, False),
    ("hard-canary", State.ANTIBOT_HARD, Decision.BROWSER, False, {}, True),
    ("hard-canary-sent", State.ANTIBOT_HARD, Decision.BROWSER, True, {}, False),
    ("friendly", State.FRIENDLY, Decision.FETCH_THEN_BROWSER, False, {}, False),
    # a soft domain's first fetch: its answer may make it hard before the other pages go
    ("soft", State.ANTIBOT_SOFT, Decision.FETCH_THEN_BROWSER, False, {}, True),
    ("soft-lead-sent", State.ANTIBOT_SOFT, Decision.FETCH_THEN_BROWSER, True, {}, False),
    (
        "soft-no-probe-alone",
        State.ANTIBOT_SOFT,
        Decision.FETCH_THEN_BROWSER,
        False,
        {"DOMAINSTATE_PROBE_ALONE": False},
        False,
    ),
    ("soft-learned-browser", State.ANTIBOT_SOFT, Decision.BROWSER, False, {}, False),
]


@pytest.mark.parametrize(
    ("state", "decision", "canaried", "settings", "expected"), [r[1:] for r in LEADS], ids=[r[0] for r in LEADS]
)
def test_which_first_request_goes_alone(state, decision, canaried, settings, expected) -> None:
    assert Policy(Config.from_settings(settings)).leads(state, decision, canaried) is expected


# =====================================================================
# Rule 3's option: a cold domain's pages whose URL says they hold contacts are fetched
# (DOMAINSTATE_COLD_CONTACT_PAGES, contacts outcome only)
# =====================================================================

COLD_PLAN = [(0, [step(F, EMPTY)] * 5), (DAY, [step(F, EMPTY)] * 5)]
SITE = "http://cold.example"

COLD_CONTACT_PAGES = [
    ("contact", "/contact", {}, COLD_PLAN, Decision.FETCH),
    ("contact-us-html", "/contact-us.html", {}, COLD_PLAN, Decision.FETCH),
    ("impressum", "/impressum", {}, COLD_PLAN, Decision.FETCH),
    ("imprint-nested", "/en/company/imprint/", {}, COLD_PLAN, Decision.FETCH),
    ("kontakt-query", "/de/kontakt?ref=footer", {}, COLD_PLAN, Decision.FETCH),
    ("about", "/about", {}, COLD_PLAN, Decision.FETCH),
    ("team", "/team", {}, COLD_PLAN, Decision.FETCH),
    ("legal", "/legal-notice", {}, COLD_PLAN, Decision.FETCH),
    ("french", "/qui-sommes-nous", {}, COLD_PLAN, Decision.FETCH),
    ("spanish", "/sobre-nosotros", {}, COLD_PLAN, Decision.FETCH),
    ("italian", "/chi-siamo.php", {}, COLD_PLAN, Decision.FETCH),
    ("german-umlaut", "/%C3%BCber-uns", {}, COLD_PLAN, Decision.FETCH),
    ("root", "/", {}, COLD_PLAN, Decision.SKIP),
    ("product", "/products/item-3", {}, COLD_PLAN, Decision.SKIP),
    ("word-inside-a-word", "/teamwork-tips", {}, COLD_PLAN, Decision.SKIP),
    ("a-paired-word-alone", "/nous", {}, COLD_PLAN, Decision.SKIP),
    ("in-the-query-only", "/search?q=contact", {}, COLD_PLAN, Decision.SKIP),
    ("setting-off", "/contact", {"DOMAINSTATE_COLD_CONTACT_PAGES": False}, COLD_PLAN, Decision.SKIP),
    ("items-outcome", "/contact", {"DOMAINSTATE_OUTCOME": "items"}, COLD_PLAN, Decision.SKIP),
    ("dead-is-not-cold", "/contact", {}, [(0, [step(F, DEAD, "dns")] * 3)], Decision.SKIP),
    ("unknown-unchanged", "/contact", {}, [(0, [step(F, EMPTY)] * 3)], Decision.FETCH_THEN_BROWSER),
]


@pytest.mark.parametrize(
    ("path", "settings", "plan", "expected"),
    [r[1:] for r in COLD_CONTACT_PAGES],
    ids=[r[0] for r in COLD_CONTACT_PAGES],
)
def test_rule3_cold_still_fetches_contact_pages(path, settings, plan, expected) -> None:
    s = Sim(policy=Policy(Config.from_settings(settings)))
    for gap, steps in plan:
        s.advance(gap)
        s.feed(steps)
    decision = s.decide()
    assert s.policy.for_url(decision, s.state, SITE + path) is expected


def test_rule3_a_contact_page_with_contacts_makes_a_cold_domain_unknown() -> None:
    s = run(COLD_PLAN)
    assert s.state is State.COLD
    assert s.policy.for_url(s.decide(), s.state, SITE + "/kontakt") is Decision.FETCH
    s.feed([step(F, CONTACT)])
    assert s.state is State.UNKNOWN
