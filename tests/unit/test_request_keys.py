"""``keys.request_keys`` (the URL read once per request) and the lazily chosen pure-scan anchors."""

from __future__ import annotations

import pytest

from scrapy_domainstate.core.keys import domain_key, host_fact_key, request_keys
from scrapy_domainstate.detect import scan as textscan

URLS = [
    "https://shop.example.co.uk/a?b=1",
    "https://www.example.co.uk/",
    "http://example.com",
    "http://User@Deep.Sub.Example.COM:8443/x",
    "https://bob.github.io/blog",
    "http://www.bücher.de/",
    "http://xn--bcher-kva.de/",
    "http://[FE80::1%25eth0]:8080/",
    "http://10.0.0.1/",
    "http://a.b.intranet.test/",
    "http://localhost:6800/",
    "file:///tmp/x.html",
    "data:text/html,hi",
    "not a url",
    "",
]


@pytest.mark.parametrize("per_hostname", [False, True])
@pytest.mark.parametrize("url", URLS)
def test_request_keys_are_the_two_keys(url: str, per_hostname: bool) -> None:
    assert request_keys(url, per_hostname) == (domain_key(url, per_hostname), host_fact_key(url, per_hostname))


@pytest.mark.parametrize(
    ("url", "per_hostname", "expected"),
    [
        ("https://shop.example.co.uk/a", False, ("example.co.uk", "shop.example.co.uk")),
        ("https://www.example.co.uk/", False, ("example.co.uk", None)),
        ("https://example.co.uk/", False, ("example.co.uk", None)),
        ("http://User@Deep.Sub.Example.COM:8443/x", False, ("example.com", "deep.sub.example.com")),
        ("https://shop.example.co.uk/a", True, ("shop.example.co.uk", None)),
        ("https://bob.github.io/", False, ("bob.github.io", None)),
        ("http://www.bücher.de/", False, ("xn--bcher-kva.de", None)),
        ("http://10.0.0.1/", False, ("10.0.0.1", None)),
        ("file:///tmp/x.html", False, ("", None)),
    ],
)
def test_request_keys_table(url: str, per_hostname: bool, expected: tuple[str, str | None]) -> None:
    assert request_keys(url, per_hostname) == expected


def test_request_keys_of_a_non_string() -> None:
    assert request_keys(None) == ("", None)  # type: ignore[arg-type]


def test_anchor_groups_cover_every_literal_once() -> None:
    literals = [b"just a moment", b"attention required", b"captcha", b"cf-chl", b"a", b"moment", b"access denied"]
    groups = textscan.choose_anchors(literals)
    seen = [lit for _, members in groups for lit, _ in members]
    assert sorted(seen) == sorted(set(literals))
    for anchor, members in groups:
        for lit, offset in members:
            assert lit[offset : offset + len(anchor)] == anchor


@pytest.mark.skipif(not textscan.HAVE_HYPERSCAN, reason="needs hyperscan")
def test_hyperscan_overflow_falls_back_to_the_anchors_chosen_then() -> None:
    """A page with more matches than the automaton's budget is answered by the pure scan,
    whose anchors the hyperscan scanner chooses only then."""
    literals = [b"ab", b"abc", b"zzz-never"]
    fast = textscan.LiteralScanner(literals, "hyperscan")
    pure = textscan.LiteralScanner(literals, "pure")
    page = b"abc " * (2 * textscan._MAX_CALLBACKS)
    assert fast.scan(page) == pure.scan(page) == {b"ab", b"abc"}
