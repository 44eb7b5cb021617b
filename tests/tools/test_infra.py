"""The end-to-end test infrastructure works with Scrapy's real engine (no plugin involved)."""

from __future__ import annotations

import datetime
import socket
from typing import Any

import pytest
import pytest_twisted
from cryptography import x509
from OpenSSL import SSL
from scrapy import Request
from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadConnectionRefusedError,
    DownloadFailedError,
    DownloadTimeoutError,
)
from service_identity import VerificationError
from twisted.internet.address import IPv4Address
from twisted.internet.defer import Deferred
from twisted.internet.error import DNSLookupError

from scrapy_domainstate.testing.resolver import (
    DNS_TIMEOUT,
    NXDOMAIN,
    REFUSED,
    REFUSED_ADDRESS,
    SERVFAIL,
    TableResolver,
    TemporaryDNSLookupError,
    chromium_host_rules,
    validate_hosts,
)
from scrapy_domainstate.testing.sites import (
    AWS_WAF,
    BINARY,
    BURST_LIMITED,
    CF_BLOCK,
    CF_DELAYED,
    CF_HARD,
    CF_INTERACTIVE,
    CF_REDIRECT,
    CF_SOFT,
    CF_SOMETIMES,
    COLD,
    DATADOME,
    DATADOME_BAN,
    DEAD_ROOT,
    FLAKY,
    FRIENDLY,
    GONE,
    HEAD_404,
    HEAD_405,
    HEAD_500,
    HUGE,
    JS_SHELL,
    KINDS,
    PARKED,
    RATE_LIMITED,
    REDIRECT,
    SHOP,
    SHOP_CF,
    SHOP_JS,
    SHOP_SOMETIMES,
    SLOW,
    TLS_EXPIRED,
    TLS_KINDS,
    TLS_SELF_SIGNED,
    TLS_VALID,
    TLS_WRONG_HOST,
    WRONG_HOST_NAME,
    SiteServer,
)

# -- the resolver on its own ----------------------------------------------------------------------


def test_resolver_table() -> None:
    resolver = TableResolver(reactor=None, hosts={"alias.example": "127.0.0.3", "Gone.Test.": NXDOMAIN})
    assert resolver.lookup("friendly.test") == "127.0.0.1"
    assert resolver.lookup("WWW.Friendly.TEST.") == "127.0.0.1"
    assert resolver.lookup("localhost") == "127.0.0.1"
    assert resolver.lookup("app.localhost") == "127.0.0.1"
    assert resolver.lookup("alias.example") == "127.0.0.3"
    assert resolver.lookup("gone.test") == NXDOMAIN
    assert resolver.lookup("nxdomain.test") == NXDOMAIN
    assert resolver.lookup("servfail.test") == SERVFAIL
    assert resolver.lookup("refused.test") == REFUSED
    assert resolver.lookup("dns-timeout.test") == DNS_TIMEOUT
    # never the system resolver, never a non-loopback address
    assert resolver.lookup("example.com") == NXDOMAIN
    assert resolver.lookup("93.184.215.14") == NXDOMAIN
    assert resolver.lookup("10.0.0.1") == NXDOMAIN
    assert resolver.lookup("127.0.0.1") == "127.0.0.1"
    assert resolver.lookup("[::1]") == "::1"


def test_resolver_rejects_addresses_off_loopback() -> None:
    with pytest.raises(ValueError, match="DOMAINSTATE_TEST_HOSTS"):
        validate_hosts({"evil.test": "8.8.8.8"})
    with pytest.raises(ValueError, match="loopback"):
        validate_hosts({"typo.test": "nxdoman"})


def test_chromium_rules_follow_the_table() -> None:
    rules = chromium_host_rules({"down.test": REFUSED, "missing.test": NXDOMAIN}).split(", ")
    assert "MAP down.test 127.0.0.2" in rules
    assert "MAP missing.test ~NOTFOUND" in rules
    assert "MAP servfail.test ~NOTFOUND" in rules
    # exact names before the wildcards, everything unknown unresolvable
    assert rules.index("MAP down.test 127.0.0.2") < rules.index("MAP *.test 127.0.0.1")
    assert rules.index("MAP *.test 127.0.0.1") < rules.index("MAP * ~NOTFOUND")


