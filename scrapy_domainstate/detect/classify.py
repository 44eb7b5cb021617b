"""Turn HTTP answers, download failures and TLS certificates into outcomes: the
:class:`Classifier`, which composes the floor's parts.

Pure: no Scrapy engine, no I/O, no clock (``now`` is passed in). Every public method returns
a :class:`~scrapy_domainstate.detect.verdict.Verdict` (or ``None``) and never raises. Failures
and certificates have their own modules (:mod:`~scrapy_domainstate.detect.failures`,
:mod:`~scrapy_domainstate.detect.certs`); what is left here is the rules over a response.

The anti-bot check (:meth:`Classifier.antibot`) runs before any success is counted:
challenges also arrive as 2xx (AWS WAF answers a challenge with 202), and a challenge
counted as ``ok-empty`` would make a site ``cold`` for months. It looks at the status, a
few headers (:mod:`~scrapy_domainstate.detect.headers`) and the lowercased first
``DOMAINSTATE_BODY_SCAN_BYTES`` of the body (read further, scripts and styles skipped, when
that prefix shows no content), in three layers: the vendor markers of
:mod:`scrapy_domainstate.detect.markers` (compiled by :mod:`~scrapy_domainstate.detect.compiled`;
hard blocks first), then the structure of an interstitial (:mod:`~scrapy_domainstate.detect.page`:
little text, few links, and a verification phrase, a captcha widget or a lone challenge
script), always soft. All literals come from one scan
(:class:`~scrapy_domainstate.detect.scan.LiteralScanner`: hyperscan when installed).

With hyperscan, :meth:`Classifier.response` first makes one case-insensitive pass over the raw
bytes (:mod:`~scrapy_domainstate.detect.fastpass`): when it shows that no rule can fire, the
answer comes from it without a lowercase copy or a visible-text pass; otherwise the full path
here runs (with the literals the pass found). Both engines give the same verdicts.

The body methods take the body as bytes or as a :class:`~scrapy_domainstate.detect.scan.BodyScan`
(made once per response by the runtime): the classifier reads its lowercased view, and leaves
in it the contact places its pass found, for the contact scan that follows.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.keys import is_site_root
from scrapy_domainstate.core.record import Outcome
from scrapy_domainstate.core.wallrules import CLEAN
from scrapy_domainstate.detect.certs import certificate_verdict
from scrapy_domainstate.detect.compiled import (
    CompiledMarker,
    ParkingCues,
    Plan,
    compile_marker,
    conditions_hold,
    in_script,
    outside_scripts,
)
from scrapy_domainstate.detect.failures import failure_verdict
from scrapy_domainstate.detect.fastpass import Facts, FastPass, fast_shell
from scrapy_domainstate.detect.headers import MarkerHeaders, header_fires, normalize_headers
from scrapy_domainstate.detect.markers import (
    BLOCK_STATUSES,
    CAPTCHA_WIDGETS,
    CHALLENGE_SCRIPTS,
    HINT_VENDOR_ORDER,
    NAMING_ONLY,
    PARKED_MAX_BYTES,
    PARKING_HEADERS,
    SMALL_PAGE,
    VERIFY_PHRASES,
    Marker,
    merge_markers,
)
from scrapy_domainstate.detect.page import (
    INTERSTITIAL_MAX_LINKS,
    INTERSTITIAL_MAX_TEXT,
    JS_SHELL_MIN_TEXT,
    Shape,
    is_binary,
    links_at_least,
    person_fields,
    visible_text_below,
)
from scrapy_domainstate.detect.scan import (
    BodyScan,
    LiteralScanner,
    extended_view,
    title_of,
    visible_text,
)
from scrapy_domainstate.detect.verdict import Verdict
from scrapy_domainstate.detect.wallrules import UserRules, user_rules

__all__ = ["EXTENDED_SCAN_CAP", "JS_SHELL_MAX_BYTES", "Classifier"]

#: Bodies at least this long are never called a script-only shell.
JS_SHELL_MAX_BYTES = 50_000
#: A long page whose scanned prefix shows no content is read up to this many bytes.
EXTENDED_SCAN_CAP = 1 << 20
#: A verification phrase in the text (not the title) counts on pages with less text than this.
PHRASE_MAX_TEXT = 700
#: status -> the plain ``ok-empty`` verdict (immutable, so shared).
_OK_EMPTY: dict[int, Verdict] = {}


# ------------------------------------------------------------------ the classifier


class Classifier:
    """Classify responses, failures and certificates; markers compiled once per config.

    Thread-safe after construction (the only mutable state is a memo of scan plans).
    """

    def __init__(self, config: Config | None = None, engine: str = "auto") -> None:
        self.config = config if config is not None else Config()
        self.scan_bytes = int(self.config.body_scan_bytes)
        markers = merge_markers(self.config.challenge_markers)
        ordered = [(v, m) for v, ms in markers.items() for m in ms if m.hard]
        ordered += [(v, m) for v, ms in markers.items() for m in ms if not m.hard]
        self._markers = tuple(compile_marker(v, m) for v, m in ordered)
        statuses: set[int] = set()
        for c in self._markers:
            if c.allowed is not None:
                statuses.update(c.allowed)
        self._statuses = frozenset(statuses)
        #: The headers the markers (and the parking check) read, picked out of each response's.
        self.headers = MarkerHeaders(self._markers, PARKING_HEADERS)
        self._plans: dict[tuple[int, bool, bool], Plan] = {}
        # Structural cues (markers.VERIFY_PHRASES, CAPTCHA_WIDGETS, CHALLENGE_SCRIPTS).
        self._phrases = tuple(p.lower().encode("utf-8") for p in VERIFY_PHRASES)
        self._title_phrase = re.compile(b"|".join(re.escape(p) for p in self._phrases))
        rank = {v: i for i, v in enumerate(HINT_VENDOR_ORDER)}
        self._widgets = self._cues(CAPTCHA_WIDGETS, rank)
        self._scripts = self._cues(CHALLENGE_SCRIPTS, rank)
        self._rank = rank
        self._cue_literals = frozenset(
            lit for table in (self._widgets, self._scripts) for _, _, lits in table for lit in lits
        )
        literals = set(self._cue_literals)
        for c in self._markers:
            literals |= c.scanned()
        self._parking = ParkingCues.build()
        literals |= self._parking.literals
        #: One scan over the body reports every literal any marker or cue needs.
        self.scanner = LiteralScanner(literals, engine)
        self._cue_subset = self.scanner.subset(self._cue_literals)
        self._parking_subset = self.scanner.subset(self._parking.literals)
        #: The user's own rules (``DOMAINSTATE_WALL_RULES``, ``DOMAINSTATE_WALL_PREDICATE``), or
        #: ``None``: consulted by the public methods around the built-in rules (:meth:`_ruled`).
        self.rules: UserRules | None = user_rules(self.config)

        #: The pass carries the contact scan's patterns only where a contact scan follows it:
        #: the default outcome source (``contacts``); ``items`` and a callable never read them.
        self.contact_places = self.config.outcome == "contacts"
        # With hyperscan, the usual page (no marker, no cue) is told from one case-insensitive
        # pass over its raw bytes (:mod:`~scrapy_domainstate.detect.fastpass`).
        self._fast: FastPass | None = None
        if self.scanner.engine == "hyperscan":
            self._fast = FastPass(
                self.scanner,
                self.scan_bytes,
                self._plan,
                self.headers,
                self._phrases,
                self._cue_literals,
                self.contact_places,
            )

    def prepare(self) -> None:
        """Build (or fetch from the process's cache) the scan databases now, at start-up, rather
        than in the first responses' calls."""
        if self._fast is not None:
            self._fast.prepare()

    @staticmethod
    def _cues(
        table: Mapping[str, tuple[str, tuple[str, ...]]], rank: Mapping[str, int]
    ) -> tuple[tuple[str, str, frozenset[bytes]], ...]:
        rows = [
            (vendor, name, frozenset(p.lower().encode("utf-8") for p in pats)) for vendor, (name, pats) in table.items()
        ]
        return tuple(sorted(rows, key=lambda r: rank.get(r[0], len(rank))))

    @property
    def engine(self) -> str:
        """The literal-scan engine in use: ``'hyperscan'`` or ``'pure'``."""
        return self.scanner.engine

    @property
    def markers(self) -> tuple[tuple[str, Marker], ...]:
        """``(vendor, marker)`` pairs in evaluation order (hard blocks first)."""
        return tuple((c.vendor, c.marker) for c in self._markers)

    # ---------------------------------------------------------- anti-bot

    def _plan(self, status: int, small: bool, body: bool) -> Plan:
        key = (status if status in self._statuses else -1, small, body)
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        eligible = []
        for c in self._markers:
            if c.allowed is not None and status not in c.allowed:
                continue
            if c.kind in ("body", "regex", "title") and not body:
                continue
            if c.marker.interstitial and not small and status not in BLOCK_STATUSES:
                continue
            eligible.append(c)
        wanted: set[bytes] = set()
        for c in eligible:
            wanted |= c.scanned()
        plan = Plan(
            markers=tuple(eligible),
            headless=tuple(c for c in eligible if c.kind not in ("body", "regex", "title")),
            has_status=any(c.kind == "status" for c in eligible),
            literals=self.scanner.subset(wanted),
            title_patterns=tuple(sorted({p for c in eligible for p in c.title_patterns})),
        )
        if len(self._plans) < 4096:
            self._plans[key] = plan
        return plan

    def _extend(self, low: bytes | None, size: int, body: Any) -> bytes:
        """The extended view past the scanned prefix, ``b''`` when not needed.

        A page longer than the prefix whose prefix shows no content (few links, little
        visible text: a head full of inline styles or scripts, as on site-branded challenge
        pages) is read further, scripts and styles skipped, up to :data:`EXTENDED_SCAN_CAP`
        bytes of body and twice ``body_scan_bytes`` bytes of markup.
        """
        if not low or size <= len(low) or len(low) < self.scan_bytes or not isinstance(body, (bytes, bytearray)):
            return b""
        if links_at_least(low, INTERSTITIAL_MAX_LINKS) or visible_text(low, INTERSTITIAL_MAX_TEXT) is None:
            return b""
        raw = bytes(body) if isinstance(body, bytearray) else body
        return extended_view(raw, len(low), low, 2 * self.scan_bytes, EXTENDED_SCAN_CAP)

    def _antibot(
        self,
        status: int,
        hdrs: Mapping[str, str],
        low: bytes | None,
        size: int,
        body: Any = None,
        known: set[bytes] | None = None,
    ) -> Verdict | None:
        """``known``: every scanner literal in ``low`` (a pass over the whole body found them)."""
        ext = self._extend(low, size, body)
        small = size <= SMALL_PAGE
        shape: Shape | None = None
        if not small and low and status not in BLOCK_STATUSES and not links_at_least(low, INTERSTITIAL_MAX_LINKS):
            # A long page counts as small (interstitial markers apply) when it shows little.
            shape = Shape.of(low, ext)
            small = shape.branded
        plan = self._plan(status, small, bool(low))
        if known is not None:
            found = known & plan.literals.literals
        else:
            found = self.scanner.scan(low, plan.literals) if low else set()
        if ext:
            found |= self.scanner.scan(ext, plan.literals)
        title: bytes | None = None
        markers: tuple[CompiledMarker, ...] = plan.markers if found else plan.headless
        if not found and not plan.has_status and self.headers.quiet(hdrs):
            # The usual page: no literal of any marker, no status marker, no marker header
            # (``hdrs`` holds only marker headers and content-type): only a title marker can
            # fire, and only when one of its patterns is in the title.
            markers = ()
            if low and plan.title_patterns:
                title = self._title(low, ext)
                if title and any(p in title for p in plan.title_patterns):
                    markers = plan.markers
            if not markers and (not low or (size > SMALL_PAGE and not ext and not self._asks_to_verify(low, shape))):
                return None  # and too long to be an interstitial, unless it shows little and asks
        elif low and plan.title_patterns:
            markers = plan.markers
        if markers:
            verdict = self._first_marker(markers, status, hdrs, low, ext, found, title)
            if verdict is not None:
                return verdict
        if not low or (size > SMALL_PAGE and not ext and shape is None):
            return None  # a long page with content in its prefix is no interstitial
        return self._structural(status, low, ext, shape, known)

    def _first_marker(
        self,
        markers: tuple[CompiledMarker, ...],
        status: int,
        hdrs: Mapping[str, str],
        low: bytes | None,
        ext: bytes,
        found: set[bytes],
        title: bytes | None,
    ) -> Verdict | None:
        """The verdict of the first of ``markers`` that fires, or ``None``.

        A ``fallback`` marker (it proves only the CDN in front of the site) that fires first
        gives way to a later marker of another vendor that also fires: the most specific
        evidence names the vendor (generic wording and statuses name none, so they do not).
        """
        fallback: CompiledMarker | None = None
        for c in markers:
            if fallback is not None and (c.vendor in (fallback.vendor, "generic") or c.marker.fallback):
                continue
            if c.kind == "title" and title is None:
                title = self._title(low, ext)
            fired, detail = self._fires(c, hdrs, low, ext, found, title)
            if not fired:
                continue
            if c.marker.fallback and fallback is None:
                fallback = c
                continue
            return Verdict(Outcome.ANTIBOT, status, c.evidence(detail), browser_fixable=not c.marker.hard)
        if fallback is not None:
            return Verdict(Outcome.ANTIBOT, status, fallback.evidence(), browser_fixable=not fallback.marker.hard)
        return None

    def _fires(
        self,
        c: CompiledMarker,
        hdrs: Mapping[str, str],
        low: bytes | None,
        ext: bytes,
        found: set[bytes],
        title: bytes | None,
    ) -> tuple[bool, str | None]:
        """Whether marker ``c`` fires on this response, and the detail its evidence names."""
        kind = c.kind
        detail: str | None = None
        if kind == "header":
            if not header_fires(c, hdrs):
                return False, None
        elif kind == "title":
            if not title or not any(p in title for p in c.title_patterns):
                return False, None
        elif kind == "body":
            hits = c.literals & found
            if not hits or (
                c.outside_scripts
                and low is not None
                and not any((ext and lit in ext) or outside_scripts(low, lit) for lit in hits)
            ):
                return False, None
        elif kind == "regex":
            match = self._regex_hit(c, low, ext, found)
            if match is None:
                return False, None
            detail = (match.group(1) or b"").decode("ascii", "replace") if match.groups() else None
        if (c.requires or c.unless or c.short_page) and not conditions_hold(c, low, ext):
            return False, None
        return True, detail

    @staticmethod
    def _title(low: bytes | None, ext: bytes) -> bytes:
        title = title_of(low) if low else b""
        if not title and ext and (not low or b"<title" not in low):
            title = title_of(ext)
        return title

    @staticmethod
    def _regex_hit(c: CompiledMarker, low: bytes | None, ext: bytes, found: set[bytes]) -> re.Match[bytes] | None:
        if c.anchor not in found or c.regex is None or low is None:
            return None
        for match in c.regex.finditer(low):
            if not c.outside_scripts or not in_script(low, match.start()):
                return match
        return c.regex.search(ext) if ext else None

    def _structural(
        self, status: int, low: bytes, ext: bytes, shape: Shape | None, known: set[bytes] | None = None
    ) -> Verdict | None:
        """An interstitial: little visible text, few links, and a cue (README, "Outcomes").

        A title or text that asks to verify, wait or prove one is human; a captcha widget on
        a page without a field a person fills in; or a vendor's challenge script on a page that
        is otherwise empty. Always a challenge (soft): structure alone never proves a ban.
        """
        shape = shape or Shape.of(low, ext)
        if not shape.interstitial:
            return self._branded_verdict(status, low, ext, shape)
        if known is not None and not ext:
            cues = known & self._cue_subset.literals
        else:
            cues = self.scanner.scan(shape.view, self._cue_subset)
        vendor = self._vendor(cues)
        title = self._title(low, ext)
        text = shape.text
        view = shape.view
        phrases = [p for p in self._phrases if p in title or p in text]
        fields: bool | None = None
        if phrases:
            if any(p in title for p in phrases):
                return Verdict(Outcome.ANTIBOT, status, f"challenge:{vendor or 'generic'}:interstitial", True)
            # In the text only: a shorter page, and not a form a person fills in ("Are you a
            # robot?" next to a login form's password field is the form's own captcha).
            if len(text) < PHRASE_MAX_TEXT and any(p in text for p in phrases):
                fields = person_fields(view)
                if not fields:
                    return Verdict(Outcome.ANTIBOT, status, f"challenge:{vendor or 'generic'}:interstitial", True)
        for widget_vendor, name, lits in self._widgets:
            if not cues.isdisjoint(lits):
                if fields is None:
                    fields = person_fields(view)
                if not fields:
                    return Verdict(Outcome.ANTIBOT, status, f"challenge:{vendor or widget_vendor}:{name}", True)
                break
        if shape.empty and not title:
            return self._script_verdict(status, cues, vendor)
        return None

    def _asks_to_verify(self, low: bytes, shape: Shape | None) -> bool:
        """A long page that shows little (few links, little text) and whose title asks to verify."""
        return shape is not None and shape.branded and self._title_phrase.search(title_of(low)) is not None

    def _branded_verdict(self, status: int, low: bytes, ext: bytes, shape: Shape) -> Verdict | None:
        """A page longer than an interstitial (a branded page explains itself in several
        languages) that still shows few links and little text: a title that asks to verify is
        enough. No byte size decides it."""
        if not shape.branded or self._title_phrase.search(self._title(low, ext)) is None:
            return None
        vendor = self._vendor(self.scanner.scan(shape.view, self._cue_subset))
        return Verdict(Outcome.ANTIBOT, status, f"challenge:{vendor or 'generic'}:interstitial", True)

    def _script_verdict(self, status: int, cues: set[bytes], vendor: str | None) -> Verdict | None:
        """A vendor's challenge script on an otherwise empty page, or ``None``."""
        for script_vendor, name, lits in self._scripts:
            if script_vendor not in NAMING_ONLY and not cues.isdisjoint(lits):
                return Verdict(Outcome.ANTIBOT, status, f"challenge:{vendor or script_vendor}:{name}", True)
        return None

    def _vendor(self, cues: set[bytes]) -> str | None:
        """The vendor the cues point to first (bot managers before captcha providers)."""
        best: tuple[int, str] | None = None
        for table in (self._scripts, self._widgets):
            for vendor, _, lits in table:
                if not cues.isdisjoint(lits):
                    key = (self._rank.get(vendor, len(self._rank)), vendor)
                    if best is None or key < best:
                        best = key
        return best[1] if best else None

    def _body_scan(self, body: Any) -> BodyScan:
        """``body`` as a :class:`BodyScan` of ``body_scan_bytes`` (``body`` itself when it is one
        of that limit)."""
        if type(body) is BodyScan:
            return body if body.limit == self.scan_bytes else BodyScan(body.body, self.scan_bytes)
        return BodyScan(body, self.scan_bytes)

    def _prepare(self, hdrs: Mapping[str, str], scan: BodyScan) -> tuple[bytes | None, int]:
        """The lowercased scan prefix (``None`` for binary bodies) and the body's length."""
        body = scan.body
        try:
            size = len(body) if body else 0
        except TypeError:
            size = 0
        low = scan.low
        if not low or is_binary(hdrs.get("content-type", ""), low):
            return None, size
        return low, size

    def antibot(self, status: int, headers: Any, body: bytes | BodyScan, url: str = "") -> Verdict | None:
        """An ``antibot`` verdict, or ``None`` when nothing says challenge or block.

        Signals: status (429, LinkedIn's 999), vendor headers (``cf-mitigated``,
        ``x-amzn-waf-action``, ``x-vercel-mitigated``, DataDome's ``x-dd-b``, ...), the page
        title, and body markers in the first ``body_scan_bytes`` bytes. Hard blocks come
        first (``error_class`` ``'block:<vendor>:<detail>'``, not browser-fixable), then
        challenges (``'challenge:<vendor>:<marker>'``, browser-fixable). Binary bodies are
        never scanned. The user's rules apply (``url``, when known, for their domains).
        """
        scan = self._body_scan(body)
        if self.rules is not None:
            return self._ruled(status, headers, scan, url, lambda: self._builtin_antibot(status, headers, scan))
        return self._builtin_antibot(status, headers, scan)

    def _builtin_antibot(self, status: int, headers: Any, scan: BodyScan) -> Verdict | None:
        try:
            hdrs = self.headers.pick(headers)
            low, size = self._prepare(hdrs, scan)
            return self._antibot(int(status), hdrs, low, size, scan.body)
        except Exception:  # a classifier never breaks a crawl
            return None

    # ---------------------------------------------------------- HEAD and GET

    def head(self, status: int, headers: Any, url: str, is_root: bool) -> Verdict:
        """Classify the answer to the HEAD probe (:meth:`_head`), the user's rules first."""
        if self.rules is None:
            return self._head(status, headers, url, is_root)
        verdict = self._ruled(
            status, headers, BodyScan(b"", self.scan_bytes), url, lambda: self._head(status, headers, url, is_root)
        )
        if verdict is None:  # an anti-bot verdict excused: what the HEAD says besides
            return self._head(status, {}, url, is_root)
        return verdict

    def _head(self, status: int, headers: Any, url: str, is_root: bool) -> Verdict:
        """Classify the answer to the HEAD probe.

        Only anti-bot headers/statuses and a 404/410 on the site root are conclusive
        (``antibot`` / ``dead``); everything else, including 405/501 "HEAD not supported",
        5xx and an off-root 404, is ``no-verdict`` and the GET decides.
        """
        try:
            status = int(status)
            hdrs = self.headers.pick(headers)
            verdict = self._antibot(status, hdrs, None, 0)
        except Exception:
            return Verdict(Outcome.NO_VERDICT, None)
        if verdict is not None:
            return verdict
        if is_root and status in (404, 410):
            return Verdict(Outcome.DEAD, status, f"http:{status}")
        return Verdict(Outcome.NO_VERDICT, status)

    def response(self, status: int, headers: Any, body: bytes | BodyScan, url: str, is_root: bool) -> Verdict:
        """Classify a downloaded response (:meth:`builtin_response`), the user's rules first."""
        if self.rules is None:
            return self.builtin_response(status, headers, body, url, is_root)
        scan = self._body_scan(body)
        verdict = self._ruled(
            status, headers, scan, url, lambda: self.builtin_response(status, headers, scan, url, is_root)
        )
        if verdict is None:  # an anti-bot verdict excused: what the page is besides
            return self.builtin_response(status, headers, scan, url, is_root, antibot=False)
        return verdict

    # ---------------------------------------------------------- the user's rules

    def _ruled(
        self, status: int, headers: Any, scan: BodyScan, url: str, builtin: Callable[[], Verdict | None]
    ) -> Verdict | None:
        """The user's rules around ``builtin()`` (a built-in answer): the predicate and the wall
        rules first (their wall is the verdict), then ``builtin()``, whose anti-bot verdict a
        predicate's ``'clean'`` or a never-a-wall exception drops (``None``: excused)."""
        rules = self.rules
        assert rules is not None
        try:
            seen = rules.seen(url, status, normalize_headers(headers) if rules.wants_headers else {}, scan.body, scan)
            ruling = rules.first(seen)
        except Exception:  # a classifier never breaks a crawl: the built-in rules decide
            return builtin()
        if ruling is not None and ruling.wall:
            soft = ruling.grade == "soft"
            return Verdict(Outcome.ANTIBOT, int(status), ruling.evidence, browser_fixable=soft)
        verdict: Verdict | None = builtin()
        if verdict is None or verdict.outcome is not Outcome.ANTIBOT:
            return verdict
        if (ruling is not None and ruling.grade == CLEAN) or rules.excuse(seen, verdict.error_class) is not None:
            return None
        return verdict

    def builtin_response(
        self, status: int, headers: Any, body: bytes | BodyScan, url: str, is_root: bool, antibot: bool = True
    ) -> Verdict:
        """The built-in classifier's verdict on a downloaded response (plain fetch or browser),
        without the user's own rules (:meth:`response` consults them around it).

        Order: anti-bot first; then 404/410 (``dead`` on the site root, ``http-error`` with
        ``'http:404'`` elsewhere: the caller marks that URL dead); 403/503 without markers
        are browser-fixable ``http-error``; other statuses >= 400 are ``http-error``.

        A 2xx/3xx gives ``ok-empty``, which means "fetched fine; usefulness not decided
        here": the caller upgrades it to ``ok-contact`` from its outcome source (contacts,
        items or a callable). A small HTML page that is only a ``<script>`` shell (fewer than
        :data:`~scrapy_domainstate.detect.page.JS_SHELL_MIN_TEXT` visible characters) is ``ok-empty`` with ``'js-shell'`` and
        ``browser_fixable=True``: a browser would render it. A 2xx home page (``url`` is the
        site root, whatever ``is_root`` says) of at most :data:`~scrapy_domainstate.detect.markers.PARKED_MAX_BYTES` that is a parking or for-sale
        page is ``parked`` with ``'parked:<service>'`` (never useful, never sent to a browser).
        """
        # (the runtime hands its BodyScan over: no call on the hot path)
        scan = body if type(body) is BodyScan and body.limit == self.scan_bytes else self._body_scan(body)
        try:
            status = int(status)
            hdrs = self.headers.pick(headers)
            fast = self._fast is not None and antibot
            facts, found = self._try_fast(status, hdrs, scan) if fast else (None, None)
            if facts is not None:  # no marker and no cue: not an anti-bot answer
                low, size, verdict = None, len(scan.body), None
            else:
                low, size = self._prepare(hdrs, scan)
                verdict = self._antibot(status, hdrs, low, size, scan.body, found if low is not None else None)
                verdict = verdict if antibot else None  # (excused by the user's rules)
        except Exception:  # never expected; "no evidence" rather than a crash or a wrong state
            return Verdict(Outcome.NO_VERDICT, None, "classify-error")
        if verdict is not None:
            return verdict
        if 200 <= status < 300 and (low is not None or facts is not None) and size <= PARKED_MAX_BYTES:
            service = self._parked(hdrs, scan, url, low, found)
            if service is not None:
                return Verdict(Outcome.PARKED, status, f"parked:{service}")
        if status in (404, 410):
            return Verdict(Outcome.DEAD if is_root else Outcome.HTTP_ERROR, status, f"http:{status}")
        if status >= 400 or status < 100:
            return Verdict(Outcome.HTTP_ERROR, status, f"http:{status}", browser_fixable=status in (403, 503))
        if (
            200 <= status < 300
            and (low or facts is not None)
            and size < JS_SHELL_MAX_BYTES
            and "html" in (hdrs.get("content-type") or "html").lower()
            and (fast_shell(scan, facts, self.scan_bytes) if facts is not None else self._shell(low))
        ):
            return Verdict(Outcome.OK_EMPTY, status, "js-shell", browser_fixable=True)
        verdict = _OK_EMPTY.get(status)
        if verdict is None:
            verdict = Verdict(Outcome.OK_EMPTY, status)
            if len(_OK_EMPTY) < 1024:
                _OK_EMPTY[status] = verdict
        return verdict

    def _parked(
        self, hdrs: Mapping[str, str], scan: BodyScan, url: str, low: bytes | None, found: set[bytes] | None
    ) -> str | None:
        """The parking service the home page ``url`` belongs to, or ``None`` (README, "Parked
        domains"). Pages off the site root are never called parked.

        ``found``: the scanner's literals in the view when a pass over it already ran. Only
        pages that hold a parking literal (or header) are read further: whether the URL is the
        site root, then one lowercase copy, the title, the visible text up to
        :data:`LANDER_MAX_TEXT`."""
        body = scan.body
        try:
            if "html" not in (hdrs.get("content-type") or "html").lower():
                return None
            if not hdrs.keys().isdisjoint(PARKING_HEADERS):
                return "lander" if is_site_root(url) else None
            if found is not None:
                hits = found & self._parking_subset.literals
                if not hits or not is_site_root(url):
                    return None
            else:
                if not is_site_root(url):
                    return None
                low = scan.low if low is None else low
                if not self._parking.may_fire(low, len(body)):
                    return None  # (saves the pure engine's scan on most pages)
                hits = self.scanner.scan(low, self._parking_subset)
                if not hits:
                    return None
            low = scan.low if low is None else low
            return self._parking.service(low, hits, len(body))
        except Exception:  # a classifier never breaks a crawl
            return None

    @staticmethod
    def _shell(low: bytes | None) -> bool:
        """A script-only shell: a ``<script`` and (almost) no visible text."""
        return low is not None and b"<script" in low and visible_text_below(low, JS_SHELL_MIN_TEXT)

    def _try_fast(self, status: int, hdrs: Mapping[str, str], scan: BodyScan) -> tuple[Facts | None, set[bytes] | None]:
        """The fast pass's facts and literals (:meth:`FastPass.facts`), ``(None, None)`` without it."""
        fast = self._fast
        if fast is None:
            return None, None
        try:
            return fast.facts(status, hdrs, scan)
        except Exception:  # never expected (a pattern hyperscan refuses?): the full path, from now on
            self._fast = None
            return None, None

    # ---------------------------------------------------------- failures and certificates

    def failure(self, exc: BaseException) -> Verdict:
        """Classify a download exception (or a Twisted ``Failure`` wrapping one): see
        :func:`~scrapy_domainstate.detect.failures.failure_verdict`."""
        return failure_verdict(exc)

    def certificate(self, cert: Any, hostname: str, now: float) -> Verdict | None:
        """A ``dead`` verdict for an invalid server certificate (``response.certificate``), else
        ``None``: see :func:`~scrapy_domainstate.detect.certs.certificate_verdict`."""
        return certificate_verdict(cert, hostname, now)
