"""The fast body scans give the answers of the plain ones they replaced (issue 14).

The reference implementations below are the project's own earlier code, kept verbatim as the
specification: the tag loop of :func:`~scrapy_domainstate.detect.scan.visible_text` and the plain
contact scans of :mod:`scrapy_domainstate.detect.contacts` (one ``find`` pass per kind). Each is
compared with the code in use on generated HTML-ish strings (tags, comments, scripts, unclosed
elements, cut at any point), on every page of the real-page corpus (``tests/unit/corpus``) and
on the pages of ``benchmarks/overhead.py``.
"""

from __future__ import annotations

import importlib.util

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from scrapy_domainstate.detect import contacts
from scrapy_domainstate.detect.classify import Classifier
from scrapy_domainstate.detect.contacts import (
    _AT_ENTITY,
    _BEFORE_OK,
    _DIGIT,
    _DOMAIN,
    _FILE_TLDS,
    _HEX_KEY,
    _HOST_OK,
    _INTL,
    _INTL_START,
    _LABEL,
    _LABEL_ENDS,
    _LOCAL_MAP,
    _MAX_HITS,
    _NANP,
    _NANP_TAIL,
    _PLACEHOLDER_SET,
    _PLACEHOLDER_SUFFIXES,
    _SOCIAL,
    _TEL_VALUE,
    _ZERO_DIGITS,
    find_contacts,
    has_contact,
    scan_has_contact,
)
from scrapy_domainstate.detect.scan import HAVE_HYPERSCAN, BodyScan, lowered, visible_text
from tests import ROOT
from tests.unit.test_corpus import load_corpus

CORPUS = load_corpus()
_ENGINES = (Classifier(engine="pure"), Classifier(engine="hyperscan" if HAVE_HYPERSCAN else "pure"))