class _Receiver:
    def __init__(self) -> None:
        self.addresses: list[Any] = []
        self.done: Deferred[list[Any]] = Deferred()

    def resolutionBegan(self, resolution: Any) -> None:
        self.resolution = resolution

    def addressResolved(self, address: Any) -> None:
        self.addresses.append(address)

    def resolutionComplete(self) -> None:
        self.done.callback(self.addresses)


@pytest_twisted.ensureDeferred
async def test_resolver_interfaces() -> None:
    from twisted.internet import reactor

    resolver = TableResolver(reactor, {"down.test": REFUSED})
    receiver = _Receiver()
    resolver.resolveHostName(receiver, "friendly.test", 8080)
    assert await receiver.done == [IPv4Address("TCP", "127.0.0.1", 8080)]
    receiver = _Receiver()
    resolver.resolveHostName(receiver, "down.test", 80)
    assert await receiver.done == [IPv4Address("TCP", REFUSED_ADDRESS, 80)]
    receiver = _Receiver()
    resolver.resolveHostName(receiver, "example.com", 80)
    assert await receiver.done == []
    with pytest.raises(TemporaryDNSLookupError, match="Temporary failure"):
        resolver.resolveHostName(_Receiver(), "servfail.test", 80)

    assert await resolver.getHostByName("friendly.test") == "127.0.0.1"
    with pytest.raises(DNSLookupError):
        await resolver.getHostByName("example.com")
    with pytest.raises(TemporaryDNSLookupError):
        await resolver.getHostByName("servfail.test")
    complex_queries = ["friendly.test", "down.test", "example.com", "servfail.test"]
    assert resolver.queries == [*complex_queries, "friendly.test", "example.com", "servfail.test"]


def test_session_resolver_is_installed(_loopback_only_dns: TableResolver) -> None:
    from twisted.internet import reactor

    assert reactor.nameResolver is _loopback_only_dns
    assert reactor.resolver is _loopback_only_dns


def test_process_cannot_resolve_real_names() -> None:
    with pytest.raises(socket.gaierror, match="blocked"):
        socket.getaddrinfo("example.com", 80)
    with pytest.raises(socket.gaierror, match="blocked"):
        socket.gethostbyname("pypi.org")
    assert socket.getaddrinfo("localhost", 80)
    assert socket.getaddrinfo("127.0.0.1", 80, type=socket.SOCK_STREAM)[0][4] == ("127.0.0.1", 80)


@pytest_twisted.ensureDeferred
async def test_run_crawl_refuses_the_system_resolver(
    sites: SiteServer, crawl_settings: dict[str, Any], run_crawl: Any, _loopback_only_dns: TableResolver
) -> None:
    from twisted.internet import reactor

    crawl_settings["TWISTED_DNS_RESOLVER"] = "scrapy.resolver.CachingThreadedResolver"
    with pytest.raises(RuntimeError, match="TableResolver"):
        await run_crawl(crawl_settings, [sites.url("friendly.test")])
    assert sites.requests() == []
    assert reactor.nameResolver is _loopback_only_dns


@pytest_twisted.ensureDeferred
async def test_run_crawl_restores_the_session_resolver(
    sites: SiteServer, crawl_settings: dict[str, Any], run_crawl: Any, _loopback_only_dns: TableResolver
) -> None:
    from twisted.internet import reactor

    result = await run_crawl(crawl_settings, [sites.url("friendly.test")])
    assert result.resolver is not _loopback_only_dns
    assert reactor.nameResolver is _loopback_only_dns
    assert reactor.resolver is _loopback_only_dns


# -- DNS and connection failures in a crawl --------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_friendly_host(sites: SiteServer, crawl_settings: dict[str, Any], run_crawl: Any) -> None:
    url = sites.url("friendly.test")
    result = await run_crawl(crawl_settings, [url, sites.url("friendly.test", "/missing")])
    response = result.response_for(url)
    assert response.status == 200
    assert response.emails == ["info@friendly.test"]
    assert b'href="tel:' in response.body
    assert response.domainstate is None  # no plugin here
    assert result.response_for(sites.url("friendly.test", "/missing")).status == 404
    assert result.items == [{"url": url, "status": 200, "emails": ["info@friendly.test"]}]
    assert result.stats["downloader/response_status_count/200"] == 1
    assert result.resolver is not None
    assert "friendly.test" in result.resolver.queries
    logged = sites.requests("friendly.test")
    assert [(r.method, r.path) for r in sorted(logged, key=lambda r: r.path)] == [("GET", "/"), ("GET", "/missing")]
    assert not any(r.browser for r in logged)
    assert all(r.user_agent.startswith("Scrapy/") for r in logged)


