"""Bounded, shared views of a response body and one-pass literal scanning.

Pure: bytes in, no I/O. Three jobs, used by the classifier and the contact scan:

- :class:`BodyScan`: one response body as the classifier and the contact scan read it, made
  once per response and handed to both: its lowercased first ``limit`` bytes (:func:`lowered`,
  made once, when first read) and the places of the contact patterns the classifier's one
  pass found (so the contact scan does not look for them again);
- :class:`LiteralScanner`: which of a fixed set of lowercase literals occur in a view. With the
  optional ``hyperscan`` package it is one automaton pass; without it, a few ``bytes.find``
  passes over shared anchors (C-speed, no per-byte Python loop). Both give the same answer;
- :class:`PatternScanner` (hyperscan only): where a few patterns match in the raw bytes, one
  case-insensitive pass for the classifier's fast path and the contact scan together;
- HTML structure helpers: the page title, the visible text of small pages, and the markup of a
  long page past the scanned prefix with ``<script>``/``<style>`` contents skipped (bounded).
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections import Counter
from collections.abc import Iterable
from typing import Any

__all__ = [
    "ENGINE_ENV",
    "HAVE_HYPERSCAN",
    "BodyScan",
    "LiteralScanner",
    "PatternScanner",
    "default_engine",
    "extended_view",
    "lowered",
    "pcre_literal",
    "title_of",
    "visible_text",
]

_hs: Any
try:  # optional fast engine
    import hyperscan

    _hs = hyperscan
except ImportError:  # pragma: no cover - depends on the machine
    _hs = None

#: Whether the optional ``hyperscan`` engine is importable here.
HAVE_HYPERSCAN = _hs is not None

#: The environment variable that forces the engine ``'auto'`` picks (``pure`` or ``hyperscan``).
ENGINE_ENV = "DOMAINSTATE_SCAN_ENGINE"
_ENGINES = ("auto", "hyperscan", "pure")


def default_engine() -> str:
    """The engine ``'auto'`` resolves to: :data:`ENGINE_ENV` when set (``pure`` or
    ``hyperscan``; the latter only when importable), else hyperscan when importable."""
    forced = os.environ.get(ENGINE_ENV, "").strip().lower()
    if forced not in ("", *_ENGINES):
        raise ValueError(f"{ENGINE_ENV} must be 'auto', 'hyperscan' or 'pure', got {forced!r}")
    if forced == "pure" or _hs is None:
        if forced == "hyperscan":
            raise ValueError(f"{ENGINE_ENV}=hyperscan needs the hyperscan package (pip install hyperscan)")
        return "pure"
    return "hyperscan"


# ------------------------------------------------------------------ compiled once per process

#: Compiled hyperscan databases and pure anchor groups, by their exact inputs: every
#: classifier of the process (one per crawler) with the same pattern set shares one.
#: Bounded: a process builds a handful (one per distinct marker configuration).
_SHARED: dict[tuple[Any, ...], Any] = {}
_SHARED_MAX = 64
_SHARED_LOCK = threading.Lock()


def _shared(key: tuple[Any, ...], build: Any) -> Any:
    """``build()``, once per ``key`` in this process (kept while fewer than :data:`_SHARED_MAX`)."""
    with _SHARED_LOCK:
        found = _SHARED.get(key)
        if found is None:
            found = build()
            if len(_SHARED) < _SHARED_MAX:
                _SHARED[key] = found
        return found


def _compile(expressions: list[bytes], flags: list[int]) -> Any:
    """A block-mode hyperscan database of ``expressions`` (ids are their indexes), shared."""

    def build() -> Any:
        assert _hs is not None
        db = _hs.Database(mode=_hs.HS_MODE_BLOCK)
        db.compile(expressions=expressions, ids=list(range(len(expressions))), elements=len(expressions), flags=flags)
        return db

    return _shared(("hs", tuple(expressions), tuple(flags)), build)


def shared_anchors(literals: Iterable[bytes]) -> Groups:
    """:func:`choose_anchors` of ``literals``, computed once per process per literal set."""
    chosen = frozenset(literals)
    return _shared(("anchors", chosen), lambda: choose_anchors(chosen))


# ------------------------------------------------------------------ one response body


def _prefix(body: Any, limit: int) -> bytes:
    if not body:
        return b""
    if isinstance(body, str):
        return body[:limit].encode("utf-8", "replace")[:limit]
    if isinstance(body, bytes):
        return body[:limit]
    try:
        return bytes(body[:limit])
    except TypeError:
        return b""


def lowered(body: Any, limit: int) -> bytes:
    """``body[:limit].lower()`` as bytes (``str`` bodies are UTF-8 encoded first; anything
    unreadable gives ``b''``). A new copy on every call: :attr:`BodyScan.low` makes it once
    per response."""
    return _prefix(body, limit).lower()


class BodyScan:
    """One response body as the detect floor reads it: made once per response (by the runtime,
    or by the classifier and the contact scan themselves when given plain bytes) and handed to
    the classifier and then to the contact scan.

    ``body``: the body as received (bytes, or ``str``, ``bytearray``, ...); ``limit``: how much
    of it is read (``DOMAINSTATE_BODY_SCAN_BYTES``). :attr:`low` is the lowercased view,
    made at its first read and kept. :attr:`places`: the ``(pattern index, end)`` matches of
    :data:`~scrapy_domainstate.detect.contacts.CONTACT_PATTERNS` in
    ``body[:min(len(body), limit)]``, when the classifier's pass looked for them (else
    ``None``): the contact scan then reads them instead of scanning again.
    """

    __slots__ = ("_low", "body", "contacts", "limit", "places")

    def __init__(self, body: Any, limit: int, contacts: bool = True) -> None:
        self.body = body
        self.limit = limit
        #: whether a contact scan reads this body after the classifier (``False``: a friendly
        #: domain's page, whose usefulness moves no rule; the classifier's pass then carries
        #: no contact patterns)
        self.contacts = contacts
        self._low: bytes | None = None
        self.places: list[tuple[int, int]] | None = None

    @property
    def low(self) -> bytes:
        """``body[:limit].lower()`` (:func:`lowered`), made once."""
        low = self._low
        if low is None:
            low = self._low = _prefix(self.body, self.limit).lower()
        return low

    def __repr__(self) -> str:
        size = len(self.body) if isinstance(self.body, (bytes, bytearray, str)) else "?"
        return f"<BodyScan {size} bytes, limit {self.limit}>"


# ------------------------------------------------------------------ literal scanning

_ANCHOR_MIN = 6
_ANCHOR_MAX = 24
_MAX_ANCHOR_HITS = 64

Groups = tuple[tuple[bytes, tuple[tuple[bytes, int], ...]], ...]
_COMMON_WORDS = (
    b"captcha",
    b"access",
    b"request",
    b"browser",
    b"check",
    b"you ",
    b" you",
    b"challenge",
    b"block",
    b"action",
    b"reference",
    b"support",
    b"please",
    b"human",
    b"security",
    b" the ",
    b"the ",
)


def choose_anchors(literals: Iterable[bytes]) -> Groups:
    """Group literals under few shared substrings ("anchors"), greedily.

    The pure scan then runs one ``bytes.find`` pass per anchor instead of one per literal: at
    each anchor hit, the literals of its group are checked in place with ``startswith``. Each
    literal is checked at the offset of the anchor's *first* occurrence in it, which finds every
    occurrence of the literal (each one contains that occurrence of the anchor).
    """
    remaining = set(literals)
    # Each literal's candidate anchors, and whether each candidate holds a common word, are
    # worked out once (not again on every round of the greedy choice).
    subs_of = {lit: _anchor_candidates(lit) for lit in remaining}
    common = {sub: any(w in sub for w in _COMMON_WORDS) for subs in subs_of.values() for sub in subs}
    groups = []
    while remaining:
        counts: Counter[bytes] = Counter()
        for lit in remaining:
            counts.update(subs_of[lit])
        # Substrings that ordinary pages are full of make slow anchors (a find pass that
        # stops every few hundred bytes): a literal keeps them only when it has nothing else.
        rare = [a for a in counts if not common[a]] or list(counts)
        best = max(rare, key=lambda s: (counts[s], len(s), s))
        members = sorted(lit for lit in remaining if best in lit)
        groups.append((best, tuple((lit, lit.index(best)) for lit in members)))
        remaining.difference_update(members)
    return tuple(groups)


def _anchor_candidates(lit: bytes) -> frozenset[bytes]:
    """The substrings of ``lit`` that may anchor it (``lit`` itself when it is short)."""
    if len(lit) <= _ANCHOR_MIN:
        return frozenset((lit,))
    return frozenset(
        lit[i : i + size]
        for size in range(_ANCHOR_MIN, min(len(lit), _ANCHOR_MAX) + 1)
        for i in range(len(lit) - size + 1)
    )


def scan_groups(low: bytes, groups: Groups) -> set[bytes]:
    """The literals of ``groups`` present in ``low``: one ``find`` pass per anchor."""
    found: set[bytes] = set()
    find = low.find
    startswith = low.startswith
    for anchor, members in groups:
        pos = find(anchor)
        if pos < 0:
            continue
        if len(members) == 1 and members[0][0] == anchor:
            found.add(anchor)
            continue
        pending = members
        hits = 0
        while pos >= 0 and pending:
            hits += 1
            if hits > _MAX_ANCHOR_HITS:  # a common anchor: check the rest directly
                found.update(lit for lit, _ in pending if lit in low)
                break
            still = []
            for lit, off in pending:
                if off <= pos and startswith(lit, pos - off):
                    found.add(lit)
                else:
                    still.append((lit, off))
            pending = tuple(still)
            pos = find(anchor, pos + 1)
    return found


class LiteralScanner:
    """Which of ``literals`` (lowercase bytes) occur in a lowercase view.

    ``engine``: ``'auto'`` (hyperscan when importable, else pure), ``'hyperscan'`` or
    ``'pure'``. Thread-safe: hyperscan scratch space is allocated per call.
    """

    def __init__(self, literals: Iterable[bytes], engine: str = "auto") -> None:
        self.literals: tuple[bytes, ...] = tuple(sorted({bytes(lit) for lit in literals if lit}))
        if engine not in _ENGINES:
            raise ValueError(f"engine must be 'auto', 'hyperscan' or 'pure', got {engine!r}")
        if engine == "hyperscan" and _hs is None:
            raise ValueError("the 'hyperscan' engine needs the hyperscan package (pip install hyperscan)")
        if engine == "auto":
            engine = default_engine()
        use_hs = engine == "hyperscan" and bool(self.literals)
        self.engine = "hyperscan" if use_hs else "pure"
        # The pure scan's anchors: with hyperscan only needed when a page overflows the
        # automaton's match budget (rare), so they are chosen then, not at start-up.
        self._groups: Groups | None = None if use_hs else shared_anchors(self.literals)
        self._db: Any = None
        if use_hs:
            # Hyperscan reads PCRE syntax: every byte that is not a digit or a lowercase letter
            # is written as \\xHH, so a literal means exactly itself. Not HS_FLAG_SINGLEMATCH:
            # with it, hyperscan 0.9.1 misses some literals that share a prefix with another
            # (found by the engine-agreement test).
            escaped = [_pcre_literal(lit) for lit in self.literals]
            self._db = _compile(escaped, [0] * len(escaped))

    def _all_groups(self) -> Groups:
        if self._groups is None:
            self._groups = shared_anchors(self.literals)
        return self._groups

    def subset(self, literals: Iterable[bytes]) -> Subset:
        """A subset of this scanner's literals, prepared for :meth:`scan`."""
        chosen = frozenset(literals) & frozenset(self.literals)
        return Subset(chosen, shared_anchors(chosen) if self._db is None else ())

    def scan(self, low: bytes, subset: Subset | None = None) -> set[bytes]:
        """The literals (of ``subset``, or all) present in ``low``."""
        if not low or not self.literals:
            return set()
        if self._db is None:
            return scan_groups(low, subset.groups if subset is not None else self._all_groups())
        hits: list[int] = []
        with contextlib.suppress(_hs.ScanTerminated):  # the handler stopped it (see _collect)
            self._db.scan(low, match_event_handler=_collect, context=hits)
        if len(hits) >= _MAX_CALLBACKS:  # a page full of one literal: the bounded pure scan
            found = scan_groups(low, self._all_groups())
        else:
            literals = self.literals
            found = {literals[i] for i in hits}
        return found & subset.literals if subset is not None else found


