"""A one-file HTML picture of a store: ``scrapy domainstate report -o report.html``.

:func:`summarize` reads every record once (constant memory apart from the per-day
counters and a top-N heap) into a :class:`Summary`, which the ``stats`` command
also prints; :func:`render_html` turns it into a self-contained page: inline CSS,
inline SVG charts drawn here, no JavaScript, no fonts, images or styles fetched
from anywhere (a ``Content-Security-Policy`` meta forbids it too).

What the page shows, and from what (a record keeps no full history):

* **State distribution**: each domain's state as a crawl would see it now (an
  expired state counts as the state it expires to).
* **Domains entering each state, per day**: from each record's
  ``state_changed_at`` — so only the *latest* transition of every domain is seen.
* **Outcomes per day**: from the ``recent`` entries (the last 20 observations of
  each domain), by outcome.
* **Domains that changed most**: the most *outcome switches* in ``recent`` (two
  consecutive entries with different outcomes); ties go to more distinct outcomes,
  then the most recently seen domain.

Every string that comes from the web (domains, error classes) is HTML-escaped.
"""

from __future__ import annotations

import heapq
import html
import itertools
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, TextIO

from .policy import Policy
from .record import DomainStat, Outcome, State

__all__ = ["Changed", "Summary", "render_html", "summarize", "write_report"]

DAY = 86400.0
#: Days shown by the per-day charts (the most recent ones).
WINDOW_DAYS = 60

STATE_COLORS = {
    State.UNKNOWN: "#9e9e9e",
    State.DEAD: "#455a64",
    State.ANTIBOT_SOFT: "#ffb300",
    State.ANTIBOT_HARD: "#e53935",
    State.FRIENDLY: "#43a047",
    State.COLD: "#1e88e5",
}
STATE_DECISIONS = {
    State.UNKNOWN: "probe, then fetch with browser fallback",
    State.DEAD: "skip",
    State.ANTIBOT_SOFT: "fetch, browser fallback",
    State.ANTIBOT_HARD: "browser only",
    State.FRIENDLY: "fetch only",
    State.COLD: "skip",
}
OUTCOME_COLORS = {
    Outcome.OK_CONTACT: "#43a047",
    Outcome.OK_EMPTY: "#90caf9",
    Outcome.HTTP_ERROR: "#fb8c00",
    Outcome.NETWORK_ERROR: "#8d6e63",
    Outcome.ANTIBOT: "#e53935",
    Outcome.DEAD: "#455a64",
    Outcome.NO_VERDICT: "#bdbdbd",
}


@dataclass(frozen=True, order=True)
class Changed:
    """One row of "domains that changed most" (ordered by score)."""

    switches: int
    distinct: int
    last_seen: float
    domain: str
    state: State = field(compare=False)
    state_changed_at: float = field(compare=False)
    recent: tuple[tuple[float, str, str, int | None, str | None], ...] = field(compare=False)


