"""The manager through Scrapy's own component-test path: ``get_crawler`` + ``build_from_crawler``.

No engine, no server: requests and responses are built by hand and passed to the
downloader middleware's hooks, as Scrapy's own middleware tests do, with the memory store.
Without an engine the HEAD probe cannot be sent, so an unknown domain goes
``fetch-then-browser`` at once.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
import pytest_twisted
from pydispatch.dispatcher import getAllReceivers
from scrapy import Spider, signals
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import HtmlResponse, Request, Response
from scrapy.utils.defer import deferred_from_coro
from scrapy.utils.misc import build_from_crawler
from scrapy.utils.test import get_crawler
from twisted.internet.error import ConnectionRefusedError, DNSLookupError

from scrapy_domainstate import shell
from scrapy_domainstate import signals as ds_signals
from scrapy_domainstate.core.keys import purpose_key
from scrapy_domainstate.core.record import Method, Outcome, State
from scrapy_domainstate.extension import DomainStateExtension
from scrapy_domainstate.middleware import DomainStateDownloadedMiddleware, DomainStateMiddleware
from scrapy_domainstate.runtime import registry as _registry
from scrapy_domainstate.runtime.lifecycle import DomainStateManager
from scrapy_domainstate.spidermw import DomainStateSpiderMiddleware
from scrapy_domainstate.store.memory import MemoryStore

MEMORY = "scrapy_domainstate.store.memory.MemoryStore"
CONTACT = b"<html><body><p>Write to info@shop.test for anything at all.</p></body></html>"
EMPTY = b"<html><body><p>Nothing to see on this page, only plain words.</p></body></html>"
CHALLENGE = b"<html><head><title>Just a moment...</title></head><body>checking your browser</body></html>"
CF = {"server": "cloudflare", "cf-ray": "8a1-AMS"}
#: the browser route needs a browser handler for http(s) (here only read from the settings)
PLAYWRIGHT = "scrapy_playwright.handler.ScrapyPlaywrightDownloadHandler"
BROWSER_HANDLERS = {"http": PLAYWRIGHT, "https": PLAYWRIGHT}


class _Spider(Spider):
    name = "unit"


def _crawler(**settings: Any) -> Any:
    crawler = get_crawler(
        _Spider,
        {
            "DOMAINSTATE_STORE": MEMORY,
            "DOMAINSTATE_FLUSH_SIZE": 1,
            "DOMAINSTATE_FLUSH_INTERVAL": 0,
            "DOWNLOAD_HANDLERS": BROWSER_HANDLERS,
            **settings,
        },
    )
    crawler.spider = crawler._create_spider()
    return crawler


@pytest.fixture
def crawler() -> Iterator[Any]:
    crawler = _crawler()
    yield crawler
    crawler.domainstate.close()


@pytest.fixture
def mw(crawler: Any) -> DomainStateMiddleware:
    mw = build_from_crawler(DomainStateMiddleware, crawler)
    mw.manager.spider_opened()
    return mw


def html(url: str, body: bytes = EMPTY, status: int = 200, request: Request | None = None, **kw: Any) -> Response:
    return HtmlResponse(url, status=status, body=body, request=request, **kw)


def sent(mw: DomainStateMiddleware, url: str, **meta: Any) -> Request:
    request = Request(url, meta=dict(meta))
    assert mw.process_request(request) is None
    return request


def stat(mw: DomainStateMiddleware, key: str) -> Any:
    return mw.manager.stats.get_value(f"domainstate/{key}")


def recent(mw: DomainStateMiddleware, domain: str) -> list[tuple[Method, Outcome]]:
    mw.manager.flush()
    record = mw.manager.store.get(domain)
    return [] if record is None else [(e.method, e.outcome) for e in record.recent]


# ------------------------------------------------------------------ construction and lifecycle


def test_components_share_one_manager(crawler: Any) -> None:
    mw = build_from_crawler(DomainStateMiddleware, crawler)
    ext = build_from_crawler(DomainStateExtension, crawler)
    assert mw.manager is ext.manager is crawler.domainstate
    assert isinstance(mw.manager, DomainStateManager)
    assert not mw.manager.opened  # nothing opened before spider_opened
    # the lifecycle is wired once, by the manager, however many components there are
    for signal in (signals.spider_opened, signals.spider_closed):
        mine = [
            r for r in getAllReceivers(crawler.signals.sender, signal) if getattr(r(), "__self__", None) is mw.manager
        ]
        assert len(mine) == 1


def test_disabled_plugin_is_not_configured() -> None:
    crawler = _crawler(DOMAINSTATE_ENABLED=False)
    with pytest.raises(NotConfigured):
        build_from_crawler(DomainStateMiddleware, crawler)


def test_spider_middleware_only_for_the_items_source(crawler: Any) -> None:
    with pytest.raises(NotConfigured):
        build_from_crawler(DomainStateSpiderMiddleware, crawler)
    items = _crawler(DOMAINSTATE_OUTCOME="items")
    assert build_from_crawler(DomainStateSpiderMiddleware, items).manager.outcomes.from_items


def test_closed_manager_lets_everything_through(crawler: Any) -> None:
    mw = build_from_crawler(DomainStateMiddleware, crawler)
    request = Request("https://shop.test/")
    assert mw.process_request(request) is None
    assert "domainstate" not in request.meta
    response = html(request.url, request=request)
    assert mw.process_response(request, response) is response


@pytest_twisted.ensureDeferred
async def test_lifecycle_is_wired_once_and_a_middleware_alone_flushes_at_close() -> None:
    crawler = _crawler(DOMAINSTATE_FLUSH_SIZE=1000, DOMAINSTATE_FLUSH_INTERVAL=60)
    mw = build_from_crawler(DomainStateMiddleware, crawler)  # no extension
    manager = mw.manager
    await deferred_from_coro(crawler.signals.send_catch_log_async(signals.spider_opened, spider=crawler.spider))
    assert manager.opened
    assert _registry.latest() is manager
    assert shell.store() is manager.store
    request = sent(mw, "https://shop.test/about")
    mw.process_response(request, html(request.url, CONTACT, request=request))
    assert manager.store.pending == 1  # buffered, not yet written
    await deferred_from_coro(
        crawler.signals.send_catch_log_async(signals.spider_closed, spider=crawler.spider, reason="finished")
    )
    assert not manager.opened
    assert manager.store.pending == 0
    assert manager.stats.get_value("domainstate/state_at_close/unknown") == 1


def test_unreachable_store_closes_the_spider_before_its_first_request(tmp_path: Any) -> None:
    from scrapy.exceptions import CloseSpider

    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    crawler = _crawler(
        DOMAINSTATE_STORE="scrapy_domainstate.store.lmdb.LmdbStore", DOMAINSTATE_LMDB_PATH=str(blocker / "db")
    )
    mw = build_from_crawler(DomainStateMiddleware, crawler)
    for _ in range(2):  # a second open() gives the same answer
        with pytest.raises(CloseSpider) as closed:
            mw.manager.open()
        assert closed.value.reason == "domainstate_unavailable"
    assert mw.manager.stats.get_value("domainstate/open_error/store") == 1


# ------------------------------------------------------------------ routing


def test_unknown_domain_without_an_engine_goes_fetch_then_browser(mw: DomainStateMiddleware) -> None:
    request = sent(mw, "https://shop.test/")
    assert request.meta["domainstate"]["method"] == "fetch"
    assert request.meta["domainstate"]["state"] == "unknown"
    assert request.meta["_domainstate_decision"] == "fetch-then-browser"
    assert stat(mw, "decision/fetch-then-browser") == 1


@pytest.mark.parametrize(
    "url",
    ["file:///etc/hosts", "data:text/plain,hello", "https://shop.test/robots.txt"],
    ids=["file", "data", "robots"],
)
def test_requests_left_alone(mw: DomainStateMiddleware, url: str) -> None:
    request = sent(mw, url, dont_obey_robotstxt=True, domainstate={"method": "fetch", "domain": "x"})
    assert "domainstate" not in request.meta  # copied parent meta dropped, nothing decided
    assert not mw.manager.stats.get_stats()


def test_skip_force_and_browser(mw: DomainStateMiddleware) -> None:
    store, now = mw.manager.store, mw.manager.clock()
    store.set_state("dead.test", State.DEAD, now)
    store.set_state("hard.test", State.ANTIBOT_HARD, now)
    with pytest.raises(IgnoreRequest, match=r"dead\.test is dead"):
        mw.process_request(Request("https://dead.test/"))
    forced = sent(mw, "https://dead.test/", domainstate_force=True)
    assert forced.meta["domainstate"]["method"] == "fetch"
    assert forced.meta["_domainstate_decision"] == "fetch"
    browser = sent(mw, "https://hard.test/page")
    assert browser.meta["playwright"] is True
    assert browser.meta["domainstate"]["method"] == "tab"
    assert (stat(mw, "decision/skip"), stat(mw, "forced"), stat(mw, "method/skip")) == (2, 1, 1)
    assert stat(mw, "decision/browser") == 1


def test_copied_meta_does_not_ride_along(mw: DomainStateMiddleware) -> None:
    parent = sent(mw, "https://shop.test/")
    response = html(parent.url, CHALLENGE, 403, headers=CF, request=parent)
    reissue = mw.process_response(parent, response)
    assert isinstance(reissue, Request)
    child = sent(mw, "https://shop.test/next", **reissue.meta)  # meta=response.meta
    # the re-issue mark names another URL: the child is decided, not taken for a re-issue
    assert child.meta["_domainstate_decision"] == "fetch-then-browser"


# ------------------------------------------------------------------ evidence


def test_contact_page_is_recorded(mw: DomainStateMiddleware) -> None:
    received: list[Any] = []
    mw.manager.crawler.signals.connect(lambda **kw: received.append(kw), signal=ds_signals.outcome_recorded, weak=False)
    request = sent(mw, "https://shop.test/contact")
    response = html(request.url, CONTACT, request=request)
    assert mw.process_response(request, response) is response
    assert recent(mw, "shop.test") == [(Method.FETCH, Outcome.OK_CONTACT)]
    assert stat(mw, "outcome/ok-contact") == 1
    assert stat(mw, "method/fetch") == 1
    assert [kw["domain"] for kw in received] == ["shop.test"]


def test_challenge_is_recorded_and_reissued_once_in_the_browser(mw: DomainStateMiddleware) -> None:
    request = sent(mw, "https://shop.test/")
    reissue = mw.process_response(request, html(request.url, CHALLENGE, 403, headers=CF, request=request))
    assert isinstance(reissue, Request)
    assert reissue.dont_filter and reissue.meta["playwright"] is True
    assert stat(mw, "browser_reissue") == 1
    assert mw.process_request(reissue) is None
    assert reissue.meta["domainstate"]["method"] == "tab"
    # the browser still meets the challenge: recorded, never re-issued twice
    again = html(reissue.url, CHALLENGE, 403, headers=CF, request=reissue, flags=["playwright"])
    assert mw.process_response(reissue, again) is again
    assert recent(mw, "shop.test") == [(Method.FETCH, Outcome.ANTIBOT), (Method.TAB, Outcome.ANTIBOT)]


def test_browser_that_passed_the_wall_delivers_a_200(mw: DomainStateMiddleware) -> None:
    request = sent(mw, "https://shop.test/", playwright=True)  # the user's own browser request
    rendered = html(request.url, CONTACT, 403, headers=CF, request=request, flags=["playwright"])
    passed = mw.process_response(request, rendered)
    assert isinstance(passed, Response) and passed.status == 200
    assert request.meta["domainstate"]["original_status"] == 403
    assert recent(mw, "shop.test") == [(Method.TAB, Outcome.OK_CONTACT)]


def test_a_browser_request_answered_without_a_render_is_not_evidence(mw: DomainStateMiddleware) -> None:
    request = sent(mw, "https://shop.test/", playwright=True)
    plain = html(request.url, CONTACT, 200, request=request)  # no "playwright" flag: not a render
    assert mw.process_response(request, plain) is plain
    assert recent(mw, "shop.test") == []
    assert stat(mw, "browser/not_rendered") == 1


def test_no_browser_mode() -> None:
    crawler = _crawler(DOWNLOAD_HANDLERS={})
    mw = build_from_crawler(DomainStateMiddleware, crawler)
    mw.manager.spider_opened()
    try:
        assert not mw.manager.browser.enabled
        assert stat(mw, "browser/off") == 1
        # a wall is recorded, never re-issued
        request = sent(mw, "https://shop.test/")
        response = html(request.url, CHALLENGE, 403, headers=CF, request=request)
        assert mw.process_response(request, response) is response
        assert recent(mw, "shop.test") == [(Method.FETCH, Outcome.ANTIBOT)]
        assert stat(mw, "browser_reissue") is None
        # antibot-hard: skipped, with its reason; forced: a plain fetch
        mw.manager.store.set_state("hard.test", State.ANTIBOT_HARD, mw.manager.clock())
        with pytest.raises(IgnoreRequest, match=r"hard\.test is antibot-hard \(browser only, and no browser"):
            mw.process_request(Request("https://hard.test/"))
        forced = sent(mw, "https://hard.test/", domainstate_force=True)
        assert forced.meta["domainstate"]["method"] == "fetch" and "playwright" not in forced.meta
        # and its robots.txt is not fetched either
        with pytest.raises(IgnoreRequest, match=r"no robots\.txt"):
            mw.process_request(Request("https://hard.test/robots.txt", meta={"dont_obey_robotstxt": True}))
    finally:
        crawler.domainstate.close()


def test_rate_limit_is_not_sent_to_the_browser(mw: DomainStateMiddleware) -> None:
    request = sent(mw, "https://busy.test/")
    response = html(request.url, EMPTY, 429, headers={"retry-after": "30"}, request=request)
    assert mw.process_response(request, response) is response
    assert recent(mw, "busy.test") == [(Method.FETCH, Outcome.ANTIBOT)]
    assert stat(mw, "browser_reissue") is None


@pytest.mark.parametrize(
    ("status", "flags"), [(301, []), (304, []), (200, ["cached"])], ids=["redirect", "not-modified", "cached"]
)
def test_not_evidence(mw: DomainStateMiddleware, status: int, flags: list[str]) -> None:
    request = sent(mw, "https://shop.test/a")
    response = html(request.url, CONTACT, status, request=request, flags=flags)
    assert mw.process_response(request, response) is response
    assert recent(mw, "shop.test") == []
    if flags:
        assert request.meta["domainstate"]["method"] == "cache"
        assert stat(mw, "method/cache") == 1
    else:
        assert stat(mw, "not_evidence") == 1


def test_dead_url_is_marked_and_skipped(mw: DomainStateMiddleware) -> None:
    request = sent(mw, "https://shop.test/gone")
    mw.process_response(request, html(request.url, b"not found", 404, request=request))
    assert stat(mw, "url_dead/marked") == 1
    assert recent(mw, "shop.test") == []  # the domain is untouched
    with pytest.raises(IgnoreRequest, match="dead URL"):
        mw.process_request(Request("https://shop.test/gone"))
    assert sent(mw, "https://shop.test/other").meta["domainstate"]["method"] == "fetch"
    assert sent(mw, "https://shop.test/gone", domainstate_force=True).meta["domainstate"]["method"] == "fetch"
    assert stat(mw, "url_dead/skipped") == 1


def test_the_seen_domains_and_the_dead_url_table_stay_within_their_caps(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 22 item 8: one request and one 404 for each of 300 domains, caps of 50 and 64.

    The close tally keeps DOMAINSTATE_MAX_DOMAINS domains (said once); the dead-URL table
    forgets its oldest, and a forgotten domain's dead URL is read again from the store.
    """
    crawler = _crawler(DOMAINSTATE_MAX_DOMAINS=50)
    mw = build_from_crawler(DomainStateMiddleware, crawler)
    manager = mw.manager
    manager.spider_opened()
    monkeypatch.setattr(manager.dead_urls, "max_domains", 64, raising=False)
    caplog.set_level(logging.INFO, logger="scrapy_domainstate")
    for i in range(300):
        request = sent(mw, f"https://site-{i}.test/gone")
        mw.process_response(request, html(request.url, b"not found", 404, request=request))
        assert len(manager.dead_urls._domains) <= 64
    assert len(manager._seen) == 50
    assert stat(mw, "seen_capped") == 50
    assert [r.getMessage() for r in caplog.records].count(
        "scrapy-domainstate: this crawl has met 50 domains (DOMAINSTATE_MAX_DOMAINS): state_at_close/{state} "
        "counts those, not the ones met after; decisions and records are not affected"
    ) == 1
    assert "site-0.test" not in manager.dead_urls._domains  # forgotten, not lost:
    with pytest.raises(IgnoreRequest, match="dead URL"):
        mw.process_request(Request("https://site-0.test/gone"))
    assert sent(mw, "https://site-0.test/other").meta["domainstate"]["method"] == "fetch"
    manager.close()
    tally = {k: v for k, v in manager.stats.get_stats().items() if k.startswith("domainstate/state_at_close/")}
    assert sum(tally.values()) == 50


