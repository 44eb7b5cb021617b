#!/usr/bin/env python
"""What the plugin costs a crawl, in instructions: callgrind counts, not clocks.

Usage::

    python benchmarks/instructions.py [--sizes 100 300] [--hosts 30] [--scenarios tiny real]
                                      [--engines default pure] [--no-noop] [--no-valgrind]

Timing a crawl on a shared machine swings by 2x from run to run; the number of
instructions a process executes does not (two identical callgrind runs agree within
a fraction of a percent). Each crawl here is one of ``benchmarks/overhead.py``'s
loopback crawls (same server, pages, URL plan and settings: see its docstring), run
in a fresh process under ``valgrind --tool=callgrind``, and its total instruction
count is read from the ``totals:`` line of ``callgrind.out``.

Modes, each at the two crawl sizes of ``--sizes`` over the same ``--hosts`` sites:

``off``
    Scrapy alone (one no-op downloader middleware and the stand-in browser, as in
    every crawl);
``noop``
    ``off`` plus ten more no-op downloader middlewares (one middleware's cost is a
    tenth of the difference: the price of one more component doing nothing);
``on``
    the plugin, on a warm store (warmed by crawls before measuring), once per engine
    of ``--engines``: ``default`` (what this install picks: hyperscan when
    importable), ``hyperscan`` or ``pure`` (forced by ``DOMAINSTATE_SCAN_ENGINE``).

Instructions per request are the slope between the two sizes, ``(I(big) - I(small))
/ (requests(big) - requests(small))``, so the start-up (imports, building the
classifier, opening the store) and the close cancel out. The plugin's share is its
slope minus Scrapy's, over Scrapy's. Each figure is printed next to the issue's
target (<= 2 % of Scrapy's own on 0.7 KB pages, <= 3 % on 50 KB pages).

``--no-valgrind`` runs the same crawls without callgrind and prints requests only
(a quick check that the script works; the test suite runs it so).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import cProfile
import ctypes
import json
import os
import pstats
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import overhead  # noqa: E402 - the crawls, pages and server are overhead.py's

#: The issue's targets: the plugin's instructions per request, as a share of Scrapy's own.
TARGETS = {"tiny": 0.02, "real": 0.03}
LABELS = {"tiny": "0.7 KB pages", "real": "50 KB pages"}
ENGINES = ("default", "hyperscan", "pure")
VALGRIND = "valgrind"


# ------------------------------------------------------------------ child


def child(args: argparse.Namespace) -> None:
    """One plain crawl (no meters: every instruction counted is the crawl's own)."""
    from scrapy import Request, Spider
    from scrapy.crawler import CrawlerProcess

    urls = overhead.url_plan(args.scenario, args.port, args.urls, args.hosts)

    class Bench(Spider):
        name = "bench"

        async def start(self):  # type: ignore[no-untyped-def]
            for url in urls:
                yield Request(url, dont_filter=True)

        def parse(self, response):  # type: ignore[no-untyped-def]
            return None

    settings = overhead.crawl_settings(args, args.mode)
    settings["DOMAINSTATE_FLUSH_INTERVAL"] = args.flush_interval
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(Bench)
    process.crawl(crawler)
    with counted():
        process.start()
    stats = crawler.stats.get_stats()
    result = {
        "requests": stats.get("downloader/request_count", 0),
        "responses": stats.get("response_received_count", 0),
    }
    print(json.dumps(result))


@contextlib.contextmanager
def counted() -> Iterator[None]:
    """Callgrind counts only inside (the crawl, from the spider's opening to its close): the
    imports before are run uninstrumented (about 4x faster under valgrind than counted)."""
    opcodes_to = os.environ.get(_OPCODES_ENV)
    if opcodes_to:
        with opcodes_counted() as counts:
            yield
        Path(opcodes_to).write_text(json.dumps(counts))
        return
    profile_to = os.environ.get(_PROFILE_ENV)
    if profile_to:
        with cProfile.Profile() as prof:
            yield
        prof.dump_stats(profile_to)
        return
    lib = os.environ.get(_HOOKS_ENV)
    if not lib:
        yield
        return
    hooks = ctypes.CDLL(lib)
    hooks.ds_start()
    try:
        yield
    finally:
        hooks.ds_stop()


@contextlib.contextmanager
def opcodes_counted() -> Iterator[collections.Counter[str]]:
    """Bytecodes executed in the plugin's own functions, per function (``--count opcodes``): a
    trace function that asks for opcode events in the package's frames only (other frames run
    untraced). Deterministic, unlike the time a profiler gives; C work a bytecode starts (a
    dictionary lookup, a regex, a hyperscan pass) counts as one."""
    counts: collections.Counter[str] = collections.Counter()

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "opcode":
            code = frame.f_code
            counts[f"{code.co_filename}:{code.co_firstlineno}({code.co_name})"] += 1
        return local

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        if _PACKAGE_DIR in frame.f_code.co_filename:
            frame.f_trace_opcodes = True
            frame.f_trace_lines = False
            return local
        return None

    threading.settrace(tracer)
    sys.settrace(tracer)
    try:
        yield counts
    finally:
        sys.settrace(None)
        threading.settrace(None)  # type: ignore[arg-type]


_PACKAGE_DIR = f"{os.sep}scrapy_domainstate{os.sep}"

#: The environment variable that tells a child where the callgrind hooks library is.
_HOOKS_ENV = "DOMAINSTATE_BENCH_CALLGRIND_HOOKS"
#: ... and, with ``--count``, where to write its crawl's cProfile statistics or opcode counts.
_PROFILE_ENV = "DOMAINSTATE_BENCH_PROFILE"
_OPCODES_ENV = "DOMAINSTATE_BENCH_OPCODES"
_HOOKS_C = """
#include <valgrind/callgrind.h>
void ds_start(void) { CALLGRIND_START_INSTRUMENTATION; CALLGRIND_ZERO_STATS; }
void ds_stop(void) { CALLGRIND_STOP_INSTRUMENTATION; }
"""


def build_hooks(tmp: str) -> str | None:
    """A tiny shared library making callgrind's client requests (``None``: no compiler or
    no ``valgrind/callgrind.h``; then whole processes are counted, start-up included)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    src, lib = os.path.join(tmp, "hooks.c"), os.path.join(tmp, "hooks.so")
    Path(src).write_text(_HOOKS_C)
    done = subprocess.run([cc, "-O1", "-shared", "-fPIC", "-o", lib, src], check=False, capture_output=True)
    return lib if done.returncode == 0 else None


def run_child(
    mode: str, scenario: str, urls: int, args: argparse.Namespace, port: int, store: str, engine: str, tmp: str
) -> dict[str, Any]:
    env = dict(os.environ, PYTHONHASHSEED="0")
    env.pop("DOMAINSTATE_SCAN_ENGINE", None)
    env.pop(_HOOKS_ENV, None)
    env.pop(_PROFILE_ENV, None)
    env.pop(_OPCODES_ENV, None)
    if args.hooks and not args.no_valgrind:
        env[_HOOKS_ENV] = args.hooks
    if engine != "default":
        env["DOMAINSTATE_SCAN_ENGINE"] = engine
    cmd = [sys.executable, __file__, "--child", mode, "--scenario", scenario, "--port", str(port), "--store", store]
    cmd += ["--urls", str(urls), "--hosts", str(args.hosts), "--flush-interval", str(args.flush_interval)]
    out = os.path.join(args.keep or tmp, f"callgrind.{scenario}.{mode}.{engine}.{urls}")
    if args.count:
        env[_PROFILE_ENV if args.count == "calls" else _OPCODES_ENV] = out
    elif not args.no_valgrind:
        instr = "no" if args.hooks else "yes"
        cmd = [args.valgrind, "--tool=callgrind", f"--instr-atstart={instr}", f"--callgrind-out-file={out}", *cmd]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, cwd=ROOT, env=env)
    if proc.returncode:
        sys.stderr.write(proc.stderr[-4000:])
        raise SystemExit(f"benchmark child {mode}/{scenario}/{urls} failed")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    if args.count == "calls":
        result["instructions"] = None
        result["calls"], result["seconds"] = call_counts(out)
    elif args.count == "opcodes":
        result["instructions"], result["seconds"] = None, {}
        result["calls"] = json.loads(Path(out).read_text())
    else:
        result["instructions"] = None if args.no_valgrind else total_instructions(out)
    return result


def call_counts(path: str) -> tuple[dict[str, int], dict[str, float]]:
    """Python calls per function of a child's crawl (``--calls``), and each function's own time
    under the profiler (a hint only: profiling inflates small functions): ``file:line(name)``."""
    stats = pstats.Stats(path).stats  # type: ignore[attr-defined]
    calls = {f"{file}:{line}({name})": int(value[1]) for (file, line, name), value in stats.items()}
    seconds = {f"{file}:{line}({name})": float(value[2]) for (file, line, name), value in stats.items()}
    return calls, seconds


def total_instructions(path: str) -> int:
    """The ``Ir`` total of a callgrind output file (its ``totals:`` or ``summary:`` line)."""
    summary = None
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if line.startswith("totals:"):
                return int(line.split()[1])
            if line.startswith("summary:"):
                summary = int(line.split()[1])
    if summary is None:
        raise SystemExit(f"no totals in {path}")
    return summary


# ------------------------------------------------------------------ parent


def warm(scenario: str, args: argparse.Namespace, port: int, store: str) -> None:
    """Crawls with the plugin (no valgrind) until the store's states are steady."""
    for _ in range(args.warmups):
        cmd = [sys.executable, str(HERE / "overhead.py"), "--child", "on", "--scenario", scenario]
        cmd += ["--port", str(port), "--store", store, "--urls", str(max(args.sizes)), "--hosts", str(args.hosts)]
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True, cwd=ROOT)
        if proc.returncode:
            sys.stderr.write(proc.stderr[-4000:])
            raise SystemExit(f"warm-up crawl {scenario} failed")


