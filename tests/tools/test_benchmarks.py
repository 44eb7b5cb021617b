"""The benchmark scripts run end to end (tiny sizes, no valgrind: no figure is checked here)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

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
