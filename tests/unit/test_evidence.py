"""The evidence rules (scrapy_domainstate.detect.evidence), table-driven, with plain values only."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scrapy_domainstate.core.record import Method, Outcome
from scrapy_domainstate.detect.classify import Classifier
from scrapy_domainstate.detect.evidence import (
    CACHE,
    JS_SHELL,
    NOT_EVIDENCE,
    NOT_RENDERED,
    NOT_USEFUL,
    REDIRECT,
    ROBOTS,
    URL_DEAD,
    Evidence,
    Facts,
    browser_reissue,
    head_view,
    judge_failure,
    judge_response,
    probe_verdict,
    response_verdict,
    with_usefulness,
)
from scrapy_domainstate.detect.verdict import Verdict

FETCH, TAB = Method.FETCH, Method.TAB
OK = Verdict(Outcome.OK_EMPTY, 200)
SHELL = Verdict(Outcome.OK_EMPTY, 200, "js-shell", browser_fixable=True)
MOVED = Verdict(Outcome.OK_EMPTY, 301)
NOT_MODIFIED = Verdict(Outcome.OK_EMPTY, 304)
CHALLENGE = Verdict(Outcome.ANTIBOT, 403, "challenge:cloudflare:title", browser_fixable=True)
BLOCK = Verdict(Outcome.ANTIBOT, 403, "block:cloudflare:1020")
HEADER_BLOCK = Verdict(Outcome.ANTIBOT, 403, "block:cloudflare:cf-mitigated")
RATE_LIMIT = Verdict(Outcome.ANTIBOT, 429, "challenge:generic:429")
HTTP_403 = Verdict(Outcome.HTTP_ERROR, 403, "http:403", browser_fixable=True)
HTTP_500 = Verdict(Outcome.HTTP_ERROR, 500, "http:500")
URL_404 = Verdict(Outcome.HTTP_ERROR, 404, "http:404")
URL_410 = Verdict(Outcome.HTTP_ERROR, 410, "http:410")
ROOT_404 = Verdict(Outcome.DEAD, 404, "http:404")
DNS = Verdict(Outcome.DEAD, None, "dns")
REFUSED = Verdict(Outcome.DEAD, None, "refused")
TIMEOUT = Verdict(Outcome.NETWORK_ERROR, None, "timeout", browser_fixable=True)
DNS_TEMPORARY = Verdict(Outcome.NETWORK_ERROR, None, "dns-temporary")

#: A plain fetch decided fetch-then-browser: the one that may go to the browser.
FALLBACK = Facts(FETCH, fallback=True)
PLAIN = Facts(FETCH)  # decided fetch (friendly, forced): never re-issued
RENDER = Facts(TAB)
REISSUED = Facts(TAB, reissued=True)
NO_BROWSER = Facts(FETCH, fallback=True, browser_route=False)
AGAIN = Facts(FETCH, fallback=True, reissued=True)  # a plain fetch carrying a re-issue mark


def ask(verdict: Verdict, passed: bool = False) -> Evidence:
    return Evidence(record=verdict, usefulness=True, passed=passed)


RESPONSES: list[tuple[str, Facts, Verdict | None, bool, Evidence]] = [
    # -- not evidence
    ("cache", replace(FALLBACK, cached=True), None, False, Evidence(reason=CACHE)),
    # a cached wall is not evidence, but still goes to the browser (renders never come from the cache)
    ("cache-even-if-challenge", replace(FALLBACK, cached=True), CHALLENGE, False, Evidence(reason=CACHE, reissue=True)),
    ("cache-challenge-no-fallback", replace(PLAIN, cached=True), CHALLENGE, False, Evidence(reason=CACHE)),
    ("cache-challenge-no-browser", replace(NO_BROWSER, cached=True), CHALLENGE, False, Evidence(reason=CACHE)),
    ("cache-rate-limit", replace(FALLBACK, cached=True), RATE_LIMIT, False, Evidence(reason=CACHE)),
    ("cache-page", replace(FALLBACK, cached=True), OK, False, Evidence(reason=CACHE)),
    # sent to the browser, answered by something else: evidence of neither kind
    ("not-rendered", replace(FALLBACK, unrendered=True), CHALLENGE, False, Evidence(reason=NOT_RENDERED)),
    ("robots", replace(PLAIN, robots=True), None, False, Evidence(reason=ROBOTS)),
    ("redirect-301", FALLBACK, MOVED, False, Evidence(reason=REDIRECT)),
    ("not-modified-304", PLAIN, NOT_MODIFIED, False, Evidence(reason=REDIRECT)),
    ("redirect-from-browser", RENDER, MOVED, False, Evidence(reason=REDIRECT)),
    # -- JS shell: only the render is evidence, when there will be one
    ("shell-then-render", FALLBACK, SHELL, False, Evidence(reason=JS_SHELL, reissue=True)),
    ("shell-no-fallback", PLAIN, SHELL, False, ask(SHELL)),
    ("shell-already-reissued", AGAIN, SHELL, False, ask(SHELL)),
    ("shell-no-browser", NO_BROWSER, SHELL, False, ask(SHELL)),
    ("shell-rendered", RENDER, SHELL, False, ask(SHELL)),
    # -- fetched pages: the outcome source decides
    ("ok", FALLBACK, OK, False, ask(OK)),
    ("ok-render", REISSUED, OK, False, ask(OK)),
    ("ok-passed-wall", REISSUED, replace(OK, status=403), True, ask(replace(OK, status=403), passed=True)),
    # -- URL-level dead: off the root only this URL
    ("404-off-root", FALLBACK, URL_404, False, Evidence(reason=URL_DEAD, url_dead=True)),
    ("410-off-root", PLAIN, URL_410, False, Evidence(reason=URL_DEAD, url_dead=True)),
    ("404-off-root-render", RENDER, URL_404, False, Evidence(reason=URL_DEAD)),
    ("404-root", FALLBACK, ROOT_404, False, Evidence(record=ROOT_404)),
    # -- recorded, re-issued when a browser can fix it
    ("challenge", FALLBACK, CHALLENGE, False, Evidence(record=CHALLENGE, reissue=True)),
    ("block", FALLBACK, BLOCK, False, Evidence(record=BLOCK, reissue=True)),
    ("403-plain", FALLBACK, HTTP_403, False, Evidence(record=HTTP_403, reissue=True)),
    ("500", FALLBACK, HTTP_500, False, Evidence(record=HTTP_500)),
    ("429-never-to-the-browser", FALLBACK, RATE_LIMIT, False, Evidence(record=RATE_LIMIT)),
    ("challenge-friendly-fetch", PLAIN, CHALLENGE, False, Evidence(record=CHALLENGE)),
    ("challenge-reissued-twice", AGAIN, CHALLENGE, False, Evidence(record=CHALLENGE)),
    ("challenge-no-browser", NO_BROWSER, CHALLENGE, False, Evidence(record=CHALLENGE)),
    ("challenge-in-browser", REISSUED, CHALLENGE, False, Evidence(record=CHALLENGE)),
    ("dead-tls-after-pass", REISSUED, DNS, True, Evidence(record=DNS, passed=True)),
]


@pytest.mark.parametrize(
    ("facts", "verdict", "passed", "expected"), [r[1:] for r in RESPONSES], ids=[r[0] for r in RESPONSES]
)
def test_judge_response(facts: Facts, verdict: Verdict | None, passed: bool, expected: Evidence) -> None:
    got = judge_response(facts, verdict, passed)
    assert got == expected
    assert got.evidence is (expected.record is not None)
    assert got.reason is None or got.reason in NOT_EVIDENCE


def test_judge_response_needs_a_verdict_when_evidence() -> None:
    with pytest.raises(ValueError, match="verdict"):
        judge_response(FALLBACK, None)


USEFULNESS: list[tuple[str, Evidence, Outcome | None, Evidence]] = [
    ("contact", ask(OK), Outcome.OK_CONTACT, Evidence(record=Verdict(Outcome.OK_CONTACT, 200))),
    ("empty", ask(OK), Outcome.OK_EMPTY, Evidence(record=OK)),
    ("cannot-tell", ask(OK), None, Evidence(reason=NOT_USEFUL)),
    # the js-shell evidence stays in error_class, but it is no longer browser-fixable
    ("shell-kept", ask(SHELL), Outcome.OK_EMPTY, Evidence(record=Verdict(Outcome.OK_EMPTY, 200, "js-shell"))),
    (
        "passed-kept",
        ask(replace(OK, status=403), passed=True),
        Outcome.OK_CONTACT,
        Evidence(record=Verdict(Outcome.OK_CONTACT, 403), passed=True),
    ),
    ("callable-chose", ask(OK), Outcome.HTTP_ERROR, Evidence(record=Verdict(Outcome.HTTP_ERROR, 200))),
    ("not-asked", Evidence(reason=REDIRECT), Outcome.OK_CONTACT, Evidence(reason=REDIRECT)),
    ("not-asked-record", Evidence(record=CHALLENGE), None, Evidence(record=CHALLENGE)),
]


@pytest.mark.parametrize(("judged", "useful", "expected"), [r[1:] for r in USEFULNESS], ids=[r[0] for r in USEFULNESS])
def test_with_usefulness(judged: Evidence, useful: Outcome | None, expected: Evidence) -> None:
    assert with_usefulness(judged, useful) == expected


FAILURES: list[tuple[str, Facts, Verdict, bool]] = [
    ("timeout-to-browser", FALLBACK, TIMEOUT, True),
    ("timeout-plain", PLAIN, TIMEOUT, False),
    ("timeout-in-browser", RENDER, TIMEOUT, False),
    ("timeout-no-browser", NO_BROWSER, TIMEOUT, False),
    ("dns-never", FALLBACK, DNS, False),
    ("refused-never", FALLBACK, REFUSED, False),
    ("dns-temporary-never", FALLBACK, DNS_TEMPORARY, False),
    ("http-403-error", FALLBACK, HTTP_403, True),
    ("http-404-error", FALLBACK, URL_404, False),
]


@pytest.mark.parametrize(("facts", "verdict", "reissue"), [r[1:] for r in FAILURES], ids=[r[0] for r in FAILURES])
def test_judge_failure(facts: Facts, verdict: Verdict, reissue: bool) -> None:
    assert judge_failure(facts, verdict) == Evidence(record=verdict, reissue=reissue)
    assert browser_reissue(facts, verdict) is reissue


NV = Outcome.NO_VERDICT
PROBES: list[tuple[str, int, Verdict | None, bool, bool, Verdict]] = [
    ("ok", 200, None, True, False, Verdict(NV, 200)),
    ("head-405", 405, None, True, False, Verdict(NV, 405)),
    ("head-501", 501, None, True, False, Verdict(NV, 501)),
    ("5xx", 500, None, True, False, Verdict(NV, 500)),
    ("404-off-root", 404, None, False, False, Verdict(NV, 404)),
    ("404-root", 404, None, True, False, Verdict(Outcome.DEAD, 404, "http:404")),
    ("410-root", 410, None, True, False, Verdict(Outcome.DEAD, 410, "http:410")),
    ("challenge-header", 403, CHALLENGE, True, False, CHALLENGE),
    ("rate-limit", 429, RATE_LIMIT, False, False, RATE_LIMIT),
    ("cached", 404, None, True, True, Verdict(NV, 404, "cached")),
    ("cached-challenge", 403, CHALLENGE, True, True, Verdict(NV, 403, "cached")),
]


@pytest.mark.parametrize(
    ("status", "antibot", "root", "cached", "expected"), [r[1:] for r in PROBES], ids=[r[0] for r in PROBES]
)
def test_probe_verdict(status: int, antibot: Verdict | None, root: bool, cached: bool, expected: Verdict) -> None:
    assert probe_verdict(status, antibot, root, cached) == expected


def test_probe_verdict_matches_the_classifiers_head() -> None:
    """The HEAD rules agree with Classifier.head on the answers it classifies."""
    classifier = Classifier()
    cases = [
        (200, {}),
        (405, {}),
        (501, {}),
        (404, {}),
        (410, {}),
        (500, {}),
        (403, {"server": "cloudflare", "cf-ray": "1"}),
        (403, {"cf-mitigated": "challenge"}),
        (403, {"cf-mitigated": "block"}),
        (429, {"retry-after": "5"}),
    ]
    for status, headers in cases:
        for root in (True, False):
            antibot = classifier.antibot(status, headers, b"")
            assert probe_verdict(status, antibot, root) == classifier.head(status, headers, "https://a.test/", root)


HEAD_VIEWS: list[tuple[str, Verdict, Verdict | None]] = [
    ("not-antibot", OK, None),
    ("dead", DNS, None),
    ("challenge-as-is", CHALLENGE, CHALLENGE),
    ("rate-limit-as-is", RATE_LIMIT, RATE_LIMIT),
    ("body-block-is-a-challenge", BLOCK, Verdict(Outcome.ANTIBOT, 403, "challenge:cloudflare:headers", True)),
    ("header-block-stays-hard", HEADER_BLOCK, HEADER_BLOCK),
]


@pytest.mark.parametrize(("verdict", "expected"), [r[1:] for r in HEAD_VIEWS], ids=[r[0] for r in HEAD_VIEWS])
def test_head_view(verdict: Verdict, expected: Verdict | None) -> None:
    assert head_view(verdict) == expected


def test_head_view_agrees_with_the_classifier_on_a_cloudflare_ban() -> None:
    """A Cloudflare 1020 page is a hard block for a GET, a challenge for a bodiless HEAD."""
    classifier = Classifier()
    headers = {"server": "cloudflare", "cf-ray": "8a1", "content-type": "text/html"}
    body = b"<title>Attention Required! | Cloudflare</title><h1>Sorry, you have been blocked</h1>"
    get = classifier.response(403, headers, body, "https://a.test/", True)
    assert get.is_hard_block
    seen = head_view(get)
    real = classifier.head(403, headers, "https://a.test/", True)
    assert seen is not None and not seen.is_hard_block
    assert (seen.outcome, seen.status, seen.browser_fixable) == (real.outcome, real.status, real.browser_fixable)


CHALLENGE_PAGE = b"<html><head><title>Just a moment...</title></head><body>checking</body></html>"
REAL_PAGE = (
    b"<html><head><title>Shop</title></head><body>" + b"<p>Real content here for people.</p>" * 5 + b"</body></html>"
)
RENDERS: list[tuple[str, Method, int, dict[str, str], bytes, Outcome, bool]] = [
    ("fetch-challenge", FETCH, 403, {"cf-ray": "1", "server": "cloudflare"}, CHALLENGE_PAGE, Outcome.ANTIBOT, False),
    ("render-passed", TAB, 403, {"cf-ray": "1", "server": "cloudflare"}, REAL_PAGE, Outcome.OK_EMPTY, True),
    ("render-still-challenged", TAB, 403, {}, CHALLENGE_PAGE, Outcome.ANTIBOT, False),
    ("render-header-ban", TAB, 403, {"cf-mitigated": "block"}, REAL_PAGE, Outcome.ANTIBOT, False),
    ("render-200", TAB, 200, {}, REAL_PAGE, Outcome.OK_EMPTY, False),
    ("render-404", TAB, 404, {}, REAL_PAGE, Outcome.HTTP_ERROR, False),
]


@pytest.mark.parametrize(
    ("method", "status", "headers", "body", "outcome", "passed"), [r[1:] for r in RENDERS], ids=[r[0] for r in RENDERS]
)
def test_response_verdict(
    method: Method, status: int, headers: dict[str, str], body: bytes, outcome: Outcome, passed: bool
) -> None:
    verdict, got_passed = response_verdict(Classifier(), method, status, headers, body, "https://a.test/x", False)
    assert (verdict.outcome, got_passed) == (outcome, passed)
    assert verdict.status == status  # a passed wall keeps its status; the caller delivers a 200