def test_js_shell_goes_to_the_browser_unrecorded(mw: DomainStateMiddleware) -> None:
    request = sent(mw, "https://app.test/")
    shell_page = b"<html><body><div id=root></div><script src=/app.js></script></body></html>"
    reissue = mw.process_response(request, html(request.url, shell_page, request=request))
    assert isinstance(reissue, Request)
    assert recent(mw, "app.test") == []
    assert stat(mw, "not_evidence") == 1


@pytest.mark.parametrize(
    ("exc", "reissued"),
    [(DNSLookupError("no such name"), False), (ConnectionRefusedError(), False), (TimeoutError(), True)],
    ids=["dns", "refused", "timeout"],
)
def test_failures(mw: DomainStateMiddleware, exc: Exception, reissued: bool) -> None:
    request = sent(mw, "https://gone.test/")
    result = mw.process_exception(request, exc)
    assert isinstance(result, Request) is reissued
    outcome = Outcome.NETWORK_ERROR if reissued else Outcome.DEAD
    assert recent(mw, "gone.test") == [(Method.FETCH, outcome)]


def test_two_dead_signals_change_the_state_and_send_the_signal(mw: DomainStateMiddleware) -> None:
    changes: list[Any] = []
    mw.manager.crawler.signals.connect(lambda **kw: changes.append(kw), signal=ds_signals.state_changed, weak=False)
    for _ in range(2):
        mw.process_exception(sent(mw, "https://gone.test/"), DNSLookupError("no such name"))
    assert [(c["transition"].old, c["transition"].new) for c in changes] == [(State.UNKNOWN, State.DEAD)]
    assert stat(mw, "transition/unknown/dead") == 1
    with pytest.raises(IgnoreRequest):
        mw.process_request(Request("https://gone.test/"))


