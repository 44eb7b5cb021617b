#!/usr/bin/env python
"""What the LMDB store costs per request, at 10,000 and at 1,000,000 domains.

For each size, a fresh LMDB environment in a temporary directory is filled with
full records (20 recent entries, built by the real policy; a mix of friendly,
flaky, anti-bot, cold and dead histories), written ``--batch`` records per
transaction. Then, one call at a time (``time.perf_counter_ns`` around each):

``decide``
    ``store.decide(domain, now)`` on random existing domains: a short read
    transaction, the header decode and the policy decision (``--decisions`` calls).
``record (amortised)``
    ``store.record(domain, entry)`` of random outcomes, flushed at the default
    flush size (500 outcomes per write transaction, one fsync each): total time /
    number of outcomes (``--records`` calls). Twice: on uniformly random existing
    domains (the worst case: every outcome reads and decodes a record no flush
    of this process touched recently), and crawl-like (outcomes fall on a sliding
    window of 1,000 active domains, as a crawl works through its sites).
``bytes``
    The encoded size of a full record of each kind, and the data file's size
    divided by the number of domains (records + LRU index + B-tree overhead).

``gc``
    Time spent in garbage collections during the record runs (``gc.callbacks``),
    per outcome. The plugin calls ``gc.freeze()`` once the crawl has started, so
    the objects of start-up are never traversed again; the benchmark does the
    same after building the store (``--no-freeze`` to see the difference).

``warm``
    Before timing, every page of the store is read once (a cursor walk), as in a
    crawl's steady state on a warm store; ``--cold`` skips it (then the first touch of
    each page is a page fault, at 1M domains often a read from the disk).

The garbage collector stays enabled throughout (as in a crawl). The last column
compares the 1,000,000-domain figures with the 10,000-domain ones. Targets:
decide p50 <= 5 us, p99 <= 25 us; record <= 10 us amortised; <= 300 bytes per
full record; 1M within 1.5x of 10k.

Usage: ``python benchmarks/store_bench.py [--sizes 10000 1000000] [--profile] [--no-freeze] [--cold]``.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import platform
import pstats
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.policy import Policy
from scrapy_domainstate.core.record import DomainStat, Method, Outcome, RecentEntry
from scrapy_domainstate.store.codec import encode
from scrapy_domainstate.store.lmdb import LmdbStore

T0 = 1_700_000_000.0
HOUR = 3600.0
DAY = 86400.0

F, H, TAB = Method.FETCH, Method.HEAD, Method.TAB
# Histories as the classifier writes them (error classes from classify.py).
KINDS: dict[str, list[tuple[Method, Outcome, int | None, str | None]]] = {
    "friendly": [(F, Outcome.OK_CONTACT, 200, None)] * 8 + [(F, Outcome.HTTP_ERROR, 503, "http:503")],
    "flaky": [
        (F, Outcome.OK_CONTACT, 200, None),
        (F, Outcome.NETWORK_ERROR, None, "timeout"),
        (F, Outcome.HTTP_ERROR, 503, "http:503"),
        (F, Outcome.OK_EMPTY, 200, None),
    ],
    "antibot": [
        (H, Outcome.ANTIBOT, 403, "challenge:cloudflare:header"),
        (F, Outcome.ANTIBOT, 403, "challenge:cloudflare:title"),
        (TAB, Outcome.OK_CONTACT, 200, None),
    ],
    "cold": [(F, Outcome.OK_EMPTY, 200, None)],
    "dead": [(H, Outcome.DEAD, None, "dns"), (F, Outcome.DEAD, None, "dns")],
}
OUTCOMES = [
    (F, Outcome.OK_CONTACT, 200, None),
    (F, Outcome.OK_EMPTY, 200, None),
    (F, Outcome.HTTP_ERROR, 404, "http:404"),
    (F, Outcome.NETWORK_ERROR, None, "timeout"),
    (F, Outcome.ANTIBOT, 403, "challenge:cloudflare:title"),
    (TAB, Outcome.OK_CONTACT, 200, None),
]


def template(policy: Policy, kind: str) -> DomainStat:
    """A full record of this kind, built by the real policy (the state it leads to)."""
    pattern = KINDS[kind]
    stat = None
    for i in range(20):
        method, outcome, status, err = pattern[i % len(pattern)]
        stat, _ = policy.observe(stat, "template.example", RecentEntry(T0 + i * HOUR, method, outcome, status, err))
    # 20 entries, except where the policy keeps fewer (a dead domain's history restarts with its
    # dead chain)
    assert stat is not None and stat.recent
    stat.fetch_total, stat.fetch_ok = stat.fetch_total + 400, stat.fetch_ok + 250
    return stat


def records(policy: Policy, domains: list[str], rng: random.Random) -> Iterator[DomainStat]:
    """A full record per domain, streamed (1M records at once would only load the GC)."""
    templates = [template(policy, kind) for kind in KINDS]
    for domain in domains:
        t = templates[rng.randrange(len(templates))]
        stat = t.copy()
        stat.domain = domain
        stat.last_seen = t.last_seen + rng.uniform(0, HOUR)
        yield stat


def btree_bytes(store: LmdbStore) -> int:
    """Bytes of the pages the records and the LRU index occupy (free pages excluded)."""
    shared = store._h()
    with shared.env.begin() as txn:
        total = 0
        for db in (shared.records, shared.lru):
            st = txn.stat(db)
            total += (st["branch_pages"] + st["leaf_pages"] + st["overflow_pages"]) * st["psize"]
    return total


def warm_up(store: LmdbStore) -> int:
    """Read every page of the records and the LRU index once (a cursor walk), as a crawl's
    steady state has them: in the page cache and mapped. Without it the first touch of each
    page is a page fault, and at 1M domains a read from the disk, timed as the store's."""
    shared = store._h()
    total = 0
    with shared.env.begin() as txn:
        for db in (shared.records, shared.lru):
            for key, value in txn.cursor(db=db).iternext():
                total += len(key) + len(value)
    return total


