"""What one answer means for a domain's record: the evidence rules, pure.

No I/O, no clock, no Scrapy engine: every function takes plain facts (the method, the
status, whether the URL is the site root, the classifier's :class:`~scrapy_domainstate.detect.verdict.Verdict`, a
few flags) and returns plain values. The downloader middleware's manager and the crawl
economy simulator (``benchmarks/economy.py``) both call this module, so what a response
means is written once.

API (keyword-friendly, plain values):

``Facts(method=Method.FETCH, status=None, is_root=False, cached=False, robots=False,
reissued=False, fallback=False, browser_route=True, unrendered=False, after_shell=False)``
    What is known about one download besides its verdict. ``method`` is ``FETCH`` or
    ``TAB`` (a response the browser handler produced); ``reissued``: the request already is
    the browser re-issue; ``fallback``: it was decided ``fetch-then-browser``;
    ``browser_route``: a browser handler answers this request (false in no-browser mode);
    ``unrendered``: it was sent to the browser but the answer is not a render;
    ``after_shell``: this render re-issues a plain fetch that got a script-only shell (its
    successful page is recorded with ``error_class`` :data:`~.policy.SHELL_RENDER`, which
    the browser-learning rule reads).

``Evidence(record=None, reason=None, reissue=False, url_dead=False, passed=False,
usefulness=False)``
    The answer. ``record``: the verdict to record as the outcome entry (``None``: not
    evidence, and ``reason`` says why: one of :data:`NOT_EVIDENCE`); ``reissue``: re-issue
    the request in the browser; ``url_dead``: mark this URL dead; ``passed``: the browser got
    past a wall, deliver its page as a 200; ``usefulness``: the page was fetched, its outcome
    (``ok-contact`` / ``ok-empty``) comes from the outcome source: call
    :func:`with_usefulness`.

``judge_response(facts, verdict, passed=False) -> Evidence``
    A downloaded response (plain fetch or browser render). From the HTTP cache it is not
    evidence, but a cached wall of a ``fetch-then-browser`` request (``verdict`` given) is
    still re-issued in the browser: renders never come from the cache.
``with_usefulness(evidence, useful) -> Evidence``
    Completes a ``usefulness`` answer with the outcome source's ``ok-contact`` /
    ``ok-empty`` (``None``: not evidence).
``judge_failure(facts, verdict) -> Evidence``
    A download failure (``verdict`` from ``Classifier.failure``).
``probe_verdict(status, header_antibot, is_root, cached=False) -> Verdict``
    What the HEAD probe says (``header_antibot``: the classifier's anti-bot verdict from the
    status and headers alone, or ``None``).
``head_view(verdict) -> Verdict | None``
    The anti-bot verdict a bodiless HEAD gets from a site whose full answer was ``verdict``.
``browser_reissue(facts, verdict) -> bool``, ``is_url_dead(verdict) -> bool``,
``is_js_shell(verdict) -> bool``
    The single rules the judgements above are made of.
``response_verdict(classifier, method, status, headers, body, url, is_root) -> (Verdict, passed)``
    The classifier's verdict for a response, including a browser render answered with a
    wall's status (:func:`rendered_verdict`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from scrapy_domainstate.core.policy import NOT_SCANNED, SHELL_RENDER
from scrapy_domainstate.core.record import HARD_BLOCK_PREFIX, Method, Outcome
from scrapy_domainstate.detect.classify import Classifier
from scrapy_domainstate.detect.markers import BUILTIN_MARKERS
from scrapy_domainstate.detect.scan import BodyScan
from scrapy_domainstate.detect.verdict import Verdict

__all__ = [
    "CHALLENGE_STATUSES",
    "NOT_EVIDENCE",
    "Evidence",
    "Facts",
    "browser_reissue",
    "head_view",
    "is_js_shell",
    "is_url_dead",
    "judge_failure",
    "judge_response",
    "probe_verdict",
    "rendered_verdict",
    "response_verdict",
    "with_usefulness",
]

#: Statuses anti-bot walls answer with; a browser may have passed them since.
CHALLENGE_STATUSES = frozenset({202, 403, 405, 429, 503})
#: A rate limit: the browser meets the same limit, so it is never re-issued there.
RATE_LIMITED = 429
#: Why an answer is not evidence (``Evidence.reason``).
CACHE, ROBOTS, REDIRECT, JS_SHELL, URL_DEAD, NOT_USEFUL, NOT_RENDERED = (
    "cache",
    "robots",
    "redirect",
    "js-shell",
    "url-dead",
    "not-useful",
    "not-rendered",
)
NOT_EVIDENCE = frozenset({CACHE, ROBOTS, REDIRECT, JS_SHELL, URL_DEAD, NOT_USEFUL, NOT_RENDERED})
#: Error class of a probe answered from Scrapy's HTTP cache.
CACHED_PROBE = "cached"
#: Names of the built-in header markers per vendor: a hard block they carry is seen by a HEAD.
_HEADER_MARKERS: dict[str, frozenset[str]] = {
    vendor: frozenset(m.name for m in markers if m.kind == "header") for vendor, markers in BUILTIN_MARKERS.items()
}


@dataclass(frozen=True, slots=True)
class Facts:
    """What is known about one download besides the classifier's verdict."""

    method: Method = Method.FETCH
    status: int | None = None
    is_root: bool = False
    cached: bool = False
    robots: bool = False
    reissued: bool = False
    fallback: bool = False
    browser_route: bool = True
    unrendered: bool = False
    after_shell: bool = False


