"""Item crawls (issue 19): usefulness is what the spider collects, per purpose.

Real crawls through Scrapy's engine against the loopback shops of
``scrapy_domainstate/testing/sites.py`` (``shop``: home -> 5 categories -> 20 products, no
contacts anywhere; ``shop-cf`` behind a managed challenge; ``shop-js`` a script-only shell;
``shop-sometimes`` challenging some plain requests), on real LMDB files, with real Chromium
where the browser is on. docs/SPEC.md section 3: a page whose callback yields follow-up
requests to the same site and no items is *navigation*, neither useful nor empty; what a
site is worth is kept per outcome source.
"""

from __future__ import annotations

from typing import Any

import pytest
import pytest_twisted
from scrapy import Request
from scrapy.http import Response, TextResponse

from scrapy_domainstate.core.keys import purpose_key
from scrapy_domainstate.core.record import Method, Outcome, State
from scrapy_domainstate.testing.crawl import RecordingSpider
from scrapy_domainstate.testing.sites import shop_paths
from tests.scrapy.test_e2e import ds_defaults as ds
from tests.scrapy.test_e2e import record_of, states

PRODUCTS = 20
PAGES = len(shop_paths())  # home, 5 categories, 20 products


class ShopSpider(RecordingSpider):
    """Follows a shop's links (same host) and yields one item per product page.

    ``follow=False``: the start URLs only (a list crawl)."""

    name = "shop"

    def __init__(self, *args: Any, follow: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, follow=follow, max_pages=200, **kwargs)
        self.seen: set[str] = set()

    def parse(self, response: Response) -> Any:
        assert response.request is not None
        from scrapy_domainstate.testing.crawl import ResponseRecord

        self.responses.append(
            ResponseRecord(url=response.url, status=response.status, request=response.request, response=response)
        )
        if not isinstance(response, TextResponse):
            return
        for sku in response.css(".product::attr(data-sku)").getall():
            yield {"sku": sku, "url": response.url}
        if not self.follow:
            return
        for href in response.css("a::attr(href)").getall():
            url = response.urljoin(href)
            yield Request(url, callback=self.parse, errback=self.on_error, meta=dict(self.request_meta))


