#!/usr/bin/env python
"""What the Redis store costs per request: the decision before it, the record after it.

Starts its own ``redis-server`` on a loopback port (or uses ``--url``, under a
throw-away key prefix that it deletes at the end), stores ``--domains`` records
(default 10,000) built by the real policy, then measures, one request at a time:

``baseline``
    A bare redis-py ``GET`` of the same keys: the round trip every lookup pays.
``decide``
    ``store.decide(domain, now)``: one ``GET`` and a header-only decode (10 % of the
    requests go to domains never seen).
``decide + URL check``
    The same plus ``store.url_dead_until(fingerprint)``: the whole per-request lookup.
``record (amortised)``
    ``store.record(domain, entry)`` for ``--requests`` outcomes with the default flush
    size (500): the in-process update plus each flush's optimistic transaction, divided
    by the number of outcomes.

Numbers are wall-clock microseconds on loopback, so they are a floor: add the network
round trip to a remote Redis (about 0.2-1 ms in one data centre) to each ``GET``.

``--fleet`` measures what a crawl sees instead (issue 24), in a running reactor, on
loopback and behind :class:`~scrapy_domainstate.testing.delay_proxy.DelayProxy` adding a
1 ms and a 10 ms round trip:

``decide (warm cache)``
    ``store.decide()`` once the read cache holds the domain (the crawl's case after a
    domain's first request).
``miss wait``
    From ``store.prefetch()`` of a domain not cached to its Deferred firing: what a
    domain's first request waits (its own batch), while the reactor runs on.
``crawl throughput``
    A real crawl (Scrapy's engine, the loopback test sites, ``--hosts`` x ``--per-host``
    pages) with the plugin on the LMDB store, on the Redis store at each round trip, and
    off; ``--rounds`` crawls of each, alternated, each kind's best.
``cross-crawler verdict``
    One store records outcomes that make a domain dead and flushes them every
    ``DOMAINSTATE_FLUSH_INTERVAL`` (1 s, as a crawl's timer does); the time until another
    store's decisions (another crawler, its cache refreshed every 0.5 s) skip the domain.

Run ``python benchmarks/redis_bench.py --help``.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from typing import Any

import redis

from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.policy import Policy
from scrapy_domainstate.core.record import DomainStat, Method, Outcome, RecentEntry
from scrapy_domainstate.store.redis import RedisStore, mask_url
from scrapy_domainstate.testing.redis_server import RedisServer, redis_binary

OUTCOMES = [
    (Method.FETCH, Outcome.OK_CONTACT, 200),
    (Method.FETCH, Outcome.OK_EMPTY, 200),
    (Method.FETCH, Outcome.HTTP_ERROR, 500),
    (Method.FETCH, Outcome.NETWORK_ERROR, None),
    (Method.FETCH, Outcome.ANTIBOT, 403),
    (Method.TAB, Outcome.OK_CONTACT, 200),
    (Method.HEAD, Outcome.DEAD, 404),
]


def build_record(policy: Policy, domain: str, rng: random.Random, now: float) -> DomainStat:
    stat = None
    at = now - 30 * 86400
    for _ in range(rng.randint(3, 20)):
        at += rng.uniform(60, 86400)
        method, outcome, status = rng.choice(OUTCOMES)
        stat, _ = policy.observe(stat, domain, RecentEntry(at, method, outcome, status))
    assert stat is not None
    return stat


def percentile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def summarise(samples_ns: list[int]) -> dict[str, float]:
    us = sorted(s / 1000 for s in samples_ns)
    return {"p50": percentile(us, 0.50), "p99": percentile(us, 0.99), "mean": statistics.fmean(us)}


def run(url: str, domains: int, requests: int, seed: int) -> dict[str, object]:
    rng = random.Random(seed)
    now = time.time()
    prefix = f"bench:{uuid.uuid4().hex[:8]}:"
    config = replace(Config(), redis_url=url, redis_prefix=prefix, flush_interval=1e9)
    names = [f"site{i}.example" for i in range(domains)]
    results: dict[str, object] = {}
    with RedisStore(config) as store:
        try:
            started = time.perf_counter()
            for name in names:
                store.put(build_record(store.policy, name, rng, now))
            results["populate_s"] = time.perf_counter() - started
            targets = [rng.choice(names) if rng.random() < 0.9 else f"new{i}.example" for i in range(requests)]
            fingerprints = [uuid.uuid4().hex for _ in range(requests)]
            for fp in fingerprints[: requests // 100]:
                store.mark_url_dead(fp, now + 86400)
            results.update(_measure_decide(store, targets, fingerprints, now))
            results.update(_measure_record(store, targets, rng, now))
            results["flush_size"] = config.flush_size
            results["conflicts"] = store.conflicts
            results["stored"] = store.count()
        finally:
            store.clear()
    return results


def _measure_decide(store: RedisStore, targets: list[str], fingerprints: list[str], now: float) -> dict[str, object]:
    for name in targets[:500]:  # warm the connection and the code paths
        store.decide(name, now)
    clock = time.perf_counter_ns
    client = store._client  # the floor: redis-py's own GET round trip
    # Interleaved, so that drift (CPU frequency, a busy neighbour) hits every row alike.
    baseline, decide, lookup = [], [], []
    for name, fp in zip(targets, fingerprints, strict=True):
        key = store._rkey(name)
        t0 = clock()
        client.get(key)
        t1 = clock()
        store.decide(name, now)
        t2 = clock()
        store.decide(name, now)
        store.url_dead_until(fp)
        t3 = clock()
        baseline.append(t1 - t0)
        decide.append(t2 - t1)
        lookup.append(t3 - t2)
    return {"raw_get": summarise(baseline), "decide": summarise(decide), "decide_url": summarise(lookup)}


def _measure_record(store: RedisStore, targets: list[str], rng: random.Random, now: float) -> dict[str, object]:
    clock = time.perf_counter_ns
    entries = []
    for i, name in enumerate(targets):
        method, outcome, status = rng.choice(OUTCOMES[:6])
        entries.append((name, RecentEntry(now + i * 0.01, method, outcome, status)))
    flush_ns = []
    started_ns = clock()
    for name, entry in entries:
        before = store.pending
        t0 = clock()
        store.record(name, entry)
        if store.pending < before:  # this call flushed
            flush_ns.append(clock() - t0)
    t0 = clock()
    store.flush()
    flush_ns.append(clock() - t0)
    total_ns = clock() - started_ns
    return {
        "record_amortised_us": total_ns / 1000 / len(entries),
        "flush_ms": {k: v / 1000 for k, v in summarise(flush_ns).items()},
        "flushes": len(flush_ns),
    }


# ----------------------------------------------------------------- --fleet


def _load_slow_redis() -> Any:
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("slow_redis", Path(__file__).with_name("slow_redis.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sleep(seconds: float) -> Any:
    from twisted.internet import reactor, task

    return task.deferLater(reactor, seconds, lambda: None)


async def _fleet_decide(url: str, proxy_url: str, domains: int, requests: int, seed: int) -> dict[str, Any]:
    """Warm-cache decide latency and the wait of a miss, through ``proxy_url``."""
    from twisted.internet import defer

    rng = random.Random(seed)
    now = time.time()
    prefix = f"fleet:{uuid.uuid4().hex[:8]}:"
    names = [f"site{i}.example" for i in range(domains)]
    with RedisStore(replace(Config(), redis_url=url, redis_prefix=prefix)) as writer:
        for name in names:
            writer.put(build_record(writer.policy, name, rng, now))
    store = RedisStore(replace(Config(), redis_url=proxy_url, redis_prefix=prefix, flush_interval=1e9))
    store.open()
    try:
        await defer.gatherResults([d for d in (store.prefetch((n,)) for n in names) if d is not None])
        targets = [rng.choice(names) for _ in range(requests)]
        clock = time.perf_counter_ns
        samples, both = [], []
        misses = 0
        for i, name in enumerate(targets):
            if not i % 20:
                await _sleep(0)  # a crawl's reactor does its I/O between requests
            t0 = clock()
            pending = store.prefetch((name,))  # what the middleware asks first
            if pending is not None:  # not cached (or older than 1.5 x refresh): its own batch
                misses += 1
                await pending
                continue
            t1 = clock()
            store.decide(name, now)
            t2 = clock()
            samples.append(t2 - t1)
            both.append(t2 - t0)
        waits = []
        for i in range(50):
            t0 = clock()
            pending = store.prefetch((f"new{i}.example",))
            if pending is not None:
                await pending
            waits.append(clock() - t0)
        cache = store.cache
        assert cache is not None
        return {
            "decide_warm": summarise(samples),
            "prefetch_and_decide": summarise(both),
            "misses": misses,
            "miss_wait_ms": {k: v / 1000 for k, v in summarise(waits).items()},
            "reader_batches": cache.batches,
            "errors": store.errors,
        }
    finally:
        store.clear()
        store.close()


async def _fleet_crawl(sites: Any, settings: dict[str, Any], hosts: int, per_host: int, tag: str) -> float:
    """One crawl; requests/s from its first request to its last response."""
    from scrapy_domainstate.testing.crawl import run_crawl

    pages = ("/", "/page1", "/page2", "/contact")
    urls = [sites.url(f"friendly-{tag}{h}.test", pages[i % len(pages)]) for h in range(hosts) for i in range(per_host)]
    result = await run_crawl(settings, urls, spider_cls=_load_slow_redis().timed_spider())
    spider = result.crawler.spider
    if len(result.responses) != len(urls):
        raise RuntimeError(f"crawl {tag}: {len(result.responses)}/{len(urls)} responses")
    return len(result.responses) / max(spider.last - spider.started, 1e-9)


async def _fleet_verdict(url: str, proxy_url: str, trials: int) -> list[float]:
    """Seconds from a verdict learned by one store (its outcome recorded) to another's decision."""
    from twisted.internet import task

    from scrapy_domainstate.core.policy import Decision

    prefix = f"fleet:{uuid.uuid4().hex[:8]}:"
    writer = RedisStore(replace(Config(), redis_url=proxy_url, redis_prefix=prefix, flush_interval=1e9))
    reader = RedisStore(replace(Config(), redis_url=proxy_url, redis_prefix=prefix, flush_interval=1e9))
    writer.open()
    reader.open()
    timer = task.LoopingCall(writer.flush)  # a crawl's flush timer (DOMAINSTATE_FLUSH_INTERVAL)
    timer.start(Config().flush_interval, now=False)
    delays = []
    try:
        for i in range(trials):
            domain = f"verdict{i}.example"
            pending = reader.prefetch((domain,))
            if pending is not None:
                await pending
            await _sleep(random.uniform(0, 1.0))  # any phase of the writer's flush timer
            learned = time.time()
            for k in range(2):
                writer.record(domain, RecentEntry(learned + k * 1e-3, Method.FETCH, Outcome.DEAD, None))
            while True:  # a request every 5 ms, asking as the downloader middleware does
                pending = reader.prefetch((domain,))
                if pending is not None:
                    await pending
                if reader.decide(domain, time.time())[0] is Decision.SKIP:
                    break
                if time.time() - learned > 10:
                    raise RuntimeError("the verdict never arrived")
                await _sleep(0.005)
            delays.append(time.time() - learned)
    finally:
        timer.stop()
        writer.clear()
        writer.close()
        reader.close()
    return delays