def test_a_crawl_that_opens_after_an_earlier_crawls_dead_hold_tries_the_domain_again() -> None:
    # The hold of one crawl's verdict (two DNS failures) is for that crawl: the manager tells
    # the policy when this crawl began, so a domain held two hours ago is fetched again.
    first = _crawler()
    mw = build_from_crawler(DomainStateMiddleware, first)
    mw.manager.spider_opened()
    for _ in range(2):
        mw.process_exception(sent(mw, "https://gone.test/"), DNSLookupError("no such name"))
    mw.manager.flush()
    held = mw.manager.store.get("gone.test")
    first.domainstate.close()
    assert held is not None and held.state is State.DEAD and held.state_expires_at is not None
    two_hours = 2 * 3600.0
    held.state_changed_at -= two_hours
    held.state_expires_at -= two_hours
    held.first_seen -= two_hours
    held.last_seen -= two_hours
    held.dead_at -= two_hours
    for entry in held.recent:
        entry.at -= two_hours
    second = _crawler()
    mw = build_from_crawler(DomainStateMiddleware, second)
    mw.manager.store.put(held)
    mw.manager.spider_opened()
    try:
        assert mw.manager.policy.crawl_started > held.state_changed_at + two_hours / 2
        sent(mw, "https://gone.test/")  # not skipped
        mw.process_exception(sent(mw, "https://gone.test/a"), DNSLookupError("no such name"))
        mw.manager.flush()
        again = mw.manager.store.get("gone.test")
        assert again is not None and again.state is State.DEAD  # confirmed, for the full TTL
        assert again.state_expires_at is not None and again.state_expires_at - again.state_changed_at > 2 * 86400
    finally:
        second.domainstate.close()


