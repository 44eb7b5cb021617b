"""End to end: Scrapy's real engine, the add-on, the loopback sites, a real LMDB store.

The first crawl learns, the second (same store) skips what is dead or cold, sends
no HEAD to friendly sites, and sends antibot-hard sites to the browser only.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
import pytest_twisted
from scrapy import Request
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response

from scrapy_domainstate import signals as ds_signals
from scrapy_domainstate.core.config import Config, ConfigError
from scrapy_domainstate.core.keys import purpose_key
from scrapy_domainstate.core.policy import NOT_SCANNED
from scrapy_domainstate.core.record import Method, Outcome, State
from scrapy_domainstate.store.lmdb import LmdbStore
from scrapy_domainstate.store.memory import MemoryStore
from scrapy_domainstate.testing.resolver import HOSTS_SETTING
from tests import NEEDS_SCRAPY_2_19, SEED_READINGS

ADDON = {"scrapy_domainstate.Addon": 0}


def states(settings: dict[str, Any], *domains: str) -> dict[str, State]:
    store = LmdbStore(Config.from_settings(settings))
    store.open()
    try:
        return {d: store.current(d, _now()).state for d in domains}
    finally:
        store.close()


def record_of(settings: dict[str, Any], domain: str) -> Any:
    store = LmdbStore(Config.from_settings(settings))
    store.open()
    try:
        return store.get(domain)
    finally:
        store.close()


def _now() -> float:
    import time

    return time.time()


def ds(settings: dict[str, Any]) -> dict[str, Any]:
    """The add-on, with the seed's readings (:data:`tests.SEED_READINGS`)."""
    return {**settings, **SEED_READINGS, "ADDONS": ADDON}


def ds_defaults(settings: dict[str, Any]) -> dict[str, Any]:
    """The add-on with the shipped defaults."""
    return {**settings, "ADDONS": ADDON}


# The same page several times (the recording spider sends dont_filter=True).
def pages(sites: Any, host: str, n: int, tls: str | None = None) -> list[str]:
    paths = ["/", "/page1", "/page2", "/contact"]
    return [sites.url(host, paths[i % len(paths)], tls=tls) for i in range(n)]


@pytest_twisted.ensureDeferred
async def test_first_crawl_learns_second_crawl_remembers(sites: Any, crawl_settings: Any, run_crawl: Any) -> None:
    settings = ds(crawl_settings)
    urls = [
        *pages(sites, "friendly.test", 6),
        *pages(sites, "cold.test", 6),
        sites.url("dead-root.test"),
        sites.url("nxdomain.test"),
        sites.url("refused.test"),
        sites.url("cf-hard.test"),
        sites.url("friendly.test", "/missing"),
    ]
    first = await run_crawl(settings, urls)
    learned = states(
        settings, "friendly.test", "cold.test", "dead-root.test", "nxdomain.test", "refused.test", "cf-hard.test"
    )
    assert learned == {
        "friendly.test": State.FRIENDLY,
        "cold.test": State.COLD,
        "dead-root.test": State.DEAD,
        "nxdomain.test": State.DEAD,
        "refused.test": State.DEAD,
        "cf-hard.test": State.ANTIBOT_HARD,
    }
    # One HEAD per domain in the first crawl, however many requests it had.
    assert sites.methods("friendly.test").count("HEAD") == 1
    assert sites.methods("cold.test").count("HEAD") == 1
    assert first.stats["domainstate/transition/unknown/friendly"] == 1
    assert first.stats["domainstate/transition/unknown/cold"] == 1
    assert first.stats["domainstate/transition/unknown/dead"] == 3
    assert first.stats["domainstate/url_dead/marked"] == 1
    assert first.stats["domainstate/state_at_close/dead"] == 3
    # The 404 off the root did not touch the friendly domain.
    assert learned["friendly.test"] is State.FRIENDLY

    sites.reset_log()
    second = await run_crawl(settings, urls)
    # Dead and cold domains and the dead URL: skipped, nothing sent.
    for host in ("cold.test", "dead-root.test", "refused.test"):
        assert sites.requests(host) == [], host
    skipped = [f for f in second.failures if isinstance(f.exception, IgnoreRequest)]
    # cold x6, dead-root, nxdomain, refused, /missing (cf-hard's one request is the crawl's canary)
    assert len(skipped) == 6 + 1 + 1 + 1 + 1
    for failure in skipped:
        assert failure.domainstate["method"] == "skip"
        assert failure.domainstate["state"] in ("cold", "dead", "antibot-hard")
    assert "domain cold.test is cold" in str(second.failures_for(sites.url("cold.test"))[0].exception)
    # Friendly: no HEAD, plain fetches only.
    assert sites.methods("friendly.test") == ["GET"] * 6
    for response in second.responses_for(sites.url("friendly.test")):
        assert response.domainstate["method"] == "fetch"
        assert response.domainstate["state"] == "friendly"
    # Antibot-hard without a browser handler: the crawl's first request is its canary, a plain
    # fetch (docs/SPEC.md section 2), which the wall still answers; the domain stays hard.
    # (With a browser the rest go there only: test_antibot_hard_goes_to_the_browser_only.)
    hard = second.responses_for(sites.url("cf-hard.test"))
    assert len(hard) == 1
    assert "playwright" not in hard[0].meta
    assert hard[0].domainstate["method"] == "fetch"
    assert sites.methods("cf-hard.test") == ["GET"]
    assert second.stats["domainstate/canary"] == 1
    assert states(settings, "cf-hard.test")["cf-hard.test"] is State.ANTIBOT_HARD
    assert second.stats["domainstate/method/skip"] == 10
    assert second.stats.get("domainstate/method/head", 0) == 0


