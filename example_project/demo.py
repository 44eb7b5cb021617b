#!/usr/bin/env python
"""The offline demo: a simulated web of a few hundred sites on loopback, crawled three times.

::

    python example_project/demo.py                  # 300 sites, with Chromium
    python example_project/demo.py --sites 60 --no-browser --json summary.json
    python example_project/demo.py --keep /tmp/demo # keep the store, logs and items

It starts :class:`~scrapy_domainstate.testing.sites.SiteServer` on 127.0.0.1: one web server
that answers for any number of ``<kind>-<n>.test`` hosts, each behaving as one kind of
website (friendly, cold, dead, behind Cloudflare or DataDome, rate-limited, flaky, a
script-only page, an expired certificate ...). Then it runs the example project's
``contacts`` spider (``contacts/spiders/contacts.py``, with ``contacts/settings.py``) three
times over the same list of sites, on the same fresh LMDB store: the first crawl learns what
every site is, the second confirms it (a dead or empty site is never judged on one visit: a
dead site costs it one request, a cold one its last few pages), the third remembers. It
prints what the first and the last crawl cost and found, the state of the domains after
each, and checks that the last crawl spent less for the same contacts and that the
confirmation cost what the rules say: the exit status is 1 when it did not.

Nothing leaves the machine: Scrapy resolves names with the table-driven
``TableResolver`` (``*.test`` -> 127.0.0.1; the nxdomain and refused sites fail as real ones
do), Chromium gets the same table as ``--host-resolver-rules`` (every other name is
``~NOTFOUND``), and ``loopback_only()`` stops this process from resolving any real name.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))  # the example project: contacts.settings, contacts.spiders

ASYNCIO_REACTOR = "twisted.internet.asyncioreactor.AsyncioSelectorReactor"
PLAYWRIGHT_HANDLER = "scrapy_playwright.handler.ScrapyPlaywrightDownloadHandler"

# -- the simulated web --------------------------------------------------------------------------

# Kinds served by SiteServer (see scrapy_domainstate/testing/sites.py), plus four made here:
# nxdomain and refused (the resolver table), tls-expired (a friendly site behind an expired
# certificate), redirect (a site moved to a new domain).
NXDOMAIN_KIND = "nxdomain"
REFUSED_KIND = "refused"
TLS_EXPIRED_KIND = "tls-expired"

#: kind -> (sites out of 300, what it does)
MIX: dict[str, tuple[int, str]] = {
    "friendly": (111, "every page shows an e-mail address and a phone number"),
    "cold": (42, "live pages, never any contact"),
    "dead-root": (15, "404 on every path, the home page too"),
    "gone": (9, "410 Gone everywhere"),
    NXDOMAIN_KIND: (18, "the name does not resolve (NXDOMAIN)"),
    REFUSED_KIND: (12, "the name resolves, nothing listens (connection refused)"),
    TLS_EXPIRED_KIND: (3, "a friendly site behind an expired TLS certificate"),
    "head-404": (9, "HEAD says 404, GET works (contacts)"),
    "head-405": (6, "HEAD not allowed (405), GET works (contacts)"),
    "head-500": (6, "HEAD fails (500), GET works (contacts)"),
    "flaky": (12, "every other request is a 503; a retry gets the page (contacts)"),
    "slow": (3, "answers after 1 s (contacts)"),
    "redirect": (3, "301 to a new domain, which has contacts"),
    "js-shell": (6, "the page is a script that writes the contacts: a plain fetch sees none"),
    "cf-soft": (8, "Cloudflare JS challenge: plain fetches never pass, a browser does"),
    "cf-sometimes": (6, "every third plain request gets the Cloudflare challenge"),
    "aws-waf": (4, "AWS WAF challenge (202): a browser passes it"),
    "cf-hard": (9, 'Cloudflare 1020 "you have been blocked", the browser too'),
    "cf-block": (3, "cf-mitigated: block, the browser too"),
    "datadome": (6, "DataDome CAPTCHA, the browser too"),
    "datadome-ban": (3, "DataDome ban (t=bv), the browser too"),
    "rate-limited": (6, "429 Too Many Requests, always, the browser too"),
}
#: kinds whose sites are dead (skipped once known)
DEAD_KINDS = ("dead-root", "gone", NXDOMAIN_KIND, REFUSED_KIND)
# (tls-expired is not among them: a site whose pages are useful behind a bad certificate is
# misconfigured, not abandoned, and is never dead by its certificate alone)
#: kinds whose sites are alive but never useful
COLD_KINDS = ("cold",)


@dataclass
class Site:
    host: str
    kind: str
    url: str
    #: every host the site answers on (a redirect's target too)
    hosts: tuple[str, ...] = ()


def allocate(n: int) -> dict[str, int]:
    """Sites per kind for a population of ``n``: the mix, scaled; every kind once if n allows."""
    total = sum(weight for weight, _ in MIX.values())
    shares = {kind: n * weight / total for kind, (weight, _) in MIX.items()}
    counts = {kind: int(share) for kind, share in shares.items()}
    left = n - sum(counts.values())
    for kind in sorted(shares, key=lambda k: shares[k] - counts[k], reverse=True)[:left]:
        counts[kind] += 1
    if n >= len(MIX):
        for kind in MIX:
            if not counts[kind]:
                counts[max(counts, key=lambda k: counts[k])] -= 1
                counts[kind] = 1
    return counts


def build_population(server: Any, n: int, seed: int) -> tuple[list[Site], dict[str, str]]:
    """Configure ``server`` for ``n`` sites; return them (shuffled) and the resolver's host table."""
    from scrapy_domainstate.testing.resolver import NXDOMAIN, REFUSED
    from scrapy_domainstate.testing.sites import FRIENDLY, REDIRECT, SLOW, TLS_EXPIRED

    sites: list[Site] = []
    dns: dict[str, str] = {}
    for kind, count in allocate(n).items():
        for i in range(1, count + 1):
            host = f"{kind}-{i}.test"
            url = server.url(host)
            hosts: tuple[str, ...] = (host,)
            if kind == NXDOMAIN_KIND:
                dns[host] = NXDOMAIN
            elif kind == REFUSED_KIND:
                dns[host] = REFUSED
            elif kind == TLS_EXPIRED_KIND:
                server.set_kind(host, FRIENDLY)
                url = server.url(host, tls=TLS_EXPIRED)
            elif kind == REDIRECT:
                target = f"moved-{i}.test"
                server.set_kind(target, FRIENDLY)
                server.set_kind(host, REDIRECT, target=server.url(target).rstrip("/"))
                hosts = (host, target)
            elif kind == SLOW:
                server.set_kind(host, SLOW, delay=1.0)
            sites.append(Site(host, kind, url, hosts))
    random.Random(seed).shuffle(sites)
    return sites, dns