def _lru_slot_cost(url: str, members: int = 100_000, writes: int = 10_000) -> dict[str, float]:
    """The LRU index is one sorted set (one slot, one node of a cluster): what 1,000 writes a
    second cost the node holding it, each write its own ``ZADD ... GT`` (the worst case: a
    flush sends one ``ZADD`` for all its domains)."""
    client = redis.Redis.from_url(url)
    key = f"lru-bench:{uuid.uuid4().hex[:8]}"
    try:
        with client.pipeline(transaction=False) as pipe:
            for i in range(0, members, 10_000):
                pipe.zadd(key, {f"site{j}.example": float(j) for j in range(i, i + 10_000)})
            pipe.execute()
        client.config_resetstat()
        rng = random.Random(1)
        with client.pipeline(transaction=False) as pipe:
            for i in range(writes):
                pipe.zadd(key, {f"site{rng.randrange(members)}.example": 1e9 + i}, gt=True)
            pipe.execute()
        stats = client.info("commandstats").get("cmdstat_zadd", {})
        per_call = float(stats.get("usec_per_call", 0.0))
        return {
            "members": members,
            "usec_per_zadd": per_call,
            "cpu_share_at_1000_per_s": per_call * 1000 / 1e6,
        }
    finally:
        client.delete(key)
        client.close()


