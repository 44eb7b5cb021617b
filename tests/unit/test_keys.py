"""Tests of :mod:`scrapy_domainstate.core.keys` (docs/SPEC.md section 4, "Domain keys")."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import requests.adapters
from hypothesis import example, given, settings
from hypothesis import strategies as st

from scrapy_domainstate.core import keys
from scrapy_domainstate.core.keys import MAX_KEY_BYTES, domain_key, host_of, is_site_root


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        # plain registrable domains and subdomains
        ("example.com", "example.com"),
        ("www.example.com", "example.com"),
        ("a.b.c.example.com", "example.com"),
        # private suffixes of the PSL: every user site is its own domain
        ("alice.github.io", "alice.github.io"),
        ("bob.github.io", "bob.github.io"),
        ("www.alice.github.io", "alice.github.io"),
        ("x.blogspot.com", "x.blogspot.com"),
        ("y.x.blogspot.com", "x.blogspot.com"),
        ("bucket.s3.amazonaws.com", "bucket.s3.amazonaws.com"),
        # a host that is itself a public suffix keys by itself
        ("github.io", "github.io"),
        ("co.uk", "co.uk"),
        # multi-label suffixes
        ("example.co.uk", "example.co.uk"),
        ("www.shop.example.co.uk", "example.co.uk"),
        ("news.bbc.co.uk", "bbc.co.uk"),
        ("a.b.example.com.au", "example.com.au"),
        # IDNs: Unicode and punycode spellings give the same (ASCII) key
        ("bücher.de", "xn--bcher-kva.de"),
        ("xn--bcher-kva.de", "xn--bcher-kva.de"),
        ("www.bücher.de", "xn--bcher-kva.de"),
        ("shop.xn--bcher-kva.de", "xn--bcher-kva.de"),
        ("BÜCHER.DE", "xn--bcher-kva.de"),
        ("XN--BCHER-KVA.DE", "xn--bcher-kva.de"),
        ("пример.рф", "xn--e1afmkfd.xn--p1ai"),
        ("www.xn--e1afmkfd.xn--p1ai", "xn--e1afmkfd.xn--p1ai"),
        # fullwidth letters and full stop
        ("\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45\uff0e\uff43\uff4f\uff4d", "example.com"),
        ("www.bücher.de。", "xn--bcher-kva.de"),  # ideographic full stop as trailing dot
        # trailing dot, case, whitespace
        ("example.com.", "example.com"),
        ("www.example.com..", "example.com"),
        ("WWW.Example.COM", "example.com"),
        ("  www.example.com\n", "example.com"),
        # ports and userinfo
        ("example.com:8080", "example.com"),
        ("www.example.com:", "example.com"),
        ("http://www.example.com:8080/", "example.com"),
        ("https://user:secret@www.example.com:8443/x", "example.com"),
        ("https://user@www.example.com/", "example.com"),
        ("ftp://anonymous@ftp.example.org", "example.org"),
        # full URLs with paths, queries, fragments
        ("https://www.example.com/a/b?c=d#e", "example.com"),
        ("http://WWW.EXAMPLE.COM./path", "example.com"),
        ("https://example.com?q=1", "example.com"),
        ("https://example.com#frag", "example.com"),
        ("https://example.com\\path", "example.com"),
        ("//cdn.example.org/lib.js", "example.org"),
        ("www.example.com/path?q=1", "example.com"),
        ("HTTPS://WWW.EXAMPLE.COM/", "example.com"),
        # IPv4 literals key by the address
        ("127.0.0.1", "127.0.0.1"),
        ("http://192.168.0.10:8080/admin", "192.168.0.10"),
        ("10.0.0.1.", "10.0.0.1"),
        ("\uff11\uff12\uff17.\uff10.\uff10.\uff11", "127.0.0.1"),  # fullwidth digits map to an IPv4 literal
        # IPv6 literals: compressed, lowercase, no brackets, no zone id
        ("[::1]", "::1"),
        ("::1", "::1"),
        ("http://[::1]:8080/", "::1"),
        ("http://[2001:DB8:0:0:0:0:0:1]/x", "2001:db8::1"),
        ("2001:0db8:0000:0000:0000:0000:0000:0001", "2001:db8::1"),
        ("https://user@[2001:db8::1]:443/", "2001:db8::1"),
        ("http://[fe80::1%25eth0]:8080/", "fe80::1"),
        ("fe80::1%eth0", "fe80::1"),
        ("[fe80::1%eth0]", "fe80::1"),
        ("::ffff:192.0.2.1", "192.0.2.1"),  # IPv4-mapped: the IPv4 address
        # suffixes not in the list: last two labels
        ("foo.test", "foo.test"),
        ("a.b.foo.test", "foo.test"),
        ("localhost", "localhost"),
        ("api.app.localhost", "app.localhost"),
        ("db.corp.internal", "corp.internal"),
        ("x.y.nothing.invalid", "nothing.invalid"),
        ("www.site.example", "site.example"),
        ("http://localhost:6800/jobs", "localhost"),
        # single-label intranet names
        ("intranet", "intranet"),
        ("http://intranet/wiki/", "intranet"),
        ("INTRANET.", "intranet"),
        # no usable host
        ("", ""),
        ("   ", ""),
        (".", ""),
        ("...", ""),
        ("http://", ""),
        ("https:///path", ""),
        ("file:///etc/passwd", ""),
        ("data:text/html,<p>hi</p>", ""),
        ("mailto:someone@example.com", ""),
        ("javascript:void(0)", ""),
        ("about:blank", ""),
        ("urn:isbn:0451450523", ""),
        ("not a host", ""),
        ("http://exa mple.com/", ""),
        ("http://exa%6dple.com/", ""),
        ("http://[v1.fe80::a+en1]/", ""),
        ("\x00", ""),
        ("\ud800.com", ""),  # a lone surrogate cannot be a hostname (nor UTF-8)
    ],
)
def test_domain_key(value: str, expected: str) -> None:
    assert domain_key(value) == expected


def test_private_suffix_sites_differ() -> None:
    assert domain_key("alice.github.io") != domain_key("bob.github.io")
    assert domain_key("one.blogspot.com") != domain_key("two.blogspot.com")


@pytest.mark.parametrize(
    ("unicode", "punycode"),
    [
        ("bücher.de", "xn--bcher-kva.de"),
        ("shop.bücher.de", "shop.xn--bcher-kva.de"),
        ("https://www.bücher.de/katalog", "https://www.xn--bcher-kva.de/katalog"),
        ("münchen.example.test", "xn--mnchen-3ya.example.test"),
    ],
)
def test_idn_spellings_share_a_key(unicode: str, punycode: str) -> None:
    assert domain_key(unicode) == domain_key(punycode)
    assert domain_key(unicode, per_hostname=True) == domain_key(punycode, per_hostname=True)
    assert host_of(unicode) == host_of(punycode)


@pytest.mark.parametrize(
    "label",
    [
        "under_score",  # not IDNA-valid, common in DNS
        "a⒈",  # rejected by IDNA 2008, accepted by the IDNA 2003 codec
        "\u00ad",  # maps to nothing: an empty label for both codecs
        "x" * 70 + "ü",  # too long for either codec
        "\u0627\u0031",  # fails the bidi rule
    ],
)
def test_invalid_idn_labels_never_raise(label: str) -> None:
    for value in (f"{label}.bücher.de", f"https://www.{label}.de/", label):
        key = domain_key(value)
        assert isinstance(key, str)
        assert len(key.encode("utf-8")) <= MAX_KEY_BYTES
    assert domain_key(f"{label}.bücher.de") == "xn--bcher-kva.de"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("https://WWW.Shop.Example.co.uk:8443/a?b=1", "www.shop.example.co.uk"),
        ("alice.github.io", "alice.github.io"),
        ("www.bücher.de.", "www.xn--bcher-kva.de"),
        ("a.b.foo.test", "a.b.foo.test"),
        ("http://[2001:db8::0:1]/", "2001:db8::1"),
        ("http://192.168.0.10/", "192.168.0.10"),
        ("intranet", "intranet"),
        ("mailto:x@example.com", ""),
    ],
)
def test_per_hostname(value: str, expected: str) -> None:
    assert domain_key(value, per_hostname=True) == expected
    assert host_of(value) == expected


def test_per_hostname_switch_separates_subdomains() -> None:
    assert domain_key("a.example.com") == domain_key("b.example.com") == "example.com"
    assert domain_key("a.example.com", per_hostname=True) != domain_key("b.example.com", per_hostname=True)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://www.example.com/a/b?c=d", "www.example.com"),
        ("HTTP://User:Pw@WWW.Example.COM.:80", "www.example.com"),
        ("www.example.com", "www.example.com"),
        ("http://[::1]:8080/", "::1"),
        ("", ""),
        ("data:,hello", ""),
        ("file:///tmp/x", ""),
    ],
)
def test_host_of(url: str, expected: str) -> None:
    assert host_of(url) == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://example.com", True),
        ("https://example.com/", True),
        ("https://example.com/#top", True),
        ("https://example.com/?", True),  # an empty query is no query
        ("https://user@example.com:8443/", True),
        ("http://[::1]:8080/", True),
        ("example.com", True),
        ("example.com/", True),
        ("https://example.com/?page=2", False),
        ("https://example.com?page=2", False),
        ("https://example.com/index.html", False),
        ("https://example.com//", False),
        ("https://example.com/a/", False),
        ("", False),
        ("file:///", False),
        ("data:,x", False),
        ("mailto:x@example.com", False),
        ("http://[::1", True),  # unclosed bracket: lenient, never raises
    ],
)
def test_is_site_root(url: str, expected: bool) -> None:
    assert is_site_root(url) is expected


@pytest.mark.parametrize("value", [None, 42, b"example.com", ["example.com"]])
def test_non_str_input_is_no_host(value: object) -> None:
    assert domain_key(value) == ""  # type: ignore[arg-type]
    assert host_of(value) == ""  # type: ignore[arg-type]
    assert is_site_root(value) is False  # type: ignore[arg-type]


@pytest.mark.parametrize("per_hostname", [False, True])
@pytest.mark.parametrize(
    "value",
    [
        "a" * 1000 + ".com",
        ".".join(["label"] * 100) + ".test",
        "https://" + "ü" * 300 + ".de/",
        "x" * 5000,
        "é" * 199,
    ],
)
def test_long_keys_are_capped_with_a_digest(value: str, per_hostname: bool) -> None:
    key = domain_key(value, per_hostname=per_hostname)
    assert key
    assert len(key.encode("utf-8")) <= MAX_KEY_BYTES
    assert domain_key(value, per_hostname=per_hostname) == key  # stable


def test_long_keys_stay_distinct() -> None:
    first = domain_key("a" * 300 + "1")
    second = domain_key("a" * 300 + "2")
    assert first != second
    assert first[:150] == second[:150]
    assert "#" in first  # never produced by a normalised host, so no clash with a real key


def test_key_of_exactly_max_length_is_kept() -> None:
    host = ".".join(["a" * 48] * 4) + ".test"
    assert len(host) == MAX_KEY_BYTES
    assert domain_key(host, per_hostname=True) == host
    longer = "b" + host
    assert domain_key(longer, per_hostname=True) != longer
    assert host_of(longer) == longer  # host_of is never shortened


def test_suffix_list_is_never_downloaded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A fresh extractor builds and answers with sockets, DNS and the home directory off limits."""
    connections: list[object] = []

    def no_network(*args: object, **kwargs: object) -> None:
        connections.append(args)
        raise OSError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket.socket, "connect_ex", no_network)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(requests.adapters.HTTPAdapter, "send", no_network)
    # A tldextract that used a disk cache would read or write here.
    for name in ("HOME", "XDG_CACHE_HOME", "TLDEXTRACT_CACHE"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    monkeypatch.setenv("TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS", "https://publicsuffix.org/list/public_suffix_list.dat")

    extractor = keys._new_extractor()
    assert extractor.suffix_list_urls == ()
    result = extractor("www.alice.github.io")
    assert (result.domain, result.suffix) == ("alice", "github.io")
    assert extractor("news.bbc.co.uk").suffix == "co.uk"

    # and the module-level singleton, rebuilt from scratch, through the public API
    monkeypatch.setattr(keys, "_extractor", None)
    keys._site_key.cache_clear()
    try:
        assert domain_key("https://www.alice.github.io/") == "alice.github.io"
        assert domain_key("x.blogspot.com") == "x.blogspot.com"
    finally:
        keys._site_key.cache_clear()

    assert connections == []
    assert list(tmp_path.iterdir()) == []


def test_extractor_is_built_once() -> None:
    domain_key("https://www.example.com/")
    assert keys._get_extractor() is keys._get_extractor()


# ------------------------------------------------------------------ properties

_label = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,18}[a-z0-9])?", fullmatch=True)
_hostname = st.lists(_label, min_size=1, max_size=5).map(".".join)
_tld = st.sampled_from(["com", "co.uk", "github.io", "blogspot.com", "de", "test", "localhost", "internal", "xn--p1ai"])
_dns_host = st.one_of(_hostname, st.tuples(_hostname, _tld).map(".".join))

