"""Run a real Scrapy crawl inside the pytest-twisted reactor and record what happened.

::

    @pytest_twisted.ensureDeferred
    async def test_something(sites, crawl_settings, run_crawl):
        result = await run_crawl(crawl_settings, [sites.url("friendly.test")])
        assert result.response_for(sites.url("friendly.test")).status == 200
        assert result.stats["downloader/response_count"] == 1

``run_crawl`` works with plain Scrapy and with whatever ``ADDONS``/middlewares the settings
enable. It always resolves names with :class:`resolver.TableResolver` (Scrapy's
``CrawlerRunner`` never installs ``TWISTED_DNS_RESOLVER``; a small extension added here does,
for the duration of the crawl), and rewrites Chromium's ``--host-resolver-rules`` from the
same host table when ``PLAYWRIGHT_LAUNCH_OPTIONS`` is set.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler, CrawlerRunner
from scrapy.http import Response, TextResponse
from scrapy.spidermiddlewares.httperror import HttpError
from scrapy.utils.misc import build_from_crawler, load_object
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from scrapy_domainstate.testing.resolver import HOSTS_SETTING, TableResolver, chromium_host_rules

EMAIL_RE = re.compile(rb"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
HOST_RULES_ARG = "--host-resolver-rules="


@dataclass
class ResponseRecord:
    """One response that reached the spider callback."""

    url: str
    status: int
    request: Request
    response: Response = field(repr=False)

    @property
    def meta(self) -> dict[str, Any]:
        return self.request.meta

    @property
    def domainstate(self) -> dict[str, Any] | None:
        return self.response.meta.get("domainstate")

    @property
    def headers(self) -> Any:
        return self.response.headers

    @property
    def body(self) -> bytes:
        return self.response.body

    @property
    def emails(self) -> list[str]:
        return sorted({m.decode("utf-8", "replace") for m in EMAIL_RE.findall(self.response.body[:1_000_000])})

    @property
    def browser(self) -> bool:
        """Downloaded by scrapy-playwright."""
        return "playwright" in self.response.flags or bool(self.request.meta.get("playwright"))


@dataclass
class FailureRecord:
    """One failure that reached the spider errback."""

    url: str
    failure: Failure = field(repr=False)
    request: Request

    @property
    def exception(self) -> BaseException:
        value = self.failure.value
        assert value is not None  # a Failure always holds an exception
        return value

    @property
    def exc_type(self) -> type[BaseException]:
        return type(self.exception)

    @property
    def meta(self) -> dict[str, Any]:
        return self.request.meta

    @property
    def domainstate(self) -> dict[str, Any] | None:
        return self.request.meta.get("domainstate")

    @property
    def response(self) -> Response | None:
        value = self.failure.value
        return value.response if isinstance(value, HttpError) else getattr(value, "response", None)


@dataclass
class CrawlResult:
    crawler: Crawler
    responses: list[ResponseRecord]
    failures: list[FailureRecord]
    items: list[Any]
    resolver: TableResolver | None
    #: The crawl did not start: the plugin's store could not open (``DomainStateUnavailable``,
    #: which makes ``scrapy crawl`` exit with status 1); the spider was closed before its
    #: first request and its stats say why.
    start_failed: BaseException | None = None

    @property
    def stats(self) -> dict[str, Any]:
        assert self.crawler.stats is not None
        return self.crawler.stats.get_stats()

    def responses_for(self, url: str) -> list[ResponseRecord]:
        return [r for r in self.responses if url in (r.url, r.request.url, *r.meta.get("redirect_urls", ()))]

    def response_for(self, url: str) -> ResponseRecord:
        """The only response for ``url`` (the final URL, the request URL or one redirected from)."""
        found = self.responses_for(url)
        if len(found) != 1:
            raise AssertionError(f"expected one response for {url}, got {found} (failures: {self.failures})")
        return found[0]

    def failures_for(self, url: str) -> list[FailureRecord]:
        return [f for f in self.failures if f.url == url]

    def failure_for(self, url: str) -> FailureRecord:
        found = self.failures_for(url)
        if len(found) != 1:
            raise AssertionError(f"expected one failure for {url}, got {found} (responses: {self.responses})")
        return found[0]


class RecordingSpider(Spider):
    """Request every URL once (``dont_filter=True``), record every response and failure.

    A callback yields ``{"url", "status", "emails"}`` as an item when the page has an e-mail
    address (so the ``items`` outcome source sees contact pages as useful). With
    ``follow=True`` it also follows same-host links, up to ``max_pages`` requests in all.
    ``urls`` may hold :class:`~scrapy.Request` objects: they are sent as they are, with this
    spider's callback and errback when they have none.
    """

    name = "recording"

    def __init__(
        self,
        *args: Any,
        urls: Iterable[str | Request] = (),
        meta: dict[str, Any] | None = None,
        follow: bool = False,
        max_pages: int = 50,
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)
        self.urls = list(urls)
        self.request_meta = dict(meta or {})
        self.follow = follow
        self.max_pages = max_pages
        self.responses: list[ResponseRecord] = []
        self.failures: list[FailureRecord] = []
        self._sent = 0

    def make_request(self, url: str | Request) -> Request:
        self._sent += 1
        if isinstance(url, Request):
            return url.replace(
                callback=url.callback or self.parse,
                errback=url.errback or self.on_error,
            )
        return Request(url, callback=self.parse, errback=self.on_error, meta=dict(self.request_meta), dont_filter=True)

    async def start(self) -> Any:
        for url in self.urls:
            yield self.make_request(url)

    def parse(self, response: Response) -> Any:
        assert response.request is not None
        record = ResponseRecord(url=response.url, status=response.status, request=response.request, response=response)
        self.responses.append(record)
        emails = record.emails
        if emails:
            yield {"url": response.url, "status": response.status, "emails": emails}
        if self.follow and isinstance(response, TextResponse):
            for href in response.css("a::attr(href)").getall():
                if self._sent >= self.max_pages:
                    break
                url = response.urljoin(href)
                if url.startswith(("http://", "https://")) and _same_host(url, response.url):
                    self._sent += 1
                    yield Request(url, callback=self.parse, errback=self.on_error, meta=dict(self.request_meta))

    def on_error(self, failure: Failure) -> None:
        request = failure.request  # type: ignore[attr-defined]
        self.failures.append(FailureRecord(url=request.url, failure=failure, request=request))


def _same_host(a: str, b: str) -> bool:
    from urllib.parse import urlsplit

    return urlsplit(a).netloc == urlsplit(b).netloc


class InstallTableResolver:
    """Extension: install ``TWISTED_DNS_RESOLVER`` (a :class:`TableResolver`) for one crawl.

    Scrapy only installs the resolver in ``CrawlerProcess.start()``; under ``CrawlerRunner``
    this extension does it, when the crawler is configured and before any download.
    """

    def __init__(self, crawler: Crawler):
        from twisted.internet import reactor

        resolver_cls = load_object(crawler.settings["TWISTED_DNS_RESOLVER"])
        if not (isinstance(resolver_cls, type) and issubclass(resolver_cls, TableResolver)):
            raise RuntimeError(
                f"TWISTED_DNS_RESOLVER is {resolver_cls!r}: end-to-end tests must use scrapy_domainstate/testing/resolver.py's "
                "TableResolver, never a resolver that could ask the system"
            )
        self.resolver: TableResolver = build_from_crawler(resolver_cls, crawler, reactor=reactor)
        self.resolver.install_on_reactor()
        crawler.test_resolver = self.resolver  # type: ignore[attr-defined]
        crawler.signals.connect(self.uninstall, signals.engine_stopped)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> InstallTableResolver:
        return cls(crawler)

    def uninstall(self) -> None:
        self.resolver.uninstall()


def prepare_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """Copy ``settings`` for one crawl: table resolver always, Chromium rules from the table."""
    settings = dict(settings)
    settings.setdefault("TWISTED_DNS_RESOLVER", TableResolver)
    settings["EXTENSIONS"] = {**settings.get("EXTENSIONS", {}), InstallTableResolver: 0}
    launch = settings.get("PLAYWRIGHT_LAUNCH_OPTIONS")
    if launch is not None:
        rules = HOST_RULES_ARG + chromium_host_rules(settings.get(HOSTS_SETTING))
        args = [a for a in launch.get("args", []) if not a.startswith(HOST_RULES_ARG)]
        settings["PLAYWRIGHT_LAUNCH_OPTIONS"] = {**launch, "args": [*args, rules]}
    return settings


def run_crawl(
    settings: dict[str, Any],
    urls: Iterable[str | Request],
    spider_cls: type[Spider] | None = None,
    **spider_kwargs: Any,
) -> Deferred[CrawlResult]:
    """Crawl ``urls`` with ``spider_cls`` (default :class:`RecordingSpider`) and real Scrapy.

    ``spider_kwargs`` go to the spider (``meta=``, ``follow=``, ``max_pages=`` for the
    default spider). The spider gets ``urls=`` too; a custom spider that wants the records
    subclasses :class:`RecordingSpider`. Returns a Deferred firing with a :class:`CrawlResult`.
    """
    runner = CrawlerRunner(prepare_settings(settings))
    crawler = runner.create_crawler(spider_cls or RecordingSpider)
    items: list[Any] = []

    def collect(item: Any) -> None:
        items.append(item)

    crawler.signals.connect(collect, signals.item_scraped, weak=False)
    d = runner.crawl(crawler, urls=list(urls), **spider_kwargs)

    def done(_: Any) -> CrawlResult:
        spider = crawler.spider
        return CrawlResult(
            crawler=crawler,
            responses=list(getattr(spider, "responses", [])),
            failures=list(getattr(spider, "failures", [])),
            items=items,
            resolver=getattr(crawler, "test_resolver", None),
        )

    def cleanup(result: Any) -> Any:
        resolver = getattr(crawler, "test_resolver", None)
        if resolver is not None:
            resolver.uninstall()
        return result

    def start_failed(failure: Failure) -> CrawlResult:
        from scrapy_domainstate.pipeline import DomainStateUnavailable

        failure.trap(DomainStateUnavailable)
        result = done(None)
        result.start_failed = failure.value
        return result

    d.addBoth(cleanup)
    return d.addCallbacks(done, start_failed)
