"""``scrapy domainstate report``: a self-contained HTML page, checked in headless Chromium."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scrapy_domainstate.core.config import DAY, Config
from scrapy_domainstate.core.policy import Policy
from scrapy_domainstate.core.record import DomainStat, Method, Outcome, RecentEntry, State
from scrapy_domainstate.store.lmdb import LmdbStore
from scrapy_domainstate.tools.report import render_html, summarize

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
    # One inline script (the table's search and filter), allowed by its hash and nothing else.
    scripts = re.findall(r"<script([^>]*)>(.*?)</script>", page, flags=re.S | re.I)
    assert len(scripts) == 1 and lowered.count("<script") == 1
    attrs, code = scripts[0]
    assert attrs.strip() == ""
    digest = base64.b64encode(hashlib.sha256(code.encode("utf-8")).digest()).decode()
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    assert csp is not None
    assert f"script-src 'sha256-{digest}'" in csp.group(1) and "default-src 'none'" in csp.group(1)
    assert "unsafe-eval" not in csp.group(1) and "'unsafe-inline'" not in csp.group(1).split("script-src")[1]
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
    from scrapy_domainstate.tools.crawllog import CrawlSummary, append_crawl

    append_crawl(
        store,
        CrawlSummary(
            started=now - 600,
            finished=now - 500,
            spider="contacts",
            finish_reason="finished",
            sent={"fetch": 40, "tab": 3},
            skipped={"dead": 4, "cold": 7},
        ),
    )
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
    # shown as text, not run (names may wrap after their dots: <wbr>)
    assert html.escape(EVIL, quote=False) in rendered.replace("<wbr>", "")
    assert rendered.lower().count("<script") == 1  # only the page's own
    assert 'id="changed-table"' in rendered
    # What it saved: the crawl the store's crawl log holds (4 dead skips: 4 GETs + 4 renders; 7 cold).
    assert rendered.count('<tr class="crawl">') == 1
    assert "saved at least <b>15 requests</b>" in rendered

    _check_filters(flags, url, rendered, total)

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


def _check_filters(flags: list[str], url: str, rendered: str, total: int) -> None:
    # The domain table: every domain, and its search and state filter run in the browser
    # (preset from the URL's fragment, as a user would share a filtered view).
    table = re.findall(r'<tr data-state="([a-z-]+)" data-search="[^"]*"( hidden="")?>', rendered)
    assert len(table) == total and not any(hidden for _, hidden in table)
    assert '<b id="shown">18</b>' in rendered
    dead = subprocess.run(
        [*flags, "--dump-dom", url + "#state=dead"], capture_output=True, text=True, timeout=120, check=False
    )
    assert dead.returncode == 0, dead.stderr[-2000:]
    table = re.findall(r'<tr data-state="([a-z-]+)" data-search="[^"]*"( hidden="")?>', dead.stdout)
    assert len(table) == total
    assert sorted(state for state, hidden in table if not hidden) == ["dead"] * COUNTS[State.DEAD]
    assert f'<b id="shown">{COUNTS[State.DEAD]}</b>' in dead.stdout
    search = subprocess.run(
        [*flags, "--dump-dom", url + "#q=site1"], capture_output=True, text=True, timeout=120, check=False
    )
    shown = re.findall(r'<tr data-state="[a-z-]+" data-search="([^"]*)">', search.stdout)
    assert sorted(shown) == sorted(s for s in re.findall(r'data-search="([^"]*)"', rendered) if "site1" in s)
    assert len(shown) == 1 + 8  # site1, site10 ... site17


# ----------------------------------------------------- per-state reasons, table, crawls, charts


def _observed(
    policy: Policy,
    domain: str,
    start: float,
    entries: list[tuple[Method, Outcome, int | None, str | None]],
    then: tuple[float, list[tuple[Method, Outcome, int | None, str | None]]] | None = None,
):
    """A record built the way a crawl builds it: each observation through the real policy
    (``then``: a later visit, so many seconds after ``start``, and its observations)."""
    stat = None
    visits = [(start, entries)] if then is None else [(start, entries), (start + then[0], then[1])]
    for at, observed in visits:
        for i, (method, outcome, status, evidence) in enumerate(observed):
            stat, _ = policy.observe(stat, domain, RecentEntry(at + i * 60, method, outcome, status, evidence))
    assert stat is not None
    return stat


def _learned(now: float) -> list[DomainStat]:
    policy = Policy(Config())
    t = now - 3 * 3600
    fetch, head = Method.FETCH, Method.HEAD
    return [
        _observed(
            policy,
            "refused-shop.example",
            t,
            [(head, Outcome.DEAD, None, "refused"), (fetch, Outcome.DEAD, None, "refused")],
        ),
        _observed(
            policy, "gone.example", t, [(head, Outcome.DEAD, 404, "http:404"), (fetch, Outcome.DEAD, 404, "http:404")]
        ),
        _observed(
            policy, "nxdomain.example", t, [(head, Outcome.DEAD, None, "dns"), (fetch, Outcome.DEAD, None, "dns")]
        ),
        _observed(policy, "walled.example", t + 3600, [(fetch, Outcome.ANTIBOT, 403, "challenge:cloudflare:title")]),
        _observed(policy, "limited.example", t + 3600, [(fetch, Outcome.ANTIBOT, 429, None)]),
        _observed(policy, "banned.example", t + 7200, [(fetch, Outcome.ANTIBOT, 403, "block:cloudflare:1020")]),
        # cold: 10 empty pages over two visits two hours apart (docs/SPEC.md section 2)
        _observed(
            policy,
            "empty.example",
            t,
            [(fetch, Outcome.OK_EMPTY, 200, None)] * 5,
            then=(7200, [(fetch, Outcome.OK_EMPTY, 200, None)] * 5),
        ),
        _observed(policy, "good.example", t, [(fetch, Outcome.OK_CONTACT, 200, None)] * 5),
        _observed(policy, "new.example", t, [(fetch, Outcome.NETWORK_ERROR, None, "timeout")]),
    ]


def _reason_rows(page: str, state: str) -> dict[str, int]:
    block = re.search(rf'<details class="state" data-state="{state}"[^>]*>(.*?)</details>', page, flags=re.S)
    assert block is not None, state
    rows = re.findall(r'<td class="reason">([^<]*)</td><td class="num">([\d,]+)</td>', block.group(1))
    return {html.unescape(reason): int(n.replace(",", "")) for reason, n in rows}


def test_lists_per_state_with_their_reasons() -> None:
    now = time.time()
    records = _learned(now)
    summary = summarize(records, Policy(Config()), now)
    assert {s.domain: s.state for s in records} == {
        "refused-shop.example": State.DEAD,
        "gone.example": State.DEAD,
        "nxdomain.example": State.DEAD,
        "walled.example": State.ANTIBOT_SOFT,
        "limited.example": State.ANTIBOT_SOFT,
        "banned.example": State.ANTIBOT_HARD,
        "empty.example": State.COLD,
        "good.example": State.FRIENDLY,
        "new.example": State.UNKNOWN,
    }
    page = render_html(summary)
    _assert_self_contained(page)
    assert _reason_rows(page, "dead") == {"refused": 1, "http:404": 1, "dns": 1}
    assert _reason_rows(page, "antibot-soft") == {"cloudflare challenge": 1, "rate limit (429)": 1}
    assert _reason_rows(page, "antibot-hard") == {"cloudflare block 1020": 1}
    assert _reason_rows(page, "cold") == {"10 empty pages, none useful": 1}
    assert _reason_rows(page, "friendly") == {"5 of 5 fetches useful": 1}
    assert _reason_rows(page, "unknown") == {"last: network-error timeout": 1}
    # An expired state says so.
    later = summarize(records, Policy(Config()), now + 40 * DAY)
    assert later.reasons[State.UNKNOWN, "dead expired"] == 3
    assert later.reasons[State.UNKNOWN, "antibot-soft expired"] == 2


def test_domain_table_names_wrap_only_after_dots() -> None:
    now = time.time()
    summary = summarize(_learned(now), Policy(Config()), now, rows=4)
    page = render_html(summary)
    assert "break-all" not in page and "word-break:normal" in page
    rows = re.findall(r'<tr data-state="([a-z-]+)" data-search="([^"]*)"><td class="domain">(.*?)</td>', page)
    assert len(rows) == 4  # capped, most recently seen first
    assert [r[2].replace(".<wbr>", ".") for r in rows] == [r.domain for r in summary.rows]
    assert all(".<wbr>" in cell and "<wbr>" not in cell.replace(".<wbr>", "") for _, _, cell in rows)
    assert "The 4 most recently seen of 9 domains are listed" in page
    assert 'id="domain-search"' in page and 'id="state-filter"' in page


def test_charts_of_a_young_store_have_several_bars() -> None:
    now = time.time()
    # Observations over the last 3 hours: one bar per 10 minutes.
    page = render_html(summarize(_learned(now), Policy(Config()), now))
    for chart in ("entered-chart", "outcomes-chart"):
        svg = re.search(
            rf'<svg class="chart" id="{chart}"[^>]*data-bins="(\d+)" data-unit="([\w ]+)"(.*?)</svg>', page, re.S
        )
        assert svg is not None
        assert svg.group(2) == "10 minutes" and int(svg.group(1)) >= 12
        xs = set(re.findall(r'<rect class="bar" x="([\d.]+)"', svg.group(3)))
        assert len(xs) >= 3, chart  # several bars, not one
    assert "Domains entering each state, per 10 minutes" in page
    # Two crawls a few minutes apart: one bar per minute.
    policy = Policy(Config())
    fetch = Method.FETCH
    quick = [
        _observed(policy, f"a{i}.example", now - 300 + 240 * (i % 2), [(fetch, Outcome.OK_EMPTY, 200, None)])
        for i in range(6)
    ]
    page = render_html(summarize(quick, policy, now))
    svg = re.search(r'id="outcomes-chart"[^>]*data-bins="(\d+)" data-unit="minute"(.*?)</svg>', page, re.S)
    assert svg is not None and int(svg.group(1)) >= 5
    assert len(set(re.findall(r'<rect class="bar" x="([\d.]+)"', svg.group(2)))) == 2
    # Over many days: one bar per day.
    week = render_html(summarize(_stats(now), Policy(Config()), now))
    assert re.search(r'id="entered-chart"[^>]*data-unit="day"', week)
    assert re.search(r'id="outcomes-chart"[^>]*data-unit="day"', week)


def test_what_it_saved_crawl_by_crawl(tmp_path: Path) -> None:
    from scrapy_domainstate.tools.crawllog import KEEP, CrawlSummary, append_crawl, read_crawls

    now = time.time()
    stats = {
        "finish_reason": "finished",
        "domainstate/method/head": 4,
        "domainstate/method/fetch": 30,
        "domainstate/method/tab": 3,
        "domainstate/method/cache": 2,
        "domainstate/method/skip": 14,
        "domainstate/skip/dead": 5,
        "domainstate/skip/cold": 8,
        "domainstate/skip/dead-url": 1,
        "domainstate/decision/browser": 2,
        "domainstate/browser_reissue": 1,
        "domainstate/transition/unknown/dead": 2,
        "domainstate/transition/unknown/cold": 1,
        "domainstate/state_at_close/dead": 2,
        "domainstate/state_at_close/cold": 1,
        "domainstate/domain/x.example/fetch": 9,  # per-domain keys are not families
    }
    crawl = CrawlSummary.from_stats(stats, started=now - 90, finished=now, spider="contacts", store="lmdb:x")
    assert crawl.sent == {"fetch": 30, "head": 4, "tab": 3}
    assert crawl.skipped == {"cold": 8, "dead": 5, "dead-url": 1}
    assert (crawl.probes, crawl.renders, crawl.cached, crawl.requests_skipped) == (4, 3, 2, 14)
    assert crawl.renders_saved == 6  # dead + dead-url skips: fallback would render after each failed GET
    assert crawl.requests_saved == 14 + 6 + 2 - 4
    message, args = crawl.log_message()
    text = message % args
    assert "3 domains touched (cold 1, dead 2)" in text and "saved at least 18 requests and 6 renders" in text
    assert CrawlSummary.from_json(crawl.to_json()) == crawl
    # skip/before_queue re-counts skips already in skip/{reason} (the spider middleware's share)
    queued = CrawlSummary.from_stats({**stats, "domainstate/skip/before_queue": 6}, started=now - 90, finished=now)
    assert queued.skipped == crawl.skipped and queued.requests_saved == crawl.requests_saved
    first = CrawlSummary.from_stats({"domainstate/method/head": 9, "domainstate/skip/dead": 2}, started=0, finished=1)
    message, args = first.log_message()
    assert "this cost 5 more requests (its 9 HEAD probes) and saved 2 renders" in message % args

    db = tmp_path / "db"
    store = LmdbStore(Config(lmdb_path=str(db)))
    store.open()
    assert read_crawls(store) == []
    append_crawl(store, crawl)
    with open(db / "crawls.jsonl", "a", encoding="utf-8") as fh:
        fh.write("{not json\n")  # a torn or foreign line is skipped, not fatal
    later = CrawlSummary.from_stats({"domainstate/skip/cold": 20}, started=now, finished=now + 30, spider="second")
    append_crawl(store, later)
    assert read_crawls(store) == [crawl, later]
    for _ in range(2 * KEEP + 5):
        append_crawl(store, later)
    assert len(read_crawls(store)) == KEEP and len(read_crawls(store, limit=3)) == 3
    store.close()

    page = render_html(summarize(_learned(now), Policy(Config()), now), crawls=[crawl, later])
    _assert_self_contained(page)
    rows = re.findall(
        r'<tr class="crawl">.*?<td class="num sent">([\d,]+)</td>.*?<td class="num skipped">([\d,]+)</td>'
        r'.*?<td class="num saved-requests">(-?[\d,]+)</td><td class="num saved-renders">([\d,]+)</td>',
        page,
    )
    assert rows == [("0", "20", "20", "0"), ("37", "14", "18", "6")]  # newest first
    assert "saved at least <b>38 requests</b>" in page
    assert 'id="no-crawls"' in render_html(summarize([], Policy(Config()), now))


def test_host_facts_and_purpose_records_are_shown_as_part_of_their_domain() -> None:
    now = time.time()
    policy = Policy(Config())
    domain = policy.set_state(policy.new("friendly-1.com", now - 3600), State.FRIENDLY, now - 3600)
    blog = policy.new("blog.friendly-1.com", now - 3000)  # a host with no state of its own
    shop = policy.set_state(policy.new("shop.friendly-1.com", now - 3000), State.ANTIBOT_SOFT, now - 100)
    worth = policy.new("friendly-1.com|items", now - 3000)
    summary = summarize([blog, domain, shop, worth], policy, now)
    # the state distribution counts domains; the hosts' and purposes' records are their parts
    assert summary.total == 1 and summary.states[State.FRIENDLY] == 1
    assert summary.parts == {"host": 2, "purpose": 1}
    rows = {r.domain: r for r in summary.rows}
    assert rows["blog.friendly-1.com"].label == "blog.friendly-1.com (host of friendly-1.com)"
    assert rows["shop.friendly-1.com"].state is State.ANTIBOT_SOFT  # a host's own evidence decides it
    assert rows["friendly-1.com|items"].label == "friendly-1.com|items (items record of friendly-1.com)"
    page = render_html(summary).replace("<wbr>", "")
    assert '<div class="part">host of friendly-1.com</div>' in page
    assert "1 domain ·" in page and "1 domains" not in page
    # with one key per hostname, a hostname is a domain of its own
    per_host = summarize([blog, domain], Policy(Config(per_hostname=True)), now)
    assert per_host.total == 2 and not per_host.parts


def test_long_reasons_are_short_with_the_details_on_demand() -> None:
    from scrapy_domainstate.tools.report import SHORT_REASON, _reason

    long = "last: network-error timeout after a very long wait on the host's own server"
    cell = _reason(long)
    assert "<details" in cell and html.escape(long, quote=True) in cell
    summary_text = re.search(r"<summary>(.*?)</summary>", cell)
    assert summary_text is not None and len(summary_text.group(1)) <= SHORT_REASON + 1
    assert _reason("dns") == "dns"


_WIDTH_PROBE = """
import json, sys
from playwright.sync_api import sync_playwright

