"""Turn HTTP answers, download failures and TLS certificates into outcomes.

Pure: no Scrapy engine, no I/O, no clock (``now`` is passed in). The failure mapping
imports Scrapy's and Twisted's exception classes lazily, so importing this module stays
cheap. Every public method returns a :class:`Verdict` (or ``None``) and never raises.

The anti-bot check (:meth:`Classifier.antibot`) runs before any success is counted:
challenges also arrive as 2xx (AWS WAF answers a challenge with 202), and a challenge
counted as ``ok-empty`` would make a site ``cold`` for months. It looks at the status, a
few headers and the lowercased first ``DOMAINSTATE_BODY_SCAN_BYTES`` of the body (read
further, scripts and styles skipped, when that prefix shows no content), in three layers:
the vendor markers of :mod:`scrapy_domainstate.detect.markers` (hard blocks first), then the
structure of an interstitial (little text, few links, and a verification phrase, a captcha
widget or a lone challenge script), always soft. All literals come from one scan
(:class:`~scrapy_domainstate.detect.scan.LiteralScanner`: hyperscan when installed).

With hyperscan, :meth:`Classifier.response` first makes one case-insensitive pass over the raw
bytes (markers, cues, the longest word of each verification phrase, the first ``<title``,
``<script`` and ``<body``, and the contact scan's places): when it shows that no rule can fire,
the answer comes from it without a lowercase copy or a visible-text pass; otherwise the full
path runs (with the literals the pass found). Both engines give the same verdicts.

The body methods take the body as bytes or as a :class:`~scrapy_domainstate.detect.scan.BodyScan`
(made once per response by the runtime): the classifier reads its lowercased view, and leaves
in it the contact places its pass found, for the contact scan that follows.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.keys import is_site_root
from scrapy_domainstate.core.record import Outcome
from scrapy_domainstate.core.wallrules import CLEAN
from scrapy_domainstate.detect import contacts
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
    Shape,
    is_binary,
    links_at_least,
    person_fields,
    visible_text_below,
)
from scrapy_domainstate.detect.scan import (
    BodyScan,
    LiteralScanner,
    PatternScanner,
    extended_view,
    pcre_literal,
    title_of,
    visible_text,
)
from scrapy_domainstate.detect.verdict import Verdict
from scrapy_domainstate.detect.wallrules import UserRules, user_rules

__all__ = ["EXTENDED_SCAN_CAP", "JS_SHELL_MAX_BYTES", "JS_SHELL_MIN_TEXT", "Classifier"]

#: Bodies at least this long are never called a script-only shell.
JS_SHELL_MAX_BYTES = 50_000
#: A shell shows fewer visible characters than this outside ``<script>``/``<style>``.
JS_SHELL_MIN_TEXT = 50
#: A long page whose scanned prefix shows no content is read up to this many bytes.
EXTENDED_SCAN_CAP = 1 << 20
#: A verification phrase in the text (not the title) counts on pages with less text than this.
PHRASE_MAX_TEXT = 700
#: status -> the plain ``ok-empty`` verdict (immutable, so shared).
_OK_EMPTY: dict[int, Verdict] = {}
#: Where the fast path looks for the first of each (title, js-shell check).
_FAST_PROBES = (b"<title", b"<script", b"<body")
#: Bytes at the end of a body checked for the fast path's probes (longer than any).
_PROBE_TAIL = 64
#: Markup lowercased for the fast js-shell check before the whole view is.
_SHELL_WINDOW = 4096


@dataclass(frozen=True, slots=True)
class _Facts:
    """What the fast path saw: offsets of the first ``<script`` and ``<body`` (``-1``: none)."""

    script: int
    body: int


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
        #: The longest word of each phrase: a phrase is in the title or the visible text only
        #: if that word is in the view.
        self._phrase_words = tuple(sorted({max(p.split(b" "), key=len) for p in self._phrases}))
        self._phrase_end = re.compile(b"(?:" + b"|".join(re.escape(w) for w in self._phrase_words) + rb")\Z")
        self._title_phrase = re.compile(b"|".join(re.escape(p) for p in self._phrases))
        self._title_regexes: dict[tuple[int, ...], re.Pattern[bytes]] = {}
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
        # With hyperscan, the usual page (no marker, no cue) is told from one case-insensitive
        # pass over its raw bytes (see _fast_facts); built at first use.
        self._fast: dict[bool, PatternScanner] | None = {} if self.scanner.engine == "hyperscan" else None
        self._links: PatternScanner | None = None
        #: The user's own rules (``DOMAINSTATE_WALL_RULES``, ``DOMAINSTATE_WALL_PREDICATE``), or
        #: ``None``: consulted by the public methods around the built-in rules (:meth:`_ruled`).
        self.rules: UserRules | None = user_rules(self.config)

        #: The pass carries the contact scan's patterns only where a contact scan follows it:
        #: the default outcome source (``contacts``); ``items`` and a callable never read them.
        self.contact_places = self.config.outcome == "contacts"

    def prepare(self) -> None:
        """Build (or fetch from the process's cache) the scan databases now, at start-up, rather
        than in the first responses' calls."""
        if self._fast is not None:
            page = b"<html><head><title>t</title></head><body><a href=/>a</a></body></html>"
            for small in (True, False):
                self._fast_scanner(small).scan(page)  # hyperscan's scratch space, allocated at the first scan
            self._many_links(page)

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
        :data:`JS_SHELL_MIN_TEXT` visible characters) is ``ok-empty`` with ``'js-shell'`` and
        ``browser_fixable=True``: a browser would render it. A 2xx home page (``url`` is the
        site root, whatever ``is_root`` says) of at most :data:`~scrapy_domainstate.detect.markers.PARKED_MAX_BYTES` that is a parking or for-sale
        page is ``parked`` with ``'parked:<service>'`` (never useful, never sent to a browser).
        """
        scan = self._body_scan(body)
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
            and (self._shell_fast(scan, facts) if facts is not None else self._shell(low))
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
            if any(name in hdrs for name in PARKING_HEADERS):
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

    def _shell_fast(self, scan: BodyScan, facts: _Facts) -> bool:
        """:meth:`_shell` from the fast facts: ``visible_text_below`` on a lowercased window
        from the first ``<body`` on, the whole view only when the window says "below"."""
        body = scan.body
        if facts.script < 0:
            return False
        start = max(facts.body, 0)
        n = min(len(body), self.scan_bytes)
        end = start + _SHELL_WINDOW
        if end < n:
            # "Not below" is final: the window's text is a prefix of the view's (its last word
            # or tag may be cut short, which never adds text).
            if not visible_text_below(body[start:end].lower(), JS_SHELL_MIN_TEXT):
                return False
            return visible_text_below(scan.low, JS_SHELL_MIN_TEXT)
        return visible_text_below(body[start:n].lower(), JS_SHELL_MIN_TEXT)

    def _fast_scanner(self, small: bool) -> PatternScanner:
        scanner = self._fast[small] if self._fast is not None and small in self._fast else None
        if scanner is None:
            patterns: list[tuple[bytes, bool] | tuple[bytes, bool, bool]] = [
                (pcre_literal(lit), True) for lit in self.scanner.literals
            ]
            patterns += [(pcre_literal(probe), True, True) for probe in _FAST_PROBES]
            if self.contact_places:
                patterns += contacts.CONTACT_PATTERNS  # the contact scan of the same body reads these
            if small:  # a verification phrase can only be in the text when its longest word is
                patterns += [(pcre_literal(word), True, True) for word in self._phrase_words]
            scanner = PatternScanner(patterns)
            assert self._fast is not None
            self._fast[small] = scanner
        return scanner

    def _try_fast(
        self, status: int, hdrs: Mapping[str, str], scan: BodyScan
    ) -> tuple[_Facts | None, set[bytes] | None]:
        # Error statuses (where walls answer, and whose pages are never scanned for contacts)
        # go the full way at once: the fast pass would mostly find a marker and decline.
        body = scan.body
        if type(body) is not bytes or status >= 400:
            return None, None
        try:
            return self._fast_facts(status, hdrs, body, scan)
        except Exception:  # never expected (a pattern hyperscan refuses?): the full path, from now on
            self._fast = None
            return None, None

    def _title_hit(self, plans: tuple[Plan, ...], title: bytes) -> bool:
        """Whether ``title`` holds a title pattern of one of ``plans`` (one regex search)."""
        key = tuple(id(plan) for plan in plans)
        regex = self._title_regexes.get(key)
        if regex is None:
            patterns = sorted({p for plan in plans for p in plan.title_patterns})
            regex = re.compile(b"|".join(re.escape(p) for p in patterns) if patterns else b"(?!)")
            if len(self._title_regexes) < 4096:
                self._title_regexes[key] = regex
        return regex.search(title) is not None

    def _many_links(self, body: bytes) -> bool:
        """``links_at_least(low, INTERSTITIAL_MAX_LINKS)`` on the view, by a pass that stops there."""
        if self._links is None:
            self._links = PatternScanner([(b"<a ", True)], max_matches=INTERSTITIAL_MAX_LINKS - 1)
        return self._links.scan(memoryview(body)[: self.scan_bytes]) is None

    def _sort_matches(self, matches: list[tuple[int, int]], scan: BodyScan) -> tuple[set[bytes], list[int]]:
        """The literals found, the end of the first match of each probe (the last entry: of any
        phrase word; ``-1``: none); the contact places go to ``scan.places``."""
        literals = self.scanner.literals
        count = len(literals)
        found: set[bytes] = set()
        last = len(_FAST_PROBES)
        first = [-1] * (last + 1)
        places: list[tuple[int, int]] = []
        base = count + last
        words = base + (len(contacts.CONTACT_PATTERNS) if self.contact_places else 0)
        for ident, end in matches:
            if ident < count:
                found.add(literals[ident])
            elif ident < base:
                if first[ident - count] < 0:
                    first[ident - count] = end
            elif ident < words:
                places.append((ident - base, end))
            elif first[last] < 0:
                first[last] = end
        if self.contact_places:
            scan.places = places
        return found, first

    def _fast_plans(self, status: int, hdrs: Mapping[str, str], body: bytes) -> tuple[Plan, ...] | None:
        """The plans ``_antibot`` may use for ``body`` when the fast path can answer for them."""
        size = len(body)
        if not size or is_binary(hdrs.get("content-type", ""), body[:1024].lower()):
            return None
        longer = size > self.scan_bytes
        # A body longer than the view is read further (_extend) unless its view has 10 links.
        if longer and not self._many_links(body):
            return None
        small = size <= SMALL_PAGE
        # A long page is read with the small-page markers too when it shows little (Shape):
        # answer only when neither set fires (not when its view has 10 links: never small).
        plans: tuple[Plan, ...] = (self._plan(status, small, True),)
        if not small and not longer and status not in BLOCK_STATUSES:
            plans += (self._plan(status, True, True),)
        return None if any(plan.has_status for plan in plans) else plans

    def _headers_quiet(self, plans: tuple[Plan, ...], hdrs: Mapping[str, str], body: bytes) -> bool:
        """Whether the marker headers (a CDN's on every page) leave the answer to the body: no
        header marker fires, and a long page (which then goes on to the structural check unless
        it has 10 links) has 10 links."""
        if self.headers.quiet(hdrs):
            return True
        for plan in plans:
            if any(c.kind == "header" and header_fires(c, hdrs) for c in plan.headless):
                return False
        return len(plans) == 1 or self._many_links(body)

    def _fast_facts(
        self, status: int, hdrs: Mapping[str, str], body: bytes, scan: BodyScan
    ) -> tuple[_Facts | None, set[bytes] | None]:
        """The facts the response checks need, when one pass over the raw bytes shows that no
        anti-bot rule can fire (``_antibot`` would answer ``None``); else ``None`` (the full path
        answers), with the literals the pass found in the whole body, if it ran (the full path
        then reads them rather than scanning again). Bodies up to ``body_scan_bytes`` only."""
        plans = self._fast_plans(status, hdrs, body)
        if plans is None:
            return None, None
        small = len(body) <= SMALL_PAGE
        n = min(len(body), self.scan_bytes)
        matches = self._fast_scanner(small).scan(body if n == len(body) else memoryview(body)[:n])
        if matches is None:
            return None, None
        found, first = self._sort_matches(matches, scan)
        last = len(_FAST_PROBES)
        # Hyperscan's single-match mode may miss a match that ends the buffer: check there.
        tail = body[max(0, n - _PROBE_TAIL) : n].lower()
        for k, probe in enumerate(_FAST_PROBES):
            if first[k] < 0 and tail.endswith(probe):
                first[k] = n
        if found and any(not found.isdisjoint(plan.literals.literals) for plan in plans):
            return None, found
        title_end = first[0]
        title = title_of(body[title_end - 6 : min(n, title_end + 1300)].lower()) if title_end >= 0 else b""
        if title and self._title_hit(plans, title):
            return None, found
        # _structural on a long page that shows little: a verification phrase in its title.
        if not small and title and self._title_phrase.search(title) is not None and not self._many_links(body):
            return None, found
        # _structural (small pages): no cue literal, no phrase that could be in the title or text.
        if small and (
            first[last] >= 0 or not found.isdisjoint(self._cue_literals) or self._phrase_end.search(tail) is not None
        ):
            return None, found
        if not self._headers_quiet(plans, hdrs, body):
            return None, found
        script, start = first[1], first[2]
        return _Facts(script - 7 if script >= 0 else -1, start - 5 if start >= 0 else -1), found

    # ---------------------------------------------------------- failures and certificates

    def failure(self, exc: BaseException) -> Verdict:
        """Classify a download exception (or a Twisted ``Failure`` wrapping one): see
        :func:`~scrapy_domainstate.detect.failures.failure_verdict`."""
        return failure_verdict(exc)

    def certificate(self, cert: Any, hostname: str, now: float) -> Verdict | None:
        """A ``dead`` verdict for an invalid server certificate (``response.certificate``), else
        ``None``: see :func:`~scrapy_domainstate.detect.certs.certificate_verdict`."""
        return certificate_verdict(cert, hostname, now)