class Subset:
    """Some of a :class:`LiteralScanner`'s literals (and, for the pure engine, their anchors)."""

    __slots__ = ("groups", "literals")

    def __init__(self, literals: frozenset[bytes], groups: Groups) -> None:
        self.literals = literals
        self.groups = groups


def _pcre_literal(lit: bytes) -> bytes:
    return b"".join(bytes((c,)) if 48 <= c <= 57 or 97 <= c <= 122 else b"\\x%02x" % c for c in lit)


#: Matches reported by hyperscan before a scan stops and the pure scan answers instead.
_MAX_CALLBACKS = 4096


def _collect(ident: int, start: int, end: int, flags: int, context: list[int]) -> bool:
    context.append(ident)
    return len(context) >= _MAX_CALLBACKS  # True stops the scan


class PatternScanner:
    """Where a few patterns (PCRE syntax) match in a buffer: one hyperscan pass, every match's
    end offset. Only with the hyperscan engine (:data:`HAVE_HYPERSCAN`): the caller keeps a
    plain path for when it is missing, and for when a page matches too often (``None``).

    ``patterns``: ``(expression, caseless)`` pairs, or ``(expression, caseless, first)``
    triples; a match is reported as ``(index, end)``. Case-insensitive patterns fold ASCII
    letters only, as ``bytes.lower`` does. A ``first`` pattern reports its first match only
    (hyperscan's single-match mode; hyperscan 0.9.1 may miss such a match when it ends at the
    very end of the buffer, so a caller checks that end itself).
    """

    def __init__(
        self, patterns: Iterable[tuple[bytes, bool] | tuple[bytes, bool, bool]], max_matches: int = 4096
    ) -> None:
        if _hs is None:
            raise ValueError("PatternScanner needs the hyperscan package (pip install hyperscan)")
        rows = [(p[0], p[1], len(p) > 2 and bool(p[2])) for p in patterns]
        self.max_matches = max_matches
        self._db = _compile(
            [expr for expr, _, _ in rows],
            [
                (_hs.HS_FLAG_CASELESS if caseless else 0) | (_hs.HS_FLAG_SINGLEMATCH if first else 0)
                for _, caseless, first in rows
            ],
        )

    def scan(self, data: Any) -> list[tuple[int, int]] | None:
        """``(pattern index, end offset)`` of every match in ``data`` (bytes or a memoryview),
        in order of end offset; ``None`` when there are more than ``max_matches``."""
        found: list[tuple[int, int]] = []
        with contextlib.suppress(_hs.ScanTerminated):
            self._db.scan(data, match_event_handler=self._on_match, context=found)
        return None if len(found) > self.max_matches else found

    def _on_match(self, ident: int, start: int, end: int, flags: int, context: list[tuple[int, int]]) -> bool:
        context.append((ident, end))
        return len(context) > self.max_matches  # True stops the scan


