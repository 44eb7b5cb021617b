"""Parked domains in a real crawl over the loopback web (issue 25, item 4).

The ``parked`` site kind serves a real captured for-sale page (HugeDomains, carrying the
broker's e-mail and phone) on every path. Its home page is recorded as ``parked``, its e-mail is
not counted as a contact, the domain goes to ``dead`` with the reason ``parked``, and the next
crawl skips it.
"""

from __future__ import annotations

from typing import Any

import pytest_twisted

from scrapy_domainstate.core.record import Method, Outcome, State
from scrapy_domainstate.tools.crawllog import CrawlSummary
from scrapy_domainstate.tools.report import state_reason
from tests.scrapy.test_e2e import ds, record_of


@pytest_twisted.ensureDeferred
async def test_parked_home_page_is_recorded_parked_and_its_email_not_counted(
    sites: Any, crawl_settings: Any, run_crawl: Any
) -> None:
    settings = ds(crawl_settings)
    sites.set_kind("forsale-shop.test", "parked")
    parked, friendly = sites.url("forsale-shop.test"), sites.url("friendly.test")
    result = await run_crawl(settings, [parked, friendly])
    # The page reached the spider, e-mail and all.
    assert result.response_for(parked).emails
    rec = record_of(settings, "forsale-shop.test")
    assert [(e.outcome, e.error_class) for e in rec.recent if e.method is Method.FETCH] == [
        (Outcome.PARKED, "parked:hugedomains")
    ]
    assert (rec.fetch_ok, rec.fetch_ok_empty) == (0, 0)
    assert rec.state is State.DEAD
    assert state_reason(rec, rec) == "parked (hugedomains)"
    assert result.stats["domainstate/outcome/parked"] == 1
    summary = CrawlSummary.from_stats(result.stats, started=0.0, finished=1.0)
    assert summary.parked == 1
    assert "1 parked home pages" in summary.log_message()[0] % summary.log_message()[1]
    assert CrawlSummary.from_json(summary.to_json()).parked == 1
    assert record_of(settings, "friendly.test").fetch_ok == 1  # a page with contacts still counts
    # The next crawl skips the parked domain.
    sites.reset_log()
    again = await run_crawl(settings, [parked])
    assert sites.requests("forsale-shop.test") == []
    assert again.stats.get("domainstate/outcome/parked", 0) == 0