url, chromium, shot = sys.argv[1:4]
with sync_playwright() as p:
    browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(url)
    page.screenshot(path=shot, full_page=True)
    print(json.dumps(page.evaluate('''() => ({
        main: document.querySelector("main").getBoundingClientRect().width,
        page: [document.documentElement.scrollWidth, document.documentElement.clientWidth],
        boxes: [...document.querySelectorAll(".scroll")].map(e => [e.querySelector("table").id, e.scrollWidth, e.clientWidth]),
        reasonLines: Math.max(0, ...[...document.querySelectorAll("#domains-table td.reason")].map(td => {
            const r = document.createRange(); r.selectNodeContents(td);
            return new Set([...r.getClientRects()].map(b => Math.round(b.top))).size;
        })),
    })''')))
    browser.close()
"""


def test_report_fits_a_1400_px_window(tmp_path: Path) -> None:
    """Full width, nothing scrolls sideways, reasons on one line (a real Chromium, 1,400 px)."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is not installed (Debian package 'chromium'): the page was not rendered")
    pytest.importorskip("playwright")
    from scrapy_domainstate.tools.crawllog import CrawlSummary

    now = time.time()
    crawl = CrawlSummary(
        started=now - 600,
        finished=now - 500,
        spider="a-spider-with-a-rather-long-name",
        finish_reason="closespider_timeout",
        sent={"fetch": 123456, "tab": 3456, "head": 12345},
        skipped={"dead": 40000, "cold": 7000, "antibot-hard": 1234},
    )
    page = tmp_path / "report.html"
    page.write_text(render_html(summarize(_stats(now), Policy(Config()), now), crawls=[crawl]), encoding="utf-8")
    shot = tmp_path / "report.png"
    proc = subprocess.run(
        [sys.executable, "-c", _WIDTH_PROBE, page.as_uri(), CHROMIUM, str(shot)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    measured = json.loads(proc.stdout.strip().splitlines()[-1])
    assert measured["main"] >= 1300, measured  # the window's width, less its margins
    scroll_width, client_width = measured["page"]
    assert scroll_width <= client_width, measured  # no horizontal scrollbar on the page
    for table, inner, outer in measured["boxes"]:
        assert inner <= outer, (table, measured)  # no table scrolls sideways
    assert measured["reasonLines"] <= 1, measured
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
