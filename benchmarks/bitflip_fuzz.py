#!/usr/bin/env python
"""Single-bit flips in an LMDB store's meta pages and page headers.

A small store is built once (``--domains`` records; its last two commits only write URL
marks, so the records read the same from either meta page); then each flip is made in a
fresh copy of it, and the copy is opened by the store, every record read (records, the LRU
index, a URL mark), one outcome written and flushed. Each flip ends in one of:

``refused``  the open raised StoreError naming ``data.mdb`` and the fix;
``read``     everything read back exactly as written, and the write went through;
``rolled``   read correctly, but from the previous commit (the other meta page won);
``wrong``    opened, but something read differently or failed later (a failure);
``signal``   the process died of a signal (SIGABRT, SIGSEGV, SIGBUS...): a failure.

The flips run in child processes (a signal kills one; the next flip goes on in a new one).
Without ``--sample`` every bit of both meta pages and of every page header is flipped.

Usage: ``python benchmarks/bitflip_fuzz.py [--domains 300] [--sample N] [--seed 1]``.
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
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PSIZE = 4096
HEADER = 16
META_BYTES = HEADER + 136

CHILD = """
import json, os, shutil, sys
from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.record import Method, Outcome, RecentEntry
from scrapy_domainstate.store.base import StoreError
from scrapy_domainstate.store.lmdb import LmdbStore

template, work, flips_path, progress = sys.argv[1:5]
expected = json.load(open(os.path.join(template, "expected.json")))
flips = json.load(open(flips_path))
done = int(open(progress).read() or 0) if os.path.exists(progress) else 0
out = open(progress + ".results", "a", buffering=1)

def attempt(path):
    store = LmdbStore(Config(lmdb_path=path, flush_interval=1e9))
    try:
        store.open()
    except StoreError as exc:
        msg = str(exc)
        ok = os.path.join(path, "data.mdb") in msg and "restore it from a backup" in msg
        return "refused" if ok else "wrong:" + msg[:200]
    try:
        got = {s.domain: s.fetch_total for s in store.iter_records()}
        if got != expected["records"] or store.corrupt_records or store.lru_count() != len(got):
            return "wrong:records differ"
        last = store.url_dead_until(expected["last_url"])
        store.record("new.example", RecentEntry(1.7e9, Method.FETCH, Outcome.OK_CONTACT, 200))
        store.flush()
        store.close()
        return "read" if last is not None else "rolled"
    except StoreError as exc:
        return "wrong:" + str(exc)[:200]

for i in range(done, len(flips)):
    offset, bit = flips[i]
    with open(progress, "w") as fh:
        fh.write(str(i))
    path = os.path.join(work, f"f{i}")
    shutil.copytree(template, path, ignore=shutil.ignore_patterns("expected.json", "lock.mdb"))
    with open(os.path.join(path, "data.mdb"), "r+b") as fh:
        fh.seek(offset)
        byte = fh.read(1)[0]
        fh.seek(offset)
        fh.write(bytes([byte ^ (1 << bit)]))
    result = attempt(path)
    out.write(json.dumps([offset, bit, result]) + "\\n")
    shutil.rmtree(path, ignore_errors=True)
with open(progress, "w") as fh:
    fh.write(str(len(flips)))
"""

BUILD = """
import json, os, sys
import lmdb
from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.record import Method, Outcome, RecentEntry
from scrapy_domainstate.store.lmdb import LmdbStore

path, n = sys.argv[1], int(sys.argv[2])
store = LmdbStore(Config(lmdb_path=path, flush_interval=1e9, flush_size=50))
store.open()
for i in range(n):
    for k in range(1 + i % 3):
        store.record(f"d{i}.example", RecentEntry(1.7e9 + i + k, Method.FETCH, Outcome.OK_CONTACT, 200))
store.flush()
store.close()
records = {}
store = LmdbStore(Config(lmdb_path=path, flush_interval=1e9))
store.open()
records = {s.domain: s.fetch_total for s in store.iter_records()}
store.mark_url_dead("a" * 40, 1.8e9)
store.flush()  # the commit before the last: a URL mark only
store.mark_url_dead("b" * 40, 1.8e9)
store.flush()  # the last commit: another URL mark only
store.close()
json.dump({"records": records, "last_url": "b" * 40}, open(os.path.join(path, "expected.json"), "w"))
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def build(path: str, domains: int) -> int:
    subprocess.run([sys.executable, "-c", BUILD, path, str(domains)], check=True, env=_env(), timeout=120)
    return os.path.getsize(os.path.join(path, "data.mdb"))


def all_flips(size: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Every bit of both meta pages' used bytes, and of every other page's header."""
    meta = [(page * PSIZE + b, bit) for page in (0, 1) for b in range(META_BYTES) for bit in range(8)]
    headers = [(page * PSIZE + b, bit) for page in range(2, size // PSIZE) for b in range(HEADER) for bit in range(8)]
    return meta, headers


def run_flips(template: str, flips: list[tuple[int, int]], work: str) -> list[tuple[int, int, str]]:
    """Run the flips in child processes; one that dies of a signal is recorded and skipped."""
    os.makedirs(work, exist_ok=True)
    flips_path, progress = os.path.join(work, "flips.json"), os.path.join(work, "progress")
    with open(flips_path, "w") as fh:
        json.dump(flips, fh)
    results: list[tuple[int, int, str]] = []
    while True:
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, template, work, flips_path, progress],
            env=_env(),
            capture_output=True,
            timeout=1800,
            check=False,
        )
        done = int(Path(progress).read_text() or 0)
        if proc.returncode == 0 and done >= len(flips):
            break
        offset, bit = flips[done]
        with open(progress + ".results", "a") as fh:
            fh.write(json.dumps([offset, bit, f"signal:{-proc.returncode}"]) + "\n")
        Path(progress).write_text(str(done + 1))
        shutil.rmtree(os.path.join(work, f"f{done}"), ignore_errors=True)
        if done + 1 >= len(flips):
            break
    for line in Path(progress + ".results").read_text().splitlines():
        offset, bit, result = json.loads(line)
        results.append((offset, bit, result))
    return results


def summarize(results: list[tuple[int, int, str]]) -> dict[str, Any]:
    kinds = Counter(r.split(":", 1)[0] for _, _, r in results)
    bad = [r for r in results if r[2].startswith(("wrong", "signal"))]
    return {"flips": len(results), **dict(kinds), "failures": bad[:10]}


def fuzz(tmp: str, domains: int, sample: int | None, seed: int) -> dict[str, Any]:
    template = os.path.join(tmp, "template")
    size = build(template, domains)
    meta, headers = all_flips(size)
    if sample is not None:
        rng = random.Random(seed)
        meta, headers = rng.sample(meta, min(sample, len(meta))), rng.sample(headers, min(sample, len(headers)))
    return {
        "pages": size // PSIZE,
        "meta": summarize(run_flips(template, meta, os.path.join(tmp, "meta"))),
        "headers": summarize(run_flips(template, headers, os.path.join(tmp, "headers"))),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--domains", type=int, default=300)
    parser.add_argument("--sample", type=int, default=None, help="flips of each kind (default: every bit)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps(fuzz(tmp, args.domains, args.sample, args.seed), indent=2))


if __name__ == "__main__":
    main()
