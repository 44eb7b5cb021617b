"""How to be polite to each site, remembered; failing hosts paused; the blocked-crawl alarm.

Real crawls on the loopback web: a site that rate-limits bursts (``burst-limited``), one that
always answers 429 with a long Retry-After (``rate-limited``), one whose answers never come
in time (``slow``), and a crawl where nearly every site is a wall.
"""

from __future__ import annotations

import itertools
import logging
from typing import Any

import pytest
import pytest_twisted
from pydispatch import dispatcher
from twisted.internet import reactor
from twisted.internet.task import deferLater

from scrapy_domainstate import signals
from scrapy_domainstate.core.record import Outcome, State
from scrapy_domainstate.runtime.alarm import BlockedAlarm
from scrapy_domainstate.runtime.polite import HostPauses, polite_key, polite_record, remembered, retry_after
from scrapy_domainstate.testing.sites import EXTRA_PAGES, PAGES
from tests.scrapy.test_e2e import ds_defaults as ds
from tests.scrapy.test_e2e import record_of, states

# ------------------------------------------------------------------ pure parts


def test_retry_after_reads_seconds_and_dates() -> None:
    now = 1_800_000_000.0
    assert retry_after(b"2", now) == 2.0
    assert retry_after(" 120 ", now) == 120.0
    assert retry_after(b"Fri, 15 Jan 2027 08:00:30 GMT", 1_800_000_000.0) == pytest.approx(30.0)
    assert retry_after(b"Thu, 01 Jan 1970 00:00:00 GMT", now) == 0.0  # in the past: now
    for bad in (None, b"", b"soon", b"nan", b"inf"):
        assert retry_after(bad, now) is None


def test_a_politeness_record_holds_its_delay_until_its_ttl() -> None:
    record = polite_record("shop.example", 2.5, 1000.0, 3600.0)
    assert record.domain == polite_key("shop.example") == "shop.example|polite"
    assert remembered(record, 1000.0 + 3599) == 2.5
    assert remembered(record, 1000.0 + 3600) is None
    assert remembered(None, 0.0) is None


def test_hosts_pause_after_failures_in_a_row_only() -> None:
    pauses = HostPauses(3)
    assert not pauses.failed("a.test", "timeout")
    assert not pauses.failed("a.test", "timeout")
    pauses.succeeded("a.test")  # a success breaks the streak
    assert [pauses.failed("a.test", "timeout") for _ in range(3)] == [False, False, True]
    assert not pauses.failed("a.test", "timeout")  # paused once
    assert not pauses.failed("b.test", "dns-temporary")  # not a server that stopped answering
    assert HostPauses(0).failed("c.test", "timeout") is False  # 0: never


def test_the_alarm_needs_a_full_window_of_many_domains() -> None:
    alarm = BlockedAlarm(0.8, 20)
    # one walled site, however many of its pages, is that site's wall
    assert not any(alarm.observe("walled.test", True) for _ in range(100))
    alarm = BlockedAlarm(0.8, 20)
    raised = [alarm.observe(f"site{i}.test", i % 10 != 0) for i in range(40)]
    assert raised.count(True) == 1 and alarm.on
    # back under half the threshold: off again
    for i in range(40):
        alarm.observe(f"ok{i}.test", False)
    assert not alarm.on
    assert not BlockedAlarm(0.0, 20).observe("x.test", True)  # 0: off


# ------------------------------------------------------------------ crawls


def _burst_settings(crawl_settings: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        **ds(crawl_settings),
        "RETRY_ENABLED": True,
        "RETRY_HTTP_CODES": [429],
        "RETRY_TIMES": 10,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 8,
        **extra,
    }


def _status_count(result: Any, status: int) -> int:
    return int(result.stats.get(f"downloader/response_status_count/{status}", 0))