# -- one crawl ----------------------------------------------------------------------------------


@dataclass
class CrawlReport:
    number: int
    wall_time: float = 0.0
    stats: dict[str, Any] = field(default_factory=dict)
    items: list[dict[str, Any]] = field(default_factory=list)
    #: requests the sites received: (host, method, browser)
    received: list[tuple[str, str, bool]] = field(default_factory=list)
    #: names Scrapy looked up
    lookups: list[str] = field(default_factory=list)
    #: domain -> state, after the crawl (read from the store)
    states: dict[str, str] = field(default_factory=dict)

    def stat(self, name: str) -> int:
        return int(self.stats.get(name, 0) or 0)

    @property
    def sent(self) -> int:
        """Requests Scrapy's downloader sent: HEAD probes, plain GETs, browser page loads, retries."""
        return self.stat("downloader/request_count")

    @property
    def head(self) -> int:
        return self.stat("downloader/request_method_count/HEAD")

    @property
    def renders(self) -> int:
        return self.stat("domainstate/method/tab")

    @property
    def plain_get(self) -> int:
        return self.sent - self.head - self.renders

    @property
    def skipped(self) -> int:
        return self.stat("domainstate/method/skip")

    @property
    def failed(self) -> int:
        """Downloads that failed before any HTTP answer (DNS, refused, TLS, timeouts)."""
        ignored = self.stat("downloader/exception_type_count/scrapy.exceptions.IgnoreRequest")
        return self.stat("downloader/exception_count") - ignored

    @property
    def contacts(self) -> set[tuple[str, str]]:
        found: set[tuple[str, str]] = set()
        for item in self.items:
            for key in ("emails", "phones", "social"):
                found.update((item["site"], value) for value in item[key])
        return found

    @property
    def sites_with_contacts(self) -> set[str]:
        return {item["site"] for item in self.items}

    def summary(self) -> dict[str, Any]:
        return {
            "requests": self.sent,
            "head": self.head,
            "plain_get": self.plain_get,
            "browser_renders": self.renders,
            "received_by_sites": len(self.received),
            "received_from_browser": sum(1 for _, _, browser in self.received if browser),
            "failed_before_answer": self.failed,
            "skipped": self.skipped,
            "items": len(self.items),
            "sites_with_contacts": len(self.sites_with_contacts),
            "contacts": len(self.contacts),
            "wall_time": round(self.wall_time, 2),
            "states": dict(Counter(self.states.values())),
            "stats": {k: v for k, v in sorted(self.stats.items()) if k.startswith(("domainstate/", "downloader/"))},
        }