# ------------------------------------------------------------------ outcome sources


def test_items_source_waits_for_the_callback() -> None:
    crawler = _crawler(DOMAINSTATE_OUTCOME="items")
    mw = build_from_crawler(DomainStateMiddleware, crawler)
    spider_mw = build_from_crawler(DomainStateSpiderMiddleware, crawler)
    mw.manager.spider_opened()
    try:
        for n, override, expected in [
            (2, None, Outcome.OK_CONTACT),
            (0, None, Outcome.OK_EMPTY),
            (0, "ok-contact", Outcome.OK_CONTACT),
            (3, "bogus", Outcome.OK_CONTACT),
        ]:
            request = sent(mw, "https://shop.test/p")
            response = html(request.url, EMPTY, request=request)
            mw.process_response(request, response)
            if override is not None:
                response.meta["domainstate_outcome"] = override
            list(
                spider_mw.process_spider_output(
                    response, [{"item": i} for i in range(n)] + [Request("https://x.test/")]
                )
            )
            # what the page was worth: the purpose's record; the site's: fetched (alive)
            assert recent(mw, "shop.test|items")[-1] == (Method.FETCH, expected)
            assert recent(mw, "shop.test")[-1] == (Method.FETCH, Outcome.NAVIGATION)
    finally:
        mw.manager.close()