@dataclass
class Summary:
    """Everything the ``stats`` output and the report need, from one pass over a store."""

    now: float
    top_n: int = 25
    total: int = 0
    states: Counter[State] = field(default_factory=Counter)
    #: Records whose stored state has run out (``sweep`` would drop them).
    expired: int = 0
    expiring_24h: int = 0
    expiring_7d: int = 0
    changed_24h: int = 0
    changed_7d: int = 0
    #: (UTC day number, state) -> domains whose current state began that day.
    entered: Counter[tuple[int, State]] = field(default_factory=Counter)
    #: (UTC day number, outcome) -> observations in ``recent`` that day.
    outcomes: Counter[tuple[int, Outcome]] = field(default_factory=Counter)
    _top: list[Changed] = field(default_factory=list)

    def add(self, stat: DomainStat, policy: Policy) -> None:
        now = self.now
        self.total += 1
        if policy.is_expired(stat, now):
            self.expired += 1
        current = policy.current(stat, stat.domain, now)
        self.states[current.state] += 1
        expires = current.state_expires_at
        if expires is not None:
            if expires - now <= DAY:
                self.expiring_24h += 1
            if expires - now <= 7 * DAY:
                self.expiring_7d += 1
        if current.state_changed_at > 0:
            age = now - current.state_changed_at
            if age <= DAY:
                self.changed_24h += 1
            if age <= 7 * DAY:
                self.changed_7d += 1
            self.entered[_day(current.state_changed_at), current.state] += 1
        recent = stat.recent
        for entry in recent:
            self.outcomes[_day(entry.at), entry.outcome] += 1
        if len(recent) > 1 and self.top_n > 0:
            switches = sum(1 for a, b in itertools.pairwise(recent) if a.outcome is not b.outcome)
            if switches:
                row = Changed(
                    switches,
                    len({e.outcome for e in recent}),
                    stat.last_seen,
                    stat.domain,
                    current.state,
                    current.state_changed_at,
                    tuple((e.at, str(e.method), str(e.outcome), e.status, e.error_class) for e in recent),
                )
                if len(self._top) < self.top_n:
                    heapq.heappush(self._top, row)
                elif row > self._top[0]:
                    heapq.heapreplace(self._top, row)

    @property
    def changed_most(self) -> list[Changed]:
        return sorted(self._top, reverse=True)

    def share(self, state: State) -> float:
        return self.states[state] / self.total if self.total else 0.0


def summarize(
    records: Iterable[DomainStat],
    policy: Policy,
    now: float,
    *,
    top: int = 25,
    tick: Callable[[int], None] | None = None,
) -> Summary:
    """Read every record once; ``tick(n)`` is called after each (progress display)."""
    summary = Summary(now=now, top_n=top)
    for n, stat in enumerate(records, 1):
        summary.add(stat, policy)
        if tick is not None:
            tick(n)
    return summary


# ------------------------------------------------------------------ helpers


def _day(ts: float) -> int:
    return math.floor(ts / DAY)


def _date(day: int) -> str:
    return datetime.fromtimestamp(day * DAY, tz=timezone.utc).strftime("%Y-%m-%d")


def _when(ts: float) -> str:
    if not ts:
        return "never"
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "0.0%"


def _nice_step(value: float) -> float:
    """A whole round step (1, 2, 5 x 10^k) splitting ``value`` into about four."""
    if value <= 0:
        return 1.0
    raw = value / 4
    magnitude = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if m * magnitude >= raw:
            return float(max(1, m * magnitude))
    return 10 * magnitude  # pragma: no cover


def _fmt(n: float) -> str:
    return f"{int(n):,}" if float(n).is_integer() else f"{n:,.1f}"


# ------------------------------------------------------------------- charts