def crawl_settings(workdir: Path, dns: dict[str, str], browser: bool, concurrency: int) -> Any:
    """The example project's settings, with what the demo changes (and why)."""
    from scrapy.settings import Settings

    from scrapy_domainstate.testing.offline import chromium_launch_options
    from scrapy_domainstate.testing.resolver import HOSTS_SETTING

    settings = Settings()
    settings.setmodule("contacts.settings", priority="project")
    demo: dict[str, Any] = {
        # the store: a fresh one in the work directory, shared by both crawls
        "DOMAINSTATE_LMDB_PATH": str(workdir / "domainstate"),
        # the simulated web: names from a table, never the system resolver (the demo
        # installs it on the reactor itself: CrawlerRunner does not)
        "TWISTED_DNS_RESOLVER": "scrapy_domainstate.testing.resolver.TableResolver",
        HOSTS_SETTING: dns,
        "HTTPPROXY_ENABLED": False,  # no proxy from the environment for loopback traffic
        "ROBOTSTXT_OBEY": False,  # (the project's choice too; the simulated sites have none)
        "REMOTE_CONTROL_ENABLED": False,  # Scrapy 2.19's HTTP control server: not needed here
        "CONCURRENT_REQUESTS": concurrency,
        "DOWNLOAD_TIMEOUT": 10,
        # The crawls run seconds apart, where real re-crawls are hours or days apart: an empty
        # streak counts as spanning two visits however close they are (``cold`` is confirmed
        # across visits: docs/SPEC.md section 2).
        "DOMAINSTATE_COLD_CONFIRM_AFTER": 0,
        # The simulated challenges a browser passes do so within a second of loading; the
        # ones it never passes (DataDome's CAPTCHA) would hold a tab for the default 15 s.
        "DOMAINSTATE_BROWSER_CHALLENGE_WAIT": 5,
        "LOGSTATS_INTERVAL": 0,
        "LOG_LEVEL": "INFO",
    }
    if browser:
        demo["PLAYWRIGHT_LAUNCH_OPTIONS"] = chromium_launch_options(dns)
    else:
        # No Chromium: Scrapy's own HTTP handlers, so the plugin runs in its no-browser mode
        # (one start-up warning): nothing is re-issued, antibot-hard sites are skipped.
        demo["DOWNLOAD_HANDLERS"] = {}
    settings.setdict(demo, priority="cmdline")
    return settings