def pcre_literal(lit: bytes) -> bytes:
    """``lit`` as a hyperscan expression that matches exactly those bytes."""
    return _pcre_literal(lit)


# ------------------------------------------------------------------ HTML structure

_WS = b" \t\r\n\f\v"
_HIDDEN_ELEMENTS = (b"script", b"style", b"noscript", b"template")
_HIDDEN_FIRST = (b"s", b"n", b"t")


def title_of(low: bytes) -> bytes:
    """The text of the first ``<title>`` of a lowercase view, stripped (``b''`` when none)."""
    start = low.find(b"<title")
    if start < 0:
        return b""
    gt = low.find(b">", start, start + 200)
    if gt < 0:
        return b""
    end = low.find(b"</title", gt, gt + 1024)
    return low[gt + 1 : end if end >= 0 else gt + 256].strip()


def _hidden_element(name: bytes) -> bytes:
    # <name ... up to the first </name (unrolled: no lazy quantifier over a long script body),
    # then up to the first ">" after it; an element that never closes runs to the end.
    return name + rb"[^<]*(?:<(?!/" + name + rb")[^<]*)*(?:</" + name + rb"[^>]*(?:>|\Z)|\Z)"


#: One piece of markup that shows no text, as :func:`visible_text` reads it at a ``<``: a
#: comment (to the first ``-->`` after ``<!--``), a ``<title>`` or a ``<script>``/``<style>``/
#: ``<noscript>``/``<template>`` element (to the first ``>`` after the first closing tag), or
#: any other tag (to the first ``>``); each one that never ends runs to the end of the view.
#: The names match as prefixes (``<scripts`` too), as the tag loop always read them.
_MARKUP = (
    rb"<(?:!--[^-]*(?:-(?!->)[^-]*)*(?:-->|\Z)|"
    + b"|".join(_hidden_element(name) for name in (b"title", *_HIDDEN_ELEMENTS))
    + rb"|[^>]*(?:>|\Z))"
)
#: Text and markup, alternating: ``[text, markup, text, ..., markup, text]``.
_SPLIT_MARKUP = re.compile(b"(" + _MARKUP + b")").split
#: Markup read per window before the text is counted (then twice as much, and so on).
_TEXT_WINDOW = 1024


