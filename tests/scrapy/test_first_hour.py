"""What a new user meets in the first hour (issue 15): the Python API, the start-up and
close lines, stats that add up, the exit status when the store cannot open, and requests
re-checked when they leave the slot queue.

Real parts throughout: Scrapy's engine, the loopback sites, real LMDB files, and ``scrapy
crawl`` run as a subprocess where the exit status is the point.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted

import scrapy_domainstate
from scrapy_domainstate import open_store
from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.policy import Decision
from scrapy_domainstate.core.record import DomainStat, State
from scrapy_domainstate.detect import scan as textscan
from scrapy_domainstate.store import StoreError
from scrapy_domainstate.store.lmdb import LmdbStore
from tests import ROOT, SEED_READINGS

#: Real processes and real crawls, each test seconds long: run in CI, skipped by -m 'not slow'.
pytestmark = pytest.mark.slow

ADDON = {"scrapy_domainstate.Addon": 0}


def ds(settings: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """The add-on, with the seed's readings (:data:`tests.SEED_READINGS`)."""
    return {**settings, **SEED_READINGS, "ADDONS": ADDON, **extra}


def pages(sites: Any, host: str, n: int) -> list[str]:
    paths = ["/", "/page1", "/page2", "/contact"]
    return [sites.url(host, paths[i % len(paths)]) for i in range(n)]


# ------------------------------------------------------------------ open_store


@pytest_twisted.ensureDeferred
async def test_open_store_reads_what_a_crawl_learned(sites: Any, crawl_settings: Any, run_crawl: Any) -> None:
    settings = ds(crawl_settings)
    urls = [*pages(sites, "friendly.test", 6), *pages(sites, "cold.test", 6), sites.url("dead-root.test")]
    urls.append(sites.url("friendly.test", "/missing"))  # a 404 off the root: a dead URL
    await run_crawl(settings, urls)
    path = crawl_settings["DOMAINSTATE_LMDB_PATH"]

    assert "open_store" in scrapy_domainstate.__all__
    with open_store(path) as store:  # a plain path, read-only by default
        assert store.readonly
        assert len(store) == 3
        assert repr(store).startswith("<StoreHandle lmdb:")
        friendly = store.get("friendly.test")
        assert isinstance(friendly, DomainStat)
        assert friendly.state is State.FRIENDLY
        # A URL or a host: the same key as in a crawl.
        assert store.get(sites.url("friendly.test", "/contact")) == friendly
        assert store.key("https://www.Friendly.test:8443/x") == "friendly.test"
        assert store.get("never-seen.test") is None
        assert "cold.test" in store and "never-seen.test" not in store

        cold = store.decide(sites.url("cold.test", "/page1"))
        assert (cold.domain, cold.state, cold.decision, cold.skip) == ("cold.test", State.COLD, Decision.SKIP, True)
        assert cold.reason == "domain cold.test is cold"
        assert cold.expires_at is not None and cold.expires_at > time.time() + 80 * 86400
        # (read with the shipped defaults: a friendly domain falls back to the browser)
        assert store.decide(sites.url("friendly.test", "/page1")).decision is Decision.FETCH_THEN_BROWSER
        dead_url = store.decide(sites.url("friendly.test", "/missing"))
        assert (dead_url.decision, dead_url.reason) == (Decision.SKIP, "dead URL")
        fresh = store.decide("https://never-seen.test/")
        # (the shipped defaults: no HEAD probe, the first request goes alone as the probe)
        assert (fresh.state, fresh.decision) == (State.UNKNOWN, Decision.FETCH_THEN_BROWSER)

        items = dict(store.items())
        assert {d: s.state for d, s in items.items()} == {
            "friendly.test": State.FRIENDLY,
            "cold.test": State.COLD,
            "dead-root.test": State.DEAD,
        }
        with pytest.raises(StoreError, match="read-only"):
            store.set_state("cold.test", "unknown")

    # Settings (as a crawl has them) open the same store; writable on request.
    with open_store(settings, readonly=False) as store:
        assert store.reset("cold.test").state is State.UNKNOWN
    with open_store(Config.from_settings(settings)) as store:
        assert store.get("cold.test").state is State.UNKNOWN  # type: ignore[union-attr]
        assert store.decide(sites.url("cold.test")).decision is Decision.PROBE
    # The expiry is applied as a crawl would at that time.
    with open_store(path) as store:
        later = time.time() + 400 * 86400
        assert store.get("dead-root.test", now=later).state is State.UNKNOWN  # type: ignore[union-attr]
        # (opened by its path: the shipped defaults, whose probe is the first request itself)
        assert store.decide(sites.url("dead-root.test"), now=later).decision is Decision.FETCH_THEN_BROWSER


