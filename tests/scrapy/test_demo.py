"""The offline demo (``example_project/demo.py``) as a check: the second crawl spends less.

The demo tests run it as a subprocess on a small population (``--sites 60``) and read its
``--json`` summary; the demo serves its simulated web itself, on loopback. The last test runs
the example project's spider with ``scrapy crawl`` against this session's test server.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from twisted.internet.threads import deferToThread

from tests import ROOT

#: Real processes and real crawls, each test seconds long: run in CI, skipped by -m 'not slow'.
pytestmark = pytest.mark.slow

DEMO = ROOT / "example_project" / "demo.py"
CHROMIUM = "/usr/bin/chromium"
DEAD_OR_COLD = ("dead-root", "gone", "nxdomain", "refused", "cold")


def run_demo(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    summary = tmp_path / "summary.json"
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    proc = subprocess.run(
        [sys.executable, str(DEMO), "--sites", "60", "--json", str(summary), *args],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, f"demo failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc, json.loads(summary.read_text())


def sent_to(kind: dict[str, Any]) -> int:
    """Everything a kind's sites received, and every DNS lookup of their names."""
    return kind["plain"] + kind["browser"] + kind["head"] + kind["lookups"]


def assert_second_crawl_spends_less(summary: dict[str, Any]) -> None:
    first, second = summary["crawls"]
    by_kind = summary["by_kind"]
    assert summary["ok"], summary["checks"]
    assert all(check["ok"] for check in summary["checks"]), summary["checks"]
    assert summary["sites"] == 60
    # every kind of site is in the population
    assert set(by_kind) >= {"friendly", "cold", "dead-root", "nxdomain", "refused", "cf-soft", "cf-hard"}
    # less traffic, the same contacts
    assert second["requests"] < first["requests"]
    assert second["received_by_sites"] < first["received_by_sites"]
    if summary["browser"]:
        assert second["sites_with_contacts"] >= 0.95 * first["sites_with_contacts"]
    # (without a browser, pages behind walls are got only when a plain fetch happens to pass
    # them: the demo's own "same contacts" check, asserted above, sets those sites aside)
    assert first["sites_with_contacts"] >= 20
    # the probe is each site's first request, sent alone: no HEAD in any crawl (by default)
    assert first["head"] == 0
    assert second["head"] == 0
    # dead and cold sites: never judged on one visit; confirmed by the crawl between (one
    # request or lookup per dead site), then not a single request or DNS lookup
    for kind in DEAD_OR_COLD:
        assert sent_to(by_kind[kind]["crawl1"]) > 0, kind
        assert sent_to(by_kind[kind]["crawl2"]) == 0, (kind, by_kind[kind]["crawl2"])
    for kind in ("dead-root", "gone", "nxdomain", "refused"):
        # the confirmation visit costs no more than the first (its home page once more)
        assert sent_to(by_kind[kind]["confirming"]) <= sent_to(by_kind[kind]["crawl1"]), kind
        assert by_kind[kind]["crawl1"]["states"] == {"unknown": by_kind[kind]["sites"]}, kind
        assert by_kind[kind]["confirming"]["states"] == {"dead": by_kind[kind]["sites"]}, kind
    assert by_kind["cold"]["crawl1"]["states"] == {"unknown": by_kind["cold"]["sites"]}
    assert by_kind["cold"]["confirming"]["states"] == {"cold": by_kind["cold"]["sites"]}
    assert by_kind["friendly"]["crawl1"]["states"] == {"friendly": by_kind["friendly"]["sites"]}
    # a site whose pages have contacts behind an expired certificate is misconfigured, not
    # abandoned: never dead by its certificate alone, its contacts found in both crawls
    tls = by_kind["tls-expired"]
    assert "dead" not in tls["crawl2"]["states"], tls
    assert tls["crawl2"]["pages"] >= tls["crawl1"]["pages"] > 0, tls
    assert second["skipped"] > first["skipped"]
    # the stores' state distributions cover every site
    assert sum(first["states"].values()) >= 60
    dead_sites = sum(by_kind[kind]["sites"] for kind in ("dead-root", "gone", "nxdomain", "refused"))
    assert second["states"]["dead"] >= dead_sites


