"""``python benchmarks/economy.py``: the command line."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from scrapy_domainstate.core.config import ConfigError

from .chart import write_chart, write_mixes_chart
from .draw import describe, draw_population
from .mix import DEFAULT_MIX_PATH, MIXES_DIR, MixError, shipped_mixes
from .report import format_report, target_lines
from .run import lmdb_available, simulate

__all__ = ["main", "resolve_mix", "summarise"]


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def resolve_mix(name: str | None) -> str | None:
    """A mix file path, or the name of a shipped mix (``daily`` for ``benchmarks/mixes/daily.json``)."""
    if name is None or Path(name).exists():
        return name
    shipped = MIXES_DIR / f"{name}.json"
    return str(shipped) if shipped.exists() else name


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python benchmarks/economy.py",
        description="Simulate repeated crawls of a synthetic population and compare what each policy costs and finds.",
    )
    parser.add_argument("--sites", type=int, default=None, help="sites (hosts) in the population (the mix's, 220000)")
    parser.add_argument("--rounds", type=int, default=None, help="crawls of the whole population (the mix's, 4)")
    parser.add_argument("--days-between", type=float, default=None, help="days between two crawls (the mix's, 7)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the world (1)")
    parser.add_argument(
        "--seeds",
        default=None,
        metavar="1,2,3",
        help="with --all-mixes or --random-mixes: run every mix with each of these seeds (default: --seed)",
    )
    parser.add_argument(
        "--outcome",
        choices=("contacts", "items"),
        default=None,
        help="what a useful page is (the mix's, contacts): items tells navigation pages from empty ones",
    )
    names = ", ".join(p.stem for p in shipped_mixes())
    parser.add_argument(
        "--mix", default=None, help=f"mix file or shipped mix ({names}; default {DEFAULT_MIX_PATH.name})"
    )
    parser.add_argument(
        "--all-mixes", action="store_true", help="run the default and every shipped mix; print a summary"
    )
    parser.add_argument(
        "--random-mixes",
        type=int,
        default=None,
        metavar="N",
        help="run N random populations (benchmarks/economy_sim/draw.py: shares, pages, cadence, noise drawn "
        "around the default mix's, 3000 sites); print a summary",
    )
    parser.add_argument(
        "--random-start", type=int, default=0, metavar="K", help="with --random-mixes: the first index (0)"
    )
    parser.add_argument("--render-cost", type=float, default=10.0, help="what a browser render costs, in GETs (10)")
    parser.add_argument("--head-cost", type=float, default=1.0, help="what a HEAD costs, in GETs (1)")
    parser.add_argument("--store", choices=("lmdb", "memory"), default=None, help="the plugin's store (default: lmdb)")
    parser.add_argument("--lmdb-dir", default=None, help="parent directory of the LMDB store (default: /dev/shm)")
    parser.add_argument("--chart", default=None, help="write a PNG chart here (needs matplotlib)")
    parser.add_argument("--json", default=None, help="write the full result as JSON here")
    parser.add_argument(
        "--config-override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a DOMAINSTATE_* setting for scrapy-domainstate, as in a crawl (repeatable)",
    )
    parser.add_argument(
        "--noise",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="replace one of the mix's noise rates (repeatable), e.g. stable_contacts=0.5",
    )
    parser.add_argument("--by-kind", action="store_true", help="also print a per-kind breakdown")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress on stderr (default: when stderr is a terminal)",
    )
    return parser


def _run(
    args: argparse.Namespace, mix: str | Mapping[str, Any] | None, progress: bool, seed: int | None = None
) -> dict[str, Any]:
    return simulate(
        sites=args.sites,
        rounds=args.rounds,
        days_between=args.days_between,
        seed=args.seed if seed is None else seed,
        outcome=args.outcome,
        noise=_noise(args.noise),
        mix=mix,
        store=args.store,
        overrides=args.config_override,
        progress=progress,
        lmdb_dir=args.lmdb_dir,
        render_cost=args.render_cost,
        head_cost=args.head_cost,
    )


def summarise(name: str, result: Mapping[str, Any]) -> dict[str, Any]:
    """One line of the across-mixes table: the worst round of each figure."""
    rows = result["rounds"]
    later = rows[1:] or rows

    def worst(key: str, other: str, rounds: Sequence[Mapping[str, Any]], low: bool = False) -> float:
        values = [r["domainstate"][key] / r[other][key] if r[other][key] else 1.0 for r in rounds]
        return min(values) if low else max(values)

    return {
        "mix": name,
        "seed": result["params"]["seed"],
        "sites": result["params"]["sites"],
        "rounds": len(rows),
        "contacts_min": worst("contacts", "fixable", rows, low=True),
        "sites_min": worst("sites", "fixable", rows, low=True),
        "cost_vs_fixable": worst("cost", "fixable", later),
        "cost_vs_oracle": worst("cost", "oracle", later),
        "requests_vs_oracle": worst("requests", "oracle", later),
        "round1_vs_fixable": rows[0]["domainstate"]["cost"] / rows[0]["fixable"]["cost"]
        if rows[0]["fixable"]["cost"]
        else 1.0,
        "met": all(t["met"] is not False for t in result["targets"]),
    }


def _summary_lines(summary: Sequence[Mapping[str, Any]]) -> list[str]:
    head = f"{'mix':<16} {'seed':>4} {'sites':>8} {'rounds':>6} {'pages':>8} {'sites':>8} {'cost/fix':>9} {'cost/orc':>9} {'req/orc':>8} {'r1 cost/fix':>11}  targets"
    lines = [head, "-" * len(head)]
    for s in summary:
        lines.append(
            f"{s['mix']:<16} {s.get('seed', 1):>4} {s['sites']:>8,} {s['rounds']:>6} {s['contacts_min']:>8.2%} {s['sites_min']:>8.2%} "
            f"{s['cost_vs_fixable']:>9.3f} {s['cost_vs_oracle']:>9.3f} {s['requests_vs_oracle']:>8.3f} "
            f"{s['round1_vs_fixable']:>11.3f}  {'met' if s['met'] else 'MISSED'}"
        )
    return lines


def _all_mixes(args: argparse.Namespace, progress: bool) -> int:
    mixes: list[tuple[str, str | Mapping[str, Any] | None]] = [("default", None)]
    mixes += [(p.stem, str(p)) for p in shipped_mixes()]
    return _many(args, progress, mixes)


def _random_mixes(args: argparse.Namespace, progress: bool) -> int:
    if args.random_mixes < 1 or args.random_start < 0:
        raise ValueError("--random-mixes takes a count >= 1 and --random-start an index >= 0")
    mixes: list[tuple[str, str | Mapping[str, Any] | None]] = []
    for index in range(args.random_start, args.random_start + args.random_mixes):
        mix = draw_population(index)
        mixes.append((f"random-{index}", mix))
        print(f"random-{index}: {describe(mix)}")
    return _many(args, progress, mixes)


def _many(args: argparse.Namespace, progress: bool, mixes: Sequence[tuple[str, str | Mapping[str, Any] | None]]) -> int:
    """Run each mix with each seed; print each one's targets, then the summary table."""
    summary, failed = [], False
    seeds = _seeds(args)
    for name, mix in mixes:
        for seed in seeds:
            result = _run(args, mix, progress, seed)
            print(f"== mix {name}, seed {seed}")
            print(format_report(result, by_kind=True) if args.by_kind else "\n".join(target_lines(result)))
            summary.append(summarise(name, result))
            failed |= not summary[-1]["met"]
    print("\nAcross mixes (worst round; pages/sites: % of the fixable fallback's; cost and requests from round 2):")
    print("\n".join(_summary_lines(summary)))
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    if args.chart and write_mixes_chart(summary, args.chart):
        _say(f"economy: chart written to {args.chart}")
    return 1 if args.check and failed else 0