@pytest_twisted.ensureDeferred
async def test_dns_and_connection_failures(sites: SiteServer, crawl_settings: dict[str, Any], run_crawl: Any) -> None:
    crawl_settings["DOMAINSTATE_TEST_HOSTS"] = {"down.test": REFUSED, "missing.test": NXDOMAIN}
    urls = {
        "nxdomain": sites.url("nxdomain.test"),
        "missing": sites.url("missing.test"),
        "servfail": sites.url("servfail.test"),
        "refused": sites.url("refused.test"),
        "down": sites.url("down.test"),
        "unlisted": "http://example.com/",
        "address": "http://93.184.215.14/",
    }
    result = await run_crawl(crawl_settings, urls.values())
    assert result.responses == []

    for name in ("nxdomain", "missing", "unlisted", "address"):
        failure = result.failure_for(urls[name])
        assert failure.exc_type is CannotResolveHostError, name
        assert "no results for hostname lookup" in str(failure.exception)

    servfail = result.failure_for(urls["servfail"])
    assert servfail.exc_type is CannotResolveHostError
    assert "Temporary failure in name resolution" in str(servfail.exception)
    assert isinstance(servfail.exception.__cause__, TemporaryDNSLookupError)

    for name in ("refused", "down"):
        assert result.failure_for(urls[name]).exc_type is DownloadConnectionRefusedError, name

    assert sites.requests() == []  # nothing reached the server
    assert result.resolver is not None
    assert {"example.com", "93.184.215.14"} <= set(result.resolver.queries)


@pytest_twisted.ensureDeferred
async def test_timeouts(sites: SiteServer, crawl_settings: dict[str, Any], run_crawl: Any) -> None:
    crawl_settings["DOWNLOAD_TIMEOUT"] = 1
    slow, dns = sites.url("slow.test"), sites.url("dns-timeout.test")
    result = await run_crawl(crawl_settings, [slow, dns])
    assert result.failure_for(slow).exc_type is DownloadTimeoutError
    assert result.failure_for(dns).exc_type is DownloadTimeoutError
    assert sites.methods("slow.test") == ["GET"]


# -- the site kinds ------------------------------------------------------------------------------------

EXPECTED_GET: dict[str, tuple[int, dict[str, str], list[bytes]]] = {
    # kind: (status, headers that must be there, body fragments)
    FRIENDLY: (200, {}, [b"mailto:info@friendly.test"]),
    COLD: (200, {}, [b"<p>Our workshop"]),
    DEAD_ROOT: (404, {}, []),
    GONE: (410, {}, []),
    HEAD_404: (200, {}, [b"mailto:info@head-404.test"]),
    HEAD_405: (200, {}, [b"mailto:info@head-405.test"]),
    HEAD_500: (200, {}, [b"mailto:info@head-500.test"]),
    CF_SOFT: (
        403,
        {"cf-mitigated": "challenge", "server": "cloudflare"},
        [b"<title>Just a moment...</title>", b"_cf_chl_opt"],
    ),
    CF_SOMETIMES: (403, {"cf-mitigated": "challenge"}, [b"Just a moment..."]),
    CF_HARD: (
        403,
        {"server": "cloudflare"},
        [b"Sorry, you have been blocked", b'<span class="cf-error-code">1020</span>'],
    ),
    CF_BLOCK: (403, {"cf-mitigated": "block"}, []),
    AWS_WAF: (202, {"x-amzn-waf-action": "challenge"}, [b"awswaf.com", b"challenge.js"]),
    DATADOME: (403, {"x-dd-b": "1"}, [b"geo.captcha-delivery.com/captcha/", b"&t=fe&"]),
    DATADOME_BAN: (403, {"x-dd-b": "1"}, [b"&t=bv&"]),
    RATE_LIMITED: (429, {"retry-after": "60"}, []),
    BURST_LIMITED: (200, {}, [b"mailto:info@burst-limited.test"]),  # the first request of a burst
    PARKED: (200, {}, [b"HugeDomains"]),  # a real captured for-sale page
    FLAKY: (503, {}, []),
    SLOW: (200, {}, [b"mailto:info@slow.test"]),
    JS_SHELL: (200, {}, [b"<div id=app></div><script>"]),
    HUGE: (200, {"content-type": "text/html; charset=utf-8"}, [b"mailto:info@huge.test"]),
    BINARY: (200, {"content-type": "application/octet-stream"}, []),
    CF_DELAYED: (403, {"cf-mitigated": "challenge"}, [b"Just a moment...", b"addEventListener('load'"]),
    CF_REDIRECT: (403, {"cf-mitigated": "challenge"}, [b"Just a moment...", b"__cf_chl_f_tk"]),
    CF_INTERACTIVE: (403, {"cf-mitigated": "challenge"}, [b"Just a moment...", b"Verify you are human"]),
    SHOP: (200, {}, [b'href="/c/1"', b'href="/c/5"']),
    SHOP_CF: (403, {"cf-mitigated": "challenge"}, [b"Just a moment..."]),
    SHOP_JS: (200, {}, [b"<div id=app></div><script>", b"/c/1"]),
    SHOP_SOMETIMES: (200, {}, [b'href="/c/1"']),
}


