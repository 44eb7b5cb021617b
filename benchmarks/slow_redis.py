#!/usr/bin/env python
"""A real Scrapy crawl on the Redis store while Redis is slow.

Starts a ``redis-server`` on loopback, a :class:`DelayProxy` in front of it (``--delay``
seconds added each way, default 0.2) and the repository's loopback test web server, then
runs the same crawl with ``DOMAINSTATE_STORE`` set to the Redis store, through the proxy
with no delay (normal) and with the delay, alternated ``--rounds`` times (the fastest round
of each counts: the machine may be shared). For each it prints the crawl's
throughput (responses a second, from the first request to the last response; the close
and its final flush are timed apart), the slowest single store call on the reactor
thread (``decide``, ``record``, ``flush``, URL marks, ``get``), and the store's counters.

Targets (issue 22): with +0.2 s each way, throughput at least 50 % of normal and no single
store call over 1 s. Before the fix: about 0.6-0.8 requests a second, calls of 5-6.5 s.

Run ``python benchmarks/slow_redis.py --help``; ``--json`` prints the figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scrapy.utils.reactor import install_reactor

ASYNCIO_REACTOR = "twisted.internet.asyncioreactor.AsyncioSelectorReactor"
#: The store's calls on the reactor thread, timed one by one.
TIMED = ("decide", "record", "flush", "get", "current", "url_dead_until", "mark_url_dead")


class CallTimer:
    """Wraps the store's methods on the class: the slowest call, how many, their total time."""

    def __init__(self, cls: type) -> None:
        self.cls = cls
        self.saved: dict[str, Callable[..., Any]] = {}
        self.worst = 0.0
        self.worst_name = ""
        self.calls = 0
        self.total = 0.0
        self.depth = 0

    def __enter__(self) -> CallTimer:
        for name in TIMED:
            original = getattr(self.cls, name)
            self.saved[name] = original
            setattr(self.cls, name, self._wrap(name, original))
        return self

    def __exit__(self, *exc: object) -> None:
        for name, original in self.saved.items():
            setattr(self.cls, name, original)

    def _wrap(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            self.depth += 1
            started = time.monotonic()
            try:
                return original(*args, **kwargs)
            finally:
                self.depth -= 1
                took = time.monotonic() - started
                if self.depth == 0:  # the outermost call: what the reactor waited
                    self.calls += 1
                    self.total += took
                    if took > self.worst:
                        self.worst, self.worst_name = took, name

        return timed


def crawl_settings(tmp: Path, redis_url: str) -> dict[str, Any]:
    from scrapy_domainstate.testing.resolver import HOSTS_SETTING, TableResolver

    return {
        "TWISTED_REACTOR": ASYNCIO_REACTOR,
        "TWISTED_DNS_RESOLVER": TableResolver,
        HOSTS_SETTING: {},
        "DOWNLOAD_TIMEOUT": 5,
        "RETRY_ENABLED": False,
        "LOG_LEVEL": "WARNING",
        "ROBOTSTXT_OBEY": False,
        "TELNETCONSOLE_ENABLED": False,
        "HTTPCACHE_ENABLED": False,
        "DNSCACHE_ENABLED": False,
        "AUTOTHROTTLE_ENABLED": False,
        "MEMUSAGE_ENABLED": False,
        "DOWNLOAD_DELAY": 0,
        "HTTPERROR_ALLOW_ALL": True,
        "CONCURRENT_REQUESTS": 32,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 8,
        "ADDONS": {"scrapy_domainstate.Addon": 0},
        "DOMAINSTATE_STORE": "scrapy_domainstate.store.redis.RedisStore",
        "DOMAINSTATE_REDIS_URL": redis_url,
        "DOMAINSTATE_LMDB_PATH": str(tmp / "unused"),
        "DOMAINSTATE_HEAD_PROBE": False,
    }


def timed_spider() -> type:
    from scrapy_domainstate.testing.crawl import RecordingSpider

    class TimedSpider(RecordingSpider):
        """The recording spider, with the time of its first request and of its last response."""

        started = last = 0.0

        async def start(self) -> Any:
            self.started = time.monotonic()
            async for request in super().start():
                yield request

        def parse(self, response: Any) -> Any:
            self.last = time.monotonic()
            yield from super().parse(response)

    return TimedSpider


async def one_crawl(sites: Any, settings: dict[str, Any], hosts: int, per_host: int, prefix: str) -> dict[str, Any]:
    from scrapy_domainstate.store.redis import RedisStore
    from scrapy_domainstate.testing.crawl import run_crawl

    pages = ("/", "/page1", "/page2", "/contact")
    urls = [
        sites.url(f"friendly-{prefix}{h}.test", pages[i % len(pages)]) for h in range(hosts) for i in range(per_host)
    ]
    with CallTimer(RedisStore) as timer:
        result = await run_crawl(
            {**settings, "DOMAINSTATE_REDIS_PREFIX": f"bench:{prefix}:"}, urls, spider_cls=timed_spider()
        )
        closed = time.monotonic()
    spider = result.crawler.spider
    span = max(spider.last - spider.started, 1e-9)
    return {
        "requests": len(urls),
        "responses": len(result.responses),
        "seconds": round(span, 3),
        "requests_per_s": round(len(result.responses) / span, 1),
        "close_seconds": round(closed - spider.last, 3),
        "store_calls": timer.calls,
        "store_seconds": round(timer.total, 3),
        "worst_call_s": round(timer.worst, 3),
        "worst_call": timer.worst_name,
        "stats": {k: v for k, v in result.stats.items() if k.startswith("domainstate/store")},
    }


async def compare(
    sites: Any, settings: dict[str, Any], proxy: Any, delay: float, hosts: int, per_host: int, rounds: int
) -> dict[str, Any]:
    """Normal and slow crawls alternated ``rounds`` times (on a shared machine): each kind's
    fastest round, with the slowest store call of all its rounds; ``ratio`` slow / normal."""
    runs: dict[str, list[dict[str, Any]]] = {"normal": [], "slow": []}
    for i in range(rounds):
        for label, seconds in (("normal", 0.0), ("slow", delay)):
            proxy.delay = seconds
            runs[label].append(await one_crawl(sites, settings, hosts, per_host, f"{label}{i}"))
    proxy.delay = 0.0
    out: dict[str, Any] = {}
    for label, done in runs.items():
        best = dict(max(done, key=lambda r: r["requests_per_s"]))
        worst = max(done, key=lambda r: r["worst_call_s"])
        best.update(worst_call_s=worst["worst_call_s"], worst_call=worst["worst_call"])
        best["rounds_requests_per_s"] = [r["requests_per_s"] for r in done]
        best["max_store_seconds"] = max(r["store_seconds"] for r in done)
        out[label] = best
    out["ratio"] = round(out["slow"]["requests_per_s"] / out["normal"]["requests_per_s"], 3)
    return out


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    from twisted.internet import reactor

    from scrapy_domainstate.testing.delay_proxy import DelayProxy
    from scrapy_domainstate.testing.redis_server import RedisServer
    from scrapy_domainstate.testing.resolver import TableResolver
    from scrapy_domainstate.testing.sites import SiteServer

    tmp = Path(tempfile.mkdtemp(prefix="slow-redis-"))
    resolver = TableResolver(reactor)
    resolver.install_on_reactor()
    sites = SiteServer.start(tmp / "certs", reactor)
    server = RedisServer(tmp / "redis")
    server.start()
    proxy = DelayProxy(server.port).start()
    out: dict[str, Any] = {"delay_each_way_s": args.delay, "hosts": args.hosts, "per_host": args.per_host}
    try:
        settings = crawl_settings(tmp, proxy.url())
        out.update(await compare(sites, settings, proxy, args.delay, args.hosts, args.per_host, args.rounds))
    finally:
        proxy.close()
        server.close()
        sites.close()
        resolver.uninstall()
    return out


def report(out: dict[str, Any]) -> str:
    lines = [f"Redis store, a real crawl of {out['hosts']} hosts x {out['per_host']} pages on loopback"]
    for label in ("normal", "slow"):
        r = out[label]
        delay = "no delay" if label == "normal" else f"+{out['delay_each_way_s']:g} s each way"
        lines.append(
            f"  {label:6} ({delay}): {r['responses']}/{r['requests']} responses in {r['seconds']:.2f} s = "
            f"{r['requests_per_s']:.0f} requests/s (rounds: {r['rounds_requests_per_s']}); slowest store call {r['worst_call_s'] * 1000:.0f} ms "
            f"({r['worst_call']}, {r['store_calls']} calls, {r['max_store_seconds']:.2f} s in all at most); close {r['close_seconds']:.2f} s; {r['stats']}"
        )
    lines.append(f"  throughput with the delay: {out['ratio'] * 100:.0f} % of normal (target: at least 50 %)")
    lines.append("  target: no single store call over 1 s")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--delay", type=float, default=0.2, help="seconds added each way (default 0.2)")
    parser.add_argument("--hosts", type=int, default=50, help="sites crawled (default 50)")
    parser.add_argument("--per-host", type=int, default=40, help="pages per site (default 40)")
    parser.add_argument("--rounds", type=int, default=2, help="crawls of each kind, alternated (default 2)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    install_reactor(ASYNCIO_REACTOR)
    from twisted.internet import defer, task

    from scrapy_domainstate.testing.offline import loopback_only

    result: dict[str, Any] = {}

    async def run(_reactor: Any) -> None:
        result.update(await main_async(args))

    with loopback_only():
        try:
            task.react(lambda r: defer.ensureDeferred(run(r)))
        except SystemExit as exc:
            if exc.code:
                raise
    print(json.dumps(result, indent=2) if args.json else report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
