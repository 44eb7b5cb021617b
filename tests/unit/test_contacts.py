"""Contact detection: what counts as an e-mail, a phone number or a social profile, and what not."""

from __future__ import annotations

import time

import pytest

from scrapy_domainstate.detect.contacts import find_contacts, has_contact


def page(fragment: str, pad: int = 0) -> bytes:
    filler = "<p>We restore mechanical watches in Leipzig since 1987; every movement is documented.</p>\n"
    return (
        "<!doctype html><html><head><title>Workshop</title></head><body>"
        + filler * (pad // len(filler) + 1 if pad else 0)
        + fragment
        + "</body></html>"
    ).encode()


POSITIVES: list[tuple[str, str, str]] = [
    ("mailto", '<a href="mailto:info@acme-watches.de">Write to us</a>', "email:info@acme-watches.de"),
    ("mailto-query", '<a href="mailto:Sales@Acme.co.uk?subject=Hello">x</a>', "email:sales@acme.co.uk"),
    (
        "plain-email",
        "<p>Contact: jane.doe+shop@mail.example-watches.com.</p>",
        "email:jane.doe+shop@mail.example-watches.com",
    ),
    ("entity-email", "<p>info&#64;acme.org</p>", "email:info@acme.org"),
    ("tel-link", '<a href="tel:+49 341 1234567">Call</a>', "phone:+493411234567"),
    ("tel-link-encoded", '<a href="tel:%2B4934112345">Call</a>', "phone:+4934112345"),
    ("tel-link-national", "<a href='tel:0341-123456'>Call</a>", "phone:0341123456"),
    ("intl-spaces", "<p>Phone: +49 341 123 4567</p>", "phone:+493411234567"),
    ("intl-dashes", "<span>+44-20-7946-0958</span>", "phone:+442079460958"),
    ("intl-paren", "<li>Tel. +1 (415) 555-2671</li>", "phone:+14155552671"),
    ("intl-dots", "<p>(+33 1.42.68.53.00)</p>", "phone:+33142685300"),
    ("nanp-paren", "<p>Call (415) 555-2671 today</p>", "phone:4155552671"),
    ("nanp-dashes", "<p>Call 415-555-2671.</p>", "phone:4155552671"),
    ("nanp-dots", "<td>415.555.2671</td>", "phone:4155552671"),
    ("nanp-1-prefix", "<p>Toll free 1-800-555-2671</p>", "phone:8005552671"),
    ("facebook", '<a href="https://www.facebook.com/AcmeWatches/">Facebook</a>', "social:facebook.com/acmewatches"),
    (
        "facebook-profile-id",
        '<a href="https://facebook.com/profile.php?id=100064">fb</a>',
        "social:facebook.com/profile.php?id=100064",
    ),
    ("twitter", "<a href='https://twitter.com/acme_watch'>Twitter</a>", "social:twitter.com/acme_watch"),
    ("x", '<a href="https://x.com/acme_watch?ref=footer">X</a>', "social:x.com/acme_watch"),
    (
        "linkedin-company",
        '<a href="https://www.linkedin.com/company/acme-watches/">in</a>',
        "social:linkedin.com/company/acme-watches",
    ),
    (
        "linkedin-person",
        '<a href="https://de.linkedin.com/in/jane-doe-1234">in</a>',
        "social:linkedin.com/in/jane-doe-1234",
    ),
    ("instagram", '<a href="https://instagram.com/acme.watches">IG</a>', "social:instagram.com/acme.watches"),
    ("youtube-handle", '<a href="https://www.youtube.com/@AcmeWatches">YT</a>', "social:youtube.com/@acmewatches"),
    (
        "youtube-channel",
        '<a href="https://youtube.com/channel/UC1234abcd">YT</a>',
        "social:youtube.com/channel/uc1234abcd",
    ),
    ("tiktok", '<a href="https://www.tiktok.com/@acmewatches">TT</a>', "social:tiktok.com/@acmewatches"),
    ("github", '<a href="https://github.com/acme-watches">GH</a>', "social:github.com/acme-watches"),
]


@pytest.mark.parametrize(("fragment", "expected"), [c[1:] for c in POSITIVES], ids=[c[0] for c in POSITIVES])
def test_positives(fragment: str, expected: str) -> None:
    body = page(fragment)
    assert find_contacts(body) == [expected]
    assert has_contact(body)
    assert has_contact(body.decode())  # str input too


NEGATIVES: list[tuple[str, str]] = [
    ("retina-image", '<img src="/img/logo@2x.png" srcset="/img/hero@3x.webp 3x">'),
    ("retina-srcset", '<img srcset="logo@2x.png 2x, logo@3x.jpg 3x" alt="icon@2x.svg">'),
    ("version-pin", '<script src="https://cdn.jsdelivr.net/npm/bootstrap@5.3.2/dist/js/bootstrap.min.js"></script>'),
    ("scoped-version", "<script src='https://unpkg.com/@popperjs/core@2.11.8'></script>"),
    ("no-tld", "<p>ping user@localhost or admin@intranet</p>"),
    ("placeholder", '<input type="email" placeholder="you@example.com">'),
    (
        "sentry-dsn",
        "<script>Sentry.init({dsn:'https://0123456789abcdef0123456789abcdef@o123456.ingest.sentry.io/42'})</script>",
    ),
    ("url-credentials", '<a href="https://user:secret@files.acme.com/">files</a>'),
    ("css-at-rules", "<style>@media (max-width: 600px){a{color:red}} @import url(x.css);</style>"),
    ("twitter-handle-text", "<p>Follow @acme on socials</p>"),
    ("date-iso", "<time>2024-01-15</time> <time>15.01.2024</time> <p>01-02-2024 12:30</p>"),
    ("prices", "<p>Price: $1,299.00 or 1.299,00 EUR; total 12 345 678 units</p>"),
    ("ids-and-runs", "<p>Order #123456789012, SKU 4006381333931, IBAN DE89370400440532013000</p>"),
    ("nanp-invalid-area", "<p>Ref 123-456-7890 and 055-555-1234</p>"),
    ("mixed-separators", "<p>415-555.2671</p>"),
    ("js-arithmetic", "<script>var a=b+12345678;var c=x+1 ;n=+44;</script>"),
    ("short-intl", "<p>Temperature +12.5 C, +3 points</p>"),
    ("intl-unformatted-run", "<p>Counter: +123456789012 visits</p>"),
    ("hotel-colon", "<p>Hotel: 1234567 rooms; Intel: 99887766</p>"),
    ("facebook-share", '<a href="https://www.facebook.com/sharer/sharer.php?u=https%3A%2F%2Facme.de">Share</a>'),
    ("facebook-sharer-php", '<a href="https://facebook.com/sharer.php?u=x">Share</a>'),
    ("facebook-plugins", '<iframe src="https://www.facebook.com/plugins/like.php?href=x"></iframe>'),
    ("facebook-fbml-ns", '<html xmlns:fb="http://www.facebook.com/2008/fbml">'),
    ("facebook-login", '<a href="https://www.facebook.com/login/">Log in</a>'),
    ("twitter-intent", '<a href="https://twitter.com/intent/tweet?text=hi">Tweet</a>'),
    ("twitter-share", '<a href="https://twitter.com/share?url=x">Tweet</a>'),
    ("twitter-status", '<a href="https://twitter.com/someone/status/1234567890">a tweet</a>'),
    ("x-home", '<a href="https://x.com/home">X</a>'),
    ("glued-host-label", "<p>see my_twitter.com/acme and %facebook.com/acme</p>"),
    ("x-in-other-host", '<a href="https://www.dropbox.com/s/abc">dl</a> <a href="https://fox.com/news">news</a>'),
    ("linkedin-share", '<a href="https://www.linkedin.com/shareArticle?mini=true&url=x">Share</a>'),
    ("linkedin-sharing", '<a href="https://www.linkedin.com/sharing/share-offsite/?url=x">Share</a>'),
    ("instagram-post", '<a href="https://www.instagram.com/p/C1a2b3c4/">post</a>'),
    (
        "youtube-video",
        '<iframe src="https://www.youtube.com/embed/dQw4w9WgXcQ"></iframe><a href="https://youtube.com/watch?v=1">v</a>',
    ),
    ("tiktok-video", '<a href="https://www.tiktok.com/@someone/video/7234567890">v</a>'),
    ("github-repo", '<a href="https://github.com/twbs/bootstrap">Built with Bootstrap</a>'),
    ("github-login", '<a href="https://github.com/login">Sign in</a>'),
    ("facebook-numeric-ns", '<a href="https://www.facebook.com/2008">x</a>'),
]


@pytest.mark.parametrize("fragment", [c[1] for c in NEGATIVES], ids=[c[0] for c in NEGATIVES])
def test_negatives(fragment: str) -> None:
    body = page(fragment)
    assert find_contacts(body) == []
    assert not has_contact(body)


def test_find_contacts_collects_all_kinds_deduplicated() -> None:
    body = page(
        '<a href="mailto:info@acme.de">info@acme.de</a> <a href="tel:+4934112345">+49 341 12345</a>'
        '<a href="https://facebook.com/acme">f</a><a href="https://www.facebook.com/acme/">f</a>'
    )
    assert find_contacts(body) == ["email:info@acme.de", "phone:+4934112345", "social:facebook.com/acme"]
    assert find_contacts(body, max_results=1) == ["email:info@acme.de"]


def test_scan_is_bounded() -> None:
    body = page('<a href="mailto:late@acme.de">mail</a>', pad=80_000)
    assert not has_contact(body)
    assert has_contact(body, limit=len(body))
    assert has_contact(body[-200:], limit=200)
    assert not has_contact(body.decode())
    assert find_contacts(body.decode(), limit=len(body)) == ["email:late@acme.de"]


def test_odd_inputs() -> None:
    assert find_contacts(b"") == [] and not has_contact(b"")
    assert not has_contact(b"\x89PNG\r\n\x1a\n\x00\x00 info@acme.de")  # binary
    assert has_contact(b"\xff\xfe info@acme.de \xc3\x28")  # undecodable bytes around it
    assert has_contact(bytearray(b"mail info@acme.de"))  # type: ignore[arg-type]
    assert find_contacts("caf\u00e9 \udcff contact: office@caf\u00e9-acme.de office@acme.de") == [
        "email:office@acme.de"
    ]


def test_ten_megabyte_page_is_fast() -> None:
    body = page("", pad=10_000_000) + b'<a href="mailto:x@acme.de">'
    start = time.perf_counter()
    assert not has_contact(body)
    assert find_contacts(body) == []
    assert time.perf_counter() - start < 0.05


def test_typical_page_is_fast() -> None:
    """A 50 KB page without contacts (the worst case: every pass runs to the end)."""
    script = "<script>function f(a,b){return a+b+'px'}var x=[1,2,3].map(function(i){return i+1});</script>"
    body = page(script * 20 + '<img src="a@2x.png"><a href="https://fox.com/x">x</a>', pad=50_000)[:50_000]
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(100):
            find_contacts(body)
        best = min(best, (time.perf_counter() - start) / 100)
    assert best < 2e-3, f"{best * 1e6:.0f} us per 50 KB page"


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-32"])
def test_a_text_page_in_utf16_or_with_a_stray_nul_is_read_for_contacts(encoding: str) -> None:
    """The scans read a body with a NUL in its first KiB as binary (nothing in it); a text
    response is read without its NULs instead, so its (ASCII) contacts are found and a page
    without any stays empty: a useful site in UTF-16 must not go cold."""
    from scrapy.http import HtmlResponse

    from scrapy_domainstate.core.config import Config
    from scrapy_domainstate.core.record import Outcome
    from scrapy_domainstate.runtime.sources import OutcomeSource

    source = OutcomeSource(Config())
    page = "<html><body>Mail info@acme-shop.com, +49 30 1234567</body></html>"
    empty = "<html><body>Nothing to see here, only words and more words.</body></html>"

    def response(text: str, enc: str, prefix: bytes = b"") -> HtmlResponse:
        headers = {"Content-Type": f"text/html; charset={enc}"}
        return HtmlResponse("https://acme-shop.com/", body=prefix + text.encode(enc), headers=headers)

    assert source.useful(response(page, encoding)) is Outcome.OK_CONTACT
    assert source.useful(response(empty, encoding)) is Outcome.OK_EMPTY
    assert source.useful(response(page, "utf-8", b"<!doctype html>\x00")) is Outcome.OK_CONTACT
