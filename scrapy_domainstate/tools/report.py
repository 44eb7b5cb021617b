"""A one-file HTML picture of a store: ``scrapy domainstate report -o report.html``.

:func:`summarize` reads every record once (constant memory apart from the per-day
counters and a top-N heap) into a :class:`Summary`, which the ``stats`` command
also prints; :func:`render_html` turns it into a self-contained page: inline CSS,
inline SVG charts drawn here, one small inline script (the search and state filter
of the domain table; the page reads fine without it), no fonts, images, scripts or
styles fetched from anywhere (a ``Content-Security-Policy`` meta forbids it too, and
allows only that script, by its hash).

What the page shows, and from what (a record keeps no full history):

* **State distribution**: each domain's state as a crawl would see it now (an
  expired state counts as the state it expires to).
* **Domains entering each state, per day** (per hour when everything happened in
  the last two days): from each record's ``state_changed_at`` — so only the
  *latest* transition of every domain is seen.
* **Outcomes per day**: from the ``recent`` entries (the last 20 observations of
  each domain), by outcome.
* **What it saved, crawl by crawl**: the summaries crawls append to the store's crawl
  log at close (:mod:`scrapy_domainstate.tools.crawllog`).
* **Domains per state, and why**: every domain's reason for its state, from the latest
  observation that explains it (``refused``, ``http:404``, the anti-bot vendor, ...).
* **All domains**: a table to search and filter by state (the most recently seen
  :data:`TABLE_ROWS` domains).
* **Domains that changed most**: the most *outcome switches* in ``recent`` (two
  consecutive entries with different outcomes); ties go to more distinct outcomes,
  then the most recently seen domain.

Every string that comes from the web (domains, error classes) is HTML-escaped.
"""

from __future__ import annotations

import base64
import hashlib
import heapq
import html
import itertools
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, TextIO

from scrapy_domainstate.core.clock import DAY, HOUR, MINUTE
from scrapy_domainstate.core.keys import part_of
from scrapy_domainstate.core.policy import Policy, parked_service
from scrapy_domainstate.core.record import DomainStat, Outcome, RecentEntry, State
from scrapy_domainstate.tools.crawllog import CrawlSummary
from scrapy_domainstate.tools.explain import short_evidence
from scrapy_domainstate.tools.showtext import part_label, plural

__all__ = [
    "Changed",
    "DomainRow",
    "Summary",
    "part_label",
    "plural",
    "render_html",
    "state_reason",
    "summarize",
    "write_report",
]

#: Days shown by the per-day charts (the most recent ones).
WINDOW_DAYS = 60
#: When everything charted happened within this many hours, the charts have one bar per
#: hour, per 10 minutes or per minute (whichever draws several bars), not per day.
HOURLY_WINDOW = 48
#: The finer units, coarsest first, with the shortest span each is used for.
_FINE_UNITS = ((HOUR, 6 * HOUR, "hour"), (10 * MINUTE, HOUR, "10 minutes"), (MINUTE, 0.0, "minute"))
#: Rows of the searchable domain table (the most recently seen domains).
TABLE_ROWS = 5000
#: Example domains shown per reason in the per-state lists.
EXAMPLES = 8

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
    Outcome.NAVIGATION: "#c5e1a5",
    Outcome.PARKED: "#ab47bc",
}


def _antibot_reason(entry: RecentEntry) -> str:
    evidence = entry.error_class or ""
    parts = evidence.split(":")
    if len(parts) >= 2 and parts[1]:
        kind = "block" if parts[0] == "block" else parts[0] or "challenge"
        detail = f" {parts[2]}" if kind == "block" and len(parts) > 2 and parts[2].isdigit() else ""
        return f"{parts[1]} {kind}{detail}"
    if entry.status == 429:
        return "rate limit (429)"
    return evidence or (f"http:{entry.status}" if entry.status else "antibot")


def antibot_evidence(stat: DomainStat, current: DomainStat) -> str:
    """An anti-bot domain's evidence in one short line: its latest anti-bot observation
    (``GET 403 challenge:cloudflare:cf-mitigated, 2026-...``); ``''`` for other states.
    ``scrapy domainstate explain DOMAIN`` tells the whole story."""
    if current.state not in (State.ANTIBOT_SOFT, State.ANTIBOT_HARD) or current.state is not stat.state:
        return ""
    entry = next((e for e in reversed(stat.recent) if e.outcome is Outcome.ANTIBOT), None)
    return "" if entry is None else short_evidence(entry)


