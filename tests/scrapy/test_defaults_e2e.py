"""The shipped defaults end to end (docs/SPEC.md section 2, revised again): Scrapy's engine,
the loopback sites, LMDB.

The probe is a domain's first request, sent alone; after a dead signal the next request leads
in turn; an antibot-hard domain's first request of a crawl is a plain canary; a lead whose
response never comes back to the middleware (retried above it) does not stall its domain.
"""

from __future__ import annotations

from typing import Any

import pytest
import pytest_twisted
from scrapy.exceptions import IgnoreRequest
from twisted.internet import reactor
from twisted.internet.task import deferLater

from scrapy_domainstate.core.record import Method, State
from tests.scrapy.test_e2e import ds_defaults, record_of, states

PATHS = ("/", "/page1", "/page2", "/contact")


@pytest_twisted.ensureDeferred
async def test_a_dead_domain_costs_its_probe_and_the_confirmation(
    sites: Any, crawl_settings: Any, run_crawl: Any
) -> None:
    settings = {**ds_defaults(crawl_settings), "CONCURRENT_REQUESTS_PER_DOMAIN": 8}
    urls = [sites.url("dead-root.test")] * 6  # six requests for the root, in flight together
    result = await run_crawl(settings, urls)
    # the first goes alone; its dead signal makes the next one lead; two signals: dead
    assert sites.methods("dead-root.test") == ["GET", "GET"]
    assert states(settings, "dead-root.test")["dead-root.test"] is State.DEAD
    skipped = [f for f in result.failures if isinstance(f.exception, IgnoreRequest)]
    assert len(skipped) == 4
    assert result.stats["domainstate/probe/waited"] >= 5
    assert "domainstate/probe/wait_timeout" not in result.stats
    assert result.stats.get("domainstate/method/head", 0) == 0


class ReissueOnce:
    """Above the plugin (as scrapy-rotating-proxies' middleware is): re-issues a failed request
    once as a copy, without Scrapy's ``retry_times``."""

    def process_exception(self, request: Any, exception: Any, spider: Any = None) -> Any:
        if request.meta.get("reissued"):
            return None
        copy = request.copy()
        copy.meta["reissued"] = True
        copy.dont_filter = True
        return copy


@pytest.mark.parametrize("host", ["nxdomain.test", "refused.test"])
@pytest.mark.parametrize(("retries", "per_domain", "n"), [(0, 8, 4), (2, 8, 4), (2, 1, 4), (2, 8, 12), ("copy", 2, 6)])
@pytest_twisted.ensureDeferred
async def test_a_domain_dead_by_a_network_signal_costs_its_probe_and_the_confirmation(
    sites: Any, crawl_settings: Any, run_crawl: Any, host: str, retries: Any, per_domain: int, n: int
) -> None:
    """A failure (no such name, connection refused) is the lead's outcome as a 404 root is: the
    others wait for it, and for the retries RetryMiddleware (above the plugin) makes of it, or a
    copy another middleware re-issues (``copy``), which leads on (it takes no place in the
    send gate, where the waiting requests hold theirs: one place a domain, or more URLs than
    places); then the next request confirms. Two URLs are sent, each with its retries; the
    others never are."""
    extra: dict[str, Any] = {"RETRY_ENABLED": retries != "copy" and bool(retries), "RETRY_TIMES": 0}
    attempts = 2
    if retries == "copy":
        extra["DOWNLOADER_MIDDLEWARES"] = {f"{__name__}.ReissueOnce": 610}
    else:
        extra["RETRY_TIMES"] = retries
        attempts = 1 + retries
    settings = {**ds_defaults(crawl_settings), "CONCURRENT_REQUESTS_PER_DOMAIN": per_domain, **extra}
    urls = [sites.url(host, f"/page{i}") for i in range(n)]
    result = await run_crawl(settings, urls)
    assert result.stats["downloader/request_count"] == 2 * attempts
    assert states(settings, host)[host] is State.DEAD
    skipped = [f for f in result.failures if isinstance(f.exception, IgnoreRequest)]
    assert len(skipped) == n - 2
    assert "domainstate/probe/wait_timeout" not in result.stats


@pytest_twisted.ensureDeferred
async def test_the_confirmation_visit_of_a_dead_domain_costs_one_request(
    sites: Any, crawl_settings: Any, run_crawl: Any
) -> None:
    settings = {
        **ds_defaults(crawl_settings),
        "CONCURRENT_REQUESTS_PER_DOMAIN": 8,
        "DOMAINSTATE_DEAD_HOLD": 1,  # the first visit's hold, ended before the next visit
        "DOMAINSTATE_DEAD_CONFIRM_AFTER": 1,
    }
    urls = [sites.url("dead-root.test", p) for p in ("/", "/", "/", "/")]
    await run_crawl(settings, urls)
    assert sites.methods("dead-root.test") == ["GET", "GET"]  # a first visit needs two signals
    held = record_of(settings, "dead-root.test")
    assert held.state is State.DEAD and held.dead_visits == 1
    await deferLater(reactor, 1.2, lambda: None)  # the hold is over: the next visit
    result = await run_crawl(settings, urls)
    # the later visit's first request confirms the verdict; the other three are skipped
    assert sites.methods("dead-root.test") == ["GET", "GET", "GET"]
    confirmed = record_of(settings, "dead-root.test")
    assert confirmed.state is State.DEAD and confirmed.dead_visits == 2
    assert confirmed.state_expires_at is not None
    assert confirmed.state_expires_at - confirmed.state_changed_at > 29 * 86400  # the full 30 d
    assert len([f for f in result.failures if isinstance(f.exception, IgnoreRequest)]) == 3