_junk = st.text(max_size=30)
_url_ish = st.builds(
    "{}{}{}{}{}{}{}".format,
    st.sampled_from(["", "http://", "https://", "HTTP://", "//", "ftp://", "mailto:", "data:", "x:", "://", "http:"]),
    st.one_of(st.just(""), st.builds("{}@".format, _junk)),
    st.one_of(
        _dns_host,
        _junk,
        st.ip_addresses(v=4).map(str),
        st.ip_addresses(v=6).map(lambda ip: f"[{ip}]"),
        st.ip_addresses(v=6).map(str),
        st.text(alphabet="üßé日本.-[]:%@", max_size=20),
    ),
    st.sampled_from(["", ".", "..", "。"]),
    st.one_of(st.just(""), st.integers(-1, 99999).map(lambda port: f":{port}"), _junk.map(":{}".format)),
    st.sampled_from(["", "/", "/a/b", "?q=1", "#f", "\\x", "/?", "//"]),
    _junk,
)


def _check_total(value: str) -> None:
    for per_hostname in (False, True):
        key = domain_key(value, per_hostname=per_hostname)
        assert isinstance(key, str)
        assert len(key.encode("utf-8")) <= MAX_KEY_BYTES  # strict UTF-8: storable as is
    host = host_of(value)
    assert isinstance(host, str)
    host.encode("utf-8")
    assert isinstance(is_site_root(value), bool)
    assert (domain_key(value) == "") == (host == "")


