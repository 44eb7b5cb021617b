"""Reads that do not wait (issue 24, item 1): the Redis store's read cache, on a real redis-server.

A request whose records are not cached waits for its own batch (one ``MGET`` for everything
wanted meanwhile, read by the store's reader thread) while the reactor keeps running; cached
records answer from memory; a verdict written by another process is seen within the stated
bound (``max_age``, 0.75 s; the 2 s target adds the writer's 1 s flush interval); Redis failing makes
misses answer "not stored" at once, with the store's one warning per outage.
"""

from __future__ import annotations

import contextlib
import logging
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from twisted.internet import defer, reactor, task, threads

from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.policy import Decision
from scrapy_domainstate.core.record import DomainStat, State
from scrapy_domainstate.store import StoreError
from scrapy_domainstate.store._readcache import ReadCache
from scrapy_domainstate.store.redis import RedisStore
from scrapy_domainstate.testing.delay_proxy import DelayProxy
from scrapy_domainstate.testing.redis_server import RedisServer, require_redis_server
from tests import ROOT

pytestmark = pytest.mark.redis


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    require_redis_server()
    with RedisServer(tmp_path / "redis") as server:
        yield server


@contextlib.contextmanager
def opened(url: str, **attrs: Any) -> Iterator[RedisStore]:
    store = RedisStore(Config(redis_url=url, redis_prefix="rc:"))
    for name, value in attrs.items():
        setattr(store, name, value)
    store.open()
    try:
        yield store
    finally:
        with contextlib.suppress(StoreError):
            store.close()


def _seed(url: str, n: int) -> list[str]:
    now = time.time()
    domains = [f"site{i}.test" for i in range(n)]
    with opened(url) as store:
        for i, domain in enumerate(domains):
            state = State.DEAD if i % 2 else State.FRIENDLY
            store.put(DomainStat(domain, state=state, first_seen=now, last_seen=now, state_expires_at=now + 1e5))
    return domains


class Ticks:
    """A reactor timer every 5 ms: the longest gap between two ticks is how long the reactor stood still."""

    def __init__(self) -> None:
        self.last = time.monotonic()
        self.worst = 0.0
        self.loop = task.LoopingCall(self._tick)

    def _tick(self) -> None:
        now = time.monotonic()
        self.worst = max(self.worst, now - self.last)
        self.last = now

    def __enter__(self) -> Ticks:
        self.loop.start(0.005)
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.stop()


def _sleep(seconds: float) -> Any:
    return task.deferLater(reactor, seconds, lambda: None)


@pytest_twisted.ensureDeferred
async def test_misses_wait_for_one_batch_and_the_reactor_never_stands_still(server: RedisServer) -> None:
    domains = _seed(server.url, 40)
    # (a far Redis needs a longer read deadline: ?read_deadline= in the URL)
    with DelayProxy(server.port, delay=0.06) as proxy, opened(proxy.url(), read_deadline=1.0, slow_reply=1.0) as store:
        with Ticks() as ticks:
            started = time.monotonic()
            # 40 requests to 40 domains not cached yet, as the downloader middleware asks
            pending = [store.prefetch((domain,)) for domain in domains]
            assert all(isinstance(d, defer.Deferred) for d in pending)
            await defer.gatherResults(pending)
            waited = time.monotonic() - started
            assert store.cache is not None
            batches = store.cache.batches
            # cached: no more waiting, and the answers are what Redis holds
            assert all(store.prefetch((domain,)) is None for domain in domains)
            timed = []
            decided = []
            for domain in domains:
                t = time.perf_counter()
                decided.append(store.decide(domain, time.time())[1])
                timed.append(time.perf_counter() - t)
        # one round trip is 0.12 s here: the 40 misses shared one or two (the first may go alone)
        assert batches <= 3, batches
        assert waited < 0.12 * 3 + 0.2, waited
        assert ticks.worst < 0.06, ticks.worst  # the reactor ran all along
        assert decided == [State.DEAD if i % 2 else State.FRIENDLY for i in range(len(domains))]
        assert max(timed) < 0.01, max(timed)  # memory, not a 0.12 s round trip
        assert store.errors == 0


@pytest_twisted.ensureDeferred
async def test_a_verdict_written_by_another_process_is_seen_within_the_bound(server: RedisServer) -> None:
    domain = "fleet-mate.test"
    with opened(server.url) as store:
        await store.prefetch((domain,))
        assert store.decide(domain, time.time())[0] is not Decision.SKIP
        script = textwrap.dedent(
            f"""
            import time
            from scrapy_domainstate.core.config import Config
            from scrapy_domainstate.core.record import State
            from scrapy_domainstate.store.redis import RedisStore
            store = RedisStore(Config(redis_url={server.url!r}, redis_prefix="rc:"))
            store.open()
            store.set_state({domain!r}, State.DEAD, time.time())
            print(time.time(), flush=True)
            store.close()
            """
        )
        # (in a thread: the reactor, and so this store's reads and decisions, go on meanwhile)
        writer = threads.deferToThread(
            subprocess.run,
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
            check=True,
        )
        deadline = time.monotonic() + 60
        while True:  # a request every 10 ms, asking as the downloader middleware does
            pending = store.prefetch((domain,))
            if pending is not None:
                await pending
            if store.decide(domain, time.time())[0] is Decision.SKIP:
                break
            assert time.monotonic() < deadline, "the verdict never arrived"
            await _sleep(0.01)
        seen_at = time.time()
        written_at = float((await writer).stdout.split()[-1])
        seen_after = seen_at - written_at
    # max_age (0.75 s), and a busy machine's slack
    print(f"seen {seen_after:.3f} s after the other process wrote it")
    assert seen_after <= store.max_age + 0.25, seen_after