@dataclass(frozen=True, slots=True)
class Evidence:
    """What one answer means for the record; see the module docstring."""

    record: Verdict | None = None
    reason: str | None = None
    reissue: bool = False
    url_dead: bool = False
    passed: bool = False
    usefulness: bool = False

    @property
    def evidence(self) -> bool:
        """An outcome is recorded (now, or once the outcome source answers)."""
        return self.record is not None


_CACHED = Evidence(reason=CACHE)
_ROBOTS = Evidence(reason=ROBOTS)
_REDIRECT = Evidence(reason=REDIRECT)
_NOT_USEFUL = Evidence(reason=NOT_USEFUL)
_NOT_RENDERED = Evidence(reason=NOT_RENDERED)


# ------------------------------------------------------------------ rules


def browser_reissue(facts: Facts, verdict: Verdict) -> bool:
    """Re-issue this plain fetch in the browser?

    Only a ``fetch-then-browser`` request, once (never a re-issue), with a browser route,
    on an anti-bot outcome or a failure a browser can fix (the classifier's
    ``browser_fixable``: not 404/410, DNS or refused), and never on a rate limit (429).
    """
    if facts.method is not Method.FETCH or facts.reissued or not facts.fallback or not facts.browser_route:
        return False
    if verdict.status == RATE_LIMITED:
        return False
    return verdict.outcome is Outcome.ANTIBOT or verdict.browser_fixable


def is_url_dead(verdict: Verdict) -> bool:
    """404/410 off the site root: only this URL is dead; the domain is untouched."""
    return verdict.outcome is Outcome.HTTP_ERROR and verdict.status in (404, 410)


def is_js_shell(verdict: Verdict) -> bool:
    """A fetched page a browser would render into more (a script-only shell)."""
    return verdict.success and verdict.browser_fixable


def _redirect(status: int | None) -> bool:
    return status is not None and 300 <= status < 400


# ------------------------------------------------------------------ judgements


def judge_response(facts: Facts, verdict: Verdict | None = None, passed: bool = False) -> Evidence:
    """What a downloaded response means for the record.

    Not evidence: a response from Scrapy's HTTP cache or a robots.txt download (``verdict``
    may then be ``None``: classify only when these say no), a script-only shell that the
    browser will render next (only the render is evidence: a shell is not ``ok-empty``), a
    redirect delivered as is (3xx: the page was not fetched), a 404/410 off the root
    (``url_dead`` when it came from a plain fetch), and an answer to a request sent to the
    browser that the browser did not render (``unrendered``: neither a render nor the plain
    fetch it was not meant to be). A fetched page asks the outcome source (``usefulness``).
    Anything else is recorded as is, re-issued in the browser when :func:`browser_reissue`
    says so, and ``passed`` when the browser got past a wall. A cached answer is re-issued
    too when ``verdict`` is given and :func:`browser_reissue` says so.
    """
    if facts.cached:
        if verdict is not None and not verdict.success and browser_reissue(facts, verdict):
            return Evidence(reason=CACHE, reissue=True)
        return _CACHED
    if facts.robots:
        return _ROBOTS
    if facts.unrendered:
        return _NOT_RENDERED
    if verdict is None:
        raise ValueError("judge_response: a verdict is needed for a response that is evidence")
    if is_js_shell(verdict) and browser_reissue(facts, verdict):
        return Evidence(reason=JS_SHELL, reissue=True)
    if verdict.success:
        if _redirect(verdict.status):
            return _REDIRECT
        if facts.after_shell and facts.method is Method.TAB:
            # The browser rendered what the plain fetch got as a shell: rule 7's evidence.
            verdict = Verdict(verdict.outcome, verdict.status, SHELL_RENDER)
        return Evidence(record=verdict, usefulness=True, passed=passed)
    if is_url_dead(verdict):
        return Evidence(reason=URL_DEAD, url_dead=facts.method is Method.FETCH)
    return Evidence(record=verdict, reissue=browser_reissue(facts, verdict), passed=passed)