def percentile(sorted_values: list[int], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))] / 1000.0


class GcTimer:
    """CPU time spent in garbage collections (``gc.callbacks``, thread CPU time)."""

    def __init__(self) -> None:
        self.ns = 0
        self.collections = 0
        self._t0 = 0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t0 = time.thread_time_ns()
        else:
            self.ns += time.thread_time_ns() - self._t0
            self.collections += 1


def run(
    size: int,
    decisions: int,
    n_records: int,
    batch: int,
    seed: int,
    profile: bool,
    root: str | None,
    freeze: bool = True,
    warm: bool = True,
) -> dict:
    rng = random.Random(seed)
    tmp = tempfile.mkdtemp(prefix="domainstate-bench-", dir=root)
    config = Config(lmdb_path=os.path.join(tmp, "db"), max_domains=max(size * 2, 1_000_000))
    policy = Policy(config)
    result: dict[str, object] = {"domains": size}
    try:
        store = LmdbStore(config, policy)
        store.open()
        domains = [f"site-{i:07d}-{rng.randrange(10**6):06d}.example.com" for i in range(size)]
        rng.shuffle(domains)  # not in key order: a realistic B-tree fill
        t = time.perf_counter()
        store.put_many(records(policy, domains, rng), batch=batch)
        result["populate_s"] = time.perf_counter() - t
        gc.collect()
        if freeze:
            gc.freeze()  # what the plugin does once the crawl has started
        assert store.count() == size
        data = os.path.join(store.path or "", "data.mdb")
        result["file_bytes_per_domain"] = os.path.getsize(data) / size
        result["btree_bytes_per_domain"] = btree_bytes(store) / size
        if warm:
            t = time.perf_counter()
            warm_up(store)
            result["warm_s"] = time.perf_counter() - t

        now = T0 + 25 * HOUR  # nothing has expired yet: the decision path proper
        targets = [domains[rng.randrange(size)] for _ in range(decisions)]
        for domain in targets[:1000]:  # warm-up
            store.decide(domain, now)
        samples = []
        clock = time.perf_counter_ns
        decide = store.decide
        for domain in targets:
            t0 = clock()
            decide(domain, now)
            samples.append(clock() - t0)
        samples.sort()
        result["decide_p50_us"] = percentile(samples, 0.50)
        result["decide_p99_us"] = percentile(samples, 0.99)
        result["decide_mean_us"] = sum(samples) / len(samples) / 1000.0

        def outcome(i: int) -> RecentEntry:
            return RecentEntry(now + i * 0.01, *OUTCOMES[rng.randrange(len(OUTCOMES))])

        uniform = [(domains[rng.randrange(size)], outcome(i)) for i in range(n_records)]
        window = min(1000, size)
        crawl = [(domains[(i // 25 + rng.randrange(window)) % size], outcome(n_records + i)) for i in range(n_records)]
        in_batches = [0]
        write_batch = store._write_batch

        def timed_write_batch(batch: dict[str, list[RecentEntry]]) -> dict[str, DomainStat]:
            t0 = clock()
            try:
                return write_batch(batch)
            finally:
                in_batches[0] += clock() - t0

        store._write_batch = timed_write_batch  # type: ignore[method-assign]
        if freeze:
            gc.freeze()  # the plans: the benchmark's own long-lived objects
        gc_timer = GcTimer()
        gc.callbacks.append(gc_timer)
        for name, plan in (("record_us", uniform), ("record_crawl_us", crawl)):
            prof = cProfile.Profile() if profile else None
            record = store.record
            if prof:
                prof.enable()
            in_batches[0] = 0
            gc_timer.ns = gc_timer.collections = 0
            t0, c0 = clock(), time.process_time()
            for domain, entry in plan:
                record(domain, entry)
            store.flush()
            elapsed, cpu = clock() - t0, time.process_time() - c0
            if prof:
                prof.disable()
                print(f"\n--- cProfile of {name} ({size:,} domains) ---")
                pstats.Stats(prof).sort_stats("tottime").print_stats(15)
            result[name] = elapsed / n_records / 1000.0
            result[name.replace("_us", "_cpu_us")] = cpu / n_records * 1e6
            result[name.replace("_us", "_flush_us")] = in_batches[0] / n_records / 1000.0
            result[name.replace("_us", "_gc_us")] = gc_timer.ns / n_records / 1000.0
        gc.callbacks.remove(gc_timer)
        gc.unfreeze()

        result["file_bytes_per_domain_after"] = os.path.getsize(data) / size
        result["map_growths"] = store.map_growths
        store.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 1_000_000], help="domain counts")
    parser.add_argument("--decisions", type=int, default=100_000, help="decide() calls per size")
    parser.add_argument("--records", type=int, default=50_000, help="record() calls per size")
    parser.add_argument("--batch", type=int, default=10_000, help="records per transaction when populating")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dir", default=None, help="where to create the temporary environments")
    parser.add_argument("--profile", action="store_true", help="cProfile the record phase")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--no-freeze", dest="freeze", action="store_false", help="do not gc.freeze() after set-up")
    parser.add_argument(
        "--cold", dest="warm", action="store_false", help="do not read the store once before timing (a cold cache)"
    )
    args = parser.parse_args(argv)

    policy = Policy(Config())
    sizes = {kind: len(encode(template(policy, kind))) for kind in KINDS}
    results = [
        run(n, args.decisions, args.records, args.batch, args.seed, args.profile, args.dir, args.freeze, args.warm)
        for n in args.sizes
    ]
    env = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "lmdb": __import__("lmdb").__version__,
    }
    if args.json:
        print(json.dumps({"env": env, "record_bytes": sizes, "results": results}, indent=2))
        return 0

    print(f"LMDB store benchmark (Python {env['python']}, py-lmdb {env['lmdb']}, {env['cpus']} CPUs)")
    for r in results:
        warmed = f", read once in {r['warm_s']:.1f} s" if "warm_s" in r else " (cold: not read before timing)"
        print(f"  {r['domains']:>9,} domains: built and written in {r['populate_s']:.1f} s{warmed}")
    print()
    first, last = results[0], results[-1]
    ratio = len(results) > 1
    head = f"{'metric':<34}" + "".join(f"{format(r['domains'], ',') + ' domains':>18}" for r in results)
    head += f"{'ratio':>8}" if ratio else ""
    head += f"  {'target':<12}"
    print(head)
    print("-" * len(head))
    rows = [
        ("decide p50 (us)", "decide_p50_us", "<= 5"),
        ("decide p99 (us)", "decide_p99_us", "<= 25"),
        ("decide mean (us)", "decide_mean_us", ""),
        ("record, random domains (us)", "record_us", "<= 10"),
        ("  ... CPU time (us)", "record_cpu_us", ""),
        ("  ... in write batches (us)", "record_flush_us", ""),
        ("  ... in garbage collection (us)", "record_gc_us", ""),
        ("record, crawl-like (us)", "record_crawl_us", "<= 10"),
        ("  ... CPU time (us)", "record_crawl_cpu_us", ""),
        ("  ... in write batches (us)", "record_crawl_flush_us", ""),
        ("  ... in garbage collection (us)", "record_crawl_gc_us", ""),
        ("B-tree bytes / domain", "btree_bytes_per_domain", ""),
        ("data file bytes / domain", "file_bytes_per_domain", ""),
        ("  ... after the record runs", "file_bytes_per_domain_after", ""),
    ]
    for label, key, target in rows:
        line = f"{label:<34}" + "".join(f"{r[key]:>18.1f}" for r in results)
        if ratio:
            line += f"{last[key] / first[key]:>8.2f}"
        print(f"{line}  {target:<12}")
    print()
    print("full record (20 entries), encoded bytes (target <= 300):")
    for kind, n in sizes.items():
        print(f"  {kind:<10}{n:>6}{'' if n <= 300 else '   over budget'}")
    if ratio:
        print("\nratio: the largest size's figure / the smallest size's (target <= 1.5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