def _distribution_svg(summary: Summary) -> str:
    width, label_w, value_w, row_h = 720, 130, 150, 34
    bar_max = width - label_w - value_w
    peak = max(summary.states.values(), default=0) or 1
    height = row_h * len(State) + 8
    parts = [
        f'<svg class="chart" id="distribution-chart" role="img" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}">',
        "<title>Domains per state</title>",
    ]
    for i, state in enumerate(State):
        n = summary.states[state]
        y = 4 + i * row_h
        w = 0 if n == 0 else max(2.0, bar_max * n / peak)
        label = f"{n:,} ({_pct(n, summary.total)})"
        parts.append(
            f'<text x="{label_w - 10}" y="{y + row_h / 2 + 5:.1f}" text-anchor="end" class="lbl">{_e(state)}</text>'
            f'<rect x="{label_w}" y="{y + 5}" width="{bar_max}" height="{row_h - 10}" class="track"/>'
            f'<rect x="{label_w}" y="{y + 5}" width="{w:.1f}" height="{row_h - 10}" rx="3" '
            f'fill="{STATE_COLORS[state]}"><title>{_e(state)}: {label}</title></rect>'
            f'<text x="{label_w + w + 8:.1f}" y="{y + row_h / 2 + 5:.1f}" class="val">{label}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _window(days: Iterable[int], today: int) -> tuple[int, int]:
    known = [d for d in days if d <= today]
    first = max(min(known, default=today), today - WINDOW_DAYS + 1)
    return first, today


def _stacked_svg(
    chart_id: str,
    title: str,
    counts: Counter[tuple[int, Any]],
    series: Iterable[State] | Iterable[Outcome],
    colors: Mapping[Any, str],
    first: int,
    last: int,
) -> str:
    series = list(series)
    width, height = 760, 270
    left, right, top, bottom = 56, 12, 12, 46
    plot_w, plot_h = width - left - right, height - top - bottom
    n_days = last - first + 1
    totals = [sum(counts[d, s] for s in series) for d in range(first, last + 1)]
    peak = max(totals, default=0)
    step = _nice_step(peak)
    y_max = step * max(1, math.ceil(peak / step))
    slot = plot_w / n_days
    bar_w = max(1.0, slot * 0.78)
    parts = [
        f'<svg class="chart" id="{chart_id}" role="img" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}">',
        f"<title>{_e(title)}</title>",
    ]
    tick = 0.0
    while tick <= y_max + 1e-9:
        y = top + plot_h - plot_h * tick / y_max
        parts.append(
            f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">{_fmt(tick)}</text>'
        )
        tick += step
    label_every = max(1, math.ceil(n_days / 10))
    for i, day in enumerate(range(first, last + 1)):
        x = left + i * slot + (slot - bar_w) / 2
        y = top + plot_h
        for s in series:
            n = counts[day, s]
            if not n:
                continue
            h = plot_h * n / y_max
            y -= h
            parts.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" height="{h:.1f}" fill="{colors[s]}">'
                f"<title>{_date(day)} {_e(s)}: {n:,}</title></rect>"
            )
        if (last - day) % label_every == 0:
            cx = left + i * slot + slot / 2
            parts.append(
                f'<text x="{cx:.1f}" y="{top + plot_h + 16}" text-anchor="middle" class="tick">{_date(day)[5:]}</text>'
            )
    parts.append(
        f'<line x1="{left}" x2="{width - right}" y1="{top + plot_h}" y2="{top + plot_h}" class="axis"/>'
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 6}" text-anchor="middle" class="tick">'
        f"day (UTC), {_date(first)} to {_date(last)}</text>"
    )
    if not peak:
        parts.append(
            f'<text x="{left + plot_w / 2:.1f}" y="{top + plot_h / 2:.1f}" text-anchor="middle" class="empty">'
            "nothing in this window</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _legend(
    counts: Counter[tuple[int, Any]],
    series: Iterable[State] | Iterable[Outcome],
    colors: Mapping[Any, str],
    first: int,
    last: int,
) -> str:
    items = []
    for s in series:
        n = sum(v for (d, k), v in counts.items() if k == s and first <= d <= last)
        items.append(f'<li><span class="sw" style="background:{colors[s]}"></span>{_e(s)} <b>{n:,}</b></li>')
    return f'<ul class="legend">{"".join(items)}</ul>'


# --------------------------------------------------------------------- page