@pytest_twisted.ensureDeferred
@pytest.mark.parametrize("autothrottle", [False, True])
async def test_a_rate_limit_slows_the_slot_and_the_next_crawl_starts_slow(
    sites: Any, crawl_settings: Any, run_crawl: Any, autothrottle: bool, caplog: pytest.LogCaptureFixture
) -> None:
    sites.pages = (*PAGES, *EXTRA_PAGES)
    sites.set_kind("burst-limited.test", "burst-limited", window=1.0)
    settings = _burst_settings(
        crawl_settings, AUTOTHROTTLE_ENABLED=autothrottle, AUTOTHROTTLE_START_DELAY=0, AUTOTHROTTLE_MAX_DELAY=5
    )
    urls = [sites.url("burst-limited.test", page) for page in sites.pages]
    caplog.set_level(logging.INFO)
    first = await run_crawl(settings, urls)
    for url in urls:
        assert first.response_for(url).status == 200, url  # every page, in the end
    assert first.stats["domainstate/polite/slowed"] == 1
    [summary] = [r.getMessage() for r in caplog.records if "domains touched" in r.getMessage()]
    assert "1 slot slowed down, 0 hosts paused;" in summary
    # the 429s came in the first burst only: after it, one request per window
    times = [r.at for r in sites.requests("burst-limited.test")]
    assert _status_count(first, 429) <= len(urls) - 1
    after_burst = [t for t in times if t > times[0] + 1.0]
    gaps = [b - a for a, b in itertools.pairwise(after_burst)]
    assert gaps and min(gaps) >= 0.9, gaps
    # a 429 never makes a domain dead, cold or antibot-hard
    assert states(settings, "burst-limited.test")["burst-limited.test"] not in (
        State.DEAD,
        State.COLD,
        State.ANTIBOT_HARD,
    )
    # remembered: the next crawl starts the slot at the learned delay
    assert record_of(settings, polite_key("burst-limited.test")) is not None
    sites.reset_log()
    second = await run_crawl(settings, urls)
    assert second.stats["domainstate/polite/remembered"] == 1
    times = [r.at for r in sites.requests("burst-limited.test")]
    assert times[1] - times[0] >= 0.9  # slow from its second request on
    # only the slot's gradual recovery (a quarter lower after five pages) probes the limit
    assert _status_count(second, 429) <= 2


@pytest_twisted.ensureDeferred
@pytest.mark.parametrize("retry_codes", [[], [429]])
async def test_a_retry_after_beyond_the_cap_pauses_the_host_never_hard(
    sites: Any, crawl_settings: Any, run_crawl: Any, caplog: pytest.LogCaptureFixture, retry_codes: list[int]
) -> None:
    # (with 429 among RETRY_HTTP_CODES, Scrapy's default, the 429 that pauses its host is not
    # retried: its retry would be skipped as paused, and the 429 never recorded)
    settings = _burst_settings(crawl_settings, RETRY_HTTP_CODES=retry_codes, DOMAINSTATE_ANTIBOT_HARD_THRESHOLD=2)
    urls = [sites.url("rate-limited.test", page) for page in PAGES]
    caplog.set_level(logging.INFO)
    for crawl in (1, 2, 3):
        sites.reset_log()
        result = await run_crawl(settings, urls)
        # Retry-After: 60 is over the 30 s cap: the host is paused, its other pages not sent
        assert len(sites.requests("rate-limited.test")) == 1, crawl
        assert result.stats["domainstate/skip/paused"] == len(PAGES) - 1, crawl
        assert states(settings, "rate-limited.test")["rate-limited.test"] is State.ANTIBOT_SOFT, crawl
    pauses = [r.getMessage() for r in caplog.records if "pausing rate-limited.test" in r.getMessage()]
    assert len(pauses) == 3 and "Retry-After 60" in pauses[0]


def _pausing(crawl_settings: Any) -> dict[str, Any]:
    """Shipped defaults, timeouts at 0.5 s, a pause after 3, a dead hold of 1 s, every crawl a visit."""
    return {
        **ds(crawl_settings),
        "DOWNLOAD_TIMEOUT": 0.5,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        "DOMAINSTATE_PAUSE_AFTER": 3,
        "DOMAINSTATE_DEAD_CONFIRM_AFTER": 0,
        "DOMAINSTATE_DEAD_HOLD": 1,
    }


@pytest_twisted.ensureDeferred
async def test_a_host_that_times_out_is_paused_and_pauses_confirm_dead(
    sites: Any, crawl_settings: Any, run_crawl: Any
) -> None:
    sites.pages = (*PAGES, *EXTRA_PAGES)
    sites.set_kind("slow.test", "slow", delay=30)
    settings = _pausing(crawl_settings)
    urls = [sites.url("slow.test", page) for page in sites.pages]
    first = await run_crawl(settings, urls)
    # three timeouts, then nothing more is sent (but the one request already on its way)
    assert len(sites.requests("slow.test")) in (3, 4)
    assert first.stats["domainstate/paused_hosts"] == 1
    # (skipped as paused, or as dead: the pause is a dead signal, and the domain is held)
    skipped = first.stats.get("domainstate/skip/paused", 0) + first.stats.get("domainstate/skip/dead", 0)
    assert skipped == len(urls) - len(sites.requests("slow.test"))
    recent = record_of(settings, "slow.test").recent
    assert [(e.outcome, e.error_class) for e in recent].count((Outcome.DEAD, "paused:timeout")) == 1
    # a pause is a visit's dead verdict: held until the next visit ...
    assert states(settings, "slow.test")["slow.test"] is State.DEAD
    assert record_of(settings, "slow.test").dead_visits == 1
    await deferLater(reactor, 1.2, lambda: None)  # DOMAINSTATE_DEAD_HOLD = 1 s
    # ... which tries the host again; paused again: still a hold (a timeout is not a dead
    # signal, so pauses need three visits where dead signals need two) ...
    sites.reset_log()
    await run_crawl(settings, urls)
    assert 3 <= len(sites.requests("slow.test")) <= 4
    assert states(settings, "slow.test")["slow.test"] is State.DEAD
    assert record_of(settings, "slow.test").dead_visits == 2
    await deferLater(reactor, 1.2, lambda: None)
    # ... and a third visit paused again confirms dead: a host that never answered
    sites.reset_log()
    await run_crawl(settings, urls)
    assert 3 <= len(sites.requests("slow.test")) <= 4
    assert record_of(settings, "slow.test").dead_visits == 3
    sites.reset_log()
    fourth = await run_crawl(settings, urls)
    assert sites.requests("slow.test") == []  # dead: skipped
    assert fourth.stats.get("domainstate/skip/dead", 0) == len(urls)


