"""A friendly domain's pages are not scanned for contacts (issue 23, part 2; docs/SPEC.md
section 2: a domain that has yielded a useful page is never cold, so what its pages hold moves
no rule). Scrapy's engine, the loopback sites, LMDB.
"""

from __future__ import annotations

from typing import Any

import pytest_twisted

from scrapy_domainstate.core.policy import NOT_SCANNED
from scrapy_domainstate.core.record import Outcome, State
from tests import NEEDS_SCRAPY_2_19
from tests.scrapy.test_e2e import ds_defaults, pages, record_of


@pytest_twisted.ensureDeferred
async def test_a_friendly_domains_pages_are_recorded_unscanned(sites: Any, crawl_settings: Any, run_crawl: Any) -> None:
    settings = {**ds_defaults(crawl_settings), "CONCURRENT_REQUESTS_PER_DOMAIN": 1}
    await run_crawl(settings, pages(sites, "friendly.test", 8))
    learned = record_of(settings, "friendly.test")
    assert learned.state is State.FRIENDLY
    useful = learned.fetch_ok
    assert useful >= 4
    # (the pages after the one that made it friendly went unscanned already)
    assert any(e.error_class == NOT_SCANNED for e in learned.recent)
    result = await run_crawl(settings, pages(sites, "friendly.test", 6))
    assert len(result.responses) == 6
    after = record_of(settings, "friendly.test")
    assert after.state is State.FRIENDLY
    assert after.fetch_ok == useful and after.fetch_total == learned.fetch_total + 6  # fetched, not judged
    last = after.recent[-6:]
    assert all(e.outcome is Outcome.NAVIGATION and e.error_class == NOT_SCANNED for e in last), last
    assert result.stats["domainstate/outcome/navigation"] == result.stats["domainstate/not_scanned"] == 6
    assert "domainstate/outcome/ok-contact" not in result.stats


@pytest_twisted.ensureDeferred
async def test_with_scan_friendly_every_page_is_judged(sites: Any, crawl_settings: Any, run_crawl: Any) -> None:
    settings = {
        **ds_defaults(crawl_settings),
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        "DOMAINSTATE_SCAN_FRIENDLY": True,
    }
    await run_crawl(settings, pages(sites, "friendly.test", 8))
    result = await run_crawl(settings, pages(sites, "friendly.test", 6))
    record = record_of(settings, "friendly.test")
    assert record.state is State.FRIENDLY
    assert not any(e.error_class == NOT_SCANNED for e in record.recent)
    assert result.stats.get("domainstate/outcome/navigation", 0) == result.stats.get("domainstate/not_scanned", 0) == 0
    assert result.stats["domainstate/outcome/ok-contact"] + result.stats.get("domainstate/outcome/ok-empty", 0) == 6


@pytest_twisted.ensureDeferred
async def test_a_sub_host_with_its_own_facts_is_always_scanned(sites: Any, crawl_settings: Any, run_crawl: Any) -> None:
    """A host that is neither the registrable domain nor its ``www.`` keeps facts of its own; its
    pages are scanned whatever the domain's state."""
    settings = {**ds_defaults(crawl_settings), "CONCURRENT_REQUESTS_PER_DOMAIN": 1}
    sites.set_kind("shop.friendly.test", "friendly")
    await run_crawl(settings, pages(sites, "friendly.test", 8))
    assert record_of(settings, "friendly.test").state is State.FRIENDLY
    result = await run_crawl(settings, pages(sites, "shop.friendly.test", 4))
    assert result.stats.get("domainstate/outcome/navigation", 0) == 0
    host = record_of(settings, "shop.friendly.test")
    assert host is not None and not any(e.error_class == NOT_SCANNED for e in host.recent)


@pytest_twisted.ensureDeferred
async def test_a_friendly_domains_files_are_no_evidence(sites: Any, crawl_settings: Any, run_crawl: Any) -> None:
    """A response the outcome source never judges (not text: a file) is no evidence on a
    friendly domain either: not recorded as a fetched page."""
    settings = {**ds_defaults(crawl_settings), "CONCURRENT_REQUESTS_PER_DOMAIN": 1}
    await run_crawl(settings, pages(sites, "friendly-files.test", 8))
    learned = record_of(settings, "friendly-files.test")
    assert learned.state is State.FRIENDLY
    sites.set_kind("friendly-files.test", "binary")
    files = [sites.url("friendly-files.test", "/logo.png")] * 4  # image/png: not text to Scrapy
    result = await run_crawl({**settings, "DUPEFILTER_CLASS": "scrapy.dupefilters.BaseDupeFilter"}, files)
    assert len(result.responses) == 4
    after = record_of(settings, "friendly-files.test")
    assert after.fetch_total == learned.fetch_total, after.recent[-4:]
    assert result.stats["domainstate/not_evidence"] == 4
    assert result.stats.get("domainstate/outcome/navigation", 0) == 0


@NEEDS_SCRAPY_2_19
@pytest_twisted.ensureDeferred
async def test_a_friendly_domains_empty_pages_behind_a_bad_certificate_are_dead_signals(
    sites: Any, crawl_settings: Any, run_crawl: Any
) -> None:
    """An empty page behind an invalid certificate is the certificate's dead signal, on a
    friendly domain too (it is scanned): five in a row demote it, as with full scanning."""
    settings = {**ds_defaults(crawl_settings), "CONCURRENT_REQUESTS_PER_DOMAIN": 1}
    await run_crawl(settings, pages(sites, "friendly-tls.test", 8, tls="expired"))
    learned = record_of(settings, "friendly-tls.test")
    assert learned.state is State.FRIENDLY
    sites.set_kind("friendly-tls.test", "cold")  # the site is abandoned: its default page, no contacts
    await run_crawl(settings, pages(sites, "friendly-tls.test", 6, tls="expired"))
    after = record_of(settings, "friendly-tls.test")
    fetched = after.recent[-5:]
    assert all(e.outcome is Outcome.DEAD and e.error_class == "tls:expired" for e in fetched), after.recent
    assert after.state is not State.FRIENDLY