def visible_text(low: bytes, limit: int) -> bytes | None:
    """The visible text of a lowercase view, whitespace-collapsed, or ``None`` when it reaches
    ``limit`` characters (counting stops there: the cost is bounded by the markup read).

    Text inside ``<script>``, ``<style>``, ``<noscript>``, ``<template>``, comments and the
    ``<head>`` (the title included) does not count; reading starts at ``<body`` when there is one.
    """
    start = low.find(b"<body")
    if start < 0:
        if b"<head" in low and b"</head" not in low:
            return b""  # the view ends inside the head: nothing visible yet
        start = 0
    return _text_from(low, start, limit)


def _text_from(low: bytes, i: int, limit: int) -> bytes | None:
    """:func:`visible_text` from offset ``i`` on.

    The markup is cut out a window at a time by one regular expression (in C), and the words
    are counted after each window: the window's own text (its end may cut a word or a tag
    short, which then counts no more than it will) is enough to say ``None``. Reading goes on
    after the window's last complete text, or past its last tag when the window ends in it.
    """
    n = len(low)
    words: list[bytes] = []
    count = 0  # the length of b" ".join(words) + 1
    size = _TEXT_WINDOW + limit
    while True:
        end = i + size
        if end >= n:
            texts = _SPLIT_MARKUP(low[i:] if i else low)[::2]
            found = b" ".join(texts).split()
            count += sum(map(len, found)) + len(found)
            if count > limit:
                return None
            words += found
            return b" ".join(words)
        pieces = _SPLIT_MARKUP(low[i:end])
        last = pieces.pop()
        tail = last.split()
        if count + sum(map(len, tail)) + len(tail) > limit:
            return None
        size *= 2
        if not pieces:  # text only so far: read on with a larger window
            continue
        if last:  # the last tag ended in the window: read on at the text after it
            i = end - len(last)
        else:  # the window may end inside the last tag: skip it as the tag loop does
            tag = pieces.pop()
            i = _past_markup(low, end - len(tag), n)
        found = b" ".join(pieces[::2]).split()
        count += sum(map(len, found)) + len(found)
        if count > limit:
            return None
        words += found
        if i >= n:
            return b" ".join(words)


