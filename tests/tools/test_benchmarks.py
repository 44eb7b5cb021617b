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


def test_the_instruction_benchmark_counts_the_plugins_bytecodes_and_calls(tmp_path: Path) -> None:
    """``--count opcodes`` and ``--count calls``: per request, the plugin's own functions, with the
    middleware's hooks among them once a request (a slope, so start-up is not in it)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for unit in ("opcodes", "calls"):
        out = tmp_path / f"{unit}.json"
        cmd = [sys.executable, str(BENCH / "instructions.py"), "--count", unit, "--sizes", "10", "30"]
        cmd += ["--hosts", "10", "--warmups", "1", "--scenarios", "tiny", "--engines", "default", "--no-noop"]
        cmd += ["--json", str(out)]
        done = subprocess.run(cmd, check=False, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        plugin = json.loads(out.read_text())["figures"]["tiny"]["plugin"]["on/default"]
        per_function = {fn.rpartition("(")[2].rstrip(")"): n for fn, n in plugin["functions"].items()}
        assert 20 < plugin["own"] < (20_000 if unit == "opcodes" else 1_000), plugin["own"]
        if unit == "calls":
            assert per_function["process_request"] == per_function["process_response"] == 1.0
        else:
            assert per_function["process_request"] > 0 and per_function["process_response"] > 0


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
    derived = overhead.plugin_targets()
    targets = [*derived["request"], *derived["startup"], *derived["close"]]
    targets += [target for _, _, target in overhead.STAGES]
    assert sorted(overhead.all_targets()) == sorted(targets)
    assert [t for t in targets if overhead._resolve(t) is None] == []


def test_the_overhead_benchmark_derives_the_plugin_entry_points() -> None:
    """The patch list comes from the code: the add-on's components' hooks, the manager's
    signal receivers and what the generator hooks call (the entry points once kept by hand
    among them), each where it runs."""
    overhead = _load("overhead")
    derived = overhead.plugin_targets()
    mw, spidermw = "scrapy_domainstate.middleware:DomainStateMiddleware", "scrapy_domainstate.spidermw"
    manager = "scrapy_domainstate.runtime.lifecycle:DomainStateManager"
    assert {
        f"{mw}.process_request",
        f"{mw}.process_response",
        f"{mw}.process_exception",
        f"{spidermw}:DomainStateSpiderMiddleware.process_spider_exception",
        f"{manager}.record_items",  # called by the spider middleware's generator hook
        f"{manager}.request_left_downloader",  # a signal receiver
        f"{manager}.flush",
        "scrapy_domainstate.store.base:DomainStore.flush",
    } <= set(derived["request"])
    assert {
        "scrapy_domainstate.addon:Addon.update_settings",
        f"{mw}.__init__",
        "scrapy_domainstate.extension:DomainStateExtension.__init__",
        f"{spidermw}:DomainStateSpiderMiddleware.__init__",
        f"{manager}.spider_opened",
    } <= set(derived["startup"])
    # spider_closed is a coroutine: what it calls on the manager is timed instead
    assert f"{manager}.close" in derived["close"]
    assert set(derived["receivers"]) <= set(derived["request"] + derived["startup"] + derived["close"])
    # no target is in two meters
    every = derived["request"] + derived["startup"] + derived["close"]
    assert len(every) == len(set(every))
    # a generator or coroutine hook is never wrapped (its wrapper would time the spider's callback)
    assert not any(t.endswith(("process_spider_output", "process_start", ".spider_closed")) for t in every)


def test_a_missing_overhead_target_stops_the_benchmark() -> None:
    """A target that does not exist is an error before the crawl, not a stage left out."""
    overhead = _load("overhead")
    meter = overhead.Meter(lambda: 0)
    for target in (
        "scrapy_domainstate.middleware:DomainStateMiddleware.no_such_hook",
        "scrapy_domainstate.no_such_module:thing",
        "scrapy_domainstate.runtime.outcomes:no_such_module.func",
    ):
        with pytest.raises(overhead.TargetError, match="no "):
            overhead.patch(target, meter)
        assert overhead._resolve(target) is None

    class Component:
        def process_request(self, request: object) -> None: ...

        def handle_it(self) -> None: ...

    original = overhead.components
    overhead.components = lambda: [Component]
    try:
        with pytest.raises(overhead.TargetError, match="handle_it"):
            overhead.plugin_targets()
    finally:
        overhead.components = original


def test_the_overhead_meter_passes_a_receiver_only_its_arguments() -> None:
    """The dispatcher gives a ``**kw`` wrapper every argument of the signal; the receiver
    gets those it takes."""
    overhead = _load("overhead")
    meter = overhead.Meter(lambda: 0)

    def receiver(request: object, spider: object = None) -> object:
        return request

    wrapped = meter.wrap(receiver, receiver=True)
    assert wrapped(request=1, spider=None, signal=object(), sender=object()) == 1
    assert meter.calls == 1


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