@pytest_twisted.ensureDeferred
async def test_probe_once_per_domain_with_concurrent_requests(sites: Any, crawl_settings: Any, run_crawl: Any) -> None:
    settings = {**ds(crawl_settings), "CONCURRENT_REQUESTS": 16, "CONCURRENT_REQUESTS_PER_DOMAIN": 8}
    sites.set_kind("slowhead.test", "slow", delay=0.5)
    urls = pages(sites, "slowhead.test", 8)
    result = await run_crawl(settings, urls)
    assert sites.methods("slowhead.test").count("HEAD") == 1
    assert sites.methods("slowhead.test").count("GET") == 8
    assert len(result.responses) == 8
    assert result.stats["domainstate/probe/waited"] >= 1


@pytest_twisted.ensureDeferred
async def test_probe_wait_times_out_without_deadlock(sites: Any, crawl_settings: Any, run_crawl: Any) -> None:
    # The HEAD probe hangs longer than DOMAINSTATE_PROBE_TIMEOUT: waiting requests go on.
    settings = {
        **ds(crawl_settings),
        "DOMAINSTATE_PROBE_TIMEOUT": 0.5,
        "DOWNLOAD_TIMEOUT": 5,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 8,
    }
    sites.set_kind("hang.test", "slow", delay=2.0)
    result = await run_crawl(settings, pages(sites, "hang.test", 3))
    assert sites.methods("hang.test").count("HEAD") == 1
    # The probe itself timed out (network-error), the GETs were sent anyway.
    assert result.stats["domainstate/outcome/network-error"] >= 1
    assert sites.methods("hang.test").count("GET") == 3


@pytest_twisted.ensureDeferred
async def test_head_not_conclusive(sites: Any, crawl_settings: Any, run_crawl: Any) -> None:
    settings = ds(crawl_settings)
    urls = [sites.url("head-404.test"), sites.url("head-405.test"), sites.url("head-500.test")]
    result = await run_crawl(settings, urls)
    learned = states(settings, "head-404.test", "head-405.test", "head-500.test")
    assert set(learned.values()) == {State.UNKNOWN}
    for url in urls:
        assert result.response_for(url).status == 200
    rec = record_of(settings, "head-404.test")
    assert [(e.method, e.outcome) for e in rec.recent] == [
        (Method.HEAD, Outcome.DEAD),
        (Method.FETCH, Outcome.OK_CONTACT),
    ]
    # 405 says nothing: only the fetch is in the history.
    assert [e.method for e in record_of(settings, "head-405.test").recent] == [Method.FETCH]