def test_open_store_relative_path_and_bad_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    # Read-only never creates anything: a missing database is an error naming the path.
    with pytest.raises(StoreError, match=r"no domainstate database at .*/\.scrapy/domainstate"):
        open_store(".scrapy/domainstate")
    assert not (tmp_path / ".scrapy").exists()
    # Writable creates it, relative to the working directory (what the user tried).
    with open_store(".scrapy/domainstate", readonly=False) as store:
        store.set_state("example.com", State.DEAD)
    assert (tmp_path / ".scrapy" / "domainstate" / "data.mdb").exists()
    with open_store(tmp_path / ".scrapy" / "domainstate") as store:  # a pathlib.Path works too
        assert store.get("https://example.com/a").state is State.DEAD  # type: ignore[union-attr]
    with pytest.raises(TypeError, match="takes an LMDB path"):
        open_store(42)
    with pytest.raises(ValueError, match="no usable host"), open_store(".scrapy/domainstate") as store:
        store.get("")
    with pytest.raises(ValueError, match="empty"):
        open_store("")


def test_the_api_reads_durations_and_states_as_the_command_does(tmp_path: Path) -> None:
    with open_store(tmp_path / "ds", readonly=False) as store:
        before = time.time()
        stat = store.set_state("example.com", "dead", ttl="2d")  # as `set --ttl 2d`
        assert stat.state is State.DEAD
        assert stat.state_expires_at is not None and abs(stat.state_expires_at - (before + 2 * 86400)) < 60
        assert store.set_state("example.com", " Antibot-Soft ", ttl="none").state_expires_at is None
        assert store.set_state("example.com", State.COLD, ttl=3600).state_expires_at is not None
        default = store.set_state("example.com", "friendly")  # the state's own TTL
        assert default.state is State.FRIENDLY
        # what the command refuses, the API refuses, before anything is written
        for bad in (-5, 0, "3x", "-2d", float("nan"), True):
            with pytest.raises(ValueError, match="ttl must be a positive number of seconds or a duration"):
                store.set_state("example.com", "dead", ttl=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="unknown state 'bogus'; valid states: unknown, dead"):
            store.set_state("example.com", "bogus")
        assert store.get("example.com").state is State.FRIENDLY  # type: ignore[union-attr]
        # and it shows a domain as `scrapy domainstate show` prints it
        text = store.show("https://www.example.com/contact")
        assert text.startswith("example.com  (key of 'https://www.example.com/contact')")
        assert "  state:        friendly, since " in text and "  decision now: fetch" in text


def test_lmdb_store_given_a_path_says_what_to_use() -> None:
    # The issue: LmdbStore(".scrapy/domainstate") failed with "'str' object has no attribute 'ttl'".
    with pytest.raises(TypeError, match=r"open_store\("):
        LmdbStore(".scrapy/domainstate")  # type: ignore[arg-type]


# ------------------------------------------------------ start-up line and close summary


def _ds_lines(caplog: pytest.LogCaptureFixture, level: int = logging.INFO) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("scrapy_domainstate") and r.levelno == level]


