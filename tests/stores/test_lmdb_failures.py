"""The LMDB store against damaged files and a full disk (issue 13, breaks 1, 2, 4 and 5).

Each test damages a real LMDB environment the way the attack did (a NaN written over a
record's time, a malformed LRU-index key, a truncated ``data.mdb``, a file-size limit that
makes every commit fail like a full disk) and checks that the store keeps writing, or
refuses to open with a message naming the file and the fix, and never dies of SIGBUS.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted

from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.record import Method, Outcome, RecentEntry, State
from scrapy_domainstate.store.codec import encode
from scrapy_domainstate.store.lmdb import LmdbStore
from tests import ROOT, T0

HEAD = struct.calcsize("<BBBH5I5d")
FIRST_SEEN_AT = HEAD - 40  # the first of the header's five doubles


def fetch(at: float, outcome: Outcome = Outcome.OK_CONTACT) -> RecentEntry:
    return RecentEntry(at, Method.FETCH, outcome, 200)


def open_store(path: Path, **overrides: Any) -> LmdbStore:
    store = LmdbStore(Config(lmdb_path=str(path), flush_interval=1e9, **overrides))
    store.open()
    return store


def nan_record(stat_bytes: bytes, with_checksums: bool) -> bytes:
    """``stat_bytes`` with first_seen = NaN: as version 2 (no checksums), or as version 3
    with checksums that match (what a writer with a broken clock would leave)."""
    v2 = bytearray(bytes((2,)) + stat_bytes[1:HEAD] + stat_bytes[HEAD + 8 :])
    struct.pack_into("<d", v2, FIRST_SEEN_AT, float("nan"))
    if not with_checksums:
        return bytes(v2)
    head, body = bytes((3,)) + bytes(v2[1:HEAD]), bytes(v2[HEAD:])
    return head + struct.pack("<II", zlib.crc32(head), zlib.crc32(body)) + body


def put_raw(store: LmdbStore, db: str, key: bytes, value: bytes) -> None:
    shared = store._h()
    with shared.env.begin(write=True) as txn:
        txn.put(key, value, db=getattr(shared, db))


# ------------------------------------------------------- 1. a NaN time


@pytest.mark.parametrize("with_checksums", [False, True], ids=["v2", "v3"])
def test_a_nan_time_reads_as_corrupt_and_never_blocks_a_write(
    tmp_path: Path, with_checksums: bool, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_store(tmp_path / "db", flush_size=500)
    good = store.set_state("nan.example", State.DEAD, T0)
    store._known.clear()
    put_raw(store, "records", b"nan.example", nan_record(encode(good), with_checksums))
    with caplog.at_level(logging.WARNING):
        assert store.get("nan.example") is None  # unknown
        for i in range(1000):
            store.record(f"d{i}.example", fetch(T0 + i))
        store.record("nan.example", fetch(T0 + 5000, Outcome.OK_EMPTY))
        store.set_state("other.example", State.COLD, T0)
        store.sweep(T0 + 1)
        store.close()
    warnings = [r for r in caplog.records if "Corrupt domainstate record" in r.getMessage()]
    assert len(warnings) == 1
    again = open_store(tmp_path / "db")
    try:
        assert again.count() == 1002
        fresh = again.get("nan.example")
        assert fresh is not None and fresh.fetch_total == 1 and fresh.first_seen == T0 + 5000
    finally:
        again.close()


# ------------------------------------------ 2. a malformed LRU-index key


@pytest.mark.parametrize("bad_key", [b"\x00" * 8, b"\x00" * 3], ids=["8-bytes", "3-bytes"])
def test_a_malformed_index_key_is_dropped_and_the_index_rebuilt(
    tmp_path: Path, bad_key: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_store(tmp_path / "db", max_domains=50, flush_size=10)
    try:
        for i in range(50):
            store.record(f"a{i}.example", fetch(T0 + i))
        store.flush()
        put_raw(store, "lru", bad_key, b"")
        with caplog.at_level(logging.WARNING):
            for i in range(200):
                store.record(f"b{i}.example", fetch(T0 + 1000 + i))
            store.flush()
        assert store.count() == 50
        assert store.index_repaired >= 1 and store.index_rebuilds >= 1
        assert store.lru_count() == store.count()
        assert store.get("b199.example") is not None  # the newest survive, the oldest went
        assert store.get("a0.example") is None
        assert any("rebuilding the LRU index" in r.getMessage() for r in caplog.records)
    finally:
        store.close()


def test_records_missing_from_the_index_are_still_evicted(tmp_path: Path) -> None:
    store = open_store(tmp_path / "db", max_domains=20, flush_size=10)
    try:
        for i in range(20):
            store.record(f"a{i}.example", fetch(T0 + i))
        store.flush()
        shared = store._h()
        with shared.env.begin(write=True) as txn:
            txn.drop(shared.lru, delete=False)  # the whole index lost
        for i in range(30):
            store.record(f"b{i}.example", fetch(T0 + 1000 + i))
        store.flush()
        assert store.count() == 20
        assert store.lru_count() == 20
        assert store.get("a0.example") is None and store.get("b29.example") is not None
    finally:
        store.close()


# ------------------------------------------------ 4. a truncated data file

OPEN_IN_CHILD = textwrap.dedent(
    """
    import json, sys
    from scrapy_domainstate.core.config import Config
    from scrapy_domainstate.store.base import StoreError
    from scrapy_domainstate.store.lmdb import LmdbStore

    store = LmdbStore(Config(lmdb_path=sys.argv[1]), readonly=sys.argv[2] == "ro")
    try:
        store.open()
        n = store.count()
        domains = [s.domain for s in store.iter_records()]
        store.close()
        print(json.dumps({"opened": n, "read": len(domains)}))
    except StoreError as exc:
        print(json.dumps({"error": str(exc)}))
    """
)


def _open_in_child(path: Path, mode: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-c", OPEN_IN_CHILD, str(path), mode],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, f"child died with {proc.returncode} (SIGBUS is -7): {proc.stderr[-500:]}"
    return json.loads(proc.stdout)


def _filled(path: Path, n: int = 3000) -> int:
    store = open_store(path, flush_size=1000)
    for i in range(n):
        store.record(f"t{i}.example", fetch(T0 + i))
    store.close()
    return os.path.getsize(path / "data.mdb")


@pytest.mark.parametrize("mode", ["rw", "ro"])
@pytest.mark.parametrize("keep", [0.5, 0.9, 8192])
def test_a_truncated_data_file_is_refused_at_open_never_sigbus(tmp_path: Path, mode: str, keep: float) -> None:
    db = tmp_path / "db"
    size = _filled(db)
    cut = int(size * keep) if keep < 1 else int(keep)
    os.truncate(db / "data.mdb", cut)
    answer = _open_in_child(db, mode)
    assert "error" in answer, answer
    message = answer["error"]
    assert str(db / "data.mdb") in message
    assert "truncated" in message and "restore it from a backup" in message


def test_a_data_file_that_is_not_lmdb_is_refused_with_the_fix(tmp_path: Path) -> None:
    db = tmp_path / "db"
    _filled(db, 10)
    with open(db / "data.mdb", "r+b") as fh:
        fh.write(b"\x00" * 8192)  # both meta pages wiped
    answer = _open_in_child(db, "rw")
    assert str(db / "data.mdb") in answer["error"] and "move the directory away" in answer["error"]


@pytest_twisted.ensureDeferred
async def test_a_truncated_file_closes_the_spider_before_its_first_request(
    tmp_path: Path, sites: Any, crawl_settings: dict[str, Any], run_crawl: Any, caplog: pytest.LogCaptureFixture
) -> None:
    db = Path(crawl_settings["DOMAINSTATE_LMDB_PATH"])
    size = _filled(db)
    os.truncate(db / "data.mdb", size // 2)
    settings = {**crawl_settings, "ADDONS": {"scrapy_domainstate.Addon": 0}}
    with caplog.at_level(logging.INFO):
        result = await run_crawl(settings, [sites.url("friendly.test"), sites.url("friendly.test", "/page1")])
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("truncated" in m and str(db / "data.mdb") in m for m in errors), errors
    assert sites.requests("friendly.test") == []
    assert result.responses == []
    assert result.stats["finish_reason"] == "domainstate_unavailable"


# ------------------------------------------------------- 5. a full disk

FULL_DISK = textwrap.dedent(
    """
    import json, os, resource, signal, sys
    from scrapy_domainstate.core.config import Config
    from scrapy_domainstate.core.record import Method, Outcome, RecentEntry
    from scrapy_domainstate.store.base import StoreError
    from scrapy_domainstate.store.lmdb import LmdbStore

    path, n = sys.argv[1], int(sys.argv[2])
    store = LmdbStore(Config(lmdb_path=path, flush_size=100, flush_interval=1e9))
    store.max_buffered = 1000
    store.breaker_seconds = 0.5
    store.breaker.base_cooldown = store.breaker.cooldown = 0.5
    store.open()
    for i in range(300):
        store.record(f"w{i}.example", RecentEntry(1.7e9 + i, Method.FETCH, Outcome.OK_CONTACT, 200))
    store.flush()
    # The disk is full: the file may not grow by a byte (writes fail with EFBIG).
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(path + "/data.mdb"), resource.RLIM_INFINITY))
    for i in range(n):
        store.record(f"f{i}.example", RecentEntry(1.7e9 + i, Method.FETCH, Outcome.OK_CONTACT, 200))
    try:
        store.flush()
        explicit = "flushed"
    except StoreError as exc:
        explicit = str(exc)
    full = {"pending": store.pending, "errors": store.errors, "short_circuits": store.short_circuits,
            "dropped": store.dropped, "explicit": explicit}
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    import time
    time.sleep(store.breaker.remaining() + 0.05)
    store.record("after.example", RecentEntry(1.7e9, Method.FETCH, Outcome.OK_CONTACT, 200))
    full["pending_after"] = store.pending
    full["count_after"] = store.count()
    store.close()
    print(json.dumps(full))
    """
)


def test_a_full_disk_backs_off_caps_the_buffer_and_recovers(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    n = 6000
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
    # Writes were tried a few times, not once per outcome: the breaker holds them off.
    assert 1 <= out["errors"] <= 10, out
    assert out["short_circuits"] >= (n - 100) // 2, out
    # The buffer stays bounded; what it could not keep is counted.
    assert out["pending"] <= 1000, out
    assert out["dropped"] == n - out["pending"], out
    assert "writes are failing" in out["explicit"] or "File too large" in out["explicit"], out
    # Disk space back: the next outcome after the wait writes everything buffered.
    assert out["pending_after"] == 0, out
    assert out["count_after"] == 300 + out["pending"] + 1, out
    assert "writing to" in proc.stderr and "failed" in proc.stderr  # one warning, with the cause


@pytest.mark.parametrize("where", ["file", "under-file"])
def test_a_store_path_that_is_a_file_is_a_store_error(tmp_path: Path, where: str) -> None:
    """A clear StoreError naming the path (the command prints it as "error: ..."; a crawl
    closes as domainstate_unavailable), not an OSError's traceback."""
    from scrapy_domainstate.core.config import Config
    from scrapy_domainstate.store.base import StoreError
    from scrapy_domainstate.store.lmdb import LmdbStore

    afile = tmp_path / "afile"
    afile.write_text("hi")
    path = afile if where == "file" else afile / "sub"
    with pytest.raises(StoreError, match="cannot create the LMDB directory"):
        LmdbStore(Config(lmdb_path=str(path))).open()
    assert afile.read_text() == "hi"
