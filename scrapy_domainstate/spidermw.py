"""The spider middleware behind ``DOMAINSTATE_OUTCOME = "items"``.

It counts what the callback yielded for each response and records ``ok-contact``
when at least one item came out (``ok-empty`` otherwise). A callback may decide
itself by setting ``response.meta["domainstate_outcome"]``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import NotConfigured
from scrapy.http import Request

from .manager import DomainStateManager

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from typing_extensions import Self

__all__ = ["DomainStateSpiderMiddleware"]


class DomainStateSpiderMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.manager = DomainStateManager.for_crawler(crawler)
        if not self.manager.outcomes.from_items:
            # Only the "items" outcome source needs to see what callbacks yield. No message:
            # Scrapy logs a NotConfigured message as a WARNING, and this is the default case.
            raise NotConfigured

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def process_spider_output(self, response: Response, result: Iterable[Any], spider: Any = None) -> Iterable[Any]:
        n = 0
        try:
            for obj in result:
                if not isinstance(obj, Request):
                    n += 1
                yield obj
        finally:
            self.manager.record_items(response, n)

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Any = None
    ) -> AsyncIterator[Any]:
        n = 0
        try:
            async for obj in result:
                if not isinstance(obj, Request):
                    n += 1
                yield obj
        finally:
            self.manager.record_items(response, n)

    def process_spider_exception(self, response: Response, exception: Exception, spider: Any = None) -> None:
        self.manager.record_items(response, 0)
