"""The outcome flow: what a response or a failure means, and what is recorded.

:class:`OutcomeFlow` (a part of :class:`~scrapy_domainstate.runtime.lifecycle.DomainStateManager`)
turns a downloaded response or a download error into evidence (the classifier's verdict,
the usefulness of the page, a certificate, a browser render), records it in the store, and
re-issues a page in the browser when the evidence says a browser fixes it; items and
follow-ups counted by the spider middleware arrive here too.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import IgnoreRequest
from scrapy.http import TextResponse

from scrapy_domainstate.core.keys import host_fact_key, host_of, is_site_root, purpose_key
from scrapy_domainstate.core.policy import Policy, Transition
from scrapy_domainstate.core.record import DomainStat, Method, Outcome, RecentEntry, State
from scrapy_domainstate.detect import evidence
from scrapy_domainstate.detect.scan import BodyScan
from scrapy_domainstate.detect.verdict import Verdict
from scrapy_domainstate.runtime.browser import is_launch_failure
from scrapy_domainstate.runtime.manners import MannersFlow
from scrapy_domainstate.runtime.meta import (
    DEAD_STATUSES,
    FTB,
    META_AFTER_SHELL,
    META_DECISION,
    META_LEAD,
    META_LEAD_DEAD,
    META_OUT,
    META_PENDING,
    META_REISSUE,
    META_SEEN,
    REPORTED,
    UNDECIDED,
)
from scrapy_domainstate.runtime.probes import META_PROBE
from scrapy_domainstate.runtime.sources import CALLBACK, META_OUTCOME

if TYPE_CHECKING:
    from scrapy.http import Request, Response


logger = logging.getLogger(__name__)

# The pure judgements of :mod:`._evidence`, memoised: their inputs are small immutable values
# that repeat from one response to the next (a few facts, a few verdicts), and building the
# frozen dataclasses costs more than looking them up.
_facts = functools.lru_cache(maxsize=1024)(evidence.Facts)
_judge = functools.lru_cache(maxsize=4096)(evidence.judge_response)
_with_usefulness = functools.lru_cache(maxsize=4096)(evidence.with_usefulness)


class OutcomeFlow(MannersFlow):
    """The outcome flow of a :class:`DomainStateManager`."""

    # ----------------------------------------------------------- outcomes

    def _fingerprint(self, request: Request) -> str:
        return self.crawler.request_fingerprinter.fingerprint(request).hex()

    def record(
        self, domain: str, method: Method, verdict: Verdict, request: Request | None = None
    ) -> tuple[DomainStat, Transition | None] | None:
        """Record one outcome; send the signals, count the stats, log a state change.

        The outcome of a request to a host with host facts (:func:`~.keys.host_fact_key`) goes
        to the host's record as :meth:`Policy.host_entry` says, and to the domain's as
        :meth:`Policy.domain_entry` says; the domain's record and transition are returned."""
        entry = RecentEntry(self.clock(), method, verdict.outcome, verdict.status, verdict.error_class)
        host = None if request is None else self._host_facts_key(request)
        if verdict.outcome is Outcome.DEAD and request is not None and META_LEAD in request.meta:
            request.meta[META_LEAD_DEAD] = True
        if self.purpose is not None and verdict.success:
            # What the page was worth goes to this purpose's record; the site's shared record
            # learns only that the page was fetched (alive, past any wall, rendered or not).
            self._record_entry(purpose_key(host or domain, self.purpose), entry, verdict, request)
            entry = RecentEntry(entry.at, method, Outcome.NAVIGATION, entry.status, entry.error_class)
            counted = False
        else:
            counted = True
        if host is not None:
            to_host = Policy.host_entry(entry)
            if to_host is not None:
                self._record_entry(host, to_host, verdict, request, counted)
            to_domain = Policy.domain_entry(entry)
            if to_domain is None:
                return None
            entry = to_domain
        return self._record_entry(domain, entry, verdict, request, counted)

    def _host_facts_key(self, request: Request) -> str | None:
        """The request's :func:`~.keys.host_fact_key`, as worked out when it was decided."""
        seen = request.meta.get(META_SEEN)
        if seen is not None and len(seen) == 4 and seen[2] == request.url:
            host: str | None = seen[3]
            return host
        return host_fact_key(request.url, self.config.per_hostname)

    def _record_entry(
        self, domain: str, entry: RecentEntry, verdict: Verdict, request: Request | None, counted: bool = True
    ) -> tuple[DomainStat, Transition | None] | None:
        """Apply ``entry`` to one record; ``counted=False``: the outcome was counted (and
        signalled) with the purpose's record already."""
        try:
            stat, transition = self.store.record(domain, entry)
        except Exception:
            self.telemetry.store_failed("write")
            return None
        telemetry = self.telemetry
        if counted:
            telemetry.recorded(domain, entry, stat, request)
        if not self.store.pending:  # the store just flushed a batch: the stats follow it
            telemetry.publish()
        if transition is not None:
            self.telemetry.changed(domain, transition, stat, request)
            if self.remote is not None and transition.new in REPORTED:
                self.remote.report(domain, transition.new, stat.last_seen, verdict.error_class)
        return stat, transition

    def _evidence_facts(self, request: Request, response: Response | None = None) -> evidence.Facts:
        """The facts of one download. A render is what the browser handler produced (the
        ``DOMAINSTATE_BROWSER_RENDERED`` check); a failure of a request sent to the browser
        is the browser's."""
        meta = request.meta
        url = request.url
        browser_route = self.browser.reaches(request)
        sent_to_browser = browser_route and self.browser.has_meta(request)
        if response is None:
            status, cached, rendered, is_root = None, False, sent_to_browser, False
        else:
            status = response.status
            cached = "cached" in response.flags
            rendered = sent_to_browser if cached else self.browser.rendered(response)
            # Only a 404/410 asks whether the URL is the site root (dead site or dead URL).
            is_root = status in DEAD_STATUSES and is_site_root(response.url)
        return _facts(
            Method.TAB if rendered else Method.FETCH,
            status,
            is_root,
            cached,
            False,  # robots: robots.txt downloads never get here
            meta.get(META_REISSUE) == url,
            meta.get(META_DECISION) == FTB,
            browser_route,
            sent_to_browser and not rendered,
            meta.get(META_AFTER_SHELL) == url,
        )

    def after_response(self, request: Request, response: Response) -> Request | Response:
        """The middleware's ``process_response``; the request's place in the gate goes back after."""
        try:
            return self._after_response(request, response)
        finally:
            self.gate.leave(request)
            if META_PENDING not in request.meta:  # (else once the callback's outcome is recorded)
                self._release_lead(request)

    def _after_response(self, request: Request, response: Response) -> Request | Response:
        meta = request.meta
        out = meta.get(META_OUT)
        if meta.get(META_PROBE) or not out or out.get("method") in UNDECIDED:
            return response
        domain = out["domain"]
        facts = self._evidence_facts(request, response)
        if facts.cached:
            # Not sent after all: served from Scrapy's HTTP cache, not evidence. A cached wall
            # still goes to the browser (renders never come from the cache).
            meta[META_OUT] = dict(out, method="cache")
            self.telemetry.count(domain, "cache")
            cached_verdict = None
            if facts.fallback and facts.browser_route and facts.method is Method.FETCH and not facts.reissued:
                cached_verdict = self.classifier.response(
                    response.status, response.headers, response.body, response.url, facts.is_root
                )
            judged = evidence.judge_response(facts, cached_verdict)
            return self._reissue(request, "cached wall") if judged.reissue else response
        self.telemetry.count(domain, out["method"])
        if facts.unrendered:
            # Sent to the browser, answered by something else: evidence of neither kind.
            self.telemetry.inc("browser/not_rendered")
            self.telemetry.inc("not_evidence")
            return response
        # The body as the classifier and the outcome source read it: one lowercased copy, and
        # the contact places the classifier's pass found (none looked for when no contact scan
        # follows: a friendly domain's fetched page).
        contacts = (
            not self.policy.skips_friendly_scan
            or facts.method is not Method.FETCH
            or self._usefulness_moves(request, domain)
        )
        scan = BodyScan(response.body, self.config.body_scan_bytes, contacts)
        verdict, passed = evidence.response_verdict(
            self.classifier, facts.method, response.status, response.headers, scan, response.url, facts.is_root
        )
        self._manners(request, domain, facts.method, verdict)
        certificate = None
        if verdict.outcome is not Outcome.ANTIBOT and response.url.startswith("https:"):
            certificate = self._certificate_verdict(response)
            if certificate is not None and not verdict.success:
                verdict, certificate = certificate, None
        judged = _judge(facts, verdict, passed)
        if judged.usefulness and not contacts and certificate is None and isinstance(response, TextResponse):
            # (a page behind a bad certificate is scanned: empty, it is the certificate's dead
            # signal; a file the outcome source never judges is no evidence either way)
            judged = evidence.not_scanned(judged)
        elif judged.usefulness:
            # One path whatever decides usefulness: the verdict (its status, a passed wall, the
            # js-shell mark) is judged above; only "was this page useful?" comes from the source.
            useful = self.outcomes.useful(response, scan)
            if useful == CALLBACK:
                # The callback decides (the spider middleware calls record_items).
                assert judged.record is not None
                meta[META_PENDING] = (domain, facts.method, judged.record, certificate)
                return self._delivered(request, response, judged)
            judged = self._useful_or_certificate(judged, useful if isinstance(useful, Outcome) else None, certificate)
        return self._apply(request, response, domain, facts.method, judged)

    def _usefulness_moves(self, request: Request, domain: str) -> bool:
        """:meth:`Policy.usefulness_moves` for a fetched page, on the domain's record as it is
        when the answer arrives (a host with facts of its own is always scanned)."""
        if self._host_facts_key(request) is not None:
            return True
        try:
            return self.policy.usefulness_moves(self.store.get(domain), self.clock())
        except Exception:
            return True  # (the record path reports the store's failure)

    @staticmethod
    def _useful_or_certificate(
        judged: evidence.Evidence, useful: Outcome | None, certificate: Verdict | None
    ) -> evidence.Evidence:
        """A fetched page's evidence once its usefulness is known. An invalid certificate is a
        dead signal only for a page that was not useful: a site that serves useful pages
        behind a bad certificate is misconfigured, not abandoned (docs/SPEC.md section 2)."""
        if certificate is not None and useful is Outcome.OK_EMPTY:
            return evidence.Evidence(record=certificate, passed=judged.passed)
        return _with_usefulness(judged, useful)

    def _delivered(self, request: Request, response: Response, judged: evidence.Evidence) -> Response:
        """The response as the callback gets it: a wall the browser got past is delivered as the
        page it rendered (a 200)."""
        if judged.passed:
            request.meta[META_OUT] = dict(request.meta[META_OUT], original_status=response.status)
            return response.replace(status=200)
        return response

    def _apply(
        self, request: Request, response: Response, domain: str, method: Method, judged: evidence.Evidence
    ) -> Request | Response:
        """Act on what a response means: record it, re-issue it, mark its URL dead."""
        if judged.record is None:
            self.telemetry.inc("not_evidence")
            if judged.url_dead:
                self._mark_url_dead(request)
            return self._reissue(request, judged.reason) if judged.reissue else response
        if self.alarm.on and judged.record.outcome is Outcome.ANTIBOT:
            self.telemetry.inc("antibot_suspect")  # the crawler is blocked, not (only) this site
        else:
            self.record(domain, method, judged.record, request)
        if method is Method.TAB and not judged.record.success:
            self._hard_render_failed(request)
        if judged.reissue:
            return self._reissue(request, judged.record.outcome)
        return self._delivered(request, response, judged)

    def _hard_render_failed(self, request: Request) -> None:
        """A render of an ``antibot-hard`` domain that got no page (the close summary shows them)."""
        out = request.meta.get(META_OUT)
        if out and out.get("state") == State.ANTIBOT_HARD._value_:
            self.telemetry.inc("hard_render_failed")

    def after_exception(self, request: Request, exception: BaseException) -> Request | None:
        """The middleware's ``process_exception``; the request's place in the gate goes back after."""
        try:
            return self._after_exception(request, exception)
        finally:
            self.gate.leave(request)
            self._release_lead(request)

    def _after_exception(self, request: Request, exception: BaseException) -> Request | None:
        meta = request.meta
        if meta.get("dont_obey_robotstxt") and request.url.endswith("/robots.txt"):
            self._robots_failed(exception)
            return None
        out = meta.get(META_OUT)
        if meta.get(META_PROBE) or not out or out.get("method") in UNDECIDED:
            return None
        if isinstance(exception, IgnoreRequest):
            # Decided and sent on, then dropped by another component (its process_request).
            self.telemetry.count(out["domain"], "dropped")
            return None
        if is_launch_failure(exception):
            return self._without_browser(request, exception)
        self.telemetry.count(out["domain"], out["method"])
        facts = self._evidence_facts(request)
        verdict = self.classifier.failure(exception)
        judged = evidence.judge_failure(facts, verdict)
        hostname = host_of(request.url)
        if self.pauses.failed(hostname, verdict.error_class):
            self._paused(hostname, out["domain"], request, verdict)
            self._drain(request, hostname)
        if judged.reissue and self.pauses.failing(hostname) and verdict.outcome is Outcome.NETWORK_ERROR:
            # The server keeps timing out: a browser would wait for the same server.
            judged = evidence.Evidence(record=judged.record, reason=judged.reason)
            self.telemetry.inc("browser_reissue_skipped/failing_host")
        self.record(out["domain"], facts.method, verdict, request)
        if facts.method is Method.TAB:
            self._hard_render_failed(request)
        return self._reissue(request, verdict.outcome) if judged.reissue else None

    def _without_browser(self, request: Request, exception: BaseException) -> Request:
        """The browser did not launch: the route goes off (once), nothing is recorded as a
        render, and the request is decided again without a browser. A re-issue is dropped:
        its plain fetch was the page, and it was recorded."""
        if self.browser.enabled:
            self.browser.launch_failed(self.crawler, exception)
        self.telemetry.inc("browser/launch_failed_requests")
        if request.meta.get(META_REISSUE) == request.url:
            raise IgnoreRequest(f"scrapy-domainstate: not rendered, the browser did not launch ({self.browser.reason})")
        drop = self.browser.render_keys
        meta = {k: v for k, v in request.meta.items() if k not in drop and k != META_DECISION}
        return request.replace(dont_filter=True, meta=meta)

    def _robots_failed(self, exception: BaseException) -> None:
        """RobotsTxtMiddleware logs an ERROR with a traceback for every robots.txt it cannot
        reach; the site's own requests say what is wrong with it (and are recorded). A
        robots.txt that failed to download (DNS, refused, timeout, TLS) is ignored instead."""
        if isinstance(exception, IgnoreRequest):
            return
        if self.classifier.failure(exception).outcome in (Outcome.DEAD, Outcome.NETWORK_ERROR):
            self.telemetry.inc("robotstxt/unreachable")
            raise IgnoreRequest(f"scrapy-domainstate: robots.txt unreachable ({type(exception).__name__}): {exception}")

    def _reissue(self, request: Request, why: object) -> Request:
        self.telemetry.inc("browser_reissue")
        meta = dict(request.meta)
        meta.update(self.browser.meta_for(request.meta))
        # The URL, not True: a request built later from a copy of this meta is not a re-issue.
        meta[META_REISSUE] = request.url
        meta.pop(META_LEAD, None)  # (the lead's outcome is in: the re-issue leads nothing)
        if why == evidence.JS_SHELL:
            meta[META_AFTER_SHELL] = request.url  # its render teaches the domain it needs the browser
        meta.pop(META_DECISION, None)
        self.telemetry.debug("Re-issuing %s in the browser (%s)", request.url, why)
        return request.replace(dont_filter=True, meta=meta)

    def _mark_url_dead(self, request: Request) -> None:
        domain = request.meta[META_OUT]["domain"]
        if self.dead_urls.mark(domain, lambda: self._fingerprint(request), self.clock()):
            self.telemetry.inc("url_dead/marked")

    def _certificate_verdict(self, response: Response) -> Verdict | None:
        host = host_of(response.url)
        if host in self._cert_verdicts:
            return self._cert_verdicts[host]
        verdict = self.classifier.certificate(response.certificate, host, self.clock())
        if len(self._cert_verdicts) > 10000:
            self._cert_verdicts.clear()
        self._cert_verdicts[host] = verdict
        return verdict

    def pending_site(self, response: Response) -> str | None:
        """The site key of a response whose outcome waits for its callback, or ``None``."""
        pending = response.meta.get(META_PENDING)
        return None if pending is None else str(pending[0])

    def record_items(self, response: Response, n_items: int, n_follow: int = 0) -> None:
        """The spider middleware's hook (``DOMAINSTATE_OUTCOME='items'``, or a callable that
        returned None): ``n_items`` items and ``n_follow`` follow-up requests to the same site."""
        pending = response.meta.pop(META_PENDING, None)
        if pending is None:
            return
        try:
            self._record_items(response, pending, n_items, n_follow)
        finally:
            if response.request is not None:
                self._release_lead(response.request)

    def _record_items(self, response: Response, pending: tuple[Any, ...], n_items: int, n_follow: int) -> None:
        domain, method, verdict, certificate = pending
        outcome = self.outcomes.from_count(
            n_items, response.meta.get(META_OUTCOME), response.url, n_follow, self.outcomes.from_items
        )
        judged = self._useful_or_certificate(evidence.Evidence(record=verdict, usefulness=True), outcome, certificate)
        if judged.record is None:
            self.telemetry.inc("not_evidence")
            return
        self.record(domain, method, judged.record, response.request)