@pytest_twisted.ensureDeferred
async def test_startup_line_and_close_summary(
    sites: Any, crawl_settings: Any, run_crawl: Any, caplog: pytest.LogCaptureFixture
) -> None:
    settings = ds(crawl_settings)
    urls = [
        *pages(sites, "friendly.test", 6),
        *pages(sites, "cold.test", 6),
        sites.url("dead-root.test"),
        sites.url("refused.test"),
        sites.url("friendly.test", "/missing"),
    ]
    with caplog.at_level(logging.INFO):
        first = await run_crawl(settings, urls)
    info = _ds_lines(caplog)
    start = [line for line in info if line.startswith("scrapy-domainstate: using ")]
    assert len(start) == 1, info
    path = crawl_settings["DOMAINSTATE_LMDB_PATH"]
    assert f"using lmdb:{path};" in start[0]
    # What "useful" means with the default outcome source, and how to choose another.
    assert "outcome source 'contacts'" in start[0]
    assert "useful = the page shows an e-mail address, a phone number or a social-profile link" in start[0]
    assert "DOMAINSTATE_OUTCOME = 'items'" in start[0]
    assert "browser route off" in start[0]  # no browser download handler in these settings
    assert f"; scan engine {'hyperscan' if textscan.HAVE_HYPERSCAN else 'pure Python'}" in start[0]
    closing = [line for line in info if "domains touched" in line]
    assert len(closing) == 1, info
    assert "5 domains touched" not in closing[0]  # friendly, cold, dead-root, refused: 4
    assert closing[0].startswith("scrapy-domainstate: 4 domains touched (cold 1, dead 2, friendly 1)")
    assert first.stats["domainstate/state_at_close/dead"] == 2

    caplog.clear()
    sites.reset_log()
    with caplog.at_level(logging.INFO):
        second = await run_crawl(settings, urls)
    closing = [line for line in _ds_lines(caplog) if "domains touched" in line]
    assert len(closing) == 1
    stats = second.stats
    # Skipped by reason: cold x6, dead-root and refused (dead), the dead URL.
    assert stats["domainstate/skip/cold"] == 6
    assert stats["domainstate/skip/dead"] == 2
    assert stats["domainstate/skip/dead-url"] == 1
    assert "9 skipped (cold 6, dead 2, dead-url 1)" in closing[0]
    # Against fetch-with-fallback: 9 GETs not sent, and the renders after the 3 failing ones.
    assert "saved at least 12 requests and 3 renders" in closing[0]
    # friendly.test's pages were fetched, not scanned for contacts (DOMAINSTATE_SCAN_FRIENDLY off)
    assert stats["domainstate/not_scanned"] == 6
    assert "0 navigation pages, 6 pages of friendly domains not scanned," in closing[0]
    assert sites.requests("cold.test") == [] and sites.requests("refused.test") == []

    # Both crawls are in the store's crawl log, which the report reads.
    from scrapy_domainstate.tools.crawllog import read_crawls

    with open_store(path) as store:
        crawls = read_crawls(store.store)
    assert [c.skipped for c in crawls] == [{}, {"cold": 6, "dead": 2, "dead-url": 1}]
    assert crawls[1].spider == "recording" and crawls[1].finish_reason == "finished"
    assert crawls[0].probes == 4 and crawls[1].probes == 0
    assert crawls[1].not_scanned == 6 and crawls[1].navigation == 6


@pytest.mark.browser
@pytest_twisted.ensureDeferred
async def test_startup_line_names_the_outcome_source_and_the_browser_route(
    sites: Any, browser_settings: Any, run_crawl: Any, caplog: pytest.LogCaptureFixture
) -> None:
    settings = ds(browser_settings, DOMAINSTATE_OUTCOME="items")
    with caplog.at_level(logging.INFO):
        await run_crawl(settings, [sites.url("friendly.test")])
    start = [line for line in _ds_lines(caplog) if line.startswith("scrapy-domainstate: using ")]
    assert len(start) == 1
    assert "outcome source 'items'" in start[0]
    assert "useful = the callback yielded at least one item" in start[0]
    assert "navigation, never empty" in start[0]
    assert "browser route on" in start[0]


# ------------------------------------------------------------ stats reconcile


def _identity(stats: dict[str, Any]) -> tuple[int, int]:
    """(decided, accounted): the documented identity of the README's Stats section."""

    def v(key: str) -> int:
        return int(stats.get(f"domainstate/{key}", 0))

    decided = sum(v(f"decision/{d}") for d in ("fetch", "fetch-then-browser", "browser", "skip"))
    decided += v("browser_reissue") + v("repeat/retry") + v("repeat/redirect")
    accounted = sum(v(f"method/{m}") for m in ("fetch", "tab", "cache", "skip", "dropped"))
    accounted += v("repeat/retry") + v("repeat/redirect")
    return decided, accounted