def _past_markup(low: bytes, lt: int, n: int) -> int:
    """Where reading resumes after the markup that starts at ``lt`` (``n``: nothing after it is
    read)."""
    if low.startswith(b"<!--", lt):
        close = low.find(b"-->", lt + 4)
        return n if close < 0 else close + 3
    if low[lt + 1 : lt + 2] in _HIDDEN_FIRST:  # <script, <style, <noscript, <template, <title
        lt = _past_hidden(low, lt, n)
        if lt < 0:
            return n
    gt = low.find(b">", lt)
    return n if gt < 0 else gt + 1


def _past_hidden(low: bytes, lt: int, n: int) -> int:
    """Where reading resumes after an element whose text is not shown (``lt`` itself when
    the tag at ``lt`` is not one), ``-1`` when it never closes."""
    if low.startswith(b"<title", lt):
        close = low.find(b"</title", lt)
        lt = n if close < 0 else close
    hidden = next((t for t in _HIDDEN_ELEMENTS if low.startswith(t, lt + 1)), None)
    if hidden is None:
        return lt
    return low.find(b"</" + hidden, lt)


def _inside(low: bytes) -> bytes | None:
    """The element (``script``/``style``) a lowercase prefix ends inside of, if any."""
    for name in (b"script", b"style"):
        if low.rfind(b"<" + name) > low.rfind(b"</" + name):
            return name
    return None


