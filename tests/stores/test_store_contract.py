"""One contract for every store: the same tests run against each backend.

Backends are listed in :data:`BACKENDS` (name -> factory). A factory gets the
test's ``tmp_path`` and returns a :class:`Backend`: how to build a store on this
test's storage, whether a new store object on the same storage sees what an
earlier one flushed, and (optionally) how to damage a stored record. To add a
backend (e.g. Redis), add its factory to :data:`BACKENDS` and its marks (such as
``pytest.mark.redis``) to :data:`MARKS`.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scrapy_domainstate.core.clock import DAY
from scrapy_domainstate.core.config import DEFAULT_TTL, Config
from scrapy_domainstate.core.policy import Decision, Policy
from scrapy_domainstate.core.record import DomainStat, Method, Outcome, RecentEntry, State
from scrapy_domainstate.store.base import DomainStore, StoreError
from scrapy_domainstate.store.lmdb import LmdbStore
from scrapy_domainstate.store.memory import MemoryStore
from tests import T0

#: The decision for a domain never seen, with the shipped defaults: no HEAD probe (the first
#: request goes alone as the probe, docs/SPEC.md section 2).
FIRST_SIGHT = Decision.FETCH_THEN_BROWSER

# No time-triggered flushes: every test decides when to flush.
BASE_CONFIG = Config(flush_size=10_000, flush_interval=1e9)


@dataclass
class Backend:
    name: str
    #: ``make(config, cls)``: a new, unopened store on this test's storage.
    make: Callable[[Config, type[DomainStore] | None], DomainStore]
    #: Whether a new store object on the same storage sees flushed data.
    persistent: bool
    #: ``corrupt(store, domain, data)``: overwrite the stored bytes of a record.
    corrupt: Callable[[DomainStore, str, bytes], None] | None = None


def _memory(tmp_path: Path) -> Backend:
    return Backend("memory", lambda config, cls: (cls or MemoryStore)(config), persistent=False)


def _lmdb_corrupt(store: DomainStore, domain: str, data: bytes) -> None:
    assert isinstance(store, LmdbStore)
    shared = store._h()
    with shared.env.begin(write=True) as txn:
        txn.put(domain.encode(), data, db=shared.records)


def _lmdb(tmp_path: Path) -> Backend:
    path = str(tmp_path / "domainstate")

    def make(config: Config, cls: type[DomainStore] | None) -> DomainStore:
        return (cls or LmdbStore)(replace(config, lmdb_path=path))

    return Backend("lmdb", make, persistent=True, corrupt=_lmdb_corrupt)


def _redis(tmp_path: Path) -> Backend:
    from scrapy_domainstate.testing.redis_server import redis_corrupt, redis_store_factory, shared_redis_url

    make = redis_store_factory(shared_redis_url(), tmp_path)
    return Backend("redis", make, persistent=True, corrupt=redis_corrupt)


def _redis_cluster(tmp_path: Path) -> Backend:
    """The same contract on a real 3-node Redis Cluster (keys hash-tagged per domain)."""
    from scrapy_domainstate.testing.redis_server import redis_corrupt, redis_store_factory, shared_redis_cluster_url

    make = redis_store_factory(shared_redis_cluster_url(), tmp_path)
    return Backend("redis-cluster", make, persistent=True, corrupt=redis_corrupt)


BACKENDS: dict[str, Callable[[Path], Backend]] = {
    "memory": _memory,
    "lmdb": _lmdb,
    "redis": _redis,
    "redis-cluster": _redis_cluster,
}
#: Marks per backend (e.g. ``{"redis": [pytest.mark.redis]}`` for one that needs a server).
MARKS: dict[str, list[pytest.MarkDecorator]] = {"redis": [pytest.mark.redis], "redis-cluster": [pytest.mark.redis]}
PARAMS = [pytest.param(name, id=name, marks=MARKS.get(name, [])) for name in BACKENDS]


@pytest.fixture(params=PARAMS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return BACKENDS[request.param](tmp_path)


@pytest.fixture
def open_store(backend: Backend) -> Iterator[Callable[..., DomainStore]]:
    """``open_store(cls=None, **config_overrides)``: an opened store, closed at teardown."""
    opened: list[DomainStore] = []

    def factory(cls: type[DomainStore] | None = None, **overrides: object) -> DomainStore:
        store = backend.make(replace(BASE_CONFIG, **overrides), cls)
        store.open()
        opened.append(store)
        return store

    yield factory
    for store in reversed(opened):
        store.close()


@pytest.fixture
def store(open_store: Callable[..., DomainStore]) -> DomainStore:
    return open_store()


def reopen(backend: Backend, store: DomainStore, open_store: Callable[..., DomainStore]) -> DomainStore:
    """The store as another process would see it after a restart."""
    if not backend.persistent:
        return store
    store.close()
    return open_store()


def fetch(at: float, outcome: Outcome = Outcome.OK_CONTACT, status: int | None = 200) -> RecentEntry:
    return RecentEntry(at, Method.FETCH, outcome, status)


def full_stat(domain: str, now: float, n: int = 20, state: State = State.UNKNOWN) -> DomainStat:
    """A stat built the way the crawler builds them (whole-second entry offsets)."""
    policy = Policy(BASE_CONFIG)
    stat = None
    for i in range(n):
        outcome = (Outcome.OK_CONTACT, Outcome.HTTP_ERROR, Outcome.NETWORK_ERROR)[i % 3]
        err = "TimeoutError" if outcome is Outcome.NETWORK_ERROR else None
        stat, _ = policy.observe(stat, domain, RecentEntry(now + i, Method.FETCH, outcome, 200, err))
    assert stat is not None
    stat.state = state
    stat.state_expires_at = now + (DEFAULT_TTL[state] or DAY) if state is not State.FRIENDLY else None
    return stat


# ----------------------------------------------------------------- reading


def test_missing_domain(store: DomainStore) -> None:
    assert store.get("missing.example") is None
    assert store.count() == 0
    assert list(store.iter_records()) == []
    decision, state, expires = store.decide("missing.example", T0)
    assert (decision, state, expires) == (FIRST_SIGHT, State.UNKNOWN, T0 + DEFAULT_TTL[State.UNKNOWN])
    assert store.current("missing.example", T0).state is State.UNKNOWN


def test_record_is_visible_before_flush(store: DomainStore) -> None:
    stat, transition = store.record("a.example", fetch(T0))
    assert transition is None
    assert stat.fetch_total == 1
    assert store.pending == 1
    seen = store.get("a.example")
    assert seen is not None and seen.fetch_total == 1 and seen.fetch_ok == 1
    assert store.decide("a.example", T0 + 1)[1] is State.UNKNOWN
    assert store.flush() == 1
    assert store.pending == 0
    seen = store.get("a.example")
    assert seen is not None and seen.fetch_total == 1


def test_flush_persists(backend: Backend, store: DomainStore, open_store: Callable[..., DomainStore]) -> None:
    for i in range(12):
        store.record("a.example", fetch(T0 + i, Outcome.OK_CONTACT if i % 4 else Outcome.OK_EMPTY))
    store.record("b.example", fetch(T0, Outcome.ANTIBOT, 429))
    expected_a = store.get("a.example")
    assert store.flush() == 13
    again = reopen(backend, store, open_store)
    a = again.get("a.example")
    assert a == expected_a
    assert a is not None and a.state is State.FRIENDLY and a.fetch_total == 12 and a.fetch_ok == 9
    b = again.get("b.example")
    assert b is not None and b.state is State.ANTIBOT_SOFT
    assert again.count() == 2


def test_put_get_delete_clear(backend: Backend, store: DomainStore, open_store: Callable[..., DomainStore]) -> None:
    stats = [full_stat(f"d{i}.example", T0 + i * 100) for i in range(5)]
    for stat in stats:
        store.put(stat)
    assert store.count() == 5
    assert store.get("d3.example") == stats[3]
    assert sorted(s.domain for s in store.iter_records()) == [s.domain for s in stats]
    assert store.delete("d3.example") is True
    assert store.delete("d3.example") is False
    assert store.get("d3.example") is None
    assert store.count() == 4
    again = reopen(backend, store, open_store)
    assert again.get("d1.example") == stats[1]
    assert again.count() == 4
    assert again.clear() == 4
    assert again.count() == 0
    assert again.get("d1.example") is None
    assert list(again.iter_records()) == []


def test_put_replaces_pending(store: DomainStore) -> None:
    store.record("a.example", fetch(T0))
    stat = full_stat("a.example", T0 + 50, state=State.COLD)
    store.put(stat)
    assert store.pending == 0
    assert store.get("a.example") == stat
    store.flush()
    assert store.get("a.example") == stat


def test_set_state(store: DomainStore) -> None:
    store.record("a.example", fetch(T0))
    stat = store.set_state("a.example", State.DEAD, T0 + 10)
    assert stat.state is State.DEAD and stat.fetch_total == 1
    got = store.get("a.example")
    assert got is not None and got.state is State.DEAD
    assert got.state_expires_at == T0 + 10 + DEFAULT_TTL[State.DEAD]
    assert store.decide("a.example", T0 + 20)[0] is Decision.SKIP
    assert store.set_state("a.example", State.ANTIBOT_HARD, T0 + 30, ttl=None).state_expires_at is None
    assert store.decide("a.example", T0 + 1000 * DAY) == (Decision.BROWSER, State.ANTIBOT_HARD, None)
    store.set_state("b.example", State.FRIENDLY, T0, ttl=60)
    assert store.decide("b.example", T0 + 59)[1] is State.FRIENDLY
    assert store.decide("b.example", T0 + 61)[1] is State.UNKNOWN


def test_url_dead(backend: Backend, store: DomainStore, open_store: Callable[..., DomainStore]) -> None:
    fp = "0123456789abcdef0123456789abcdef01234567"
    assert store.url_dead_until(fp) is None
    store.mark_url_dead(fp, T0 + 30 * DAY)
    assert store.url_dead_until(fp) == T0 + 30 * DAY
    store.flush()
    again = reopen(backend, store, open_store)
    assert again.url_dead_until(fp) == T0 + 30 * DAY
    assert again.url_dead_until("other") is None


def test_sweep_drops_expired_only(store: DomainStore) -> None:
    now = T0 + 100 * DAY
    expired = full_stat("old.example", T0, state=State.COLD)  # expires T0 + 90 d
    live = full_stat("live.example", now - DAY, state=State.COLD)
    friendly = full_stat("friendly.example", T0, state=State.FRIENDLY)  # no TTL
    dead = full_stat("dead.example", now - 31 * DAY, state=State.DEAD)  # expired a day ago
    for stat in (expired, live, friendly, dead):
        store.put(stat)
    assert store.sweep(now) == 2
    assert sorted(s.domain for s in store.iter_records()) == ["friendly.example", "live.example"]
    assert store.count() == 2
    assert store.sweep(now) == 0


def test_max_domains_evicts_least_recently_seen(backend: Backend, open_store: Callable[..., DomainStore]) -> None:
    store = open_store(max_domains=3)
    for i, domain in enumerate(["a", "b", "c"]):
        store.record(f"{domain}.example", fetch(T0 + i))
    store.flush()
    assert store.count() == 3 and store.evicted == 0
    store.record("a.example", fetch(T0 + 10))  # a is now the most recently seen
    store.flush()
    store.record("d.example", fetch(T0 + 11))
    store.flush()
    assert store.count() == 3
    assert store.evicted == 1
    assert sorted(s.domain for s in store.iter_records()) == ["a.example", "c.example", "d.example"]
    # Several over the cap in one batch: the oldest go, in last_seen order.
    for i, domain in enumerate(["e", "f"]):
        store.record(f"{domain}.example", fetch(T0 + 20 + i))
    store.flush()
    assert sorted(s.domain for s in store.iter_records()) == ["d.example", "e.example", "f.example"]
    assert store.evicted == 3
    # put() respects the cap too, and a put of an old record evicts that record first.
    store.put(full_stat("g.example", T0 + 100))
    assert sorted(s.domain for s in store.iter_records()) == ["e.example", "f.example", "g.example"]
    store.put(full_stat("ancient.example", T0 - 1000))
    assert store.get("ancient.example") is None
    assert store.count() == 3


def test_corrupt_record_reads_as_unknown(
    backend: Backend, store: DomainStore, caplog: pytest.LogCaptureFixture
) -> None:
    if backend.corrupt is None:
        pytest.skip(f"{backend.name} keeps no encoded records")
    store.put(full_stat("good.example", T0))
    backend.corrupt(store, "bad.example", b"\xff\x00garbage that is not a record")
    backend.corrupt(store, "worse.example", b"")
    with caplog.at_level(logging.WARNING):
        assert store.get("bad.example") is None
        assert store.decide("bad.example", T0) == (FIRST_SIGHT, State.UNKNOWN, T0 + DEFAULT_TTL[State.UNKNOWN])
        assert store.decide("worse.example", T0)[1] is State.UNKNOWN
        assert [s.domain for s in store.iter_records()] == ["good.example"]
        stat, _ = store.record("bad.example", fetch(T0 + 5))
        assert stat.fetch_total == 1
        store.flush()
        again = store.get("bad.example")
        assert again is not None and again.fetch_total == 1 and again.state is State.UNKNOWN
        assert store.sweep(T0 + 1000 * DAY) >= 1
    warnings = [r for r in caplog.records if "Corrupt domainstate record" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert store.corrupt_records >= 2


class FlushFailsOnce:
    """Mixin: the first ``_write_batch`` raises like a backend outage."""

    failures = 1

    def _write_batch(self, batch):  # type: ignore[no-untyped-def]
        if self.failures:
            self.failures -= 1
            raise StoreError("simulated outage")
        return super()._write_batch(batch)  # type: ignore[misc]


def test_flush_failure_keeps_entries(backend: Backend, open_store: Callable[..., DomainStore], tmp_path: Path) -> None:
    base_cls = type(backend.make(BASE_CONFIG, None))
    flaky = type(f"Flaky{base_cls.__name__}", (FlushFailsOnce, base_cls), {})
    store = open_store(cls=flaky)
    store.record("a.example", fetch(T0))
    store.record("a.example", fetch(T0 + 1, Outcome.OK_EMPTY))
    store.record("b.example", fetch(T0 + 2))
    with pytest.raises(StoreError):
        store.flush()
    assert store.pending == 3
    a = store.get("a.example")
    assert a is not None and a.fetch_total == 2  # the local view survives
    store.record("a.example", fetch(T0 + 3))
    assert store.flush() == 4
    assert store.pending == 0
    again = reopen(backend, store, open_store)
    a = again.get("a.example")
    b = again.get("b.example")
    assert a is not None and (a.fetch_total, a.fetch_ok, a.fetch_ok_empty) == (3, 2, 1)
    assert [e.at for e in a.recent] == [T0, T0 + 1, T0 + 3]
    assert b is not None and b.fetch_total == 1


# ------------------------------------------------ decide == base decide

_ENTRY = st.tuples(
    st.sampled_from(list(Method)),
    st.sampled_from([o for o in Outcome if o is not Outcome.NO_VERDICT] + [Outcome.NO_VERDICT]),
    st.sampled_from([None, 200, 403, 404, 429, 503]),
    st.sampled_from([None, "TimeoutError", "block:cloudflare", "cloudflare:cf-ray"]),
    st.integers(min_value=0, max_value=40 * int(DAY)),
)
_COUNTER = itertools.count()


# Not parametrized over BACKENDS on purpose: pytest-twisted breaks on the second
# parametrized item of a hypothesis test. The memory store *is* the base decide.
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    entries=st.lists(_ENTRY, min_size=0, max_size=30),
    probes=st.lists(st.integers(min_value=-DAY, max_value=200 * int(DAY)), min_size=1, max_size=5),
    pending=st.integers(min_value=0, max_value=3),
    head_probe=st.booleans(),
)
def test_lmdb_decide_matches_base_decide(
    tmp_path: Path,
    entries: list[tuple[Method, Outcome, int | None, str | None, int]],
    probes: list[int],
    pending: int,
    head_probe: bool,
) -> None:
    config = replace(BASE_CONFIG, lmdb_path=str(tmp_path / "decide"), head_probe=head_probe)
    with LmdbStore(config) as store:
        check_decide_matches_base(store, entries, probes, pending)


def check_decide_matches_base(
    store: DomainStore,
    entries: list[tuple[Method, Outcome, int | None, str | None, int]],
    probes: list[int],
    pending: int,
) -> None:
    """``store.decide`` (a backend's fast path) answers exactly as ``DomainStore.decide``."""
    domain = f"d{next(_COUNTER)}.example"
    t = T0
    stat = None
    split = max(0, len(entries) - pending)
    for method, outcome, status, err, dt in entries[:split]:
        t += dt
        stat, _ = store.policy.observe(stat, domain, RecentEntry(t, method, outcome, status, err))
    if stat is not None:
        store.put(stat)
    for method, outcome, status, err, dt in entries[split:]:  # recorded, not flushed
        t += dt
        store.record(domain, RecentEntry(t, method, outcome, status, err))
    for offset in probes:
        now = t + offset
        assert store.decide(domain, now) == DomainStore.decide(store, domain, now)
    store.flush()
    for offset in probes:
        now = t + offset
        assert store.decide(domain, now) == DomainStore.decide(store, domain, now)
    other = f"missing-{domain}"
    assert store.decide(other, t) == DomainStore.decide(store, other, t)
