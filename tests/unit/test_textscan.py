"""Body views and literal scanning: both engines agree, views are bounded and shared."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_domainstate.detect import scan as textscan
from scrapy_domainstate.detect.classify import EXTENDED_SCAN_CAP, Classifier
from scrapy_domainstate.detect.scan import (
    HAVE_HYPERSCAN,
    BodyScan,
    LiteralScanner,
    extended_view,
    lowered,
    title_of,
    visible_text,
)
from tests.unit.test_corpus import PAGES, judge

needs_hyperscan = pytest.mark.skipif(not HAVE_HYPERSCAN, reason="hyperscan is not installed")

LITERALS = [
    b"_cf_chl_opt",
    b"captcha-delivery.com",
    b"g-recaptcha",
    b"just a moment",
    b"a",
    b"ab",
    b"\xe9\xaa\x8c\xe8\xaf\x81",
]


def test_pure_scanner_finds_every_literal_and_only_those() -> None:
    scanner = LiteralScanner(LITERALS, engine="pure")
    assert scanner.engine == "pure"
    assert scanner.scan(b"") == set()
    assert scanner.scan(b"xx _cf_chl_opt yy") == {b"_cf_chl_opt"}
    assert scanner.scan(b"cab") == {b"a", b"ab"}
    assert scanner.scan(b"<div class=g-recaptcha>just a moment</div>") == {b"g-recaptcha", b"just a moment", b"a"}
    assert scanner.scan(b"\xe9\xaa\x8c\xe8\xaf\x81") == {b"\xe9\xaa\x8c\xe8\xaf\x81"}
    assert scanner.scan(b"zzz") == set()


@needs_hyperscan
@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from([*LITERALS, b"<script>", b"xyz", b" ", b"\x00", b"\xff"]), max_size=40),
    st.binary(max_size=200),
)
def test_engines_agree_on_any_input(parts: list[bytes], noise: bytes) -> None:
    data = noise.join(parts) if noise else b"".join(parts)
    pure = LiteralScanner(LITERALS, engine="pure")
    fast = LiteralScanner(LITERALS, engine="hyperscan")
    assert fast.engine == "hyperscan"
    assert pure.scan(data) == fast.scan(data)


@needs_hyperscan
def test_engines_agree_on_the_classifier_literals_over_real_pages() -> None:
    pure = Classifier(engine="pure")
    fast = Classifier(engine="hyperscan")
    assert pure.engine == "pure" and fast.engine == "hyperscan"
    assert pure.scanner.literals == fast.scanner.literals
    rng = random.Random(7)
    for page in PAGES:
        low = page.body[:65536].lower()
        assert pure.scanner.scan(low) == fast.scanner.scan(low), page.id
        # and on random windows, where literals are cut at the edges
        for _ in range(3):
            start = rng.randrange(0, max(1, len(low)))
            window = low[start : start + rng.randrange(1, 4096)]
            assert pure.scanner.scan(window) == fast.scanner.scan(window), page.id


@needs_hyperscan
def test_engines_give_identical_verdicts_on_the_corpus() -> None:
    pure = Classifier(engine="pure")
    fast = Classifier(engine="hyperscan")
    for page in PAGES:
        assert judge(pure, page) == judge(fast, page), page.id
        assert pure.antibot(page.status, page.headers, page.body) == fast.antibot(
            page.status, page.headers, page.body
        ), page.id


def test_engine_names_are_checked() -> None:
    with pytest.raises(ValueError, match="engine"):
        LiteralScanner(LITERALS, engine="re2")
    if not HAVE_HYPERSCAN:
        with pytest.raises(ValueError, match="hyperscan"):
            LiteralScanner(LITERALS, engine="hyperscan")
    assert Classifier(engine="pure").engine == "pure"
    assert Classifier().engine == ("hyperscan" if HAVE_HYPERSCAN else "pure")


def test_lowered_view_is_made_once_per_body() -> None:
    body = b"<HTML><Title>Just A Moment</Title>" + b"X" * 100
    scan = BodyScan(body, 64)
    first = scan.low
    assert first == body[:64].lower() == lowered(body, 64)
    assert scan.low is first  # made once: the contact scan reads the classifier's copy
    assert BodyScan("Caf\u00e9 ABC", 100).low == "caf\u00e9 abc".encode() and BodyScan(None, 10).low == b""
    assert lowered(body, 32) == body[:32].lower()  # another limit: another view
    other = bytes(bytearray(body))  # equal but not the same object
    assert lowered(other, 64) == first and lowered(other, 64) is not first
    assert lowered("Caf\u00e9 ABC", 100) == "caf\u00e9 abc".encode()
    assert lowered(None, 10) == b"" and lowered(b"", 10) == b""
    assert lowered(bytearray(b"AbC"), 10) == b"abc"
    assert lowered(memoryview(b"AbC"), 10) == b"abc"


def test_title_and_visible_text() -> None:
    low = b"<html><head><title> just a moment... </title><style>p{x:1}</style></head><body><!-- hi --><p>one  two</p>"
    low += b"<script>var x='<p>no</p>'</script><noscript>enable js</noscript> three</body></html>"
    assert title_of(low) == b"just a moment..."
    assert title_of(b"<p>no title</p>") == b""
    assert visible_text(low, 100) == b"one two three"
    assert visible_text(low, 5) is None
    assert visible_text(b"", 10) == b""


def test_extended_view_skips_scripts_and_styles_and_is_bounded() -> None:
    head = b"<html><head><style>" + b"a{color:red}" * 1000
    body = head + b"</style><title>Just a moment...</title><script src='/x.js'>var _cf_chl_opt=1;</script>"
    body += b"<form id='challenge-form'></form><STYLE>b{}</STYLE><p>Checking your browser</p>"
    prefix = body[:100].lower()  # ends inside the <style>
    view = extended_view(body, 100, prefix, 10_000, EXTENDED_SCAN_CAP)
    assert b"_cf_chl_opt" not in view and b"color:red" not in view and b"b{}" not in view
    assert b"<script src='/x.js'>" in view  # opening tags (and their src) are kept
    assert b"<title>just a moment...</title>" in view and b"challenge-form" in view
    assert b"checking your browser" in view
    assert len(extended_view(body, 100, prefix, 20, EXTENDED_SCAN_CAP)) <= 20
    assert b"checking" not in extended_view(body, 100, prefix, 10_000, len(body) - 30)
    assert extended_view(body, len(body), body.lower(), 100, EXTENDED_SCAN_CAP) == b""


def test_module_exports() -> None:
    assert set(textscan.__all__) >= {"LiteralScanner", "lowered", "extended_view", "visible_text", "title_of"}


@needs_hyperscan
def test_hyperscan_falls_back_on_a_flood_of_matches() -> None:
    data = b"datadome " * 6000 + b"_cf_chl_opt"
    pure = LiteralScanner([b"datadome", b"_cf_chl_opt", b"kpsdk"], engine="pure")
    fast = LiteralScanner([b"datadome", b"_cf_chl_opt", b"kpsdk"], engine="hyperscan")
    assert fast.scan(data) == pure.scan(data) == {b"datadome", b"_cf_chl_opt"}


@needs_hyperscan
def test_scan_databases_are_compiled_once_per_process() -> None:
    """Every classifier of a process (one per crawler) shares the compiled databases."""
    first, second = Classifier(), Classifier()
    assert first.scanner._db is second.scanner._db
    assert first._fast is not None and second._fast is not None
    assert first._fast.pattern_scanner(True)._db is second._fast.pattern_scanner(True)._db
    assert first._fast.pattern_scanner(True)._db is not first._fast.pattern_scanner(False)._db  # another pattern set


def test_pure_anchor_groups_are_chosen_once_per_literal_set() -> None:
    first, second = LiteralScanner(LITERALS, engine="pure"), LiteralScanner(LITERALS, engine="pure")
    assert first._groups is second._groups
    assert first.subset(LITERALS[:3]).groups is second.subset(LITERALS[:3]).groups
    assert LiteralScanner(LITERALS[:2], engine="pure")._groups is not first._groups


def test_the_engine_can_be_forced_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(textscan.ENGINE_ENV, "pure")
    assert textscan.default_engine() == "pure"
    assert Classifier().engine == "pure"
    assert LiteralScanner(LITERALS).scan(b"xx g-recaptcha") == {b"g-recaptcha", b"a"}
    monkeypatch.setenv(textscan.ENGINE_ENV, "re2")
    with pytest.raises(ValueError, match=textscan.ENGINE_ENV):
        LiteralScanner(LITERALS)
    monkeypatch.setenv(textscan.ENGINE_ENV, "hyperscan")
    if HAVE_HYPERSCAN:
        assert Classifier().engine == "hyperscan"
    else:
        with pytest.raises(ValueError, match="hyperscan"):
            textscan.default_engine()
    monkeypatch.delenv(textscan.ENGINE_ENV)
    assert textscan.default_engine() == ("hyperscan" if HAVE_HYPERSCAN else "pure")