def _useful_if_mail(response: Response) -> bool | None:
    if response.url.endswith("/skip"):
        return None
    if response.url.endswith("/boom"):
        raise RuntimeError("boom")
    return b"@" in response.body


def test_callable_source() -> None:
    crawler = _crawler(DOMAINSTATE_OUTCOME=f"{__name__}._useful_if_mail")
    mw = build_from_crawler(DomainStateMiddleware, crawler)
    mw.manager.spider_opened()
    try:
        responses = {}
        for path, body in [("/a", CONTACT), ("/b", EMPTY), ("/skip", CONTACT), ("/boom", CONTACT)]:
            request = sent(mw, f"https://shop.test{path}")
            responses[path] = mw.process_response(request, html(request.url, body, request=request))
        worth = purpose_key("shop.test", f"{__name__}._useful_if_mail")
        assert recent(mw, worth) == [(Method.FETCH, Outcome.OK_CONTACT), (Method.FETCH, Outcome.OK_EMPTY)]
        assert stat(mw, "not_evidence") == 1  # /boom; /skip waits for its callback
        # None: the callback decides; no item and no follow-up: not evidence either
        mw.manager.record_items(responses["/skip"], 0, 0)
        assert stat(mw, "not_evidence") == 2
        # ... and with a follow-up request to the same site: navigation
        request = sent(mw, "https://shop.test/skip")
        mw.manager.record_items(mw.process_response(request, html(request.url, CONTACT, request=request)), 0, 1)
        assert recent(mw, worth)[-1] == (Method.FETCH, Outcome.NAVIGATION)
    finally:
        mw.manager.close()