class _Lowered:
    """``body[start:end].lower()``, made a chunk at a time as reading needs it."""

    __slots__ = ("body", "data", "end", "start")

    def __init__(self, body: bytes, start: int, end: int) -> None:
        self.body = body
        self.start = start
        self.end = end
        self.data = b""

    def _grow(self) -> bool:
        have = len(self.data)
        if self.start + have >= self.end:
            return False
        step = max(65536, have)
        self.data += self.body[self.start + have : min(self.end, self.start + have + step)].lower()
        return True

    def find(self, needle: bytes, pos: int) -> int:
        """``data.find`` over the whole range, lowering more of it until found or exhausted;
        a hit is only returned with at least one byte after it loaded (for the next check)."""
        while True:
            at = self.data.find(needle, pos)
            if at >= 0 and (at + len(needle) < len(self.data) or not self._grow()):
                return at
            if at < 0 and not self._grow():
                return -1

    def upto(self, stop: int) -> bytes:
        """The lowercase bytes before ``stop`` (loading them as needed)."""
        while len(self.data) < stop and self._grow():
            pass
        return self.data

    def __len__(self) -> int:
        return self.end - self.start


def _find_open(rest: _Lowered, tag: bytes, pos: int) -> int:
    """The next ``<tag`` element start at or after ``pos`` (not ``<scripts``), ``-1`` when none."""
    at = rest.find(b"<" + tag, pos)
    while at >= 0 and rest.data[at + 1 + len(tag) : at + 2 + len(tag)].isalnum():
        at = rest.find(b"<" + tag, at + 1)
    return at


#: Markup read past the prefix before :func:`extended_view` checks whether the page shows content.
PROBE_BYTES = 8192


def extended_view(body: bytes, start: int, low_prefix: bytes, limit: int, cap: int) -> bytes:
    """Lowercased markup of ``body[start:cap]`` with ``<script>``/``<style>`` contents skipped,
    at most ``limit`` bytes of it (opening tags, and so their ``src`` attributes, are kept).

    ``low_prefix`` is the view that ends at ``start``: when it ends inside a script or style
    element, reading resumes after that element's end. Reading stops early, after
    :data:`PROBE_BYTES` of markup, when that markup shows content (10 links or 1,200 visible
    characters). The cost is bounded by ``cap``: the body is lowercased a chunk at a time, as
    far as reading goes (at most ``cap - start`` bytes), with a few ``find`` passes over it.
    """
    rest = _Lowered(body, start, min(len(body), cap))
    end = len(rest)
    pos = 0
    inside = _inside(low_prefix[-200_000:]) if low_prefix else None
    if inside is not None:
        close = rest.find(b"</" + inside, 0)
        pos = end if close < 0 else close
    pieces: list[bytes] = []
    total = 0
    # The next start of each element, found once and again only when reading passes it
    # (so each element kind costs one pass over ``rest`` in all).
    nxt = {b"script": _find_open(rest, b"script", pos), b"style": _find_open(rest, b"style", pos)}
    probe = PROBE_BYTES
    while pos < end and total < limit:
        if total >= probe:
            # Past the head: once the markup read shows a page's content (links, text), the
            # rest cannot make it an interstitial; stop there.
            probe = limit + 1
            seen = b"".join(pieces)
            if seen.count(b"<a ") >= 10 or visible_text(seen, 1200) is None:
                return seen
        for name, at in nxt.items():
            if 0 <= at < pos:
                nxt[name] = _find_open(rest, name, pos)
        live = [(at, name) for name, at in nxt.items() if at >= 0]
        at, tag = min(live) if live else (-1, b"")
        gt = rest.find(b">", at) if at >= 0 else -1
        stop = end if at < 0 or gt < 0 else gt + 1
        upto = min(stop, pos + limit - total)
        piece = rest.upto(upto)[pos:upto]
        pieces.append(piece)
        total += len(piece)
        if at < 0 or gt < 0:
            break
        close = rest.find(b"</" + tag, stop)
        pos = end if close < 0 else close
    return b"".join(pieces)
