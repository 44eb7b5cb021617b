"""The benchmark scripts run end to end (tiny sizes, no valgrind: no figure is checked here)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import ROOT

BENCH = ROOT / "benchmarks"


def _load(name: str):  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


def test_the_instruction_benchmark_runs_its_crawls() -> None:
    """Every mode and engine crawls its URLs at both sizes (the crawls callgrind would count)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, str(BENCH / "instructions.py"), "--no-valgrind", "--sizes", "10", "20"]
    cmd += ["--hosts", "10", "--warmups", "1", "--scenarios", "tiny", "--engines", "default", "pure"]
    done = subprocess.run(cmd, check=False, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line.split() for line in done.stdout.splitlines() if " URLs: " in line]
    runs = {(words[1], int(words[2])): int(words[4]) for words in lines}
    modes = ("off", "noop", "on/default", "on/pure")
    assert runs == {(mode, size): size for mode in modes for size in (10, 20)}


def test_callgrind_totals_and_slopes_are_read(tmp_path: Path) -> None:
    bench = _load("instructions")
    out = tmp_path / "callgrind.out"
    out.write_text("version: 1\ncreator: callgrind\nevents: Ir\nfn=x\n1 5\nsummary: 1234\ntotals: 98765\n")
    assert bench.total_instructions(str(out)) == 98765
    out.write_text("version: 1\nevents: Ir\nsummary: 1234\n")
    assert bench.total_instructions(str(out)) == 1234
    small, big = {"instructions": 1_000, "requests": 10}, {"instructions": 31_000, "requests": 40}
    assert bench.slope(small, big) == 1_000


def test_the_overhead_benchmark_names_only_what_exists() -> None:
    """Every entry point and stage the timing benchmark patches is in the package."""
    overhead = _load("overhead")
    targets = [*overhead.ENTRY_POINTS, *overhead.STARTUP_POINTS, *overhead.CLOSE_POINTS]
    targets += [t for _, _, candidates in overhead.STAGES for t in candidates]
    assert [t for t in targets if overhead._resolve(t) is None] == []


@pytest.mark.redis
@pytest.mark.slow
def test_the_fleet_benchmark_measures_every_mode(tmp_path: Path) -> None:
    """``redis_bench.py --fleet``, small: decide latency on loopback and behind 1 and 10 ms,
    crawl throughput off / LMDB / Redis, and the cross-crawler verdict time (figures, not
    targets: times on this machine are for the benchmark's own report)."""
    from scrapy_domainstate.testing.redis_server import require_redis_server

    require_redis_server()
    cmd = [sys.executable, str(BENCH / "redis_bench.py"), "--fleet", "--hosts", "4", "--per-host", "5"]
    cmd += ["--rounds", "1", "--trials", "2", "--json"]
    done = subprocess.run(cmd, check=False, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout)
    assert set(figures["decide"]) == {"loopback", "1 ms", "10 ms"}
    assert all(v["decide_warm"]["p50"] > 0 and v["errors"] == 0 for v in figures["decide"].values())
    modes = {"off", "lmdb", "redis loopback", "redis 1 ms", "redis 10 ms"}
    assert set(figures["crawl_requests_per_s"]) == modes
    assert all(rate > 0 for rate in figures["crawl_requests_per_s"].values())
    assert set(figures["verdict"]) == {"loopback", "10 ms"}