@pytest_twisted.ensureDeferred
async def test_failures_are_classified(sites: Any, crawl_settings: Any, run_crawl: Any) -> None:
    settings = {**ds(crawl_settings), "DOWNLOAD_TIMEOUT": 1}
    sites.set_kind("slow.test", "slow", delay=3)
    urls = [
        sites.url("slow.test"),
        sites.url("aws-waf.test"),
        sites.url("rate-limited.test"),
        sites.url("datadome-ban.test"),
        sites.url("servfail.test"),
    ]
    await run_crawl(settings, urls)
    assert states(settings, "slow.test")["slow.test"] is State.UNKNOWN  # timeouts are never dead
    # The HEAD (its own 15 s timeout) waited for the slow answer: no verdict. The GET timed out.
    # (No browser here: not re-issued; a plain re-fetch is never recorded as a render.)
    assert [(e.method, e.outcome) for e in record_of(settings, "slow.test").recent] == [
        (Method.FETCH, Outcome.NETWORK_ERROR)
    ]
    # AWS WAF answers its challenge with 202: antibot, never ok-empty.
    waf = record_of(settings, "aws-waf.test")
    assert waf.fetch_ok_empty == 0
    assert Outcome.ANTIBOT in {e.outcome for e in waf.recent}
    assert states(settings, "rate-limited.test")["rate-limited.test"] in (State.ANTIBOT_SOFT, State.ANTIBOT_HARD)
    assert states(settings, "datadome-ban.test")["datadome-ban.test"] is State.ANTIBOT_HARD
    servfail = record_of(settings, "servfail.test")
    assert {e.outcome for e in servfail.recent} == {Outcome.NETWORK_ERROR}
    assert servfail.state is State.UNKNOWN


@NEEDS_SCRAPY_2_19
@pytest_twisted.ensureDeferred
async def test_tls_certificates_are_dead_signals(sites: Any, crawl_settings: Any, run_crawl: Any) -> None:
    settings = ds(crawl_settings)
    hosts = {"expired": "tls-expired.test", "self-signed": "tls-self.test", "valid": "tls-ok.test"}
    # Sites with nothing useful behind a bad certificate (an abandoned one's default page):
    # the certificate is a dead signal; the valid one has contacts.
    for host in hosts.values():
        sites.set_kind(host, "cold")
    sites.set_kind("tls-ok.test", "friendly")
    urls = [sites.url(host, "/", tls=kind) for kind, host in hosts.items()]
    await run_crawl(settings, urls)
    learned = states(settings, *hosts.values())
    assert learned["tls-expired.test"] is State.UNKNOWN  # one signal (the GET): not dead yet
    expired = record_of(settings, "tls-expired.test")
    assert expired.recent[-1].outcome is Outcome.DEAD
    assert expired.recent[-1].error_class == "tls:expired"
    assert record_of(settings, "tls-self.test").recent[-1].error_class == "tls:self-signed"
    assert record_of(settings, "tls-ok.test").recent[-1].outcome is Outcome.OK_CONTACT
    # A second crawl confirms: two dead signals in a row.
    await run_crawl(settings, urls[:1])
    assert states(settings, "tls-expired.test")["tls-expired.test"] is State.DEAD


@NEEDS_SCRAPY_2_19
@pytest_twisted.ensureDeferred
async def test_useful_site_behind_a_bad_certificate_is_never_dead(
    sites: Any, crawl_settings: Any, run_crawl: Any
) -> None:
    # docs/SPEC.md section 2: a dead signal that contradicts useful pages is a misconfigured
    # server, not an abandoned site.
    settings = ds(crawl_settings)
    sites.set_kind("tls-useful.test", "friendly")
    urls = [sites.url("tls-useful.test", path, tls="expired") for path in ("/", "/page1", "/page2")]
    for _ in range(3):
        await run_crawl(settings, urls)
        assert states(settings, "tls-useful.test")["tls-useful.test"] is not State.DEAD
    stat = record_of(settings, "tls-useful.test")
    # every page was useful; once friendly, its pages are recorded unscanned (their certificate
    # with them: a site that yielded useful pages is never dead by it)
    assert stat.state is State.FRIENDLY and stat.fetch_ok >= 5 and stat.fetch_total >= 9
    fetched = [e for e in stat.recent if e.method is Method.FETCH]
    assert all(e.outcome is Outcome.OK_CONTACT or e.error_class == NOT_SCANNED for e in fetched), fetched


