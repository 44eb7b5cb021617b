"""A real crawl keeps its pace while Redis is slow (issue 22, item 4).

The same crawl against the loopback test web, on the Redis store behind a
:class:`~scrapy_domainstate.testing.delay_proxy.DelayProxy`: without delay and with 0.2 s
added each way, alternated twice. The crawl function is ``benchmarks/slow_redis.py``'s, which prints
the same figures at a larger size.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted

from scrapy_domainstate.testing.delay_proxy import DelayProxy
from scrapy_domainstate.testing.redis_server import RedisServer, require_redis_server
from tests import ROOT

pytestmark = pytest.mark.redis

_spec = importlib.util.spec_from_file_location("slow_redis", ROOT / "benchmarks" / "slow_redis.py")
assert _spec is not None and _spec.loader is not None
slow_redis = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(slow_redis)


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[DelayProxy]:
    require_redis_server()
    with RedisServer(tmp_path / "redis") as server, DelayProxy(server.port) as proxy:
        yield proxy


@pytest_twisted.ensureDeferred
async def test_a_crawl_keeps_its_pace_while_redis_is_slow(
    sites: Any, crawl_settings: dict[str, Any], proxy: DelayProxy, caplog: Any
) -> None:
    settings = {
        **slow_redis.crawl_settings(Path(crawl_settings["DOMAINSTATE_LMDB_PATH"]), proxy.url()),
        **{k: v for k, v in crawl_settings.items() if k != "LOG_LEVEL"},
        "DOMAINSTATE_STORE": "scrapy_domainstate.store.redis.RedisStore",
        "DOMAINSTATE_REDIS_URL": proxy.url(),
        "CLOSESPIDER_TIMEOUT": 30,  # before the fix this crawl takes minutes: fail in bounded time
    }
    with caplog.at_level(logging.INFO, logger="scrapy_domainstate.store.redis"):
        # normal and slow alternated twice (the machine may be shared), each kind's fastest round
        figures = await slow_redis.compare(sites, settings, proxy, 0.2, 10, 20, rounds=2)
    normal, slow = figures["normal"], figures["slow"]
    print(f"normal {normal}\nslow {slow}")
    assert normal["responses"] == slow["responses"] == 200
    assert figures["ratio"] >= 0.5, (normal, slow)
    assert slow["worst_call_s"] < 1.0, slow
    assert slow["stats"]["domainstate/store/slow_calls"] >= 1
    assert slow["stats"]["domainstate/store/short_circuits"] >= 100
    too_slow = [r for r in caplog.records if r.levelno == logging.WARNING and "too slow" in r.getMessage()]
    assert len(too_slow) == 2  # one per slow crawl: one per outage
