"""The browser route as users really set it up (issue 11), end to end.

Real Scrapy engine (``scrapy_domainstate/testing/crawl.py``), the add-on, real LMDB stores, the loopback sites and,
where a browser is involved, real headless Chromium through scrapy-playwright configured with
exactly the README's browser block (:func:`readme_browser_settings`) plus the loopback plumbing
(the table resolver and Chromium's ``--host-resolver-rules``). The six setups:

1. no browser handler (``scrapy startproject`` + the add-on line), and
   ``DOMAINSTATE_BROWSER_META = None``;
2. ``HTTPCACHE_ENABLED = True``, two crawls;
3. JavaScript challenges that pass after ``load`` (0.3 s, 3 s, a cookie set by a redirect),
   and one that never passes;
4. ``ROBOTSTXT_OBEY = True``;
5. ``scrapy shell``, with and without the browser;
6. the README's browser block: Chromium sends its own User-Agent.
"""

from __future__ import annotations

import logging
import os
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from scrapy.exceptions import IgnoreRequest

from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.record import Method, Outcome, State
from scrapy_domainstate.detect.classify import Classifier
from scrapy_domainstate.runtime.browser import BrowserRoute, rendered_by_playwright
from scrapy_domainstate.store.lmdb import LmdbStore
from scrapy_domainstate.testing.offline import CHROMIUM, chromium_launch_options
from scrapy_domainstate.testing.resolver import HOSTS_SETTING, REFUSED
from scrapy_domainstate.testing.sites import CF_DELAYED, CF_INTERACTIVE, CF_REDIRECT
from tests import ROOT

#: Real processes and real crawls, each test seconds long: run in CI, skipped by -m 'not slow'.
pytestmark = pytest.mark.slow

ADDON = {"scrapy_domainstate.Addon": 0}
BROWSER_START, BROWSER_END = ".. BROWSER-SETTINGS-START", ".. BROWSER-SETTINGS-END"


# ------------------------------------------------------------------ helpers


def readme_browser_settings() -> dict[str, Any]:
    """The settings of the README's browser block, executed as a ``settings.py`` would be."""
    text = (ROOT / "README.rst").read_text(encoding="utf-8")
    block = text[text.index(BROWSER_START) : text.index(BROWSER_END)]
    code = textwrap.dedent(block.split("::\n", 1)[1])
    namespace: dict[str, Any] = {}
    exec(compile(code, "README.rst (browser block)", "exec"), namespace)
    return {k: v for k, v in namespace.items() if k.isupper()}


def browser_setup(crawl_settings: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """The add-on with the README's browser block, on loopback (skips without Chromium)."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} not found: install Debian's chromium package for browser tests")
    readme = readme_browser_settings()
    launch = dict(readme["PLAYWRIGHT_LAUNCH_OPTIONS"])
    # loopback plumbing only: Chromium resolves from the test table and phones nobody home
    offline = chromium_launch_options(crawl_settings.get(HOSTS_SETTING), launch["executable_path"])["args"]
    launch["args"] = [*launch.get("args", []), *(a for a in offline if a not in launch.get("args", []))]
    return {**crawl_settings, **readme, "PLAYWRIGHT_LAUNCH_OPTIONS": launch, "ADDONS": ADDON, **extra}


def no_browser_setup(crawl_settings: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """``scrapy startproject`` plus the add-on line: Scrapy's own download handlers."""
    return {**crawl_settings, "ADDONS": ADDON, **extra}


def record_of(settings: dict[str, Any], domain: str) -> Any:
    store = LmdbStore(Config.from_settings(settings))
    store.open()
    try:
        return store.current(domain, time.time())
    finally:
        store.close()


def entries(settings: dict[str, Any], domain: str) -> list[tuple[Method, Outcome]]:
    return [(e.method, e.outcome) for e in record_of(settings, domain).recent]


def domainstate_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("scrapy_domainstate") and r.levelno == logging.WARNING and "no browser" in r.getMessage()
    ]


# ------------------------------------------------------------------ the route, decided at start-up