#: Outcomes that can send a domain to ``dead``.
_DEAD_SIGNALS = frozenset({Outcome.DEAD, Outcome.PARKED})


def state_reason(stat: DomainStat, current: DomainStat) -> str:
    """Why ``current`` (``stat`` with expiry applied) is in its state, in a few words.

    From the latest observation that explains the state: ``refused``, ``dns``,
    ``http:404``, ``tls:expired``, ``parked (hugedomains)`` for dead; the vendor and kind (``cloudflare
    challenge``, ``cloudflare block 1020``, ``rate limit (429)``) for anti-bot;
    how many pages were empty for cold; the share of useful fetches for friendly.
    """
    state = current.state
    if state is not stat.state:
        return f"{stat.state} expired"
    recent = stat.recent
    if state is State.DEAD:
        entry = next((e for e in reversed(recent) if e.outcome in _DEAD_SIGNALS), None)
        if entry is not None and entry.outcome is Outcome.PARKED:
            return f"parked ({parked_service(entry.error_class)})"
        return (entry.error_class or f"http:{entry.status}") if entry else "set by hand"
    if state in (State.ANTIBOT_SOFT, State.ANTIBOT_HARD):
        entry = next((e for e in reversed(recent) if e.outcome is Outcome.ANTIBOT), None)
        return _antibot_reason(entry) if entry else "set by hand"
    if state is State.COLD:
        empty = sum(1 for e in recent if e.outcome is Outcome.OK_EMPTY)
        return f"{empty} empty pages, none useful" if empty else "set by hand"
    if state is State.FRIENDLY:
        fetches = [e for e in recent if e.method == "fetch"]
        useful = sum(1 for e in fetches if e.outcome is Outcome.OK_CONTACT)
        return f"{useful} of {len(fetches)} fetches useful" if fetches else "set by hand"
    if not recent:
        return "probed, no verdict yet" if stat.probed_at else "not observed yet"
    last = recent[-1]
    detail = last.error_class or (f"http:{last.status}" if last.status and last.status >= 400 else "")
    return f"last: {last.outcome}{' ' + detail if detail else ''}"


