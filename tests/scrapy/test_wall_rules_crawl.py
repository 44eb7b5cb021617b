"""Rules of the user's own in a real crawl, and ``scrapy domainstate explain`` on what it learned
(issue 26, parts 4 and 5).

Scrapy's engine against the loopback sites, a real LMDB store; the command runs as a user runs
it, a subprocess outside a project with ``-s DOMAINSTATE_LMDB_PATH=...``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest_twisted
from twisted.internet.threads import deferToThread

from scrapy_domainstate.core.record import Outcome, State
from tests.scrapy.test_e2e import ds, record_of, states
from tests.scrapy.test_first_hour import _crawl, _project
from tests.tools.test_command import ok, scrapy

#: A friendly site's pages are walls to this rule (it names the site's own e-mail link), and the
#: AWS WAF challenge of a partner site is excused by an exception.
RULES = {
    "walls": [
        {
            "name": "acme-ban",
            "body": "mailto:info@friendly-walled.test",
            "domain": "friendly-walled.test",
            "grade": "hard",
            "vendor": "acme",
        }
    ],
    "never": [{"name": "partner", "domain": "aws-waf-partner.test"}],
}


def pages(sites: Any, host: str, n: int = 3) -> list[str]:
    return [sites.url(host, path) for path in ("/", "/page1", "/page2", "/contact")[:n]]


@pytest_twisted.ensureDeferred
async def test_a_user_rule_walls_a_fine_site_and_an_exception_clears_a_flagged_one(
    sites: Any, crawl_settings: Any, run_crawl: Any, tmp_path: Path
) -> None:
    settings = {**ds(crawl_settings), "DOMAINSTATE_WALL_RULES": RULES}
    hosts = ("friendly-walled.test", "friendly.test", "aws-waf-partner.test", "aws-waf.test")
    # (the control gets one page: its HEAD probe and GET are two anti-bot answers, a third
    # would make it antibot-hard)
    urls = [url for host in hosts[:3] for url in pages(sites, host)] + pages(sites, "aws-waf.test", 1)
    result = await run_crawl(settings, urls)
    learned = states(settings, *hosts)
    assert learned == {
        # the built-in classifier calls it fine (the control next to it); the rule: a hard block
        "friendly-walled.test": State.ANTIBOT_HARD,
        "friendly.test": State.UNKNOWN,
        # flagged by the built-in classifier (the control); the exception keeps it clean
        "aws-waf-partner.test": State.UNKNOWN,
        "aws-waf.test": State.ANTIBOT_SOFT,
    }
    walled = record_of(settings, "friendly-walled.test")
    antibot = [e for e in walled.recent if e.outcome is Outcome.ANTIBOT]
    assert antibot and {e.error_class for e in antibot} == {"block:acme:rule:acme-ban"}
    assert all(e.status == 200 for e in antibot)
    assert walled.fetch_ok == 0  # a page judged a wall never counts as useful
    partner = record_of(settings, "aws-waf-partner.test")
    assert partner.recent and all(e.outcome is not Outcome.ANTIBOT for e in partner.recent)
    assert {e.status for e in partner.recent if e.method.value == "fetch"} == {202}
    control = record_of(settings, "aws-waf.test")
    assert "challenge:aws:x-amzn-waf-action" in {e.error_class for e in control.recent if e.outcome is Outcome.ANTIBOT}
    assert result.stats["domainstate/outcome/antibot"] >= 2

    # ``explain`` on the store the crawl wrote, with the project's rules (-s, as JSON)
    db = crawl_settings["DOMAINSTATE_LMDB_PATH"]
    rules = json.dumps(RULES)
    url = sites.url("friendly-walled.test", "/page1")
    proc = ok(await deferToThread(scrapy, "explain", url, "-s", f"DOMAINSTATE_WALL_RULES={rules}", cwd=tmp_path, db=db))
    text = proc.stdout
    assert text.startswith("friendly-walled.test  (key of ")
    assert "  decision now: browser" in text
    assert "  state:        antibot-hard, since " in text and "expires 20" in text
    assert "why:  a hard block" in text
    assert (
        "plain GET 200 -> antibot [block:acme:rule:acme-ban]: hard block, vendor acme: your wall rule 'acme-ban'"
        " (hard, vendor acme): body containing 'mailto:info@friendly-walled.test', on friendly-walled.test"
        " (DOMAINSTATE_WALL_RULES)"
    ) in text
    assert "a plain fetch that passes returns it to antibot-soft" in text
    assert "-> antibot-soft" in text and "it expires in 89d 23h" in text

    # the built-in challenge, explained without any rules of the user's: vendor, marker, header
    control_text = ok(await deferToThread(scrapy, "explain", "aws-waf.test", cwd=tmp_path, db=db)).stdout
    assert "  decision now: fetch-then-browser" in control_text
    assert "  state:        antibot-soft" in control_text
    assert (
        "202 -> antibot [challenge:aws:x-amzn-waf-action]: challenge (soft), vendor aws: built-in marker aws"
        " 'x-amzn-waf-action': header 'x-amzn-waf-action'"
    ) in control_text
    assert "-> antibot-hard" in control_text and "restarts its TTL" in control_text
    assert "DOMAINSTATE_WALL_RULES = {'never': [{'domain': 'aws-waf.test'}]}" in control_text
    # a rule's evidence read without the rule in the settings still names it
    bare = ok(await deferToThread(scrapy, "explain", "friendly-walled.test", cwd=tmp_path, db=db)).stdout
    assert "your wall rule 'acme-ban' (vendor acme; DOMAINSTATE_WALL_RULES, not in the settings read now)" in bare
    # the report shows each anti-bot domain's evidence, and the command that explains it
    report = tmp_path / "report.html"
    ok(await deferToThread(scrapy, "report", "-o", str(report), cwd=tmp_path, db=db))
    page = report.read_text("utf-8")
    assert page.count('<td class="evidence">') == 2  # friendly-walled.test and aws-waf.test only
    assert '<td class="evidence"><code>GET 200 block:acme:rule:acme-ban, 20' in page
    assert "<td><code>scrapy domainstate explain friendly-walled.test</code></td>" in page
    assert '<tr id="ev-friendly-walled.test">' in page
    assert '<a href="#ev-friendly-walled.test" title="GET 200 block:acme:rule:acme-ban, 20' in page  # the link
    assert '<a href="#ev-aws-waf.test" title="' in page
    # a domain never seen
    fresh = ok(await deferToThread(scrapy, "explain", "never-seen.test", cwd=tmp_path, db=db)).stdout
    assert "no record: never seen, or swept" in fresh


@pytest_twisted.ensureDeferred
async def test_a_spider_attribute_overrides_the_rules_of_the_settings(
    sites: Any, crawl_settings: Any, run_crawl: Any
) -> None:
    # the settings' exception would keep the WAF site clean; the spider's rules replace them
    settings = {**ds(crawl_settings), "DOMAINSTATE_WALL_RULES": {"never": [{"domain": "aws-waf-own.test"}]}}
    mine = {"walls": [{"name": "teapot", "header": {"content-type": "text/html"}, "grade": "soft", "vendor": "pot"}]}
    hosts = ("friendly-own.test", "aws-waf-own.test", "cold-pred.test")
    predicate = f"{__name__}.cold_is_a_ban"  # (the spider's predicate is asked first)
    urls = [u for h in hosts for u in pages(sites, h, 1)]
    await run_crawl(settings, urls, domainstate_wall_rules=mine, domainstate_wall_predicate=predicate)
    assert states(settings, *hosts) == {
        "friendly-own.test": State.ANTIBOT_SOFT,
        "aws-waf-own.test": State.ANTIBOT_SOFT,
        "cold-pred.test": State.ANTIBOT_HARD,
    }
    assert {e.error_class for e in record_of(settings, "cold-pred.test").recent} == {"block:pred:predicate"}
    assert PREDICATE_SAW and all(seen.host == "cold-pred.test" for seen in PREDICATE_SAW)
    assert {e.error_class for e in record_of(settings, "friendly-own.test").recent if e.method.value == "fetch"} == {
        "challenge:pot:rule:teapot"
    }


PREDICATE_SAW: list[Any] = []


def cold_is_a_ban(response: Any) -> Any:
    """A predicate: every page of cold-pred.test is a hard block of vendor 'pred'."""
    if response.host == "cold-pred.test":
        PREDICATE_SAW.append(response)
        return ("hard", "pred")
    return None


# ------------------------------------------------------------------ start-up errors


def test_a_bad_rule_stops_scrapy_crawl_with_one_error_line(tmp_path: Path) -> None:
    root = _project(tmp_path, 'DOMAINSTATE_WALL_RULES = {"walls": [{"status": 403, "grade": "medium"}]}\n')
    proc = _crawl(root, "-s", f"DOMAINSTATE_LMDB_PATH={tmp_path / 'ds'}")
    assert proc.returncode == 1, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if " ERROR: " in line]
    assert len(errors) == 1, errors
    assert "DOMAINSTATE_WALL_RULES['walls'][0]: grade must be 'soft' or 'hard', got 'medium'" in errors[0]
    assert "Traceback" not in proc.stderr
    # the predicate's path is imported at start-up
    proc = _crawl(root, "-s", "DOMAINSTATE_WALL_RULES={}", "-s", "DOMAINSTATE_WALL_PREDICATE=firsthour.walls.nope")
    assert proc.returncode == 1, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if " ERROR: " in line]
    assert len(errors) == 1 and "DOMAINSTATE_WALL_PREDICATE: cannot import 'firsthour.walls'" in errors[0], errors