@pytest_twisted.ensureDeferred
async def test_every_kind_with_get(sites: SiteServer, crawl_settings: dict[str, Any], run_crawl: Any) -> None:
    assert set(EXPECTED_GET) | {REDIRECT} == set(KINDS)
    sites.set_kind("slow.test", SLOW, delay=0.2)
    urls = {kind: sites.url(f"{kind}.test") for kind in KINDS}
    result = await run_crawl(crawl_settings, urls.values())
    assert result.failures == []
    for kind, (status, headers, fragments) in EXPECTED_GET.items():
        response = result.response_for(urls[kind])
        assert response.status == status, kind
        for name, value in headers.items():
            assert response.headers.get(name) == value.encode(), (kind, name)
        if kind in (CF_SOFT, CF_SOMETIMES, CF_HARD, CF_BLOCK, CF_DELAYED, CF_REDIRECT, CF_INTERACTIVE):
            assert response.headers.get("cf-ray"), kind
        for fragment in fragments:
            assert fragment in response.body, (kind, fragment)
        if kind not in (FRIENDLY, HEAD_404, HEAD_405, HEAD_500, SLOW, HUGE, BURST_LIMITED, PARKED):
            assert response.emails == [], kind
    assert len(result.response_for(urls[HUGE]).body) >= 20 * 1024 * 1024 - 64 * 1024
    redirected = result.response_for(urls[REDIRECT])
    assert redirected.url == sites.url("friendly-redirected.test")
    assert redirected.status == 200
    assert redirected.emails == ["info@friendly-redirected.test"]
    assert redirected.meta["redirect_urls"] == [urls[REDIRECT]]
    assert sites.requests("no-such-kind.test") == []


@pytest_twisted.ensureDeferred
async def test_head_vs_get_and_the_log(sites: SiteServer, crawl_settings: dict[str, Any], run_crawl: Any) -> None:
    crawl_settings["CONCURRENT_REQUESTS"] = 1
    kinds = (FRIENDLY, DEAD_ROOT, HEAD_404, HEAD_405, HEAD_500, CF_SOFT, RATE_LIMITED)
    requests = [Request(sites.url(f"{kind}.test"), method="HEAD", dont_filter=True) for kind in kinds]
    result = await run_crawl(crawl_settings, requests)
    statuses = {kind: result.response_for(sites.url(f"{kind}.test")).status for kind in kinds}
    assert statuses == {
        FRIENDLY: 200,
        DEAD_ROOT: 404,
        HEAD_404: 404,
        HEAD_405: 405,
        HEAD_500: 500,
        CF_SOFT: 403,
        RATE_LIMITED: 429,
    }
    assert result.response_for(sites.url("cf-soft.test")).headers.get("cf-mitigated") == b"challenge"
    for kind in kinds:
        assert sites.methods(f"{kind}.test") == ["HEAD"]
    assert sites.requests(method="GET") == []

    sites.reset_log()
    result = await run_crawl(crawl_settings, [sites.url("head-405.test", "/page1")])
    assert result.response_for(sites.url("head-405.test", "/page1")).status == 200
    [logged] = sites.requests("head-405.test")
    assert (logged.method, logged.path, logged.kind, logged.listener) == ("GET", "/page1", HEAD_405, "http")


