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

from scrapy_domainstate.runtime.manager import DomainStateManager

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from typing_extensions import Self

__all__ = ["DomainStateSpiderMiddleware"]


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
