"""One HEAD probe per domain (scrapy_domainstate.runtime.probes): the gate, the probe request."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest_twisted
from scrapy import Request
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from twisted.internet import defer, reactor
from twisted.internet.task import deferLater

from scrapy_domainstate.runtime.probes import META_PROBE, ProbeGate, probe_request


def _gate(timeout: float = 5.0) -> tuple[ProbeGate, list[str]]:
    events: list[str] = []
    return ProbeGate(timeout, lambda: events.append("wait"), lambda: events.append("timeout")), events


async def _tick() -> None:
    await deferLater(reactor, 0.001, lambda: None)


@pytest_twisted.ensureDeferred
async def test_first_request_works_the_others_wait() -> None:
    gate, events = _gate()
    release: defer.Deferred[None] = defer.Deferred()
    runs: list[str] = []

    async def work() -> None:
        runs.append("probe")
        await maybe_deferred_to_future(release)

    first = deferred_from_coro(gate.once("a.test", work))
    await _tick()
    assert gate.busy("a.test") and not gate.busy("b.test")
    second = deferred_from_coro(gate.once("a.test", work))
    third = deferred_from_coro(gate.once("a.test", work))
    other = deferred_from_coro(gate.once("b.test", work))  # another domain: its own probe
    await _tick()
    assert not second.called and not third.called
    release.callback(None)
    await defer.gatherResults([first, second, third, other])
    assert runs == ["probe", "probe"]
    assert events == ["wait", "wait"]
    assert not gate.busy("a.test")


@pytest_twisted.ensureDeferred
async def test_a_waiter_gives_up_after_the_timeout_and_the_work_ends_anyway() -> None:
    gate, events = _gate(timeout=0.05)
    release: defer.Deferred[None] = defer.Deferred()

    async def work() -> None:
        await maybe_deferred_to_future(release)

    first = deferred_from_coro(gate.once("a.test", work))
    await _tick()
    waiter = deferred_from_coro(gate.once("a.test", work))
    with contextlib.suppress(defer.CancelledError):
        await waiter
    assert events == ["wait", "timeout"]
    assert gate.busy("a.test")
    release.callback(None)
    await first
    assert not gate.busy("a.test")


@pytest_twisted.ensureDeferred
async def test_failing_work_still_releases_the_waiters() -> None:
    gate, _ = _gate()

    async def work() -> None:
        await maybe_deferred_to_future(deferLater(reactor, 0.01, lambda: None))
        raise RuntimeError("probe failed")

    first = deferred_from_coro(gate.once("a.test", work))
    await _tick()
    waiter = deferred_from_coro(gate.once("a.test", work))
    await waiter
    failed: list[Any] = []
    first.addErrback(failed.append)
    await _tick()
    assert failed and failed[0].check(RuntimeError)
    assert not gate.busy("a.test")


def _parse(response: Any) -> None:
    return None


def test_probe_request_keeps_the_transport_only() -> None:
    request = Request(
        "https://a.test/page?x=1",
        method="POST",
        body=b"form",
        callback=_parse,
        meta={"proxy": "http://p:8080", "cookiejar": 3, "download_slot": "s", "playwright": True, "depth": 2},
    )
    probe = probe_request(request, 7.5)
    assert (probe.method, probe.url, probe.body, probe.dont_filter) == ("HEAD", request.url, b"", True)
    assert probe.callback is None and probe.errback is None
    assert probe.meta == {
        "proxy": "http://p:8080",
        "cookiejar": 3,
        "download_slot": "s",
        META_PROBE: True,
        "dont_retry": True,
        "dont_redirect": True,
        "handle_httpstatus_all": True,
        "download_timeout": 7.5,
        "dont_obey_robotstxt": True,
    }