@pytest_twisted.ensureDeferred
async def test_stats_reconcile(sites: Any, crawl_settings: Any, run_crawl: Any, tmp_path: Path) -> None:
    from scrapy import Request

    sites.set_kind("flaky.test", "flaky", every=2)  # every other GET answers 503
    settings = ds(
        crawl_settings,
        RETRY_ENABLED=True,
        RETRY_TIMES=2,
        HTTPCACHE_ENABLED=True,
        HTTPCACHE_DIR=str(tmp_path / "httpcache"),
        HTTPCACHE_IGNORE_HTTP_CODES=[503],
    )
    urls: list[Any] = [
        *pages(sites, "friendly.test", 6),
        *pages(sites, "cold.test", 6),
        sites.url("flaky.test", "/"),
        sites.url("flaky.test", "/page1"),
        sites.url("flaky.test", "/page2"),
        sites.url("redirect.test", "/"),
        sites.url("refused.test"),
        sites.url("friendly.test", "/missing"),  # 404 off the root: a dead URL, skipped next time
    ]
    first = await run_crawl(settings, urls)
    s1 = first.stats
    decided, accounted = _identity(s1)
    assert decided == accounted, s1
    assert s1["domainstate/decision/probe"] == s1["domainstate/method/head"]
    assert s1.get("domainstate/repeat/retry", 0) >= 1  # the flaky site's 503s were retried
    assert s1.get("domainstate/repeat/redirect", 0) >= 1
    # Each decided request was decided once: a retry is named, not a new decision.
    plain = len(urls)
    assert (
        sum(s1.get(f"domainstate/decision/{d}", 0) for d in ("fetch", "fetch-then-browser", "browser", "skip")) == plain
    )

    # Second crawl: skips, the HTTP cache, and forced requests to the cold domain, which now
    # answers 503 to every other request: the forced requests are retried, and still counted once.
    sites.set_kind("cold.test", "flaky", every=2)
    forced = [
        Request(sites.url("cold.test", f"/page1?forced={i}"), meta={"domainstate_force": True}, dont_filter=True)
        for i in range(3)
    ]
    second = await run_crawl(settings, [*forced, *urls])
    s2 = second.stats
    decided, accounted = _identity(s2)
    assert decided == accounted, s2
    assert s2["domainstate/forced"] == 3  # counted once per forced request, retries or not
    assert s2.get("domainstate/repeat/retry", 0) >= 1
    assert s2.get("domainstate/method/cache", 0) >= 6
    assert s2["domainstate/method/skip"] == s2["domainstate/decision/skip"] - 3
    assert s2["domainstate/skip/dead-url"] == 1
    assert s2["domainstate/method/skip"] == sum(
        v for k, v in s2.items() if k.startswith("domainstate/skip/") and k.count("/") == 2
    )


# ------------------------------------------------------- exit status, store cannot open


