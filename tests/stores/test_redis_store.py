"""The Redis store against a real ``redis-server`` on loopback.

The first block is the store contract (the same behaviours the shared contract suite
checks for every store); :func:`redis_server.redis_store_factory` builds stores the way
that suite does, so the ``redis`` parameter can move there. The rest is what only a
shared, networked store has to get right: several processes at once, Redis going away
and coming back, key prefixes, Redis Cluster.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import random
import time

import pytest

redis = pytest.importorskip("redis")

from scrapy_domainstate.core.config import Config, ConfigError  # noqa: E402
from scrapy_domainstate.core.policy import Decision  # noqa: E402
from scrapy_domainstate.core.record import DomainStat, Method, Outcome, RecentEntry, State  # noqa: E402
from scrapy_domainstate.store import DomainStore, MemoryStore, StoreError  # noqa: E402
from scrapy_domainstate.store.redis import RedisStore, mask_url  # noqa: E402
from scrapy_domainstate.testing.redis_server import RedisServer, redis_store_factory, require_redis_server  # noqa: E402

#: The decision for a domain never seen, with the shipped defaults: no HEAD probe (the first
#: request goes alone as the probe, docs/SPEC.md section 2).
FIRST_SIGHT = Decision.FETCH_THEN_BROWSER

pytestmark = pytest.mark.redis

LOGGER = "scrapy_domainstate.store.redis"
NOW = float(int(time.time()))


def fetch(at: float, outcome: Outcome = Outcome.OK_CONTACT, status: int | None = 200) -> RecentEntry:
    return RecentEntry(at, Method.FETCH, outcome, status)


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory):
    require_redis_server()
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.close()


@pytest.fixture
def own_server(tmp_path):
    """A server of this test only (it gets stopped, paused, restarted); data survives restarts."""
    require_redis_server()
    server = RedisServer(tmp_path / "redis", persist=True)
    server.start()
    yield server
    server.close()


@pytest.fixture
def raw(redis_server):
    """A plain redis-py client on the shared server, to look under the store."""
    client = redis.Redis.from_url(redis_server.url)
    yield client
    client.close()


class Stores:
    """Opens stores from one factory (one prefix) and closes them all at the end."""

    def __init__(self, factory) -> None:
        self.factory = factory
        self.prefix = factory.prefix
        self.stores: list[RedisStore] = []

    def __call__(self, config: Config | None = None, **fields) -> RedisStore:
        store = self.factory(config or Config(**fields))
        store.open()
        self.stores.append(store)
        return store

    def close(self) -> None:
        for store in self.stores:
            with contextlib.suppress(StoreError):
                store.close()


@pytest.fixture
def open_store(redis_server, tmp_path):
    stores = Stores(redis_store_factory(redis_server.url, tmp_path))
    yield stores
    stores.close()


@pytest.fixture
def own_stores(own_server, tmp_path):
    stores = Stores(redis_store_factory(own_server.url, tmp_path))
    yield stores
    stores.close()


# ------------------------------------------------------------ the contract


def test_get_missing_is_none(open_store):
    store = open_store()
    assert store.get("nowhere.example") is None
    assert store.count() == 0
    assert list(store.iter_records()) == []
    decision, state, _ = store.decide("nowhere.example", NOW)
    assert (decision, state) == (FIRST_SIGHT, State.UNKNOWN)


def test_record_is_visible_before_flush_and_shared_after(open_store):
    writer, reader = open_store(flush_size=100), open_store()
    writer.record("a.example", fetch(NOW))
    writer.record("a.example", fetch(NOW + 1, Outcome.OK_EMPTY))
    assert writer.get("a.example").fetch_total == 2
    assert writer.pending == 2
    assert reader.get("a.example") is None
    assert writer.flush() == 2
    assert writer.pending == 0
    stat = reader.get("a.example")
    assert (stat.fetch_total, stat.fetch_ok, stat.fetch_ok_empty) == (2, 1, 1)
    assert [e.outcome for e in stat.recent] == [Outcome.OK_CONTACT, Outcome.OK_EMPTY]


def test_flush_persists_across_store_objects(redis_server, tmp_path):
    factory = redis_store_factory(redis_server.url, tmp_path)
    with factory(Config(flush_size=1000)) as store:
        for i in range(7):
            store.record("b.example", fetch(NOW + i))
    with factory() as again:
        stat = again.get("b.example")
        assert stat.fetch_total == 7
        assert stat.state is State.FRIENDLY
        assert again.count() == 1


def test_put_get_delete_count_iter(open_store):
    store = open_store()
    for i in range(5):
        stat = DomainStat(f"d{i}.example", first_seen=NOW, last_seen=NOW + i, fetch_total=i)
        store.put(stat)
    assert store.count() == 5
    assert store.get("d3.example").fetch_total == 3
    assert sorted(s.domain for s in store.iter_records()) == [f"d{i}.example" for i in range(5)]
    assert store.delete("d3.example") is True
    assert store.delete("d3.example") is False
    assert store.get("d3.example") is None
    assert store.count() == 4


def test_put_overwrites_and_drops_pending(open_store):
    store = open_store(flush_size=100)
    store.record("c.example", fetch(NOW))
    store.put(DomainStat("c.example", state=State.COLD, first_seen=NOW, last_seen=NOW, fetch_total=42))
    assert store.pending == 0
    store.flush()
    assert store.get("c.example").fetch_total == 42


def test_clear(open_store):
    store = open_store(flush_size=100)
    for i in range(3):
        store.record(f"e{i}.example", fetch(NOW))
    store.flush()
    store.mark_url_dead("fp-clear", NOW + 60)
    store.record("pending.example", fetch(NOW))
    assert store.clear() == 3
    assert store.count() == 0
    assert store.pending == 0
    assert list(store.iter_records()) == []
    assert store.url_dead_until("fp-clear") is None


def test_set_state(open_store):
    store, other = open_store(), open_store()
    stat = store.set_state("f.example", State.DEAD, NOW)
    assert stat.state is State.DEAD
    assert stat.state_expires_at == NOW + 30 * 86400
    seen = other.get("f.example")
    assert seen.state is State.DEAD
    assert other.decide("f.example", NOW)[0] is Decision.SKIP
    assert other.decide("f.example", NOW + 31 * 86400)[:2] == (FIRST_SIGHT, State.UNKNOWN)


def test_url_dead_marks(open_store):
    store, other = open_store(), open_store()
    assert store.url_dead_until("fp-1") is None
    store.mark_url_dead("fp-1", NOW + 3600)
    assert other.url_dead_until("fp-1") == NOW + 3600
    # A simulated clock far in the past still reads back.
    store.mark_url_dead("fp-old", 1000.0)
    assert other.url_dead_until("fp-old") == 1000.0
    # Redis drops a mark when it runs out.
    store.mark_url_dead("fp-short", time.time() + 0.2)
    assert other.url_dead_until("fp-short") is not None
    time.sleep(0.35)
    assert other.url_dead_until("fp-short") is None


def test_sweep_drops_expired_and_lru_ghosts(open_store, raw):
    store = open_store()
    store.put(DomainStat("old.example", state=State.DEAD, first_seen=NOW, last_seen=NOW, state_expires_at=NOW - 1))
    store.put(DomainStat("new.example", state=State.DEAD, first_seen=NOW, last_seen=NOW, state_expires_at=NOW + 99))
    raw.zadd(f"{open_store.prefix}lru", {"ghost.example": NOW})  # its key expired in Redis
    assert store.count() == 3
    assert store.sweep(NOW) == 1
    assert store.count() == 1
    assert [s.domain for s in store.iter_records()] == ["new.example"]


def test_lru_cap_evicts_least_recently_seen(open_store):
    store = open_store(max_domains=5, flush_size=1000)
    for i in range(5):
        store.record(f"g{i}.example", fetch(NOW + i))
    store.record("g0.example", fetch(NOW + 10))  # seen again: now the most recent
    store.flush()
    for i in range(5, 8):
        store.record(f"g{i}.example", fetch(NOW + 10 + i))
    store.flush()
    assert store.count() == 5
    assert store.evicted == 3
    kept = sorted(s.domain for s in store.iter_records())
    assert kept == ["g0.example", "g4.example", "g5.example", "g6.example", "g7.example"]
    assert store.get("g1.example") is None
    store.put(DomainStat("g9.example", first_seen=NOW, last_seen=NOW + 100))
    assert store.count() == 5
    assert store.get("g4.example") is None


def test_corrupt_value_reads_as_unknown_with_one_warning(open_store, raw, caplog):
    store = open_store(flush_size=100)
    raw.set(f"{open_store.prefix}d:{{bad.example}}", b"\x07garbage")
    raw.hset(f"{open_store.prefix}d:{{hash.example}}", "x", "y")  # not even a string
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert store.get("bad.example") is None
        assert store.decide("bad.example", NOW)[:2] == (FIRST_SIGHT, State.UNKNOWN)
        assert store.get("hash.example") is None
        assert list(store.iter_records()) == []
    warnings = [r for r in caplog.records if "Corrupt" in r.getMessage()]
    assert len(warnings) == 1
    assert "bad.example" in warnings[0].getMessage()
    assert store.corrupt_records >= 3
    # The next outcome replaces the corrupt value with a fresh record.
    store.record("bad.example", fetch(NOW))
    store.flush()
    assert store.get("bad.example").fetch_total == 1


def test_flush_failure_keeps_entries(open_store, monkeypatch):
    store = open_store(flush_size=100)
    store.record("h.example", fetch(NOW))
    store.record("h.example", fetch(NOW + 1))
    store.record("i.example", fetch(NOW + 2))

    def broken(batch):
        raise StoreError("disk on fire")

    monkeypatch.setattr(store, "_write_batch", broken)
    with pytest.raises(StoreError):
        store.flush()
    assert store.pending == 3
    assert store.get("h.example").fetch_total == 2
    monkeypatch.undo()
    assert store.flush() == 3
    assert store.pending == 0
    assert store.get("h.example").fetch_total == 2
    assert store.get("i.example").fetch_total == 1


def test_decide_matches_the_reference_store(open_store):
    """The header-only fast path decides exactly as the base class does."""
    store, memory = open_store(), MemoryStore(Config())
    states = [
        (State.UNKNOWN, NOW + 7 * 86400, 0.0),
        (State.UNKNOWN, NOW + 7 * 86400, NOW),
        (State.DEAD, NOW + 30 * 86400, 0.0),
        (State.ANTIBOT_SOFT, NOW + 7 * 86400, 0.0),
        (State.ANTIBOT_HARD, NOW + 90 * 86400, 0.0),
        (State.FRIENDLY, None, 0.0),
        (State.COLD, NOW + 90 * 86400, 0.0),
    ]
    for i, (state, expires, probed) in enumerate(states):
        stat = DomainStat(
            f"s{i}.example",
            state=state,
            first_seen=NOW,
            last_seen=NOW,
            state_changed_at=NOW,
            state_expires_at=expires,
            probed_at=probed,
        )
        store.put(stat)
        memory.put(stat)
        for at in (NOW + 1, NOW + 8 * 86400, NOW + 95 * 86400, NOW + 400 * 86400):
            assert store.decide(stat.domain, at) == memory.decide(stat.domain, at), (state, at)


@pytest.mark.parametrize("head_probe", [True, False])
def test_decide_fast_path_matches_base_decide_randomised(open_store, head_probe):
    store = open_store(flush_size=10_000, flush_interval=1e9, head_probe=head_probe)
    rng = random.Random(head_probe)
    day = 86400
    for n in range(150):
        domain, t, stat = f"r{n}.example", NOW, None
        entries = [
            RecentEntry(
                0.0,
                rng.choice(list(Method)),
                rng.choice(list(Outcome)),
                rng.choice([None, 200, 403, 404, 429, 503]),
                rng.choice([None, "TimeoutError", "block:cloudflare", "cloudflare:cf-ray"]),
            )
            for _ in range(rng.randint(0, 30))
        ]
        split = max(0, len(entries) - rng.randint(0, 3))
        for i, entry in enumerate(entries):
            t += rng.randint(0, 40 * day)
            entry.at = t
            if i < split:
                stat, _ = store.policy.observe(stat, domain, entry)
            else:
                if i == split and stat is not None:
                    store.put(stat)
                store.record(domain, entry)  # pending, not flushed
        if split == len(entries) and stat is not None:
            store.put(stat)
        probes = [t + rng.randint(-day, 200 * day) for _ in range(rng.randint(1, 5))]
        for now in probes:
            assert store.decide(domain, now) == DomainStore.decide(store, domain, now)
        store.flush()
        for now in probes:
            assert store.decide(domain, now) == DomainStore.decide(store, domain, now)


def test_old_redis_is_refused_at_start_up():
    class Old:
        closed = False

        def info(self, section):
            return {"redis_version": "6.0.16"}

        def close(self):
            self.closed = True

    old = Old()
    with pytest.raises(StoreError, match=r"Redis 6\.0\.16.*6\.2"):
        RedisStore._check_version(old, "redis://old:6379/0")
    assert old.closed


def test_not_open_is_a_clear_error(redis_server, tmp_path):
    store = redis_store_factory(redis_server.url, tmp_path)()
    with pytest.raises(StoreError, match="not open"):
        store.get("x.example")


# ------------------------------------------------- configuration, start-up


def test_missing_url_names_the_setting():
    with pytest.raises(ConfigError, match="DOMAINSTATE_REDIS_URL"):
        RedisStore(Config(redis_url=None)).open()


def test_bad_url_names_the_setting():
    with pytest.raises(ConfigError, match="DOMAINSTATE_REDIS_URL"):
        RedisStore(Config(redis_url="http://:pw@localhost/")).open()


def test_a_query_value_redis_py_rejects_on_connect_names_the_setting(redis_server):
    # redis-py builds the client from the URL, then refuses the value when it connects
    with pytest.raises(ConfigError, match=r"DOMAINSTATE_REDIS_URL .*socket_timeout must be >= 0"):
        RedisStore(Config(redis_url=redis_server.url + "?socket_timeout=-1")).open()


@pytest.mark.parametrize("prefix", ["a{b:", "x}:", "{}:", "{a}{b}:"])
def test_bad_prefix_names_the_setting(redis_server, prefix):
    with pytest.raises(ConfigError, match="DOMAINSTATE_REDIS_PREFIX"):
        RedisStore(Config(redis_url=redis_server.url, redis_prefix=prefix)).open()


def test_scrapy_redis_url_is_the_fallback(redis_server):
    config = Config.from_settings({"REDIS_URL": redis_server.url})
    with RedisStore(config) as store:
        assert store.count() >= 0


def test_unreachable_at_open_names_the_url_with_password_masked():
    require_redis_server()
    server = RedisServer()  # never started: nothing listens on its port
    try:
        url = f"redis://user:s3cret@127.0.0.1:{server.port}/0"
        started = time.monotonic()
        with pytest.raises(StoreError) as info:
            RedisStore(Config(redis_url=url)).open()
        assert time.monotonic() - started < 5
    finally:
        server.close()
    message = str(info.value)
    assert f"127.0.0.1:{server.port}" in message
    assert "DOMAINSTATE_REDIS_URL" in message
    assert "s3cret" not in message


def test_password_is_masked_and_used(tmp_path):
    require_redis_server()
    with (
        RedisServer(tmp_path / "auth", password="s3cret") as server,
        RedisStore(Config(redis_url=server.url)) as store,
    ):
        store.record("auth.example", fetch(NOW))
        store.flush()
        assert store.count() == 1
        assert "s3cret" not in store.describe()
        assert "***" in store.describe()
    assert mask_url("redis://localhost/0?password=abc") == "redis://localhost/0?password=***"
    assert mask_url("rediss://u:p@h:1/2") == "rediss://u:***@h:1/2"


# --------------------------------------------------------- sharing, prefixes


def test_key_prefix_isolation(redis_server, tmp_path):
    one = Stores(redis_store_factory(redis_server.url, prefix="iso-one:"))
    two = Stores(redis_store_factory(redis_server.url, prefix="iso-two:"))
    try:
        a, b = one(), two()
        a.clear()
        b.clear()
        a.record("shared.example", fetch(NOW))
        a.flush()
        a.mark_url_dead("fp", NOW + 60)
        assert b.get("shared.example") is None
        assert b.url_dead_until("fp") is None
        assert b.count() == 0
        assert list(b.iter_records()) == []
        b.record("shared.example", fetch(NOW, Outcome.OK_EMPTY))
        b.flush()
        assert b.clear() == 1
        assert a.get("shared.example").fetch_ok == 1
        assert a.count() == 1
    finally:
        one.close()
        two.close()


def test_clear_leaves_foreign_keys_alone(open_store, raw):
    store = open_store()
    prefix = open_store.prefix
    foreign = ["other:key", prefix.rstrip(":"), f"x{prefix}d:{{a.example}}", "domainstate:d:{a.example}"]
    for key in foreign:
        raw.set(key, b"keep me")
    store.record("mine.example", fetch(NOW))
    store.flush()
    assert store.clear() == 1
    assert all(raw.get(key) == b"keep me" for key in foreign)
    raw.delete(*foreign)


def test_record_keys_expire_after_they_stop_mattering(open_store, raw):
    store = open_store()
    day = 86400
    store.put(DomainStat("friendly.example", state=State.FRIENDLY, first_seen=NOW, last_seen=NOW))
    store.put(
        DomainStat("dead.example", state=State.DEAD, first_seen=NOW, last_seen=NOW, state_expires_at=NOW + 30 * day)
    )
    store.put(
        DomainStat(
            "hard.example", state=State.ANTIBOT_HARD, first_seen=NOW, last_seen=NOW, state_expires_at=NOW + 90 * day
        )
    )
    prefix = open_store.prefix

    def expires_at(domain: str) -> float:
        return time.time() + raw.pttl(f"{prefix}d:{{{domain}}}") / 1000

    assert raw.pttl(f"{prefix}d:{{friendly.example}}") == -1
    # dead: 30 d, then unknown with its history cleared; the key lives 90 d longer.
    assert expires_at("dead.example") == pytest.approx(NOW + (30 + 90) * day, abs=5)
    # antibot-hard: 90 d, antibot-soft 7 d, then unknown; + 90 d.
    assert expires_at("hard.example") == pytest.approx(NOW + (90 + 7 + 90) * day, abs=5)
    # A record from a simulated clock in the past is kept 90 d from the write.
    store.put(DomainStat("past.example", state=State.DEAD, first_seen=1.0, last_seen=1.0, state_expires_at=2.0))
    assert expires_at("past.example") == pytest.approx(time.time() + 90 * day, abs=5)


def test_concurrent_write_is_retried_not_lost(open_store, monkeypatch):
    """Another writer changes a record between our read and our EXEC: the transaction retries."""
    import scrapy_domainstate.store.redis as module

    a, b = open_store(flush_size=100), open_store(flush_size=100)
    for i in range(3):
        a.record("race.example", fetch(NOW + i))
    real = module.apply_entries
    fired = []

    def interleave(policy, stat, domain, entries):
        if not fired:
            fired.append(True)
            b.record("race.example", fetch(NOW + 10, Outcome.OK_EMPTY))
            b.flush()
        return real(policy, stat, domain, entries)

    monkeypatch.setattr(module, "apply_entries", interleave)
    assert a.flush() == 3
    assert a.conflicts >= 1
    stat = b.get("race.example")
    assert (stat.fetch_total, stat.fetch_ok, stat.fetch_ok_empty) == (4, 3, 1)


def _lose_exec_reply(monkeypatch, *, applied: bool) -> list[bool]:
    """The next MULTI/EXEC raises a connection error, after (or instead of) running."""
    real = redis.client.Pipeline.execute
    armed = [True]

    def execute(self, raise_on_error=True):
        if armed[0] and self.explicit_transaction:
            armed[0] = False
            if applied:
                real(self, raise_on_error)
            self.reset()
            raise redis.ConnectionError("connection lost while reading the EXEC reply")
        return real(self, raise_on_error)

    monkeypatch.setattr(redis.client.Pipeline, "execute", execute)
    return armed


@pytest.mark.parametrize("applied", [True, False], ids=["exec-ran", "exec-lost"])
def test_lost_exec_reply_is_applied_exactly_once(open_store, monkeypatch, applied):
    store = open_store(flush_size=100)
    store.record("once.example", fetch(NOW))
    store.record("once.example", fetch(NOW + 1))
    store.record("twice.example", fetch(NOW + 2))
    armed = _lose_exec_reply(monkeypatch, applied=applied)
    with pytest.raises(StoreError):
        store.flush()
    assert not armed[0]
    assert store.pending == 3
    assert store.errors == 1
    store.record("once.example", fetch(NOW + 3))
    store._down_until = 0.0  # skip the breaker's wait
    store.flush()
    assert store.pending == 0
    other = open_store()
    assert other.get("once.example").fetch_total == 3
    assert other.get("twice.example").fetch_total == 1


def test_a_confirmed_lost_reply_leaves_no_stale_cached_record(open_store, monkeypatch):
    """The EXEC ran but its reply was lost: once the next flush finds its token, the read cache
    no longer serves the record as it was before that write."""
    from scrapy_domainstate.store._readcache import ReadCache

    store, other = open_store(flush_size=100), open_store()
    # (a cache whose reader thread is not started; its callbacks run at once)
    store.cache = ReadCache(store._reader_fetch, store._reader_report, 0.4, 0.75, 5.0, lambda f, *a: f(*a))
    store.record("cached.example", fetch(NOW))
    store.flush()  # cached: fetch_total 1
    store.record("cached.example", fetch(NOW + 1))
    store.record("cached.example", fetch(NOW + 2))
    _lose_exec_reply(monkeypatch, applied=True)
    with pytest.raises(StoreError):
        store.flush()
    store._down_until = 0.0  # skip the breaker's wait
    store.flush()  # finds the token: the entries were written
    assert other.get("cached.example").fetch_total == 3
    assert store.get("cached.example").fetch_total == 3


# ------------------------------------------------------- Redis going away


def _hammer(store: RedisStore, n: int = 100) -> float:
    started = time.monotonic()
    for i in range(n):
        domain = f"down{i % 10}.example"
        store.decide(domain, NOW + i)
        store.url_dead_until(f"fp{i}")
        store.record(domain, fetch(NOW + i))
    return time.monotonic() - started


def test_server_stopped_mid_use_then_restarted_loses_nothing(own_server, own_stores, caplog):
    store = own_stores(flush_size=10)
    store.breaker_seconds = 0.3
    for i in range(5):
        store.record("before.example", fetch(NOW + i))
    store.flush()
    own_server.stop()
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        elapsed = _hammer(store)
    assert elapsed < 5, f"100 calls took {elapsed:.1f} s with Redis down"
    assert store.pending == 100
    assert store.errors >= 1
    failures = [r for r in caplog.records if r.levelno == logging.WARNING and "failed" in r.getMessage()]
    assert len(failures) == 1
    assert failures[0].exc_info is not None
    with pytest.raises(StoreError):
        store.flush()
    assert store.pending == 100

    own_server.start()
    time.sleep(store.breaker_seconds + 0.05)
    assert store.flush() == 100
    reader = own_stores()
    assert reader.get("before.example").fetch_total == 5
    for i in range(10):
        assert reader.get(f"down{i}.example").fetch_total == 10
    assert reader.count() == 11


def test_hung_server_does_not_stall_requests(own_server, own_stores):
    store = own_stores(flush_size=10)
    store.breaker_seconds = 0.5
    store.record("warm.example", fetch(NOW))
    store.flush()
    own_server.pause()
    try:
        elapsed = _hammer(store)
    finally:
        own_server.resume()
    assert elapsed < 5, f"100 calls took {elapsed:.1f} s with Redis hung"
    assert store.pending == 100
    time.sleep(store.breaker_seconds + 0.05)
    # The next record() after the breaker's wait flushes everything on its own.
    store.record("after.example", fetch(NOW + 1000))
    assert store.pending == 0
    reader = own_stores()
    assert reader.count() == 12
    assert sum(reader.get(f"down{i}.example").fetch_total for i in range(10)) == 100


def test_buffer_is_capped_while_down(own_server, own_stores, caplog):
    store = own_stores(flush_size=10)
    store.max_buffered = 50
    own_server.stop()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for i in range(120):
            store.record(f"cap{i}.example", fetch(NOW + i))
    assert store.pending <= 50
    assert store.dropped == 120 - store.pending
    assert any("dropped" in r.getMessage() for r in caplog.records)
    own_server.start()
    store._down_until = 0.0
    store.flush()
    # The newest outcomes survived.
    assert own_stores().get("cap119.example").fetch_total == 1


def test_url_marks_are_buffered_while_down(own_server, own_stores):
    store = own_stores()
    own_server.stop()
    store.mark_url_dead("fp-down", NOW + 600)
    assert store.url_dead_until("fp-down") == NOW + 600
    own_server.start()
    store._down_until = 0.0
    store.flush()
    assert own_stores().url_dead_until("fp-down") == NOW + 600


def test_close_while_down_reports_lost_outcomes(own_server, own_stores):
    store = own_stores()
    store.record("lost.example", fetch(NOW))
    own_server.stop()
    with pytest.raises(StoreError, match="1 buffered outcomes were not written"):
        store.close()


# ------------------------------------------------------------ processes


def _worker(url: str, prefix: str, seed: int, rounds: int, start, errors) -> None:
    import random

    from scrapy_domainstate.store.redis import RedisStore

    rng = random.Random(seed)
    config = Config(redis_url=url, redis_prefix=prefix, flush_size=7)
    try:
        with RedisStore(config) as store:
            start.wait(30)
            for r in range(rounds):
                domains = [f"p{d}.example" for d in range(20)]
                rng.shuffle(domains)
                for domain in domains:
                    at = NOW + r
                    store.record(domain, RecentEntry(at, Method.FETCH, Outcome.OK_CONTACT, 200))
                    store.record(domain, RecentEntry(at, Method.FETCH, Outcome.OK_EMPTY, 200))
                    store.record(domain, RecentEntry(at, Method.TAB, Outcome.OK_CONTACT, 200))
                    store.decide(domain, at)
    except BaseException as exc:
        errors.put(f"worker {seed}: {exc!r}")
        raise


@pytest.mark.slow
def test_three_processes_lose_no_update(redis_server, tmp_path):
    factory = redis_store_factory(redis_server.url, tmp_path)
    ctx = multiprocessing.get_context("spawn")
    start, errors = ctx.Event(), ctx.Queue()
    rounds = 30
    workers = [
        ctx.Process(target=_worker, args=(redis_server.url, factory.prefix, seed, rounds, start, errors))
        for seed in range(3)
    ]
    for worker in workers:
        worker.start()
    time.sleep(0.5)
    start.set()
    for worker in workers:
        worker.join(120)
    problems = []
    while not errors.empty():
        problems.append(errors.get())
    errors.close()
    errors.join_thread()
    assert [w.exitcode for w in workers] == [0, 0, 0], problems
    with factory() as store:
        assert store.count() == 20
        for d in range(20):
            stat = store.get(f"p{d}.example")
            expected = 3 * rounds
            assert (stat.fetch_total, stat.fetch_ok, stat.fetch_ok_empty) == (2 * expected, expected, expected)
            assert (stat.tab_total, stat.tab_ok) == (expected, expected)


# --------------------------------------------------------------- cluster


@pytest.mark.parametrize("prefix", ["c:", "{c}:"], ids=["per-domain", "one-slot"])
def test_redis_cluster(tmp_path, prefix):
    require_redis_server()
    with RedisServer(tmp_path / "cluster", cluster=True) as server:
        factory = redis_store_factory(server.url, prefix=prefix)
        config = Config(flush_size=1000)
        with factory(config) as a, factory(config) as b:
            assert a._cluster
            assert a._per_domain is (prefix == "c:")
            for r in range(4):
                for d in range(20):
                    (a if (r + d) % 2 else b).record(f"k{d}.example", fetch(NOW + r * 100 + d))
                a.flush()
                b.flush()
            assert a.count() == 20
            assert all(s.fetch_total == 4 for s in a.iter_records())
            with factory(Config(max_domains=15)) as capped:
                capped.record("new.example", fetch(NOW + 1000))
                capped.flush()
                assert capped.evicted == 6
            assert a.count() == 15
            assert sorted(s.domain for s in a.iter_records()) == sorted(
                ["new.example"] + [f"k{d}.example" for d in range(6, 20)]
            )
            a.mark_url_dead("fp", NOW + 60)
            assert b.url_dead_until("fp") == NOW + 60
            assert b.delete("k19.example") is True
            assert b.count() == 14
            assert a.clear() == 14
            assert b.count() == 0