@pytest_twisted.ensureDeferred
async def test_a_host_that_answered_is_held_on_its_down_visits_never_confirmed_dead(
    sites: Any, crawl_settings: Any, run_crawl: Any
) -> None:
    sites.pages = (*PAGES, *EXTRA_PAGES)
    settings = _pausing(crawl_settings)
    sites.set_kind("parttime.test", "friendly")
    urls = [sites.url("parttime.test", page) for page in sites.pages]
    await run_crawl(settings, urls[:1])  # up: it answers (one page: still unknown, not friendly)
    assert record_of(settings, "parttime.test").fetch_ok == 1
    sites.set_kind("parttime.test", "slow", delay=30)
    for visit in (1, 2, 3):  # down on three visits in a row: each one held, none confirmed
        await deferLater(reactor, 1.2, lambda: None)  # DOMAINSTATE_DEAD_HOLD = 1 s
        sites.reset_log()
        await run_crawl(settings, urls)
        assert 3 <= len(sites.requests("parttime.test")) <= 4, visit  # tried, paused
        stat = record_of(settings, "parttime.test")
        assert (Outcome.DEAD, "paused:timeout") in [(e.outcome, e.error_class) for e in stat.recent], visit
        assert stat.state is State.DEAD and stat.dead_visits == 0, visit
    await deferLater(reactor, 1.2, lambda: None)
    sites.set_kind("parttime.test", "friendly")
    sites.reset_log()
    back = await run_crawl(settings, urls)  # up again: the next visit finds every page
    assert len(sites.requests("parttime.test")) == len(urls)
    assert len(back.responses) == len(urls)


@pytest_twisted.ensureDeferred
@pytest.mark.parametrize("close", [False, True])
async def test_a_crawl_of_walls_raises_the_alarm_once(
    sites: Any, crawl_settings: Any, run_crawl: Any, caplog: pytest.LogCaptureFixture, close: bool
) -> None:
    walled = [f"wall-{i}.test" for i in range(30)]
    for host in walled:
        sites.set_kind(host, "cf-hard")
    friendly = [f"ok-{i}.test" for i in range(4)]
    for host in friendly:
        sites.set_kind(host, "friendly")
    settings = {
        **ds(crawl_settings),
        "DOMAINSTATE_BLOCKED_WINDOW": 20,
        "DOMAINSTATE_BLOCKED_CLOSE": close,
        "CONCURRENT_REQUESTS": 4,
    }
    raised: list[dict[str, Any]] = []

    def on_blocked(**kwargs: Any) -> None:
        raised.append(kwargs)

    urls = [sites.url(h, p) for h in (*walled, *friendly) for p in ("/", "/page1")]
    caplog.set_level(logging.INFO)
    dispatcher.connect(on_blocked, signal=signals.crawl_blocked)
    try:
        result = await run_crawl(settings, urls)
    finally:
        dispatcher.disconnect(on_blocked, signal=signals.crawl_blocked)
    warnings = [r.getMessage() for r in caplog.records if "this crawl looks blocked" in r.getMessage()]
    assert len(warnings) == 1 and len(raised) == 1
    assert raised[0]["walls"] >= 16 and raised[0]["responses"] == 20 and raised[0]["domains"] >= 20
    assert result.stats["domainstate/blocked"] == 1
    if close:
        assert result.stats["finish_reason"] == "domainstate_blocked"
    else:
        # while the alarm is on, new walls are suspect: not recorded, no site made antibot-hard
        assert result.stats["domainstate/antibot_suspect"] >= 1
        learned = states(settings, *walled)
        assert sum(1 for s in learned.values() if s is State.UNKNOWN) >= 1
