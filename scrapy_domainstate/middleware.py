"""The downloader middleware: ask the store before each request, record after each download.

Thin on purpose: every decision and every record goes through
:class:`~scrapy_domainstate.runtime.lifecycle.DomainStateManager`, which also opens, flushes and
closes the store (so the middleware listed alone, without the extension, still saves what
was learned).

Position (``540``, set by the add-on): *below* ``RetryMiddleware`` (550),
``MetaRefreshMiddleware`` (580), ``HttpCompressionMiddleware`` (590) and
``RedirectMiddleware`` (600), so it sees one final, decompressed, non-redirect
response per request after Scrapy's retries; *above* ``HttpCacheMiddleware`` (900),
so cached responses pass through it flagged ``cached`` and are logged as method
``cache`` without being counted as evidence.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy_domainstate.runtime.lifecycle import DomainStateManager

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Request, Response
    from typing_extensions import Self

__all__ = ["DomainStateMiddleware"]


class DomainStateMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.manager = DomainStateManager.for_crawler(crawler)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def process_request(self, request: Request, spider: Any = None) -> Any:
        if not self.manager.opened or not self.manager.spider_enabled():
            return None
        return self.manager.before_request(request)

    def process_response(self, request: Request, response: Response, spider: Any = None) -> Request | Response:
        if not self.manager.opened:
            return response
        return self.manager.after_response(request, response)

    def process_exception(self, request: Request, exception: Exception, spider: Any = None) -> Request | None:
        if not self.manager.opened:
            return None
        return self.manager.after_exception(request, exception)
