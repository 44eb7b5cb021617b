"""The send-gate's ``request_left_downloader`` receiver: connected only once the gate is used.

Scrapy sends the signal for every request, and each receiver costs every request a few
microseconds, so the plugin listens only once a request of a domain still being learned
has taken a place in the gate. Once it listens, a place whose response never comes back to
the plugin (dropped by a downloader middleware below it) is still given back.
"""

from __future__ import annotations

from typing import Any

import pytest_twisted
from pydispatch import dispatcher
from scrapy import signals
from scrapy.exceptions import IgnoreRequest
from scrapy.utils.test import get_crawler

from scrapy_domainstate.runtime.lifecycle import DomainStateManager


def _listening(manager: DomainStateManager) -> bool:
    receivers = dispatcher.getReceivers(manager.crawler.signals.sender, signals.request_left_downloader)
    return any(getattr(r, "__func__", None) is DomainStateManager.request_left_downloader for r in receivers)


def test_not_listening_before_the_gate_is_used(tmp_path: Any) -> None:
    crawler = get_crawler(settings_dict={"DOMAINSTATE_ENABLED": True, "DOMAINSTATE_LMDB_PATH": str(tmp_path / "ds")})
    manager = DomainStateManager.for_crawler(crawler)
    assert not _listening(manager)


class DropFirstPages:
    """Below the plugin (closer to the downloader): drops the GET responses of ``/drop`` pages,
    so the plugin never sees them (nor an exception: Scrapy sends none back down)."""

    def process_response(self, request: Any, response: Any, spider: Any = None) -> Any:
        if request.method == "GET" and "/drop" in request.url:
            raise IgnoreRequest("dropped below the plugin")
        return response


@pytest_twisted.ensureDeferred
async def test_a_place_whose_response_is_dropped_below_the_plugin_comes_back(
    sites: Any, crawl_settings: Any, run_crawl: Any
) -> None:
    """One request at a time per domain: the two dropped pages come first; had their places
    not come back through the signal, the other pages would wait for ever (the crawl never
    finishes; the test's timeout fails it)."""
    settings = dict(crawl_settings)
    settings.update(
        ADDONS={"scrapy_domainstate.Addon": 0},
        CONCURRENT_REQUESTS_PER_DOMAIN=1,
        DOWNLOADER_MIDDLEWARES={**settings.get("DOWNLOADER_MIDDLEWARES", {}), f"{__name__}.DropFirstPages": 560},
    )
    urls = [sites.url("friendly.test", f"/drop{i}") for i in range(2)]
    urls += [sites.url("friendly.test", f"/page{i}") for i in range(4)]
    result = await run_crawl(settings, urls)
    gets = sites.requests("friendly.test", method="GET")
    assert len(gets) == 6, [r.path for r in gets]
    assert result.stats.get("finish_reason") == "finished"
    assert result.stats.get("domainstate/gate/waited", 0) >= 1
