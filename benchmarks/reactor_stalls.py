#!/usr/bin/env python
"""How long the plugin holds the reactor: the longest call of each of its hooks in a crawl.

Usage::

    python benchmarks/reactor_stalls.py [--scenarios tiny real] [--urls 3000] [--hosts 300]
                                        [--flush-interval 1.0] [--sync]

The crawls are ``benchmarks/overhead.py``'s (same loopback server, pages, URL plan and
settings), on a warm store (one crawl warms it), with ``DOMAINSTATE_FLUSH_INTERVAL`` at
``--flush-interval`` (1 s: the default crash-loss bound). Every hook the plugin runs on the
reactor thread is wrapped with a wall-clock timer (``time.perf_counter_ns``, outermost call
only): its longest call, its 99.9th percentile and how many calls took over 1 ms are printed
next to the target (no stall over 1 ms from the plugin). The store's flush is among them:
with the LMDB store's write-behind (the default in a crawl) a flush hands the batch to the
store's writer thread and the commit and fsync run there; the writer's call back onto the
reactor (``LmdbStore._finish``: what the process now knows is stored) is timed too.
``--sync`` turns the write-behind off (the flush commits and fsyncs on the reactor, as
before issue 23) for comparison.

Two clocks per call: the thread's CPU time (``time.thread_time_ns``: the plugin's own work,
what it holds the reactor for on a quiet machine; the target is checked on it) and the wall
clock (``time.perf_counter_ns``: what the reactor saw, including the scheduler's pauses when
other processes share the cores, and waits for the GIL while the writer thread runs Python).
On a shared machine read the wall figures as an upper bound.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))  # the package of this tree, not an installed one

import overhead  # noqa: E402 - the crawls, pages and server are overhead.py's

#: The issue's target: no call of the plugin holds the reactor for more than this.
TARGET_NS = 1_000_000
LABELS = {"tiny": "0.7 KB pages", "real": "50 KB pages"}

#: What runs on the reactor thread besides the plugin's entry points (overhead.py derives
#: those: the request path, the signal receivers, the generator hooks' calls): the timer
#: flush, the store's flush and the writer's callback.
EXTRA_HOOKS = (
    "scrapy_domainstate.runtime.lifecycle:DomainStateManager.flush",
    "scrapy_domainstate.store.lmdb:LmdbStore.flush",
    "scrapy_domainstate.store.lmdb:LmdbStore._finish",
)


def hooks() -> list[str]:
    """Every hook timed (each resolved: a missing one stops the benchmark)."""
    entry = [t for t in overhead.plugin_targets()["request"] if t not in overhead.REACTOR_CALLBACKS]
    found = [*entry, *(t for t in EXTRA_HOOKS if t not in entry)]
    for target in found:
        overhead.resolve(target)
    return found


class Longest:
    """Every outermost call's wall time of one hook (a flush inside a request is the request's)."""

    def __init__(self, active: list[int], collections: list[int]) -> None:
        self.times: list[int] = []
        self.cpu: list[int] = []
        #: Whether a garbage collection ran inside the call (Python's pause, whoever made the garbage).
        self.gc: list[bool] = []
        self.active = active
        self.collections = collections

    def wrap(self, fn: Callable[..., Any], receiver: bool = False) -> Callable[..., Any]:
        active, times, cpu, gcs, collections = self.active, self.times, self.cpu, self.gc, self.collections
        clock, thread_clock = time.perf_counter_ns, time.thread_time_ns
        accepts = overhead.receiver_keywords(fn) if receiver else None  # (see overhead.Meter.wrap)

        def wrapper(*a: Any, **kw: Any) -> Any:
            if accepts is not None and kw:
                kw = {k: v for k, v in kw.items() if k in accepts}
            if active[0]:
                return fn(*a, **kw)
            active[0] = 1
            n0 = collections[0]
            c0 = thread_clock()
            t0 = clock()
            try:
                return fn(*a, **kw)
            finally:
                times.append(clock() - t0)
                cpu.append(thread_clock() - c0)
                gcs.append(collections[0] != n0)
                active[0] = 0

        return wrapper


def child(args: argparse.Namespace) -> None:
    import gc

    from scrapy import Request, Spider
    from scrapy.crawler import CrawlerProcess

    active, collections = [0], [0]

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            collections[0] += 1

    gc.callbacks.append(on_gc)
    meters: dict[str, Longest] = {}
    receivers = set(overhead.plugin_targets()["receivers"])
    for target in hooks():
        owner, attr = overhead.resolve(target)
        meter = meters[target.rpartition(":")[2]] = Longest(active, collections)
        setattr(owner, attr, meter.wrap(getattr(owner, attr), target in receivers))
    if args.sync:
        from scrapy_domainstate.store.lmdb import LmdbStore

        LmdbStore.write_behind = lambda self, schedule: False  # type: ignore[method-assign]
    urls = overhead.url_plan(args.scenario, args.port, args.urls, args.hosts)

    class Bench(Spider):
        name = "bench"

        async def start(self):  # type: ignore[no-untyped-def]
            for url in urls:
                yield Request(url, dont_filter=True)

        def parse(self, response):  # type: ignore[no-untyped-def]
            return None

    settings = overhead.crawl_settings(args, "on")
    settings["DOMAINSTATE_FLUSH_INTERVAL"] = args.flush_interval
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(Bench)
    process.crawl(crawler)
    process.start()
    stats = crawler.stats.get_stats()
    out: dict[str, Any] = {"requests": stats.get("downloader/request_count", 0), "hooks": {}}
    for name, meter in meters.items():
        times, cpu = sorted(meter.times), sorted(meter.cpu)
        if not times:
            continue
        p999 = min(len(times) - 1, int(len(times) * 0.999))
        slowest = max(range(len(meter.cpu)), key=meter.cpu.__getitem__)
        no_gc = [c for c, g in zip(meter.cpu, meter.gc, strict=True) if not g] or [0]
        out["hooks"][name] = {
            "calls": len(times),
            "max_ns": times[-1],
            "p999_ns": times[p999],
            "over_target": sum(t > TARGET_NS for t in times),
            "cpu_max_ns": cpu[-1],
            "cpu_p999_ns": cpu[p999],
            "cpu_over_target": sum(t > TARGET_NS for t in cpu),
            # which call was the longest (1: the first), whether a collection ran in it, and the
            # longest call without one
            "cpu_max_call": slowest + 1,
            "cpu_max_gc": meter.gc[slowest],
            "cpu_max_no_gc_ns": max(no_gc),
        }
    print(json.dumps(out))


def run_child(scenario: str, args: argparse.Namespace, port: int, store: str) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", "--scenario", scenario, "--port", str(port), "--store", store]
    cmd += ["--urls", str(args.urls), "--hosts", str(args.hosts), "--flush-interval", str(args.flush_interval)]
    if args.sync:
        cmd.append("--sync")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, cwd=ROOT, env=env)
    if proc.returncode:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"benchmark child {scenario} failed")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenarios", nargs="+", choices=("tiny", "real"), default=["tiny", "real"])
    parser.add_argument("--urls", type=int, default=3000)
    parser.add_argument("--hosts", type=int, default=300)
    parser.add_argument("--flush-interval", type=float, default=1.0)
    parser.add_argument("--sync", action="store_true", help="flush on the reactor thread (no write-behind)")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--scenario", choices=("tiny", "real"), default="tiny", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return 0
    server = subprocess.Popen(
        [sys.executable, "-c", overhead.SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    results: dict[str, Any] = {}
    try:
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(json.dumps({k: v.decode("latin-1") for k, v in overhead.pages().items()}))
        server.stdin.close()
        port = int(server.stdout.readline())
        with tempfile.TemporaryDirectory() as tmp:
            for scenario in args.scenarios:
                store = str(Path(tmp) / scenario)
                run_child(scenario, args, port, store)  # warms the store
                results[scenario] = run_child(scenario, args, port, store)
    finally:
        server.terminate()
        server.wait()
    mode = "synchronous flush (--sync)" if args.sync else "write-behind"
    print(f"longest call on the reactor thread per hook, {mode}, flush interval {args.flush_interval:g} s")
    print(f"(target: none over {TARGET_NS / 1e6:g} ms)")
    worst_cpu = worst_wall = 0
    for scenario, data in results.items():
        print(f"\n{LABELS.get(scenario, scenario)}: {data['requests']} requests")
        print(f"  {'':<44} {'------ CPU (thread) -----':>26}   {'---------- wall ---------':>26}")
        head = f"{'max ms':>8} {'p99.9 ms':>9} {'> 1 ms':>7}"
        print(f"  {'hook':<36} {'calls':>7} {head}   {head}   longest CPU call")
        for name, h in sorted(data["hooks"].items(), key=lambda kv: -kv[1]["cpu_max_ns"]):
            worst_cpu = max(worst_cpu, h["cpu_max_ns"])
            worst_wall = max(worst_wall, h["max_ns"])
            print(
                f"  {name:<36} {h['calls']:>7} {h['cpu_max_ns'] / 1e6:>8.3f} {h['cpu_p999_ns'] / 1e6:>9.3f} "
                f"{h['cpu_over_target']:>7}   {h['max_ns'] / 1e6:>8.3f} {h['p999_ns'] / 1e6:>9.3f} {h['over_target']:>7}"
                f"   #{h['cpu_max_call']}{' (a gc ran in it)' if h['cpu_max_gc'] else ''};"
                f" without gc {h['cpu_max_no_gc_ns'] / 1e6:.3f} ms"
            )
    verdict = "met" if worst_cpu <= TARGET_NS else "MISSED"
    print(
        f"\nlongest plugin call: {worst_cpu / 1e6:.3f} ms of CPU (target <= {TARGET_NS / 1e6:g} ms: {verdict}); "
        f"{worst_wall / 1e6:.3f} ms of wall (includes the machine's other processes)"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