@dataclass(frozen=True, order=True)
class DomainRow:
    """One row of the domain table (ordered by ``last_seen``)."""

    last_seen: float
    domain: str
    state: State = field(compare=False)
    reason: str = field(compare=False)
    since: float = field(compare=False)
    expires: float | None = field(compare=False)
    fetches: int = field(compare=False)
    useful: int = field(compare=False)
    renders: int = field(compare=False)
    #: ``(domain, relation)`` for a host's own facts or a purpose's record (:func:`~.keys.part_of`)
    part_of: tuple[str, str] | None = field(default=None, compare=False)
    #: an anti-bot domain's evidence: its latest anti-bot observation (:func:`antibot_evidence`)
    evidence: str = field(default="", compare=False)

    @property
    def label(self) -> str:
        """The key, and what it is part of: ``blog.example.com (host of example.com)``."""
        return self.domain if self.part_of is None else f"{self.domain} ({part_label(self.part_of)})"


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
    #: The same per minute (UTC minute number), for the last :data:`HOURLY_WINDOW` hours.
    entered_minutes: Counter[tuple[int, State]] = field(default_factory=Counter)
    outcomes_minutes: Counter[tuple[int, Outcome]] = field(default_factory=Counter)
    #: (state, reason) -> domains; and a few example domains of each.
    reasons: Counter[tuple[State, str]] = field(default_factory=Counter)
    examples: dict[tuple[State, str], list[str]] = field(default_factory=dict)
    table_rows: int = TABLE_ROWS
    #: keys are hostnames (``DOMAINSTATE_PER_HOSTNAME``): no record is part of another's
    per_hostname: bool = False
    #: records that are part of a domain (hosts' own facts, purposes' records), by relation;
    #: not in :attr:`total` nor :attr:`states`, which count domains
    parts: Counter[str] = field(default_factory=Counter)
    _top: list[Changed] = field(default_factory=list)
    _rows: list[DomainRow] = field(default_factory=list)

    def add(self, stat: DomainStat, policy: Policy) -> None:
        now = self.now
        current = policy.current(stat, stat.domain, now)
        reason = state_reason(stat, current)
        part = part_of(stat.domain, self.per_hostname)
        first_minute = _minute(now) - int(HOURLY_WINDOW * HOUR / MINUTE) + 1
        if part is None:
            self._add_domain(stat, current, reason, policy, first_minute)
        else:
            self.parts["host" if part[1] == "host" else "purpose"] += 1
        if self.table_rows > 0:
            self._add_row(stat, current, reason, part)
        recent = stat.recent
        for entry in recent:
            self.outcomes[_day(entry.at), entry.outcome] += 1
            minute = _minute(entry.at)
            if minute >= first_minute:
                self.outcomes_minutes[minute, entry.outcome] += 1
        if len(recent) > 1 and self.top_n > 0:
            switches = sum(1 for a, b in itertools.pairwise(recent) if a.outcome is not b.outcome)
            if switches:
                changed = Changed(
                    switches,
                    len({e.outcome for e in recent}),
                    stat.last_seen,
                    stat.domain,
                    current.state,
                    current.state_changed_at,
                    tuple((e.at, str(e.method), str(e.outcome), e.status, e.error_class) for e in recent),
                )
                if len(self._top) < self.top_n:
                    heapq.heappush(self._top, changed)
                elif changed > self._top[0]:
                    heapq.heapreplace(self._top, changed)

    def _add_domain(
        self, stat: DomainStat, current: DomainStat, reason: str, policy: Policy, first_minute: int
    ) -> None:
        """Count a domain's own record: its state, its reason, its coming expiry."""
        self.total += 1
        if policy.is_expired(stat, self.now):
            self.expired += 1
        self.states[current.state] += 1
        self.reasons[current.state, reason] += 1
        examples = self.examples.setdefault((current.state, reason), [])
        if len(examples) < EXAMPLES:
            examples.append(stat.domain)
        self._add_times(current, first_minute)

    def _add_row(self, stat: DomainStat, current: DomainStat, reason: str, part: tuple[str, str] | None) -> None:
        """Keep the record in the domain table if it is among the most recently seen."""
        row = DomainRow(
            stat.last_seen,
            stat.domain,
            current.state,
            reason,
            current.state_changed_at,
            current.state_expires_at,
            stat.fetch_total,
            stat.fetch_ok + stat.tab_ok,
            stat.tab_total,
            part,
            antibot_evidence(stat, current),
        )
        if len(self._rows) < self.table_rows:
            heapq.heappush(self._rows, row)
        elif row > self._rows[0]:
            heapq.heapreplace(self._rows, row)

    def _add_times(self, current: DomainStat, first_minute: int) -> None:
        """Count the record's coming expiry and its last state change."""
        now = self.now
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
            minute = _minute(current.state_changed_at)
            if minute >= first_minute:
                self.entered_minutes[minute, current.state] += 1

    @property
    def changed_most(self) -> list[Changed]:
        return sorted(self._top, reverse=True)

    @property
    def rows(self) -> list[DomainRow]:
        """The domain table: the most recently seen first."""
        return sorted(self._rows, reverse=True)

    def share(self, state: State) -> float:
        return self.states[state] / self.total if self.total else 0.0


def summarize(
    records: Iterable[DomainStat],
    policy: Policy,
    now: float,
    *,
    top: int = 25,
    rows: int = TABLE_ROWS,
    tick: Callable[[int], None] | None = None,
) -> Summary:
    """Read every record once; ``tick(n)`` is called after each (progress display)."""
    summary = Summary(now=now, top_n=top, table_rows=rows, per_hostname=policy.config.per_hostname)
    for n, stat in enumerate(records, 1):
        summary.add(stat, policy)
        if tick is not None:
            tick(n)
    return summary


# ------------------------------------------------------------------ helpers


def _day(ts: float) -> int:
    return math.floor(ts / DAY)


def _minute(ts: float) -> int:
    return math.floor(ts / MINUTE)


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