@pytest_twisted.ensureDeferred
async def test_force_fetches_a_skipped_domain_and_records(sites: Any, crawl_settings: Any, run_crawl: Any) -> None:
    settings = ds(crawl_settings)
    await run_crawl(settings, [sites.url("dead-root.test")])
    assert states(settings, "dead-root.test")["dead-root.test"] is State.DEAD
    sites.reset_log()
    forced = Request(sites.url("dead-root.test"), meta={"domainstate_force": True}, dont_filter=True)
    result = await run_crawl(settings, [forced])
    assert sites.methods("dead-root.test") == ["GET"]
    assert result.stats["domainstate/forced"] == 1
    assert record_of(settings, "dead-root.test").fetch_total == 2


@pytest_twisted.ensureDeferred
async def test_http_cache_responses_are_not_evidence(
    sites: Any, crawl_settings: Any, run_crawl: Any, tmp_path: Any
) -> None:
    settings = {
        **ds(crawl_settings),
        "HTTPCACHE_ENABLED": True,
        "HTTPCACHE_DIR": str(tmp_path / "httpcache"),
        "DOMAINSTATE_HEAD_PROBE": False,
    }
    url = sites.url("cold.test")
    await run_crawl(settings, [url])
    before = record_of(settings, "cold.test")
    second = await run_crawl(settings, [url])
    assert second.response_for(url).domainstate["method"] == "cache"
    assert second.stats["domainstate/method/cache"] == 1
    assert second.stats.get("domainstate/method/fetch", 0) == 0  # counted once, as cache
    assert "domainstate/outcome/ok-empty" not in second.stats
    assert record_of(settings, "cold.test").fetch_total == before.fetch_total == 1


class SignalRecorder:
    events: ClassVar[list[tuple[str, Any]]] = []

    @classmethod
    def from_crawler(cls, crawler: Any) -> SignalRecorder:
        ext = cls()
        crawler.signals.connect(ext.recorded, signal=ds_signals.outcome_recorded)
        crawler.signals.connect(ext.changed, signal=ds_signals.state_changed)
        return ext

    def recorded(self, domain: str, entry: Any, stat: Any, request: Any, spider: Any) -> None:
        self.events.append(("outcome", (domain, entry.outcome)))

    def changed(self, transition: Any, stat: Any, request: Any, spider: Any) -> None:
        self.events.append(("state", (transition.domain, transition.old, transition.new)))


@pytest_twisted.ensureDeferred
async def test_signals_and_state_change_log(sites: Any, crawl_settings: Any, run_crawl: Any, caplog: Any) -> None:
    SignalRecorder.events = []
    settings = {**ds(crawl_settings), "EXTENSIONS": {SignalRecorder: 0}}
    caplog.set_level("INFO", logger="scrapy_domainstate")
    await run_crawl(settings, [sites.url("dead-root.test")])
    assert ("outcome", ("dead-root.test", Outcome.DEAD)) in SignalRecorder.events
    assert ("state", ("dead-root.test", State.UNKNOWN, State.DEAD)) in SignalRecorder.events
    assert any("dead-root.test: unknown -> dead" in r.getMessage() for r in caplog.records)


def _no_contacts(response: Response) -> bool:
    return False


