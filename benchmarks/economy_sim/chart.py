"""PNG charts of a run, and of many mixes side by side (needs matplotlib)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .report import LABELS

__all__ = ["write_chart", "write_mixes_chart"]

_SHOWN = ("fallback", "fixable", "domainstate", "oracle")
_COLORS = {"fallback": "#e69f00", "fixable": "#cc79a7", "domainstate": "#0072b2", "oracle": "#009e73"}


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def _bars(ax: Any, rows: Sequence[Mapping[str, Any]], metric: str, title: str) -> None:
    n = len(rows)
    width = 0.8 / len(_SHOWN)
    top = max(rows[i][p][metric] for i in range(n) for p in _SHOWN) / 1000 or 1.0
    for j, p in enumerate(_SHOWN):
        xs = [i + (j - (len(_SHOWN) - 1) / 2) * width for i in range(n)]
        ys = [rows[i][p][metric] / 1000 for i in range(n)]
        ax.bar(xs, ys, width, label=LABELS[p], color=_COLORS[p])
        if p == "domainstate":  # its share of the fixable fallback's
            for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
                base = rows[i]["fixable"][metric]
                if base:
                    ax.text(x, y + top * 0.01, f"{rows[i][p][metric] / base:.0%}", ha="center", va="bottom", fontsize=7)
    ax.set_title(title)
    ax.set_xticks(range(n), [f"r{i + 1}" for i in range(n)])
    ax.set_ylabel("thousands")
    ax.set_ylim(0, top * 1.1)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)


def write_chart(result: Mapping[str, Any], path: str | Path) -> bool:
    """Cost, renders and contacts per policy per round. False without matplotlib."""
    plt = _pyplot()
    if plt is None:
        return False
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.6), constrained_layout=True)
    panels = (("cost", "Render-weighted cost"), ("renders", "Browser renders"), ("contacts", "Pages with contacts"))
    for ax, (metric, title) in zip(axes, panels, strict=True):
        _bars(ax, result["rounds"], metric, title)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(_SHOWN), fontsize=9, frameon=False)
    prm = result["params"]
    fig.suptitle(
        f"Crawl economy: {prm['sites']:,} sites, {prm['rounds']} crawls {prm['days_between']:g} days apart, mix "
        f"{prm['mix']}\n(% over the scrapy-domainstate bars: its share of the fixable fallback's)",
        fontsize=10,
    )
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write_mixes_chart(summary: Sequence[Mapping[str, Any]], path: str | Path) -> bool:
    """Per mix: scrapy-domainstate's cost against the fixable fallback's and the oracle's (rounds 2+,
    or round 1 for one-round mixes), and its pages with contacts against the fixable fallback's."""
    plt = _pyplot()
    if plt is None:
        return False
    names = [s["mix"] for s in summary]
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8), constrained_layout=True)
    xs = range(len(names))
    width = 0.38
    left.bar(
        [x - width / 2 for x in xs],
        [s["cost_vs_fixable"] for s in summary],
        width,
        label="cost / fixable fallback's",
        color=_COLORS["fixable"],
    )
    left.bar(
        [x + width / 2 for x in xs],
        [s["cost_vs_oracle"] for s in summary],
        width,
        label="cost / oracle's",
        color=_COLORS["oracle"],
    )
    left.axhline(1.0, color="#555", lw=0.8)
    left.axhline(1.15, color=_COLORS["oracle"], lw=0.8, ls="--")
    left.set_title("scrapy-domainstate's render-weighted cost (worst round from round 2)")
    left.set_xticks(list(xs), names, rotation=20)
    left.legend(fontsize=8)
    right.bar(list(xs), [100 * s["contacts_min"] for s in summary], 0.6, color=_COLORS["domainstate"])
    right.axhline(99.5, color="#555", lw=0.8, ls="--")
    low = min(99.0, min(100 * s["contacts_min"] for s in summary) - 0.2)
    right.set_ylim(low, 100.5)
    right.set_title("pages with contacts, % of the fixable fallback's (worst round)")
    right.set_xticks(list(xs), names, rotation=20)
    for ax in (left, right):
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
