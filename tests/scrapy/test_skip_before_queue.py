"""Skip before the queue (issue 24, item 3): requests the memory skips never reach the scheduler.

Real crawls through Scrapy's engine against the loopback sites: a store (real LMDB, and the
Redis store on a real redis-server) that holds some domains dead or cold and one URL dead.
The start requests and what a callback yields for those domains are dropped by the
spider-middleware filter, so the scheduler never enqueues them (``scheduler/enqueued``)
and no downloader middleware sees them; they are counted exactly as the downloader
middleware counts its skips (the same crawl with the filter off gives the same
``domainstate/skip/*`` and ``decision/skip`` figures). Domains still being learned go on.
With scrapy-redis's scheduler, the skipped requests never enter the shared Redis queue.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, ClassVar

import pytest
import pytest_twisted
from scrapy import Request
from scrapy.http import Response

from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.record import DomainStat, State
from scrapy_domainstate.store.lmdb import LmdbStore
from scrapy_domainstate.testing.crawl import RecordingSpider, run_crawl
from scrapy_domainstate.testing.redis_server import RedisServer, require_redis_server

ADDON = {"scrapy_domainstate.Addon": 0}
ALIVE = "friendly.test"
NEW = "friendly-new.test"  # unknown to the memory: still being learned
DEAD = "friendly-dead.test"  # served fine, but the memory says dead
COLD = "friendly-cold.test"  # served fine, but the memory says cold
PATHS = ("/", "/page1", "/page2", "/contact")


class SeenByDownloader:
    """A downloader middleware ahead of every other: the URLs that reached the downloader."""

    seen: ClassVar[list[str]] = []

    def process_request(self, request: Request, spider: Any = None) -> None:
        self.seen.append(request.url)


class FollowingSpider(RecordingSpider):
    """Requests without an errback; each page of the live site yields one request to each
    skipped site (callback output), and its root one with an errback (left to the downloader
    middleware, whose IgnoreRequest reaches the errback)."""

    name = "following"
    targets: ClassVar[list[str]] = []
    with_errback: ClassVar[str] = ""

    def make_request(self, url: str | Request) -> Request:
        return super().make_request(url).replace(errback=None)

    def parse(self, response: Response) -> Any:
        yield from super().parse(response)
        if ALIVE in response.url and not response.meta.get("followed"):
            for url in self.targets:
                yield Request(url, callback=self.parse, meta={"followed": True}, dont_filter=True)
            if response.url.endswith("/"):
                yield Request(self.with_errback, callback=self.parse, errback=self.on_error, dont_filter=True)


def _seed(store: Any, dead_url: str) -> None:
    """Two sites dead and cold in the memory, and one URL of the live site dead."""
    from scrapy.utils.request import RequestFingerprinter

    now = time.time()
    for domain, state in ((DEAD, State.DEAD), (COLD, State.COLD)):
        store.put(DomainStat(domain, state=state, first_seen=now, last_seen=now, state_expires_at=now + 1e5))
    store.mark_url_dead(RequestFingerprinter().fingerprint(Request(dead_url)).hex(), now + 1e5)
    store.mark_url_dead("domain:" + ALIVE, now + 1e5)


def _urls(sites: Any) -> tuple[list[str], list[str], list[str]]:
    alive = [sites.url(ALIVE, p) for p in PATHS] + [sites.url(NEW, p) for p in PATHS]
    skipped_start = [sites.url(DEAD, p) for p in PATHS] + [sites.url(COLD, p) for p in PATHS]
    skipped_start.append(sites.url(ALIVE, "/dead-page"))  # the URL-level dead mark
    follow = [sites.url(DEAD, "/followed"), sites.url(COLD, "/followed")]
    return alive, skipped_start, follow


async def _crawl(
    settings: dict[str, Any], sites: Any, *, filter_on: bool, contact_pages: bool = False
) -> tuple[Any, list[str]]:
    alive, skipped_start, follow = _urls(sites)
    FollowingSpider.targets = follow
    FollowingSpider.with_errback = sites.url(DEAD, "/errback")
    SeenByDownloader.seen = []
    result = await run_crawl(
        {
            **settings,
            "ADDONS": ADDON,
            "DOMAINSTATE_SKIP_BEFORE_QUEUE": filter_on,
            # every page of the cold site is skipped here (its /contact too), unless asked:
            # the exception for contact pages is test_a_cold_sites_contact_page_passes_the_filter
            "DOMAINSTATE_COLD_CONTACT_PAGES": contact_pages,
            "DOWNLOADER_MIDDLEWARES": {SeenByDownloader: 1},
        },
        alive + skipped_start,
        FollowingSpider,
    )
    return result, list(SeenByDownloader.seen)


def _expected(sites: Any) -> dict[str, int]:
    alive, skipped_start, follow = _urls(sites)
    n_alive_pages = len(PATHS)  # each page of the live site follows to both skipped sites
    return {
        # (+1: the request with an errback goes on to the downloader middleware, which skips it)
        "enqueued": len(alive) + 1,
        "skipped": len(skipped_start) + n_alive_pages * len(follow) + 1,
        "dead": len(PATHS) + n_alive_pages + 1,
        "cold": len(PATHS) + n_alive_pages,
    }


def _check(result: Any, seen: list[str], sites: Any, expected: dict[str, int], *, filter_on: bool) -> None:
    stats = result.stats
    skipped = expected["skipped"]
    # the same skip figures with and without the filter: counted once, where the skip happens
    assert stats.get("domainstate/skip/dead") == expected["dead"]
    assert stats.get("domainstate/skip/cold") == expected["cold"]
    assert stats.get("domainstate/skip/dead-url") == 1
    assert stats.get("domainstate/method/skip") == skipped
    assert stats.get("domainstate/decision/skip") == skipped
    assert not sites.requests(DEAD) and not sites.requests(COLD)
    assert sites.url(ALIVE, "/dead-page") not in [r.url for r in result.responses]
    # the live and the new (still being learned) sites were all crawled
    assert len(sites.requests(ALIVE)) == len(PATHS) and len(sites.requests(NEW)) == len(PATHS)
    # the request with an errback reached it with the downloader middleware's IgnoreRequest
    assert "is dead" in str(result.failure_for(sites.url(DEAD, "/errback")).exception)
    dropped = [u for u in seen if DEAD in u or COLD in u or u.endswith("/dead-page")]
    if filter_on:
        assert stats.get("domainstate/skip/before_queue") == skipped - 1
        assert stats["scheduler/enqueued"] == expected["enqueued"]
        assert dropped == [sites.url(DEAD, "/errback")]  # no downloader middleware saw the others
    else:
        assert "domainstate/skip/before_queue" not in stats
        assert stats["scheduler/enqueued"] == expected["enqueued"] + skipped - 1
        assert len(dropped) == skipped


@pytest_twisted.ensureDeferred
@pytest.mark.parametrize("filter_on", [True, False])
async def test_skipped_requests_never_reach_scrapys_scheduler(
    sites: Any, crawl_settings: dict[str, Any], filter_on: bool
) -> None:
    with LmdbStore(Config.from_settings(crawl_settings)) as store:
        _seed(store, sites.url(ALIVE, "/dead-page"))
    result, seen = await _crawl(crawl_settings, sites, filter_on=filter_on)
    _check(result, seen, sites, _expected(sites), filter_on=filter_on)


@pytest_twisted.ensureDeferred
async def test_a_cold_sites_contact_page_passes_the_filter(sites: Any, crawl_settings: dict[str, Any]) -> None:
    """The filter decides as the downloader middleware does: a cold domain's contact page goes
    on (DOMAINSTATE_COLD_CONTACT_PAGES), its other pages are dropped before the queue."""
    with LmdbStore(Config.from_settings(crawl_settings)) as store:
        _seed(store, sites.url(ALIVE, "/dead-page"))
    result, seen = await _crawl(crawl_settings, sites, filter_on=True, contact_pages=True)
    assert [r.path for r in sites.requests(COLD)] == ["/contact"]
    assert [u for u in seen if COLD in u] == [sites.url(COLD, "/contact")]
    assert not sites.requests(DEAD)
    assert result.stats.get("domainstate/skip/before_queue", 0) > 0


@pytest.fixture
def redis_server(tmp_path: Path) -> Any:
    require_redis_server()
    with RedisServer(tmp_path / "redis") as server:
        yield server


@pytest.mark.redis
# scrapy-redis 0.9.1 passes ``spider=`` to the stats collector, deprecated since Scrapy 2.13
@pytest.mark.filterwarnings("ignore:Passing a 'spider' argument:scrapy.exceptions.ScrapyDeprecationWarning")
@pytest_twisted.ensureDeferred
async def test_skipped_requests_never_enter_the_scrapy_redis_queue(
    sites: Any, crawl_settings: dict[str, Any], redis_server: Any
) -> None:
    pytest.importorskip("scrapy_redis")
    from scrapy_domainstate.store.redis import RedisStore

    with RedisStore(Config(redis_url=redis_server.url)) as store:
        _seed(store, sites.url(ALIVE, "/dead-page"))
    settings = {
        **crawl_settings,
        "DOMAINSTATE_STORE": "scrapy_domainstate.store.redis.RedisStore",
        "DOMAINSTATE_REDIS_URL": redis_server.url,
        "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
        "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
        "REDIS_URL": redis_server.url,
        "SCHEDULER_PERSIST": False,
    }
    result, seen = await _crawl(settings, sites, filter_on=True)
    expected = _expected(sites)
    stats = result.stats
    # what scrapy-redis pushed to (and popped from) the shared queue: the live requests only
    assert stats["scheduler/enqueued/redis"] == expected["enqueued"]
    assert stats["scheduler/dequeued/redis"] == expected["enqueued"]
    assert stats.get("domainstate/skip/before_queue") == expected["skipped"] - 1
    assert stats.get("domainstate/skip/dead") == expected["dead"]
    assert not sites.requests(DEAD) and not sites.requests(COLD)
    dropped = [u for u in seen if DEAD in u or COLD in u or u.endswith("/dead-page")]
    assert dropped == [sites.url(DEAD, "/errback")]


class NoErrbackSpider(RecordingSpider):
    """Start requests without an errback: the filter may drop any of them before the queue."""

    name = "no-errback"

    def make_request(self, url: str | Request) -> Request:
        return super().make_request(url).replace(errback=None)


@pytest_twisted.ensureDeferred
async def test_an_antibot_hard_domains_canary_passes_the_filter(sites: Any, crawl_settings: dict[str, Any]) -> None:
    """Without a browser route an ``antibot-hard`` domain is skipped, but for the visit's one
    plain canary (docs/SPEC.md section 2): the filter lets the domain's requests go on to the downloader
    middleware until its canary is sent, as it does a domain still being learned. A wall that is
    still up costs its canary only; one that came down (a friendly site) is crawled again."""
    wall, down = "cf-hard-q.test", "friendly-washard.test"
    now = time.time()
    with LmdbStore(Config.from_settings(crawl_settings)) as store:
        for domain in (wall, down):
            store.put(
                DomainStat(domain, state=State.ANTIBOT_HARD, first_seen=now, last_seen=now, state_expires_at=now + 1e5)
            )
    result = await run_crawl(
        {**crawl_settings, "ADDONS": ADDON, "DOMAINSTATE_SKIP_BEFORE_QUEUE": True},
        [sites.url(d, p) for d in (wall, down) for p in PATHS],
        NoErrbackSpider,
    )
    stats = result.stats
    assert stats.get("domainstate/canary") == 2
    assert len(sites.requests(wall)) == 1  # its canary, a plain fetch that met the wall
    assert stats.get("domainstate/skip/antibot-hard") == len(PATHS) - 1
    assert len(sites.requests(down)) == len(PATHS)  # the canary passed: antibot-soft, fetched
    with LmdbStore(Config.from_settings(crawl_settings)) as store:
        assert store.get(down).state is State.ANTIBOT_SOFT
        assert store.get(wall).state is State.ANTIBOT_HARD
