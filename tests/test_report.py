"""``scrapy domainstate report``: a self-contained HTML page, checked in headless Chromium."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scrapy_domainstate.config import DAY, Config
from scrapy_domainstate.policy import Policy
from scrapy_domainstate.record import DomainStat, Method, Outcome, RecentEntry, State
from scrapy_domainstate.report import render_html, summarize
from scrapy_domainstate.store.lmdb import LmdbStore

CHROMIUM = "/usr/bin/chromium"
EVIL = '<script>alert("x")</script>.example'

#: state -> how many domains the seeded store holds in it (now).
COUNTS = {
    State.UNKNOWN: 4,
    State.DEAD: 3,
    State.ANTIBOT_SOFT: 2,
    State.ANTIBOT_HARD: 1,
    State.FRIENDLY: 7,
    State.COLD: 0,
}


def _stats(now: float) -> list[DomainStat]:
    """Records in the states of COUNTS, their state changes spread over the last days."""
    policy = Policy(Config())
    out = []
    outcomes = [Outcome.OK_CONTACT, Outcome.OK_EMPTY, Outcome.ANTIBOT, Outcome.HTTP_ERROR, Outcome.NETWORK_ERROR]
    n = 0
    for state, count in COUNTS.items():
        for _ in range(count):
            n += 1
            changed = now - (n % 6) * DAY - 3600
            stat = policy.set_state(policy.new(f"site{n}.com", changed - 3600), state, changed)
            stat.recent = [
                RecentEntry(changed - 3600 + k * 600, Method.FETCH, outcomes[(k * (n % 3)) % len(outcomes)], 200)
                for k in range(1 + n % 6)
            ]
            stat.fetch_total = len(stat.recent)
            stat.last_seen = stat.recent[-1].at
            out.append(stat)
    # A hostile "domain" (records keep whatever key they were given) in the "changed most" table.
    evil = policy.set_state(policy.new(EVIL, now - 600), State.UNKNOWN, now - 500)
    evil.recent = [
        RecentEntry(now - 600, Method.FETCH, Outcome.OK_CONTACT, 200),
        RecentEntry(now - 550, Method.TAB, Outcome.ANTIBOT, 403, 'block:"><img src=x onerror=alert(1)>'),
        RecentEntry(now - 500, Method.FETCH, Outcome.OK_EMPTY, 200),
    ]
    evil.last_seen = now - 500
    out.append(evil)
    return out


def _counts_with_evil() -> dict[State, int]:
    counts = dict(COUNTS)
    counts[State.UNKNOWN] += 1
    return counts


def _assert_self_contained(page: str) -> None:
    lowered = page.lower()
    assert "<script" not in lowered
    assert not re.search(r"""(?:src|href|action|poster|data)\s*=\s*["']?\s*(?:https?:)?//""", lowered)
    assert "@import" not in lowered
    assert "url(" not in lowered
    assert "http://" not in lowered and "https://" not in lowered
    assert "<link" not in lowered and "<iframe" not in lowered and "<img" not in lowered


def test_render_escapes_and_summarises() -> None:
    now = time.time()
    summary = summarize(_stats(now), Policy(Config()), now)
    assert dict(summary.states) == {s: n for s, n in _counts_with_evil().items() if n}
    page = render_html(summary, source="lmdb:/data/<db>")
    _assert_self_contained(page)
    assert EVIL not in page
    assert html.escape(EVIL) in page
    assert "onerror=alert(1)>" not in page
    assert "lmdb:/data/&lt;db&gt;" in page
    # The most outcome switches first: the evil record has 2 in 3 entries.
    top = summary.changed_most
    assert top == sorted(top, reverse=True)
    assert all(row.switches > 0 for row in top)
    # Every state appears in the table, zero counts included.
    for state, n in _counts_with_evil().items():
        assert re.search(rf'<tr data-state="{state}">.*?<td class="num count">{n}</td>', page)


def test_report_in_headless_chromium(tmp_path: Path) -> None:
    now = time.time()
    db = tmp_path / "db"
    store = LmdbStore(Config(lmdb_path=str(db)))
    store.open()
    for stat in _stats(now):
        store.put(stat)
    store.close()

    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCRAPY_")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "scrapy",
            "domainstate",
            "report",
            "-o",
            "report.html",
            "-s",
            f"DOMAINSTATE_LMDB_PATH={db}",
        ],
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "wrote the report of 18 domains to report.html" in proc.stderr
    report = work / "report.html"
    page = report.read_text(encoding="utf-8")
    _assert_self_contained(page)
    assert page.startswith("<!DOCTYPE html>")

    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is not installed (Debian package 'chromium'): the page was not rendered")
    flags = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        "--no-default-browser-check",
        "--hide-scrollbars",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ]
    url = report.as_uri()
    dom = subprocess.run(
        [*flags, "--dump-dom", url], capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    rendered = dom.stdout
    assert "<h2>State distribution</h2>" in rendered
    # What the browser shows: every state with its count, in the table and on the bar chart.
    rows = dict(re.findall(r'<tr data-state="([a-z-]+)">.*?<td class="num count">(\d+)</td>', rendered))
    total = sum(_counts_with_evil().values())
    assert rows == {s.value: str(n) for s, n in _counts_with_evil().items()}
    for state, n in _counts_with_evil().items():
        assert f">{state.value}</text>" in rendered
        assert f">{n} ({100 * n / total:.1f}%)</text>" in rendered
    assert "Domains entering each state, per day" in rendered
    assert "Outcomes per day" in rendered
    assert html.escape(EVIL, quote=False) in rendered  # shown as text, not run
    assert "<script" not in rendered.lower()
    assert 'id="changed-table"' in rendered

    shot = tmp_path / "report.png"
    png = subprocess.run(
        [*flags, "--window-size=1100,2600", f"--screenshot={shot}", url],
        capture_output=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    assert png.returncode == 0, png.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 20_000  # charts and tables, not a blank page