def slope(small: dict[str, Any], big: dict[str, Any]) -> float:
    return (big["instructions"] - small["instructions"]) / max(big["requests"] - small["requests"], 1)


def _baseline(args: argparse.Namespace, scenario: str) -> dict[str, dict[int, dict[str, Any]]]:
    """The ``off`` and ``noop`` crawls of an earlier ``--json`` file (same sizes and sites):
    they do not depend on the plugin, so comparing versions of it needs only its own crawls."""
    if not args.baseline:
        return {}
    raw = json.loads(Path(args.baseline).read_text())["raw"].get(scenario, {})
    found = {key: {int(n): run for n, run in runs.items()} for key, runs in raw.items() if key in ("off", "noop")}
    for key, runs in found.items():
        if sorted(runs) != sorted(args.sizes):
            raise SystemExit(f"--baseline: its {scenario} {key} crawls are of sizes {sorted(runs)}, not {args.sizes}")
    return found


def measure(scenario: str, args: argparse.Namespace, port: int, tmp: str) -> dict[str, Any]:
    store = os.path.join(tmp, f"ds-{scenario}")
    warm(scenario, args, port, store)
    runs: dict[str, dict[int, dict[str, Any]]] = _baseline(args, scenario)
    modes = [("off", "default")] + ([] if args.no_noop else [("noop", "default")])
    modes += [("on", e) for e in args.engines]
    for mode, engine in modes:
        key = mode if mode != "on" else f"on/{engine}"
        if key in runs:
            print(f"  {scenario} {key:<13} from {args.baseline}", flush=True)
            continue
        runs[key] = {}
        for urls in args.sizes:
            res = run_child(mode, scenario, urls, args, port, store, engine, tmp)
            runs[key][urls] = res
            count = "" if res["instructions"] is None else f", {res['instructions']:,} instructions"
            print(f"  {scenario} {key:<13} {urls:>5} URLs: {res['requests']} requests{count}", flush=True)
    return runs


