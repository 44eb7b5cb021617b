"""The Redis store on a real 3-node Redis Cluster on loopback (issue 24, item 2).

Three ``redis-server --cluster-enabled yes`` primaries, slots spread by
``redis-cli --cluster create`` (:class:`~scrapy_domainstate.testing.redis_server.RedisClusterNodes`).
A real crawl whose records land on all three nodes, with one node stopped and started again
in the middle of it, loses no outcome: every response is in the records afterwards. A
verdict one store writes is decided by another store (another crawler) through its read cache.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from twisted.internet import reactor, task, threads
from twisted.internet.defer import Deferred, ensureDeferred

from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.policy import Decision
from scrapy_domainstate.core.record import State
from scrapy_domainstate.store.redis import RedisStore
from scrapy_domainstate.testing.redis_server import RedisClusterNodes, require_redis_server
from tests import ROOT

pytestmark = pytest.mark.redis

_spec = importlib.util.spec_from_file_location("slow_redis", ROOT / "benchmarks" / "slow_redis.py")
assert _spec is not None and _spec.loader is not None
slow_redis = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(slow_redis)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[RedisClusterNodes]:
    require_redis_server()
    with RedisClusterNodes(tmp_path / "cluster") as nodes:
        yield nodes


def _records(url: str, prefix: str) -> dict[str, Any]:
    with RedisStore(Config(redis_url=url, redis_prefix=prefix)) as store:
        return {stat.domain: stat for stat in store.iter_records()}


def _keys_per_node(cluster: RedisClusterNodes) -> list[int]:
    return [int(node.command("DBSIZE")[1:]) for node in cluster.nodes]


def _hosts_on_every_node(cluster: RedisClusterNodes, pattern: str, prefix: str, per_node: int) -> list[str]:
    """Host names whose records land ``per_node`` on each node (the stopped node holds some)."""
    import redis
    from redis.crc import key_slot

    port_of = {n.port: i for i, n in enumerate(cluster.nodes)}
    ranges = [
        (int(start), int(end), port_of[int(owner[1])])
        for start, end, owner, *_ in redis.Redis(port=cluster.nodes[0].port).execute_command("CLUSTER SLOTS")
    ]
    chosen: dict[int, list[str]] = {i: [] for i in range(len(cluster.nodes))}
    n = 0
    while any(len(v) < per_node for v in chosen.values()):
        name = pattern.format(n)
        n += 1
        slot = key_slot(f"{prefix}d:{{{name}}}".encode())
        node = next(i for start, end, i in ranges if start <= slot <= end)
        if len(chosen[node]) < per_node:
            chosen[node].append(name)
    return [name for names in chosen.values() for name in names]


def _held_spider() -> type[Any]:
    """A spider that sends ``held`` URLs, then waits for ``gate`` (the node back) before the
    rest, so the crawl outlasts the outage by construction. It keeps its crawler, so the
    test can watch the store while it crawls."""
    from scrapy.utils.defer import maybe_deferred_to_future

    from scrapy_domainstate.testing.crawl import RecordingSpider

    class HeldSpider(RecordingSpider):
        crawlers: list[Any] = []
        gate: Any = None
        held = 0

        @classmethod
        def from_crawler(cls, crawler: Any, *args: Any, **kwargs: Any) -> Any:
            cls.crawlers.append(crawler)
            return super().from_crawler(crawler, *args, **kwargs)

        async def start(self) -> Any:
            for url in self.urls[: self.held]:
                yield self.make_request(url)
            await maybe_deferred_to_future(self.gate)
            for url in self.urls[self.held :]:
                yield self.make_request(url)

    return HeldSpider


def _crawling(crawler: Any) -> bool:
    manager = getattr(crawler, "domainstate", None)
    return manager is not None and crawler.stats.get_value("response_received_count", 0) >= 8


@pytest_twisted.ensureDeferred
async def test_a_node_restart_mid_crawl_loses_no_outcome(
    sites: Any, crawl_settings: dict[str, Any], cluster: RedisClusterNodes
) -> None:
    from scrapy_domainstate.testing.crawl import run_crawl

    prefix = "cl:"
    per_host = 15
    names = _hosts_on_every_node(cluster, "friendly-cl{}.test", prefix, per_node=4)
    hosts = len(names)
    pages = ("/", "/page1", "/page2", "/contact")
    # every host in both halves: its outcomes are written before, during and after the outage
    urls = [sites.url(name, pages[i % len(pages)]) for i in range(per_host) for name in names]
    settings = {
        **slow_redis.crawl_settings(Path(crawl_settings["DOMAINSTATE_LMDB_PATH"]), cluster.url),
        **{k: v for k, v in crawl_settings.items() if k != "LOG_LEVEL"},
        "ADDONS": {"scrapy_domainstate.Addon": 0},
        "DOMAINSTATE_STORE": "scrapy_domainstate.store.redis.RedisStore",
        "DOMAINSTATE_REDIS_URL": cluster.url,
        "DOMAINSTATE_REDIS_PREFIX": prefix,
        "DOMAINSTATE_FLUSH_INTERVAL": 0.2,
        "CONCURRENT_REQUESTS": 4,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        "DOWNLOAD_DELAY": 0.02,
        "CLOSESPIDER_TIMEOUT": 90,
    }
    restarted: dict[str, float] = {}
    spider = _held_spider()
    spider.gate, spider.held = Deferred(), len(urls) // 3

    async def restart_node() -> None:
        # Stop the node once the crawl is under way, keep it down until the store has seen
        # the outage (a write refused) and for at least 1.5 s, start it again, and only then
        # let the spider send the rest of its URLs. Timed by what the crawl does, not by the
        # clock: a loaded machine starts the crawl late.
        deadline = time.monotonic() + 60
        while not (spider.crawlers and _crawling(spider.crawlers[0])):
            assert time.monotonic() < deadline, "the crawl never got going"
            await task.deferLater(reactor, 0.05, lambda: None)
        store = spider.crawlers[0].domainstate.store
        cluster.stop_node(1)
        restarted["stopped"] = time.monotonic()
        while store.errors == 0 or time.monotonic() - restarted["stopped"] < 1.5:
            if time.monotonic() > deadline:
                break  # (the assertion on the stats below says what was missed)
            await task.deferLater(reactor, 0.05, lambda: None)
        await threads.deferToThread(cluster.start_node, 1)  # (start and wait for cluster_state:ok)
        restarted["started"] = time.monotonic()
        spider.gate.callback(None)

    crawl = run_crawl(settings, urls, spider)
    restart = ensureDeferred(restart_node())
    try:
        result = await crawl
    finally:
        if not spider.gate.called:
            spider.gate.callback(None)
    finished = time.monotonic()
    await restart
    stats = result.stats
    assert restarted["started"] < finished, "the crawl ended before the node came back"
    assert len(result.responses) == len(urls)
    records = _records(cluster.url, prefix)
    # every response's outcome is in Redis, once: none lost while the node was down, none twice
    assert sum(stat.fetch_total for stat in records.values()) == len(urls), stats
    assert len(records) == hosts
    assert all(n >= 4 for n in _keys_per_node(cluster))  # the records are spread over the 3 nodes
    assert stats.get("domainstate/store/errors", 0) >= 1  # the node's outage was seen (and survived)
    assert stats.get("domainstate/store/dropped", 0) == 0


@pytest_twisted.ensureDeferred
async def test_a_verdict_crosses_crawlers_on_the_cluster(cluster: RedisClusterNodes) -> None:
    domains = [f"site{i}.test" for i in range(30)]
    with (
        RedisStore(Config(redis_url=cluster.url, redis_prefix="v:")) as writer,
        RedisStore(Config(redis_url=cluster.url, redis_prefix="v:")) as reader,
    ):
        await task.deferLater(reactor, 0, lambda: None)
        pending = [reader.prefetch((d,)) for d in domains]
        for d in pending:
            if d is not None:
                await d
        assert all(reader.decide(d, time.time())[0] is not Decision.SKIP for d in domains)
        written = time.monotonic()
        for domain in domains:
            writer.set_state(domain, State.DEAD, time.time())
        while not all(reader.decide(d, time.time())[0] is Decision.SKIP for d in domains):
            assert time.monotonic() - written < 2.0, "the verdicts did not arrive within 2 s"
            await task.deferLater(reactor, 0.01, lambda: None)
    assert all(n > 0 for n in _keys_per_node(cluster))
