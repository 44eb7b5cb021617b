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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--domains", type=int, default=10_000, help="records stored before measuring")
    parser.add_argument("--requests", type=int, default=20_000, help="decisions and outcomes measured")
    parser.add_argument("--url", help="use this Redis instead of starting redis-server (keys under a temporary prefix)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)

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