@settings(max_examples=500, deadline=None)
@given(st.text())
def test_any_text_never_raises(value: str) -> None:
    _check_total(value)


@settings(max_examples=500, deadline=None)
@given(_url_ish)
def test_any_url_ish_string_never_raises(value: str) -> None:
    _check_total(value)


@settings(max_examples=300, deadline=None)
@given(_dns_host, st.booleans())
def test_key_is_idempotent_for_dns_hosts(host: str, per_hostname: bool) -> None:
    key = domain_key(host, per_hostname=per_hostname)
    assert key
    assert domain_key(key, per_hostname=per_hostname) == key
    assert domain_key(key) == domain_key(host)
    # spelling variations do not change the key
    assert domain_key(f"https://u:p@{host.upper()}.:8080/x?y", per_hostname=per_hostname) == key


@settings(max_examples=300, deadline=None)
@given(_dns_host)
def test_site_key_is_a_suffix_of_the_host(host: str) -> None:
    key = domain_key(host)
    assert host == key or host.endswith("." + key)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["http://", "https://"]), _url_ish)
@example("http://", "\r")  # (found by CI: the general parser strips the text's trailing whitespace)
@example("https://", "a.example:80 ")
def test_fast_path_agrees_with_general_parser(prefix: str, rest: str) -> None:
    value = prefix + rest
    assert keys._raw_host(value) == keys._raw_host_slow(value)


def test_the_examples_in_keys_docstrings_hold() -> None:
    """The docstrings' ``>>>`` examples are the keys' documentation: they must stay true."""
    import doctest

    from scrapy_domainstate.core import keys

    result = doctest.testmod(keys, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 5
    assert result.failed == 0