@pytest_twisted.ensureDeferred
async def test_counters_and_names(sites: SiteServer, crawl_settings: dict[str, Any], run_crawl: Any) -> None:
    crawl_settings["CONCURRENT_REQUESTS"] = 1
    sites.set_kind("shop.test", FLAKY)
    urls = [sites.url(host) for host in ("flaky.test", "shop.test") for _ in range(4)]
    urls += [sites.url("cf-sometimes.test") for _ in range(4)]
    urls += [sites.url("www.cold.test"), sites.url("friendly-42.test"), sites.url("cf-soft-b.test")]
    urls += [sites.url("unknown.test")]
    result = await run_crawl(crawl_settings, urls)
    by_host: dict[str, list[int]] = {}
    for response in result.responses:  # one request at a time: in the order the server saw them
        by_host.setdefault(response.url.split("/")[2].split(":")[0], []).append(response.status)
    assert by_host["flaky.test"] == [503, 200, 503, 200]
    assert by_host["shop.test"] == [503, 200, 503, 200]
    assert by_host["cf-sometimes.test"] == [403, 200, 200, 403]
    assert by_host["www.cold.test"] == [200]
    assert by_host["friendly-42.test"] == [200]
    assert by_host["cf-soft-b.test"] == [403]
    assert by_host["unknown.test"] == [404]
    assert result.response_for(sites.url("friendly-42.test")).emails == ["info@friendly-42.test"]
    assert result.response_for(sites.url("unknown.test")).headers.get("x-test-unknown-host") == b"1"
    assert [r.kind for r in sites.requests("www.cold.test")] == [COLD]


@pytest_twisted.ensureDeferred
async def test_challenge_cookie_passes_plain_fetch(
    sites: SiteServer, crawl_settings: dict[str, Any], run_crawl: Any
) -> None:
    url = sites.url("cf-soft.test")
    request = Request(url, cookies={"ds_clear": sites.challenge_token("cf-soft.test")}, dont_filter=True)
    result = await run_crawl(crawl_settings, [request])
    assert result.response_for(url).status == 200
    assert result.response_for(url).emails == ["info@cf-soft.test"]
    [logged] = sites.requests("cf-soft.test")
    assert logged.has_cookies
    assert logged.cookies == {"ds_clear": sites.challenge_token("cf-soft.test")}


# -- HTTPS ------------------------------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_https_certificates(sites: SiteServer, crawl_settings: dict[str, Any], run_crawl: Any) -> None:
    urls = {tls: sites.url("friendly.test", tls=tls) for tls in TLS_KINDS}
    assert len(set(sites.https_ports.values())) == len(TLS_KINDS)
    result = await run_crawl(crawl_settings, urls.values())
    assert result.failures == []
    now = datetime.datetime.now(datetime.timezone.utc)
    certs: dict[str, x509.Certificate] = {}
    for tls, url in urls.items():
        response = result.response_for(url)
        assert response.status == 200
        assert response.emails == ["info@friendly.test"]
        assert response.response.certificate is not None, tls
        certs[tls] = response.response.certificate.original.to_cryptography()

    def names(cert: x509.Certificate) -> list[str]:
        return cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
            x509.DNSName
        )

    assert names(certs[TLS_VALID]) == ["friendly.test"]
    assert certs[TLS_VALID].issuer == sites.ca.cert.subject
    assert certs[TLS_VALID].not_valid_after_utc > now
    assert certs[TLS_EXPIRED].not_valid_after_utc < now
    assert names(certs[TLS_EXPIRED]) == ["friendly.test"]
    assert certs[TLS_SELF_SIGNED].issuer == certs[TLS_SELF_SIGNED].subject
    assert names(certs[TLS_WRONG_HOST]) == [WRONG_HOST_NAME]
    logged = sites.requests("friendly.test")
    assert sorted(r.listener for r in logged) == sorted(TLS_KINDS)
    assert {r.scheme for r in logged} == {"https"}