@pytest_twisted.ensureDeferred
async def test_own_writes_are_cached_as_written(server: RedisServer) -> None:
    from scrapy_domainstate.core.record import Method, Outcome, RecentEntry

    domain = "mine.test"
    with opened(server.url) as store:
        await store.prefetch((domain,))
        now = time.time()
        for i in range(3):
            store.record(domain, RecentEntry(now + i, Method.FETCH, Outcome.DEAD, None))
        state = store.decide(domain, now + 3)[1]
        store.flush()
        assert store.pending == 0
        batches = store.cache.batches  # type: ignore[union-attr]
        # after the flush the view is gone: the cache holds the written record, no read needed
        assert store.decide(domain, now + 3)[1] is state
        assert store.prefetch((domain,)) is None
        assert store.cache.batches == batches  # type: ignore[union-attr]


@pytest_twisted.ensureDeferred
async def test_a_stalled_redis_makes_misses_answer_at_once(server: RedisServer, caplog: Any) -> None:
    domains = _seed(server.url, 4)
    with opened(server.url) as store, caplog.at_level(logging.WARNING, logger="scrapy_domainstate.store.redis"):
        await store.prefetch((domains[0],))
        server.pause()  # SIGSTOP: connected, silent
        try:
            started = time.monotonic()
            await store.prefetch((domains[1],))  # cut at the read deadline (0.2 s)
            first = time.monotonic() - started
            started = time.monotonic()
            await store.prefetch((domains[3],))  # the reader pauses: answered without a round trip
            second = time.monotonic() - started
            now = time.time()
            # what was cached still answers; the misses are decided as for unknown domains
            assert store.decide(domains[0], now)[1] is State.FRIENDLY
            assert store.decide(domains[1], now)[1] is State.UNKNOWN
            assert store.decide(domains[3], now)[1] is State.UNKNOWN
        finally:
            server.resume()
    assert first < store.read_deadline + 0.3, first
    assert second < 0.1, second
    assert store.errors >= 1 and store.short_circuits >= 1
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]


# ------------------------------------------------------- the store's writes against the reader


class _Racing(dict):  # type: ignore[type-arg]
    """Entries whose lookup of ``key`` by the reader thread lets ``action`` run on another thread
    right between the reader's check and its assignment (waiting up to 0.3 s for it)."""

    def __init__(self, key: str, action: Any) -> None:
        super().__init__()
        self.key, self.action, self.fired = key, action, False

    def get(self, key: str, default: Any = None) -> Any:
        found = super().get(key, default)
        if key == self.key and not self.fired and threading.current_thread().name == "reader":
            self.fired = True
            other = threading.Thread(target=self.action)
            other.start()
            other.join(0.3)  # (blocked on the cache's lock when it holds one)
        return found


def _reader_meets(action: Any, key: str = "d:{a.test}") -> ReadCache:
    """A reader's refresh of ``key`` (a reply read before ``action``), ``action`` racing it."""
    from scrapy_domainstate.store._readcache import Entry

    cache = ReadCache(lambda keys: ([b"before"] * len(keys), 0.0), lambda *a: None, 0.4, 0.75, 5.0, lambda *a: None)
    cache.entries = _Racing(key, lambda: action(cache))
    cache.entries[key] = Entry(b"older", time.monotonic() - 1, used=True)
    reader = threading.Thread(target=cache._read, args=([], [key], time.monotonic()), name="reader")
    reader.start()
    reader.join(5)
    time.sleep(0.05)  # (the racing write, once the reader let it through)
    return cache


def test_the_stores_own_write_is_never_replaced_by_an_older_reply() -> None:
    cache = _reader_meets(lambda c: c.put("d:{a.test}", b"written"))
    assert cache.entries["d:{a.test}"].raw == b"written"


def test_a_key_the_store_dropped_is_not_brought_back_by_an_older_reply() -> None:
    cache = _reader_meets(lambda c: c.drop("d:{a.test}"))
    assert "d:{a.test}" not in cache.entries


def test_a_reply_read_before_a_clear_is_not_kept() -> None:
    cache = _reader_meets(lambda c: c.clear())
    assert not cache.entries


@pytest.mark.parametrize("action", ["put", "drop", "clear"])
def test_a_write_while_the_reply_is_on_its_way_wins(action: str) -> None:
    """The store writes, forgets or clears while the reader's MGET is out: its reply, read
    before, is not kept over what the store did."""
    key = "d:{a.test}"
    holder: list[ReadCache] = []

    def fetch(keys: list[str]) -> tuple[list[bytes], float]:
        cache = holder[0]
        {"put": lambda: cache.put(key, b"written"), "drop": lambda: cache.drop(key), "clear": cache.clear}[action]()
        return [b"before"] * len(keys), 0.0

    cache = ReadCache(fetch, lambda *a: None, 0.4, 0.75, 5.0, lambda *a: None)
    holder.append(cache)
    cache._read([], [key], time.monotonic())
    entry = cache.entries.get(key)
    assert (entry.raw if entry else None) == (b"written" if action == "put" else None)