def test_bad_callable_path_fails_at_start_up() -> None:
    from scrapy_domainstate.core.config import ConfigError

    with pytest.raises(ConfigError, match="cannot import"):
        build_from_crawler(DomainStateMiddleware, _crawler(DOMAINSTATE_OUTCOME="nowhere.to_be_found"))


# ------------------------------------------------------------------ a failing store


class FailingStore(MemoryStore):
    """A memory store that fails every call while ``broken`` is set."""

    broken = False

    def _check(self) -> None:
        if self.broken:
            raise OSError("store unreachable")

    def decide(self, domain: str, now: float) -> Any:
        self._check()
        return super().decide(domain, now)

    def record(self, domain: str, entry: Any) -> Any:
        self._check()
        return super().record(domain, entry)

    def url_dead_until(self, fingerprint: str) -> float | None:
        self._check()
        return super().url_dead_until(fingerprint)

    def mark_url_dead(self, fingerprint: str, until: float) -> None:
        self._check()
        super().mark_url_dead(fingerprint, until)

    def flush(self) -> int:
        self._check()
        return super().flush()


def test_a_failing_store_degrades_to_fetch_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    crawler = _crawler(DOMAINSTATE_STORE=f"{__name__}.FailingStore")
    mw = build_from_crawler(DomainStateMiddleware, crawler)
    build_from_crawler(DomainStateDownloadedMiddleware, crawler)  # as the add-on lists it
    manager = mw.manager
    manager.spider_opened()
    store = manager.store
    assert isinstance(store, FailingStore)
    store.set_state("dead.test", State.DEAD, manager.clock())
    store.broken = True
    with caplog.at_level(logging.WARNING, logger="scrapy_domainstate"):
        request = sent(mw, "https://dead.test/gone")  # the store cannot answer: fetch
        assert request.meta["domainstate"]["method"] == "fetch"
        response = html(request.url, b"gone", 404, request=request)
        assert mw.process_response(request, response) is response  # the dead URL cannot be marked
        ok = sent(mw, "https://dead.test/contact")
        mw.process_response(ok, html(ok.url, CONTACT, request=ok))  # nor the outcome recorded
        manager.flush()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "the store failed" in warnings[0].getMessage()
    assert stat(mw, "store_error/read") >= 2
    assert stat(mw, "store_error/write") == 2
    assert stat(mw, "store_error/flush") == 1
    assert stat(mw, "url_dead/marked") is None
    store.broken = False
    manager.close()
    assert not manager.opened


def test_a_store_that_refuses_writes_is_not_said_to_fail_decisions(caplog: pytest.LogCaptureFixture) -> None:
    """The one WARNING says what the crawl does for the kind of call that failed first: a store
    that refuses writes (a Redis at maxmemory) still serves decisions."""
    from scrapy_domainstate.runtime.telemetry import Telemetry

    for first, said, unsaid in (
        ("flush", "decisions read it while it answers", "fall back"),
        ("read", "decisions fall back to 'fetch'", "read it while"),
    ):
        caplog.clear()
        telemetry = Telemetry(_crawler(), False)
        with caplog.at_level(logging.WARNING, logger="scrapy_domainstate"):
            telemetry.store_failed(first)
            telemetry.store_failed("read")
            telemetry.store_failed("write")
        [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert said in warning and unsaid not in warning, warning
