"""The fast body scans give the answers of the plain ones they replaced (issue 14).

The reference implementations below are the project's own earlier code, kept verbatim as the
specification: the tag loop of :func:`~scrapy_domainstate.textscan.visible_text`. Each is
compared with the code in use on generated HTML-ish strings (tags, comments, scripts, unclosed
elements, cut at any point), on every page of the real-page corpus (``tests/unit/corpus``) and
on the pages of ``benchmarks/overhead.py``.
"""

from __future__ import annotations

import importlib.util

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from scrapy_domainstate.textscan import visible_text
from tests import ROOT
from tests.unit.test_corpus import load_corpus

CORPUS = load_corpus()


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