@pytest_twisted.ensureDeferred
async def test_https_verified(
    sites: SiteServer, crawl_settings: dict[str, Any], run_crawl: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With DOWNLOAD_VERIFY_CERTIFICATES and the test CA trusted, only the valid listener passes."""
    monkeypatch.setenv("SSL_CERT_FILE", str(sites.ca.path))
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    crawl_settings["DOWNLOAD_VERIFY_CERTIFICATES"] = True
    urls = {tls: sites.url("friendly.test", tls=tls) for tls in TLS_KINDS}
    result = await run_crawl(crawl_settings, urls.values())
    assert result.response_for(urls[TLS_VALID]).status == 200
    for tls in (TLS_EXPIRED, TLS_SELF_SIGNED, TLS_WRONG_HOST):
        failure = result.failure_for(urls[tls])
        # DownloadFailedError from twisted.web's ResponseNeverReceived, whose .reasons hold
        # the TLS failure: OpenSSL's "certificate verify failed" (expired or untrusted: the
        # message does not say which) or service_identity's VerificationError (wrong host)
        assert failure.exc_type is DownloadFailedError, tls
        [reason] = failure.exception.__cause__.reasons
        if tls == TLS_WRONG_HOST:
            assert reason.check(VerificationError), reason
        else:
            assert reason.check(SSL.Error) and "certificate verify failed" in str(reason.value), reason


# -- the browser ---------------------------------------------------------------------------------------


@pytest.mark.browser
@pytest_twisted.ensureDeferred
async def test_browser_passes_the_js_challenge(
    sites: SiteServer, browser_settings: dict[str, Any], run_crawl: Any
) -> None:
    cf_soft, js_shell = sites.url("cf-soft.test"), sites.url("js-shell.test")
    browser_settings["DOMAINSTATE_TEST_HOSTS"] = {"down.test": REFUSED}
    plain = [cf_soft, js_shell]
    tab = [Request(url, meta={"playwright": True}, dont_filter=True) for url in plain]
    tab += [
        Request(url, meta={"playwright": True}, dont_filter=True)
        for url in (
            sites.url("aws-waf.test"),
            sites.url("cf-hard.test"),
            sites.url("nxdomain.test"),
            sites.url("down.test"),
            "http://example.com/",
        )
    ]
    browser_settings["CONCURRENT_REQUESTS"] = 4
    result = await run_crawl(browser_settings, [*plain, *tab])

    def pick(url: str, browser: bool) -> Any:
        [response] = [r for r in result.responses_for(url) if r.browser == browser]
        return response

    # plain Scrapy: the challenge, no contacts
    assert pick(cf_soft, False).status == 403
    assert b"Just a moment..." in pick(cf_soft, False).body
    assert pick(cf_soft, False).emails == []
    assert pick(js_shell, False).emails == []
    # the browser runs the challenge's JS, gets the cookie and the real page; note that
    # scrapy-playwright reports the status and headers of the first (challenge) response
    assert pick(cf_soft, True).emails == ["info@cf-soft.test"]
    assert b"Just a moment..." not in pick(cf_soft, True).body
    assert pick(cf_soft, True).status == 403
    assert pick(js_shell, True).emails == ["info@js-shell.test"]
    assert pick(sites.url("aws-waf.test"), True).emails == ["info@aws-waf.test"]
    assert b"Sorry, you have been blocked" in pick(sites.url("cf-hard.test"), True).body

    # the server log tells browser requests apart, and shows the cookie the JS set
    browser_gets = [r for r in sites.requests("cf-soft.test", path="/") if r.browser]
    assert [r.has_cookies for r in browser_gets] == [False, True]
    assert "HeadlessChrome" in browser_gets[0].user_agent
    assert [r.browser for r in sites.requests("cf-soft.test", path="/")].count(False) == 1

    # Chromium resolves from the same table and never reaches the network
    errors = {f.url: str(f.exception) for f in result.failures}
    assert "ERR_NAME_NOT_RESOLVED" in errors[sites.url("nxdomain.test")]
    assert "ERR_NAME_NOT_RESOLVED" in errors["http://example.com/"]
    assert "ERR_CONNECTION_REFUSED" in errors[sites.url("down.test")]
    assert len(result.failures) == 3
