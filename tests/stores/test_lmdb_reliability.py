"""The LMDB store under real processes: concurrent writers, kill -9, a full map, fork().

The multi-process tests start real interpreters (``subprocess``) running
:data:`WORKER` against files in ``tmp_path``; they are marked ``slow`` but run in
the default test command, each in a few seconds.
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from scrapy_domainstate.core.clock import DAY
from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.policy import Decision
from scrapy_domainstate.core.record import DomainStat, Method, Outcome, RecentEntry, State
from scrapy_domainstate.store import lmdb as lmdb_store
from scrapy_domainstate.store.base import StoreError
from scrapy_domainstate.store.codec import decode, encode
from scrapy_domainstate.store.lmdb import LmdbStore
from tests import T0

TIMEOUT = 60

WORKER = textwrap.dedent(
    """
    import json, os, random, sys, time
    from scrapy_domainstate.core.config import Config
    from scrapy_domainstate.core.record import Method, Outcome, RecentEntry
    from scrapy_domainstate.store.lmdb import LmdbStore

    T0 = 1_700_000_000.0
    mode, path = sys.argv[1], sys.argv[2]
    args = json.loads(sys.argv[3])
    config = Config(
        lmdb_path=path,
        flush_size=args.get("flush_size", 500),
        flush_interval=1e9,
        lmdb_map_size=args.get("map_size", 1 << 30),
    )
    store = LmdbStore(config)
    store.open()

    def wait_for_go():
        open(args["ready"], "w").close()
        while not os.path.exists(args["go"]):
            time.sleep(0.002)

    if mode == "same-domains":
        # K outcomes over the same 20 domains: per domain, contact/empty alternate by round.
        wait_for_go()
        for i in range(args["k"]):
            outcome = Outcome.OK_CONTACT if (i // 20) % 2 == 0 else Outcome.OK_EMPTY
            store.record(f"d{i % 20}.example", RecentEntry(T0 + i, Method.FETCH, outcome, 200))
    elif mode == "own-domains":
        wait_for_go()
        for i in range(args["n"]):
            store.record(f"{args['prefix']}{i}.example", RecentEntry(T0 + i, Method.FETCH, Outcome.OK_CONTACT, 200))
    elif mode == "until-killed":
        # Record forever; after every completed flush, acknowledge the running total.
        rng = random.Random(os.getpid())
        ack = os.open(args["ack"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        flushed = recorded = 0
        while True:
            domain = f"k{rng.randrange(300)}.example"
            store.record(domain, RecentEntry(T0 + recorded, Method.FETCH, Outcome.OK_EMPTY, 200, "timeout"))
            recorded += 1
            if store.pending == 0:
                flushed = recorded
                os.write(ack, f"{flushed}\\n".encode())
    store.close()
    print(json.dumps({"growths": store.map_growths, "adoptions": store.map_adoptions, "evicted": store.evicted}))
    """
)


def start_worker(tmp_path: Path, mode: str, db: Path, **args: object) -> subprocess.Popen[str]:
    script = tmp_path / "worker.py"
    if not script.exists():
        script.write_text(WORKER)
    return subprocess.Popen(
        [sys.executable, str(script), mode, str(db), json.dumps(args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_together(tmp_path: Path, mode: str, db: Path, workers: list[dict[str, object]]) -> list[str]:
    """Start workers, release them at once (a file barrier), return their stdout."""
    go = tmp_path / "go"
    procs: list[subprocess.Popen[str]] = []
    readies = []
    try:
        for i, args in enumerate(workers):
            ready = tmp_path / f"ready{i}"
            readies.append(ready)
            procs.append(start_worker(tmp_path, mode, db, ready=str(ready), go=str(go), **args))
        deadline = time.monotonic() + TIMEOUT
        while not all(r.exists() for r in readies):
            assert time.monotonic() < deadline, "workers did not start"
            assert all(p.poll() is None for p in procs), [p.communicate() for p in procs if p.poll() is not None]
            time.sleep(0.01)
        go.touch()
        outputs = []
        for proc in procs:
            out, err = proc.communicate(timeout=TIMEOUT)
            assert proc.returncode == 0, err
            outputs.append(out)
        return outputs
    finally:
        reap(procs)


def reap(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def open_store(db: Path, **overrides: object) -> LmdbStore:
    store = LmdbStore(Config(lmdb_path=str(db), flush_interval=1e9, **overrides))  # type: ignore[arg-type]
    store.open()
    return store


def check_consistent(store: LmdbStore) -> list[DomainStat]:
    """Every record decodes and the LRU index has one entry per record."""
    shared = store._h()
    with shared.env.begin() as txn:
        raws = list(txn.cursor(db=shared.records))
    stats = [decode(raw) for _, raw in raws]  # RecordError would fail the test
    assert store.count() == len(stats) == store.lru_count()
    return stats


# ------------------------------------------------------- multi-process


@pytest.mark.slow
def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    n, k = 4, 500
    db = tmp_path / "db"
    run_together(tmp_path, "same-domains", db, [{"k": k, "flush_size": 7 + i} for i in range(n)])
    store = open_store(db)
    try:
        stats = check_consistent(store)
        assert len(stats) == 20
        assert sum(s.fetch_total for s in stats) == n * k
        for stat in stats:
            # per process and domain: 25 outcomes, 13 ok-contact and 12 ok-empty
            assert (stat.fetch_total, stat.fetch_ok, stat.fetch_ok_empty) == (n * 25, n * 13, n * 12), stat.domain
            assert len(stat.recent) == 20
    finally:
        store.close()


@pytest.mark.slow
def test_kill_9_never_corrupts(tmp_path: Path) -> None:
    db = tmp_path / "db"
    flush_size = 40
    rng = random.Random(7)
    persisted = 0
    for round_ in range(5):
        ack = tmp_path / f"ack{round_}"
        proc = start_worker(tmp_path, "until-killed", db, flush_size=flush_size, ack=str(ack))
        try:
            deadline = time.monotonic() + TIMEOUT
            while not (ack.exists() and ack.stat().st_size):
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline
                time.sleep(0.005)
            time.sleep(rng.uniform(0.0, 0.4))
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=TIMEOUT)
            assert proc.returncode == -signal.SIGKILL
        finally:
            reap([proc])
        lines = ack.read_text().split()
        acked = int(lines[-1]) if lines else 0

        store = open_store(db)
        try:
            stats = check_consistent(store)
            total = sum(s.fetch_total for s in stats)
            assert persisted + acked <= total <= persisted + acked + flush_size, (round_, persisted, acked, total)
            persisted = total
            # The file is writable again at once (the killed writer's lock and reader slot are freed).
            store.record("after-kill.example", RecentEntry(T0, Method.FETCH, Outcome.OK_CONTACT, 200))
            store.flush()
            persisted += 1
        finally:
            store.close()


@pytest.mark.slow
def test_tiny_map_grows(tmp_path: Path) -> None:
    db = tmp_path / "db"
    store = open_store(db, lmdb_map_size=1 << 16, flush_size=1000)
    try:
        assert store.map_size() == 1 << 16
        for i in range(20_000):
            store.record(f"d{i}.example", RecentEntry(T0 + i, Method.FETCH, Outcome.OK_CONTACT, 200))
        store.flush()
        assert store.count() == 20_000
        assert store.map_size() > 1 << 16
        assert store.map_growths >= 1
        stats = check_consistent(store)
        assert {s.domain for s in stats} == {f"d{i}.example" for i in range(20_000)}
    finally:
        store.close()
    again = open_store(db, lmdb_map_size=1 << 16)  # a small setting never shrinks a grown map
    try:
        assert again.map_size() > 1 << 16
        assert again.count() == 20_000
    finally:
        again.close()


@pytest.mark.slow
def test_two_processes_grow_a_tiny_map_at_once(tmp_path: Path) -> None:
    db = tmp_path / "db"
    n = 6000
    outputs = run_together(
        tmp_path,
        "own-domains",
        db,
        [{"n": n, "prefix": p, "flush_size": 150, "map_size": 1 << 16} for p in ("a", "b")],
    )
    store = open_store(db)
    try:
        stats = check_consistent(store)
        assert len(stats) == 2 * n
        assert store.map_size() > 1 << 16
    finally:
        store.close()
    reports = [json.loads(out) for out in outputs]
    assert sum(r["growths"] for r in reports) >= 1  # 64 KiB cannot hold 12,000 records
    # Typically each process also adopts a map the other grew (MapResizedError) a few times.


# ------------------------------------------------ one env per path


def test_two_stores_share_one_environment(tmp_path: Path) -> None:
    db = tmp_path / "db"
    a, b = open_store(db), open_store(db)
    try:
        assert a._shared is b._shared
        assert lmdb_store._REGISTRY[os.path.realpath(db)].refs == 2
        a.record("x.example", RecentEntry(T0, Method.FETCH, Outcome.OK_CONTACT, 200))
        assert b.get("x.example") is None  # not flushed yet
        a.flush()
        got = b.get("x.example")
        assert got is not None and got.fetch_total == 1
        b.record("x.example", RecentEntry(T0 + 1, Method.FETCH, Outcome.OK_EMPTY, 200))
        b.flush()
        got = a.get("x.example")
        assert got is not None and (got.fetch_total, got.fetch_ok_empty) == (2, 1)
        a.close()
        assert b.count() == 1  # still open for b
    finally:
        a.close()
        b.close()
    assert os.path.realpath(db) not in lmdb_store._REGISTRY


def _in_child(fn) -> int:  # type: ignore[no-untyped-def]
    """Run ``fn`` in a forked child; its exit status (0: fn returned)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            fn()
            code = 0
        except BaseException:
            import traceback

            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@pytest.mark.slow
def test_fork_child_opens_its_own_environment(tmp_path: Path) -> None:
    db = tmp_path / "db"
    parent = open_store(db)
    try:
        parent.record("p.example", RecentEntry(T0, Method.FETCH, Outcome.OK_CONTACT, 200))
        parent.flush()
        parent.record("p.example", RecentEntry(T0 + 1, Method.FETCH, Outcome.OK_CONTACT, 200))  # pending at fork
        inherited_env = parent._shared.env if parent._shared else None

        def child() -> None:
            # The inherited store: buffers and handle are the parent's; it opens its own.
            parent.record("c.example", RecentEntry(T0 + 2, Method.FETCH, Outcome.OK_EMPTY, 200))
            parent.flush()
            assert parent._shared is not None and parent._shared.env is not inherited_env
            seen = parent.get("p.example")
            assert seen is not None and seen.fetch_total == 1, seen  # flushed part only
            other = open_store(db)  # a second store in the child shares the child's env
            assert other._shared is parent._shared
            other.record("c.example", RecentEntry(T0 + 3, Method.FETCH, Outcome.OK_EMPTY, 200))
            other.close()
            parent.close()

        assert _in_child(child) == 0
        # The parent's handle, reader slot and buffers are intact.
        parent.flush()
        p = parent.get("p.example")
        c = parent.get("c.example")
        assert p is not None and p.fetch_total == 2  # the parent's pending outcome counted once
        assert c is not None and c.fetch_total == 2
        assert parent.decide("c.example", T0 + 10)[1] is State.UNKNOWN
        check_consistent(parent)
    finally:
        parent.close()


# ------------------------------------------------ lmdb specifics


def test_relative_path_lives_in_the_project_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE", raising=False)
    store = LmdbStore(Config(lmdb_path="state"))
    assert store.describe() == "lmdb:state"  # nothing opened before open()
    assert not (tmp_path / ".scrapy").exists()
    store.open()
    try:
        assert store.describe() == f"lmdb:{os.path.realpath(tmp_path / '.scrapy' / 'state')}"
        assert (tmp_path / ".scrapy" / "state" / "data.mdb").exists()
    finally:
        store.close()


def test_absolute_path_is_created(tmp_path: Path) -> None:
    db = tmp_path / "a" / "b" / "db"
    store = open_store(db)
    store.close()
    assert (db / "data.mdb").exists()


def test_readonly(tmp_path: Path) -> None:
    db = tmp_path / "db"
    with pytest.raises(StoreError, match="no domainstate database"):
        LmdbStore(Config(lmdb_path=str(db)), readonly=True).open()
    writer = open_store(db)
    writer.record("x.example", RecentEntry(T0, Method.FETCH, Outcome.OK_CONTACT, 200))
    writer.close()

    reader = LmdbStore(Config(lmdb_path=str(db)), readonly=True)
    reader.open()
    try:
        assert reader.count() == 1
        assert reader.decide("x.example", T0)[1] is State.UNKNOWN
        with pytest.raises(StoreError, match="read-only"):
            reader.put(DomainStat("y.example"))
        # A writer joining in the same process reopens the shared handle read-write.
        writer = open_store(db)
        writer.put(DomainStat("y.example", first_seen=T0, last_seen=T0))
        assert reader.count() == 2
        writer.close()
        assert reader.get("y.example") is not None
    finally:
        reader.close()


def test_damaged_tail_decides_from_the_header(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = open_store(tmp_path / "db")
    try:
        stat = store.set_state("x.example", State.DEAD, T0)
        raw = encode(stat) + b"junk"
        shared = store._h()
        with shared.env.begin(write=True) as txn:
            txn.put(b"x.example", raw, db=shared.records)
        assert store.decide("x.example", T0 + 1) == (Decision.SKIP, State.DEAD, stat.state_expires_at)
        with caplog.at_level(logging.WARNING):
            assert store.get("x.example") is None
        assert store.corrupt_records == 1
        assert "Corrupt domainstate record" in caplog.text
    finally:
        store.close()


def test_sweep_drops_expired_url_marks(tmp_path: Path) -> None:
    store = open_store(tmp_path / "db")
    try:
        store.mark_url_dead("old", T0)
        store.mark_url_dead("new", T0 + 30 * DAY)
        store.flush()
        assert store.url_dead_until("old") == T0
        store.sweep(T0 + DAY)
        assert store.url_dead_until("old") is None
        assert store.url_dead_until("new") == T0 + 30 * DAY
    finally:
        store.close()


def test_batch_rereads_records_written_by_another_store(tmp_path: Path) -> None:
    """The optimistic path (reuse this process's view) must not hide a concurrent write."""
    db = tmp_path / "db"
    a = open_store(db, flush_size=1000)
    b = open_store(db, flush_size=1000)
    try:
        a.record("x.example", RecentEntry(T0, Method.FETCH, Outcome.OK_CONTACT, 200))
        b.record("x.example", RecentEntry(T0 + 1, Method.FETCH, Outcome.OK_EMPTY, 200))
        b.flush()
        a.flush()
        got = a.get("x.example")
        assert got is not None and (got.fetch_total, got.fetch_ok, got.fetch_ok_empty) == (2, 1, 1)
        # b's entry landed first (a's, older than first_seen, is clamped to it by the encoding)
        assert [e.outcome for e in got.recent] == [Outcome.OK_EMPTY, Outcome.OK_CONTACT]
        assert a.lru_count() == 1
    finally:
        a.close()
        b.close()


def test_eviction_skips_stale_index_entries(tmp_path: Path) -> None:
    store = open_store(tmp_path / "db", max_domains=2)
    try:
        shared = store._h()
        for i, name in enumerate(["a", "b"]):
            store.put(DomainStat(f"{name}.example", first_seen=T0 + i, last_seen=T0 + i))
        # A record rewritten behind the index's back (e.g. garbage replaced by a good record).
        with shared.env.begin(write=True) as txn:
            fresh = DomainStat("a.example", first_seen=T0, last_seen=T0 + 100)
            txn.put(b"a.example", encode(fresh), db=shared.records)
        store.put(DomainStat("c.example", first_seen=T0 + 50, last_seen=T0 + 50))
        # a's stale index entry (T0) is dropped, not a; b (T0 + 1) is the least recently seen.
        assert sorted(s.domain for s in store.iter_records()) == ["a.example", "c.example"]
        assert store.evicted == 1
    finally:
        store.close()


def test_put_many(tmp_path: Path) -> None:
    store = open_store(tmp_path / "db", max_domains=2500)
    try:
        store.record("d0.example", RecentEntry(T0, Method.FETCH, Outcome.OK_CONTACT, 200))  # pending: replaced
        stats = [DomainStat(f"d{i}.example", first_seen=T0, last_seen=T0 + i) for i in range(3000)]
        assert store.put_many(stats, batch=1000) == 3000
        assert store.pending == 0
        check_consistent(store)
        assert store.count() == 2500 and store.evicted == 500
        assert store.get("d499.example") is None
        assert store.get("d500.example") == stats[500]
        # Rewriting records moves their index entries.
        store.put_many([DomainStat("d500.example", first_seen=T0, last_seen=T0 + 10_000)])
        store.put(DomainStat("new.example", first_seen=T0, last_seen=T0 + 5000))
        assert store.get("d500.example") is not None and store.get("d501.example") is None
        check_consistent(store)
    finally:
        store.close()