def test_the_route_needs_a_browser_handler() -> None:
    from scrapy.settings import Settings

    def route(**values: Any) -> BrowserRoute:
        settings = Settings(values)
        return BrowserRoute.check(Config.from_settings(settings), settings)

    handler = "scrapy_playwright.handler.ScrapyPlaywrightDownloadHandler"
    # startproject: Scrapy's own handlers
    off = route()
    assert not off.enabled
    assert "DOWNLOAD_HANDLERS" in (off.reason or "")
    assert not route(DOMAINSTATE_BROWSER_META=None).enabled
    assert "None" in (route(DOMAINSTATE_BROWSER_META=None).reason or "")
    on = route(DOWNLOAD_HANDLERS={"http": handler, "https": handler})
    assert on.enabled and on.schemes == {"http", "https"} and on.reason is None
    half = route(DOWNLOAD_HANDLERS={"https": handler})
    assert half.enabled and half.schemes == {"https"} and "http" in (half.reason or "")
    # a meta scrapy-playwright does not answer, with scrapy-playwright's render check: off
    custom = route(DOWNLOAD_HANDLERS={"http": handler, "https": handler}, DOMAINSTATE_BROWSER_META={"zyte": 1})
    assert not custom.enabled and "DOMAINSTATE_BROWSER_RENDERED" in (custom.reason or "")
    # your own handler and render check: trusted
    mine = route(
        DOMAINSTATE_BROWSER_META={"zyte_api_automap": {"browserHtml": True}},
        DOMAINSTATE_BROWSER_RENDERED="tests.scrapy.test_browser_setups.rendered_by_zyte",
    )
    assert mine.enabled and mine.rendered_check is rendered_by_zyte


def rendered_by_zyte(response: Any) -> bool:  # a user's render check, by dotted path
    return "zyte-api" in response.flags


def test_render_meta_bypasses_the_cache_and_waits_for_challenges() -> None:
    from scrapy.settings import Settings

    handler = "scrapy_playwright.handler.ScrapyPlaywrightDownloadHandler"
    settings = Settings({"DOWNLOAD_HANDLERS": {"http": handler, "https": handler}})
    route = BrowserRoute.check(Config.from_settings(settings), settings, Classifier())
    meta = route.meta_for({"playwright_page_methods": ["user's"]})
    assert meta["playwright"] is True
    assert meta["dont_cache"] is True
    assert meta["playwright_page_methods"][0] == "user's"
    wait = meta["playwright_page_methods"][1]
    assert wait.kwargs["timeout"] == 15.0
    assert route.meta_for({})["playwright_page_methods"][0] is not wait  # one per request
    unwaited = Settings({"DOWNLOAD_HANDLERS": settings["DOWNLOAD_HANDLERS"], "DOMAINSTATE_BROWSER_CHALLENGE_WAIT": 0})
    assert "playwright_page_methods" not in BrowserRoute.check(Config.from_settings(unwaited), unwaited).meta_for({})
    # what the wait calls a challenge: the plugin's own classifier
    assert route.is_challenge(403, b"<html><head><title>Just a moment...</title></head><body></body></html>")
    assert not route.is_challenge(200, b"<html><head><title>Shop</title></head><body>Welcome</body></html>")


# ------------------------------------------------------------------ 1. no browser


@pytest_twisted.ensureDeferred
async def test_no_browser_handler_records_no_render_and_skips_antibot_hard(
    sites: Any, crawl_settings: Any, run_crawl: Any, caplog: pytest.LogCaptureFixture
) -> None:
    settings = no_browser_setup(crawl_settings)
    soft, shell, hard = sites.url("cf-soft.test"), sites.url("js-shell.test"), sites.url("cf-hard.test")
    caplog.set_level(logging.INFO)
    first = await run_crawl(settings, [soft, sites.url("cf-soft.test", "/page1"), shell, hard])
    # one WARNING at start-up, naming the fix
    [warning] = domainstate_warnings(caplog)
    assert "DOWNLOAD_HANDLERS" in warning and "scrapy-playwright" in warning
    # nothing re-issued: every page was sent once, plainly
    assert "domainstate/browser_reissue" not in first.stats
    for host in ("cf-soft.test", "js-shell.test", "cf-hard.test"):
        assert not any(r.browser for r in sites.requests(host)), host
        assert sites.methods(host).count("GET") == (2 if host == "cf-soft.test" else 1), host
    # nothing recorded as a render
    for host in ("cf-soft.test", "js-shell.test", "cf-hard.test"):
        assert all(method is not Method.TAB for method, _ in entries(settings, host)), host
        assert record_of(settings, host).tab_total == 0, host
    # the script-only page is what the plain fetch saw: judged as fetched, no false render
    assert first.response_for(shell).domainstate["method"] == "fetch"
    # the hard block is real evidence (a plain fetch saw it): antibot-hard ...
    assert record_of(settings, "cf-hard.test").state is State.ANTIBOT_HARD
    # ... and without a browser its pages are skipped, with their reason: only the crawl's one
    # canary (a plain fetch, docs/SPEC.md section 2) is sent, and it is still blocked
    sites.reset_log()
    caplog.clear()
    page1 = sites.url("cf-hard.test", "/page1")
    second = await run_crawl(settings, [hard, page1])
    assert sites.methods("cf-hard.test") == ["GET"]
    assert second.stats["domainstate/canary"] == 1
    skipped = second.failures_for(hard) + second.failures_for(page1)
    assert len(skipped) == 1
    assert isinstance(skipped[0].exception, IgnoreRequest)
    assert "antibot-hard" in str(skipped[0].exception) and "no browser" in str(skipped[0].exception)
    assert skipped[0].domainstate["method"] == "skip"
    assert record_of(settings, "cf-hard.test").state is State.ANTIBOT_HARD
    assert len(domainstate_warnings(caplog)) == 1


