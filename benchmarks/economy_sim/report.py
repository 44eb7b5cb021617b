"""The result of a run: rows per round, the issue's targets, and their text report."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["BY_KIND", "LABELS", "METRICS", "POLICIES", "TARGETS", "assemble", "evaluate_targets", "format_report"]

POLICIES = ("plain", "fallback", "fixable", "browser", "domainstate", "oracle")
LABELS = {
    "plain": "plain fetch",
    "fallback": "fetch + fallback",
    "fixable": "fixable fallback",
    "browser": "browser always",
    "domainstate": "scrapy-domainstate",
    "oracle": "oracle",
}
METRICS = ("requests", "renders", "heads", "robots", "contacts", "sites", "lost", "gained")
#: Policies with a per-kind breakdown.
BY_KIND = ("fallback", "fixable", "domainstate", "oracle")

#: The targets of issue 20: (key, label, compared with, limit, floor?, rounds: "all" | "first" |
#: "later", applies to: "all" | "live" | "decayed"). A decayed list (at least
#: :data:`DECAYED_SHARE` of its hosts dead by the last round) is held to 0.90x the fixable
#: fallback's cost instead of the oracle bound: the oracle's edge there is knowledge no visit has.
TARGETS = (
    ("contacts", "pages with contacts >= 99.5% of the fixable fallback's", "fixable", 0.995, True, "all", "all"),
    ("sites", "sites with contacts >= 99.8% of the fixable fallback's", "fixable", 0.998, True, "all", "all"),
    (
        "cost_round1",
        "round 1 render-weighted cost <= 1.03x the fixable fallback's",
        "fixable",
        1.03,
        False,
        "first",
        "all",
    ),
    ("cost_fixable", "render-weighted cost <= the fixable fallback's", "fixable", 1.0, False, "later", "all"),
    ("cost_oracle", "render-weighted cost <= 1.10x the oracle's", "oracle", 1.10, False, "later", "live"),
    (
        "cost_decayed",
        "render-weighted cost <= 0.90x the fixable fallback's (decayed list)",
        "fixable",
        0.90,
        False,
        "later",
        "decayed",
    ),
)
#: A list with at least this share of dead hosts (by the last round) is a decayed one.
DECAYED_SHARE = 0.35
#: Which metric of the rows a target compares.
_METRIC = {
    "contacts": "contacts",
    "sites": "sites",
    "cost_oracle": "cost",
    "cost_fixable": "cost",
    "cost_decayed": "cost",
    "cost_round1": "cost",
}


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def _with_ratios(row: Mapping[str, int], render_cost: float, head_cost: float = 1.0) -> dict[str, Any]:
    out: dict[str, Any] = dict(row)
    # (a HEAD is one of the requests; ``head_cost`` prices it in GETs)
    out["cost"] = row["requests"] - (1.0 - head_cost) * row.get("heads", 0) + (render_cost - 1.0) * row["renders"]
    out["requests_per_contact"] = _ratio(row["requests"], row["contacts"])
    out["renders_per_contact"] = _ratio(row["renders"], row["contacts"])
    out["cost_per_contact"] = _ratio(out["cost"], row["contacts"])
    return out


def assemble(kind_names: list[str], kinds: list[int], per_round: list[Any], params: dict[str, Any]) -> dict[str, Any]:
    """The JSON-able result of a run (``per_round``: the rounds' counts)."""
    render_cost = params["render_cost"]
    head_cost = params.get("head_cost", 1.0)
    total = {p: dict.fromkeys(METRICS, 0) for p in POLICIES}
    rows = [r.policies for r in per_round]
    for r in rows:
        for p in POLICIES:
            for m in METRICS:
                total[p][m] += r[p][m]
    population: dict[str, int] = dict.fromkeys(kind_names, 0)
    for k in kinds:
        population[kind_names[k]] += 1
    by_kind = [
        {
            p: {
                kind_names[k]: dict(zip(("requests", "renders", "contacts", "sites"), v, strict=True))
                for k, v in enumerate(t)
            }
            for p, t in r.by_kind.items()
        }
        for r in per_round
    ]
    result = {
        "params": params,
        "population": population,
        "rounds": [{p: _with_ratios(r[p], render_cost, head_cost) for p in POLICIES} for r in rows],
        "total": {p: _with_ratios(total[p], render_cost, head_cost) for p in POLICIES},
        "by_kind": by_kind,
        "decisions": [dict(sorted((str(d), n) for d, n in r.decisions.items())) for r in per_round],
        "states": [dict(sorted((f"{kind_names[k]}|{s}", n) for (k, s), n in r.states.items())) for r in per_round],
        "losses": [_losses(kind_names, r.losses) for r in per_round],
        "fixable_losses": [_losses(kind_names, r.fixable_losses) for r in per_round],
    }
    result["targets"] = evaluate_targets(result)
    return result


def _losses(kind_names: list[str], losses: Mapping[tuple[int, Any, Any], int]) -> dict[str, int]:
    """``kind|decision|state -> pages``, largest first."""
    named = ((f"{kind_names[k]}|{d}|{s}", n) for (k, d, s), n in losses.items())
    return dict(sorted(named, key=lambda kv: (-kv[1], kv[0])))


def _target_rounds(scope: str, n: int) -> list[int]:
    if scope == "first":
        return [1]
    if scope == "later":
        return list(range(2, n + 1))
    return list(range(1, n + 1))


def _target_value(row: Mapping[str, Any], metric: str, other: str, floor: bool) -> float:
    mine, base = row["domainstate"][metric], row[other][metric]
    if base:
        return mine / base
    # nothing to compare with: zero of zero meets a floor and a cap; more than zero misses a cap
    return 1.0 if (floor or not mine) else math.inf


def evaluate_targets(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every target with its value per round; ``met`` is None when no round applies (one-round runs)."""
    rows = result["rounds"]
    decayed = result.get("params", {}).get("dead_share", 0.0) >= DECAYED_SHARE
    out = []
    for key, label, other, limit, floor, scope, applies in TARGETS:
        if applies != "all" and (applies == "decayed") != decayed:
            continue
        rounds = _target_rounds(scope, len(rows))
        values = [_target_value(rows[r - 1], _METRIC[key], other, floor) for r in rounds]
        if not values:
            met = None
        elif floor:
            met = all(v >= limit for v in values)
        else:
            met = all(v <= limit - 1e-12 or math.isclose(v, limit) for v in values)
        out.append({"target": key, "label": label, "limit": limit, "rounds": rounds, "values": values, "met": met})
    return out


# ------------------------------------------------------------------ text


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _row_cells(label: str, policy: str, r: Mapping[str, Any]) -> tuple[str, ...]:
    return (
        label,
        LABELS[policy],
        f"{r['requests']:,}",
        f"{r['renders']:,}",
        f"{r['cost']:,.0f}",
        f"{r['contacts']:,}",
        f"{r['sites']:,}",
        _fmt(r["requests_per_contact"]),
        _fmt(r["cost_per_contact"]),
        f"{r['lost']:,}",
    )


def _table(result: Mapping[str, Any]) -> list[str]:
    head = (
        "round",
        "policy",
        "requests",
        "renders",
        "cost",
        "contacts",
        "sites",
        "req/contact",
        "cost/contact",
        "lost",
    )
    body: list[tuple[str, ...] | None] = []
    labelled = [(str(i + 1), row) for i, row in enumerate(result["rounds"])] + [("total", result["total"])]
    for label, row in labelled:
        for j, p in enumerate(POLICIES):
            body.append(_row_cells(label if j == 0 else "", p, row[p]))
        body.append(None)
    widths = [max(len(head[i]), *(len(b[i]) for b in body if b)) for i in range(len(head))]

    def fmt(cells: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    lines = [fmt(head), "  ".join("-" * w for w in widths)]
    lines += ["" if b is None else fmt(b) for b in body[:-1]]
    return lines


def _fmt_target_value(key: str, value: float) -> str:
    if key in ("contacts", "sites"):
        return f"{value:.2%}"
    return "inf" if math.isinf(value) else f"{value:.3f}x"


def target_lines(result: Mapping[str, Any]) -> list[str]:
    lines = ["Targets for scrapy-domainstate (met / MISSED, with the figure per round):"]
    for t in result["targets"]:
        if t["met"] is None:
            lines.append(f"  [n/a] {t['label']}: needs a second round")
            continue
        values = ", ".join(
            f"r{r} {_fmt_target_value(t['target'], v)}" for r, v in zip(t["rounds"], t["values"], strict=True)
        )
        lines.append(f"  [{'met' if t['met'] else 'MISSED'}] {t['label']}: {values}")
    return lines


def format_report(result: Mapping[str, Any], by_kind: bool = False) -> str:
    """The table and the targets, as plain text."""
    p = result["params"]
    overrides = ", ".join(f"{k}={v}" for k, v in p["overrides"].items()) or "plugin defaults"
    lines = [
        f"Crawl economy: {p['sites']:,} sites ({p['registered_domains']:,} registered domains), "
        f"{p['rounds']} rounds {p['days_between']:g} days apart, seed {p['seed']}, mix {p['mix']}, "
        f"store {p['store']}, {overrides}",
        f"requests: HEAD + GET + renders + robots.txt (a render is also a request); cost: requests with a render "
        f"weighing {p['render_cost']:g}; {p['concurrency']} requests per host in flight; robots.txt "
        f"{'obeyed' if p['robotstxt_obey'] else 'not fetched'}; sites: hosts with at least one contact found; "
        "lost: contacts fetch+fallback finds and the policy does not",
        "",
        *_table(result),
        "",
        *target_lines(result),
    ]
    if "runtime" in result:
        rt = result["runtime"]
        lines += ["", f"Simulated in {rt['seconds']:.1f} s ({rt['cpu_seconds']:.1f} s of CPU, one core)."]
    if by_kind:
        lines += ["", *kind_lines(result)]
    return "\n".join(lines)


def _kind_cells(cell: Mapping[str, int], render_cost: float) -> str:
    cost = cell["requests"] + (render_cost - 1) * cell["renders"]
    return f"{cell['requests']:>9,} {cell['renders']:>8,} {cost:>10,.0f} {cell['contacts']:>8,} {cell['sites']:>7,}"


def kind_lines(result: Mapping[str, Any]) -> list[str]:
    """Per true kind: requests, renders, cost, contacts, sites of fixable | domainstate | oracle."""
    rc = result["params"]["render_cost"]
    lines = ["Per kind (requests / renders / cost / contacts / sites): fixable fallback | scrapy-domainstate | oracle"]
    pop = result["population"]
    for i, row in enumerate(result["by_kind"]):
        lines.append(f"round {i + 1}")
        for kind, n in pop.items():
            cells = " | ".join(_kind_cells(row[p][kind], rc) for p in ("fixable", "domainstate", "oracle"))
            lines.append(f"  {kind:<14} {n:>7,}  {cells}")
        states = result["states"][i]
        lines.append(
            "  state at a host's first request (kind|state: hosts): "
            + ", ".join(f"{k}: {v:,}" for k, v in states.items())
        )
        for key, label in (("fixable_losses", "the fixable fallback"), ("losses", "fetch + fallback")):
            losses = result[key][i]
            lines.append(
                f"  pages with contacts {label} finds and scrapy-domainstate does not, by kind|decision|state: "
                + (", ".join(f"{k}: {v:,}" for k, v in losses.items()) or "none")
            )
    return lines