def _noise(items: Sequence[str]) -> dict[str, float]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            raise ValueError(f"--noise takes NAME=NUMBER, got {item!r}") from None
        if not sep:
            raise ValueError(f"--noise takes NAME=NUMBER, got {item!r}")
    return out


def _seeds(args: argparse.Namespace) -> list[int]:
    if not args.seeds:
        return [args.seed]
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        raise ValueError(f"--seeds takes integers separated by commas, got {args.seeds!r}") from None
    if not seeds:
        raise ValueError("--seeds names no seed")
    return seeds


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    progress = sys.stderr.isatty() if args.progress is None else args.progress
    if args.store is None and not lmdb_available():
        args.store = "memory"
        _say("economy: scrapy_domainstate.store.lmdb is not available: using the memory store")
    try:
        if args.all_mixes:
            return _all_mixes(args, progress)
        if args.random_mixes is not None:
            return _random_mixes(args, progress)
        result = _run(args, resolve_mix(args.mix), progress)
    except (ConfigError, MixError, ValueError) as exc:
        parser.error(str(exc))
    print(format_report(result, by_kind=args.by_kind))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    if args.chart:
        if write_chart(result, args.chart):
            _say(f"economy: chart written to {args.chart}")
        else:
            _say("economy: matplotlib is not installed, no chart (pip install 'scrapy-domainstate[chart]')")
    missed = any(t["met"] is False for t in result["targets"])
    return 1 if args.check and missed else 0