def report(scenario: str, runs: dict[str, dict[int, dict[str, Any]]], sizes: list[int]) -> dict[str, Any]:
    small, big = min(sizes), max(sizes)
    per_request = {key: slope(r[small], r[big]) for key, r in runs.items()}
    scrapy = per_request["off"]
    target = TARGETS[scenario]
    print(f"\n--- {LABELS[scenario]} ({scenario}): instructions per request, slope {small} -> {big} URLs ---")
    print(f"  {'crawl':<34}{'per request':>14}{'vs Scrapy':>11}  target")
    print(f"  {'Scrapy alone (off)':<34}{scrapy / 1e6:>12.3f} M")
    noop = None
    if "noop" in per_request:
        noop = (per_request["noop"] - scrapy) / overhead.NOOPS
        print(f"  {'one more no-op downloader mw':<34}{noop / 1e3:>+12.1f} k{noop / scrapy:>+10.2%}")
    figures: dict[str, Any] = {"scrapy": scrapy, "noop": noop, "plugin": {}}
    for key, value in per_request.items():
        if not key.startswith("on/"):
            continue
        engine = key.partition("/")[2]
        extra = value - scrapy
        share = extra / scrapy
        verdict = "met" if share <= target else "missed"
        label = f"plugin, {engine} engine"
        print(f"  {label:<34}{extra / 1e3:>+12.1f} k{share:>+10.2%}  <= {target:.0%}: {verdict}")
        figures["plugin"][engine] = {"extra": extra, "share": share, "met": share <= target}
    return figures