def test_demo_without_browser(tmp_path: Path) -> None:
    proc, summary = run_demo(tmp_path, "--no-browser")
    assert_second_crawl_spends_less(summary)
    assert summary["browser"] is False
    # the printed report
    out = proc.stdout
    for text in (
        "crawl 1",
        "crawl 2",
        "crawl 3",
        "requests sent by Scrapy",
        "State of the 60 domains",
        "What happened",
        "Checks",
    ):
        assert text in out, text
    assert "FAILED" not in out


@pytest.mark.browser
def test_demo_with_browser(tmp_path: Path) -> None:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} not found: install Debian's chromium package for browser tests")
    _, summary = run_demo(tmp_path, "--keep", str(tmp_path / "work"))
    assert_second_crawl_spends_less(summary)
    first = summary["crawls"][0]
    by_kind = summary["by_kind"]
    assert first["browser_renders"] > 0
    assert first["received_from_browser"] > 0
    # the browser passed the Cloudflare JS challenge that plain fetches never pass
    assert by_kind["cf-soft"]["crawl1"]["pages"] > 0
    assert by_kind["cf-soft"]["crawl2"]["pages"] > 0
    # antibot-hard: straight to the browser in the last crawl, but for one plain GET per site
    # (the crawl's canary, which the wall still answers)
    assert by_kind["cf-hard"]["crawl1"]["states"] == {"antibot-hard": by_kind["cf-hard"]["sites"]}
    assert by_kind["cf-hard"]["crawl2"]["plain"] <= by_kind["cf-hard"]["sites"]
    assert by_kind["cf-hard"]["crawl2"]["browser"] > 0
    # script-only pages: rendered, contacts found
    assert by_kind["js-shell"]["crawl1"]["pages"] > 0
    # --keep: the store, the logs and the items are there
    work = tmp_path / "work"
    assert (work / "domainstate").is_dir()
    assert (work / "crawl-3.log").stat().st_size > 0
    assert len((work / "items-1.jsonl").read_text().splitlines()) == first["items"]


def test_demo_fails_when_the_second_crawl_is_not_cheaper() -> None:
    spec = importlib.util.spec_from_file_location("demo", DEMO)
    assert spec is not None and spec.loader is not None
    demo = sys.modules.setdefault("demo", importlib.util.module_from_spec(spec))
    spec.loader.exec_module(demo)
    sites = [demo.Site("friendly-1.test", "friendly", "http://friendly-1.test/", ("friendly-1.test",))]
    item = {"site": "http://friendly-1.test/", "emails": ["info@friendly-1.test"], "phones": [], "social": []}
    first = demo.CrawlReport(1, stats={"downloader/request_count": 5}, items=[item])
    first.received = [("friendly-1.test", "GET", False)] * 5
    second = demo.CrawlReport(2, stats={"downloader/request_count": 5}, items=[item])
    second.received = [("friendly-1.test", "HEAD", False)] + [("friendly-1.test", "GET", False)] * 4
    results = {check["name"]: check["ok"] for check in demo.checks(sites, first, second)}
    assert results == {
        "fewer requests": False,
        "fewer requests received": False,
        "same contacts": True,
        "no HEAD to friendly sites": False,
        "nothing sent to dead or cold sites": True,
    }


# -- the example project on its own: `scrapy crawl contacts` ---------------------------------


