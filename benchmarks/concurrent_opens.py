#!/usr/bin/env python
"""Opens of one LMDB store while other processes grow its map and get killed.

``--workers`` processes share one store created with a tiny map (``--map-size``, 64 KiB):
each opens it (read-write, or read-only one time in three once it wrote to it, as
``scrapy domainstate stats`` does on a live store), records ``--outcomes`` outcomes over new domains (which keeps the map growing) or
walks the records, closes it, and starts again. Every ``--kill-every`` seconds one random
worker is killed with SIGKILL and replaced. A new store is started every four kills, so the maps keep growing. The run ends after ``--opens`` opens and prints
how many failed, with the first failures' messages. The target is 0.

Usage: ``python benchmarks/concurrent_opens.py [--opens 1000] [--workers 8]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

WORKER = """
import os, sys
from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.record import Method, Outcome, RecentEntry
from scrapy_domainstate.store.base import StoreError
from scrapy_domainstate.store.lmdb import LmdbStore

ctl, map_size, outcomes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
out = os.fdopen(1, "w", buffering=1)
i = 0
written = set()  # stores this worker wrote to: a read-only open of one not created yet is refused
while True:
    i += 1
    with open(ctl) as fh:
        path = fh.read()
    readonly = i % 3 == 0 and path in written
    store = LmdbStore(Config(lmdb_path=path, lmdb_map_size=map_size, flush_interval=1e9, flush_size=50),
                      readonly=readonly)
    try:
        store.open()
    except StoreError as exc:
        out.write("FAIL " + ("ro " if readonly else "rw ") + str(exc).replace(chr(10), " ") + chr(10))
        continue
    out.write("OK" + chr(10))
    try:
        if readonly:
            sum(1 for _ in store.iter_records())
        else:
            written.add(path)
            for k in range(outcomes):
                store.record(f"p{os.getpid()}-{i}-{k}.example",
                             RecentEntry(1.7e9 + k, Method.FETCH, Outcome.OK_CONTACT, 200))
        store.close()
    except StoreError as exc:
        out.write("USE " + str(exc).replace(chr(10), " ") + chr(10))
"""


class Fleet:
    """The workers, their logs and the store they open now."""

    def __init__(self, base: str, map_size: int, outcomes: int) -> None:
        os.makedirs(base, exist_ok=True)
        self.base, self.map_size, self.outcomes = base, map_size, outcomes
        self.ctl = os.path.join(base, "current")
        self.env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        self.logs = Path(tempfile.mkdtemp(prefix="opens-logs-"))
        self.procs: list[tuple[subprocess.Popen[bytes], Path]] = []
        self.stores = self.started = self.killed = 0
        self.new_store()

    def new_store(self) -> None:
        self.stores += 1
        with open(self.ctl + ".tmp", "w") as fh:
            fh.write(os.path.join(self.base, f"store{self.stores}"))
        os.replace(self.ctl + ".tmp", self.ctl)

    def live(self) -> list[subprocess.Popen[bytes]]:
        return [p for p, _ in self.procs if p.poll() is None]

    def spawn_up_to(self, workers: int) -> None:
        while len(self.live()) < workers:
            self.started += 1
            log = self.logs / f"w{self.started}.out"
            with open(log, "wb") as fh:
                argv = [sys.executable, "-c", WORKER, self.ctl, str(self.map_size), str(self.outcomes)]
                proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.DEVNULL, env=self.env)
            self.procs.append((proc, log))

    def kill_one(self, rng: random.Random) -> None:
        # Only workers past their first open: on a busy machine an interpreter's start can take
        # longer than the kill interval, and killing those would stop the run from progressing.
        live = [p for p, log in self.procs if p.poll() is None and log.stat().st_size]
        if live:
            rng.choice(live).send_signal(signal.SIGKILL)
            self.killed += 1
        for proc, _ in self.procs:
            if proc.poll() is not None:
                proc.wait()

    def stop(self) -> None:
        for proc, _ in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()

    def tally(self) -> dict[str, Any]:
        lines = [line for _, log in self.procs for line in log.read_text(errors="replace").splitlines()]
        failures = [line for line in lines if line.startswith(("FAIL", "USE"))]
        codes = [p.poll() for p, _ in self.procs]
        return {
            "opens": sum(1 for line in lines if line == "OK" or line.startswith("FAIL")),
            "failed": sum(1 for line in lines if line.startswith("FAIL")),
            "use_errors": sum(1 for line in lines if line.startswith("USE")),
            "signals": sum(1 for c in codes if c is not None and c < 0 and c != -signal.SIGKILL),
            "first": failures[:5],
        }


def run(
    base: str, opens: int, workers: int, map_size: int, outcomes: int, kill_every: float, seed: int = 1
) -> dict[str, Any]:
    """Run the workers until ``opens`` opens were reported; the counts and first failures.

    A new store (under ``base``) is started every ``4 * kill_every`` seconds, so that its map
    keeps growing from ``map_size`` while the workers open it."""
    rng = random.Random(seed)
    fleet = Fleet(base, map_size, outcomes)
    started_at = time.monotonic()
    ticks = 0
    try:
        fleet.spawn_up_to(workers)
        while fleet.tally()["opens"] < opens:
            time.sleep(kill_every)
            ticks += 1
            if ticks % 4 == 0:
                fleet.new_store()
            fleet.kill_one(rng)
            fleet.spawn_up_to(workers)
    finally:
        fleet.stop()
    counts = fleet.tally()
    counts.update(killed=fleet.killed, stores=fleet.stores, seconds=round(time.monotonic() - started_at, 1))
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--opens", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--map-size", type=int, default=1 << 16)
    parser.add_argument("--outcomes", type=int, default=120)
    parser.add_argument("--kill-every", type=float, default=0.5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = run(os.path.join(tmp, "db"), args.opens, args.workers, args.map_size, args.outcomes, args.kill_every)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
