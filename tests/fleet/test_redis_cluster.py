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
from twisted.internet.defer import ensureDeferred

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


@pytest_twisted.ensureDeferred
async def test_a_node_restart_mid_crawl_loses_no_outcome(
    sites: Any, crawl_settings: dict[str, Any], cluster: RedisClusterNodes
) -> None:
    from scrapy_domainstate.testing.crawl import run_crawl

    prefix = "cl:"
    hosts, per_host = 12, 15
    pages = ("/", "/page1", "/page2", "/contact")
    urls = [sites.url(f"friendly-cl{h}.test", pages[i % len(pages)]) for h in range(hosts) for i in range(per_host)]
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

    async def restart_node() -> None:
        await task.deferLater(reactor, 1.0, lambda: None)
        cluster.stop_node(1)
        restarted["stopped"] = time.monotonic()
        await task.deferLater(reactor, 1.5, lambda: None)
        await threads.deferToThread(cluster.start_node, 1)  # (start and wait for cluster_state:ok)
        restarted["started"] = time.monotonic()

    crawl = run_crawl(settings, urls)
    restart = ensureDeferred(restart_node())
    result = await crawl
    await restart
    stats = result.stats
    finished = time.monotonic()
    assert "started" in restarted and finished > restarted["started"], "the crawl ended before the node came back"
    assert len(result.responses) == len(urls)
    records = _records(cluster.url, prefix)
    # every response's outcome is in Redis, once: none lost while the node was down, none twice
    assert sum(stat.fetch_total for stat in records.values()) == len(urls), stats
    assert len(records) == hosts
    assert all(n > 0 for n in _keys_per_node(cluster))  # the records are spread over the 3 nodes
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
