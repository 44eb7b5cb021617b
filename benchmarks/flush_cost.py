#!/usr/bin/env python
"""What a shorter DOMAINSTATE_FLUSH_INTERVAL costs, at 1,000 outcomes a second.

A killed crawl loses the outcomes recorded since the last write (at most the flush
interval). Each write is one LMDB write transaction; its commit syncs the data to disk.
For each interval, a fresh LMDB store in a temporary directory records ``--rate``
outcomes a second (paced on the wall clock, over ``--domains`` domains, as a crawl
would) for ``--seconds`` seconds with the default ``DOMAINSTATE_FLUSH_SIZE`` (500), and
the benchmark prints:

``writes/s``       write transactions (flushes) a second;
``fsyncs/s``       ``fsync``/``fdatasync`` calls a second, counted by ``strace -f -c``
                   when strace is installed (``-`` otherwise);
``CPU %``          process CPU time / wall time (one core = 100 %), everything included;
``write ms``       mean wall time of one write transaction (commit and sync included);
``CPU us/outcome`` process CPU time per outcome.

Usage: ``python benchmarks/flush_cost.py [--intervals 5 1 0.5 0.25] [--seconds 5]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.record import Method, Outcome, RecentEntry
from scrapy_domainstate.store.lmdb import LmdbStore


class _TimedStore(LmdbStore):
    """Counts and times the write transactions of flushes."""

    writes = 0
    write_seconds = 0.0

    def _write_batch(self, batch):  # type: ignore[no-untyped-def]
        started = time.perf_counter()
        try:
            return super()._write_batch(batch)
        finally:
            self.writes += 1
            self.write_seconds += time.perf_counter() - started


def measure(interval: float, rate: int, seconds: float, domains: int) -> dict[str, float]:
    """One run in this process: the figures without fsyncs."""
    tmp = tempfile.mkdtemp(prefix="flush-cost-")
    try:
        store = _TimedStore(Config(lmdb_path=tmp, flush_interval=interval))
        store.open()
        rng = random.Random(1)
        names = [f"site{i}.example" for i in range(domains)]
        outcomes = [Outcome.OK_CONTACT, Outcome.OK_EMPTY, Outcome.HTTP_ERROR, Outcome.NETWORK_ERROR]
        n = int(rate * seconds)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        for i in range(n):
            due = wall0 + i / rate
            wait = due - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            outcome = rng.choice(outcomes)
            store.record(rng.choice(names), RecentEntry(time.time(), Method.FETCH, outcome, 200))
        store.close()
        wall = time.perf_counter() - wall0
        cpu = time.process_time() - cpu0
        return {
            "interval": interval,
            "outcomes": n,
            "wall_s": wall,
            "writes_per_s": store.writes / wall,
            "cpu_percent": 100.0 * cpu / wall,
            "write_ms": 1000.0 * store.write_seconds / max(store.writes, 1),
            "cpu_us_per_outcome": 1e6 * cpu / n,
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _syncs(strace_output: str) -> int:
    total = 0
    for line in strace_output.splitlines():
        parts = line.split()
        if parts and parts[-1] in ("fsync", "fdatasync", "msync") and len(parts) >= 4:
            total += int(parts[3] if parts[3].isdigit() else parts[2])
    return total


def run(interval: float, args: argparse.Namespace) -> dict[str, float]:
    """One run in a child process (under strace when there is one)."""
    child = [sys.executable, __file__, "--child", str(interval), "--rate", str(args.rate)]
    child += ["--seconds", str(args.seconds), "--domains", str(args.domains)]
    strace = shutil.which("strace")
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as trace:
        cmd = [strace, "-f", "-c", "-e", "trace=fsync,fdatasync,msync", "-o", trace.name, *child] if strace else child
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        figures = json.loads(out.strip().splitlines()[-1])
        figures["fsyncs_per_s"] = _syncs(trace.read()) / figures["wall_s"] if strace else float("nan")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--intervals", type=float, nargs="+", default=[5.0, 1.0, 0.5, 0.25])
    parser.add_argument("--rate", type=int, default=1000, help="outcomes a second (default 1000)")
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds per interval (default 5)")
    parser.add_argument("--domains", type=int, default=2000, help="domains the outcomes fall on (default 2000)")
    parser.add_argument("--child", type=float, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(measure(args.child, args.rate, args.seconds, args.domains)))
        return
    print(f"{args.rate} outcomes/s over {args.domains} domains, {args.seconds:g} s per interval, flush size 500")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    header = f"{'interval s':>10} {'writes/s':>9} {'fsyncs/s':>9} {'CPU %':>6} {'write ms':>9} {'CPU us/outcome':>15}"
    print(header)
    rows = []
    for interval in args.intervals:
        r = run(interval, args)
        rows.append(r)
        print(
            f"{r['interval']:>10g} {r['writes_per_s']:>9.2f} {r['fsyncs_per_s']:>9.2f} {r['cpu_percent']:>6.1f} "
            f"{r['write_ms']:>9.2f} {r['cpu_us_per_outcome']:>15.1f}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