@pytest_twisted.ensureDeferred
async def test_outcome_sources(sites: Any, crawl_settings: Any, run_crawl: Any) -> None:
    # items: the recording spider yields an item only for pages with an e-mail.
    settings = {**ds(crawl_settings), "DOMAINSTATE_OUTCOME": "items", "DOMAINSTATE_HEAD_PROBE": False}
    await run_crawl(settings, [*pages(sites, "friendly.test", 2), *pages(sites, "cold.test", 2)])
    # what the pages were worth is this purpose's (docs/SPEC.md section 3): kept apart
    assert record_of(settings, "friendly.test|items").fetch_ok == 2
    assert record_of(settings, "cold.test|items").fetch_ok_empty == 2
    assert record_of(settings, "friendly.test").fetch_ok == 0  # the site's record: fetched, alive
    assert record_of(settings, "friendly.test").fetch_total == 2
    # a user callable
    settings2 = {
        **settings,
        "DOMAINSTATE_OUTCOME": f"{__name__}._no_contacts",
        "DOMAINSTATE_LMDB_PATH": settings["DOMAINSTATE_LMDB_PATH"] + "-2",
    }
    await run_crawl(settings2, pages(sites, "friendly.test", 2))
    rec = record_of(settings2, purpose_key("friendly.test", f"{__name__}._no_contacts"))
    assert (rec.fetch_ok, rec.fetch_ok_empty) == (0, 2)


@pytest_twisted.ensureDeferred
async def test_bad_setting_fails_at_start_naming_it(crawl_settings: Any, run_crawl: Any, sites: Any) -> None:
    settings = {**ds(crawl_settings), "DOMAINSTATE_COLD_THRESHOLD": -1}
    with pytest.raises(ConfigError, match="DOMAINSTATE_COLD_THRESHOLD"):
        await run_crawl(settings, [sites.url("friendly.test")])


class DisabledSpiderMixin:
    domainstate_enabled = False


@pytest_twisted.ensureDeferred
async def test_per_spider_switch_off(sites: Any, crawl_settings: Any, run_crawl: Any) -> None:
    from scrapy_domainstate.testing.crawl import RecordingSpider

    class Off(RecordingSpider):
        name = "off"
        custom_settings: ClassVar[dict[str, Any]] = {"DOMAINSTATE_ENABLED": False}

    class OffByAttribute(RecordingSpider):
        name = "off-attr"
        domainstate_enabled = False

    for spider_cls in (Off, OffByAttribute):
        sites.reset_log()
        result = await run_crawl(ds(crawl_settings), [sites.url("friendly.test")], spider_cls=spider_cls)
        assert sites.methods("friendly.test") == ["GET"]
        assert result.response_for(sites.url("friendly.test")).domainstate is None


class BrokenStore(MemoryStore):
    def _load_raw(self, domain: str) -> Any:
        raise OSError("disk on fire")

    def _write_batch(self, batch: Any) -> Any:
        raise OSError("disk on fire")


@pytest_twisted.ensureDeferred
async def test_store_errors_degrade_to_fetch(sites: Any, crawl_settings: Any, run_crawl: Any, caplog: Any) -> None:
    settings = {
        **ds(crawl_settings),
        "DOMAINSTATE_STORE": f"{__name__}.BrokenStore",
        "DOMAINSTATE_FLUSH_SIZE": 1,
    }
    result = await run_crawl(settings, pages(sites, "friendly.test", 3))
    assert len(result.responses) == 3
    assert result.stats["domainstate/store_error"] >= 3
    warnings = [r for r in caplog.records if "the store failed" in r.getMessage()]
    assert len(warnings) == 1


@pytest_twisted.ensureDeferred
async def test_odd_bodies_and_urls(sites: Any, crawl_settings: Any, run_crawl: Any) -> None:
    settings = {**ds(crawl_settings), "DOWNLOAD_MAXSIZE": 64 * 1024 * 1024}
    urls = [sites.url("huge.test"), sites.url("binary.test"), sites.url("binary.test", "/logo.png")]
    extra = [Request("http://[::1]:1/"), Request("http://127.0.0.1:1/x")]
    result = await run_crawl(settings, [*urls, *extra])
    assert result.response_for(sites.url("huge.test")).status == 200
    assert record_of(settings, "huge.test").fetch_ok == 1
    # Binary responses are not evidence: the domain is not pushed toward cold.
    assert record_of(settings, "binary.test").fetch_ok_empty == 0
    assert result.stats["domainstate/not_evidence"] >= 1
    assert len(result.failures) == 2  # the refused IP literals, recorded under their address
    assert record_of(settings, "::1") is not None


