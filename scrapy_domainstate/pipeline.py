"""The item pipeline whose one job is to open the store when Scrapy opens the spider.

Scrapy gives ``scrapy crawl`` a non-zero exit status only when a crawl fails to *start*
(``CrawlerProcess.bootstrap_failed``); a spider closed from a ``spider_opened`` handler
(``CloseSpider``) is a crawl that ran, and exits 0. Item pipelines' ``open_spider`` is
where Scrapy opens a crawl's resources, and an exception there is a failed start. So this
pipeline opens the plugin's store there: when the store cannot open (an LMDB path that
cannot hold it, Redis down), the plugin logs why (ERROR, ``domainstate/open_error/store``),
the spider is closed before its first request (``finish_reason:
domainstate_unavailable``), and ``scrapy crawl`` exits with status 1, so a cron job sees
the failure.

It has no ``process_item``: items pass through untouched, at no cost. The add-on enables
it; without it the store opens at ``spider_opened`` and a store that cannot open closes
the spider with exit status 0 (said at the end of the log).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy.exceptions import CloseSpider

from scrapy_domainstate.runtime.failures import store_unavailable
from scrapy_domainstate.runtime.lifecycle import DomainStateManager

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from typing_extensions import Self

__all__ = ["DomainStatePipeline", "DomainStateUnavailable"]


class DomainStateUnavailable(RuntimeError):
    """The store (or the shared-state service) cannot open: the crawl did not start."""


class DomainStatePipeline:
    def __init__(self, crawler: Crawler) -> None:
        self.manager = DomainStateManager.for_crawler(crawler)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def open_spider(self, spider: Any = None) -> None:
        if not self.manager.spider_enabled():
            return
        self.manager.exit_status_on_failure = True
        try:
            self.manager.open()
        except CloseSpider as exc:
            store_unavailable()
            raise DomainStateUnavailable(
                f"scrapy-domainstate: {exc.reason}: the store cannot open (the ERROR above says why); "
                "the crawl did not start"
            ) from None
