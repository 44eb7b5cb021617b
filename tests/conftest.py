"""Shared fixtures: the multi-host test server, crawl settings, the browser, ``run_crawl``.

End-to-end tests need pytest-twisted's asyncio reactor: ``--reactor=asyncio``.
No test reaches the network: names resolve from ``scrapy_domainstate/testing/resolver.py``'s table (installed on
the reactor for the whole session, and again per crawl), the server listens on 127.0.0.1,
Chromium maps every name it does not know to ``~NOTFOUND``, and below Twisted the process's
``socket.getaddrinfo`` refuses every name but localhost (see ``_no_network``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from scrapy_domainstate.testing.crawl import run_crawl as _run_crawl
from scrapy_domainstate.testing.offline import CHROMIUM, chromium_launch_options, loopback_only
from scrapy_domainstate.testing.resolver import HOSTS_SETTING, TableResolver
from scrapy_domainstate.testing.sites import SiteServer

# Shared CI machines are slow and noisy: property tests are about properties, not speed.
settings.register_profile("domainstate", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("domainstate")

ASYNCIO_REACTOR = "twisted.internet.asyncioreactor.AsyncioSelectorReactor"
PLAYWRIGHT_HANDLER = "scrapy_playwright.handler.ScrapyPlaywrightDownloadHandler"


def _reactor() -> Any:
    from twisted.internet import reactor

    return reactor


@pytest.fixture(scope="session", autouse=True)
def _no_network() -> Iterator[None]:
    """Session-wide safety net below Twisted: the process cannot resolve a real name.

    ``socket.getaddrinfo`` and friends answer only localhost and loopback literals; Scrapy's
    cookie middleware gets a ``TLDExtract`` that never fetches the Public Suffix List.
    """
    with loopback_only():
        yield


@pytest.fixture(scope="session", autouse=True)
def _loopback_only_dns() -> Iterator[TableResolver]:
    """Session-wide safety net: the reactor resolves from the test table, never the system."""
    resolver = TableResolver(_reactor())
    resolver.install_on_reactor()
    yield resolver
    resolver.uninstall()


@pytest.fixture(scope="session")
def sites_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SiteServer]:
    """The test web server, started once per session on the pytest-twisted reactor."""
    server = SiteServer.start(tmp_path_factory.mktemp("sites-certs"), _reactor())
    yield server
    server.close()


@pytest.fixture
def sites(sites_server: SiteServer) -> SiteServer:
    """The test web server, reset for this test: default site table, empty log and counters."""
    sites_server.reset()
    return sites_server


@pytest.fixture
def crawl_settings(tmp_path: Path, sites: SiteServer) -> dict[str, Any]:
    """Scrapy settings for an end-to-end crawl against ``sites`` (a fresh dict per test)."""
    from scrapy.utils.reactor import is_asyncio_reactor_installed

    if not is_asyncio_reactor_installed():
        pytest.fail("end-to-end crawls need pytest-twisted's asyncio reactor: run pytest with --reactor=asyncio")
    return {
        "TWISTED_REACTOR": ASYNCIO_REACTOR,
        "TWISTED_DNS_RESOLVER": TableResolver,
        HOSTS_SETTING: {},
        "DOWNLOAD_TIMEOUT": 5,
        "RETRY_ENABLED": False,
        "LOG_LEVEL": "INFO",
        "ROBOTSTXT_OBEY": False,
        "TELNETCONSOLE_ENABLED": False,
        "HTTPPROXY_ENABLED": False,
        "HTTPCACHE_ENABLED": False,
        "DNSCACHE_ENABLED": False,
        "AUTOTHROTTLE_ENABLED": False,
        "MEMUSAGE_ENABLED": False,
        "DOWNLOAD_DELAY": 0,
        "HTTPERROR_ALLOW_ALL": True,
        "DOMAINSTATE_LMDB_PATH": str(tmp_path / "ds"),
    }


@pytest.fixture
def browser_settings(crawl_settings: dict[str, Any]) -> dict[str, Any]:
    """``crawl_settings`` plus scrapy-playwright on Debian's Chromium (skips if it is missing).

    ``run_crawl`` rebuilds ``--host-resolver-rules`` from the final ``DOMAINSTATE_TEST_HOSTS``.
    """
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} not found: install Debian's chromium package for browser tests")
    return {
        **crawl_settings,
        "DOWNLOAD_HANDLERS": {"http": PLAYWRIGHT_HANDLER, "https": PLAYWRIGHT_HANDLER},
        "PLAYWRIGHT_BROWSER_TYPE": "chromium",
        "PLAYWRIGHT_LAUNCH_OPTIONS": chromium_launch_options(crawl_settings.get(HOSTS_SETTING)),
        "PLAYWRIGHT_CONTEXTS": {"default": {"ignore_https_errors": True}},
        "PLAYWRIGHT_MAX_CONTEXTS": 1,
        # the browser sends its own headers (User-Agent ...HeadlessChrome...), so the server log
        # can tell browser requests from Scrapy's; scrapy-playwright's default would send Scrapy's
        "PLAYWRIGHT_PROCESS_REQUEST_HEADERS": None,
        "PLAYWRIGHT_DEFAULT_NAVIGATION_TIMEOUT": 20_000,
        "DOWNLOAD_TIMEOUT": 30,
    }


@pytest.fixture
def run_crawl() -> Any:
    """``run_crawl(settings, urls, spider_cls=None, **spider_kwargs) -> Deferred[CrawlResult]``."""
    return _run_crawl