def _count_slope(runs: dict[int, dict[str, Any]], small: int, big: int) -> dict[str, float]:
    n = max(runs[big]["requests"] - runs[small]["requests"], 1)
    a, b = runs[small]["calls"], runs[big]["calls"]
    return {fn: (b.get(fn, 0) - a.get(fn, 0)) / n for fn in set(a) | set(b)}


def report_counts(
    scenario: str, runs: dict[str, dict[int, dict[str, Any]]], sizes: list[int], unit: str, top: int = 30
) -> dict[str, Any]:
    """``--count calls``: Python calls per request (cProfile), the crawl's on minus off, and the
    plugin's own functions; ``--count opcodes``: bytecodes per request in the plugin's own
    functions. The same slope as the instructions; the functions with the most first."""
    small, big = min(sizes), max(sizes)
    off = _count_slope(runs["off"], small, big)
    scrapy = sum(off.values())
    print(f"\n--- {LABELS[scenario]} ({scenario}): {unit} per request, slope {small} -> {big} URLs ---")
    if unit == "calls":
        print(f"  {'Scrapy alone (off)':<34}{scrapy:>10.1f}")
    figures: dict[str, Any] = {"scrapy": scrapy if unit == "calls" else None, "plugin": {}}
    for key, engine_runs in runs.items():
        if not key.startswith("on/"):
            continue
        on = _count_slope(engine_runs, small, big)
        own = {fn: n for fn, n in on.items() if _PACKAGE_DIR in fn and n > 0.005}
        total = sum(own.values())
        if unit == "calls":
            extra = sum(on.values()) - scrapy
            print(
                f"  {key:<34}{extra:>+10.1f} calls ({extra / scrapy:+.1%}); in the plugin's own functions: {total:.1f}"
            )
        else:
            extra = total
            print(f"  {key:<34}{total:>10.1f} bytecodes in the plugin's own functions")
        for fn, n in sorted(own.items(), key=lambda kv: -kv[1])[:top]:
            print(f"    {n:>8.2f}  {fn.split(_PACKAGE_DIR, 1)[1]}")
        figures["plugin"][key] = {"extra": extra, "own": total, "functions": own}
    return figures


