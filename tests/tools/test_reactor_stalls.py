"""benchmarks/reactor_stalls.py runs end to end (a small crawl; no figure is checked here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests import ROOT


def test_the_stall_benchmark_times_every_hook_of_a_crawl(tmp_path: Path) -> None:
    out = tmp_path / "stalls.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "reactor_stalls.py"), "--urls", "60", "--hosts", "10"]
    cmd += ["--scenarios", "real", "--flush-interval", "0.05", "--json", str(out)]
    done = subprocess.run(cmd, check=False, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "longest plugin call:" in done.stdout
    hooks = json.loads(out.read_text())["real"]["hooks"]
    assert hooks["DomainStateMiddleware.process_request"]["calls"] >= 60
    assert hooks["DomainStateMiddleware.process_response"]["calls"] >= 60
    # The timer flushed, and the writer thread handed its batches back on the reactor.
    assert hooks["DomainStateManager.flush"]["calls"] >= 1
    assert hooks["LmdbStore._finish"]["calls"] >= 1
