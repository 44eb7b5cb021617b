"""What the plugin's evidence rules make of each simulated answer, through ``scrapy_domainstate.detect.evidence``.

The simulator knows which answer a request got (a result of :mod:`.world`); this module
gives the classifier's verdict for it and asks the plugin's own evidence module what it
means for the record (recorded or not, re-issued in the browser or not, URL dead or not).
The answers depend on a handful of facts only, so each is computed once and reused.
"""

from __future__ import annotations

from scrapy_domainstate.core.record import Method, Outcome
from scrapy_domainstate.detect import evidence
from scrapy_domainstate.detect.verdict import Verdict

from . import world as w

__all__ = ["FAILURES", "VERDICTS", "Judge"]

#: result -> the classifier's verdict (``classify.py``). OK's outcome comes from the page.
VERDICTS: dict[int, Verdict] = {
    w.OK: Verdict(Outcome.OK_EMPTY, 200),
    w.TIMEOUT: Verdict(Outcome.NETWORK_ERROR, None, "timeout", browser_fixable=True),
    w.SERVER_ERROR: Verdict(Outcome.HTTP_ERROR, 503, "http:503", browser_fixable=True),
    w.CHALLENGE: Verdict(Outcome.ANTIBOT, 403, "challenge:cloudflare:title", browser_fixable=True),
    w.BLOCKED: Verdict(Outcome.ANTIBOT, 403, "block:cloudflare:1020"),
    w.JS_SHELL: Verdict(Outcome.OK_EMPTY, 200, "js-shell", browser_fixable=True),
    w.DNS_NXDOMAIN: Verdict(Outcome.DEAD, None, "dns"),
    w.DNS_TEMPORARY: Verdict(Outcome.NETWORK_ERROR, None, "dns-temporary"),
    w.URL_404: Verdict(Outcome.HTTP_ERROR, 404, "http:404"),
    w.REFUSED: Verdict(Outcome.DEAD, None, "refused"),
    w.TLS_INVALID: Verdict(Outcome.DEAD, None, "tls:expired"),
    w.ROOT_404: Verdict(Outcome.DEAD, 404, "http:404"),
    w.SERVER_ERROR_500: Verdict(Outcome.HTTP_ERROR, 500, "http:500"),
    w.RATE_LIMITED: Verdict(Outcome.ANTIBOT, 429, "rate-limit", browser_fixable=True),
    w.BURST_LIMITED: Verdict(Outcome.ANTIBOT, 429, "rate-limit", browser_fixable=True),
    w.PARKED: Verdict(Outcome.PARKED, 200, "parked:sedo"),
    w.FALSE_WALL: Verdict(Outcome.ANTIBOT, 200, "challenge:generic:body", browser_fixable=True),
}
#: Results that are download failures (no response): ``judge_failure``.
FAILURES = frozenset({w.TIMEOUT, w.DNS_NXDOMAIN, w.DNS_TEMPORARY, w.REFUSED, w.TLS_INVALID})
#: The HTTP status a HEAD gets, by result, when it gets a response.
_HEAD_STATUS = {w.NO_VERDICT: 200, w.ROOT_404: 404, w.URL_404: 404}


class Judge:
    """Memoised calls of the evidence module (pure: same facts, same answer)."""

    def __init__(self) -> None:
        self._answers: dict[tuple[int, bool, bool, bool, bool, bool, bool, bool], evidence.Evidence] = {}
        self._probes: dict[tuple[int, bool], Verdict] = {}

    def answer(
        self,
        result: int,
        tab: bool,
        fallback: bool,
        contact: bool,
        reissued: bool = False,
        after_shell: bool = False,
        navigation: bool = False,
        scanned: bool = True,
    ) -> evidence.Evidence:
        """What a GET (``tab=False``) or a render answered with ``result`` means for the record
        (``navigation``: the page leads on to the site's others and holds no item, under the
        items outcome; ``scanned=False``: no contact scan read it, as the runtime does for a
        friendly domain's page, ``Policy.usefulness_moves``)."""
        key = (result, tab, fallback, contact, reissued, after_shell, navigation, scanned)
        found = self._answers.get(key)
        if found is None:
            found = self._answers[key] = self._judge(*key)
        return found

    @staticmethod
    def _judge(
        result: int,
        tab: bool,
        fallback: bool,
        contact: bool,
        reissued: bool,
        after_shell: bool,
        navigation: bool,
        scanned: bool,
    ) -> evidence.Evidence:
        verdict = VERDICTS[result]
        facts = evidence.Facts(
            method=Method.TAB if tab else Method.FETCH,
            status=verdict.status,
            is_root=result == w.ROOT_404,
            reissued=reissued,
            fallback=fallback,
            after_shell=after_shell,
        )
        if result in FAILURES:
            return evidence.judge_failure(facts, verdict)
        judged = evidence.judge_response(facts, verdict)
        if judged.usefulness and not scanned:
            judged = evidence.not_scanned(judged)
        elif judged.usefulness:
            useful = Outcome.NAVIGATION if navigation else Outcome.OK_CONTACT if contact else Outcome.OK_EMPTY
            judged = evidence.with_usefulness(judged, useful)
        return judged

    def reissued(self) -> frozenset[int]:
        """The GET results a ``fetch-then-browser`` request re-issues in the browser (any page)."""
        return frozenset(r for r in VERDICTS if self.answer(r, False, True, True).reissue)

    def probe(self, result: int, is_root: bool) -> Verdict:
        """What the HEAD probe records for a HEAD answered with ``result``."""
        key = (result, is_root)
        found = self._probes.get(key)
        if found is None:
            found = self._probes[key] = self._probe(result, is_root)
        return found

    @staticmethod
    def _probe(result: int, is_root: bool) -> Verdict:
        if result in FAILURES:
            return VERDICTS[result]
        if result in _HEAD_STATUS:
            return evidence.probe_verdict(_HEAD_STATUS[result], None, is_root)
        seen = evidence.head_view(VERDICTS[result])  # a bodiless HEAD sees only the wall's headers
        status = seen.status if seen is not None and seen.status is not None else 200
        return evidence.probe_verdict(status, seen, is_root)