def _terminated(signum: int, frame: Any) -> None:
    raise SystemExit(f"terminated by signal {signum}")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs=2, type=int, default=[100, 300], help="the two crawl sizes (URLs)")
    parser.add_argument("--hosts", type=int, default=30, help="sites the URLs are spread over (a multiple of 10)")
    parser.add_argument("--scenarios", nargs="+", choices=("tiny", "real"), default=["tiny", "real"])
    parser.add_argument("--engines", nargs="+", choices=ENGINES, default=["default", "pure"])
    parser.add_argument("--baseline", help="reuse the off/noop crawls of this earlier --json file")
    parser.add_argument(
        "--flush-interval",
        default="3600",
        help="DOMAINSTATE_FLUSH_INTERVAL of the crawls (default: an hour, so the store flushes by size "
        "as in a crawl at full speed; under callgrind a crawl runs ~50x slower and a 1 s timer would "
        "flush 50x as often)",
    )
    parser.add_argument("--no-noop", action="store_true", help="skip the no-op middleware crawls")
    parser.add_argument("--warmups", type=int, default=2, help="crawls with the plugin before measuring")
    parser.add_argument("--valgrind", default=VALGRIND, help="the valgrind executable")
    parser.add_argument("--no-valgrind", action="store_true", help="run the crawls without callgrind (a smoke test)")
    parser.add_argument(
        "--count",
        choices=("calls", "opcodes"),
        help="count Python calls (cProfile) or the plugin's bytecodes per request instead of instructions "
        "(fast and deterministic: no valgrind; says which functions)",
    )
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument(
        "--keep", help="write the callgrind files into this directory (for callgrind_annotate's per-function breakdown)"
    )
    parser.add_argument("--child", choices=("on", "off", "noop"), dest="mode", help=argparse.SUPPRESS)
    parser.add_argument("--scenario", choices=("tiny", "real"), default="tiny", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    parser.add_argument("--urls", type=int, help=argparse.SUPPRESS)
    return parser


def main() -> int:
    args = _parser().parse_args()
    if args.mode:
        child(args)
        return 0
    signal.signal(signal.SIGTERM, _terminated)  # the server is stopped on the way out
    if not args.count and not args.no_valgrind and shutil.which(args.valgrind) is None:
        raise SystemExit(f"{args.valgrind} not found (install valgrind, or pass --no-valgrind)")
    from scrapy_domainstate.detect.scan import HAVE_HYPERSCAN, default_engine

    print(f"default engine here: {default_engine()} (hyperscan importable: {HAVE_HYPERSCAN})")
    server = subprocess.Popen(
        [sys.executable, "-c", overhead.SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(json.dumps({k: v.decode("latin-1") for k, v in overhead.pages().items()}))
        server.stdin.close()
        port = int(server.stdout.readline())
        with tempfile.TemporaryDirectory() as tmp:
            args.hooks = None if args.no_valgrind or args.count else build_hooks(tmp)
            if not args.no_valgrind and not args.count:
                counted_part = "the crawls only" if args.hooks else "whole processes (no C compiler for the hooks)"
                print(
                    f"callgrind counts {counted_part}; sizes {args.sizes[0]} and {args.sizes[1]} URLs over {args.hosts} sites"
                )
            data = {s: measure(s, args, port, tmp) for s in args.scenarios}
    finally:
        server.terminate()
        server.wait()
    if args.no_valgrind:
        return 0
    if args.count:
        figures = {s: report_counts(s, data[s], args.sizes, args.count) for s in args.scenarios}
        if args.json:
            Path(args.json).write_text(json.dumps({"figures": figures}, indent=1))
        return 0
    figures = {s: report(s, data[s], args.sizes) for s in args.scenarios}
    if args.json:
        Path(args.json).write_text(json.dumps({"figures": figures, "raw": data}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