def items_settings(settings: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {**ds(settings), "DOMAINSTATE_OUTCOME": "items", **extra}


def skus(result: Any, host: str) -> set[str]:
    return {item["sku"] for item in result.items if f"//{host}:" in item["url"]}


@pytest_twisted.ensureDeferred
@pytest.mark.parametrize("per_domain", [1, 8])
async def test_category_shop_is_never_cold_and_every_item_is_found(
    sites: Any, crawl_settings: Any, run_crawl: Any, per_domain: int
) -> None:
    settings = items_settings(crawl_settings, CONCURRENT_REQUESTS_PER_DOMAIN=per_domain)
    for crawl in (1, 2, 3):
        result = await run_crawl(settings, [sites.url("shop.test")], ShopSpider)
        assert len(skus(result, "shop.test")) == PRODUCTS, crawl
        assert states(settings, "shop.test")["shop.test"] is not State.COLD, crawl
        assert not any(f.domainstate and f.domainstate.get("method") == "skip" for f in result.failures), crawl
    # the home and category pages were navigation, the products useful: in this purpose's record
    worth = record_of(settings, purpose_key("shop.test", "items"))
    assert worth.state is not State.COLD
    outcomes = {e.outcome for e in worth.recent}
    assert outcomes <= {Outcome.OK_CONTACT, Outcome.NAVIGATION}, outcomes
    # (the start URL is sent with dont_filter, so the categories' "Home" link fetches it again)
    navigation = [r for r in result.responses if "/p/" not in r.url]
    assert len(navigation) >= PAGES - PRODUCTS
    assert result.stats["domainstate/outcome/navigation"] == len(navigation)
    assert result.stats["domainstate/outcome/ok-contact"] == PRODUCTS
    # the close summary's states are this purpose's, as its requests are decided
    closing = {k: v for k, v in result.stats.items() if "state_at_close" in k or "transition" in k}
    assert result.stats.get("domainstate/state_at_close/friendly") == 1, closing


@pytest_twisted.ensureDeferred
async def test_challenge_fronted_shop_gives_its_items_through_the_browser(
    sites: Any, browser_settings: Any, run_crawl: Any
) -> None:
    settings = items_settings(browser_settings)
    for crawl in (1, 2):
        result = await run_crawl(settings, [sites.url("shop-cf.test")], ShopSpider)
        assert len(skus(result, "shop-cf.test")) == PRODUCTS, crawl
        # the spider got the rendered pages as 200s (a 403 would be dropped by HttpErrorMiddleware)
        assert {r.status for r in result.responses} == {200}, crawl
        assert states(settings, "shop-cf.test")["shop-cf.test"] in (State.ANTIBOT_SOFT, State.ANTIBOT_HARD)
    worth = record_of(settings, purpose_key("shop-cf.test", "items"))
    assert worth.tab_ok >= PRODUCTS
    assert all(e.method is Method.TAB for e in worth.recent)


@pytest_twisted.ensureDeferred
async def test_js_only_shop_is_learned_as_needing_the_browser(
    sites: Any, browser_settings: Any, run_crawl: Any
) -> None:
    settings = items_settings(browser_settings)
    first = await run_crawl(settings, [sites.url("shop-js.test")], ShopSpider)
    assert len(skus(first, "shop-js.test")) == PRODUCTS
    assert record_of(settings, "shop-js.test").browser_since > 0
    sites.reset_log()
    second = await run_crawl(settings, [sites.url("shop-js.test")], ShopSpider)
    assert len(skus(second, "shop-js.test")) == PRODUCTS
    logged = [r for r in sites.requests("shop-js.test") if not r.path.startswith("/favicon")]
    # one render per page, no plain fetch of the empty shell first
    assert [r for r in logged if not r.browser] == []
    # (the start URL is sent with dont_filter: the categories' "Home" link renders it again)
    assert len({r.path for r in logged}) == PAGES
    assert len(logged) <= PAGES + 1


@pytest_twisted.ensureDeferred
async def test_contacts_and_items_spiders_share_a_store_without_losing_sites(
    sites: Any, crawl_settings: Any, run_crawl: Any
) -> None:
    # cold within a crawl, after 3 empty pages (the friendly site has only 4)
    quick_cold = {"DOMAINSTATE_COLD_CONFIRM_AFTER": 0, "DOMAINSTATE_COLD_THRESHOLD": 3}
    contacts = {**ds(crawl_settings), **quick_cold}
    items = items_settings(crawl_settings, **quick_cold)
    shop_urls = [sites.url("shop.test", path) for path in shop_paths()]
    friendly_urls = [sites.url("friendly.test", path) for path in ("/", "/page1", "/page2", "/contact")]
    for round_ in range(2):
        # a contacts spider: the shop has no contacts, so it is cold *for contacts*
        seen = await run_crawl(contacts, shop_urls + friendly_urls)
        assert states(contacts, "shop.test")["shop.test"] is State.COLD, round_
        assert len(seen.items) == len(friendly_urls)  # (the recording spider's items: pages with an e-mail)
        # a products spider (a list of product URLs, no follow-ups), on the same store: every product
        product_urls = [url for url in shop_urls if "/p/" in url]
        got = await run_crawl(items, product_urls + friendly_urls, ShopSpider, follow=False)
        assert len(skus(got, "shop.test")) == PRODUCTS, round_
        # the friendly site has no products: cold for products, never for contacts
        assert record_of(items, purpose_key("friendly.test", "items")).state is State.COLD, round_
        assert states(contacts, "friendly.test")["friendly.test"] is not State.COLD, round_
    again = await run_crawl(contacts, friendly_urls)
    assert len(again.items) == len(friendly_urls)


@pytest_twisted.ensureDeferred
async def test_no_browser_keeps_fetching_a_site_that_challenges_part_of_its_requests(
    sites: Any, crawl_settings: Any, run_crawl: Any
) -> None:
    settings = items_settings(crawl_settings, DOMAINSTATE_BROWSER_META=None)
    # the first three plain requests are challenged, then every other one (by the order they
    # arrive, which the lead gate and Scrapy's version set: the home page and product pages
    # only, so that whichever requests pass, they are products)
    sites.set_kind("shop-sometimes.test", "shop-sometimes", burst=3, every=2)
    paths = shop_paths()
    urls = [sites.url("shop-sometimes.test", path) for path in [paths[0], *[p for p in paths if "/p/" in p][:9]]]
    first = await run_crawl(settings, urls, ShopSpider, follow=False)
    assert first.stats["domainstate/outcome/antibot"] >= 3
    second = await run_crawl(settings, urls, ShopSpider, follow=False)
    # its passing pages are fetched in crawl 2 (it stays antibot-soft: some plain fetches pass)
    assert len(skus(second, "shop-sometimes.test")) >= 2
    assert states(settings, "shop-sometimes.test")["shop-sometimes.test"] is State.ANTIBOT_SOFT