@pytest_twisted.ensureDeferred
async def test_a_friendly_domains_first_request_leads_and_the_rest_follow(
    sites: Any, crawl_settings: Any, run_crawl: Any
) -> None:
    settings = {**ds_defaults(crawl_settings), "CONCURRENT_REQUESTS_PER_DOMAIN": 8}
    urls = [sites.url("friendly.test", p) for p in PATHS] * 2
    result = await run_crawl(settings, urls)
    assert len(result.responses) == len(urls)
    logged = sites.requests("friendly.test")
    assert [r.method for r in logged] == ["GET"] * len(urls)  # no HEAD
    assert result.stats["domainstate/probe/waited"] >= 1
    assert "domainstate/probe/wait_timeout" not in result.stats


@pytest_twisted.ensureDeferred
async def test_a_retried_lead_does_not_stall_its_domain(sites: Any, crawl_settings: Any, run_crawl: Any) -> None:
    # every other request answers 503 and RetryMiddleware (above the plugin) retries it: the
    # lead's response never reaches the plugin's process_response; the others must not wait
    # out DOMAINSTATE_PROBE_TIMEOUT for it
    sites.set_kind("flaky-lead.test", "flaky", every=2)
    settings = {
        **ds_defaults(crawl_settings),
        "RETRY_ENABLED": True,
        "RETRY_TIMES": 2,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 8,
        "DOMAINSTATE_PROBE_TIMEOUT": 30,
    }
    urls = [sites.url("flaky-lead.test", p) for p in PATHS]
    result = await run_crawl(settings, urls)
    assert len(result.responses) == len(urls)
    assert "domainstate/probe/wait_timeout" not in result.stats
    assert result.stats["elapsed_time_seconds"] < 20


@pytest_twisted.ensureDeferred
async def test_a_wall_that_was_hard_is_hard_again_at_its_first_request(
    sites: Any, crawl_settings: Any, run_crawl: Any
) -> None:
    settings = {
        **ds_defaults(crawl_settings),
        "DOMAINSTATE_BROWSER_META": None,  # no browser: an antibot-hard domain is skipped
        "CONCURRENT_REQUESTS_PER_DOMAIN": 8,
        "DOMAINSTATE_TTL": {"antibot-hard": "1s"},
    }
    urls = [sites.url("walled.test", p) for p in PATHS]
    sites.set_kind("walled.test", "cf-soft")  # plain fetches never pass
    await run_crawl(settings, urls)
    assert states(settings, "walled.test")["walled.test"] is State.ANTIBOT_HARD
    await deferLater(reactor, 1.2, lambda: None)  # hard ran out: antibot-soft, recent cleared
    sites.reset_log()
    second = await run_crawl(settings, urls)
    # the soft domain's first request goes alone; its challenge makes it hard again at once (no
    # plain fetch of it ever passed), so the other three pages are never fetched
    assert [r.method for r in sites.requests("walled.test")] == ["GET"]
    assert states(settings, "walled.test")["walled.test"] is State.ANTIBOT_HARD
    assert second.stats["domainstate/probe/waited"] >= 3


@pytest_twisted.ensureDeferred
async def test_the_canary_of_a_hard_domain_whose_wall_came_down(
    sites: Any, crawl_settings: Any, run_crawl: Any
) -> None:
    settings = {**ds_defaults(crawl_settings), "DOMAINSTATE_BROWSER_META": None}
    urls = [sites.url("walled.test", p) for p in PATHS]
    sites.set_kind("walled.test", "cf-hard")
    await run_crawl(settings, urls)
    assert states(settings, "walled.test")["walled.test"] is State.ANTIBOT_HARD
    # the wall comes down: the next crawl's canary (a plain fetch, the others waiting for it)
    # passes, the domain is antibot-soft again and every page is fetched
    sites.set_kind("walled.test", "friendly")
    sites.reset_log()
    second = await run_crawl(settings, urls)
    assert second.stats["domainstate/canary"] == 1
    assert len(second.responses) == len(urls)
    assert all(r.emails for r in second.responses)
    assert states(settings, "walled.test")["walled.test"] is State.ANTIBOT_SOFT
    assert [r.method for r in sites.requests("walled.test")] == ["GET"] * len(urls)
    assert record_of(settings, "walled.test").recent[-1].method is Method.FETCH