@pytest_twisted.ensureDeferred
async def test_per_hostname_tracking(sites: Any, crawl_settings: Any, run_crawl: Any) -> None:
    settings = {**ds(crawl_settings), "DOMAINSTATE_PER_HOSTNAME": True, HOSTS_SETTING: {}}
    await run_crawl(settings, [sites.url("www.cold.test"), sites.url("cold.test")])
    assert record_of(settings, "www.cold.test") is not None
    assert record_of(settings, "cold.test") is not None


# ------------------------------------------------------------------ browser


@pytest.mark.browser
@pytest_twisted.ensureDeferred
async def test_browser_fallback_passes_a_javascript_challenge(
    sites: Any, browser_settings: Any, run_crawl: Any
) -> None:
    settings = {**ds(browser_settings)}
    url = sites.url("cf-soft.test")
    shell = sites.url("js-shell.test")
    result = await run_crawl(settings, [url, shell])
    # HEAD saw the challenge header; the plain GET got the challenge; the browser passed it.
    passed = result.response_for(url)
    assert passed.browser
    # The browser handler reported the challenge's 403; the page delivered is the real one.
    assert passed.status == 200
    assert passed.domainstate["original_status"] == 403
    assert passed.emails == ["info@cf-soft.test"]
    assert passed.domainstate["method"] == "tab"
    assert result.stats["domainstate/browser_reissue"] == 2
    rec = record_of(settings, "cf-soft.test")
    assert rec.state is State.ANTIBOT_SOFT
    assert [(e.method, e.outcome) for e in rec.recent] == [
        (Method.HEAD, Outcome.ANTIBOT),
        (Method.FETCH, Outcome.ANTIBOT),
        (Method.TAB, Outcome.OK_CONTACT),
    ]
    assert rec.tab_ok == 1
    # The script-only shell rendered in the browser shows its contacts.
    assert result.response_for(shell).emails == ["info@js-shell.test"]
    assert any(r.browser for r in sites.requests("js-shell.test"))


@pytest.mark.browser
@pytest_twisted.ensureDeferred
async def test_antibot_hard_goes_to_the_browser_only(sites: Any, browser_settings: Any, run_crawl: Any) -> None:
    settings = ds(browser_settings)
    await run_crawl(settings, [sites.url("cf-hard.test")])
    assert states(settings, "cf-hard.test")["cf-hard.test"] is State.ANTIBOT_HARD
    sites.reset_log()
    await run_crawl(settings, pages(sites, "cf-hard.test", 2))
    logged = sites.requests("cf-hard.test")
    # one plain GET, the crawl's canary (the wall answers it, the browser re-issues it); the
    # other page waited for it, then went to the browser only
    assert [r.method for r in logged if not r.browser] == ["GET"]
    assert len([r for r in logged if r.browser]) == 2


@pytest_twisted.ensureDeferred
async def test_robots_txt_is_obeyed_without_deadlock_and_is_not_evidence(
    sites: Any, crawl_settings: Any, run_crawl: Any
) -> None:
    settings = {**ds(crawl_settings), "ROBOTSTXT_OBEY": True, "DOMAINSTATE_PROBE_TIMEOUT": 30}
    result = await run_crawl(settings, pages(sites, "friendly.test", 2))
    assert len(result.responses) == 2
    assert sites.requests("friendly.test", path="/robots.txt")  # Scrapy fetched it (404 here)
    rec = record_of(settings, "friendly.test")
    assert rec.fetch_total == 2  # the robots.txt 404 is neither a fetch nor a failure
    assert result.stats.get("domainstate/url_dead/marked", 0) == 0


@pytest_twisted.ensureDeferred
async def test_404_off_the_root_marks_the_url_only(sites: Any, crawl_settings: Any, run_crawl: Any) -> None:
    settings = ds(crawl_settings)
    missing = sites.url("friendly.test", "/missing")
    await run_crawl(settings, [sites.url("friendly.test"), missing])
    rec = record_of(settings, "friendly.test")
    assert [e.outcome for e in rec.recent if e.method is Method.FETCH] == [Outcome.OK_CONTACT]
    sites.reset_log()
    second = await run_crawl(settings, [missing, sites.url("friendly.test", "/page1")])
    assert sites.requests("friendly.test", path="/missing") == []
    assert "dead URL" in str(second.failure_for(missing).exception)
    assert len(sites.requests("friendly.test", path="/page1")) == 1


