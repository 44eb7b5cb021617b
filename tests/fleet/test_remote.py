"""The remote-state client: against the real service process, and against broken servers.

* :func:`adopt` and the answer validation, as tables;
* the client against ``python -m scrapy_domainstate.service``: batching (150 lookups are 2
  GETs), reports, two fleets converging;
* the client against tiny servers on 127.0.0.1 that never answer, close the connection,
  refuse it, or answer garbage: every lookup fires with ``None`` within its bound, nothing
  raises, failures are counted and the circuit breaker opens;
* a real Scrapy crawl that asks the service before every request finishes as fast with the
  service down, hanging or babbling as without it.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import pytest_twisted
from scrapy import signals
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import reactor as _reactor
from twisted.internet.defer import Deferred
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import deferLater

from scrapy_domainstate.core.config import Config, ConfigError
from scrapy_domainstate.core.keys import domain_key
from scrapy_domainstate.core.record import DomainStat, Method, Outcome, RecentEntry, State
from scrapy_domainstate.fleet.remote import (
    CircuitBreaker,
    InvalidResponse,
    RemoteClient,
    RemoteVerdict,
    adopt,
    adoption_ttl,
    is_domain_key,
    parse_lookup_response,
)
from tests.fleet.test_service import STATS, TOKENS, ServiceProcess, request

reactor: Any = _reactor
NOW = 1_800_000_000.0


def sleep(seconds: float) -> Deferred[None]:
    return deferLater(reactor, seconds, lambda: None)


def make_client(url: str, token: str | None = "t", timeout: float = 0.5, **kwargs: Any) -> RemoteClient:
    config = Config(remote_url=url, remote_token=token, remote_timeout=timeout)
    client = RemoteClient.from_config(config, **kwargs)
    assert client is not None
    return client


# ------------------------------------------------------------------- adopt()

V = RemoteVerdict


def remote(state: State = State.DEAD, consensus: float = 0.9, reporters: int = 3, last_seen: float = NOW) -> V:
    return V("x.example", state, consensus, reporters, last_seen, last_seen + 30 * 86400)


def local(state: State, last_seen: float, recent_at: float | None = None) -> DomainStat:
    recent = [] if recent_at is None else [RecentEntry(recent_at, Method.HEAD, Outcome.DEAD)]
    return DomainStat("x.example", state, recent=recent, last_seen=last_seen)


ADOPT = [
    # (id, local, remote, expected)
    ("no-local", None, remote(), State.DEAD),
    ("no-remote", None, None, None),
    ("consensus-equal-threshold", None, remote(consensus=0.8), None),
    ("consensus-just-above", None, remote(consensus=0.8001), State.DEAD),
    ("consensus-low", None, remote(consensus=0.5), None),
    ("too-few-reporters", None, remote(reporters=2), None),
    ("one-reporter-full-consensus", None, remote(consensus=1.0, reporters=1), None),
    ("exactly-min-reporters", None, remote(reporters=3), State.DEAD),
    ("remote-unknown-nothing-to-adopt", None, remote(State.UNKNOWN), None),
    ("local-unknown-no-evidence", local(State.UNKNOWN, NOW + 100), remote(), State.DEAD),
    ("local-unknown-older-evidence", local(State.UNKNOWN, NOW + 100, NOW - 5), remote(), State.DEAD),
    ("local-unknown-newer-evidence", local(State.UNKNOWN, NOW + 100, NOW + 5), remote(), None),
    ("local-agrees", local(State.DEAD, NOW - 100), remote(), None),
    ("local-older-disagrees", local(State.FRIENDLY, NOW - 100), remote(), State.DEAD),
    ("local-newer-disagrees", local(State.FRIENDLY, NOW + 100), remote(), None),
    ("local-same-time", local(State.FRIENDLY, NOW), remote(), None),
    ("local-older-but-weak-remote", local(State.FRIENDLY, NOW - 100), remote(consensus=0.7), None),
    ("local-older-but-few-reporters", local(State.FRIENDLY, NOW - 100), remote(reporters=2), None),
    ("remote-hard", local(State.ANTIBOT_SOFT, NOW - 1), remote(State.ANTIBOT_HARD), State.ANTIBOT_HARD),
]


@pytest.mark.parametrize(("loc", "rem", "expected"), [a[1:] for a in ADOPT], ids=[a[0] for a in ADOPT])
def test_adopt(loc: DomainStat | None, rem: V | None, expected: State | None) -> None:
    assert adopt(loc, rem, Config()) is expected


def test_adopt_uses_the_config_and_the_clock() -> None:
    strict = Config(remote_consensus=0.95, remote_min_reporters=10)
    assert adopt(None, remote(consensus=0.96, reporters=10), strict) is State.DEAD
    assert adopt(None, remote(consensus=0.94, reporters=10), strict) is None
    assert adopt(None, remote(consensus=0.96, reporters=9), strict) is None
    expired = remote(last_seen=NOW - 31 * 86400)
    assert adopt(None, expired, Config(), now=NOW) is None
    assert adopt(None, remote(), Config(), now=NOW) is State.DEAD
    assert adoption_ttl(remote(), NOW) == pytest.approx(30 * 86400)
    assert adoption_ttl(V("x.example", State.FRIENDLY, 1.0, 5, NOW, None), NOW) is None
    assert adoption_ttl(expired, NOW) == 1.0


# -------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "host", ["example.com", "www.bücher.de", "alice.github.io", "[::1]", "10.0.0.1", "a.b.intranet.test", "printer"]
)
def test_every_ordinary_domain_key_is_shareable(host: str) -> None:
    key = domain_key(host)
    assert key and is_domain_key(key)


@pytest.mark.parametrize(
    "text",
    ["", "Example.com", "a..b", "-a.com", "a-.com", "a_b.com", "bücher.de", "a.com.", "x" * 64, "fe80:0::1", None, 5],
)
def test_not_a_domain_key(text: Any) -> None:
    assert not is_domain_key(text)


def _answer(**fields: Any) -> bytes:
    entry = {"state": "dead", "consensus": 0.9, "reporters": 4, "last_seen": NOW - 10, "expires_at": NOW + 100}
    entry.update(fields)
    return json.dumps({"domains": {"a.com": {k: v for k, v in entry.items() if v is not ...}}}).encode()


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"<html>hello</html>",
        b"\xff\xfe\x00garbage",
        b"[]",
        b"null",
        b'{"domains": []}',
        b'{"domain": {}}',
        b"[" * 50_000 + b"]" * 50_000,
        b'{"domains": {"a.com": NaN}}',
    ],
)
def test_parse_rejects_a_body_that_is_no_answer(body: bytes) -> None:
    with pytest.raises(InvalidResponse):
        parse_lookup_response(body, ["a.com"], NOW)


@pytest.mark.parametrize(
    "body",
    [
        b'{"domains": {"a.com": "dead"}}',
        _answer(state="zombie"),
        _answer(state=None),
        _answer(consensus="high"),
        _answer(consensus=1.5),
        _answer(consensus=-0.1),
        _answer(consensus=True),
        _answer(reporters=2.5),
        _answer(reporters=True),
        _answer(reporters=0),
        _answer(reporters="12"),
        _answer(last_seen=NOW + 86400),  # a verdict from the future would win every conflict
        _answer(last_seen="now"),
        _answer(last_seen=...),
        _answer(expires_at="never"),
    ],
)
def test_parse_drops_a_malformed_entry(body: bytes) -> None:
    assert parse_lookup_response(body, ["a.com"], NOW) == ({}, 1)


def test_parse_keeps_valid_entries_and_ignores_unasked_domains() -> None:
    body = json.dumps(
        {
            "domains": {
                "a.com": {"state": "dead", "consensus": 1, "reporters": 3, "last_seen": NOW, "expires_at": None},
                "b.com": {"state": "zombie"},
                "c.com": {"state": "dead", "consensus": 1, "reporters": 3, "last_seen": NOW},
            },
            "extra": 1,
        }
    ).encode()
    verdicts, invalid = parse_lookup_response(body, ["a.com", "b.com", "z.com"], NOW)
    assert verdicts == {"a.com": V("a.com", State.DEAD, 1.0, 3, NOW, None)}
    assert invalid == 1


def test_circuit_breaker() -> None:
    now = [0.0]
    breaker = CircuitBreaker(threshold=3, cooldown=10, clock=lambda: now[0], max_cooldown=25)
    assert breaker.allow()
    assert not breaker.failure()
    breaker.success()  # a success resets the count: failures must be consecutive
    assert not breaker.failure()
    assert not breaker.failure()
    assert breaker.failure()
    assert breaker.state == "open" and not breaker.allow()
    now[0] = 9.9
    assert not breaker.allow()
    now[0] = 10.0
    assert breaker.allow() and breaker.state == "half-open"
    breaker.started()
    assert not breaker.allow()  # one trial at a time
    assert breaker.failure()  # the trial failed: open again, for twice as long
    assert breaker.cooldown == 20
    now[0] = 29.9
    assert not breaker.allow()
    now[0] = 30.0
    assert breaker.allow()
    breaker.started()
    breaker.failure()
    assert breaker.cooldown == 25  # capped
    now[0] = 55.0
    assert breaker.allow()
    breaker.started()
    breaker.success()
    assert breaker.state == "closed" and breaker.allow() and breaker.cooldown == 10
    assert breaker.opened == 3
    assert breaker.failure(hard=True)  # a timeout opens it at once
    assert breaker.opened == 4 and not breaker.allow()


def test_the_client_is_off_without_a_url_and_checks_its_settings() -> None:
    assert RemoteClient.from_config(Config()) is None
    for url in ("ftp://example.com", "http://user:pw@example.com", "http://bücher.de", "http://a.com/?x=1", "http:///"):
        with pytest.raises(ConfigError, match="DOMAINSTATE_REMOTE_URL"):
            make_client(url)
    with pytest.raises(ConfigError, match="DOMAINSTATE_REMOTE_TOKEN"):
        make_client("http://127.0.0.1:1", token="a\r\nX-Evil: 1")
    assert make_client("http://127.0.0.1:1/").url == b"http://127.0.0.1:1/api/scrape/domain-state"
    assert (
        make_client("http://127.0.0.1:1/api/scrape/domain-state").url == b"http://127.0.0.1:1/api/scrape/domain-state"
    )


# ------------------------------------------------- against the real service


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    tmp = tmp_path_factory.mktemp("remote-service")
    proc = ServiceProcess(tmp, TOKENS, tmp / "db")
    yield proc
    assert proc.stop() == 0, proc.stderr_path.read_text()[-2000:]


def lookups_served(service: ServiceProcess) -> tuple[int, int]:
    """``(lookup requests, domains asked)`` the service has answered."""
    stats = request(service, path=STATS, token=TOKENS["r8"])[1]
    return stats["requests"].get("lookup", 0), stats["counters"].get("domains_looked_up", 0)


@pytest_twisted.ensureDeferred
async def test_150_lookups_are_two_gets(service: ServiceProcess) -> None:
    client = make_client(service.url, TOKENS["r1"])
    try:
        before = lookups_served(service)
        domains = [f"batch-{i}.example" for i in range(150)]
        waiting = [client.lookup(d) for d in domains]
        waiting += [client.lookup(d) for d in domains[:10]]  # asked again, batch in flight: not resent
        waiting += [client.lookup(d) for d in domains[140:]]  # asked again, batch pending: not resent
        results = [await d for d in waiting]
        assert results == [None] * 170  # nobody reported them
        after = lookups_served(service)
        assert (after[0] - before[0], after[1] - before[1]) == (2, 150)
        assert client.counters()["batches"] == 2
        assert client.counters()["lookups"] == 170
        assert client.counters()["errors"] == 0
    finally:
        await client.close()


@pytest_twisted.ensureDeferred
async def test_reports_reach_the_fleet_and_are_adopted(service: ServiceProcess) -> None:
    """Three crawlers report a dead domain; a fourth adopts it without probing."""
    reporters = [make_client(service.url, TOKENS[r], report_delay=0.05) for r in ("r1", "r2", "r3")]
    reader = make_client(service.url, TOKENS["r4"])
    now = time.time()
    try:
        for client in reporters:
            assert client.report("shared-dead.example", State.DEAD, now - 1, "dns: NXDOMAIN\n(twice)")
            assert client.report("shared-hard.example", "antibot-hard", now + 1e6)  # clamped to now
            assert not client.report("Not A Key", State.DEAD, now)
            assert not client.report("x.example", "zombie", now)
        await sleep(0.5)
        assert [c.counters()["reported"] for c in reporters] == [2, 2, 2]
        verdict = await reader.lookup("shared-dead.example")
        assert verdict is not None
        assert (verdict.state, verdict.reporters, verdict.consensus) == (State.DEAD, 3, 1.0)
        assert verdict.last_seen == pytest.approx(now - 1)
        assert reader.adopt(None, verdict, now) is State.DEAD
        hard = await reader.lookup("shared-hard.example")
        assert hard is not None and hard.state is State.ANTIBOT_HARD and hard.last_seen <= time.time()
        counters = reader.counters()
        assert (counters["lookups"], counters["hits"], counters["adopted"]) == (2, 2, 1)
    finally:
        for client in [*reporters, reader]:
            await client.close()


@pytest_twisted.ensureDeferred
async def test_two_fleets_converge_through_the_service(service: ServiceProcess) -> None:
    fleet_a = [make_client(service.url, TOKENS[r], report_delay=0.05) for r in ("r1", "r2", "r3")]
    fleet_b = [make_client(service.url, TOKENS[r], report_delay=0.05) for r in ("r4", "r5", "r6")]
    now = time.time()
    try:
        for client in fleet_a:
            client.report("converge-a.example", State.DEAD, now - 10)
        for client in fleet_b:
            client.report("converge-b.example", State.ANTIBOT_HARD, now - 10)
        await sleep(0.5)
        adopted = []
        for fleet in (fleet_a, fleet_b):
            client = fleet[0]
            states = {}
            for domain in ("converge-a.example", "converge-b.example"):
                states[domain] = client.adopt(None, await client.lookup(domain))
            adopted.append(states)
        assert (
            adopted[0]
            == adopted[1]
            == {
                "converge-a.example": State.DEAD,
                "converge-b.example": State.ANTIBOT_HARD,
            }
        )
    finally:
        for client in fleet_a + fleet_b:
            await client.close()


@pytest_twisted.ensureDeferred
async def test_a_full_report_queue_drops_the_oldest(service: ServiceProcess) -> None:
    client = make_client(service.url, TOKENS["r7"], report_delay=60, report_queue=5)
    now = time.time()
    for i in range(20):
        client.report(f"queued-{i}.example", State.DEAD, now)
    assert client.counters()["dropped"] == 15
    await client.close()  # sends what is queued
    assert client.counters()["reported"] == 5
    reader = make_client(service.url, TOKENS["r1"])
    try:
        found = [await reader.lookup(f"queued-{i}.example") for i in range(20)]
    finally:
        await reader.close()
    assert [i for i, v in enumerate(found) if v is not None] == list(range(15, 20))


@pytest_twisted.ensureDeferred
async def test_a_bad_token_fails_quietly(service: ServiceProcess) -> None:
    client = make_client(service.url, "not-a-token", failure_threshold=2)
    try:
        assert await client.lookup("a.example") is None
        assert await client.lookup("b.example") is None
        assert client.counters()["errors"] == 2
        assert client.counters()["breaker_open"] == 1
        assert client.lookup("c.example").called  # answered at once: the breaker is open
    finally:
        await client.close()


# ------------------------------------------------------ against bad servers


def http_response(
    body: bytes, status: int = 200, content_type: bytes = b"application/json", length: bool = True
) -> bytes:
    head = [f"HTTP/1.1 {status} X".encode(), b"Content-Type: " + content_type, b"Connection: close"]
    if length:
        head.append(f"Content-Length: {len(body)}".encode())
    return b"\r\n".join(head) + b"\r\n\r\n" + body


class FakeServer:
    """A TCP server on 127.0.0.1 that misbehaves on purpose.

    ``behaviour``: ``"blackhole"`` accepts and never answers; ``"close"`` closes every
    connection at once; ``"close-after-request"`` reads the request, then closes;
    ``"respond"`` answers ``response`` (raw bytes) to each request, then closes.
    """

    def __init__(self, behaviour: str, response: bytes = b"") -> None:
        self.behaviour = behaviour
        self.response = response
        self.connections = 0
        self.requests = 0
        self.protocols: list[Protocol] = []
        server = self

        class Handler(Protocol):
            buffer = b""

            def connectionMade(self) -> None:
                server.connections += 1
                server.protocols.append(self)
                if server.behaviour == "close":
                    self.transport.loseConnection()

            def dataReceived(self, data: bytes) -> None:
                self.buffer += data
                if b"\r\n\r\n" not in self.buffer:
                    return
                server.requests += 1
                self.buffer = b""
                if server.behaviour == "close-after-request":
                    self.transport.loseConnection()
                elif server.behaviour == "respond":
                    self.transport.write(server.response)
                    self.transport.loseConnection()

        self.port = reactor.listenTCP(0, Factory.forProtocol(Handler), interface="127.0.0.1")
        self.url = f"http://127.0.0.1:{self.port.getHost().port}"

    def stop(self) -> Deferred[None]:
        for proto in self.protocols:
            if proto.transport is not None:
                proto.transport.abortConnection()
        return self.port.stopListening()


def free_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest_twisted.ensureDeferred
async def test_a_service_that_never_answers() -> None:
    """Timeout bounded, breaker opens, later calls return at once, then one trial call."""
    server = FakeServer("blackhole")
    client = make_client(server.url, timeout=0.3, failure_threshold=3, cooldown=0.6)
    try:
        start = time.monotonic()
        first = [client.lookup(f"slow-{i}.example") for i in range(3)]
        assert [await d for d in first] == [None] * 3
        assert 0.3 <= time.monotonic() - start < 0.3 + 0.05 + 0.5
        counters = client.counters()
        # one timeout opens the breaker: a slow service costs the crawl one timeout, not three
        assert (counters["batches"], counters["errors"], counters["timeouts"], counters["breaker_open"]) == (1, 1, 1, 1)
        connections = server.connections
        start = time.monotonic()
        for i in range(200):
            d = client.lookup(f"skip-{i}.example")
            assert d.called and await d is None
        client.report("skip.example", State.DEAD, time.time())
        assert time.monotonic() - start < 0.5
        await sleep(0.2)
        assert server.connections == connections  # nothing was sent while open
        assert client.counters()["skipped"] == 200
        await sleep(0.5)  # cool-down over: half-open, one trial batch
        trial = client.lookup("trial.example")
        assert not trial.called
        joined = client.lookup("after-trial.example")  # joins the trial batch
        assert not joined.called
        assert await trial is None and await joined is None
        assert client.counters()["breaker_open"] == 2
        assert client.breaker.cooldown == 1.2  # the trial failed: twice the cool-down
        assert server.requests == connections + 1
    finally:
        await client.close()
        await server.stop()


@pytest_twisted.ensureDeferred
async def test_a_refused_connection() -> None:
    client = make_client(f"http://127.0.0.1:{free_port()}", timeout=2.0)
    try:
        start = time.monotonic()
        assert await client.lookup("refused.example") is None
        assert time.monotonic() - start < 1.0
        assert client.counters()["errors"] == 1
    finally:
        await client.close()


@pytest.mark.parametrize("behaviour", ["close", "close-after-request"])
@pytest_twisted.ensureDeferred
async def test_a_service_that_closes_the_connection(behaviour: str) -> None:
    server = FakeServer(behaviour)
    client = make_client(server.url, timeout=2.0, report_delay=0.05)
    try:
        start = time.monotonic()
        assert await client.lookup("closed.example") is None
        assert time.monotonic() - start < 1.5
        assert client.counters()["errors"] == 1
        assert server.connections >= 1
        assert client.report("closed.example", State.DEAD, time.time())
        await sleep(0.3)
    finally:
        await client.close()
        await server.stop()
    assert client.counters()["dropped"] == 1  # the report's POST failed too
    assert client.counters()["errors"] == 2


TEN_MB = b'{"domains": {"a.example": {"state": "dead", "consensus": 1, "reporters": 9, "last_seen": 1}}, "pad": "'
TEN_MB += b"x" * (10 * 1024 * 1024) + b'"}'

GARBAGE = [
    ("random-bytes", os.urandom(4096)),
    ("not-http", b"SSH-2.0-OpenSSH_9.6\r\n"),
    ("html", http_response(b"<html><body>It works!</body></html>", content_type=b"text/html")),
    ("json-list", http_response(b"[1, 2, 3]")),
    ("json-wrong-shape", http_response(b'{"a.example": {"state": "dead"}}')),
    ("json-domains-list", http_response(b'{"domains": ["a.example"]}')),
    ("truncated-json", http_response(b'{"domains": {"a.example": {"state": "de')),
    ("nan", http_response(b'{"domains": {"a.example": {"state": "dead", "consensus": NaN}}}')),
    ("deep", http_response(b"[" * 200_000 + b"]" * 200_000)),
    ("http-500", http_response(b'{"error": "boom"}', status=500)),
    ("http-200-no-length", http_response(b"<html>", length=False)),
    ("10mb-with-length", http_response(TEN_MB)),
    ("10mb-no-length", http_response(TEN_MB, length=False)),
    ("bad-length", b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n{}"),
    ("bad-status-line", b"HTTP/1.1 OK\r\n\r\n"),
]


@pytest.mark.parametrize("response", [g[1] for g in GARBAGE], ids=[g[0] for g in GARBAGE])
@pytest_twisted.ensureDeferred
async def test_a_service_that_answers_garbage(response: bytes) -> None:
    server = FakeServer("respond", response)
    client = make_client(server.url, timeout=3.0)
    try:
        start = time.monotonic()
        results = [await d for d in [client.lookup("a.example"), client.lookup("b.example")]]
        assert results == [None, None]
        assert time.monotonic() - start < 2.5
        assert client.counters()["errors"] == 1
        assert client.counters()["hits"] == 0
    finally:
        await client.close()
        await server.stop()


@pytest.mark.parametrize(
    "entry",
    [
        {"state": "zombie", "consensus": 1, "reporters": 9, "last_seen": 1},
        {"state": "dead", "consensus": "1", "reporters": 9, "last_seen": 1},
        {"state": "dead", "consensus": 1, "reporters": [9], "last_seen": 1},
        {"state": "dead", "consensus": 1, "reporters": 9, "last_seen": 4e9},
    ],
)
@pytest_twisted.ensureDeferred
async def test_malformed_entries_are_no_answer(entry: dict[str, Any]) -> None:
    good = {"state": "dead", "consensus": 1, "reporters": 9, "last_seen": time.time() - 5}
    body = json.dumps({"domains": {"bad.example": entry, "good.example": good}}).encode()
    server = FakeServer("respond", http_response(body))
    client = make_client(server.url)
    try:
        bad, fine = client.lookup("bad.example"), client.lookup("good.example")
        assert await bad is None
        verdict = await fine
        assert verdict is not None and verdict.state is State.DEAD
        assert client.counters()["invalid"] == 1
        assert client.counters()["errors"] == 0
    finally:
        await client.close()
        await server.stop()


@pytest_twisted.ensureDeferred
async def test_waiters_that_fail_or_cancel_do_not_break_the_batch() -> None:
    server = FakeServer("blackhole")
    client = make_client(server.url, timeout=0.2)
    try:
        cancelled = client.lookup("c.example")
        cancelled.addErrback(lambda f: None)
        failing = client.lookup("f.example")
        failing.addCallback(lambda _: 1 / 0).addErrback(lambda f: None)
        other = client.lookup("o.example")
        cancelled.cancel()
        assert await other is None
    finally:
        await client.close()
        await server.stop()


@pytest_twisted.ensureDeferred
async def test_close_answers_pending_lookups() -> None:
    server = FakeServer("blackhole")
    client = make_client(server.url, timeout=5.0)
    try:
        pending = client.lookup("pending.example")
        assert not pending.called
        start = time.monotonic()
        await client.close()
        assert pending.called and await pending is None
        assert time.monotonic() - start < 1.0
        assert client.lookup("late.example").called
        assert not client.report("late.example", State.DEAD, time.time())
    finally:
        await server.stop()


# ---------------------------------------------------------- effect on a crawl


class RemoteLookupMiddleware:
    """What the crawl manager does: ask the service about a domain before downloading it."""

    def __init__(self, crawler: Any) -> None:
        config = Config.from_settings(crawler.settings)
        self.client = RemoteClient.from_config(config, cooldown=60)
        self.stats = crawler.stats
        crawler.signals.connect(self.spider_closed, signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Any) -> RemoteLookupMiddleware:
        return cls(crawler)

    async def process_request(self, request: Any, spider: Any = None) -> None:
        if self.client is not None:
            verdict = await maybe_deferred_to_future(self.client.lookup(domain_key(request.url)))
            request.meta["remote_verdict"] = verdict

    async def spider_closed(self, spider: Any = None) -> None:
        if self.client is not None:
            await maybe_deferred_to_future(self.client.close())
            for name, value in self.client.counters().items():
                self.stats.set_value(f"domainstate/remote/{name}", value)


N_SITES = 80
TIMEOUT = 0.4


@pytest_twisted.ensureDeferred
async def test_a_crawl_is_as_fast_with_the_service_down(
    sites: Any, crawl_settings: dict[str, Any], run_crawl: Callable[..., Deferred[Any]]
) -> None:
    urls = [sites.url(f"friendly-{i}.test") for i in range(N_SITES)]
    settings = {
        **crawl_settings,
        "DOWNLOADER_MIDDLEWARES": {RemoteLookupMiddleware: 500},
        "CONCURRENT_REQUESTS": 16,
        "DOMAINSTATE_REMOTE_TIMEOUT": TIMEOUT,
        "DOMAINSTATE_REMOTE_TOKEN": "t",
    }

    async def crawl(remote_url: str | None) -> tuple[float, Any]:
        start = time.monotonic()
        result = await run_crawl({**settings, "DOMAINSTATE_REMOTE_URL": remote_url}, urls)
        elapsed = time.monotonic() - start
        assert sorted(r.status for r in result.responses) == [200] * N_SITES
        return elapsed, result.stats

    await crawl(None)  # warm-up
    baseline, _ = await crawl(None)
    hanging = FakeServer("blackhole")
    babbling = FakeServer("respond", http_response(b"<html>maintenance</html>", status=503))
    try:
        down, down_stats = await crawl(f"http://127.0.0.1:{free_port()}")
        slow, slow_stats = await crawl(hanging.url)
        garbage, garbage_stats = await crawl(babbling.url)
    finally:
        await hanging.stop()
        await babbling.stop()
    for stats in (down_stats, slow_stats, garbage_stats):
        assert stats["domainstate/remote/lookups"] == N_SITES
        assert stats["domainstate/remote/breaker_open"] == 1
        assert stats["domainstate/remote/skipped"] > 0
    assert down_stats["domainstate/remote/errors"] == garbage_stats["domainstate/remote/errors"] == 3
    assert slow_stats["domainstate/remote/timeouts"] == 1
    assert slow_stats["domainstate/remote/batches"] == 1  # only the first requests waited
    # failing at once costs nothing; hanging costs one timeout, whatever the size of the crawl
    assert down < baseline + 1.5, (down, baseline)
    assert garbage < baseline + 1.5, (garbage, baseline)
    assert slow < baseline + TIMEOUT + 1.5, (slow, baseline)


@pytest_twisted.ensureDeferred
async def test_one_unrepresentable_entry_is_dropped_not_the_batch() -> None:
    """Issue 13: a 400-digit number in one entry used to reject the whole batch and trip the breaker."""
    now = time.time()
    good = {"state": "dead", "consensus": 1.0, "reporters": 3, "agreeing": 3, "last_seen": now - 60, "expires_at": None}
    answer = {
        "domains": {
            "good.example": good,
            "huge.example": {**good, "last_seen": int("9" * 400)},
            "wide.example": {**good, "reporters": int("9" * 400)},
        }
    }
    server = FakeServer("respond", http_response(json.dumps(answer).encode()))
    client = make_client(server.url, failure_threshold=1)
    try:
        batch = [client.lookup(d) for d in ("good.example", "huge.example", "wide.example")]
        verdicts = [await d for d in batch]
        assert verdicts[0] is not None and verdicts[0].state is State.DEAD and verdicts[0].agreeing == 3
        assert verdicts[1:] == [None, None]
        counters = client.counters()
        assert (counters["invalid"], counters["errors"], counters["breaker_open"]) == (2, 0, 0)
        assert client.breaker.state == "closed"
    finally:
        await client.close()
        await server.stop()
