"""The LMDB store's write-behind (issue 23, part 3): a flush's commit and fsync run on the
store's writer thread while the recording thread goes on.

``schedule`` here is a queue the test's own thread empties, as the reactor runs what
``callFromThread`` hands it: the outcomes recorded while a batch is in flight, a batch that
fails (a full disk) and a close with a batch in flight are each written exactly once.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.record import Method, Outcome, RecentEntry
from scrapy_domainstate.store.lmdb import LmdbStore
from tests import ROOT, T0


def fetch(at: float) -> RecentEntry:
    return RecentEntry(at, Method.FETCH, Outcome.OK_CONTACT, 200)


class Loop:
    """The recording thread's queue of calls from the writer (the reactor's part)."""

    def __init__(self) -> None:
        self.calls: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self.threads: set[str] = set()

    def schedule(self, fn: Callable[[], None]) -> None:
        self.threads.add(threading.current_thread().name)
        self.calls.put(fn)

    def run_ready(self) -> int:
        n = 0
        while True:
            try:
                fn = self.calls.get_nowait()
            except queue.Empty:
                return n
            fn()
            n += 1


def test_outcomes_recorded_while_a_batch_is_written_are_each_stored_once(tmp_path: Path) -> None:
    store = LmdbStore(Config(lmdb_path=str(tmp_path / "db"), flush_size=50, flush_interval=1e9))
    store.open()
    loop = Loop()
    assert store.write_behind(loop.schedule)
    domains = [f"d{i}.example" for i in range(40)]
    sent = dict.fromkeys(domains, 0)
    for i in range(3000):
        domain = domains[(i * 7) % len(domains)]
        stat, _ = store.record(domain, fetch(T0 + i * 0.01))
        sent[domain] += 1
        assert stat.fetch_total == sent[domain]  # the view includes the batch in flight
        if i % 13 == 0:
            loop.run_ready()
    # The writer thread hands its batch back through the loop: on a busy machine the 3,000
    # records may all be taken before it is scheduled, so let the batch in flight come back.
    if not loop.threads:
        loop.calls.get(timeout=10)()
    assert loop.threads and threading.current_thread().name not in loop.threads  # the writer called back
    store.close()  # waits for the batch in flight, writes the rest
    again = LmdbStore(Config(lmdb_path=str(tmp_path / "db")))
    again.open()
    try:
        stored = {s.domain: s.fetch_total for s in again.iter_records()}
    finally:
        again.close()
    assert stored == sent


def test_a_flush_asked_for_during_a_write_follows_it(tmp_path: Path) -> None:
    store = LmdbStore(Config(lmdb_path=str(tmp_path / "db"), flush_size=10_000, flush_interval=1e9))
    store.open()
    loop = Loop()
    store.write_behind(loop.schedule)
    for i in range(100):
        store.record(f"a{i}.example", fetch(T0 + i))
    assert store.flush() == 100 and store.pending == 0  # handed over
    for i in range(5):
        store.record(f"b{i}.example", fetch(T0 + 200 + i))
    assert store.flush() == 0  # one batch in flight at a time
    while store.count() < 105:  # the writer finishes, the loop then hands the next batch over
        loop.calls.get(timeout=10)()
    assert store.pending == 0
    store.close()


FULL_DISK = textwrap.dedent(
    """
    import json, os, queue, resource, signal, sys, time
    from scrapy_domainstate.core.config import Config
    from scrapy_domainstate.core.record import Method, Outcome, RecentEntry
    from scrapy_domainstate.store.lmdb import LmdbStore

    path, n = sys.argv[1], int(sys.argv[2])
    calls = queue.SimpleQueue()

    def settle():  # run the writer's callbacks until no batch is in flight
        while store._job is not None:
            calls.get(timeout=30)()

    store = LmdbStore(Config(lmdb_path=path, flush_size=100, flush_interval=1e9))
    store.max_buffered = 1000
    store.breaker.base_cooldown = store.breaker.cooldown = 0.5
    store.open()
    store.write_behind(calls.put)
    for i in range(300):
        store.record(f"w{i}.example", RecentEntry(1.7e9 + i, Method.FETCH, Outcome.OK_CONTACT, 200))
        settle()
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(path + "/data.mdb"), resource.RLIM_INFINITY))
    for i in range(n):
        store.record(f"f{i}.example", RecentEntry(1.7e9 + i, Method.FETCH, Outcome.OK_CONTACT, 200))
        settle()
    full = {"pending": store.pending, "errors": store.errors, "short_circuits": store.short_circuits,
            "dropped": store.dropped}
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    time.sleep(store.breaker.remaining() + 0.05)
    store.record("after.example", RecentEntry(1.7e9, Method.FETCH, Outcome.OK_CONTACT, 200))
    settle()
    full["pending_after"] = store.pending
    full["count_after"] = store.count()
    store.close()
    print(json.dumps(full))
    """
)


def test_a_full_disk_under_write_behind_backs_off_and_loses_nothing_it_kept(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    n = 3000
    proc = subprocess.run(
        [sys.executable, "-c", FULL_DISK, str(tmp_path / "db"), str(n)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert 1 <= out["errors"] <= 10, out  # the breaker holds the writes off
    assert out["short_circuits"] >= (n - 100) // 2, out
    assert out["pending"] <= 1000, out
    assert out["dropped"] == n - out["pending"], out  # a failed batch went back into the buffer
    assert out["pending_after"] == 0, out
    assert out["count_after"] == 300 + out["pending"] + 1, out
    assert "writing to" in proc.stderr and "failed" in proc.stderr


# ------------------------------------------------------- the decision memo (issue 23, part 2)


@contextlib.contextmanager
def two_stores(tmp_path: Path, flush_size: int) -> Iterator[tuple[LmdbStore, LmdbStore]]:
    """This process's store and another process's, open on the same LMDB file."""
    config = Config(lmdb_path=str(tmp_path / "db"), flush_size=flush_size, flush_interval=1e9)
    mine, other = LmdbStore(config), LmdbStore(config)
    mine.open()
    other.open()
    try:
        yield mine, other
    finally:
        mine.close()
        other.close()


def test_a_stable_decision_is_served_from_memory_within_its_bound(tmp_path: Path) -> None:
    from scrapy_domainstate.core.record import State

    with two_stores(tmp_path, 1) as (mine, other):
        other.set_state("a.example", State.FRIENDLY, T0)
        first = mine.decide("a.example", T0)
        assert first[1] is State.FRIENDLY
        assert mine.decide("a.example", T0 + 0.5) is first  # the same answer, no new object
        other.set_state("a.example", State.COLD, T0 + 0.6)  # another store: arrives within the bound
        assert mine.decide("a.example", T0 + 0.9) is first
        assert mine.decide("a.example", T0 + mine.decision_memo_seconds + 0.01)[1] is State.COLD
        # This store's own writes invalidate it at once.
        mine.set_state("a.example", State.FRIENDLY, T0 + 2)
        assert mine.decide("a.example", T0 + 2.01)[1] is State.FRIENDLY
        mine.record("a.example", fetch(T0 + 2.02))
        mine.delete("a.example")
        assert mine.decide("a.example", T0 + 2.03)[1] is State.UNKNOWN
        # A time before the memo was made reads the store again.
        mine.set_state("b.example", State.COLD, T0 + 3)
        cold = mine.decide("b.example", T0 + 3.1)
        assert mine.decide("b.example", T0 + 3.0) is not cold


def test_a_domain_with_pending_outcomes_is_decided_once_until_its_next_outcome(tmp_path: Path) -> None:
    from scrapy_domainstate.core.record import State

    store = LmdbStore(Config(lmdb_path=str(tmp_path / "db"), flush_size=10_000, flush_interval=1e9))
    store.open()
    try:
        store.set_state("a.example", State.FRIENDLY, T0)
        store.record("a.example", fetch(T0 + 1))
        first = store.decide("a.example", T0 + 1.1)
        assert first == plain_decide(store, "a.example", T0 + 1.1)
        assert store.decide("a.example", T0 + 1.2) is first  # served from memory
        # An outcome for the domain invalidates it: three antibot answers make it antibot-soft.
        for i in range(3):
            store.record("a.example", RecentEntry(T0 + 2 + i, Method.FETCH, Outcome.ANTIBOT, 403, "challenge:x"))
        again = store.decide("a.example", T0 + 5.1)
        assert again is not first and again == plain_decide(store, "a.example", T0 + 5.1)
    finally:
        store.close()


def plain_decide(store: LmdbStore, domain: str, now: float):  # type: ignore[no-untyped-def]
    """The plain answer (no memo, no header shortcut)."""
    from scrapy_domainstate.store.base import DomainStore

    return DomainStore.decide(store, domain, now)


def test_an_outcome_that_moves_no_decided_field_keeps_the_memo(tmp_path: Path) -> None:
    """A friendly domain's page changes its counters and history, not what decides it: the memo
    made before the outcome still answers (the same object), until the outcome that moves it."""
    from scrapy_domainstate.core.record import State

    store = LmdbStore(Config(lmdb_path=str(tmp_path / "db"), flush_size=10_000, flush_interval=1e9))
    store.open()
    try:
        store.set_state("a.example", State.FRIENDLY, T0)
        first = store.decide("a.example", T0 + 0.1)
        for i in range(5):
            store.record("a.example", fetch(T0 + 0.2 + i / 100))
            assert store.decide("a.example", T0 + 0.3 + i / 100) is first
        store.flush()
        assert store.decide("a.example", T0 + 0.5) is first  # (the flush writes what the view held)
        for i in range(3):
            store.record(
                "a.example", RecentEntry(T0 + 0.6 + i / 100, Method.FETCH, Outcome.ANTIBOT, 403, "challenge:x")
            )
        moved = store.decide("a.example", T0 + 0.7)
        assert moved is not first and moved[1] is State.ANTIBOT_SOFT
    finally:
        store.close()


def test_a_flush_onto_another_processs_record_drops_the_memo(tmp_path: Path) -> None:
    """The memo kept through a friendly page is this process's view; when the flush re-applies the
    page to a record another process wrote meanwhile, the stored state is decided again."""
    from scrapy_domainstate.core.record import State

    with two_stores(tmp_path, 10_000) as (mine, other):
        mine.set_state("a.example", State.FRIENDLY, T0)
        first = mine.decide("a.example", T0 + 0.1)
        mine.record("a.example", fetch(T0 + 0.2))
        assert mine.decide("a.example", T0 + 0.21) is first  # (kept: the page moved nothing)
        other.set_state("a.example", State.COLD, T0 + 0.1)
        mine.flush()  # the page re-applied to the cold record: a useful page makes it unknown
        now = T0 + 0.3
        assert mine.decide("a.example", now) == plain_decide(mine, "a.example", now)
        assert mine.decide("a.example", now)[1] is State.UNKNOWN


def test_outcomes_recorded_during_a_write_onto_another_processs_record_keep_its_verdict(tmp_path: Path) -> None:
    """Write-behind: the batch in flight is re-applied to a record another process wrote; the
    outcomes recorded meanwhile then go on top of that record, and the next batch does not write
    this process's older view back over the other process's verdict."""
    from scrapy_domainstate.core.record import State
    from scrapy_domainstate.store.base import apply_entries

    with two_stores(tmp_path, 10_000) as (mine, other):
        loop = Loop()
        assert mine.write_behind(loop.schedule)
        mine.set_state("a.example", State.FRIENDLY, T0)
        first, second = fetch(T0 + 1), RecentEntry(T0 + 2, Method.FETCH, Outcome.OK_EMPTY, 200)
        mine.record("a.example", first)
        other.set_state("a.example", State.COLD, T0 + 0.5)
        cold = other.get("a.example")
        assert mine.flush() == 1  # handed to the writer thread
        mine.record("a.example", second)  # while the batch is in flight
        loop.calls.get(timeout=10)()  # the writer hands the batch back
        expected = apply_entries(mine.policy, cold, "a.example", [first, second])
        assert mine.get("a.example") == expected  # this process's view: the stored record + the later page
        assert mine.decide("a.example", T0 + 3)[1] is expected.state is not State.FRIENDLY
        mine.flush()  # (the close waits for it)
    from scrapy_domainstate import open_store

    with open_store(str(tmp_path / "db")) as again:
        stored = again.store.get("a.example")
    assert stored is not None and stored.state is expected.state and stored.fetch_total == expected.fetch_total
    assert [e.at for e in stored.recent] == [e.at for e in expected.recent]


def test_the_memo_never_answers_other_than_the_record_would(tmp_path: Path) -> None:
    """Table-driven over every kind of outcome, in runs that move every state: after each outcome
    the memo's answer is the record's own decision."""
    import random

    from scrapy_domainstate.core.record import State

    kinds = [
        (Method.FETCH, Outcome.OK_CONTACT, 200, None),
        (Method.FETCH, Outcome.OK_EMPTY, 200, None),
        (Method.FETCH, Outcome.ANTIBOT, 403, "challenge:x"),
        (Method.TAB, Outcome.OK_CONTACT, 200, None),
        (Method.TAB, Outcome.ANTIBOT, 403, "challenge:x"),
        (Method.FETCH, Outcome.DEAD, None, "dns"),
        (Method.FETCH, Outcome.NETWORK_ERROR, None, "timeout"),
        (Method.HEAD, Outcome.OK_EMPTY, 200, None),
    ]
    store = LmdbStore(Config(lmdb_path=str(tmp_path / "db"), flush_size=7, flush_interval=1e9))
    store.open()
    rng = random.Random(7)
    moved = set()
    try:
        for domain_i in range(40):
            domain = f"d{domain_i}.example"
            now = T0 + domain_i
            weights = [rng.random() for _ in kinds]
            weights[domain_i % len(kinds)] += 4  # each domain leans one way (friendly, a wall, dead...)
            for _ in range(30):
                method, outcome, status, error = rng.choices(kinds, weights)[0]
                now += rng.choice((0.02, 0.2, 3.0, 7200.0, 3 * 86400.0))
                _, transition = store.record(domain, RecentEntry(now, method, outcome, status, error))
                if transition is not None:
                    moved.add(transition.new)
                for later in (now + 0.001, now + 0.005, now + 0.01):  # (inside the memo's bound)
                    expected = store.policy.decision(store.get(domain), domain, later)
                    assert store.decide(domain, later) == expected, (domain, later - T0)
        assert {State.FRIENDLY, State.ANTIBOT_SOFT, State.DEAD} <= moved  # the runs moved states
    finally:
        store.close()
