"""The Redis store when Redis is slow, full or comes back empty (issue 22, items 4 and 5).

Real parts only: a ``redis-server`` on loopback, behind
:class:`~scrapy_domainstate.testing.delay_proxy.DelayProxy` (a TCP proxy adding a delay
each way) for the slow cases, started with ``maxmemory`` and ``noeviction`` for the full
one, restarted without persistence for the empty one.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator

import pytest

redis = pytest.importorskip("redis")

from scrapy_domainstate.core.config import Config, ConfigError  # noqa: E402
from scrapy_domainstate.core.policy import Decision  # noqa: E402
from scrapy_domainstate.core.record import DomainStat, Method, Outcome, RecentEntry, State  # noqa: E402
from scrapy_domainstate.store import StoreError  # noqa: E402
from scrapy_domainstate.store.codec import encode  # noqa: E402
from scrapy_domainstate.store.redis import RedisStore  # noqa: E402
from scrapy_domainstate.testing.delay_proxy import DelayProxy  # noqa: E402
from scrapy_domainstate.testing.redis_server import RedisServer, redis_store_factory, require_redis_server  # noqa: E402

pytestmark = pytest.mark.redis

LOGGER = "scrapy_domainstate.store.redis"
NOW = float(int(time.time()))


def fetch(at: float, outcome: Outcome = Outcome.OK_CONTACT) -> RecentEntry:
    return RecentEntry(at, Method.FETCH, outcome, 200)


@pytest.fixture
def server(tmp_path) -> Iterator[RedisServer]:
    require_redis_server()
    with RedisServer(tmp_path / "redis") as server:
        yield server


@pytest.fixture
def proxy(server) -> Iterator[DelayProxy]:
    with DelayProxy(server.port) as proxy:
        yield proxy


@contextlib.contextmanager
def opened(url: str, tmp_path, **fields) -> Iterator[RedisStore]:
    store = redis_store_factory(url, tmp_path)(Config(**fields))
    store.open()
    try:
        yield store
    finally:
        with contextlib.suppress(StoreError):
            store.close()


def warnings(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno == logging.WARNING and text in r.getMessage()]


def _timed_calls(store: RedisStore, n: int, limit: float = 1.0) -> float:
    """``n`` rounds of what a request costs the store; each call must stay under ``limit``."""
    started = time.monotonic()
    for i in range(n):
        domain = f"slow{i % 10}.example"
        for call, args in (
            (store.decide, (domain, NOW + i)),
            (store.url_dead_until, (f"fp{i}",)),
            (store.record, (domain, fetch(NOW + i))),
        ):
            t0 = time.monotonic()
            call(*args)
            took = time.monotonic() - t0
            assert took < limit, f"one store call took {took:.2f} s with a slow Redis"
    return time.monotonic() - started


# ------------------------------------------------------------ 4. a slow Redis


def test_slow_redis_calls_end_at_their_deadline_and_open_the_breakers(proxy, tmp_path, caplog):
    with opened(proxy.url(), tmp_path, flush_size=5) as store:
        store.breaker_seconds = 0.5
        store.record("before.example", fetch(NOW))
        store.flush()
        proxy.delay = 0.2  # +0.2 s each way: every round trip takes 0.4 s
        with caplog.at_level(logging.DEBUG, logger=LOGGER):
            elapsed = _timed_calls(store, 100)
            # 300 calls; at most a few reach Redis (one per breaker wait of 0.5 s), each cut
            assert elapsed < 6, f"300 calls took {elapsed:.1f} s behind a slow Redis"
            assert store.slow_calls >= 1
            assert store.short_circuits >= 150
            assert len(warnings(caplog, "too slow")) == 1
            assert store.pending == 100

            proxy.delay = 0.0
            time.sleep(store.breaker_seconds + 0.05)
            store.decide("after.example", NOW + 1000)  # a read closes the read breaker
            assert store.flush() == 100  # and the buffer is written once Redis is fast again
        assert [r for r in caplog.records if "reachable again" in r.getMessage()]
        assert len(warnings(caplog, "")) == 1
        for i in range(10):
            assert store.get(f"slow{i}.example").fetch_total == 10


def test_a_redis_slow_within_the_deadlines_opens_the_breakers_after_three_slow_calls(proxy, tmp_path, caplog):
    with opened(proxy.url(), tmp_path, flush_size=5) as store:
        proxy.delay = 0.03  # 60 ms a round trip: under every deadline, but a decision a request
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            elapsed = _timed_calls(store, 30)
        assert elapsed < 2, f"90 calls took {elapsed:.1f} s behind a slowish Redis"
        assert store.slow_calls >= store.slow_threshold
        assert store.short_circuits >= 50
        assert len(warnings(caplog, "too slow")) == 1


def test_a_large_backlog_is_written_in_bounded_slices(server, tmp_path):
    with opened(server.url, tmp_path, flush_size=100_000, flush_interval=1e9) as store:
        store.flush_budget = 0.0  # each flush: one chunk, then the rest wait for the next
        for i in range(3 * store.chunk_size):
            store.record(f"b{i}.example", fetch(NOW))
        assert store.flush() == store.chunk_size
        assert store.pending == 2 * store.chunk_size
        assert store.errors == 0
        assert store.flush() + store.flush() == 2 * store.chunk_size
        assert store.count() == 3 * store.chunk_size


# ------------------------------------------------------ 5. Redis at maxmemory


def _fill(client, prefix: str) -> int:
    """Write filler keys until Redis refuses writes (maxmemory, noeviction)."""
    value = b"x" * 4096
    for i in range(100_000):
        try:
            client.set(f"filler:{prefix}{i}", value)
        except redis.exceptions.OutOfMemoryError:
            return i
    raise AssertionError("Redis never ran out of memory")


def test_redis_at_maxmemory_keeps_reads_and_warns_once_without_record_bytes(tmp_path, caplog):
    require_redis_server()
    args = ("--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
    with RedisServer(tmp_path / "full", extra_args=args) as server, opened(server.url, tmp_path, flush_size=3) as store:
        store.breaker_seconds = 0.1
        dead = DomainStat("dead.example", state=State.DEAD, first_seen=NOW, last_seen=NOW, state_expires_at=NOW + 1e6)
        store.put(dead)
        raw = redis.Redis.from_url(server.url)
        _fill(raw, store.prefix)
        with caplog.at_level(logging.DEBUG, logger=LOGGER):
            skipped = 0
            until = time.monotonic() + 1.0  # ten breaker waits: the write is retried ten times
            i = 0
            while time.monotonic() < until:
                i += 1
                skipped += store.decide("dead.example", NOW + i)[0] is Decision.SKIP
                store.record(f"new{i % 7}.example", fetch(NOW + i))
                time.sleep(0.005)
            assert store.errors >= 3, "writes were not retried"
            assert skipped == i, f"the dead domain was decided from Redis in {skipped} of {i} decisions"
            assert store.pending == i
            assert len(warnings(caplog, "refuses writes")) == 1
            assert not [r for r in caplog.records if "again" in r.getMessage()]

            raw.delete(*raw.keys("filler:*"))  # room again
            time.sleep(store.breaker_seconds + 0.02)
            assert store.flush() == i
        assert len([r for r in caplog.records if "accepts writes again" in r.getMessage()]) == 1
        assert len(warnings(caplog, "refuses writes")) == 1
        raw.close()
    # No record bytes (nor record keys) anywhere in the log, tracebacks included.
    handler_text = caplog.text
    assert "d:{" not in handler_text
    assert encode(dead)[:8].decode("latin-1") not in handler_text
    assert all(c.isprintable() or c in "\n\t" for c in handler_text)


# ------------------------------------------------- 5. Redis comes back empty


def test_a_redis_that_comes_back_empty_says_so_once(tmp_path, caplog):
    require_redis_server()
    with RedisServer(tmp_path / "volatile") as server, opened(server.url, tmp_path, flush_size=1) as store:
        store.breaker_seconds = 0.1
        other_process = redis_store_factory(server.url, prefix=store.prefix)(Config())
        store.record("known.example", fetch(NOW))
        assert store.count() == 1
        with caplog.at_level(logging.INFO, logger=LOGGER):
            store.decide("known.example", NOW)
            assert not warnings(caplog, "came back empty")
            server.stop()
            server.start()  # no persistence: empty
            other_process.open()  # another crawler of the fleet starts on the empty Redis first
            for i in range(40):
                store.decide("known.example", NOW + i)
                store.record("known.example", fetch(NOW + i))
                time.sleep(0.01)
            other_process.close()
        assert store.emptied == 1
        empty = warnings(caplog, "came back empty")
        assert len(empty) == 1
        assert "appendonly" in empty[0].getMessage()
        assert store.get("known.example").fetch_total >= 1


def test_a_redis_that_kept_its_data_says_nothing(tmp_path, caplog):
    require_redis_server()
    with (
        RedisServer(tmp_path / "kept", persist=True) as server,
        opened(server.url, tmp_path, flush_size=1) as store,
        caplog.at_level(logging.INFO, logger=LOGGER),
    ):
        store.breaker_seconds = 0.1
        store.record("known.example", fetch(NOW))
        server.stop()
        server.start()
        for i in range(30):
            store.record("known.example", fetch(NOW + i))
            time.sleep(0.01)
        assert store.emptied == 0
        assert not warnings(caplog, "came back empty")
        assert store.get("known.example").fetch_total >= 2


def test_deadlines_keep_the_urls_connection_class(tmp_path):
    """The deadline connection goes over the class the URL asks for: here a Unix socket."""
    require_redis_server()
    path = tmp_path / "redis.sock"
    with RedisServer(tmp_path / "unix", extra_args=("--unixsocket", str(path))) as server:
        assert server.process is not None
        with opened(f"unix://{path}?db=0", tmp_path, flush_size=1) as store:
            store.record("unix.example", fetch(NOW))
            assert store.get("unix.example").fetch_total == 1
            connection = store._client.connection_pool.get_connection()
            try:
                assert type(connection).__name__ == "DeadlineUnixDomainSocketConnection"
            finally:
                store._client.connection_pool.release(connection)


def test_error_messages_keep_the_command_name_only():
    from scrapy_domainstate.store.redis import _reason

    record = b"\x01\x02) of (SET x\xff"
    exc = redis.exceptions.OutOfMemoryError(
        f"Command # 2 (SET p:d:{{a.example}} {record.decode('latin-1')} PXAT 123) of pipeline caused error: "
        "command not allowed when used memory > 'maxmemory'."
    )
    text = _reason(exc)
    assert text == (
        "OutOfMemoryError: Command # 2 (SET ...) of pipeline caused error: "
        "command not allowed when used memory > 'maxmemory'"
    )


def test_deadlines_can_be_set_in_the_url(server, tmp_path):
    url = f"{server.url}?read_deadline=0.5&socket_timeout=2&slow_reply=0.2&write_deadline=1.5"
    with opened(url, tmp_path) as store:
        assert (store.read_deadline, store.write_deadline, store.slow_reply) == (0.5, 1.5, 0.2)
        assert store._client.connection_pool.connection_kwargs["socket_timeout"] == 2.0
        store.record("url.example", fetch(NOW))
        store.flush()
        assert store.count() == 1
    with pytest.raises(ConfigError, match="read_deadline"):
        redis_store_factory(f"{server.url}?read_deadline=soon", tmp_path)().open()
