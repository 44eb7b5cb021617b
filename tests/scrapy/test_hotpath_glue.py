"""The manager's hot-path glue gives what the plain glue gave.

- the counts kept locally reach Scrapy's stats at each flush and exactly at close;
- the signals check answers as ``getAllReceivers`` does, whatever is connected;
- the memoised routes are the routes;
- the garbage collector's freeze lasts while the crawl runs, not after it.
"""

from __future__ import annotations

import gc
import itertools
from typing import Any

import pytest
from pydispatch.dispatcher import Any as AnySignal
from pydispatch.dispatcher import getAllReceivers
from scrapy import Spider
from scrapy.http import HtmlResponse, Request
from scrapy.utils.misc import build_from_crawler
from scrapy.utils.test import get_crawler

from scrapy_domainstate import signals as ds_signals
from scrapy_domainstate.core import routing
from scrapy_domainstate.core.policy import Decision
from scrapy_domainstate.middleware import DomainStateMiddleware

CONTACT = b"<html><body><p>Write to info@shop.test for anything at all.</p></body></html>"
EMPTY = b"<html><body><p>Nothing to see on this page, only plain words.</p></body></html>"


class _Spider(Spider):
    name = "glue"


def _middleware(**settings: Any) -> DomainStateMiddleware:
    crawler = get_crawler(
        _Spider,
        {
            "DOMAINSTATE_STORE": "scrapy_domainstate.store.memory.MemoryStore",
            "DOMAINSTATE_FLUSH_SIZE": 1000,
            "DOMAINSTATE_FLUSH_INTERVAL": 0,
            **settings,
        },
    )
    crawler.spider = crawler._create_spider()
    mw = build_from_crawler(DomainStateMiddleware, crawler)
    mw.manager.spider_opened()
    return mw


def _crawl(mw: DomainStateMiddleware, n: int) -> None:
    for i in range(n):
        request = Request(f"https://shop{i % 3}.test/page/{i}")
        assert mw.process_request(request) is None
        mw.process_response(request, HtmlResponse(request.url, body=CONTACT if i % 2 else EMPTY, request=request))


def test_counts_reach_scrapy_stats_at_flush_and_exactly_at_close() -> None:
    mw = _middleware()
    manager, crawler = mw.manager, mw.manager.crawler
    _crawl(mw, 10)
    manager.flush()
    stats = crawler.stats.get_stats()
    assert stats["domainstate/method/fetch"] == 10
    assert stats["domainstate/outcome/ok-contact"] == 5
    assert stats["domainstate/outcome/ok-empty"] == 5
    assert stats["domainstate/decision/fetch-then-browser"] == 10
    _crawl(mw, 4)
    assert manager.stats.get_value("domainstate/method/fetch") == 14  # read through the manager: exact
    _crawl(mw, 2)
    manager.close()
    stats = crawler.stats.get_stats()
    assert stats["domainstate/method/fetch"] == 16
    assert stats["domainstate/outcome/ok-contact"] + stats["domainstate/outcome/ok-empty"] == 16
    assert sum(v for k, v in stats.items() if k.startswith("domainstate/state_at_close/")) == 3


def test_a_store_flush_publishes_the_counts() -> None:
    mw = _middleware(DOMAINSTATE_FLUSH_SIZE=4)
    _crawl(mw, 4)  # the fourth outcome flushes the store
    assert mw.manager.crawler.stats.get_value("domainstate/method/fetch") == 4
    mw.manager.close()


def test_signals_check_answers_as_get_all_receivers() -> None:
    mw = _middleware()
    manager = mw.manager
    telemetry, sigs = manager.telemetry, manager.crawler.signals

    def expected(signal: object) -> bool:
        return next(iter(getAllReceivers(sigs.sender, signal)), None) is not None

    def on_outcome(**kw: Any) -> None:
        pass

    def on_any(**kw: Any) -> None:
        pass

    for signal in (ds_signals.outcome_recorded, ds_signals.state_changed):
        assert telemetry._listened(signal) is expected(signal)
    sigs.connect(on_outcome, signal=ds_signals.outcome_recorded)
    assert telemetry._listened(ds_signals.outcome_recorded) is expected(ds_signals.outcome_recorded) is True
    sigs.disconnect(on_outcome, signal=ds_signals.outcome_recorded)
    assert telemetry._listened(ds_signals.outcome_recorded) is expected(ds_signals.outcome_recorded)
    sigs.connect(on_any, signal=AnySignal)
    assert telemetry._listened(ds_signals.outcome_recorded) is expected(ds_signals.outcome_recorded) is True
    sigs.disconnect(on_any, signal=AnySignal)
    assert telemetry._listened(ds_signals.outcome_recorded) is expected(ds_signals.outcome_recorded)
    manager.close()


@pytest.mark.parametrize(
    ("decision", "force", "browser", "browser_route", "can_wait", "ask"),
    list(itertools.product(list(Decision), *[(False, True)] * 5)),
)
def test_memoised_routes_are_the_routes(
    decision: Decision, force: bool, browser: bool, browser_route: bool, can_wait: bool, ask: bool
) -> None:
    facts = routing.RequestFacts(domain="shop.test", force=force, browser=browser, browser_route=browser_route)
    first = routing.route(facts, decision, can_wait, ask)
    assert first == routing._route(decision, force, browser, browser_route, can_wait, ask)
    assert routing.route(facts, decision, can_wait, ask) is first


def test_gc_frozen_while_the_crawl_runs() -> None:
    gc.unfreeze()
    mw = _middleware()
    assert gc.get_freeze_count() > 0
    mw.manager.close()
    assert gc.get_freeze_count() == 0