async def run_crawl(number: int, settings: Any, sites_file: Path, server: Any, resolver: Any, workdir: Path) -> Any:
    from contacts.spiders.contacts import ContactsSpider
    from scrapy import signals
    from scrapy.crawler import CrawlerRunner

    from scrapy_domainstate.core.config import Config
    from scrapy_domainstate.store.lmdb import LmdbStore

    report = CrawlReport(number)
    server.reset_log()
    resolver.queries.clear()
    handler = logging.FileHandler(workdir / f"crawl-{number}.log", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s [%(name)s] %(levelname)s: %(message)s"))
    handler.setLevel(settings.get("LOG_LEVEL"))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        runner = CrawlerRunner(settings)
        crawler = runner.create_crawler(ContactsSpider)
        crawler.signals.connect(lambda item, **_: report.items.append(dict(item)), signals.item_scraped, weak=False)
        started = time.monotonic()
        await runner.crawl(crawler, sites=str(sites_file))
        report.wall_time = time.monotonic() - started
    finally:
        root.removeHandler(handler)
        handler.close()
    assert crawler.stats is not None
    report.stats = dict(crawler.stats.get_stats())
    report.received = [(r.host, r.method, r.browser) for r in server.requests()]
    report.lookups = list(resolver.queries)
    store = LmdbStore(Config.from_settings(settings))
    store.open()
    try:
        now = time.time()
        report.states = {stat.domain: str(store.current(stat.domain, now).state) for stat in store.iter_records()}
    finally:
        store.close()
    with (workdir / f"items-{number}.jsonl").open("w", encoding="utf-8") as out:
        for item in report.items:
            out.write(json.dumps(item) + "\n")
    return report


# -- the report -----------------------------------------------------------------------------------

STATE_ORDER = ("unknown", "friendly", "cold", "dead", "antibot-soft", "antibot-hard")


def per_kind(sites: list[Site], report: CrawlReport) -> dict[str, dict[str, Any]]:
    """For each kind: requests received (plain / browser / HEAD), DNS lookups, pages, states."""
    kind_of = {host: site.kind for site in sites for host in site.hosts}
    out: dict[str, dict[str, Any]] = {
        kind: {"plain": 0, "browser": 0, "head": 0, "lookups": 0, "pages": 0, "states": Counter()} for kind in MIX
    }
    for host, method, browser in report.received:
        kind = kind_of.get(host)
        if kind is None:
            continue
        entry = out[kind]
        if method == "HEAD":
            entry["head"] += 1
        elif browser:
            entry["browser"] += 1
        else:
            entry["plain"] += 1
    for name in report.lookups:
        if name in kind_of:
            out[kind_of[name]]["lookups"] += 1
    for item in report.items:
        kind = kind_of.get(_host(item["site"]))
        if kind is not None:
            out[kind]["pages"] += 1
    for site in sites:
        out[site.kind]["states"][report.states.get(site.host, "-")] += 1
    return out


def fmt_states(states: Counter[str]) -> str:
    return ", ".join(f"{state} {n}" for state, n in sorted(states.items(), key=lambda kv: (-kv[1], kv[0])))


def pct(new: float, old: float) -> str:
    if not old:
        return ""
    return f"{(new - old) / old * 100:+.0f} %"


def print_report(sites: list[Site], first: CrawlReport, second: CrawlReport, browser: bool) -> dict[str, Any]:
    kinds1, kinds2 = per_kind(sites, first), per_kind(sites, second)
    from_browser1 = sum(b for _, _, b in first.received)
    from_browser2 = sum(b for _, _, b in second.received)
    rows = [
        ("requests sent by Scrapy", first.sent, second.sent, True),
        ("  HEAD probes", first.head, second.head, True),
        ("  plain GETs (retries included)", first.plain_get, second.plain_get, True),
        (
            "  browser renders" if browser else "  browser renders (none: --no-browser)",
            first.renders,
            second.renders,
            True,
        ),
        ("  failed before an answer (DNS, refused)", first.failed, second.failed, True),
        ("requests the sites received", len(first.received), len(second.received), True),
        ("  of which from Chromium (page loads, scripts)", from_browser1, from_browser2, True),
        ("requests skipped by the plugin", first.skipped, second.skipped, False),
        ("pages with contacts (items)", len(first.items), len(second.items), False),
        ("sites with contacts", len(first.sites_with_contacts), len(second.sites_with_contacts), False),
        ("distinct contacts", len(first.contacts), len(second.contacts), False),
    ]
    print()
    print(f"{'':47} {'crawl 1':>8} {'crawl 3':>8}   change")
    for label, a, b, show in rows:
        print(f"{label:47} {a:>8} {b:>8}   {pct(b, a) if show else ''}")
    print(
        f"{'wall time':47} {first.wall_time:>7.1f}s {second.wall_time:>7.1f}s   {pct(second.wall_time, first.wall_time)}"
    )

    print()
    print(f"State of the {len(sites)} domains after crawls 1 and 3 (read from the store):")
    c1, c2 = Counter(first.states.values()), Counter(second.states.values())
    for state in STATE_ORDER:
        if c1[state] or c2[state]:
            print(f"  {state:14} {c1[state]:>5} {c2[state]:>9}")

    print()
    print("By kind: what the sites received (plain GETs, browser requests, HEADs; DNS lookups for")
    print("names that never answer) and the pages with contacts, in each crawl; the states after each.")
    print(f"  {'':13} {'':5}  {'-------- crawl 1 --------':>25}  {'-------- crawl 3 --------':>25}")
    header = f"{'plain':>6} {'brows':>5} {'HEAD':>4} {'pages':>6}"
    print(f"  {'kind':13} {'sites':>5}  {header}  {header}   state after crawl 1 -> after crawl 3")
    counts = Counter(site.kind for site in sites)

    def cells(k: dict[str, Any], kind: str) -> str:
        plain = f"{k['lookups']}dns" if kind in (NXDOMAIN_KIND, REFUSED_KIND) else str(k["plain"])
        return f"{plain:>6} {k['browser']:>5} {k['head']:>4} {k['pages']:>6}"

    for kind in MIX:
        if not counts[kind]:
            continue
        k1, k2 = kinds1[kind], kinds2[kind]
        s1, s2 = fmt_states(k1["states"]), fmt_states(k2["states"])
        states = s1 if s1 == s2 else f"{s1} -> {s2}"
        print(f"  {kind:13} {counts[kind]:>5}  {cells(k1, kind)}  {cells(k2, kind)}   {states}")
    return {
        kind: {"sites": counts[kind], "crawl1": kinds1[kind], "crawl2": kinds2[kind]} for kind in MIX if counts[kind]
    }


def explain(
    sites: list[Site], first: CrawlReport, second: CrawlReport, browser: bool, confirming: CrawlReport | None = None
) -> list[str]:
    """A short "what happened", from the numbers (``second``: the last crawl)."""
    c1 = Counter(first.states.values())
    kinds1, kinds2 = per_kind(sites, first), per_kind(sites, second)
    kind_of = {site.host: site.kind for site in sites}
    present = {site.kind for site in sites}
    if browser:
        fallback = (
            "and what a plain fetch could not read (walls, script-only pages, errors a browser may fix) "
            f"was re-issued once in the browser ({first.stat('domainstate/browser_reissue')} re-issues)."
        )
    else:
        fallback = (
            "with no browser (no-browser mode): walls and script-only pages were recorded as a plain fetch saw them."
        )
    hard = (
        "antibot-hard sites sent straight to the browser without the plain GET that would hit the wall first."
        if browser
        else "antibot-hard sites skipped (without a browser a plain fetch cannot pass them)."
    )
    lines = [
        f"Crawl 1 knew nothing: each site's first request went alone, as its probe ({first.head} HEAD "
        f"requests), then its pages were fetched, {fallback}",
        f"It learned: {c1['friendly']} friendly (>= 70 % of >= 5 fetches found contacts), "
        f"{c1['antibot-soft']} antibot-soft, {c1['antibot-hard']} antibot-hard, {c1['dead']} dead, "
        f"{c1['cold']} cold, {c1['unknown']} still unknown: one dead signal (a home page with no DNS, "
        f"refused, 404/410) or a few empty pages are never a verdict on their own.",
    ]
    if confirming is not None:
        c2 = Counter(confirming.states.values())
        lines.append(
            f"Crawl 2 confirmed: the one request of each dead-looking site was its second dead signal "
            f"({c2['dead']} dead now), the empty sites' streaks spanned two crawls ({c2['cold']} cold now); "
            f"{confirming.sent} requests in all."
        )
    lines.append(
        f"Crawl 3 remembered: {second.head} HEAD probes, "
        f"{second.skipped} requests skipped before any traffic (dead and cold sites, and pages that "
        f"answered 404 before), friendly sites fetched plainly without a probe, {hard}"
    )
    soft = sorted({kind_of[d] for d, st in second.states.items() if st == "antibot-soft" and d in kind_of})
    if soft and browser:
        lines.append(
            f"What did not get cheaper: antibot-soft sites ({', '.join(soft)}) are still fetched plainly "
            f"first and re-issued in the browser when they meet a wall (two requests per page), until 3 "
            f"walls in a row make them antibot-hard (browser only) or their 7-day TTL runs out."
        )
    shell2 = kinds2["js-shell"]
    if browser and shell2["states"].get("unknown"):
        if shell2["browser"] and not shell2["plain"]:
            lines.append(
                "Script-only sites (js-shell) keep their state (unknown), but the plugin learned in crawl 1 "
                "that they need the browser: crawl 3 renders each page once, without the plain fetch of "
                "the empty shell first."
            )
        else:
            lines.append(
                "Script-only sites (js-shell) stay unknown: this crawl still fetched the empty shell before "
                "rendering it in the browser (the browser is learned after enough rendered shells in a row)."
            )
    lost = sorted(first.sites_with_contacts - second.sites_with_contacts)
    if lost:
        by_kind = Counter(kind_of.get(_host(url), "?") for url in lost)
        line = f"Crawl 3 found no contacts on {len(lost)} site(s) that had some in crawl 1 ({fmt_states(by_kind)})."
        lines.append(line)
    fewer = [
        f"{kind} {kinds1[kind]['pages']} -> {kinds2[kind]['pages']}"
        for kind in MIX
        if kind in present and kinds2[kind]["pages"] < kinds1[kind]["pages"]
    ]
    if fewer:
        line = f"Fewer pages with contacts in crawl 3: {', '.join(fewer)}."
        if any(f.startswith("flaky ") for f in fewer) and not browser:
            line += (
                " Without a browser a page that fails twice (503, and 503 again on retry) is lost in any "
                "crawl; which pages fail differs from crawl to crawl."
            )
        lines.append(line)
    gained = sorted(second.sites_with_contacts - first.sites_with_contacts)
    if gained:
        lines.append(f"Crawl 3 found contacts on {len(gained)} site(s) crawl 1 missed ({', '.join(gained[:5])}).")
    return lines


def _host(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).hostname or ""


def checks(
    sites: list[Site],
    first: CrawlReport,
    second: CrawlReport,
    browser: bool = True,
    confirming: CrawlReport | None = None,
) -> list[dict[str, Any]]:
    """The demo's checks (``second``: the last crawl; ``confirming``: the one between)."""
    kinds2 = per_kind(sites, second)
    result: list[dict[str, Any]] = []

    def check(name: str, ok: bool, detail: str) -> None:
        result.append({"name": name, "ok": bool(ok), "detail": detail})

    check("fewer requests", second.sent < first.sent, f"{second.sent} < {first.sent} requests sent")
    check(
        "fewer requests received",
        len(second.received) < len(first.received),
        f"{len(second.received)} < {len(first.received)} requests received by the sites",
    )
    with1, with2 = first.sites_with_contacts, second.sites_with_contacts
    walls = ""
    if not browser:
        # Without a browser, a page behind a wall is got only when a plain fetch happens to
        # pass it (cf-sometimes challenges every third request): not the plugin's to keep.
        from scrapy_domainstate.testing.sites import ANTIBOT_KINDS

        behind = {host for site in sites if site.kind in ANTIBOT_KINDS for host in (site.host, *site.hosts)}
        with1 = {u for u in with1 if _host(u) not in behind}
        with2 = {u for u in with2 if _host(u) not in behind}
        walls = " (no browser: sites behind anti-bot walls aside)"
    n1, n2 = len(with1), len(with2)
    check("same contacts", n2 >= 0.95 * n1, f"{n2} >= 95 % of {n1} sites with contacts{walls}")
    friendly_head = kinds2["friendly"]["head"]
    check("no HEAD to friendly sites", friendly_head == 0, f"{friendly_head} HEAD requests to friendly sites")
    wasted = {
        kind: kinds2[kind]["plain"] + kinds2[kind]["browser"] + kinds2[kind]["head"] + kinds2[kind]["lookups"]
        for kind in (*DEAD_KINDS, *COLD_KINDS)
        if any(site.kind == kind for site in sites)
    }
    check(
        "nothing sent to dead or cold sites",
        sum(wasted.values()) == 0,
        ", ".join(f"{kind} {n}" for kind, n in wasted.items()) + " requests or DNS lookups",
    )
    if confirming is not None:
        # A dead site's confirmation costs its home page once more (sent alone: its second dead
        # signal makes it dead), no more than the first visit cost, and then it is dead.
        kinds_1, kinds_c = per_kind(sites, first), per_kind(sites, confirming)

        def cost(kinds: dict[str, dict[str, Any]]) -> int:
            return sum(
                kinds[kind]["plain"] + kinds[kind]["browser"] + kinds[kind]["head"]
                if kind not in (NXDOMAIN_KIND, REFUSED_KIND)
                else kinds[kind]["lookups"]
                for kind in DEAD_KINDS
            )

        dead_sites = [site for site in sites if site.kind in DEAD_KINDS]
        confirmed = sum(1 for site in dead_sites if confirming.states.get(site.host) == "dead")
        check(
            "a confirmation visit costs no more than the first",
            cost(kinds_c) <= cost(kinds_1) and confirmed == len(dead_sites),
            f"{cost(kinds_c)} <= {cost(kinds_1)} requests or lookups (retries included) to the "
            f"{len(dead_sites)} dead sites, {confirmed} of them dead after crawl 2",
        )
    return result


# -- main -------------------------------------------------------------------------------------


#: ``--quick``: every kind of site still present, at most a few of each
QUICK_SITES = 60


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sites", type=int, default=None, help="how many simulated sites (default 300)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"a smaller web ({QUICK_SITES} sites): the same checks, in less time",
    )
    parser.add_argument("--no-browser", action="store_true", help="no Chromium (the plugin's no-browser mode)")
    parser.add_argument("--keep", metavar="DIR", help="work in DIR and keep it (store, logs, items)")
    parser.add_argument("--json", metavar="FILE", help="write a JSON summary to FILE")
    parser.add_argument("--concurrency", type=int, default=16, help="CONCURRENT_REQUESTS (default 16)")
    parser.add_argument("--seed", type=int, default=7, help="order of the sites (default 7)")
    args = parser.parse_args(argv)
    if args.sites is None:
        args.sites = QUICK_SITES if args.quick else 300
    if args.sites < 1:
        parser.error("--sites must be at least 1")
    return args


