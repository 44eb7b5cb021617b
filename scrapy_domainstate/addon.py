"""The Scrapy add-on: ``ADDONS = {"scrapy_domainstate.Addon": 0}``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.exceptions import NotConfigured

from scrapy_domainstate.core.config import Config, log_unknown_settings
from scrapy_domainstate.extension import DomainStateExtension
from scrapy_domainstate.middleware import DomainStateDownloadedMiddleware, DomainStateMiddleware
from scrapy_domainstate.pipeline import DomainStatePipeline
from scrapy_domainstate.runtime.failures import quiet_startup_failures
from scrapy_domainstate.runtime.switch import off_reason, report_off
from scrapy_domainstate.spidermw import DomainStateQueueFilter, DomainStateSpiderMiddleware

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings
    from typing_extensions import Self

__all__ = [
    "DOWNLOADED_MIDDLEWARE_PRIORITY",
    "DOWNLOADER_MIDDLEWARE_PRIORITY",
    "EXTENSION_PRIORITY",
    "PIPELINE_PRIORITY",
    "QUEUE_FILTER_PRIORITY",
    "SPIDER_MIDDLEWARE_PRIORITY",
    "Addon",
]

#: Below Retry (550), MetaRefresh (580), HttpCompression (590) and Redirect (600);
#: above HttpCache (900). See :mod:`scrapy_domainstate.middleware`.
DOWNLOADER_MIDDLEWARE_PRIORITY = 540
#: Next to the downloader, above every middleware of Scrapy's and of the usual plugins: it sees
#: each download first, as Scrapy's response_downloaded and request_left_downloader signals do.
DOWNLOADED_MIDDLEWARE_PRIORITY = 10_000
#: Close to the spider, so it counts exactly what the callback yields.
SPIDER_MIDDLEWARE_PRIORITY = 950
#: Last before the scheduler (below Offsite 500, Referer 700, UrlLength 800, Depth 900): the
#: skip-before-queue filter decides only what would be scheduled.
QUEUE_FILTER_PRIORITY = 10
EXTENSION_PRIORITY = 500
#: First: the store opens before the project's own pipelines open theirs.
PIPELINE_PRIORITY = 0


class Addon:
    """Enables the downloader middleware, the spider middlewares (the outcome counter and the
    skip-before-queue filter), the extension and the pipeline that opens the store (so a
    store that cannot open fails the crawl's start).

    Components a project already lists keep the priority it gave them. The
    settings are validated here, so a bad value fails at start-up naming it,
    and each misspelt ``DOMAINSTATE_*`` name logs one WARNING. When the plugin
    is off (``DOMAINSTATE_ENABLED = False``, or ``domainstate_enabled = False``
    on the spider) it logs one INFO line and enables nothing.
    """

    def __init__(self, crawler: Crawler | None = None) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def update_settings(self, settings: BaseSettings) -> None:
        quiet_startup_failures(settings)
        config = Config.from_settings(settings)
        log_unknown_settings(settings, self.crawler)
        reason = off_reason(config, getattr(self.crawler, "spider", None))
        if reason is not None:
            report_off(self.crawler, reason)
            # Bare on purpose: Scrapy logs a NotConfigured message as a WARNING.
            raise NotConfigured
        settings.setdefault_in_component_priority_dict(
            "DOWNLOADER_MIDDLEWARES", DomainStateMiddleware, DOWNLOADER_MIDDLEWARE_PRIORITY
        )
        settings.setdefault_in_component_priority_dict(
            "DOWNLOADER_MIDDLEWARES", DomainStateDownloadedMiddleware, DOWNLOADED_MIDDLEWARE_PRIORITY
        )
        settings.setdefault_in_component_priority_dict(
            "SPIDER_MIDDLEWARES", DomainStateSpiderMiddleware, SPIDER_MIDDLEWARE_PRIORITY
        )
        settings.setdefault_in_component_priority_dict(
            "SPIDER_MIDDLEWARES", DomainStateQueueFilter, QUEUE_FILTER_PRIORITY
        )
        settings.setdefault_in_component_priority_dict("EXTENSIONS", DomainStateExtension, EXTENSION_PRIORITY)
        settings.setdefault_in_component_priority_dict("ITEM_PIPELINES", DomainStatePipeline, PIPELINE_PRIORITY)