def with_usefulness(evidence: Evidence, useful: Outcome | None) -> Evidence:
    """A ``usefulness`` answer completed with the outcome source's verdict.

    ``useful`` is ``ok-contact`` / ``ok-empty`` (or any outcome a callable chose); ``None``:
    the source could not tell, and the page is not evidence.
    """
    if not evidence.usefulness or evidence.record is None:
        return evidence
    if useful is None:
        return _NOT_USEFUL
    verdict = evidence.record
    return Evidence(record=Verdict(useful, verdict.status, verdict.error_class), passed=evidence.passed)


def not_scanned(evidence: Evidence) -> Evidence:
    """A ``usefulness`` answer for a page no contact scan read (a friendly domain's, see
    :meth:`~scrapy_domainstate.core.policy.Policy.usefulness_moves`): navigation, marked
    ``'not-scanned'``."""
    if not evidence.usefulness or evidence.record is None:
        return evidence
    verdict = evidence.record
    return Evidence(record=Verdict(Outcome.NAVIGATION, verdict.status, NOT_SCANNED), passed=evidence.passed)


def judge_failure(facts: Facts, verdict: Verdict) -> Evidence:
    """A download failure (DNS, refused, timeout, TLS, ...): always recorded."""
    return Evidence(record=verdict, reissue=browser_reissue(facts, verdict))


# ------------------------------------------------------------------ probes


def probe_verdict(status: int, header_antibot: Verdict | None, is_root: bool, cached: bool = False) -> Verdict:
    """What the HEAD probe's answer says.

    From Scrapy's HTTP cache: ``no-verdict`` (``'cached'``), so the probe is stamped and not
    repeated. An anti-bot verdict from the status and headers (the classifier's
    ``antibot(status, headers, b"")``) stands. A 404/410 on the site root is a ``dead``
    signal, which the policy never takes alone (the GET that follows must confirm it).
    Everything else, including 405/501 "HEAD not supported", 5xx and a 404 off the root,
    is ``no-verdict``: the GET decides.
    """
    if cached:
        return Verdict(Outcome.NO_VERDICT, status, CACHED_PROBE)
    if header_antibot is not None:
        return header_antibot
    if is_root and status in (404, 410):
        return Verdict(Outcome.DEAD, status, f"http:{status}")
    return Verdict(Outcome.NO_VERDICT, status)


def head_view(verdict: Verdict) -> Verdict | None:
    """The anti-bot verdict a bodiless HEAD gets from a site whose GET got ``verdict``.

    For simulations, which know the site rather than its headers. A challenge is seen as
    it is. A hard block found in the body (Cloudflare's 1020 page, an Akamai "Access
    Denied") shows a HEAD only its vendor's wall status, which the classifier reads as a
    challenge (``'challenge:<vendor>:headers'``); a hard block carried by a built-in header
    marker (``cf-mitigated: block``) stays hard. ``None`` when ``verdict`` is not anti-bot.
    """
    if verdict.outcome is not Outcome.ANTIBOT:
        return None
    if not verdict.is_hard_block or not verdict.error_class:
        return verdict
    vendor, _, name = verdict.error_class[len(HARD_BLOCK_PREFIX) :].partition(":")
    if name in _HEADER_MARKERS.get(vendor, frozenset()):
        return verdict
    return Verdict(Outcome.ANTIBOT, verdict.status, f"challenge:{vendor}:headers", browser_fixable=True)


# ------------------------------------------------------------------ classification


def rendered_verdict(
    classifier: Classifier, status: int, headers: Any, body: bytes | BodyScan, url: str, is_root: bool
) -> tuple[Verdict, bool]:
    """A browser render answered with a wall's status: did the browser get past it?

    A browser handler reports the status and headers of the *first* page load; after a
    JavaScript challenge the page reloads and the body is the real page. A hard block in the
    headers stands (a browser cannot pass a ban); otherwise the body decides: still a
    challenge (or a 429) is antibot, a real page is a success. Returns the verdict and
    whether the wall was passed.
    """
    from_headers = classifier.antibot(status, headers, b"", url)
    if from_headers is not None and from_headers.is_hard_block:
        return from_headers, False
    from_body = classifier.antibot(status, {}, body, url)
    if from_body is not None:
        return from_body, False
    verdict = classifier.response(200, {}, body, url, is_root)
    if not verdict.success:
        return replace(verdict, status=status), False
    return Verdict(verdict.outcome, status, verdict.error_class), True


def response_verdict(
    classifier: Classifier, method: Method, status: int, headers: Any, body: bytes | BodyScan, url: str, is_root: bool
) -> tuple[Verdict, bool]:
    """The classifier's verdict for a response, and whether a browser passed a wall (``body``:
    the body, or the response's :class:`~scrapy_domainstate.detect.scan.BodyScan`)."""
    if method is Method.TAB and status in CHALLENGE_STATUSES:
        return rendered_verdict(classifier, status, headers, body, url, is_root)
    return classifier.response(status, headers, body, url, is_root), False
