"""The classifier's hyperscan engine: one case-insensitive pass over a response's raw bytes
(every literal of the markers and cues, the longest word of each verification phrase, the first
``<title``, ``<script`` and ``<body``, and the contact scan's places) that tells the usual page
(no marker, no cue, no rule that could fire) without a lowercase copy or a visible-text pass.

When the pass cannot rule every anti-bot rule out, the classifier's full path answers instead,
reading the literals the pass found; both give the same verdicts (``tests/unit/
test_scan_equivalence.py``). Without hyperscan there is no pass: the full path reads every page
with the pure literal scan (:class:`~scrapy_domainstate.detect.scan.LiteralScanner`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from scrapy_domainstate.detect import contacts
from scrapy_domainstate.detect.compiled import Plan
from scrapy_domainstate.detect.headers import MarkerHeaders, header_fires
from scrapy_domainstate.detect.markers import BLOCK_STATUSES, SMALL_PAGE
from scrapy_domainstate.detect.page import INTERSTITIAL_MAX_LINKS, JS_SHELL_MIN_TEXT, is_binary, visible_text_below
from scrapy_domainstate.detect.scan import BodyScan, LiteralScanner, PatternScanner, pcre_literal, title_of

__all__ = ["Facts", "FastPass", "fast_shell"]

#: Where the fast path looks for the first of each (title, js-shell check).
_FAST_PROBES = (b"<title", b"<script", b"<body")
#: Bytes at the end of a body checked for the fast path's probes (longer than any).
_PROBE_TAIL = 64
#: Markup lowercased for the fast js-shell check before the whole view is.
_SHELL_WINDOW = 4096


@dataclass(frozen=True, slots=True)
class Facts:
    """What the fast path saw: offsets of the first ``<script`` and ``<body`` (``-1``: none)."""

    script: int
    body: int


class FastPass:
    """The pass of one classifier: its databases (one for small pages, one for the others,
    built at first use) and what it checks the matches against (``plan``: the classifier's
    marker plans; ``headers``: its marker headers; the verification phrases and cue literals).
    Thread-safe (the memos' racing writers store the same answer).
    """

    def __init__(
        self,
        scanner: LiteralScanner,
        scan_bytes: int,
        plan: Callable[[int, bool, bool], Plan],
        headers: MarkerHeaders,
        phrases: Iterable[bytes],
        cue_literals: frozenset[bytes],
        contact_places: bool,
    ) -> None:
        self.scanner = scanner
        self.scan_bytes = scan_bytes
        self._plan = plan
        self.headers = headers
        phrases = tuple(phrases)
        #: The longest word of each phrase: a phrase is in the title or the visible text only
        #: if that word is in the view.
        self._phrase_words = tuple(sorted({max(p.split(b" "), key=len) for p in phrases}))
        self._phrase_end = re.compile(b"(?:" + b"|".join(re.escape(w) for w in self._phrase_words) + rb")\Z")
        self._title_phrase = re.compile(b"|".join(re.escape(p) for p in phrases))
        self._title_regexes: dict[tuple[int, ...], re.Pattern[bytes]] = {}
        self._cue_literals = cue_literals
        #: The pass carries the contact scan's patterns (and leaves their places in the
        #: :class:`BodyScan`) only where a contact scan follows it.
        self.contact_places = contact_places
        #: (small page?, with the contact patterns?) -> its database
        self.scanners: dict[tuple[bool, bool], PatternScanner] = {}
        self._links: PatternScanner | None = None

    def prepare(self) -> None:
        """Build (or fetch from the process's cache) the databases now, and hyperscan's scratch
        space (allocated at the first scan)."""
        page = b"<html><head><title>t</title></head><body><a href=/>a</a></body></html>"
        for small in (True, False):
            for with_contacts in {self.contact_places, False}:
                self.pattern_scanner(small, with_contacts).scan(page)
        self.many_links(page)

    def pattern_scanner(self, small: bool, with_contacts: bool | None = None) -> PatternScanner:
        """The pass's database for a small page (with the phrase words) or another, with the
        contact scan's patterns or without (``None``: with them when a contact scan follows
        the pass, :attr:`contact_places`), built at its first use (or fetched from the
        process's cache)."""
        if with_contacts is None:
            with_contacts = self.contact_places
        scanner = self.scanners.get((small, with_contacts))
        if scanner is None:
            patterns: list[tuple[bytes, bool] | tuple[bytes, bool, bool]] = [
                (pcre_literal(lit), True) for lit in self.scanner.literals
            ]
            patterns += [(pcre_literal(probe), True, True) for probe in _FAST_PROBES]
            if with_contacts:
                patterns += contacts.CONTACT_PATTERNS  # the contact scan of the same body reads these
            if small:  # a verification phrase can only be in the text when its longest word is
                patterns += [(pcre_literal(word), True, True) for word in self._phrase_words]
            scanner = PatternScanner(patterns)
            self.scanners[small, with_contacts] = scanner
        return scanner

    def facts(self, status: int, hdrs: Mapping[str, str], scan: BodyScan) -> tuple[Facts | None, set[bytes] | None]:
        """:class:`Facts` when the pass shows that no anti-bot rule can fire on this response
        (else ``None``: the full path answers), and the literals the pass found, if it ran.
        Leaves the contact places it found in ``scan``. May raise (a pattern hyperscan
        refuses?): the classifier then takes the full path, from then on."""
        # Error statuses (where walls answer, and whose pages are never scanned for contacts)
        # go the full way at once: the fast pass would mostly find a marker and decline.
        body = scan.body
        if type(body) is not bytes or status >= 400:
            return None, None
        return self._fast_facts(status, hdrs, body, scan)

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

    def many_links(self, body: bytes) -> bool:
        """``links_at_least(low, INTERSTITIAL_MAX_LINKS)`` on the view, by a pass that stops there."""
        if self._links is None:
            self._links = PatternScanner([(b"<a ", True)], max_matches=INTERSTITIAL_MAX_LINKS - 1)
        return self._links.scan(memoryview(body)[: self.scan_bytes]) is None

    def _sort_matches(
        self, matches: list[tuple[int, int]], scan: BodyScan, with_contacts: bool
    ) -> tuple[set[bytes], list[int]]:
        """The literals found, the end of the first match of each probe (the last entry: of any
        phrase word; ``-1``: none); the contact places (``with_contacts``: the database had
        their patterns) go to ``scan.places``."""
        literals = self.scanner.literals
        count = len(literals)
        found: set[bytes] = set()
        last = len(_FAST_PROBES)
        first = [-1] * (last + 1)
        places: list[tuple[int, int]] = []
        base = count + last
        words = base + (len(contacts.CONTACT_PATTERNS) if with_contacts else 0)
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
        if with_contacts:
            scan.places = places
        return found, first

    def _fast_plans(self, status: int, hdrs: Mapping[str, str], body: bytes) -> tuple[Plan, ...] | None:
        """The plans the classifier's ``_antibot`` may use for ``body`` when the fast path can
        answer for them."""
        size = len(body)
        if not size or is_binary(hdrs.get("content-type", ""), body[:1024].lower()):
            return None
        longer = size > self.scan_bytes
        # A body longer than the view is read further (Classifier._extend) unless its view has 10 links.
        if longer and not self.many_links(body):
            return None
        small = size <= SMALL_PAGE
        # A long page is read with the small-page markers too when it shows little (Shape):
        # answer only when neither set fires (not when its view has 10 links: never small).
        plans: tuple[Plan, ...] = (self._plan(status, small, True),)
        if not small and not longer and status not in BLOCK_STATUSES:
            plans += (self._plan(status, True, True),)
        for plan in plans:  # (a loop, not any() over a generator: the hot path)
            if plan.has_status:
                return None
        return plans

    def _headers_quiet(self, plans: tuple[Plan, ...], hdrs: Mapping[str, str], body: bytes) -> bool:
        """Whether the marker headers (a CDN's on every page) leave the answer to the body: no
        header marker fires, and a long page (which then goes on to the structural check unless
        it has 10 links) has 10 links."""
        if self.headers.quiet(hdrs):
            return True
        for plan in plans:
            if any(c.kind == "header" and header_fires(c, hdrs) for c in plan.headless):
                return False
        return len(plans) == 1 or self.many_links(body)

    def _fast_facts(
        self, status: int, hdrs: Mapping[str, str], body: bytes, scan: BodyScan
    ) -> tuple[Facts | None, set[bytes] | None]:
        """The facts the response checks need, when one pass over the raw bytes shows that no
        anti-bot rule can fire (the classifier's ``_antibot`` would answer ``None``); else
        ``None`` (the full path answers), with the literals the pass found in the whole body, if
        it ran (the full path then reads them rather than scanning again). Bodies up to
        ``body_scan_bytes`` only."""
        plans = self._fast_plans(status, hdrs, body)
        if plans is None:
            return None, None
        small = len(body) <= SMALL_PAGE
        n = min(len(body), self.scan_bytes)
        with_contacts = self.contact_places and scan.contacts
        matches = self.pattern_scanner(small, with_contacts).scan(body if n == len(body) else memoryview(body)[:n])
        if matches is None:
            return None, None
        found, first = self._sort_matches(matches, scan, with_contacts)
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
        # Classifier._structural on a long page that shows little: a verification phrase in its title.
        if not small and title and self._title_phrase.search(title) is not None and not self.many_links(body):
            return None, found
        # Classifier._structural (small pages): no cue literal, no phrase that could be in the title or text.
        if small and (
            first[last] >= 0 or not found.isdisjoint(self._cue_literals) or self._phrase_end.search(tail) is not None
        ):
            return None, found
        if not self._headers_quiet(plans, hdrs, body):
            return None, found
        script, start = first[1], first[2]
        return Facts(script - 7 if script >= 0 else -1, start - 5 if start >= 0 else -1), found


def fast_shell(scan: BodyScan, facts: Facts, scan_bytes: int) -> bool:
    """Whether the page is a script-only shell (a ``<script`` and fewer than
    :data:`~scrapy_domainstate.detect.page.JS_SHELL_MIN_TEXT` visible characters), from the
    pass's facts: ``visible_text_below`` on a lowercased window from the first ``<body`` on,
    the whole view only when the window says "below"."""
    body = scan.body
    if facts.script < 0:
        return False
    start = max(facts.body, 0)
    n = min(len(body), scan_bytes)
    end = start + _SHELL_WINDOW
    if end < n:
        # "Not below" is final: the window's text is a prefix of the view's (its last word
        # or tag may be cut short, which never adds text).
        if not visible_text_below(body[start:end].lower(), JS_SHELL_MIN_TEXT):
            return False
        return visible_text_below(scan.low, JS_SHELL_MIN_TEXT)
    return visible_text_below(body[start:n].lower(), JS_SHELL_MIN_TEXT)