@pytest_twisted.ensureDeferred
async def test_browser_meta_none_is_a_way_to_run(
    sites: Any, crawl_settings: Any, run_crawl: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # even with scrapy-playwright configured, None turns the route off
    settings = browser_setup(crawl_settings, DOMAINSTATE_BROWSER_META=None) if os.access(CHROMIUM, os.X_OK) else None
    if settings is None:
        settings = no_browser_setup(crawl_settings, DOMAINSTATE_BROWSER_META=None)
    caplog.set_level(logging.INFO)
    result = await run_crawl(settings, [sites.url("cf-soft.test"), sites.url("friendly.test")])
    [warning] = domainstate_warnings(caplog)
    assert "DOMAINSTATE_BROWSER_META is None" in warning
    assert "domainstate/browser_reissue" not in result.stats
    assert not any(r.browser for r in sites.requests("cf-soft.test"))
    # (no HEAD: the first request is the domain's probe, docs/SPEC.md section 2)
    assert [m for m, _ in entries(settings, "cf-soft.test")] == [Method.FETCH]
    # everything else as today
    assert result.response_for(sites.url("friendly.test")).emails == ["info@friendly.test"]
    assert entries(settings, "friendly.test") == [(Method.FETCH, Outcome.OK_CONTACT)]


# ------------------------------------------------------------------ 2. the HTTP cache


@pytest.mark.browser
@pytest_twisted.ensureDeferred
async def test_http_cache_never_answers_a_render_with_the_plain_copy(
    sites: Any, crawl_settings: Any, run_crawl: Any, tmp_path: Path
) -> None:
    settings = browser_setup(crawl_settings, HTTPCACHE_ENABLED=True, HTTPCACHE_DIR=str(tmp_path / "httpcache"))
    url = sites.url("cf-soft.test")
    first = await run_crawl(settings, [url])
    page = first.response_for(url)
    assert page.browser and page.emails == ["info@cf-soft.test"]
    assert "cached" not in page.response.flags
    assert page.domainstate["method"] == "tab"
    assert [(m, o) for m, o in entries(settings, "cf-soft.test")] == [
        (Method.FETCH, Outcome.ANTIBOT),
        (Method.TAB, Outcome.OK_CONTACT),
    ]
    sites.reset_log()
    second = await run_crawl(settings, [url])
    # the plain GET comes from the cache (not evidence); the render does not
    assert [r.browser for r in sites.requests("cf-soft.test", path="/")] == [True, True]  # challenge + reload
    page = second.response_for(url)
    assert page.browser and "cached" not in page.response.flags
    assert page.emails == ["info@cf-soft.test"]
    assert second.stats["domainstate/method/cache"] == 1
    assert [(m, o) for m, o in entries(settings, "cf-soft.test")][-1] == (Method.TAB, Outcome.OK_CONTACT)
    assert record_of(settings, "cf-soft.test").fetch_total == 1  # the cached copy was not counted


# ------------------------------------------------------------------ 3. real challenges


@pytest.mark.browser
@pytest_twisted.ensureDeferred
async def test_challenges_that_pass_after_load(sites: Any, crawl_settings: Any, run_crawl: Any) -> None:
    sites.set_kind("cf-delayed-slow.test", CF_DELAYED, delay=3.0)
    settings = browser_setup(crawl_settings)
    hosts = ("cf-delayed.test", "cf-delayed-slow.test", "cf-redirect.test")
    urls = [sites.url(host) for host in hosts]
    result = await run_crawl(settings, urls)
    for host, url in zip(hosts, urls, strict=True):
        page = result.response_for(url)
        assert page.browser, host
        assert page.emails == [f"info@{host}"], host
        assert b"Just a moment..." not in page.body, host
        assert page.status == 200 and page.domainstate["original_status"] == 403, host
        assert entries(settings, host)[-1] == (Method.TAB, Outcome.OK_CONTACT), host
        assert record_of(settings, host).state is State.ANTIBOT_SOFT, host
    # the slow one really waited for its timer (3 s after load), in the browser
    assert result.response_for(urls[1]).meta["download_latency"] >= 3.0
    # the redirect: the answer was POSTed, the cookie came back with the 302
    logged = sites.requests("cf-redirect.test")
    assert [r.method for r in logged if r.browser][:2] == ["GET", "POST"]
    assert any(r.browser and r.method == "GET" and r.cookies for r in logged)
    assert result.response_for(urls[2]).url == urls[2]


@pytest.mark.browser
@pytest.mark.timeout(120)
@pytest_twisted.ensureDeferred
async def test_a_challenge_that_never_passes_ends_as_antibot_within_the_bound(
    sites: Any, crawl_settings: Any, run_crawl: Any
) -> None:
    bound = 1.5
    settings = browser_setup(crawl_settings, DOMAINSTATE_BROWSER_CHALLENGE_WAIT=bound)
    url = sites.url(f"{CF_INTERACTIVE}.test")
    result = await run_crawl(settings, [url])
    [page] = result.responses_for(url)
    assert page.browser
    assert b"Verify you are human" in page.body
    assert page.emails == []
    assert page.meta["download_latency"] >= bound  # it waited for the challenge, then gave up
    assert entries(settings, f"{CF_INTERACTIVE}.test") == [
        (Method.FETCH, Outcome.ANTIBOT),
        (Method.TAB, Outcome.ANTIBOT),
    ]


@pytest.mark.browser
@pytest_twisted.ensureDeferred
async def test_without_the_wait_the_render_returns_the_challenge(
    sites: Any, crawl_settings: Any, run_crawl: Any
) -> None:
    # what the issue saw: the page is taken at load, before the challenge's timer fires
    settings = browser_setup(crawl_settings, DOMAINSTATE_BROWSER_CHALLENGE_WAIT=0)
    sites.set_kind(f"{CF_REDIRECT}-nowait.test", CF_REDIRECT, delay=2.0)  # a margin for busy machines
    url = sites.url(f"{CF_REDIRECT}-nowait.test")
    result = await run_crawl(settings, [url])
    [page] = result.responses_for(url)
    assert page.browser and b"Just a moment..." in page.body
    assert entries(settings, f"{CF_REDIRECT}-nowait.test")[-1] == (Method.TAB, Outcome.ANTIBOT)


# ------------------------------------------------------------------ 4. robots.txt


@pytest_twisted.ensureDeferred
async def test_robots_txt_only_for_domains_the_plugin_visits(
    sites: Any, crawl_settings: Any, run_crawl: Any, caplog: pytest.LogCaptureFixture
) -> None:
    crawl_settings[HOSTS_SETTING] = {"refused-robots.test": REFUSED}
    settings = no_browser_setup(
        crawl_settings,
        ROBOTSTXT_OBEY=True,
        DOMAINSTATE_BROWSER_META=None,
        # cold within this one crawl of 5 empty pages (the rule's own tests: tests/unit)
        DOMAINSTATE_COLD_THRESHOLD=5,
        DOMAINSTATE_COLD_CONFIRM_AFTER=0,
        # (a cold domain's contact pages, and so its robots.txt, are fetched by default: that
        # rule's crawl is tests/scrapy/test_rules_e2e.py)
        DOMAINSTATE_COLD_CONTACT_PAGES=False,
    )
    # (two requests each: the first, sent alone, is the probe; the second confirms its dead signal)
    urls = [
        *[sites.url("dead-root-robots.test")] * 2,
        *[sites.url("refused-robots.test")] * 2,
        *[sites.url("cold-robots.test", p) for p in ("/", "/page1", "/page2", "/contact", "/")],
        *[sites.url("friendly-robots.test", p) for p in ("/", "/page1")],
    ]
    caplog.set_level(logging.INFO)
    first = await run_crawl(settings, urls)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [r.getMessage() for r in caplog.records]
    assert record_of(settings, "dead-root-robots.test").state is State.DEAD
    assert record_of(settings, "refused-robots.test").state is State.DEAD
    assert record_of(settings, "cold-robots.test").state is State.COLD
    # robots.txt answers (404 here) are not evidence: the friendly site has its two pages only
    assert entries(settings, "friendly-robots.test") == [(Method.FETCH, Outcome.OK_CONTACT)] * 2
    assert record_of(settings, "friendly-robots.test").fetch_total == 2
    assert "domainstate/url_dead/marked" not in first.stats  # the 404 of /robots.txt marked nothing
    assert first.stats["robotstxt/response_count"] == 3  # dead-root, cold, friendly; refused: no answer

    sites.reset_log()
    caplog.clear()
    second = await run_crawl(settings, urls)
    for host in ("dead-root-robots.test", "cold-robots.test"):
        assert sites.requests(host) == [], host  # not even /robots.txt
    assert [r.path for r in sites.requests("friendly-robots.test")] == ["/robots.txt", "/", "/page1"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [r.getMessage() for r in caplog.records]
    # robots.txt of the refused host was not even tried: no DNS lookup, no connection
    assert second.resolver is not None
    assert "refused-robots.test" not in second.resolver.queries
    assert second.stats["robotstxt/response_count"] == 1


# ------------------------------------------------------------------ 6. the README's block


@pytest.mark.browser
@pytest_twisted.ensureDeferred
async def test_the_readme_browser_block_sends_chromiums_own_headers(
    sites: Any, crawl_settings: Any, run_crawl: Any
) -> None:
    readme = readme_browser_settings()
    assert readme["PLAYWRIGHT_PROCESS_REQUEST_HEADERS"] is None
    assert readme.get("DOMAINSTATE_BROWSER_META", {"playwright": True}) == {"playwright": True}
    settings = browser_setup(crawl_settings)
    result = await run_crawl(settings, [sites.url("js-shell.test")])
    assert result.response_for(sites.url("js-shell.test")).emails == ["info@js-shell.test"]
    rendered = [r for r in sites.requests("js-shell.test") if r.browser]
    assert rendered
    for request in rendered:
        assert "Scrapy" not in request.user_agent
        assert "Chrome/" in request.user_agent
    assert rendered_by_playwright(result.response_for(sites.url("js-shell.test")).response)


# ------------------------------------------------------------------ 5. scrapy shell

#: ``scrapy shell -c``: what the plugin recorded for the fetched page, as JSON on one line
SHELL_CODE = """__import__("json").dumps({
    "status": response.status,
    "flags": response.flags,
    "method": response.meta["domainstate"]["method"],
    "emails": sorted(set(__import__("re").findall(r"info@[\\w.-]+\\.test", response.text))),
    "recent": [[e.method.value, e.outcome.value] for e in
               __import__("scrapy_domainstate.shell", fromlist=["x"]).domainstate(response.url)["record"].recent],
    "tab_total": __import__("scrapy_domainstate.shell", fromlist=["x"]).domainstate(response.url)["record"].tab_total,
}, default=str)"""


def scrapy_shell(url: str, store: Path, *settings: str, timeout: float = 180) -> Any:
    """``scrapy shell -c SHELL_CODE URL`` in example_project/, its store in ``store``."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "scrapy", "shell"]
    for setting in (
        f"DOMAINSTATE_LMDB_PATH={store}",
        "TWISTED_DNS_RESOLVER=scrapy_domainstate.testing.resolver.TableResolver",
        "HTTPPROXY_ENABLED=False",
        "TELNETCONSOLE_ENABLED=False",
        "LOG_LEVEL=INFO",
        *settings,
    ):
        cmd += ["-s", setting]
    cmd += ["-c", SHELL_CODE, url]
    proc = subprocess.run(
        cmd, cwd=ROOT / "example_project", env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [line for line in proc.stdout.strip().splitlines() if line.startswith("{")]
    assert lines, f"no JSON from the shell:\n{proc.stdout}\n{proc.stderr[-3000:]}"
    import json

    return json.loads(lines[-1]), proc.stderr


@pytest_twisted.ensureDeferred
async def test_shell_without_a_browser_records_no_render(sites: Any, tmp_path: Path) -> None:
    from twisted.internet.threads import deferToThread

    # the old README recipe: Scrapy's own handlers in the shell
    url = sites.url("cf-soft-shell.test")
    out, log = await deferToThread(scrapy_shell, url, tmp_path / "ds", "DOWNLOAD_HANDLERS={}")
    assert out["status"] == 403 and "playwright" not in out["flags"]
    assert out["method"] == "fetch"
    assert out["recent"] == [["fetch", "antibot"]]
    assert out["tab_total"] == 0
    assert not any(r.browser for r in sites.requests("cf-soft-shell.test"))
    # not re-issued (the example project obeys robots.txt: that request is not the page's)
    assert [r.method for r in sites.requests("cf-soft-shell.test") if r.path != "/robots.txt"] == ["GET"]
    assert "no browser" in log and "DOWNLOAD_HANDLERS" in log


@pytest.mark.browser
@pytest.mark.timeout(240)
@pytest_twisted.ensureDeferred
async def test_shell_with_the_browser_renders(sites: Any, tmp_path: Path) -> None:
    import json

    from twisted.internet.threads import deferToThread

    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} not found")
    # the example project's own settings (scrapy-playwright), with Chromium on loopback
    launch = json.dumps(chromium_launch_options())
    url = sites.url("cf-soft-shell2.test")
    out, log = await deferToThread(scrapy_shell, url, tmp_path / "ds", f"PLAYWRIGHT_LAUNCH_OPTIONS={launch}")
    assert "playwright" in out["flags"], log[-3000:]
    assert out["method"] == "tab"
    assert out["emails"] == ["info@cf-soft-shell2.test"]
    assert out["recent"] == [["fetch", "antibot"], ["tab", "ok-contact"]]
    assert out["tab_total"] == 1
    assert any(r.browser for r in sites.requests("cf-soft-shell2.test"))


# ------------------------------------------------------------------ a browser that is not there


@pytest_twisted.ensureDeferred
async def test_a_missing_browser_executable_turns_the_route_off_at_start_up(
    sites: Any, crawl_settings: Any, run_crawl: Any, caplog: pytest.LogCaptureFixture
) -> None:
    settings = browser_setup(crawl_settings)
    settings["PLAYWRIGHT_LAUNCH_OPTIONS"] = {
        **settings["PLAYWRIGHT_LAUNCH_OPTIONS"],
        "executable_path": "/nope/chromium",
    }
    caplog.set_level(logging.INFO)
    soft = sites.url("cf-soft.test")
    result = await run_crawl(settings, [soft, sites.url("cf-soft.test", "/page1")])
    [warning] = domainstate_warnings(caplog)
    assert "executable_path '/nope/chromium' is not an executable file" in warning
    assert result.stats["domainstate/browser/off"] == 1
    assert "domainstate/browser_reissue" not in result.stats
    assert not any(r.browser for r in sites.requests("cf-soft.test"))
    assert all(method is not Method.TAB for method, _ in entries(settings, "cf-soft.test"))


@pytest_twisted.ensureDeferred
async def test_a_browser_that_does_not_launch_turns_the_route_off_once(
    sites: Any, crawl_settings: Any, run_crawl: Any, caplog: pytest.LogCaptureFixture
) -> None:
    settings = browser_setup(crawl_settings)
    # an executable that is not a browser: the start-up check passes, the first launch fails
    settings["PLAYWRIGHT_LAUNCH_OPTIONS"] = {**settings["PLAYWRIGHT_LAUNCH_OPTIONS"], "executable_path": "/bin/false"}
    caplog.set_level(logging.INFO)
    urls = [sites.url("cf-soft.test"), sites.url("cf-soft.test", "/page1"), sites.url("friendly.test")]
    result = await run_crawl(settings, urls)
    started = [r.getMessage() for r in caplog.records if "browser route on" in r.getMessage()]
    assert started and "chromium at /bin/false" in started[0]
    launch = [r.getMessage() for r in caplog.records if "did not launch" in r.getMessage()]
    assert len(launch) == 1, launch
    assert result.stats["domainstate/browser/launch_failed"] == 1
    # no Playwright traceback per request, and nothing recorded as a render
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [r.getMessage() for r in caplog.records]
    assert all(method is not Method.TAB for method, _ in entries(settings, "cf-soft.test"))
    assert record_of(settings, "cf-soft.test").tab_total == 0
    # the friendly site is unaffected
    assert result.response_for(sites.url("friendly.test")).status == 200
