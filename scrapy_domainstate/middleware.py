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

:class:`DomainStateDownloadedMiddleware` sits next to the downloader (``10000``, set by the
add-on) and sees each download first, as it leaves the downloader: the request's place in the send gate
and its domain's lead are given back once its way back through the middlewares is over, also
when that way ends above the downloader middleware (a retry, a redirect). (A 429 slows its slot
through Scrapy's ``response_downloaded`` signal, sent before the slot sends its next request.) Without it (a project that lists only the
downloader middleware) the manager listens to Scrapy's ``request_left_downloader`` signal
instead, which comes before the way back of a failure: a domain whose first request fails is
then released before that failure is recorded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy_domainstate.runtime.lifecycle import DomainStateManager

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Request, Response
    from typing_extensions import Self

__all__ = ["DomainStateDownloadedMiddleware", "DomainStateMiddleware"]


class DomainStateMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.manager = DomainStateManager.for_crawler(crawler)
        self.manager.deciding = True

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


class DomainStateDownloadedMiddleware:
    """Each download as it leaves the downloader (see the module's docstring)."""

    def __init__(self, crawler: Crawler) -> None:
        self.manager = DomainStateManager.for_crawler(crawler)
        self.manager.downloaded_middleware = True

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def process_response(self, request: Request, response: Response, spider: Any = None) -> Response:
        if self.manager.opened:
            self.manager.left_downloader(request, failed=False)
        return response

    def process_exception(self, request: Request, exception: Exception, spider: Any = None) -> None:
        if self.manager.opened:
            self.manager.left_downloader(request, failed=True)
