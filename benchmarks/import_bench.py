#!/usr/bin/env python
"""What ``scrapy domainstate import`` costs on a large CSV: rows a second and peak memory.

Writes a CSV in the export format (``--rows`` rows, or ``--mb`` megabytes of them: every
row a distinct domain with a few entries of recent history), then runs
``scrapy domainstate import`` on it in a subprocess into a fresh LMDB store (in a
temporary directory, with ``DOMAINSTATE_MAX_DOMAINS`` above the row count so nothing is
evicted) and prints, for each size:

``rows``        rows in the file;
``file MB``     its size;
``seconds``     the import's wall time (both passes);
``rows/s``      rows / seconds;
``peak MB``     the child's peak resident memory (``ru_maxrss``), which also counts the
                pages of the LMDB file it maps (they grow with the store, not the import);
``heap MB``     its peak anonymous memory (``RssAnon``, sampled every 50 ms).

A streaming import keeps ``heap MB`` flat whatever the file's size.

Usage: ``python benchmarks/import_bench.py [--rows 50000 200000] [--mb 1024]``.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TextIO

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scrapy_domainstate.tools.csvio import EXPORTED_COLUMNS  # noqa: E402

#: A first_seen; each row's times follow it.
_T0 = 1_700_000_000.0
_RECENT = (
    '[{{"at":{a:.1f},"method":"fetch","outcome":"ok-contact","status":200}},'
    '{{"at":{b:.1f},"method":"fetch","outcome":"network-error","error_class":"TimeoutError"}},'
    '{{"at":{c:.1f},"method":"tab","outcome":"ok-empty","status":200}}]'
)


def write_rows(fh: TextIO, rows: int, start: int = 0) -> None:
    """``rows`` export rows (header first when ``start`` is 0), domains ``d<i>.example``."""
    writer = csv.writer(fh, lineterminator="\n")
    if start == 0:
        writer.writerow(EXPORTED_COLUMNS)
    for i in range(start, start + rows):
        first = _T0 + i % 100_000
        last = first + 3600
        writer.writerow(
            (
                f"site-{i}.example",
                "friendly",
                "3",
                "2",
                "0",
                "1",
                "1",
                repr(first),
                repr(last),
                repr(first + 60),
                repr(last + 90 * 86400),
                "0.0",
                _RECENT.format(a=first, b=first + 60, c=last),
                "0",
                "0.0",
                "0.0",
            )
        )


def write_csv_file(path: Path, rows: int | None = None, mb: float | None = None) -> int:
    """Write ``rows`` rows, or rows until the file holds ``mb`` megabytes; returns the rows."""
    with open(path, "w", encoding="utf-8", newline="") as fh:
        if rows is not None:
            write_rows(fh, rows)
            return rows
        assert mb is not None
        written, chunk = 0, 20_000
        while fh.tell() < mb * 1e6:
            write_rows(fh, chunk, start=written)
            written += chunk
        return written


def run_import(
    csv_path: Path, db: Path, max_domains: int
) -> tuple[float, float, float, subprocess.CompletedProcess[str]]:
    """Run the command; returns (seconds, the child's peak RSS and peak heap in MB, the finished process)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCRAPY_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(ROOT), env.get("PYTHONPATH"))))
    args = [sys.executable, "-m", "scrapy", "domainstate", "import", str(csv_path)]
    args += ["-s", f"DOMAINSTATE_LMDB_PATH={db}", "-s", f"DOMAINSTATE_MAX_DOMAINS={max_domains}"]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(args, cwd=db.parent, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        anon = 0
        while True:
            # The heap (RssAnon), sampled: ru_maxrss also counts the pages of the LMDB
            # file the store maps, which grow with what is written, not with the import.
            anon = max(anon, _rss_anon(proc.pid))
            # wait4: this child's own rusage (ru_maxrss in KiB on Linux), not every child's.
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            time.sleep(0.05)
        seconds = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        done = subprocess.CompletedProcess(args, proc.returncode, out.read(), err.read())
    return seconds, usage.ru_maxrss / 1024, anon / 1024, done


def _rss_anon(pid: int) -> int:
    """The process's anonymous resident memory in KiB (0 when unreadable)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="*", default=[50_000, 200_000])
    parser.add_argument("--mb", type=float, nargs="*", default=[])
    args = parser.parse_args()
    print(f"{'rows':>10} {'file MB':>8} {'seconds':>8} {'rows/s':>8} {'peak MB':>8} {'heap MB':>8}")
    for rows, mb in [(r, None) for r in args.rows] + [(None, m) for m in args.mb]:
        tmp = Path(tempfile.mkdtemp(prefix="import-bench-"))
        try:
            path = tmp / "in.csv"
            n = write_csv_file(path, rows=rows, mb=mb)
            size = path.stat().st_size / 1e6
            seconds, peak, heap, proc = run_import(path, tmp / "db", max_domains=n + 1)
            if proc.returncode != 0:
                sys.exit(f"import failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
            print(f"{n:>10,} {size:>8.0f} {seconds:>8.1f} {n / seconds:>8,.0f} {peak:>8.0f} {heap:>8.0f}", flush=True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