# ------------------------------------------------------------------ edge cases: copied meta, cached probes, other schemes, redirects, the proxy


class FollowWithMetaSpider:
    """A callback that follows links with ``meta=response.meta``, a common Scrapy idiom."""

    @staticmethod
    def build(targets: list[str]) -> Any:
        from scrapy_domainstate.testing.crawl import RecordingSpider

        class Follow(RecordingSpider):
            name = "follow-meta"

            def parse(self, response: Response) -> Any:
                yield from super().parse(response)
                if not response.meta.get("child"):
                    for url in targets:
                        meta = {**response.meta, "child": True}
                        yield Request(url, callback=self.parse, errback=self.on_error, meta=meta, dont_filter=True)

        return Follow


@pytest_twisted.ensureDeferred
async def test_copied_meta_does_not_record_twice(sites: Any, crawl_settings: Any, run_crawl: Any) -> None:
    # items: the parent's pending outcome must not ride along into a child request.
    settings = {**ds(crawl_settings), "DOMAINSTATE_OUTCOME": "items", "DOMAINSTATE_HEAD_PROBE": False}
    spider = FollowWithMetaSpider.build([sites.url("friendly.test", "/missing")])
    result = await run_crawl(settings, [sites.url("friendly.test")], spider_cls=spider)
    assert len(result.responses) == 2  # the parent and the child's 404 (HTTPERROR_ALLOW_ALL)
    rec = record_of(settings, "friendly.test")
    assert rec.fetch_total == 1  # only the parent; the 404 off the root is not evidence
    assert result.stats["domainstate/outcome/ok-contact"] == 1


def rendered_by_stand_in(response: Response) -> bool:
    return bool(response.meta.get("ds_browser"))


@pytest_twisted.ensureDeferred
async def test_copied_reissue_meta_does_not_bypass_the_decision(
    sites: Any, crawl_settings: Any, run_crawl: Any
) -> None:
    # A "browser" handler stand-in: the browser meta is harmless, the plain handler serves it,
    # and a render check of the user's own says what it "rendered".
    settings = {
        **ds(crawl_settings),
        "DOMAINSTATE_BROWSER_META": {"ds_browser": True},
        "DOMAINSTATE_BROWSER_RENDERED": "tests.scrapy.test_e2e.rendered_by_stand_in",
    }
    await run_crawl(settings, [sites.url("dead-root.test")])
    assert states(settings, "dead-root.test")["dead-root.test"] is State.DEAD
    sites.reset_log()
    # js-shell.test's plain fetch is re-issued "in the browser"; its callback follows a link
    # to the dead domain with meta=response.meta: the child is decided (skipped), not re-issued.
    spider = FollowWithMetaSpider.build([sites.url("dead-root.test", "/page1")])
    result = await run_crawl(settings, [sites.url("js-shell.test")], spider_cls=spider)
    assert result.stats["domainstate/browser_reissue"] == 1
    assert sites.requests("dead-root.test") == []
    child = result.failure_for(sites.url("dead-root.test", "/page1"))
    assert isinstance(child.exception, IgnoreRequest)
    assert child.domainstate["method"] == "skip"
    assert child.domainstate["domain"] == "dead-root.test"


@pytest_twisted.ensureDeferred
async def test_cached_head_probe_is_not_evidence(
    sites: Any, crawl_settings: Any, run_crawl: Any, tmp_path: Any
) -> None:
    settings = {**ds(crawl_settings), "HTTPCACHE_ENABLED": True, "HTTPCACHE_DIR": str(tmp_path / "httpcache")}
    url = sites.url("dead-root.test")
    await run_crawl(settings, [url])  # HEAD 404 + GET 404 on the root: dead; both cached
    assert states(settings, "dead-root.test")["dead-root.test"] is State.DEAD
    store = LmdbStore(Config.from_settings(settings))
    with store:
        store.delete("dead-root.test")  # an operator's `scrapy domainstate reset`
    second = await run_crawl(settings, [url])
    assert not second.failures, [(f.exception, f.domainstate) for f in second.failures]
    assert second.response_for(url).domainstate["method"] == "cache"
    # Both the HEAD and the GET came from the cache: neither is evidence.
    rec = record_of(settings, "dead-root.test")
    assert rec.state is State.UNKNOWN
    assert rec.recent == []
    assert "domainstate/outcome/dead" not in second.stats