def _project(tmp_path: Path, settings: str) -> Path:
    import subprocess
    import sys

    subprocess.run(
        [sys.executable, "-m", "scrapy", "startproject", "firsthour"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        timeout=60,
        env=_env(),
    )
    root = tmp_path / "firsthour"
    with open(root / "firsthour" / "settings.py", "a", encoding="utf-8") as fh:
        fh.write('\nADDONS = {"scrapy_domainstate.Addon": 0}\nTELNETCONSOLE_ENABLED = False\n' + settings)
    (root / "firsthour" / "spiders" / "one.py").write_text(
        "import scrapy\n\n\nclass One(scrapy.Spider):\n    name = 'one'\n\n"
        "    async def start(self):\n        yield scrapy.Request('http://127.0.0.1:9/')\n\n"
        "    def parse(self, response):\n        yield {'url': response.url}\n",
        encoding="utf-8",
    )
    return root


def _env() -> dict[str, str]:
    import os

    root = str(ROOT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCRAPY_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


def _crawl(root: Path, *args: str) -> Any:
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "scrapy", "crawl", "one", *args],
        cwd=root,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_exit_status_when_the_store_cannot_open(tmp_path: Path) -> None:
    root = _project(tmp_path, "")
    proc = _crawl(root, "-s", "DOMAINSTATE_LMDB_PATH=/proc/nope")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "scrapy-domainstate: cannot open the store (lmdb:/proc/nope)" in proc.stderr
    assert "'finish_reason': 'domainstate_unavailable'" in proc.stderr
    assert "'domainstate/open_error/store': 1" in proc.stderr
    assert "downloader/request_count" not in proc.stderr  # nothing was sent


@pytest.mark.redis
def test_exit_status_when_redis_is_down(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    root = _project(
        tmp_path,
        'DOMAINSTATE_STORE = "scrapy_domainstate.store.redis.RedisStore"\n'
        f'DOMAINSTATE_REDIS_URL = "redis://127.0.0.1:{port}/0"\n',
    )
    proc = _crawl(root)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "scrapy-domainstate: cannot open the store (redis" in proc.stderr
    assert "'finish_reason': 'domainstate_unavailable'" in proc.stderr


def test_exit_status_zero_when_the_store_opens(tmp_path: Path) -> None:
    root = _project(tmp_path, "DOWNLOAD_TIMEOUT = 3\nRETRY_ENABLED = False\n")
    proc = _crawl(root, "-s", f"DOMAINSTATE_LMDB_PATH={tmp_path / 'ds'}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "'finish_reason': 'finished'" in proc.stderr


# --------------------------------------- requests re-checked when they leave the slot queue


@pytest_twisted.ensureDeferred
async def test_queued_requests_are_rechecked_when_a_domain_turns_cold(
    sites: Any, crawl_settings: Any, run_crawl: Any
) -> None:
    """40 pages of a site that turns cold after 5 empty pages: the rest are not fetched.

    Scrapy lets 16 requests into the downloader at once (``CONCURRENT_REQUESTS``); with 2
    per domain in flight, the other 14 wait in the slot queue. Decided when they entered
    the downloader, they were all fetched; re-checked when they leave the queue, only the
    requests in flight when the domain turned cold still go.
    """
    per_domain = 2
    settings = ds(crawl_settings, CONCURRENT_REQUESTS=16, CONCURRENT_REQUESTS_PER_DOMAIN=per_domain)
    urls = [sites.url("cold.test", f"/page1?n={i}") for i in range(40)]
    result = await run_crawl(settings, urls)
    gets = sites.requests("cold.test", method="GET")
    threshold = SEED_READINGS["DOMAINSTATE_COLD_THRESHOLD"]
    assert threshold <= len(gets) <= threshold + per_domain - 1, len(gets)
    stats = result.stats
    assert stats["domainstate/transition/unknown/cold"] == 1
    assert stats["domainstate/skip/cold"] == 40 - len(gets)
    assert len(result.responses) == len(gets)


def test_send_gate_hands_places_over_in_order() -> None:
    from scrapy import Request

    from scrapy_domainstate.runtime.sendgate import SendGate

    gate = SendGate()
    requests = [Request(f"http://a.test/{i}") for i in range(5)]
    assert gate.enter(requests[0], "a.test", 2) is None
    assert gate.enter(requests[1], "a.test", 2) is None
    waiters = [gate.enter(r, "a.test", 2) for r in requests[2:]]
    assert all(w is not None and not w.called for w in waiters)
    assert (gate.active("a.test"), gate.waiting("a.test"), gate.waited) == (2, 3, 3)
    gate.leave(requests[0])
    gate.leave(requests[0])  # once only
    assert [w.called for w in waiters] == [True, False, False]  # type: ignore[union-attr]
    assert gate.active("a.test") == 2
    copy = requests[1].copy()  # a retry's copy shares the place: given back once in all
    gate.leave(copy)
    gate.leave(requests[1])
    assert [w.called for w in waiters] == [True, True, False]  # type: ignore[union-attr]
    waiters[2].cancel()  # type: ignore[union-attr]
    waiters[2].addErrback(lambda _: None)  # type: ignore[union-attr]
    gate.leave(requests[4])  # it never had a place: nothing to give back
    assert gate.active("a.test") == 2 and gate.waiting() == 0
    gate.leave(requests[2])
    gate.leave(requests[3])
    assert gate.active("a.test") == 0
    assert gate.enter(Request("http://b.test/"), "b.test", 0) is None  # a limit below 1 still lets one go

    # Leaving the downloader: back at once when nobody waits, else after the response's way back.
    later: list[Any] = []
    c1, c2, c3 = (Request(f"http://c.test/{i}") for i in range(3))
    assert gate.enter(c1, "c.test", 1) is None
    gate.left(c1, lambda leave, request: later.append((leave, request)))
    assert later == [] and gate.active("c.test") == 0
    assert gate.enter(c2, "c.test", 1) is None
    waiter = gate.enter(c3, "c.test", 1)
    gate.left(c2, lambda leave, request: later.append((leave, request)))
    assert len(later) == 1 and not waiter.called  # type: ignore[union-attr]
    later[0][0](later[0][1])
    assert waiter.called  # type: ignore[union-attr]


def test_startup_message_parts() -> None:
    from scrapy.settings import Settings

    from scrapy_domainstate.runtime.browser import BrowserRoute
    from scrapy_domainstate.runtime.startup import startup_message

    off = BrowserRoute.check(Config.from_settings({}), Settings())
    message, args = startup_message(
        Config.from_settings({"DOMAINSTATE_OUTCOME": "myproject.outcomes.useful"}), "memory", off
    )
    text = message % args
    assert "outcome source 'myproject.outcomes.useful' (useful = what myproject.outcomes.useful(response)" in text
    assert text.endswith(f"browser route off ({off.reason})")
    assert "DOWNLOAD_HANDLERS" in text or "scrapy-playwright" in text
    # Which scan engine runs, when the manager names it (it always does).
    message, args = startup_message(Config.from_settings({}), "memory", off, "hyperscan")
    assert (message % args).endswith(f"browser route off ({off.reason}); scan engine hyperscan")
    message, args = startup_message(Config.from_settings({}), "memory", off, "pure")
    assert "; scan engine pure Python (" in message % args


@pytest_twisted.ensureDeferred
async def test_in_process_the_crawl_fails_to_start(sites: Any, crawl_settings: Any, run_crawl: Any) -> None:
    """The same in a script: the crawl's Deferred fails with DomainStateUnavailable."""
    from scrapy_domainstate.pipeline import DomainStateUnavailable

    result = await run_crawl(ds(crawl_settings, DOMAINSTATE_LMDB_PATH="/proc/nope"), [sites.url("friendly.test")])
    assert isinstance(result.start_failed, DomainStateUnavailable)
    assert result.stats["finish_reason"] == "domainstate_unavailable"
    assert sites.requests("friendly.test") == []


# --------------------------------------- start-up failures are one line (issue 27, item 1)


@pytest.mark.parametrize(
    ("setting", "named"),
    [
        ("DOMAINSTATE_COLD_THRESHOLD=abc", "DOMAINSTATE_COLD_THRESHOLD must be an integer, got 'abc'"),
        ("DOMAINSTATE_DEAD_HOLD=3x", "DOMAINSTATE_DEAD_HOLD must be a number of seconds or a duration"),
        ("DOMAINSTATE_FRIENDLY_FALLBACK=maybe", "DOMAINSTATE_FRIENDLY_FALLBACK must be a boolean, got 'maybe'"),
        ("DOMAINSTATE_OUTCOME=nope.mod.useful", "DOMAINSTATE_OUTCOME: cannot import 'nope.mod.useful'"),
    ],
)
def test_a_bad_setting_is_one_error_line(tmp_path: Path, setting: str, named: str) -> None:
    root = _project(tmp_path, "")
    proc = _crawl(root, "-s", setting, "-s", f"DOMAINSTATE_LMDB_PATH={tmp_path / 'ds'}")
    assert proc.returncode == 1, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if " ERROR: " in line]
    assert len(errors) == 1, errors
    assert named in errors[0]
    assert "fix it in settings.py" in errors[0]
    assert "Traceback" not in proc.stderr
    assert "Task exception was never retrieved" not in proc.stderr


def test_a_store_that_cannot_open_is_one_error_line(tmp_path: Path) -> None:
    root = _project(tmp_path, "")
    proc = _crawl(root, "-s", "DOMAINSTATE_LMDB_PATH=/proc/nope")
    assert proc.returncode == 1, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if " ERROR: " in line]
    assert len(errors) == 1, errors
    assert "cannot open the store (lmdb:/proc/nope)" in errors[0]
    assert "Traceback" not in proc.stderr


def test_log_level_debug_keeps_the_tracebacks(tmp_path: Path) -> None:
    root = _project(tmp_path, "")
    proc = _crawl(root, "-L", "DEBUG", "-s", "DOMAINSTATE_COLD_THRESHOLD=abc")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" in proc.stderr
    assert "DOMAINSTATE_COLD_THRESHOLD must be an integer" in proc.stderr
