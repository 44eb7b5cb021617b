"""Where a request goes (scrapy_domainstate.core.routing), table-driven, with plain values only."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from scrapy_domainstate.core.policy import Decision
from scrapy_domainstate.core.routing import (
    DOMAIN,
    MAY_SKIP,
    NO_BROWSER,
    NO_DOMAIN,
    NOT_HTTP,
    REISSUE,
    ROBOTS,
    URL_DEAD,
    Action,
    RequestFacts,
    Route,
    admit,
    dead_url,
    robots_txt,
    route,
    route_of,
)

PLAIN = RequestFacts(scheme="https", domain="example.com")
FORCED = replace(PLAIN, force=True)
IN_BROWSER = replace(PLAIN, browser=True)

ADMIT: list[tuple[str, RequestFacts, Route | None]] = [
    ("decide", PLAIN, None),
    ("http", replace(PLAIN, scheme="http"), None),
    ("forced-still-decided", FORCED, None),
    ("robots", replace(PLAIN, robots=True), Route(Action.PASS, ROBOTS)),
    ("file", replace(PLAIN, scheme="file", domain=""), Route(Action.PASS, NOT_HTTP)),
    ("data", replace(PLAIN, scheme="data"), Route(Action.PASS, NOT_HTTP)),
    ("s3", replace(PLAIN, scheme="s3", domain="bucket"), Route(Action.PASS, NOT_HTTP)),
    ("no-domain", replace(PLAIN, domain=""), Route(Action.PASS, NO_DOMAIN)),
    ("reissue", replace(IN_BROWSER, reissued=True), Route(Action.TAB, REISSUE)),
    ("robots-before-reissue", replace(PLAIN, robots=True, reissued=True), Route(Action.PASS, ROBOTS)),
]


@pytest.mark.parametrize(("facts", "expected"), [r[1:] for r in ADMIT], ids=[r[0] for r in ADMIT])
def test_admit(facts: RequestFacts, expected: Route | None) -> None:
    assert admit(facts) == expected


def test_dead_url_skips_unless_forced() -> None:
    assert dead_url(PLAIN) == Route(Action.SKIP, URL_DEAD)
    assert dead_url(IN_BROWSER) == Route(Action.SKIP, URL_DEAD)
    assert dead_url(FORCED) is None


D = Decision
FTB = D.FETCH_THEN_BROWSER
#: (name, facts, decision, can_wait, ask_remote, expected)
ROUTES: list[tuple[str, RequestFacts, Decision, bool, bool, Route]] = [
    # -- skip, and force
    ("skip", PLAIN, D.SKIP, True, False, Route(Action.SKIP, DOMAIN, D.SKIP, D.SKIP)),
    ("skip-in-browser", IN_BROWSER, D.SKIP, True, False, Route(Action.SKIP, DOMAIN, D.SKIP, D.SKIP)),
    ("skip-forced", FORCED, D.SKIP, True, False, Route(Action.FETCH, None, D.FETCH, D.SKIP, forced=True)),
    (
        "skip-forced-browser",
        replace(FORCED, browser=True),
        D.SKIP,
        False,
        False,
        Route(Action.TAB, None, D.FETCH, D.SKIP, forced=True),
    ),
    # -- fetch, fetch-then-browser
    ("fetch", PLAIN, D.FETCH, True, False, Route(Action.FETCH, None, D.FETCH, D.FETCH)),
    ("fetch-forced", FORCED, D.FETCH, True, False, Route(Action.FETCH, None, D.FETCH, D.FETCH)),
    ("fetch-user-browser", IN_BROWSER, D.FETCH, True, False, Route(Action.TAB, None, D.FETCH, D.FETCH)),
    ("ftb", PLAIN, FTB, True, False, Route(Action.FETCH, None, FTB, FTB)),
    # -- browser
    ("browser", PLAIN, D.BROWSER, True, False, Route(Action.TAB, None, D.BROWSER, D.BROWSER, to_browser=True)),
    ("browser-already", IN_BROWSER, D.BROWSER, True, False, Route(Action.TAB, None, D.BROWSER, D.BROWSER)),
    # -- no browser route: browser-only domains are skipped (a plain fetch cannot pass them)
    (
        "browser-no-route",
        replace(PLAIN, browser_route=False),
        D.BROWSER,
        True,
        False,
        Route(Action.SKIP, NO_BROWSER, D.BROWSER, D.BROWSER),
    ),
    (
        "browser-no-route-forced",
        replace(FORCED, browser_route=False),
        D.BROWSER,
        True,
        False,
        Route(Action.FETCH, None, D.FETCH, D.BROWSER, forced=True),
    ),
    ("ftb-no-route", replace(PLAIN, browser_route=False), FTB, True, False, Route(Action.FETCH, None, FTB, FTB)),
    # -- probe: wait when the engine can download it, else go on as fetch-then-browser
    ("probe", PLAIN, D.PROBE, True, False, Route(Action.WAIT, probe=True)),
    ("probe-and-ask", PLAIN, D.PROBE, True, True, Route(Action.WAIT, probe=True)),
    ("probe-no-engine", PLAIN, D.PROBE, False, False, Route(Action.FETCH, None, FTB, FTB)),
    ("probe-no-engine-ask", PLAIN, D.PROBE, False, True, Route(Action.FETCH, None, FTB, FTB)),
    ("probe-again-after-wait", PLAIN, D.PROBE, False, False, Route(Action.FETCH, None, FTB, FTB)),
    # -- first sight with a shared-state service: ask it (no probe unless decided)
    ("ask-only", PLAIN, FTB, True, True, Route(Action.WAIT, probe=False)),
    ("ask-no-engine", PLAIN, FTB, False, True, Route(Action.FETCH, None, FTB, FTB)),
    ("ask-on-skip", PLAIN, D.SKIP, True, True, Route(Action.WAIT, probe=False)),
]


@pytest.mark.parametrize(
    ("facts", "decision", "can_wait", "ask", "expected"), [r[1:] for r in ROUTES], ids=[r[0] for r in ROUTES]
)
def test_route(facts: RequestFacts, decision: Decision, can_wait: bool, ask: bool, expected: Route) -> None:
    got = route(facts, decision, can_wait=can_wait, ask_remote=ask)
    assert got == expected
    assert got.method == expected.action.value


def test_every_decision_has_a_route() -> None:
    for decision in Decision:
        for facts in (PLAIN, FORCED, IN_BROWSER):
            got = route(facts, decision)
            assert got.action in (Action.SKIP, Action.FETCH, Action.TAB)
            assert got.action is Action.SKIP or got.decision in (D.FETCH, FTB, D.BROWSER)


def test_only_the_decisions_of_may_skip_have_a_skip_route() -> None:
    # the skip-before-queue filter stops at a decision outside MAY_SKIP without building a route
    skipping = {
        decision
        for decision in Decision
        for flags in itertools.product((False, True), repeat=5)
        if route_of(decision, *flags).action is Action.SKIP
    }
    assert skipping == MAY_SKIP
    assert skipping == {Decision.SKIP, Decision.BROWSER}


ROBOTS_FACTS = replace(PLAIN, robots=True)
#: (name, facts, decision, skipped)
ROBOTS_TXT: list[tuple[str, RequestFacts, Decision, bool]] = [
    ("skip", ROBOTS_FACTS, D.SKIP, True),
    ("browser-only-no-route", replace(ROBOTS_FACTS, browser_route=False), D.BROWSER, True),
    ("browser-only", ROBOTS_FACTS, D.BROWSER, False),
    ("probe", ROBOTS_FACTS, D.PROBE, False),
    ("fetch", ROBOTS_FACTS, D.FETCH, False),
    ("ftb", ROBOTS_FACTS, FTB, False),
    ("forced", replace(ROBOTS_FACTS, force=True), D.SKIP, False),
]


@pytest.mark.parametrize(("facts", "decision", "skipped"), [r[1:] for r in ROBOTS_TXT], ids=[r[0] for r in ROBOTS_TXT])
def test_robots_txt_only_for_domains_the_plugin_visits(facts: RequestFacts, decision: Decision, skipped: bool) -> None:
    got = robots_txt(facts, decision)
    assert got.reason == ROBOTS
    assert got.action is (Action.SKIP if skipped else Action.PASS)
