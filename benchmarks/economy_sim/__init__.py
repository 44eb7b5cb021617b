"""The crawl-economy simulator behind ``benchmarks/economy.py``, in modules of one job each.

:mod:`.mix` (population files), :mod:`.world` (hosts and what any request gets),
:mod:`.answers` (the plugin's evidence rules applied to those answers),
:mod:`.baselines` (the memoryless policies and the oracle), :mod:`.plugin`
(scrapy-domainstate's path through a visit), :mod:`.run` (rounds and counts),
:mod:`.report` (rows, targets, text), :mod:`.draw` (random populations), :mod:`.chart`
and :mod:`.cli`.
"""

from .chart import write_chart, write_mixes_chart
from .cli import main, resolve_mix, summarise
from .draw import draw_population
from .mix import DEFAULT_MIX_PATH, MIXES_DIR, MixError, load_mix, shipped_mixes
from .report import LABELS, METRICS, POLICIES, TARGETS, evaluate_targets, format_report
from .run import T0, lmdb_available, parse_overrides, simulate

__all__ = [
    "DEFAULT_MIX_PATH",
    "LABELS",
    "METRICS",
    "MIXES_DIR",
    "POLICIES",
    "T0",
    "TARGETS",
    "MixError",
    "draw_population",
    "evaluate_targets",
    "format_report",
    "lmdb_available",
    "load_mix",
    "main",
    "parse_overrides",
    "resolve_mix",
    "shipped_mixes",
    "simulate",
    "summarise",
    "write_chart",
    "write_mixes_chart",
]