@pytest_twisted.ensureDeferred
async def test_non_http_schemes_are_left_alone(sites: Any, crawl_settings: Any, run_crawl: Any, tmp_path: Any) -> None:
    # file://localhost/... has a host, but no site to probe with HEAD (Scrapy's file handler
    # ignores the method and reads the file) and no browser fallback.
    page = tmp_path / "page.html"
    page.write_text("<html><body>mail info@example.com</body></html>")
    url = f"file://localhost{page}"
    result = await run_crawl(ds(crawl_settings), [url, "data:text/html,<p>hi</p>"])
    assert len(result.responses) == 2
    assert all(r.domainstate is None for r in result.responses)
    assert result.stats.get("domainstate/method/head", 0) == 0
    assert not any(k.startswith("domainstate/outcome/") for k in result.stats)
    assert record_of(crawl_settings, "localhost") is None


@pytest_twisted.ensureDeferred
async def test_redirects_delivered_as_is_are_not_evidence(sites: Any, crawl_settings: Any, run_crawl: Any) -> None:
    # dont_redirect: the callback gets the 301 itself. Five of them must not make the site cold.
    settings = {**ds(crawl_settings), "DOMAINSTATE_HEAD_PROBE": False}
    urls = [Request(url, meta={"dont_redirect": True}, dont_filter=True) for url in pages(sites, "redirect.test", 5)]
    result = await run_crawl(settings, urls)
    assert [r.status for r in result.responses] == [301] * 5
    rec = record_of(settings, "redirect.test")
    assert rec is None or (rec.fetch_ok_empty == 0 and rec.state is State.UNKNOWN)
    assert "domainstate/outcome/ok-empty" not in result.stats
    assert all(r.domainstate["method"] == "fetch" for r in result.responses)


@pytest_twisted.ensureDeferred
async def test_default_crawl_logs_no_warning(sites: Any, crawl_settings: Any, run_crawl: Any, caplog: Any) -> None:
    caplog.set_level("INFO")
    await run_crawl(ds(crawl_settings), pages(sites, "friendly.test", 2))
    warnings = [r.getMessage() for r in caplog.records if r.levelname in ("WARNING", "ERROR", "CRITICAL")]
    # only the one start-up warning of no-browser mode (no browser handler in these settings)
    assert len(warnings) == 1 and warnings[0].startswith("scrapy-domainstate: no browser ("), warnings


@pytest_twisted.ensureDeferred
async def test_middleware_listed_alone_still_saves_what_it_learned(
    sites: Any, crawl_settings: Any, run_crawl: Any
) -> None:
    settings = {**crawl_settings, "DOWNLOADER_MIDDLEWARES": {"scrapy_domainstate.DomainStateMiddleware": 540}}
    result = await run_crawl(settings, [sites.url("friendly.test")])
    assert result.response_for(sites.url("friendly.test")).domainstate["method"] == "fetch"
    rec = record_of(settings, "friendly.test")
    assert rec is not None and rec.fetch_ok == 1


@pytest_twisted.ensureDeferred
async def test_probe_goes_through_the_requests_proxy(sites: Any, crawl_settings: Any, run_crawl: Any) -> None:
    # The request must go through its proxy (here one that refuses): so must its HEAD probe,
    # never straight to the site from the crawler's own address.
    proxied = Request(sites.url("friendly.test"), meta={"proxy": "http://127.0.0.1:1"}, dont_filter=True)
    result = await run_crawl(ds(crawl_settings), [proxied])
    assert sites.requests("friendly.test") == []
    assert result.stats["domainstate/method/head"] == 1
    assert len(result.failures) == 1
