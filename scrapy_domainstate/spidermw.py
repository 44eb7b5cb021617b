"""The spider middleware behind ``DOMAINSTATE_OUTCOME = "items"`` (and a callable outcome).

It counts what the callback yielded for each response: at least one item is useful
(``ok-contact``); no item but follow-up requests to the same site is ``navigation``
(neither useful nor empty); neither is ``ok-empty``. A callback may decide itself by
setting ``response.meta["domainstate_outcome"]``. For a callable outcome that returned
None, only ``navigation`` is recorded (else the page is not evidence).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import NotConfigured
from scrapy.http import Request
from scrapy.utils.defer import maybe_deferred_to_future

from scrapy_domainstate.runtime.lifecycle import DomainStateManager

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from typing_extensions import Self

__all__ = ["DomainStateQueueFilter", "DomainStateSpiderMiddleware"]


class DomainStateSpiderMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.manager = DomainStateManager.for_crawler(crawler)
        if self.manager.outcomes.purpose is None:
            # Only the "items" and callable outcome sources need to see what callbacks yield. No message:
            # Scrapy logs a NotConfigured message as a WARNING, and this is the default case.
            raise NotConfigured

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def _follows(self, site: str | None, request: Request) -> bool:
        """A follow-up request to the same site (what makes an item-less page navigation)."""
        return site is not None and self.manager.key(request.url) == site

    def process_spider_output(self, response: Response, result: Iterable[Any], spider: Any = None) -> Iterable[Any]:
        site = self.manager.pending_site(response)
        n = follow = 0
        try:
            for obj in result:
                if not isinstance(obj, Request):
                    n += 1
                elif not follow and self._follows(site, obj):
                    follow = 1
                yield obj
        finally:
            self.manager.record_items(response, n, follow)

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Any = None
    ) -> AsyncIterator[Any]:
        site = self.manager.pending_site(response)
        n = follow = 0
        try:
            async for obj in result:
                if not isinstance(obj, Request):
                    n += 1
                elif not follow and self._follows(site, obj):
                    follow = 1
                yield obj
        finally:
            self.manager.record_items(response, n, follow)

    def process_spider_exception(self, response: Response, exception: Exception, spider: Any = None) -> None:
        self.manager.record_items(response, 0)


class DomainStateQueueFilter:
    """The skip-before-queue filter (``DOMAINSTATE_SKIP_BEFORE_QUEUE``, on by default).

    A spider middleware on the start requests (``process_start``, Scrapy 2.13+, and
    ``process_start_requests`` before it) and on what callbacks yield
    (``process_spider_output``): a request the memory would skip at once (its domain or host
    dead, cold, browser-only without a browser; its URL dead) is dropped here, before the
    scheduler, so it takes no place in the queue, its memory or disk queue, or a scrapy-redis
    shared queue. A request with an errback is left to the downloader middleware, so that its
    errback still gets the ``IgnoreRequest`` (a spider's errback may count or log skips). It is counted and logged as the downloader middleware counts its skips
    (``decision/skip``, ``method/skip``, ``skip/{state}``, and ``skip/before_queue`` for
    these); every other request is decided by the downloader middleware as before. Domains
    still being learned are never dropped here. With the Redis store, a start request or an
    asynchronous callback's request whose records are not cached waits for the store's read
    (that iterator alone waits, never the reactor); a synchronous callback's request is
    never held: if its records are not cached it goes on (and is decided by the downloader
    middleware).

    Placed last before the scheduler (priority 10, below Scrapy's own spider middlewares),
    so it decides only what would really be scheduled. Requests a component gives
    ``engine.crawl()`` directly (scrapy-redis's ``RedisSpider`` feeding from a Redis list)
    do not pass through spider middlewares: the downloader middleware skips those.
    """

    def __init__(self, crawler: Crawler) -> None:
        self.manager = DomainStateManager.for_crawler(crawler)
        if not self.manager.config.skip_before_queue:
            raise NotConfigured

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def _keep(self, obj: Any) -> bool:
        manager = self.manager
        if not isinstance(obj, Request) or not manager.opened or not manager.spider_enabled():
            return True
        return not manager.skips_before_queue(obj)

    async def _keep_after_read(self, obj: Any) -> bool:
        """:meth:`_keep`, first waiting for the store's read of the records if they are not
        cached (the asynchronous paths: only this iterator waits, never the reactor)."""
        manager = self.manager
        if not isinstance(obj, Request) or not manager.opened or not manager.spider_enabled():
            return True
        pending = manager.before_queue_read(obj)
        if pending is not None:
            await maybe_deferred_to_future(pending)
        return not manager.skips_before_queue(obj)

    async def process_start(self, start: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for obj in start:
            if await self._keep_after_read(obj):
                yield obj

    def process_start_requests(self, start_requests: Iterable[Any], spider: Any = None) -> Iterable[Any]:
        for obj in start_requests:
            if self._keep(obj):
                yield obj

    def process_spider_output(self, response: Response, result: Iterable[Any], spider: Any = None) -> Iterable[Any]:
        for obj in result:
            if self._keep(obj):
                yield obj

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Any = None
    ) -> AsyncIterator[Any]:
        async for obj in result:
            if await self._keep_after_read(obj):
                yield obj
