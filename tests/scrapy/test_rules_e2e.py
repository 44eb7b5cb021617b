"""End to end, the revised rules wired into the crawl (Scrapy's engine, loopback sites, LMDB).

Host facts (docs/SPEC.md section 2): a dead subdomain keeps its dead signals in its own record and
never takes the registrable domain, or its live hosts, down.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import pytest_twisted
from scrapy.exceptions import IgnoreRequest

from scrapy_domainstate.core.record import State
from scrapy_domainstate.testing.resolver import HOSTS_SETTING, NXDOMAIN
from tests.scrapy.test_e2e import ds, ds_defaults, record_of, states


@pytest_twisted.ensureDeferred
async def test_a_dead_subdomain_does_not_take_its_site_down(sites: Any, crawl_settings: Any, run_crawl: Any) -> None:
    settings = {**ds(crawl_settings), HOSTS_SETTING: {"gone.friendly.test": NXDOMAIN}}
    gone = [sites.url("gone.friendly.test"), sites.url("gone.friendly.test", "/page1")]
    live = [sites.url("friendly.test"), sites.url("friendly.test", "/page1"), sites.url("shop.friendly.test")]
    first = await run_crawl(settings, [*gone, *live])
    learned = states(settings, "gone.friendly.test", "friendly.test")
    assert learned == {"gone.friendly.test": State.DEAD, "friendly.test": State.UNKNOWN}
    # the dead signals are the host's: the domain's record holds none of them
    domain = record_of(settings, "friendly.test")
    assert all(e.outcome.value != "dead" for e in domain.recent)
    # facts per hostname (docs/SPEC.md section 2): the root's pages are the domain's, the shop's
    # are the shop's own
    assert domain.fetch_ok == 2
    assert record_of(settings, "shop.friendly.test").fetch_ok == 1
    assert {r.url for r in first.responses} >= set(live)

    sites.reset_log()
    second = await run_crawl(settings, [*gone, *live])
    # the dead host is skipped (its own record), its live siblings are fetched
    for url in gone:
        (failure,) = second.failures_for(url)
        assert isinstance(failure.exception, IgnoreRequest)
        assert failure.domainstate == {**failure.domainstate, "method": "skip", "state": "dead"}
    for url in live:
        assert second.response_for(url).emails
    assert sites.requests("gone.friendly.test") == []


@pytest.mark.browser
@pytest_twisted.ensureDeferred
async def test_a_client_rendered_site_is_learned_as_needing_the_browser(
    sites: Any, browser_settings: Any, run_crawl: Any
) -> None:
    settings = ds(browser_settings)
    urls = [sites.url("js-shell.test"), sites.url("js-shell.test", "/page1")]
    first = await run_crawl(settings, urls)
    assert first.stats["domainstate/browser_reissue"] == 2  # GET got a shell, the browser rendered it
    learned = record_of(settings, "js-shell.test")
    assert learned.browser_since > 0
    assert learned.state is State.UNKNOWN  # still one of the six states

    sites.reset_log()
    second = await run_crawl(settings, urls)
    # one render per page, no plain GET first
    assert all(r.browser for r in sites.requests("js-shell.test"))
    assert len(sites.requests("js-shell.test")) == 2
    for url in urls:
        response = second.response_for(url)
        assert response.domainstate["method"] == "tab"
        assert response.emails == ["info@js-shell.test"]
    assert second.stats.get("domainstate/browser_reissue", 0) == 0


def _set_state(settings: dict[str, Any], domain: str, state: State) -> None:
    from scrapy_domainstate.core.config import Config
    from scrapy_domainstate.store.lmdb import LmdbStore

    store = LmdbStore(Config.from_settings(settings))
    store.open()
    try:
        store.set_state(domain, state, time.time())
    finally:
        store.close()


@pytest_twisted.ensureDeferred
async def test_a_cold_domains_contact_page_is_still_fetched(sites: Any, crawl_settings: Any, run_crawl: Any) -> None:
    """Rule 3's option (DOMAINSTATE_COLD_CONTACT_PAGES, on by default): while a domain is cold,
    its pages whose URL says they hold contacts are fetched and the others skipped; contacts
    found there make the domain unknown again."""
    settings = ds_defaults(crawl_settings)
    _set_state(settings, "friendly.test", State.COLD)
    urls = [sites.url("friendly.test"), sites.url("friendly.test", "/page1"), sites.url("friendly.test", "/contact")]
    crawl = await run_crawl(settings, urls)
    assert [r.path for r in sites.requests("friendly.test")] == ["/contact"]
    response = crawl.response_for(urls[2])
    assert response.domainstate["method"] == "fetch"
    assert response.domainstate["state"] == "cold"
    assert response.emails == ["info@friendly.test"]
    for url in urls[:2]:
        (failure,) = crawl.failures_for(url)
        assert isinstance(failure.exception, IgnoreRequest)
        assert failure.domainstate["method"] == "skip"
    assert states(settings, "friendly.test")["friendly.test"] is State.UNKNOWN

    # off: a cold domain's every page is skipped (the seed's reading)
    sites.reset_log()
    off = {**settings, "DOMAINSTATE_COLD_CONTACT_PAGES": False}
    _set_state(off, "friendly.test", State.COLD)
    crawl = await run_crawl(off, urls)
    assert sites.requests("friendly.test") == []
    assert all(isinstance(crawl.failures_for(u)[0].exception, IgnoreRequest) for u in urls)

    # obeying robots.txt: a cold domain's robots.txt is fetched for its contact page, which obeys it
    sites.reset_log()
    obey = {**settings, "ROBOTSTXT_OBEY": True}
    _set_state(obey, "friendly.test", State.COLD)
    await run_crawl(obey, urls)
    assert [r.path for r in sites.requests("friendly.test")] == ["/robots.txt", "/contact"]