async def demo(reactor: Any, args: argparse.Namespace, workdir: Path) -> int:
    from scrapy_domainstate.testing.resolver import TableResolver
    from scrapy_domainstate.testing.sites import EXTRA_PAGES, PAGES, SiteServer

    browser = not args.no_browser
    server = SiteServer.start(workdir / "certs", reactor)
    # Sites with an about, team and impressum page, as the spider expects real ones to have.
    server.pages = (*PAGES, *EXTRA_PAGES)
    sites, dns = build_population(server, args.sites, args.seed)
    resolver = TableResolver(reactor, dns)
    resolver.install_on_reactor()
    sites_file = workdir / "sites.txt"
    sites_file.write_text("".join(f"{site.url}\n" for site in sites), encoding="utf-8")
    settings = crawl_settings(workdir, dns, browser, args.concurrency)

    counts = Counter(site.kind for site in sites)
    print(
        f"scrapy-domainstate demo: {len(sites)} simulated sites on 127.0.0.1 "
        f"(http :{server.port}), {'with' if browser else 'without'} Chromium"
    )
    kept = "kept" if args.keep else "removed at the end; --keep DIR keeps it"
    print(f"work directory: {workdir} (store: domainstate/, logs: crawl-N.log, items: items-N.jsonl; {kept})")
    print()
    print("The simulated web (hosts <kind>-<n>.test):")
    for kind, (_, what) in MIX.items():
        if counts[kind]:
            print(f"  {kind:13} {counts[kind]:>4}  {what}")
    print()

    try:
        reports = []
        for number in (1, 2, 3):
            print(f"crawl {number}: the contacts spider over {len(sites)} sites ...", flush=True)
            report = await run_crawl(number, settings, sites_file, server, resolver, workdir)
            print(
                f"crawl {number}: {report.wall_time:.1f} s, {report.sent} requests, "
                f"{len(report.items)} pages with contacts",
                flush=True,
            )
            reports.append(report)
    finally:
        resolver.uninstall()
        server.close()
    first, confirming, second = reports  # learns, confirms, remembers

    by_kind = print_report(sites, first, second, browser)
    for kind, counted in per_kind(sites, confirming).items():
        if kind in by_kind:
            by_kind[kind]["confirming"] = counted
    print()
    print("What happened:")
    for line in explain(sites, first, second, browser, confirming):
        print("  - " + line)
    results = checks(sites, first, second, browser, confirming)
    print()
    print("Checks:")
    for check in results:
        print(f"  [{'ok' if check['ok'] else 'FAILED'}] {check['name']}: {check['detail']}")
    ok = all(check["ok"] for check in results)
    if args.json:
        summary = {
            "sites": len(sites),
            "browser": browser,
            "workdir": str(workdir),
            "mix": dict(counts),
            # the first and the last crawl (by_kind: crawl1, crawl2), and the one between them
            "crawls": [first.summary(), second.summary()],
            "confirming": confirming.summary(),
            "by_kind": by_kind,
            "lost_contacts": sorted(first.sites_with_contacts - second.sites_with_contacts),
            "checks": results,
            "ok": ok,
        }
        Path(args.json).write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    if not ok:
        print(
            "\nDEMO FAILED: the last crawl did not spend less for the same contacts, or a check failed.",
            file=sys.stderr,
        )
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.no_browser and not os.access("/usr/bin/chromium", os.X_OK):
        print("/usr/bin/chromium not found: install Debian's chromium, or run with --no-browser", file=sys.stderr)
        return 2
    from scrapy.utils.reactor import install_reactor

    install_reactor(ASYNCIO_REACTOR)
    from scrapy.utils.log import configure_logging
    from twisted.internet import reactor
    from twisted.internet.defer import ensureDeferred

    from scrapy_domainstate.testing.offline import loopback_only

    configure_logging({"LOG_INSTALL_ROOT_HANDLER": False})  # the crawls log to crawl-N.log
    logging.getLogger().setLevel(logging.INFO)
    if args.keep:
        workdir = Path(args.keep).resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(workdir / "domainstate", ignore_errors=True)  # a fresh store every run
    else:
        workdir = Path(tempfile.mkdtemp(prefix="domainstate-demo-"))
    status: list[int] = []

    async def run() -> None:
        try:
            status.append(await demo(reactor, args, workdir))
        finally:
            reactor.callLater(0, reactor.stop)

    def start() -> None:
        d = ensureDeferred(run())
        d.addErrback(lambda failure: (failure.printTraceback(), status.append(3)))

    began = time.monotonic()
    with loopback_only():
        reactor.callWhenRunning(start)
        reactor.run(installSignalHandlers=True)
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"The demo took {time.monotonic() - began:.0f} s ({os.cpu_count()} cores).")
    return status[0] if status else 3


if __name__ == "__main__":
    sys.exit(main())