@dataclass(frozen=True)
class _Bins:
    """The x axis of a chart: bin numbers ``first..last`` of ``unit`` seconds (a day or less)."""

    counts: Counter[tuple[int, Any]]
    first: int
    last: int
    unit: float
    name: str = "day"

    @property
    def fine(self) -> bool:
        return self.unit < DAY

    def label(self, n: int) -> str:
        """Tooltip label of a bin."""
        if self.fine:
            return datetime.fromtimestamp(n * self.unit, tz=timezone.utc).strftime("%Y-%m-%d %H:%M")
        return _date(n)

    def tick(self, n: int) -> str:
        """Axis label of a bin."""
        if self.fine:
            return datetime.fromtimestamp(n * self.unit, tz=timezone.utc).strftime("%H:%M")
        return _date(n)[5:]

    def caption(self) -> str:
        if self.fine:
            return f"{self.name} (UTC), {self.label(self.first)} to {self.label(self.last)}"
        return f"day (UTC), {_date(self.first)} to {_date(self.last)}"


def _bins(per_day: Counter[tuple[int, Any]], per_minute: Counter[tuple[int, Any]], now: float) -> _Bins:
    """Per day; or, when everything in ``per_day`` happened in the last :data:`HOURLY_WINDOW`
    hours, per hour, 10 minutes or minute, the coarsest that spreads it over several bars
    (a crawl or two run today would otherwise draw one single bar)."""
    in_window = sum(per_minute.values())
    if in_window and in_window == sum(per_day.values()):
        first_minute = min(m for m, _ in per_minute)
        span = now - first_minute * MINUTE
        for unit, shortest, name in _FINE_UNITS:
            if span >= shortest:
                ratio = int(unit / MINUTE)
                counts: Counter[tuple[int, Any]] = Counter()
                for (m, series), n in per_minute.items():
                    counts[m // ratio, series] += n
                return _Bins(counts, first_minute // ratio, math.floor(now / unit), unit, name)
    first, last = _window((d for d, _ in per_day), _day(now))
    return _Bins(per_day, first, last, DAY)


def _stacked_svg(
    chart_id: str,
    title: str,
    bins: _Bins,
    series: Iterable[State] | Iterable[Outcome],
    colors: Mapping[Any, str],
) -> str:
    names: list[Any] = list(series)
    counts, first, last = bins.counts, bins.first, bins.last
    width, height = 760, 270
    left, right, top, bottom = 56, 12, 12, 46
    plot_w, plot_h = width - left - right, height - top - bottom
    n_bins = last - first + 1
    totals = [sum(counts[d, s] for s in names) for d in range(first, last + 1)]
    peak = max(totals, default=0)
    step = _nice_step(peak)
    y_max = step * max(1, math.ceil(peak / step))
    slot = plot_w / n_bins
    # A lone bar is not a chart: never wider than a tenth of the plot.
    bar_w = max(1.0, min(slot * 0.78, plot_w / 10))
    parts = [
        f'<svg class="chart" id="{chart_id}" role="img" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" data-bins="{n_bins}" data-unit="{bins.name}">',
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
    label_every = max(1, math.ceil(n_bins / (8 if bins.fine else 10)))
    for i, n_bin in enumerate(range(first, last + 1)):
        x = left + i * slot + (slot - bar_w) / 2
        y = top + plot_h
        for s in names:
            n = counts[n_bin, s]
            if not n:
                continue
            h = plot_h * n / y_max
            y -= h
            parts.append(
                f'<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" height="{h:.1f}" fill="{colors[s]}">'
                f"<title>{bins.label(n_bin)} {_e(s)}: {n:,}</title></rect>"
            )
        if (last - n_bin) % label_every == 0:
            cx = left + i * slot + slot / 2
            parts.append(
                f'<text x="{cx:.1f}" y="{top + plot_h + 16}" text-anchor="middle" class="tick">{bins.tick(n_bin)}</text>'
            )
    parts.append(
        f'<line x1="{left}" x2="{width - right}" y1="{top + plot_h}" y2="{top + plot_h}" class="axis"/>'
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 6}" text-anchor="middle" class="tick">'
        f"{_e(bins.caption())}</text>"
    )
    if not peak:
        parts.append(
            f'<text x="{left + plot_w / 2:.1f}" y="{top + plot_h / 2:.1f}" text-anchor="middle" class="empty">'
            "nothing in this window</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _legend(bins: _Bins, series: Iterable[State] | Iterable[Outcome], colors: Mapping[Any, str]) -> str:
    items = []
    for s in series:
        n = sum(v for (d, k), v in bins.counts.items() if k == s and bins.first <= d <= bins.last)
        items.append(f'<li><span class="sw" style="background:{colors[s]}"></span>{_e(s)} <b>{n:,}</b></li>')
    return f'<ul class="legend">{"".join(items)}</ul>'


# --------------------------------------------------------------------- page

_CSS = """
:root{color-scheme:light;--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;--bg:#fff;--card:#f6f8fa}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);
font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1800px;margin:0 auto;padding:24px 28px 48px}
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
td.when{white-space:nowrap}
td.domain,.examples{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;word-break:normal;overflow-wrap:normal;
hyphens:none}
td.domain{min-width:14em}.part{font-size:12px;color:var(--muted);font-family:system-ui,sans-serif}
td.reason{white-space:nowrap}details.more[open]{white-space:normal;min-width:22em}details.more summary{cursor:pointer;list-style:none}
details.more summary::-webkit-details-marker{display:none}details.more[open] summary{display:none}.examples{font-size:13px;color:var(--muted)}
td.evidence{white-space:normal}
.filters{display:flex;flex-wrap:wrap;gap:8px 16px;align-items:center;margin:8px 0}
.filters input,.filters select{font:inherit;padding:4px 8px;border:1px solid var(--line);border-radius:6px}
.filters input{min-width:260px}
details.state{margin:6px 0;border:1px solid var(--line);border-radius:8px;padding:4px 12px}
details.state summary{cursor:pointer;padding:4px 0}
.saved b{color:#1a7f37}.scroll{overflow-x:auto}
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
            f'<tr><td class="num">{rank}</td><td class="domain">{_domain(row.domain)}</td><td>{_badge(row.state)}</td>'
            f'<td class="num">{row.switches}</td><td class="num">{row.distinct}</td><td>{dots}</td>'
            f'<td class="when">{_e(_when(row.last_seen))}</td></tr>'
        )
    return (
        '<table id="changed-table"><thead><tr><th class="num">#</th><th>Domain</th><th>State now</th>'
        '<th class="num">Outcome switches</th><th class="num">Distinct outcomes</th>'
        "<th>Recent outcomes (oldest first)</th><th>Last seen</th></tr></thead>"
        f"<tbody>{''.join(out)}</tbody></table>"
    )


def _finish(crawl: CrawlSummary) -> str:
    """The finish reason, and what the crawl learned about being polite: ``finished; 2 slots
    slowed, 1 host paused; blocked``."""
    notes = [
        plural(crawl.slowed, "slot") + " slowed" if crawl.slowed else "",
        plural(crawl.paused, "host") + " paused" if crawl.paused else "",
        "blocked (most responses were walls)" if crawl.blocked else "",
    ]
    return "; ".join([crawl.finish_reason, *(n for n in notes if n)])


#: Reasons longer than this are cut in the tables, the whole text shown on hover and on click.
SHORT_REASON = 36


def _reason(text: str) -> str:
    """A reason in a few words; a longer one in full on demand (``<details>``, and the title)."""
    if len(text) <= SHORT_REASON:
        return _e(text)
    short = text[:SHORT_REASON].rsplit(" ", 1)[0].rstrip(" ,;:(") + "…"
    return f'<details class="more" title="{_e(text)}"><summary>{_e(short)}</summary>{_e(text)}</details>'


def _row_name(row: DomainRow) -> str:
    """The key; a host's facts or a purpose's record say whose part they are."""
    if row.part_of is None:
        return _domain(row.domain)
    return f'{_domain(row.domain)}<div class="part">{_e(part_label(row.part_of))}</div>'


def _domain(name: str) -> str:
    """A domain name that wraps only after its dots, never inside a label."""
    return ".<wbr>".join(_e(label) for label in name.split("."))


def _counts_text(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{_e(k)} {v:,}" for k, v in counts.items()) or "none"


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


def _saved_section(crawls: Sequence[CrawlSummary]) -> str:
    if not crawls:
        return (
            '<p class="note" id="no-crawls">No crawl summary in this store yet: every crawl with the plugin adds one '
            "when it closes.</p>"
        )
    rows = []
    for c in reversed(crawls):  # newest first
        rows.append(
            f'<tr class="crawl"><td class="when">{_e(_when(c.finished))}</td><td>{_e(c.spider)}</td>'
            f'<td class="when">{_e(_duration(c.finished - c.started))}</td>'
            f'<td class="num sent">{c.requests_sent:,}</td><td class="num">{c.probes:,}</td>'
            f'<td class="num">{c.renders:,}</td><td class="num skipped">{c.requests_skipped:,}</td>'
            f"<td>{_counts_text(c.skipped)}</td>"
            f'<td class="num saved-requests">{c.requests_saved:,}</td>'
            f'<td class="num saved-renders">{c.renders_saved:,}</td>'
            f'<td class="num">{sum(c.transitions.values()):,}</td><td>{_e(_finish(c))}</td></tr>'
        )
    total_saved = sum(c.requests_saved for c in crawls)
    total_fallback = sum(c.fallback_requests for c in crawls)
    share = (
        f" ({_pct(abs(total_saved), total_fallback)} of what fetch-with-fallback would have sent)"
        if total_fallback
        else ""
    )
    verb = "saved at least" if total_saved >= 0 else "spent more than it saved (its HEAD probes), by"
    return (
        f'<p class="saved">Over {"this crawl" if len(crawls) == 1 else f"these {len(crawls):,} crawls"} the plugin '
        f"{verb} <b>{plural(abs(total_saved), 'request')}</b>{_e(share)}, and saved "
        f"<b>{plural(sum(c.renders_saved for c in crawls), 'browser render')}</b>.</p>"
        '<div class="scroll"><table id="crawls-table"><thead><tr><th>Finished</th><th>Spider</th><th>Took</th>'
        '<th class="num">Sent</th><th class="num">Probes</th><th class="num">Renders</th>'
        '<th class="num">Skipped</th><th>Skipped, by reason</th><th class="num">Requests saved</th>'
        '<th class="num">Renders saved</th><th class="num">State changes</th><th>Finish reason</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def _reasons_section(summary: Summary) -> str:
    out = []
    for state in State:
        n = summary.states[state]
        reasons = sorted(
            ((reason, k) for (s, reason), k in summary.reasons.items() if s is state), key=lambda rk: (-rk[1], rk[0])
        )
        if not reasons:
            out.append(
                f'<details class="state" data-state="{_e(state)}"><summary>{_badge(state)} 0 domains</summary>'
                "</details>"
            )
            continue
        rows = "".join(
            f'<tr><td class="reason">{_e(reason)}</td><td class="num">{k:,}</td><td class="examples">'
            f"{', '.join(_domain(d) for d in summary.examples.get((state, reason), []))}"
            f"{' …' if k > len(summary.examples.get((state, reason), [])) else ''}</td></tr>"
            for reason, k in reasons
        )
        out.append(
            f'<details class="state" data-state="{_e(state)}" open><summary>{_badge(state)} {plural(n, "domain")} · '
            f"{_e(STATE_DECISIONS[state])}</summary>"
            '<table class="reasons"><thead><tr><th>Reason</th><th class="num">Domains</th><th>Examples</th></tr>'
            f"</thead><tbody>{rows}</tbody></table></details>"
        )
    return "".join(out)


def _anchor(domain: str) -> str:
    return "ev-" + "".join(c if c.isalnum() or c in "-." else "_" for c in domain)


def _reason_cell(row: DomainRow) -> str:
    """A row's reason; an anti-bot row's links to its evidence (:func:`_evidence_section`)."""
    if not row.evidence:
        return _reason(row.reason)
    return f'<a href="#{_anchor(row.domain)}" title="{_e(row.evidence)}">{_reason(row.reason)}</a>'


def _evidence_section(summary: Summary) -> str:
    """Each anti-bot domain of the domain table, with its latest anti-bot observation."""
    rows = [r for r in summary.rows if r.evidence]
    if not rows:
        return '<p class="note">No anti-bot domain among the domains listed.</p>'
    body = "".join(
        f'<tr id="{_anchor(r.domain)}"><td class="domain">{_row_name(r)}</td><td>{_badge(r.state)}</td>'
        f'<td class="evidence"><code>{_e(r.evidence)}</code></td>'
        f"<td><code>scrapy domainstate explain {_e(r.domain)}</code></td></tr>"
        for r in rows
    )
    return (
        '<table id="evidence-table"><thead><tr><th>Domain</th><th>State</th><th>Latest anti-bot observation</th>'
        f"<th>The whole story</th></tr></thead><tbody>{body}</tbody></table>"
    )


def _domains_section(summary: Summary) -> str:
    rows = summary.rows
    if not rows:
        return '<p class="note">No domain in this store yet.</p>'
    body = "".join(
        f'<tr data-state="{_e(r.state)}" data-search="{_e((r.label + " " + r.reason + " " + r.evidence).lower())}">'
        f'<td class="domain">{_row_name(r)}</td><td>{_badge(r.state)}</td><td class="reason">{_reason_cell(r)}</td>'
        f'<td class="when">{_e(_when(r.since))}</td>'
        f'<td class="when">{_e("no TTL" if r.expires is None else _when(r.expires))}</td>'
        f'<td class="num">{r.fetches:,}</td><td class="num">{r.useful:,}</td><td class="num">{r.renders:,}</td>'
        f'<td class="when">{_e(_when(r.last_seen))}</td></tr>'
        for r in rows
    )
    options = "".join(f'<option value="{_e(s)}">{_e(s)} ({summary.states[s]:,})</option>' for s in State)
    more = (
        f" The {len(rows):,} most recently seen of {plural(summary.total, 'domain')} are listed; "
        "<code>scrapy domainstate export</code> has them all."
        if len(rows) < summary.total
        else ""
    )
    return (
        '<div class="filters"><label>Search <input id="domain-search" type="search" '
        'placeholder="domain or reason" autocomplete="off"></label>'
        f'<label>State <select id="state-filter"><option value="">all states</option>{options}</select></label>'
        f'<span class="note">showing <b id="shown">{len(rows):,}</b> of {len(rows):,}.{more}</span></div>'
        '<div class="scroll"><table id="domains-table"><thead><tr><th>Domain</th><th>State</th><th>Reason</th><th>Since</th>'
        '<th>Expires</th><th class="num">Fetches</th><th class="num">Useful</th><th class="num">Renders</th>'
        f"<th>Last seen</th></tr></thead><tbody>{body}</tbody></table></div>"
    )


#: The domain table's search and state filter. ``#state=cold&q=shop`` in the page URL presets them.
_SCRIPT = """(function(){
var q=document.getElementById("domain-search"),s=document.getElementById("state-filter"),
n=document.getElementById("shown");if(!q||!s)return;
var rows=document.querySelectorAll("#domains-table tbody tr");
function apply(){var t=q.value.trim().toLowerCase(),st=s.value,k=0;
for(var i=0;i<rows.length;i++){var r=rows[i],ok=(!st||r.getAttribute("data-state")===st)&&
(!t||r.getAttribute("data-search").indexOf(t)>=0);r.hidden=!ok;if(ok)k++;}
n.textContent=k.toLocaleString("en");}
var h=new URLSearchParams(location.hash.slice(1));if(h.has("q"))q.value=h.get("q");
if(h.has("state"))s.value=h.get("state");
q.addEventListener("input",apply);s.addEventListener("change",apply);apply();})();"""
_SCRIPT_HASH = base64.b64encode(hashlib.sha256(_SCRIPT.encode("utf-8")).digest()).decode("ascii")


def render_html(
    summary: Summary,
    *,
    source: str = "",
    title: str = "Domain state report",
    crawls: Sequence[CrawlSummary] = (),
) -> str:
    """The whole page as a string (UTF-8, no external resource)."""
    entered = _bins(summary.entered, summary.entered_minutes, summary.now)
    outcomes = _bins(summary.outcomes, summary.outcomes_minutes, summary.now)
    earlier = 0
    if not entered.fine:
        earlier = sum(v for (d, _), v in summary.entered.items() if d < entered.first)
    earlier_note = (
        f" {plural(earlier, 'domain')} entered their state before {_date(entered.first)} and are not drawn."
        if earlier
        else ""
    )
    per, o_per = entered.name, outcomes.name
    cards = [
        (f"{summary.total:,}", "domain" if summary.total == 1 else "domains"),
        (f"{summary.changed_24h:,}", ("state change" if summary.changed_24h == 1 else "state changes") + ", last 24 h"),
        (f"{summary.changed_7d:,}", ("state change" if summary.changed_7d == 1 else "state changes") + ", last 7 days"),
        (f"{summary.expiring_24h:,}", "expire within 24 h"),
        (f"{summary.expiring_7d:,}", "expire within 7 days"),
        (f"{summary.expired:,}", "expired, not yet swept"),
    ]
    card_html = "".join(f'<div class="card"><b>{v}</b><span>{_e(k)}</span></div>' for v, k in cards)
    source_html = f"Store <code>{_e(source)}</code> · " if source else ""
    outcome_series = [o for o in Outcome if o is not Outcome.NO_VERDICT]
    csp = f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'sha256-{_SCRIPT_HASH}'"
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
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

<section id="saved">
<h2>What it saved, crawl by crawl</h2>
<p class="note">Counted against plain <em>fetch with a browser fallback</em> (a GET for every request, a browser
render after every GET that fails or is blocked): a request skipped for a <code>dead</code> or
<code>antibot-hard</code> domain or a dead URL saves a GET and a render, one skipped for a <code>cold</code>
domain saves a GET, one sent straight to the browser saves its GET, and every HEAD probe counts against.
Lower bounds: failed fetches of friendly domains, never re-issued in the browser, are not counted.</p>
{_saved_section(crawls)}
</section>

<section id="distribution">
<h2>State distribution</h2>
<p class="note">Each domain's state as a crawl would see it now: a state whose TTL has run out counts as the
state it expires to, even before <code>scrapy domainstate sweep</code> drops the record.</p>
{_distribution_svg(summary)}
{_state_table(summary)}
</section>

<section id="reasons">
<h2>Domains per state, and why</h2>
<p class="note">The reason is the latest observation that explains the state: the failure of a dead domain
(<code>refused</code>, <code>dns</code>, <code>http:404</code>, <code>tls:expired</code>), the anti-bot vendor and
kind, the empty pages of a cold one, the useful share of a friendly one.</p>
{_reasons_section(summary)}
</section>

<section id="transitions">
<h2>Transitions over time</h2>
<p class="note">A record keeps only the time of its <em>latest</em> state change, so this chart counts, per
{per} (UTC), the domains whose current state began then, by that state. Earlier transitions of the same
domain are not stored and not shown.{_e(earlier_note)}</p>
<h3>Domains entering each state, per {per}</h3>
{_stacked_svg("entered-chart", f"Domains entering each state per {per}", entered, State, STATE_COLORS)}
{_legend(entered, State, STATE_COLORS)}
<h3>Outcomes per {o_per}</h3>
<p class="note">Every observation still in the domains' recent histories (the last entries of each domain,
oldest dropped first), by {o_per} and outcome. Older observations have been
dropped from the records.</p>
{_stacked_svg("outcomes-chart", "Outcomes per " + o_per, outcomes, outcome_series, OUTCOME_COLORS)}
{_legend(outcomes, outcome_series, OUTCOME_COLORS)}
</section>

<section id="domains">
<h2>All domains</h2>
{_domains_section(summary)}
</section>

<section id="evidence">
<h2>Anti-bot domains: their evidence</h2>
<p class="note">The latest anti-bot observation of each <code>antibot-soft</code> and <code>antibot-hard</code>
domain of the table above: how it was made, its status and its evidence (<code>challenge:</code> a challenge,
<code>block:</code> a hard block; then the vendor and the marker or rule that fired). The command beside it
prints the observations that moved the domain and what would change its state.</p>
{_evidence_section(summary)}
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
<script>{_SCRIPT}</script>
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
    rows: int = TABLE_ROWS,
    crawls: Sequence[CrawlSummary] = (),
    tick: Callable[[int], None] | None = None,
) -> Summary:
    """Summarise ``records`` and write the page to ``fh``; returns the summary."""
    summary = summarize(records, policy, now, top=top, rows=rows, tick=tick)
    fh.write(render_html(summary, source=source, crawls=crawls))
    return summary