class _ProxyProcess:
    """A :class:`DelayProxy` in its own process: its threads take no CPU time (nor the GIL)
    from the crawl measured, as a real network would not."""

    def __init__(self, target_port: int, rtt: float) -> None:
        import subprocess

        code = (
            "import sys; from scrapy_domainstate.testing.delay_proxy import DelayProxy; "
            f"p = DelayProxy({target_port}, {rtt / 2!r}).start(); print(p.port, flush=True); sys.stdin.read()"
        )
        self.process = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        self.port = int(self.process.stdout.readline())

    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def close(self) -> None:
        self.process.kill()
        self.process.wait(10)


async def fleet(args: argparse.Namespace) -> dict[str, Any]:
    from pathlib import Path

    from twisted.internet import reactor

    from scrapy_domainstate.testing.resolver import TableResolver
    from scrapy_domainstate.testing.sites import SiteServer

    await _sleep(0)  # (reactor.running: the read cache starts in a running reactor)
    t_start = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="redis-fleet-"))
    resolver = TableResolver(reactor)
    resolver.install_on_reactor()
    sites = SiteServer.start(tmp / "certs", reactor)
    server = RedisServer(tmp / "redis")
    server.start()
    rtts = {"loopback": 0.0, "1 ms": 0.001, "10 ms": 0.010}
    proxies = {label: _ProxyProcess(server.port, rtt) for label, rtt in rtts.items() if rtt}
    urls = {label: proxies[label].url() if label in proxies else server.url for label in rtts}
    out: dict[str, Any] = {"hosts": args.hosts, "per_host": args.per_host, "rounds": args.rounds}
    try:
        decide = {}
        for label in rtts:
            decide[label] = await _fleet_decide(server.url, urls[label], 2000, args.requests, args.seed)
        out["decide"] = decide
        print(f"decide done {time.monotonic() - t_start:.0f} s", file=sys.stderr)
        base = _load_slow_redis().crawl_settings(tmp, server.url)
        base.update({"LOG_LEVEL": "ERROR", "DOMAINSTATE_HEAD_PROBE": False})
        kinds: dict[str, dict[str, Any]] = {
            "off": {"DOMAINSTATE_ENABLED": False},
            "lmdb": {"DOMAINSTATE_STORE": "scrapy_domainstate.store.lmdb.LmdbStore"},
        }
        for label in rtts:
            kinds[f"redis {label}"] = {"DOMAINSTATE_REDIS_URL": urls[label]}
        runs: dict[str, list[float]] = {kind: [] for kind in kinds}
        for r in range(args.rounds):
            for kind, extra in kinds.items():
                tag = f"{kind.replace(' ', '')}{r}x"
                settings = {
                    **base,
                    **extra,
                    "DOMAINSTATE_LMDB_PATH": str(tmp / f"lmdb-{tag}"),
                    "DOMAINSTATE_REDIS_PREFIX": f"fleet:{tag}:",
                }
                runs[kind].append(round(await _fleet_crawl(sites, settings, args.hosts, args.per_host, tag), 1))
        print(f"crawls done {time.monotonic() - t_start:.0f} s", file=sys.stderr)
        out["crawl_requests_per_s"] = {kind: max(done) for kind, done in runs.items()}
        out["crawl_rounds"] = runs
        verdicts = {}
        for label in ("loopback", "10 ms"):
            delays = sorted(await _fleet_verdict(server.url, urls[label], args.trials))
            verdicts[label] = {"max_s": round(delays[-1], 3), "p50_s": round(delays[len(delays) // 2], 3)}
        out["verdict"] = verdicts
        out["lru_slot"] = _lru_slot_cost(server.url)
    finally:
        for proxy in proxies.values():
            proxy.close()
        server.close()
        sites.close()
        resolver.uninstall()
    return out


def fleet_report(out: dict[str, Any]) -> str:
    lines = [f"Redis store in a crawl (read cache), redis-py {redis.__version__}, Python {platform.python_version()}"]
    lines.append(
        f"{'round trip':<12}{'decide warm p50 us':>20}{'p99 us':>8}{'+prefetch p50':>15}{'p99':>7}"
        f"{'misses':>8}{'miss wait p50 ms':>18}{'p99 ms':>8}"
    )
    for label, r in out["decide"].items():
        d, b, w = r["decide_warm"], r["prefetch_and_decide"], r["miss_wait_ms"]
        lines.append(
            f"{label:<12}{d['p50']:>20.2f}{d['p99']:>8.2f}{b['p50']:>15.2f}{b['p99']:>7.2f}"
            f"{r['misses']:>8}{w['p50']:>18.2f}{w['p99']:>8.2f}"
        )
    tput = out["crawl_requests_per_s"]
    lines.append(
        f"crawl, {out['hosts']} hosts x {out['per_host']} pages, best of {out['rounds']} (requests/s): "
        + ", ".join(f"{kind} {v:.0f}" for kind, v in tput.items())
    )
    lmdb = tput["lmdb"]
    for label, target in (("1 ms", 95), ("10 ms", 80)):
        lines.append(
            f"  Redis behind {label}: {tput['redis ' + label] / lmdb * 100:.0f} % of LMDB (target >= {target} %)"
        )
    for label, v in out["verdict"].items():
        lines.append(f"cross-crawler verdict ({label}): p50 {v['p50_s']:.2f} s, max {v['max_s']:.2f} s (target <= 2 s)")
    lru = out["lru_slot"]
    lines.append(
        f"LRU index (one sorted set of {lru['members']:,}): {lru['usec_per_zadd']:.2f} us of Redis per ZADD GT; "
        f"1,000 writes/s take {lru['cpu_share_at_1000_per_s'] * 100:.2f} % of the node's one core"
    )
    return "\n".join(lines)


def main_fleet(args: argparse.Namespace) -> int:
    from scrapy.utils.reactor import install_reactor

    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    from twisted.internet import defer, task

    from scrapy_domainstate.testing.offline import loopback_only

    result: dict[str, Any] = {}

    async def go(_reactor: Any) -> None:
        result.update(await fleet(args))

    with loopback_only():
        try:
            task.react(lambda r: defer.ensureDeferred(go(r)))
        except SystemExit as exc:
            if exc.code:
                raise
    print(json.dumps(result, indent=2) if args.json else fleet_report(result))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--domains", type=int, default=10_000, help="records stored before measuring")
    parser.add_argument("--requests", type=int, default=20_000, help="decisions and outcomes measured")
    parser.add_argument("--url", help="use this Redis instead of starting redis-server (keys under a temporary prefix)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--fleet", action="store_true", help="the crawl's figures (see above) instead")
    parser.add_argument("--hosts", type=int, default=20, help="--fleet: sites crawled (default 20)")
    parser.add_argument("--per-host", type=int, default=20, help="--fleet: pages per site (default 20)")
    parser.add_argument("--rounds", type=int, default=2, help="--fleet: crawls of each kind (default 2)")
    parser.add_argument("--trials", type=int, default=10, help="--fleet: cross-crawler verdicts timed (default 10)")
    args = parser.parse_args(argv)
    if args.fleet:
        if redis_binary() is None:
            parser.error("redis-server not found: install it (apt-get install redis-server)")
        return main_fleet(args)

    server = None
    url = args.url
    if url is None:
        if redis_binary() is None:
            parser.error("redis-server not found: install it (apt-get install redis-server) or pass --url")
        server = RedisServer(tempfile.mkdtemp(prefix="redis-bench-"))
        server.start()
        url = server.url
    try:
        client = redis.Redis.from_url(url)
        server_version = client.info("server").get("redis_version", "?")
        client.close()
        results = run(url, args.domains, args.requests, args.seed)
    finally:
        if server is not None:
            server.close()

    env = {
        "redis_server": server_version,
        "url": mask_url(url) if server is None else "local redis-server on 127.0.0.1",
        "redis_py": redis.__version__,
        "python": platform.python_version(),
        "machine": f"{platform.machine()} {platform.system()}",
        "domains": args.domains,
        "requests": args.requests,
    }
    if args.json:
        print(json.dumps({"env": env, "results": results}, indent=2))
        return 0

    decide, lookup, flush = results["decide"], results["decide_url"], results["flush_ms"]
    print(
        f"Redis store: {args.domains:,} domains stored, {args.requests:,} requests, "
        f"redis-server {server_version} ({env['url']}), redis-py {env['redis_py']}, Python {env['python']}"
    )
    print()
    print(f"{'operation':<42}{'p50 us':>10}{'p99 us':>10}{'mean us':>10}")
    print("-" * 72)
    raw = results["raw_get"]
    print(f"{'baseline: bare redis-py GET':<42}{raw['p50']:>10.1f}{raw['p99']:>10.1f}{raw['mean']:>10.1f}")
    print(f"{'decide (1 GET, header decode)':<42}{decide['p50']:>10.1f}{decide['p99']:>10.1f}{decide['mean']:>10.1f}")
    print(
        f"{'decide + URL dead check (2 GETs)':<42}{lookup['p50']:>10.1f}{lookup['p99']:>10.1f}{lookup['mean']:>10.1f}"
    )
    label = f"record, amortised (flush every {results['flush_size']})"
    print(f"{label:<42}{'-':>10}{'-':>10}{results['record_amortised_us']:>10.1f}")
    print()
    print(
        f"flush of {results['flush_size']} outcomes: p50 {flush['p50']:.1f} ms, p99 {flush['p99']:.1f} ms "
        f"({results['flushes']} flushes, {results['conflicts']} WATCH conflicts); "
        f"populating {args.domains:,} records took {results['populate_s']:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