def scrapy_crawl(args: list[str], store: Path) -> subprocess.CompletedProcess[str]:
    from scrapy_domainstate.testing.offline import chromium_launch_options

    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    cmd = [
        sys.executable,
        "-m",
        "scrapy",
        "crawl",
        "contacts",
        "-s",
        f"DOMAINSTATE_LMDB_PATH={store}",
        "-s",
        "TWISTED_DNS_RESOLVER=scrapy_domainstate.testing.resolver.TableResolver",
        "-s",
        "PLAYWRIGHT_LAUNCH_OPTIONS=" + json.dumps(chromium_launch_options()),
        "-s",
        "HTTPPROXY_ENABLED=False",
        "-s",
        "REMOTE_CONTROL_ENABLED=False",
        *args,
    ]
    return subprocess.run(cmd, cwd=DEMO.parent, env=env, capture_output=True, text=True, timeout=120, check=False)


def pages_sent(sites: Any, host: str) -> list[str]:
    return [r.method for r in sites.requests(host) if r.path != "/robots.txt"]


@pytest_twisted.ensureDeferred
async def test_example_project_scrapy_crawl(sites: Any, tmp_path: Path) -> None:
    """``scrapy crawl contacts -a urls=... -O FILE`` in example_project, three times on one store."""
    friendly, cold, dead = sites.url("friendly-cli.test"), sites.url("cold-cli.test"), sites.url("dead-root-cli.test")
    sites_file = tmp_path / "sites.txt"
    sites_file.write_text(f"# three sites\n{friendly}\n{cold}\n\n{dead}\n")
    store = tmp_path / "ds"
    out1, out2, out3 = tmp_path / "items-1.jsonl", tmp_path / "items-2.jsonl", tmp_path / "items-3.jsonl"
    first = await deferToThread(scrapy_crawl, ["-a", f"sites={sites_file}", "-O", str(out1)], store)
    assert first.returncode == 0, first.stderr
    items = [json.loads(line) for line in out1.read_text().splitlines()]
    # home page and its "Contact" link; the cold site has none, the dead one is dead
    assert sorted(item["url"] for item in items) == [friendly, sites.url("friendly-cli.test", "/contact")]
    assert items[0] == {
        "site": friendly,
        "url": items[0]["url"],
        "emails": ["info@friendly-cli.test"],
        "phones": ["+15550100"],
        "social": [],
        "via": "fetch",
    }
    # the project obeys robots.txt (one per site, first); then the pages (the first request of a
    # site goes alone as its probe: no HEAD)
    assert [r.path for r in sites.requests("friendly-cli.test")].count("/robots.txt") == 1
    assert sites.requests("friendly-cli.test")[0].path == "/robots.txt"
    assert pages_sent(sites, "friendly-cli.test") == ["GET", "GET"]
    assert pages_sent(sites, "dead-root-cli.test") == ["GET"]
    # one dead signal is never a verdict: the next visit confirms it
    assert "'domainstate/transition/unknown/dead'" not in first.stderr
    # -a urls=: the same sites again; the dead one's second dead signal makes it dead
    sites.reset_log()
    second = await deferToThread(scrapy_crawl, ["-a", f"urls={friendly},{dead}", "-O", str(out2)], store)
    assert second.returncode == 0, second.stderr
    assert len(out2.read_text().splitlines()) == 2
    assert pages_sent(sites, "friendly-cli.test") == ["GET", "GET"]
    assert pages_sent(sites, "dead-root-cli.test") == ["GET"]
    assert "'domainstate/transition/unknown/dead': 1" in second.stderr
    # a third time: the dead one is skipped, nothing sent
    sites.reset_log()
    third = await deferToThread(scrapy_crawl, ["-a", f"urls={friendly},{dead}", "-O", str(out3)], store)
    assert third.returncode == 0, third.stderr
    assert len(out3.read_text().splitlines()) == 2
    assert sites.requests("dead-root-cli.test") == []  # not even its robots.txt
    assert "'domainstate/method/skip': 1" in third.stderr


def test_quick_is_a_smaller_web_with_the_same_checks() -> None:
    spec = importlib.util.spec_from_file_location("demo_args", DEMO)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (its dataclasses look their module up)
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    assert module.parse_args([]).sites == 300
    assert module.parse_args(["--quick"]).sites == module.QUICK_SITES == 60
    assert module.parse_args(["--quick", "--sites", "40"]).sites == 40