def overhead_pages() -> dict[str, bytes]:
    """The page kinds ``benchmarks/overhead.py`` crawls (tiny, 50 KB with and without contacts,
    a challenge), as one site serves them."""
    spec = importlib.util.spec_from_file_location("overhead_bench", ROOT / "benchmarks" / "overhead.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {kind: page.replace(b"{HOST}", b"site-1.test") for kind, page in module.pages().items()}


# ------------------------------------------------------------------ reference: visible_text

_HIDDEN_ELEMENTS = (b"script", b"style", b"noscript", b"template")
_HIDDEN_FIRST = (b"s", b"n", b"t")


def reference_visible_text(low: bytes, limit: int) -> bytes | None:
    n = len(low)
    i = low.find(b"<body")
    if i < 0:
        if b"<head" in low and b"</head" not in low:
            return b""
        i = 0
    parts: list[bytes] = []
    count = 0
    while i < n:
        lt = low.find(b"<", i)
        end = n if lt < 0 else lt
        if end > i:
            words = low[i:end].split()
            if words:
                text = b" ".join(words)
                count += len(text) + 1
                if count > limit:
                    return None
                parts.append(text)
        if lt < 0:
            break
        if low.startswith(b"<!--", lt):
            close = low.find(b"-->", lt + 4)
            i = n if close < 0 else close + 3
            continue
        if low[lt + 1 : lt + 2] in _HIDDEN_FIRST:
            lt = _reference_past_hidden(low, lt, n)
            if lt < 0:
                break
        gt = low.find(b">", lt)
        i = n if gt < 0 else gt + 1
    return b" ".join(parts)


def _reference_past_hidden(low: bytes, lt: int, n: int) -> int:
    if low.startswith(b"<title", lt):
        close = low.find(b"</title", lt)
        lt = n if close < 0 else close
    hidden = next((t for t in _HIDDEN_ELEMENTS if low.startswith(t, lt + 1)), None)
    if hidden is None:
        return lt
    return low.find(b"</" + hidden, lt)


# ------------------------------------------------------------------ generated markup

_NAMES = ["p", "a", "b", "s", "t", "n", "div", "span", "title", "titles", "script", "scripts", "style"]
_NAMES += ["stylesheet", "noscript", "template", "head", "body", "br", "!doctype html", "!-", "!--x", "textarea"]
_PIECES = [
    "<",
    ">",
    "</",
    "<!--",
    "-->",
    "--",
    "-",
    "<!---->",
    "<!-->",
    " ",
    "  \n\t",
    "\x0b",
    "\x0c",
    "\xa0",
    "word",
    "verify you are human",
    "a<b",
    "x>y",
    "<body>",
    "<body",
    "<head>",
    "</head>",
    "<head",
    "</head",
    "'",
    '"',
    "=",
    "/",
]


@st.composite
def markup(draw: st.DrawFn) -> bytes:
    """HTML-ish text: open/close tags of the names that matter, comments, words, stray brackets."""
    out: list[str] = []
    for _ in range(draw(st.integers(0, 40))):
        kind = draw(st.integers(0, 4))
        if kind == 0:
            out.append(draw(st.sampled_from(_PIECES)))
        elif kind == 1:
            name = draw(st.sampled_from(_NAMES))
            attrs = draw(st.sampled_from(["", " x", " a='<b>'", ' src="/x.js"', " /"]))
            out.append(f"<{name}{attrs}" + draw(st.sampled_from([">", "", " >"])))
        elif kind == 2:
            name = draw(st.sampled_from(_NAMES))
            out.append(f"</{name}" + draw(st.sampled_from([">", "", " x>"])))
        elif kind == 3:
            out.append(draw(st.text(alphabet="ab <>-!/\n", max_size=12)))
        else:
            out.append("word " * draw(st.integers(1, 30)))
    return "".join(out).encode("utf-8")


LIMITS = (0, 1, 5, 40, 100, 1200, 4000, 10**9)


@settings(max_examples=700, deadline=None)
@given(markup(), st.sampled_from(LIMITS))
@example(b"<body><script>x", 10)
@example(b"<head><title>t</title>", 10)
@example(b"<p>" + b"w " * 3000 + b"<script>" + b"x" * 5000, 1200)
@example(b"<!-->text-->more", 100)
def test_visible_text_is_the_tag_loop(low: bytes, limit: int) -> None:
    assert visible_text(low, limit) == reference_visible_text(low, limit)


@settings(max_examples=150, deadline=None)
@given(st.lists(markup(), min_size=3, max_size=12), st.sampled_from((40, 1200, 4000, 10**9)))
def test_visible_text_is_the_tag_loop_on_long_markup(parts: list[bytes], limit: int) -> None:
    # Long enough for several reading windows, with tags and scripts cut at their edges.
    low = b"".join(parts) * 40
    assert visible_text(low, limit) == reference_visible_text(low, limit)


def _views() -> list[tuple[str, bytes]]:
    views = [(kind, page.lower()) for kind, page in overhead_pages().items()]
    for page in CORPUS:
        low = page.body.lower()
        views.append((page.id, low[:65536]))
        views.append((page.id + "[all]", low))
        views.append((page.id + "[64k:]", low[65536:196608]))
        views.append((page.id + "[1k:]", low[1000:20000]))
    return views


@pytest.mark.parametrize("limit", [40, 1200, 4000, 10**9])
def test_visible_text_is_the_tag_loop_on_real_pages(limit: int) -> None:
    for name, low in _views():
        assert visible_text(low, limit) == reference_visible_text(low, limit), name


_TRICKY = [b"<!--->", b"<!-->", b"<!---->", b"<title>t</title>", b"<title", b"<script>a<b</script >", b"<scripts>"]
_TRICKY += [b"<style>x</styl>", b"</style>", b"<noscript>", b"<template>q</template", b"<a b='>'>", b"<", b"<!-"]


@pytest.mark.parametrize("limit", [40, 1200])
def test_visible_text_reads_markup_cut_by_its_window_edges(limit: int) -> None:
    # Text is counted a window at a time: every tricky piece of markup, at every offset around
    # the first windows' edges, reads as in the tag loop.
    for tricky in _TRICKY:
        for pad in range(limit + 990, limit + 1040):
            for after in (b"visible words", b"x" * 3000, b"<p>" + b"w " * 700):
                low = b"<p>" + b" " * pad + tricky + after
                assert visible_text(low, limit) == reference_visible_text(low, limit), (tricky, pad)
                low = b"<p>" + b"w" * (pad % 7) + b" " * (pad * 3) + tricky + after
                assert visible_text(low, limit) == reference_visible_text(low, limit), (tricky, pad)


# ------------------------------------------------------------------ reference: the contact scan

# The plain scans of scrapy_domainstate.detect.contacts as they were before the one-pass engine (their
# tables and regular expressions are imported: they did not change).


def _emails(low: bytes, out: list[str], seen: set[str], first: bool) -> bool:
    find = low.find
    pos = find(b"@")
    while pos >= 0:
        if pos > 0:
            found = _email_at(low, pos)
            if found is not None:
                key = "email:" + found
                if key not in seen:
                    seen.add(key)
                    out.append(key)
                    if first:
                        return True
        pos = find(b"@", pos + 1)
    return False


def _email_at(low: bytes, at: int) -> str | None:
    lo = at - 64 if at > 64 else 0
    start = lo + low[lo:at].translate(_LOCAL_MAP).rfind(b" ") + 1
    if start >= at:
        return None
    local = low[start:at]
    # mailto:info@... is fine; https://user:pass@host and //user@host are URL credentials.
    if start > 0 and low[start - 1 : start] in (b":", b"/") and not low.endswith(b"mailto:", 0, start):
        return None
    local = local.lstrip(b".")
    if not local or local.endswith(b".") or b".." in local or _HEX_KEY.match(local):
        return None
    tail = _DOMAIN.match(low, at + 1, at + 256)
    if tail is None:
        return None
    domain, tld = tail.group(1), tail.group(2)
    if tld in _FILE_TLDS:
        return None
    if domain in _PLACEHOLDER_SET or domain.endswith(_PLACEHOLDER_SUFFIXES):
        return None
    return (local + b"@" + domain).decode("ascii", "replace")


def _digits(text: bytes) -> int:
    return len(_DIGIT.findall(text))


def _phone_key(text: bytes) -> str:
    text = text.strip().lstrip(b"/")
    international = text.startswith((b"+", b"%2b"))
    digits = b"".join(_DIGIT.findall(text[3:] if text.startswith(b"%2b") else text)).decode("ascii")
    return "phone:" + ("+" + digits if international else digits)


def _add(out: list[str], seen: set[str], key: str) -> None:
    if key not in seen:
        seen.add(key)
        out.append(key)


def _tel_links(low: bytes, out: list[str], seen: set[str], first: bool) -> bool:
    # bytes.find skips ahead on the whole literal; re's search stops at every "t" of a text.
    find = low.find
    pos = find(b"tel:")
    hits = 0
    while pos >= 0 and hits < _MAX_HITS:
        hits += 1
        # href="tel:..." but not "hotel:" or "intel:".
        if pos == 0 or not low[pos - 1 : pos].isalnum():
            match = _TEL_VALUE.match(low, pos + 4, pos + 64)
            if match is not None and 5 <= _digits(match.group(1)) <= 15:
                _add(out, seen, _phone_key(match.group()))
                if first:
                    return True
        pos = find(b"tel:", pos + 4)
    return False


def _boundary_ok(low: bytes, start: int, end: int) -> bool:
    """Not glued to letters, digits or number punctuation on either side."""
    before = low[start - 1] if start > 0 else 32
    after = low[end] if end < len(low) else 32
    if before not in _BEFORE_OK:
        return False
    if after < 128 and (chr(after).isalnum() or after in b"-+/_"):
        return False
    return not (after in b".," and low[end + 1 : end + 2].isdigit())


def _numbers(low: bytes, out: list[str], seen: set[str], first: bool) -> bool:
    return _intl_numbers(low, out, seen, first) or _nanp_numbers(low, out, seen, first)


def _intl_numbers(low: bytes, out: list[str], seen: set[str], first: bool) -> bool:
    # International: every match of _INTL starts at a "+" and holds no other "+", so its
    # matches are exactly the positions _INTL_START finds (in C). A "+" glued to a letter or
    # digit (minified code: "e+1") fails the boundary check anyway: it is counted against the
    # hit budget as before, without running the full pattern.
    for hits, start_match in enumerate(_INTL_START.finditer(low)):
        if hits >= _MAX_HITS:
            break
        start = start_match.start()
        if start > 0 and low[start - 1] not in _BEFORE_OK:
            continue
        match = _INTL.match(low, start)
        if match is None:  # pragma: no cover - _INTL_START implies a match
            continue
        text = match.group().rstrip(b" .-(")
        if (
            8 <= _digits(text) <= 15
            and any(sep in text for sep in (b" ", b"-", b".", b"("))
            and _boundary_ok(low, start, start + len(text))
        ):
            _add(out, seen, _phone_key(text))
            if first:
                return True
    return False


def _nanp_numbers(low: bytes, out: list[str], seen: set[str], first: bool) -> bool:
    # North American: find the "000-0000" tail on the digits-to-zero copy, then look back.
    shape = low.translate(_ZERO_DIGITS)
    find = shape.find
    pos = find(_NANP_TAIL)
    hits = 0
    while pos >= 0 and hits < _MAX_HITS:
        if shape[pos + 8 : pos + 9] == b"0":  # a longer digit run (123.45678): not a phone
            pos = find(_NANP_TAIL, pos + 8)
            continue
        hits += 1
        for back in (4, 6, 5):  # 000-000-0000, (000) 000-0000, (000)000-0000
            start = pos - back
            match = _NANP.match(low, start, pos + 8) if start >= 0 else None
            if match is None or match.end() != pos + 8:
                continue
            if match.group(1) is not None and low[pos + 3] != match.group(1)[0]:
                break  # 555-234.5678: mixed separators
            if low[start - 2 : start] in (b"1-", b"1 ", b"1."):  # 1-800-234-5678
                start -= 2
            if _boundary_ok(low, start, match.end()):
                _add(out, seen, _phone_key(match.group()))
                if first:
                    return True
            break
        pos = find(_NANP_TAIL, pos + 8)
    return False


def _social(low: bytes, out: list[str], seen: set[str], first: bool) -> bool:
    find = low.find
    pos = find(b".com/")
    hits = 0
    while pos >= 0 and hits < _MAX_HITS:
        hits += 1
        if pos == 0 or low[pos - 1] not in _LABEL_ENDS:  # not "facebook.com/", "x.com/", ...
            pos = find(b".com/", pos + 5)
            continue
        label = _LABEL.search(low, max(0, pos - 16), pos)
        entry = _SOCIAL.get(label.group()) if label is not None else None
        # A whole label: "x.com/" must not be the tail of "dropbox.com/".
        if entry is not None and label is not None and (label.start() == 0 or low[label.start() - 1] in _HOST_OK):
            pattern, excluded = entry
            path = pos + 5
            match = pattern.match(low, path, path + 160)
            if match is not None:
                ident = match.group().strip(b"/")
                if ident and ident.split(b"/", 1)[0] not in excluded:
                    _add(out, seen, "social:" + (label.group() + b".com/" + ident).decode("ascii", "replace"))
                    if first:
                        return True
        pos = find(b".com/", pos + 5)
    return False


def _prepare(body: bytes | str, limit: int) -> bytes:
    if not body:
        return b""
    # The classifier lowercased the same prefix of the same body a moment ago: shared.
    low = lowered(body, limit)
    if low.find(b"\x00", 0, 1024) >= 0:  # binary: nothing to read
        return b""
    if _AT_ENTITY.search(low) is not None:  # the usual obfuscation of "@" in e-mail addresses
        low = low.replace(b"&#64;", b"@")
    return low


def reference_find_contacts(body: bytes | str, limit: int = 65536, max_results: int = 100) -> list[str]:
    """Contacts in the first ``limit`` bytes of ``body``, deduplicated, in kind order.

    Each item is tagged: ``'email:info@acme.com'``, ``'phone:+4930123456'`` (digits, with
    ``+`` when written internationally), ``'social:facebook.com/acme'``. Addresses are
    lowercased. Bytes are read leniently (any encoding; ASCII matters here).
    """
    low = _prepare(body, limit)
    if not low:
        return []
    out: list[str] = []
    seen: set[str] = set()
    _emails(low, out, seen, False)
    _tel_links(low, out, seen, False)
    _numbers(low, out, seen, False)
    _social(low, out, seen, False)
    return out[:max_results]


def reference_has_contact(body: bytes | str, limit: int = 65536) -> bool:
    """True when the first ``limit`` bytes of ``body`` show an e-mail, phone or profile link."""
    low = _prepare(body, limit)
    if not low:
        return False
    out: list[str] = []
    seen: set[str] = set()
    return (
        _emails(low, out, seen, True)
        or _tel_links(low, out, seen, True)
        or _social(low, out, seen, True)
        or _numbers(low, out, seen, True)
    )


# ------------------------------------------------------------------ contacts: generated pages

needs_hyperscan = pytest.mark.skipif(not HAVE_HYPERSCAN, reason="hyperscan is not installed")

_CONTACT_PIECES = [
    "mailto:info@acme-watches.de",
    "Info@Acme.CO.uk",
    "jane.doe+shop@mail.example-watches.com",
    "you@example.com",
    "logo@2x.png",
    "pkg@1.2.3",
    "https://user:pass@host.com/",
    "//cdn@host.org",
    "a.@b.com",
    ".@x.io",
    "@media",
    '"@type"',
    "x@y",
    "info&#64;acme.org",
    "&#64;",
    "@",
    "tel:+49 341 1234567",
    "TEL:0341-123456",
    "hotel:5551234567",
    "tel:",
    "tel:%2B4934112345",
    "+49 341 123 4567",
    "+44-20-7946-0958",
    "+1 (415) 555-2671",
    "(+33 1.42.68.53.00)",
    "e+1",
    "+1",
    "+(1",
    "+12",
    "(415) 555-2671",
    "415-555-2671",
    "415.555.2671",
    "555-234.5678",
    "1-800-555-2671",
    "123-4567",
    "2019-12345678",
    "000-0000",
    "https://www.facebook.com/AcmeWatches/",
    "facebook.com/sharer.php",
    "https://FaceBook.COM/acme",
    "twitter.com/acme_watch",
    "https://x.com/acme?ref=1",
    "dropbox.com/s/abc",
    "linkedin.com/company/acme-watches/",
    "instagram.com/p/xyz",
    "youtube.com/@acme",
    "tiktok.com/@acme",
    "github.com/acme",
    ".com/",
    ".COM/",
    "x.com/",
]
_FILLER = [
    " ",
    "\n",
    "<p>",
    "</p>",
    '<a href="',
    '">',
    "word",
    "1",
    "9",
    "-",
    ".",
    "(",
    ")",
    "+",
    "a",
    "Z",
    "\x00",
    "\xa0",
]


@st.composite
def contact_pages(draw: st.DrawFn) -> bytes:
    out: list[str] = []
    for _ in range(draw(st.integers(0, 30))):
        kind = draw(st.integers(0, 3))
        if kind == 0:
            out.append(draw(st.sampled_from(_CONTACT_PIECES)))
        elif kind == 1:
            out.append(draw(st.sampled_from(_FILLER)))
        elif kind == 2:
            out.append(draw(st.text(alphabet="0123456789 -.()+@:/tel", max_size=14)))
        else:
            piece = draw(st.sampled_from(_CONTACT_PIECES + _FILLER))
            out.append(piece * draw(st.integers(2, 300)))  # floods: budgets of 256 places
    return "".join(out).encode("utf-8")


def _after_classifier(body: bytes, limit: int) -> bool:
    """``has_contact(body, limit)`` after the classifier's pass over the same body: its contact
    places are handed over (in the BodyScan) when it read the same bytes."""
    classifier = _ENGINES[1]
    read = BodyScan(body, classifier.scan_bytes)
    classifier.response(200, {}, read, "/", False)
    scan = BodyScan(body, limit)
    if min(len(body), limit) == min(len(body), classifier.scan_bytes):
        scan.places = read.places
    return scan_has_contact(scan)


def _check_contacts(body: bytes, limit: int) -> None:
    expected = reference_has_contact(body, limit)
    assert has_contact(body, limit) == expected, (body[:200], limit)
    assert _after_classifier(body, limit) == expected, (body[:200], limit)
    assert contacts._has_contact_plain(body, limit) == reference_has_contact(body, limit)
    assert find_contacts(body, limit) == reference_find_contacts(body, limit)


@settings(max_examples=1500, deadline=None)
@given(contact_pages(), st.sampled_from((65536, 100, 7, 1024, 5000)))
@example(b"tel:5551234567 " * 300 + b'<a href="tel:+4934112345">', 65536)
@example(b"https://a.com/ " * 300 + b'<a href="https://facebook.com/acme">', 65536)
@example(b"https://a.COM/ " * 250 + b'<a href="https://facebook.com/acme">', 65536)
@example(b"+12 " * 300 + b" +49 341 123 4567 ", 65536)
@example(b"123-4567 " * 300 + b" 415-555-2671 ", 65536)
@example(b"123-45678 " * 300 + b" 415-555-2671 ", 65536)
@example(b"x" * 1000 + b"\x00 info@acme.org", 65536)
def test_has_contact_is_the_plain_scan(body: bytes, limit: int) -> None:
    _check_contacts(body, limit)


_EDGE_CONTACTS = [
    b"<a href='mailto:" + b"a" * 60 + b"@acme.org'>",
    b"mailto:" + b"b.c" * 21 + b"@acme.org",
    b" " + b"d" * 66 + b"@acme.org",
    b" x..x" + b"a" * 60 + b"@acme.org",
    b"//" + b"a" * 62 + b"@acme.org",
    b"mailto:" + b"a" * 57 + b"@acme.org",
    b"https://" + b"u" * 58 + b":pass@acme.org/",
    b"x@" + b"sub." * 60 + b"acme.org",
    b"tel:" + b" " * 20 + b"+49 (0) 341 / 123 - 45 - 67",
    b"tel://+49-341-123456789012",
    b"tel:%2b49 341 12 34 56 78 90 12",
    b"+49 (341) 123 45 67 89 01 23 45",
    b"+1 (415) 555-2671.5",
    b"+(1234) (1) (1) (1) (1) (12345) (12345)",
    b"+(1234) (1) (1) (1) (1) (1) (12345)",
    b"415-555-2671.5",
    b"415-555-2671,9",
    b"(415) 555-2671x",
    b"1-800-555-2671",
    b"https://www.facebook.com/" + b"a" * 150,
    b"https://www.facebook.com/pages/" + b"n" * 90 + b"/123",
    b"instagram.com/acme",
]
_EDGE_FILLERS = [b"tel:x ", b"+12 ", b"123-4567 ", b"a.com/ ", b"123-45678 "]


@pytest.mark.parametrize("contact", _EDGE_CONTACTS)
def test_has_contact_is_the_plain_scan_at_the_edges(contact: bytes) -> None:
    # Each contact after 255-257 places of each kind (the budget is 256), at the view's end,
    # cut by the limit at every byte, and with the bytes before it long enough to fill the
    # checks' windows.
    for filler in _EDGE_FILLERS:
        for count in (255, 256, 257):
            _check_contacts(filler * count + contact + b" ", 1_000_000)
    for pad in (0, 1, 5, 17, 80):
        body = b"x" * pad + b" " + contact
        _check_contacts(body, 1_000_000)
        for cut in range(max(1, len(body) - len(contact) - 2), len(body) + 2):
            _check_contacts(body, cut)
        _check_contacts(body + b"<p>more</p>", 1_000_000)


def test_has_contact_is_the_plain_scan_on_real_pages() -> None:
    pages = [(kind, page) for kind, page in overhead_pages().items()]
    pages += [(page.id, page.body) for page in CORPUS]
    for name, body in pages:
        for limit in (65536, 4096, 1_000_000):
            assert has_contact(body, limit) == reference_has_contact(body, limit), (name, limit)
            assert _after_classifier(body, limit) == reference_has_contact(body, limit), (name, limit)
        assert find_contacts(body) == reference_find_contacts(body), name
        # and with each contact near a window's edge: the body cut at every contact found
        for item in reference_find_contacts(body, 1_000_000)[:5]:
            value = item.split(":", 1)[1].encode()
            at = body.lower().find(value)
            for cut in (at, at + 1, at + len(value) - 1, at + len(value), at + len(value) + 1):
                if cut > 0:
                    assert has_contact(body, cut) == reference_has_contact(body, cut), (name, item, cut)


def test_has_contact_on_other_body_types_is_the_plain_scan() -> None:
    body = b"<p>Mail INFO@acme.org or call +49 341 123 4567</p>"
    for value in (body, body.decode(), bytearray(body), memoryview(body), b"", "", None):
        assert has_contact(value) == reference_has_contact(value)  # type: ignore[arg-type]
    assert lowered(body, 10) == body[:10].lower()


@needs_hyperscan
def test_has_contact_falls_back_on_a_flood_of_places() -> None:
    # More places than the one pass reports: the plain scans answer (the same).
    body = b"tel:x " * 5000 + b"+12 " * 2000 + b" <a href='tel:+4934112345'> info@acme.org"
    assert contacts._has_contact_fast(body, len(body)) is None
    assert has_contact(body, len(body)) is reference_has_contact(body, len(body)) is True
    assert has_contact(body[:-14], len(body)) is reference_has_contact(body[:-14], len(body)) is False
    entity = b"<p>info&#64;acme.org</p>"
    assert contacts._has_contact_fast(entity, 100) is None and has_contact(entity) is True


# ------------------------------------------------------------------ classification: both engines

_CLASSIFY_PIECES = [
    "<title>Just a moment...</title>",
    "<TITLE>Attention Required! | Cloudflare</TITLE>",
    "<title>Shop</title>",
    "<title>" + "Shop and more " * 20 + "Just a moment...</title>",
    "<title>" + "Shop and more " * 15 + "just a moment",
    "<title>" + "x" * 240 + "just a moment",
    "<title " + "x" * 190 + ">just a moment",
    "<title>" + "x" * 1000 + "</title>just a moment",
    "<title>" + "x" * 700 + "just a moment</title>",
    "<title>",
    "</title>",
    "<script>var _cf_chl_opt={};</script>",
    "<SCRIPT src='/x.js'></SCRIPT>",
    "<script",
    "<body>",
    "<BODY class=x>",
    "<head>",
    "</head>",
    "<a href='/a'>a</a>",
    "<A HREF='/b'>b</A>",
    "<div class='g-recaptcha' data-sitekey='x'></div>",
    "<div class='h-captcha'></div>",
    "<div class='cf-turnstile'></div>",
    "captcha-delivery.com",
    "Verify you are human",
    "VERIFY",
    "verify you are a human",
    "Checking your browser before accessing",
    "checking",
    "are you a robot?",
    "Human",
    "<input type='password'>",
    "<textarea></textarea>",
    "<noscript>Enable JavaScript and cookies to continue</noscript>",
    "<!-- comment -->",
    "<style>p{}</style>",
    "%PDF",
    "\x00",
    "<p>Some text of a normal page, with words.</p>",
    "datadome",
    "/cdn-cgi/challenge-platform/",
    "Access denied",
    "Error 1020",
    "Request unsuccessful. Incapsula incident ID",
    "<iframe src='https://geo.captcha-delivery.com/captcha/'></iframe>",
    "awswaf",
    "window._pxAppId",
]
_STATUSES = (200, 202, 403, 404, 429, 503, 999)
_HEADERS: list[dict[str, str]] = [
    {},
    {"Content-Type": "text/html; charset=utf-8"},
    {"content-type": "application/pdf"},
    {"Content-Type": "text/html", "Server": "cloudflare", "CF-RAY": "8f1c2d3e4a5b6c7d-FRA"},
    {"cf-mitigated": "challenge"},
    {"Content-Type": "application/json"},
]


@st.composite
def classify_pages(draw: st.DrawFn) -> bytes:
    out = [draw(st.sampled_from([*_CLASSIFY_PIECES, "x"])) for _ in range(draw(st.integers(0, 25)))]
    body = "".join(out).encode("utf-8")
    pad = draw(st.sampled_from((0, 0, 200, 33_000, 49_990, 50_010, 65_400, 65_600, 70_000)))
    if pad:
        filler = draw(st.sampled_from((b" ", b"<p>w</p>", b"<a href='/x'>x</a> ", b"<script>v</script>")))
        where = draw(st.integers(0, 2))
        block = filler * (pad // len(filler))
        body = block + body if where == 0 else body + block if where == 1 else body[:10] + block + body[10:]
    return body


@needs_hyperscan
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(classify_pages(), st.sampled_from(_STATUSES), st.sampled_from(range(len(_HEADERS))))
@example(b"<p>x</p><title>just a moment", 200, 0)
@example(b"<title>" + b"x" * 700 + b"Attention Required! | Cloudflare</title>" + b" " * 40_000, 200, 1)
@example(b"<title>" + b"x" * 200 + b"Attention Required! | Cloudflare" + b" " * 40_000, 200, 1)
@example(b"<title " + b"x" * 190 + b">Attention Required! | Cloudflare" + b" " * 40_000, 200, 1)
@example(b" " * 40_000 + b"<title>Attention Required! | Cloudflare", 200, 1)
@example(b" " * 33000 + b"<title>just a moment", 200, 3)
@example(b"<a href='/x'>x</a> " * 1800 + b"<title>just a moment", 200, 3)
@example(b"<p>x</p><SCRIPT", 200, 1)
@example(b"<p>x</p> Verify you are human", 200, 1)
@example(b"<body>" + b"<script>x</script>" * 10 + b"<p>" + b"w " * 40, 200, 1)
def test_classification_is_the_same_on_both_engines(body: bytes, status: int, headers: int) -> None:
    pure, fast = _ENGINES
    hdrs = _HEADERS[headers]
    url = "https://www.example.com/"
    assert fast.response(status, hdrs, body, url, False) == pure.response(status, hdrs, body, url, False)
    assert fast.response(status, hdrs, body, url, True) == pure.response(status, hdrs, body, url, True)


@needs_hyperscan
def test_classification_is_the_same_on_both_engines_on_real_pages() -> None:
    pure, fast = Classifier(engine="pure"), Classifier(engine="hyperscan")
    pages = [(kind, 200, {"content-type": "text/html"}, page) for kind, page in overhead_pages().items()]
    pages.append(("challenge-403", 403, {"cf-ray": "8a1b2c3d4e5f6a7b-LHR", "server": "cloudflare"}, pages[-1][3]))
    pages += [(page.id, page.status, page.headers, page.body) for page in CORPUS]
    for name, status, headers, body in pages:
        views = [body, body[:65536], body[:40_000], body[:20_000], body[:49_999], body[-30_000:], body.upper()]
        for view in views:
            for code in (status, 200):
                assert fast.response(code, headers, view, "/", False) == pure.response(
                    code, headers, view, "/", False
                ), (
                    name,
                    code,
                    len(view),
                )


@needs_hyperscan
def test_a_fast_path_that_fails_leaves_the_full_path(monkeypatch: pytest.MonkeyPatch) -> None:
    fast = Classifier(engine="hyperscan")

    def refuse(small: bool) -> None:
        raise RuntimeError("pattern refused")

    monkeypatch.setattr(fast._fast, "pattern_scanner", refuse)
    pure = Classifier(engine="pure")
    for kind, body in overhead_pages().items():
        assert fast.response(200, {}, body, "/", False) == pure.response(200, {}, body, "/", False), kind
    assert fast._fast is None  # not tried again