_CSS = """
:root{color-scheme:light;--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;--bg:#fff;--card:#f6f8fa}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);
font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:980px;margin:0 auto;padding:24px 28px 48px}
h1{font-size:26px;margin:0 0 4px}h2{font-size:20px;margin:36px 0 8px;border-bottom:1px solid var(--line);
padding-bottom:4px}h3{font-size:16px;margin:24px 0 6px}
.meta,.note{color:var(--muted);margin:4px 0 12px}.note{font-size:14px;max-width:760px}
code{font:13px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:var(--card);padding:1px 4px;
border-radius:4px}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:16px 0}
.card{flex:1 1 0;background:var(--card);border:1px solid var(--line);border-radius:8px;padding:10px 14px;
min-width:120px}
.card b{display:block;font-size:22px}.card span{color:var(--muted);font-size:13px}
table{border-collapse:collapse;width:100%;margin:8px 0;font-size:14px}
th,td{text-align:left;padding:6px 10px;border-bottom:1px solid var(--line);vertical-align:middle}
th{background:var(--card);font-weight:600}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
td.when{white-space:nowrap}td.domain{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;word-break:break-all}
.badge{display:inline-block;white-space:nowrap;padding:1px 8px;border-radius:10px;color:#fff;font-size:12px;font-weight:600}
.badge.light{color:#1f2328}
.sw{display:inline-block;width:12px;height:12px;border-radius:3px;margin-right:6px;vertical-align:-1px}
.dot{display:inline-block;width:10px;height:14px;border-radius:2px;margin-right:2px;vertical-align:middle}
.legend{list-style:none;display:flex;flex-wrap:wrap;gap:6px 18px;padding:0;margin:4px 0 8px;font-size:14px}
svg.chart{max-width:100%;height:auto;display:block}
svg .lbl{font-size:14px;fill:#1f2328}svg .val{font-size:13px;fill:#59636e}
svg .tick{font-size:11px;fill:#59636e}svg .empty{font-size:14px;fill:#8c959f}
svg .grid{stroke:#eaeef2;stroke-width:1}svg .axis{stroke:#8c959f;stroke-width:1}svg .track{fill:#f6f8fa}
footer{margin-top:40px;color:var(--muted);font-size:13px}
"""

_LIGHT_BADGES = {State.ANTIBOT_SOFT}


def _badge(state: State) -> str:
    cls = "badge light" if state in _LIGHT_BADGES else "badge"
    return f'<span class="{cls}" style="background:{STATE_COLORS[state]}">{_e(state)}</span>'


def _state_table(summary: Summary) -> str:
    rows = []
    for state in State:
        n = summary.states[state]
        rows.append(
            f'<tr data-state="{_e(state)}"><td>{_badge(state)}</td><td class="num count">{n:,}</td>'
            f'<td class="num">{_pct(n, summary.total)}</td><td>{_e(STATE_DECISIONS[state])}</td></tr>'
        )
    return (
        '<table id="states"><thead><tr><th>State</th><th class="num">Domains</th><th class="num">Share</th>'
        f"<th>Decision</th></tr></thead><tbody>{''.join(rows)}</tbody>"
        f'<tfoot><tr><th>total</th><th class="num">{summary.total:,}</th><th class="num">100%</th><th></th>'
        "</tr></tfoot></table>"
    )


def _changed_table(summary: Summary) -> str:
    rows = summary.changed_most
    if not rows:
        return '<p class="note">No domain has two different outcomes in its recent history yet.</p>'
    out = []
    for rank, row in enumerate(rows, 1):
        dots = "".join(
            f'<span class="dot" style="background:{OUTCOME_COLORS[Outcome(outcome)]}" '
            f'title="{_e(_when(at))} {_e(method)} {_e(outcome)}'
            f'{" " + str(status) if status else ""}{" " + _e(error) if error else ""}"></span>'
            for at, method, outcome, status, error in row.recent
        )
        out.append(
            f'<tr><td class="num">{rank}</td><td class="domain">{_e(row.domain)}</td><td>{_badge(row.state)}</td>'
            f'<td class="num">{row.switches}</td><td class="num">{row.distinct}</td><td>{dots}</td>'
            f'<td class="when">{_e(_when(row.last_seen))}</td></tr>'
        )
    return (
        '<table id="changed-table"><thead><tr><th class="num">#</th><th>Domain</th><th>State now</th>'
        '<th class="num">Outcome switches</th><th class="num">Distinct outcomes</th>'
        "<th>Recent outcomes (oldest first)</th><th>Last seen</th></tr></thead>"
        f"<tbody>{''.join(out)}</tbody></table>"
    )


def render_html(summary: Summary, *, source: str = "", title: str = "Domain state report") -> str:
    """The whole page as a string (UTF-8, no external resource)."""
    today = _day(summary.now)
    e_first, e_last = _window((d for d, _ in summary.entered), today)
    o_first, o_last = _window((d for d, _ in summary.outcomes), today)
    earlier = sum(v for (d, _), v in summary.entered.items() if d < e_first)
    earlier_note = (
        f" {earlier:,} domains entered their state before {_date(e_first)} and are not drawn." if earlier else ""
    )
    cards = [
        (f"{summary.total:,}", "domains"),
        (f"{summary.changed_24h:,}", "state changes, last 24 h"),
        (f"{summary.changed_7d:,}", "state changes, last 7 days"),
        (f"{summary.expiring_24h:,}", "expire within 24 h"),
        (f"{summary.expiring_7d:,}", "expire within 7 days"),
        (f"{summary.expired:,}", "expired, not yet swept"),
    ]
    card_html = "".join(f'<div class="card"><b>{v}</b><span>{_e(k)}</span></div>' for v, k in cards)
    source_html = f"Store <code>{_e(source)}</code> · " if source else ""
    legend_states = _legend(summary.entered, State, STATE_COLORS, e_first, e_last)
    outcome_series = [o for o in Outcome if o is not Outcome.NO_VERDICT]
    legend_outcomes = _legend(summary.outcomes, outcome_series, OUTCOME_COLORS, o_first, o_last)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="scrapy-domainstate">
<title>{_e(title)}</title>
<style>{_CSS}</style>
</head>
<body>
<main>
<h1>{_e(title)}</h1>
<p class="meta">{source_html}generated {_e(_when(summary.now))}</p>
<div class="cards">{card_html}</div>

<section id="distribution">
<h2>State distribution</h2>
<p class="note">Each domain's state as a crawl would see it now: a state whose TTL has run out counts as the
state it expires to, even before <code>scrapy domainstate sweep</code> drops the record.</p>
{_distribution_svg(summary)}
{_state_table(summary)}
</section>

<section id="transitions">
<h2>Transitions over time</h2>
<p class="note">A record keeps only the time of its <em>latest</em> state change, so this chart counts, per
day (UTC), the domains whose current state began that day, by that state. Earlier transitions of the same
domain are not stored and not shown.{_e(earlier_note)}</p>
<h3>Domains entering each state, per day</h3>
{_stacked_svg("entered-chart", "Domains entering each state per day", summary.entered, State, STATE_COLORS, e_first, e_last)}
{legend_states}
<h3>Outcomes per day</h3>
<p class="note">Every observation still in the domains' recent histories (the last entries of each domain,
oldest dropped first), by day and outcome. Older observations have been dropped from the records.</p>
{_stacked_svg("outcomes-chart", "Outcomes per day", summary.outcomes, outcome_series, OUTCOME_COLORS, o_first, o_last)}
{legend_outcomes}
</section>

<section id="changed">
<h2>Domains that changed most</h2>
<p class="note">Ranked by <b>outcome switches</b>: how many times two consecutive observations in a domain's
recent history have different outcomes (a site that flips between working, empty, blocked and failing is the
one to look at). Ties go to more distinct outcomes, then to the most recently seen domain. Top
{summary.top_n}; hover a square for the observation.</p>
{_changed_table(summary)}
</section>

<footer>scrapy-domainstate · this page is self-contained: it loads nothing from the network.</footer>
</main>
</body>
</html>
"""


def write_report(
    records: Iterable[DomainStat],
    fh: TextIO,
    policy: Policy,
    now: float,
    *,
    source: str = "",
    top: int = 25,
    tick: Callable[[int], None] | None = None,
) -> Summary:
    """Summarise ``records`` and write the page to ``fh``; returns the summary."""
    summary = summarize(records, policy, now, top=top, tick=tick)
    fh.write(render_html(summary, source=source))
    return summary
