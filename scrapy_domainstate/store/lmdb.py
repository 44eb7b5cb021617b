"""The default store: one LMDB environment on the local disk, shared by every process.

Layout: one environment (a directory) with three named databases:

``records``
    domain key (UTF-8) -> :func:`~scrapy_domainstate.store.codec.encode` d record.
``lru``
    8-byte big-endian ``last_seen`` in microseconds + domain key -> ``b""``. Keys
    sort by ``last_seen``, so evicting the least recently seen domains is a cursor
    walk from the first key, never a scan. Every write of a record rewrites its
    index entry in the same transaction.
``urls``
    request fingerprint -> little-endian double: until when that URL is dead.

Processes share the file through LMDB's own locking (one writer at a time,
readers never blocked). A flush is one write transaction that re-applies the
buffered entries to the records *as they are on disk at that moment*, so
processes recording outcomes for the same domain at once lose nothing; commits
are synced (one fsync per batch) and never leave a torn file when a process is
killed. A full map is doubled (under an exclusive ``flock`` on
``<path>/resize.lock``, so two processes never resize at once) and the batch
retried; a map grown by another process is adopted (``set_mapsize(0)``).

Hot paths: a decision (:meth:`DomainStore.decide`) reads the record's header only. A flush
compares each stored record with the bytes this process read before applying its
outcomes; when nobody else wrote it meanwhile, the locally applied record *is*
the result (no decode, no re-apply), otherwise the entries are re-applied to the
stored record. Either way only the header and the new entries are packed: the kept
entries' bytes are spliced from the stored record, whose layout (error-class table,
packed entries) was taken when it was decoded or written. Records this process read
or wrote are remembered (bytes, decoded form and layout, bounded) so that reading one
again costs a byte comparison.

One environment per path per process: LMDB must not open the same files twice in
one process (its POSIX locks belong to the process), so every :class:`LmdbStore`
on a path shares one handle from a registry, reference counted. A handle is never
used in a child after ``fork()``: the child closes the inherited handle unused
(py-lmdb 3 refuses to open files that are open in the process, and LMDB's close
only clears the reader slots of the calling process) and opens its own; outcomes
the parent had buffered stay the parent's to flush.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import logging
import os
import pathlib
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import lmdb

from scrapy_domainstate.core.breaker import CircuitBreaker
from scrapy_domainstate.core.clock import FUTURE_MARGIN
from scrapy_domainstate.core.config import LMDB_MAX_MAP_SIZE, Config
from scrapy_domainstate.core.policy import Policy, Transition
from scrapy_domainstate.core.record import DomainStat, RecentEntry
from scrapy_domainstate.store import _lmdbcheck
from scrapy_domainstate.store.base import DomainStore, StoreError, apply_entries
from scrapy_domainstate.store.codec import (
    Layout,
    RecordError,
    decode,
    decode_header,
    decode_with_layout,
    encode,
    encode_on,
    kept_entries,
    layout_of,
)

__all__ = ["LmdbStore"]

logger = logging.getLogger(__name__)

T = TypeVar("T")
#: What the store remembers of a record it read or wrote (see LmdbStore._known).
_Known = tuple[bytes | None, DomainStat | None, bytes | None, Layout | None]

_RECORDS = b"records"
_LRU = b"lru"
_URLS = b"urls"
_LOCK_NAME = "resize.lock"

_U64 = struct.Struct(">Q")
_F64 = struct.Struct("<d")
_U64_MAX = (1 << 64) - 1

#: Keys and records read per read transaction when walking a database.
CHUNK = 1000
#: Map doublings allowed for one transaction (64 KiB -> 64 GiB is 20).
MAX_GROWTHS = 24
#: "Another process grew the map" / "reader table full" retries per transaction.
MAX_RETRIES = 8
#: LMDB's default maximum key size is 511 bytes; the LRU key adds 8.
MAX_KEY = 500
#: Records this process remembers (bytes + decoded) to skip decoding them again.
KNOWN_RECORDS = 4096
#: A backlog left by failed writes (a full disk) is written FLUSH_SLICE domains per
#: transaction, for at most FLUSH_BUDGET seconds and FLUSH_SLICES_PER_CALL slices per flush
#: call (then the next call goes on), so that no call blocks the reactor for long however fast
#: or slow the disk is; a backlog of up to two slices is one transaction.
FLUSH_SLICE = 500
FLUSH_BUDGET = 0.04
FLUSH_SLICES_PER_CALL = 8


def _lru_key(last_seen: float, key: bytes) -> bytes:
    us = last_seen * 1_000_000.0
    if not us > 0.0:  # also NaN
        n = 0
    elif us >= _U64_MAX:
        n = _U64_MAX
    else:
        n = int(us)
    return _U64.pack(n) + key


# ------------------------------------------------------------ env registry


class _Shared:
    """One open environment, shared by every store of this process on that path."""

    __slots__ = ("env", "lock_path", "lru", "path", "pid", "readonly", "records", "refs", "urls")

    def __init__(self, path: str, pid: int) -> None:
        self.path = path
        self.pid = pid
        self.refs = 0
        self.readonly = True
        self.env: Any = None
        self.records: Any = None
        self.lru: Any = None
        self.urls: Any = None
        self.lock_path = os.path.join(path, _LOCK_NAME)


class _Process:
    """This process's id (kept current by an at-fork hook: no syscall on the hot path)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.lock = threading.Lock()

    def after_fork_in_child(self) -> None:
        self.pid = os.getpid()
        self.lock = threading.Lock()


_REGISTRY: dict[str, _Shared] = {}
_PROC = _Process()
os.register_at_fork(after_in_child=_PROC.after_fork_in_child)


#: py-lmdb errors that mean the file itself is damaged (the advice: move it away or restore it).
_DAMAGED = (lmdb.InvalidError, lmdb.CorruptedError, lmdb.VersionMismatchError, lmdb.PageNotFoundError)
#: Errors of a transaction that met a damaged page (BAD_TXN: an earlier one in it did).
_READ_DAMAGED = (*_DAMAGED, lmdb.BadTxnError)
#: Errors of a busy environment, not a damaged one: another process grew the map, the reader
#: table is full of dead processes' slots. An open adopts the new size (or frees the slots) and
#: tries again.
_BUSY = (lmdb.MapResizedError, lmdb.ReadersFullError)


def _damaged_advice(path: str) -> str:
    return (
        f"If {os.path.join(path, 'data.mdb')} is damaged, move the directory away (the store then starts empty) "
        "or restore it from a backup"
    )


def _open_env(shared: _Shared, map_size: int, readonly: bool) -> None:
    """Open the environment and its three databases, retrying while other processes grow the map.

    Every step touches the shared meta pages, and each may find that another process committed
    a larger map meanwhile (``MDB_MAP_RESIZED``) or that the reader table is full of dead
    processes' slots: the whole open is retried then (at most ``MAX_RETRIES`` times), like any
    other transaction. A damaged file is refused with the fix; a busy one never gets that advice.
    """
    path = shared.path
    if not readonly:
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as exc:  # a file there, or under a file, or no permission
            raise StoreError(f"cannot create the LMDB directory {path}: {exc.strerror or exc}") from exc
    elif not os.path.exists(os.path.join(path, "data.mdb")):
        raise StoreError(f"no domainstate database at {path}")
    _wait_for_data(path)
    last: lmdb.Error | None = None
    for _ in range(MAX_RETRIES + 1):
        try:
            env = _lmdb_open(path, map_size, readonly)
        except _BUSY as exc:  # py-lmdb opens the main database in a transaction of its own
            last = exc
            continue
        try:
            dbs = _prepare(env, path, map_size, readonly)
        except _BUSY as exc:
            env.close()
            last = exc
            continue
        except BaseException:
            env.close()
            raise
        shared.env, shared.readonly = env, readonly
        shared.records, shared.lru, shared.urls = dbs
        return
    _refuse_if_damaged(path, last)
    raise StoreError(
        f"cannot open the LMDB environment at {path}: still busy after {MAX_RETRIES} retries ({last}); "
        "other processes keep growing its map, try again"
    )


def _refuse_if_damaged(path: str, exc: BaseException | None) -> None:
    """After LMDB failed to open ``path``: the damage message if its meta pages do not add up."""
    what = _lmdbcheck.diagnose(os.path.join(path, "data.mdb"))
    if what is not None:
        raise StoreError(_damaged(path, f"{what}; LMDB said: {exc}")) from exc


def _lmdb_open(path: str, map_size: int, readonly: bool) -> Any:
    try:
        return lmdb.open(
            path,
            map_size=map_size,
            subdir=True,
            readonly=readonly,
            lock=True,
            sync=True,
            metasync=True,
            writemap=False,
            map_async=False,
            max_dbs=4,
            create=not readonly,
        )
    except _BUSY:
        raise
    except _DAMAGED as exc:
        _refuse_if_damaged(path, exc)
        raise StoreError(f"cannot open the LMDB environment at {path}: {exc}. {_damaged_advice(path)}") from exc
    except lmdb.Error as exc:
        _refuse_if_damaged(path, exc)
        raise StoreError(f"cannot open the LMDB environment at {path}: {exc}") from exc


def _prepare(env: Any, path: str, map_size: int, readonly: bool) -> list[Any]:
    """Check the open environment and open its databases; raises ``_BUSY`` errors to retry."""
    try:
        # Free the reader slots of processes that died (kill -9) holding one.
        env.reader_check()
        # Adopt a map grown by other processes, never shrink below the setting.
        env.set_mapsize(0)
        if not readonly and env.info()["map_size"] < map_size:
            env.set_mapsize(map_size)
    except _BUSY:
        raise
    except lmdb.Error as exc:
        _refuse_if_damaged(path, exc)
        raise StoreError(f"cannot open the LMDB environment at {path}: {exc}") from exc
    _check_size(env, path)
    _check_structure(env, path)
    try:
        if readonly:
            # Not in a `with env.begin()` block: a read transaction is aborted at its
            # end, and the handles it opened with it.
            return [env.open_db(name, create=False) for name in (_RECORDS, _LRU, _URLS)]
        with env.begin(write=True) as txn:
            return [env.open_db(name, txn=txn, create=True) for name in (_RECORDS, _LRU, _URLS)]
    except _BUSY:
        raise
    except lmdb.NotFoundError as exc:
        raise StoreError(f"{path} is not a domainstate database (or it is still empty): {exc}") from exc
    except _DAMAGED as exc:
        raise StoreError(f"cannot open the LMDB environment at {path}: {exc}. {_damaged_advice(path)}") from exc
    except lmdb.Error as exc:
        raise StoreError(f"cannot open the LMDB environment at {path}: {exc}") from exc


def _damaged(path: str, what: object) -> str:
    """The message for a damaged data file: which file, what is wrong, the fix."""
    return (
        f"the LMDB data file {os.path.join(path, 'data.mdb')} is damaged ({what}): "
        f"move the directory away ({path}; the store then starts empty) or restore it from a backup"
    )


def _check_structure(env: Any, path: str) -> None:
    """Refuse a data file whose meta pages or B-tree page headers do not add up.

    LMDB asserts (SIGABRT) on some such damage at the first write or in a cursor walk; see
    :mod:`._lmdbcheck`. Checked under a read transaction, so that the pages of its snapshot
    are not reused by another process's commits meanwhile.
    """
    data = os.path.join(path, "data.mdb")
    for _ in range(MAX_RETRIES):
        txn = env.begin()
        try:
            fd = os.open(data, os.O_RDONLY)
            try:
                meta = _lmdbcheck.check_file(fd, os.fstat(fd).st_size, txn.id())
                _lmdbcheck.check_tree(fd, meta, (_RECORDS, _LRU, _URLS))
                return
            except LookupError:  # two commits since the snapshot began: its meta page was reused
                continue
            finally:
                os.close(fd)
        except _lmdbcheck.Damaged as exc:
            raise StoreError(_damaged(path, exc)) from exc
        except OSError as exc:
            raise StoreError(f"cannot check the LMDB data file {data}: {exc}") from exc
        finally:
            txn.abort()


def _wait_for_data(path: str) -> None:
    """Refuse an empty ``data.mdb``: LMDB would silently start a new store over it.

    LMDB writes the meta pages of a new file as soon as it creates it (under its lock), so a
    zero-byte file that stays empty for a second is a damaged store, not one being created.
    """
    data = os.path.join(path, "data.mdb")
    deadline = time.monotonic() + 1.0
    while True:
        try:
            size = os.stat(data).st_size
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StoreError(f"cannot check the LMDB data file {data}: {exc}") from exc
        if size:
            return
        if time.monotonic() >= deadline:
            raise StoreError(_damaged(path, "it is empty: 0 bytes, no meta pages"))
        time.sleep(0.02)


def _check_size(env: Any, path: str) -> None:
    """Refuse a data file shorter than the pages its last commit uses.

    LMDB maps the file: reading a page past the end of a truncated file kills the
    process with SIGBUS, so the size is checked before any page is touched (the two
    meta pages, which ``lmdb.open`` read, say how many pages the data uses). The pages
    are read before the size: a commit by another process meanwhile only grows the file.
    """
    data = os.path.join(path, "data.mdb")
    try:
        needed = (int(env.info()["last_pgno"]) + 1) * int(env.stat()["psize"])
        size = os.stat(data).st_size
    except _BUSY:
        raise
    except (OSError, lmdb.Error) as exc:
        raise StoreError(f"cannot check the LMDB data file {data}: {exc}") from exc
    if size < needed:
        raise StoreError(
            f"the LMDB data file {data} is truncated: {size:,} bytes, its last commit needs {needed:,}. "
            f"Move {path} away (the store then starts empty) or restore it from a backup"
        )


def _acquire(path: str, map_size: int, readonly: bool) -> _Shared:
    with _PROC.lock:
        shared = _REGISTRY.get(path)
        if shared is not None and shared.pid != _PROC.pid:
            # Inherited through fork(): its handle belongs to the parent. py-lmdb
            # refuses to open files that are already open in this process (it
            # cannot tell the inherited handle is the parent's), so the handle is
            # released here, before this process opens its own. That is safe
            # because no store keeps a transaction open between calls: the
            # handle has no live transaction whose reader slot (the parent's)
            # closing it could clear, and LMDB's close only clears slots of the
            # calling pid. See _release_inherited.
            _release_inherited(shared)
            del _REGISTRY[path]
            shared = None
        if shared is None:
            shared = _Shared(path, _PROC.pid)
            _open_env(shared, map_size, readonly)
            _REGISTRY[path] = shared
        elif shared.env is None or (shared.readonly and not readonly):
            # A writer joins readers: reopen read-write (no transaction is open
            # between calls, and every store reads the handles from `shared`).
            mode = readonly and shared.readonly
            if shared.env is not None:
                shared.env.close()
                shared.env = None
            _open_env(shared, map_size, mode)
        shared.refs += 1
        return shared


def _release_inherited(shared: _Shared) -> None:
    env, shared.env = shared.env, None
    if env is None:
        return
    try:
        env.close()
    except lmdb.Error:  # pragma: no cover - nothing useful to do in the child
        logger.debug("Closing the LMDB handle inherited from the parent failed", exc_info=True)


def _release(shared: _Shared) -> None:
    with _PROC.lock:
        if shared.pid != _PROC.pid:
            return
        shared.refs -= 1
        if shared.refs > 0:
            return
        if _REGISTRY.get(shared.path) is shared:
            del _REGISTRY[shared.path]
        env, shared.env = shared.env, None
        if env is not None:
            env.close()


# ------------------------------------------------------------------ store


class WriteFailed(StoreError):
    """LMDB refused a write transaction (full disk, I/O error): the breaker's business."""


def _find_data_path(path: str) -> str:
    """Where the LMDB store of ``path`` lives, as Scrapy's ``data_path`` resolves it.

    Found without creating anything (``data_path`` creates a project's
    ``.scrapy`` directory): relative paths go into the project data directory
    inside a project, into ``./.scrapy`` outside one.
    """
    p = pathlib.Path(os.path.expanduser(path))
    if not p.is_absolute():
        from scrapy.utils.conf import closest_scrapy_cfg, get_config
        from scrapy.utils.project import DATADIR_CFG_SECTION, inside_project

        base = pathlib.Path(".scrapy")
        if inside_project():
            cfg = get_config()
            if cfg.has_option(DATADIR_CFG_SECTION, "default"):
                base = pathlib.Path(cfg.get(DATADIR_CFG_SECTION, "default"))
            else:
                scrapy_cfg = closest_scrapy_cfg()
                if scrapy_cfg:
                    base = pathlib.Path(scrapy_cfg).parent / ".scrapy"
        p = base / p
    return os.path.realpath(p)


class _Job:
    """One batch on its way to the disk: the outcomes, what the write reads of this process's
    state (copied when it was handed over), and what came of it."""

    __slots__ = (
        "batch",
        "corrupt",
        "done",
        "error",
        "finished",
        "growths",
        "knowns",
        "n",
        "recover",
        "result",
        "retries",
        "urls",
        "views",
        "written",
    )

    def __init__(
        self,
        batch: dict[str, list[RecentEntry]],
        n: int,
        views: dict[str, DomainStat],
        knowns: dict[str, _Known],
        urls: dict[str, float],
    ) -> None:
        self.batch, self.n, self.views, self.knowns, self.urls = batch, n, views, knowns, urls
        self.corrupt: list[tuple[str, RecordError]] = []
        self.written: list[tuple[str, bytes, DomainStat, bytes, Layout | None]] = []
        self.result: tuple[dict[str, DomainStat], int] | None = None
        #: Set by the writer thread: a failed write, or an error the recording thread recovers
        #: from (full map, map grown elsewhere, full reader table) before the write is retried.
        self.error: BaseException | None = None
        self.recover: lmdb.Error | None = None
        self.growths = self.retries = 0
        self.done = threading.Event()
        self.finished = False


class LmdbStore(DomainStore):
    """Domain records in a local LMDB environment (the default store).

    ``readonly=True`` opens the environment read-only (the ``domainstate``
    command uses it while a crawl writes); writes then raise :class:`StoreError`.
    """

    name = "lmdb"

    #: Seconds flushes wait after a failed write (doubling while it keeps failing, up to the max).
    breaker_seconds = 1.0
    breaker_max_seconds = 30.0
    #: URL dead marks kept while writes fail.
    max_buffered_urls = 10_000
    #: Seconds a decision read from the store is served from memory (see
    #: :meth:`DomainStore.decide`, at most DECIDED_MAX domains): what another process writes
    #: reaches this one's decisions within this long.
    decision_memo_seconds = 1.0

    def __init__(self, config: Config | None = None, policy: Policy | None = None, *, readonly: bool = False) -> None:
        super().__init__(config, policy)
        self.readonly = readonly
        self.path: str | None = None
        self._shared: _Shared | None = None
        #: URL dead marks not written yet (they ride with the next batch).
        self._url_pending: dict[str, float] = {}
        #: domain -> (stored bytes, the record they decode to, its LRU key, their layout
        #: for the spliced encoding) as this process last read or wrote them. Only ever
        #: used after comparing the bytes with what is stored now, so it cannot go stale:
        #: it saves the decode of a record nobody else changed, is the base of the view
        #: and, at a flush, what the view's bytes are spliced onto (_write_batch).
        self._known: dict[str, _Known] = {}
        self._known_max = max(KNOWN_RECORDS, 2 * self.config.flush_size)
        #: The memo's size at which it may be trimmed next (see _trim_known).
        self._next_trim = 0
        self._warned_key = False
        #: After a failed write (full disk...), flushes wait: 1 s, doubling to 30 s.
        self.breaker = CircuitBreaker(1, self.breaker_seconds, max_cooldown=self.breaker_max_seconds)
        self._outage = False
        #: A backlog of failed writes is being written (in slices, see FLUSH_SLICE).
        self._draining = False
        self._auto_flush = False
        #: Failed writes; flushes skipped while the breaker was open.
        self.errors = 0
        self.short_circuits = 0
        #: Times this store doubled the map / adopted a map grown by another process.
        self.map_growths = 0
        self.map_adoptions = 0
        #: Malformed LRU-index entries dropped; times the index was rebuilt.
        self.index_repaired = 0
        self.index_rebuilds = 0
        #: Records stamped while the clock ran ahead, moved back to the present (see _evict).
        self.future_clamped = 0
        #: Write-behind (see write_behind): the writer thread, how its results come back to the
        #: recording thread, the batch on its way, and "flush again when it is written".
        self._writer: ThreadPoolExecutor | None = None
        self._schedule: Callable[[Callable[[], None]], object] | None = None
        self._job: _Job | None = None
        self._again = False

    # ------------------------------------------------------------ lifecycle

    def _resolve_path(self, create: bool) -> str:
        """Where the database lives: a relative path in the Scrapy project's data directory,
        as Scrapy's ``data_path`` says (which creates that directory: only when ``create``)."""
        path = os.path.expanduser(self.config.lmdb_path)
        if os.path.isabs(path):
            return os.path.realpath(path)
        if not create:
            return _find_data_path(path)
        from scrapy.utils.project import data_path

        return os.path.realpath(data_path(path, createdir=True))

    def locate(self, create: bool) -> None:
        path = self._resolve_path(create=False)
        if not create and not os.path.exists(os.path.join(path, "data.mdb")):
            raise StoreError(f"no domainstate database at {path} (DOMAINSTATE_LMDB_PATH={self.config.lmdb_path!r})")

    def append_log(self, name: str, line: str, keep: int) -> None:
        """The log is a file beside the database, ``<name>.jsonl``, locked while written
        (several processes may close at once) and cut back to ``keep`` lines at twice that."""
        if not self.path:
            super().append_log(name, line, keep)
            return
        with open(os.path.join(self.path, f"{name}.jsonl"), "a+", encoding="utf-8") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                fh.write(line + "\n")
                fh.flush()
                fh.seek(0)
                lines = fh.readlines()
                if len(lines) > 2 * keep:
                    fh.seek(0)
                    fh.truncate()
                    fh.writelines(lines[-keep:])
                    fh.flush()
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def read_log(self, name: str, keep: int) -> list[str]:
        if not self.path:
            return super().read_log(name, keep)
        try:
            with open(os.path.join(self.path, f"{name}.jsonl"), encoding="utf-8", errors="replace") as fh:
                return [line.rstrip("\n") for line in fh][-keep:]
        except FileNotFoundError:
            return []

    def open(self, readonly: bool | None = None) -> None:  # None: as built
        """Open (or join) the environment. Idempotent."""
        if readonly is not None and self._shared is None:
            self.readonly = readonly
        if self._shared is not None:
            if self._shared.pid != _PROC.pid:
                self._forget_parent()
            elif self._shared.env is not None:
                return
            else:  # a failed reopen left it without a handle: start over
                old, self._shared = self._shared, None
                _release(old)
        self.path = self._resolve_path(create=not self.readonly)
        self._shared = _acquire(self.path, self.config.lmdb_map_size, self.readonly)

    def close(self) -> None:
        """Flush, then release this store's share of the environment."""
        shared = self._shared
        if shared is None:
            return
        try:
            if shared.pid == _PROC.pid and not self.readonly:
                try:
                    self.flush(force=True)
                except StoreError as exc:
                    lost = self._n_pending + len(self._url_pending)
                    logger.error(
                        "scrapy-domainstate: closing %s with %d buffered outcomes not written: %s",
                        self.describe(),
                        lost,
                        exc,
                    )
                    raise StoreError(f"{exc} ({lost} buffered outcomes were not written)") from exc
        finally:
            self._decided.clear()
            if shared.pid == _PROC.pid:
                self._settle()
                writer, self._writer, self._schedule = self._writer, None, None
                if writer is not None:
                    writer.shutdown(wait=True)
            self._shared = None
            self._known.clear()
            _release(shared)

    def describe(self) -> str:
        return f"lmdb:{self.path or self.config.lmdb_path}"

    def _forget_parent(self) -> None:
        """After fork(): the buffers are the parent's (it flushes them), the handle too."""
        if self._n_pending or self._url_pending:
            logger.debug("Dropping %d outcomes buffered by the parent process before fork()", self._n_pending)
        self._pending, self._view, self._n_pending = {}, {}, 0
        self._url_pending.clear()
        self._known.clear()
        self._decided.clear()
        self._shared = None
        # The parent's writer thread does not exist here, nor does its batch in flight.
        self._writer, self._schedule, self._job, self._again = None, None, None, False

    def _h(self) -> _Shared:
        shared = self._shared
        if shared is None or shared.pid != _PROC.pid or shared.env is None:
            self.open()
            shared = self._shared
            assert shared is not None
        return shared

    # ------------------------------------------------------ transactions

    def _read(self, fn: Callable[[Any, _Shared], T]) -> T:
        """Run ``fn(txn, shared)`` in a short read transaction."""
        shared = self._h()
        for _ in range(MAX_RETRIES):
            try:
                with shared.env.begin() as txn:
                    return fn(txn, shared)
            except (lmdb.MapResizedError, lmdb.ReadersFullError) as exc:
                if self._job is not None:  # the map is resized only while no transaction is open
                    self._settle()
                self._recover(shared, exc)
            except _READ_DAMAGED as exc:
                raise StoreError(f"{self.describe()}: {_damaged(shared.path, exc)}") from exc
            except lmdb.Error as exc:
                raise StoreError(f"{self.describe()}: {exc}") from exc
        raise StoreError(f"{self.describe()}: read failed after {MAX_RETRIES} retries")

    def _recover(self, shared: _Shared, exc: lmdb.Error) -> None:
        """Make the next transaction possible after a full map, a map grown elsewhere, a full reader table."""
        try:
            if isinstance(exc, lmdb.MapFullError):
                self._grow(shared)
            elif isinstance(exc, lmdb.MapResizedError):
                shared.env.set_mapsize(0)  # adopt the size another process committed
                self.map_adoptions += 1
            else:
                shared.env.reader_check()  # free the slots of dead processes
        except (lmdb.Error, OSError) as err:
            raise StoreError(f"{self.describe()}: cannot recover from {exc}: {err}") from err

    def _write(self, fn: Callable[[Any, _Shared], T]) -> T:
        """Run ``fn(txn, shared)`` in one write transaction, growing the map as needed.

        ``fn`` may run more than once (after a full or resized map): it must not
        change the store's state; its result is returned once committed.
        """
        if self._job is not None:
            self._settle()  # one writer at a time, in the order of the calls
        shared = self._h()
        if shared.readonly or self.readonly:
            raise StoreError(f"{self.describe()} is open read-only")
        growths = retries = 0
        while True:
            try:
                with shared.env.begin(write=True) as txn:
                    return fn(txn, shared)
            except lmdb.MapFullError as exc:
                growths += 1
                if growths > MAX_GROWTHS:
                    raise WriteFailed(
                        f"{self.describe()}: the map is still full after {MAX_GROWTHS} doublings"
                    ) from None
                try:
                    self._recover(shared, exc)
                except StoreError as err:  # growing the file failed: the disk is full
                    raise WriteFailed(str(err)) from err
            except (lmdb.MapResizedError, lmdb.ReadersFullError) as exc:
                retries += 1
                if retries > MAX_RETRIES:
                    raise WriteFailed(f"{self.describe()}: {exc}") from exc
                self._recover(shared, exc)
            except _READ_DAMAGED as exc:
                raise WriteFailed(f"{self.describe()}: {_damaged(shared.path, exc)}") from exc
            except lmdb.Error as exc:
                raise WriteFailed(f"{self.describe()}: {exc}") from exc

    def _grow(self, shared: _Shared) -> None:
        """Double the map, unless another process grew it meanwhile; one process at a time."""
        env = shared.env
        before = env.info()["map_size"]
        fd = os.open(shared.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                env.set_mapsize(0)  # adopt what others committed
                size = env.info()["map_size"]
                if size <= before:
                    if before >= LMDB_MAX_MAP_SIZE:
                        return  # as large as it gets: the write fails as on a full disk
                    size = min(before * 2, LMDB_MAX_MAP_SIZE)
                    env.set_mapsize(size)
                    self.map_growths += 1
                    logger.info("Grew the LMDB map of %s to %d MiB", shared.path, size >> 20)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    # ------------------------------------------------------------ corrupt

    def _key(self, domain: str) -> bytes | None:
        key = domain.encode("utf-8")
        if len(key) > MAX_KEY or not key:
            if not self._warned_key:
                self._warned_key = True
                logger.warning("Domain key too long for LMDB, not stored: %r", domain[:80])
            return None
        return key

    # ------------------------------------------------------------ reading

    def _load_raw(self, domain: str) -> DomainStat | None:
        key = self._key(domain)
        if key is None:
            return None
        shared = self._shared
        raw: bytes | None = None
        if shared is not None and shared.pid == _PROC.pid and shared.env is not None:
            try:
                # begin/abort, as in decide(): cheaper than _read's `with` block.
                txn = shared.env.begin(db=shared.records)
                try:
                    raw = txn.get(key)
                finally:
                    txn.abort()
            except lmdb.Error:  # map resized elsewhere, reader table full...: _read handles them
                raw = self._read(lambda txn, sh: txn.get(key, db=sh.records))
        else:
            raw = self._read(lambda txn, sh: txn.get(key, db=sh.records))
        known = self._known.get(domain)
        if known is not None and known[0] == raw and (raw is None or known[1] is not None):
            return known[1]
        if raw is None:
            self._remember(domain, None, None, None, None)
            return None
        try:
            stat, layout = decode_with_layout(raw)
        except RecordError:  # DomainStore._load counts and warns
            self._remember(domain, raw, None, None, None)  # the view's base, even if corrupt
            raise
        self._remember(domain, raw, stat, _lru_key(stat.last_seen, key), layout)
        return stat

    def _remember(
        self, domain: str, raw: bytes | None, stat: DomainStat | None, lru: bytes | None, layout: Layout | None
    ) -> None:
        known = self._known
        known.pop(domain, None)
        known[domain] = (raw, stat, lru, layout)
        # The bases of pending views are kept whatever their number (a flush needs them), so
        # only the others count against the bound; trimmed a quarter at a time (amortized O(1)).
        if len(known) > self._known_max + len(self._view) and len(known) >= self._next_trim:
            self._trim_known()
            self._next_trim = len(known) + self._known_max // 4

    def _trim_known(self) -> None:
        """Forget the oldest remembered records that are no pending view's base.

        Down to three quarters of the bound (plus the views' bases): a trim runs once per
        quarter of the bound of new records at most, never per call. A view's base met on the way is
        moved to the back, so the next trim does not walk over it again, and one trim looks at
        ``_known_max`` entries at most (the next call goes on): every entry is looked at O(1)
        times per insertion and no call walks the whole memo, whatever the number of buffered
        views (a full disk buffers up to ``max_buffered`` of them).
        """
        known, view = self._known, self._view
        excess = len(known) - (self._known_max * 3 // 4 + len(view))
        drop: list[str] = []
        keep: list[str] = []
        for domain in known:  # one pass, oldest first, over at most _known_max entries
            if len(drop) >= excess or len(drop) + len(keep) >= self._known_max:
                break
            (keep if domain in view else drop).append(domain)
        for domain in drop:
            del known[domain]
        for domain in keep:
            known[domain] = known.pop(domain)

    def _record_for_decide(self, domain: str, now: float) -> DomainStat | bytes | None:
        """:meth:`DomainStore.decide`'s lookup: this process's view, else the stored bytes (one
        short read transaction; decide decodes their header only, see ``decision_memo_seconds``
        for what is then served from memory)."""
        shared = self._shared
        if shared is None or shared.pid != _PROC.pid or shared.env is None:
            shared = self._h()
        view = self._view.get(domain)
        if view is not None:
            return view
        try:
            # begin/abort and a bytes copy: measured faster than a `with` block
            # and buffers=True for a few hundred bytes.
            txn = shared.env.begin(db=shared.records)
            try:
                raw: bytes | None = txn.get(domain.encode("utf-8"))
            finally:
                txn.abort()
        except lmdb.BadValsizeError:  # empty or oversized key: never stored
            return None
        except lmdb.Error:
            # Map resized by another process, reader table full...: _read handles them.
            key = domain.encode("utf-8")
            return self._read(lambda txn, sh: txn.get(key, db=sh.records))
        return raw

    def count(self) -> int:
        return self._read(lambda txn, sh: txn.stat(sh.records)["entries"])

    def _scan(self, db_attr: str, start: bytes | None = None) -> Iterator[list[tuple[bytes, bytes]]]:
        """Chunks of ``(key, value)``, CHUNK per short read transaction."""
        last = start

        def chunk(txn: Any, sh: _Shared) -> list[tuple[bytes, bytes]]:
            cur = txn.cursor(db=getattr(sh, db_attr))
            if last is None:
                ok = cur.first()
            else:
                ok = cur.set_range(last)
                if ok and cur.key() == last:
                    ok = cur.next()
            out: list[tuple[bytes, bytes]] = []
            while ok and len(out) < CHUNK:
                out.append(cur.item())
                ok = cur.next()
            return out

        while True:
            items = self._read(chunk)
            if not items:
                return
            yield items
            if len(items) < CHUNK:
                return
            last = items[-1][0]

    def iter_records(self) -> Iterator[DomainStat]:
        for items in self._scan("records"):
            for key, raw in items:
                try:
                    yield decode(raw)
                except RecordError as exc:
                    self._note_corrupt(key.decode("utf-8", "replace"), exc)

    def url_dead_until(self, fingerprint: str) -> float | None:
        pending = self._url_pending.get(fingerprint)
        if pending is not None:
            return pending
        key = fingerprint.encode("utf-8")
        if len(key) > MAX_KEY or not key:
            return None
        raw = self._read(lambda txn, sh: txn.get(key, db=sh.urls))
        if raw is None or len(raw) != _F64.size:
            return None
        return _F64.unpack(raw)[0]

    # ------------------------------------------------------------ writing

    def record(self, domain: str, entry: RecentEntry) -> tuple[DomainStat, Transition | None]:
        """As :meth:`DomainStore.record`; a flush it triggers never raises (while writes fail,
        outcomes stay buffered, at most :attr:`max_buffered`)."""
        if self._shared is not None and self._shared.pid != _PROC.pid:
            self._forget_parent()
        return self._record_buffering(domain, entry)

    def mark_url_dead(self, fingerprint: str, until: float) -> None:
        """Buffered: written with the next batch (or at close)."""
        pending = self._url_pending
        pending[fingerprint] = until
        while len(pending) > self.max_buffered_urls:
            del pending[next(iter(pending))]
            self.dropped += 1
        if len(pending) >= self.config.flush_size:
            self._auto_flush = True
            try:
                self.flush()
            finally:
                self._auto_flush = False

    def flush(self, force: bool = False) -> int:
        """Write the buffered outcomes in one transaction.

        After a failed write the breaker holds further attempts off (1 s, doubling up to
        30 s) so a full disk costs no time per outcome; meanwhile this raises
        :class:`StoreError` (the outcomes stay buffered), or returns 0 when called by
        :meth:`record`. ``force`` tries once anyway (``close``).
        """
        if self._shared is not None and self._shared.pid != _PROC.pid:
            self._forget_parent()
        if self._job is not None and self._in_flight(force):
            return 0
        if not (self._pending or self._url_pending):
            return 0
        breaker = self.breaker
        if not force and not breaker.allow():
            self.short_circuits += 1
            if self._auto_flush:
                return 0
            raise StoreError(
                f"{self.describe()}: writes are failing; {self._n_pending} outcomes stay buffered "
                f"(next attempt within {breaker.remaining():.1f} s)"
            )
        breaker.started()
        if self._writer is not None and not force:
            submitted = self._start_job()
            if submitted is not None:
                return submitted
        try:
            n = self._flush_now(budgeted=self._draining and not force)
        except WriteFailed as exc:
            self._write_failed(exc)
            if self._auto_flush:
                return 0
            raise
        self._written()
        return n

    def _written(self) -> None:
        """A write succeeded: close the breaker, say so after an outage."""
        breaker = self.breaker
        if self._outage or breaker.state != CircuitBreaker.CLOSED:
            breaker.success()
            if self._outage:
                self._outage = False
                logger.info(
                    "scrapy-domainstate: %s writable again (%d failed writes, %d outcomes dropped so far)",
                    self.describe(),
                    self.errors,
                    self.dropped,
                )

    # ------------------------------------------------------------ write-behind

    def write_behind(self, schedule: Callable[[Callable[[], None]], object]) -> bool:
        """From now on, run the flushes' write transactions (their commit and fsync) on a
        writer thread of this store, one batch at a time; ``schedule(fn)`` must run ``fn`` on
        the thread that records (in a crawl, the reactor's ``callFromThread``).

        The recording thread hands a batch over (its outcomes, and copies of what the write
        reads of this process's state) and goes on; the outcomes stay in the view until the
        transaction committed, a failed one puts them back in front of the buffer (as a failed
        synchronous flush does), and a flush asked for meanwhile follows the batch in flight.
        Writes of another kind (``put``, ``delete``, ``sweep``...) and :meth:`close` first wait
        for the batch in flight. ``False`` (nothing changes) for a read-only store.
        """
        if self.readonly:
            return False
        if self._writer is None:
            self._writer = ThreadPoolExecutor(1, thread_name_prefix="domainstate-lmdb")
            self._writer.submit(int)  # the thread starts now, not in the first flush
        self._schedule = schedule
        return True

    def _in_flight(self, force: bool) -> bool:
        """A batch is on its way: ``True`` when this flush follows it (``force`` waits for it)."""
        job = self._job
        if job is not None and job.done.is_set():
            self._finish(job, chain=False)
        if self._job is None:
            return False
        if not force:  # one batch in flight at a time
            self._again = True
            return True
        self._settle()
        return False

    def _due(self) -> bool:
        config = self.config
        n = self._n_pending
        if n >= config.flush_size or len(self._url_pending) >= config.flush_size:
            return True
        return bool(n and (self._draining or time.monotonic() - self._oldest_pending >= config.flush_interval))

    def _start_job(self) -> int | None:
        """Hand the buffered outcomes (a slice of a backlog) to the writer thread; their count,
        or ``None`` when the writer refuses (the interpreter is exiting: write here)."""
        pending = self._pending
        if self._draining and len(pending) > 2 * FLUSH_SLICE:
            batch = dict(itertools.islice(pending.items(), FLUSH_SLICE))
            for domain in batch:
                del pending[domain]
            n = sum(map(len, batch.values()))
        else:
            batch, n = pending, self._n_pending
            self._pending = {}
        self._n_pending -= n
        job = self._prepare_batch(batch, n)
        try:
            self._submit(job)
        except RuntimeError:
            self._job = None
            self._put_back(job)
            self._writer = None
            return None
        return n

    def _submit(self, job: _Job) -> None:
        shared = self._h()
        writer, schedule = self._writer, self._schedule
        assert writer is not None and schedule is not None

        def run() -> None:
            self._run_job(shared, job)
            job.done.set()
            with contextlib.suppress(Exception):  # no reactor any more: the next flush or close finishes it
                schedule(lambda: self._finish(job))

        writer.submit(run)
        self._job = job

    def _run_job(self, shared: _Shared, job: _Job) -> None:
        """On the writer thread: one attempt at the batch's transaction."""
        try:
            with shared.env.begin(write=True) as txn:
                job.result = self._batch_work(txn, shared, job)
        except (*_BUSY, lmdb.MapFullError) as exc:
            job.recover = exc  # the map is resized on the recording thread, then the write retried
        except _READ_DAMAGED as exc:
            job.error = WriteFailed(f"{self.describe()}: {_damaged(shared.path, exc)}")
        except lmdb.Error as exc:
            job.error = WriteFailed(f"{self.describe()}: {exc}")
        except BaseException as exc:  # a bug: reported on the recording thread
            job.error = exc

    def _finish(self, job: _Job, chain: bool = True) -> None:
        """On the recording thread, once the writer is done with ``job``."""
        if job.finished or not job.done.is_set():
            return
        job.finished = True
        if self._job is job:
            self._job = None
        shared = self._shared
        if shared is None or shared.pid != _PROC.pid:
            return
        exc = job.error
        recover = job.recover
        if exc is None and recover is not None:
            try:
                self._recover_job(shared, job, recover)
            except StoreError as err:
                exc = err if isinstance(err, WriteFailed) else WriteFailed(str(err))
            else:  # the map is as the write needs it now: again, same batch
                job.recover = None
                job.done.clear()
                job.finished = False
                self._submit(job)
                return
        if exc is not None:
            self._job_failed(job, exc)
        else:
            self._job_written(job)
        if chain and (self._again or self._due()):
            self._again = False
            self._auto_flush = True
            try:
                self.flush()
            finally:
                self._auto_flush = False

    def _job_failed(self, job: _Job, exc: BaseException) -> None:
        self._put_back(job)
        if not isinstance(exc, WriteFailed):
            logger.error("scrapy-domainstate: writing to %s failed unexpectedly", self.describe(), exc_info=exc)
            exc = WriteFailed(f"{self.describe()}: {exc!r}")
        self._write_failed(exc)

    def _job_written(self, job: _Job) -> None:
        self._batch_done(job)
        pending, view = self._pending, self._view
        for domain in job.batch:
            if domain not in pending:
                view.pop(domain, None)
        if not pending:
            self._draining = False
        self._written()

    def _recover_job(self, shared: _Shared, job: _Job, exc: lmdb.Error) -> None:
        """As :meth:`_write` does between two attempts (here, no transaction of this process is
        open: the map may be resized)."""
        if isinstance(exc, lmdb.MapFullError):
            job.growths += 1
            if job.growths > MAX_GROWTHS:
                raise WriteFailed(f"{self.describe()}: the map is still full after {MAX_GROWTHS} doublings")
            try:
                self._recover(shared, exc)
            except StoreError as err:  # growing the file failed: the disk is full
                raise WriteFailed(str(err)) from err
        else:
            job.retries += 1
            if job.retries > MAX_RETRIES:
                raise WriteFailed(f"{self.describe()}: {exc}")
            self._recover(shared, exc)

    def _put_back(self, job: _Job) -> None:
        """A batch not written goes back in front of what was recorded meanwhile."""
        batch = job.batch
        for domain, entries in self._pending.items():
            batch.setdefault(domain, []).extend(entries)
        self._pending = batch
        self._n_pending += job.n

    def _settle(self) -> None:
        """Wait for the batch in flight (and its retries) to be written or put back."""
        while (job := self._job) is not None:
            job.done.wait()
            self._finish(job, chain=False)

    def _write_failed(self, exc: StoreError) -> None:
        self.errors += 1
        self._draining = True
        self.breaker.failure(hard=True)
        if self._n_pending > self.max_buffered:
            self._trim_buffer()
        if not self._outage:
            self._outage = True
            logger.warning(
                "scrapy-domainstate: writing to %s failed: %s. Outcomes stay buffered (%d now, at most %d); "
                "retrying after %.1f s, then less and less often (up to every %.0f s)",
                self.describe(),
                str(exc).rstrip("."),
                self._n_pending,
                self.max_buffered,
                self.breaker.cooldown,
                self.breaker.max_cooldown,
                exc_info=exc,
            )
        else:
            logger.debug("scrapy-domainstate: %s still failing: %s", self.describe(), exc)

    def _flush_now(self, budgeted: bool = False) -> int:
        if self._url_pending and not self._pending:
            urls = dict(self._url_pending)
            self._write(lambda txn, sh: self._put_urls(txn, sh, urls))
            self._forget_written_urls(urls)
            return 0
        if not budgeted or len(self._pending) <= 2 * FLUSH_SLICE:
            n = super().flush()
        else:
            deadline = time.monotonic() + FLUSH_BUDGET
            n = 0
            for _ in range(FLUSH_SLICES_PER_CALL):
                n += self._flush_slice()
                if not self._pending or time.monotonic() >= deadline:
                    break
        if not self._pending:
            self._draining = False
        return n

    def _flush_slice(self) -> int:
        """Write the FLUSH_SLICE first-buffered domains' outcomes in one transaction."""
        pending = self._pending
        if len(pending) <= FLUSH_SLICE:
            return super().flush()
        batch = dict(itertools.islice(pending.items(), FLUSH_SLICE))
        self._write_batch(batch)  # raises: nothing changed, everything stays buffered
        n = 0
        for domain, entries in batch.items():
            del pending[domain]
            self._view.pop(domain, None)
            n += len(entries)
        self._n_pending -= n
        return n

    def _forget_written_urls(self, urls: dict[str, float]) -> None:
        for fp, until in urls.items():
            if self._url_pending.get(fp) == until:
                del self._url_pending[fp]

    @staticmethod
    def _put_urls(txn: Any, sh: _Shared, urls: dict[str, float]) -> None:
        for fp, until in urls.items():
            key = fp.encode("utf-8")
            if key and len(key) <= MAX_KEY:
                txn.put(key, _F64.pack(until), db=sh.urls)

    def _write_batch(self, batch: dict[str, list[RecentEntry]]) -> dict[str, DomainStat]:
        job = self._prepare_batch(batch, 0)
        job.result = self._write(lambda txn, sh: self._batch_work(txn, sh, job))
        return self._batch_done(job)

    def _prepare_batch(self, batch: dict[str, list[RecentEntry]], n: int) -> _Job:
        """What a write of ``batch`` reads of this process's state, copied (on the thread that
        records): the transaction may then run on the writer thread while outcomes keep coming."""
        view, known = self._view, self._known
        views = {domain: view[domain] for domain in batch if domain in view}
        knowns = {domain: k for domain in batch if (k := known.get(domain)) is not None}
        return _Job(batch, n, views, knowns, dict(self._url_pending))

    def _batch_work(self, txn: Any, sh: _Shared, job: _Job) -> tuple[dict[str, DomainStat], int]:
        """The write transaction of a batch (may run on the writer thread, more than once):
        reads only ``job`` and the transaction, changes nothing but ``job`` and counters."""
        batch, view, known_records = job.batch, job.views, job.knowns
        corrupt, written = job.corrupt, job.written
        corrupt.clear()
        written.clear()
        # In key order: neighbouring records share B-tree pages, so a batch touches (and
        # copies on write) fewer pages than in arrival order.
        keyed = sorted((key, domain) for domain in batch if (key := self._key(domain)) is not None)
        records = sh.records
        out: dict[str, DomainStat] = {}
        lru_moves: list[tuple[bytes | None, bytes]] = []
        for key, domain in keyed:
            raw = txn.get(key, db=records)
            known = known_records.get(domain)
            if known is not None and known[0] == raw and domain in view and (raw is None or known[2]):
                # Nobody wrote this record since this process read it: the
                # entries re-applied to it give exactly this process's view.
                new, old_lru, old, layout = view[domain], known[2], known[1], known[3]
            else:
                new, old, old_lru, layout = self._reapply(domain, key, raw, batch[domain], corrupt)
            try:
                data, new_layout = self._encode_over(new, raw, old, layout)
            except RecordError as exc:  # a time no record can hold: drop this domain's outcomes
                corrupt.append((domain, exc))
                continue
            txn.put(key, data, db=records)
            new_lru = _lru_key(new.last_seen, key)
            if old_lru != new_lru:
                lru_moves.append((old_lru, new_lru))
            out[domain] = new
            written.append((domain, data, new, new_lru, new_layout))
        evicted = 0
        if batch:
            self._move_lru(txn, sh, lru_moves)
            # The writer's clock: records stamped well past its newest outcome are clamped to
            # its oldest one (as old as this batch, so that the domains it learns sort after them).
            times = [e.at for entries in batch.values() for e in entries]
            evicted = self._evict(txn, sh, (min(times), max(times)) if times else None)
        self._put_urls(txn, sh, job.urls)
        return out, evicted

    def _batch_done(self, job: _Job) -> dict[str, DomainStat]:
        """After the batch's transaction committed: what this process now knows is stored."""
        assert job.result is not None
        out, evicted = job.result
        self.evicted += evicted
        for domain, exc in job.corrupt:
            self._note_corrupt(domain, exc)
        views, memo, pending = job.views, self._decided, self._pending
        for domain, data, new, new_lru, new_layout in job.written:
            if new is not views.get(domain):
                # Re-applied on a record another process wrote meanwhile: a decision this
                # process memoised from its own view may no longer be the stored one's, and
                # outcomes recorded while the batch was written (write-behind) go on top of the
                # record as now stored, not of the view they were first applied to (which the
                # next batch would otherwise write back over the other process's verdict).
                memo.pop(domain, None)
                later = pending.get(domain)
                if later:
                    self._view[domain] = apply_entries(self.policy, new, domain, later)
            self._remember(domain, data, new, new_lru, new_layout)
        self._forget_written_urls(job.urls)
        return out

    def _reapply(
        self, domain: str, key: bytes, raw: bytes | None, entries: list[RecentEntry], corrupt: list[Any]
    ) -> tuple[DomainStat, DomainStat | None, bytes | None, Layout | None]:
        """The buffered entries applied to the record as stored now: ``(new, old, old_lru,
        the layout of raw)``."""
        old: DomainStat | None = None
        old_lru = layout = None
        if raw is not None:
            try:
                old, layout = decode_with_layout(raw)
                old_lru = _lru_key(old.last_seen, key)
            except RecordError as exc:
                corrupt.append((domain, exc))
        return apply_entries(self.policy, old, domain, entries), old, old_lru, layout

    @staticmethod
    def _encode_over(
        new: DomainStat, raw: bytes | None, old: DomainStat | None, layout: Layout | None
    ) -> tuple[bytes, Layout | None]:
        """``encode(new)`` and its layout (``None``: not known yet); when ``new`` extends
        ``old`` (stored as ``raw``, whose layout it is), its kept entries are copied from
        ``raw`` instead of packed again."""
        if raw is not None and old is not None:
            if layout is None:
                layout = layout_of(raw)
            if layout is not None:
                spliced = encode_on(new, layout, kept_entries(old.recent, new.recent))
                if spliced is not None:
                    return spliced
        return encode(new), None

    @staticmethod
    def _move_lru(txn: Any, sh: _Shared, moves: list[tuple[bytes | None, bytes]]) -> None:
        """Rewrite the LRU index entries of the records just written, deletions then
        insertions, each in key order (the new entries all sort near the end)."""
        lru = sh.lru
        for old_lru in sorted(m[0] for m in moves if m[0] is not None):
            txn.delete(old_lru, db=lru)
        for _, new_lru in sorted(moves, key=lambda m: m[1]):
            txn.put(new_lru, b"", db=lru)

    def _evict(self, txn: Any, sh: _Shared, now: tuple[float, float] | None = None) -> int:
        """Drop the least recently seen records while there are too many.

        With ``now`` (a batch's oldest and newest outcomes), records seen "later" than the
        newest plus FUTURE_MARGIN (stamped while the clock ran ahead) are first moved back to
        the oldest (:meth:`_clamp_future`): otherwise they would sort as the most recent until the
        clock caught up, and every domain learned meanwhile would be evicted before them.

        A malformed index entry (not 8 bytes + a storable key) is dropped; when one is
        found, or the index runs out before enough records were evicted (records without
        an entry), the index is rebuilt from the records in the same transaction.
        """
        n = txn.stat(sh.records)["entries"]
        extra = n - self.config.max_domains
        if extra <= 0:
            return 0
        evicted = 0
        rebuilt = False
        if now is not None:
            self._clamp_future(txn, sh, *now)
        if txn.stat(sh.lru)["entries"] < n:  # records without an entry: it would evict the wrong ones
            rebuilt = self._rebuild_index(txn, sh)
        cur = txn.cursor(db=sh.lru)
        while extra > 0:
            if not cur.first():
                if rebuilt or not self._rebuild_index(txn, sh):
                    break
                rebuilt = True
                cur = txn.cursor(db=sh.lru)
                continue
            lru_key = cur.key()
            key = lru_key[8:]
            cur.delete()
            if not key or len(key) > MAX_KEY:
                self.index_repaired += 1
                if not rebuilt:
                    rebuilt = True
                    self._rebuild_index(txn, sh)
                    cur = txn.cursor(db=sh.lru)
                continue
            raw = txn.get(key, db=sh.records)
            if raw is None:
                continue  # a stale index entry
            try:
                current = _lru_key(decode(raw).last_seen, key)
            except RecordError:
                current = lru_key  # garbage: evict it
            if current != lru_key:
                continue  # stale: the record was rewritten (its own entry is later)
            txn.delete(key, db=sh.records)
            extra -= 1
            evicted += 1
        return evicted

    #: Records moved back from the future per transaction (the rest in the next ones).
    max_clamped = 10 * CHUNK

    def _clamp_future(self, txn: Any, sh: _Shared, now: float, latest: float) -> int:
        """Rewrite the records whose ``last_seen`` is past ``latest`` + FUTURE_MARGIN with
        ``last_seen = now`` (and their LRU entries); they sort last, so this walks back from
        the index's end. Returns how many."""
        limit = _lru_key(latest + FUTURE_MARGIN, b"")
        cur = txn.cursor(db=sh.lru)
        future: list[bytes] = []
        ok = cur.last()
        while ok and cur.key()[:8] > limit and len(future) < self.max_clamped:
            future.append(cur.key())
            ok = cur.prev()
        clamped = 0
        for lru_key in future:
            key = lru_key[8:]
            raw = txn.get(key, db=sh.records)
            try:
                stat = decode(raw) if raw is not None else None
            except RecordError:
                continue  # garbage: evicted first anyway once its index entry is rebuilt
            txn.delete(lru_key, db=sh.lru)
            if stat is None or _lru_key(stat.last_seen, key) != lru_key:
                continue  # a stale entry
            stat.last_seen = now
            stat.first_seen = min(stat.first_seen, now)
            txn.put(key, encode(stat), db=sh.records)
            txn.put(_lru_key(now, key), b"", db=sh.lru)
            clamped += 1
        self.future_clamped += clamped
        return clamped

    def _rebuild_index(self, txn: Any, sh: _Shared) -> bool:
        """Rewrite the LRU index from the records (corrupt ones sort first). ``False`` when
        there is nothing to index."""
        logger.warning(
            "scrapy-domainstate: rebuilding the LRU index of %s (it was damaged or incomplete)", self.describe()
        )
        txn.drop(sh.lru, delete=False)
        cur = txn.cursor(db=sh.records)
        any_record = False
        for key, raw in cur.iternext():
            any_record = True
            try:
                seen = decode(raw).last_seen
            except RecordError:
                seen = 0.0
            txn.put(_lru_key(seen, key), b"", db=sh.lru)
        self.index_rebuilds += 1
        return any_record

    def _put(self, stat: DomainStat) -> None:
        key = self._key(stat.domain)
        if key is None:
            return

        def work(txn: Any, sh: _Shared) -> int:
            old_lru = self._stored_lru_key(txn, sh, key)
            txn.put(key, encode(stat), db=sh.records)
            new_lru = _lru_key(stat.last_seen, key)
            if old_lru is not None and old_lru != new_lru:
                txn.delete(old_lru, db=sh.lru)
            txn.put(new_lru, b"", db=sh.lru)
            return self._evict(txn, sh)

        self.evicted += self._write(work)
        self._known.pop(stat.domain, None)
        self._decided.pop(stat.domain, None)

    def put_many(self, stats: Iterable[DomainStat], batch: int | None = None) -> int:
        """Overwrite many records, ``batch`` per transaction (default: all in one, so an
        import is all or nothing).

        Like :meth:`put` for each (pending outcomes of those domains are dropped),
        with one fsync per batch instead of one per record. Returns how many.
        """
        n = 0
        chunk: list[tuple[bytes, DomainStat]] = []
        self._decided.clear()

        def work(txn: Any, sh: _Shared) -> int:
            for key, stat in chunk:
                old_lru = self._stored_lru_key(txn, sh, key)
                new_lru = _lru_key(stat.last_seen, key)
                txn.put(key, encode(stat), db=sh.records)
                if old_lru != new_lru:
                    if old_lru is not None:
                        txn.delete(old_lru, db=sh.lru)
                    txn.put(new_lru, b"", db=sh.lru)
            return self._evict(txn, sh)

        def write() -> None:
            self.evicted += self._write(work)
            chunk.clear()

        for stat in stats:
            key = self._key(stat.domain)
            if key is None:
                continue
            self._discard_pending(stat.domain)
            self._known.pop(stat.domain, None)
            chunk.append((key, stat))
            n += 1
            if batch is not None and len(chunk) >= batch:
                write()
        if chunk:
            write()
        return n

    @staticmethod
    def _stored_lru_key(txn: Any, sh: _Shared, key: bytes) -> bytes | None:
        raw = txn.get(key, db=sh.records)
        if raw is None:
            return None
        try:
            return _lru_key(decode(raw).last_seen, key)
        except RecordError:
            return None

    def _delete(self, domain: str) -> bool:
        key = self._key(domain)
        if key is None:
            return False

        def work(txn: Any, sh: _Shared) -> bool:
            old_lru = self._stored_lru_key(txn, sh, key)
            if old_lru is not None:
                txn.delete(old_lru, db=sh.lru)
            return bool(txn.delete(key, db=sh.records))

        self._known.pop(domain, None)
        self._decided.pop(domain, None)
        return self._write(work)

    def _clear(self) -> int:
        def work(txn: Any, sh: _Shared) -> int:
            n = txn.stat(sh.records)["entries"]
            for db in (sh.records, sh.lru, sh.urls):
                txn.drop(db, delete=False)
            return n

        self._url_pending.clear()
        self._known.clear()
        self._decided.clear()
        return self._write(work)

    # -------------------------------------------------------- maintenance

    def sweep(self, now: float) -> int:
        """Drop expired records (in batches of CHUNK per transaction) and expired URL marks."""
        self.flush()
        self._decided.clear()
        removed = 0
        for items in self._scan("records"):
            candidates = []
            for key, raw in items:
                try:
                    _, expires, _, _ = decode_header(raw)
                except RecordError:
                    continue
                if expires is not None and now >= expires:
                    candidates.append(key)
            if candidates:

                def drop(txn: Any, sh: _Shared, keys: list[bytes] = candidates) -> int:
                    return self._drop_expired(txn, sh, keys, now)

                removed += self._write(drop)
        for items in self._scan("urls"):
            dead = [k for k, v in items if len(v) != _F64.size or _F64.unpack(v)[0] <= now]
            if dead:

                def forget(txn: Any, sh: _Shared, keys: list[bytes] = dead) -> None:
                    for k in keys:
                        txn.delete(k, db=sh.urls)

                self._write(forget)
        return removed

    def _drop_expired(self, txn: Any, sh: _Shared, keys: list[bytes], now: float) -> int:
        n = 0
        for key in keys:
            raw = txn.get(key, db=sh.records)
            if raw is None:
                continue
            try:
                stat = decode(raw)
            except RecordError:
                continue
            if self.policy.is_expired(stat, now):  # re-checked: another process may have written it
                txn.delete(key, db=sh.records)
                txn.delete(_lru_key(stat.last_seen, key), db=sh.lru)
                n += 1
        return n

    # ------------------------------------------------------- diagnostics

    def lru_count(self) -> int:
        """Entries in the LRU index (equals :meth:`count` unless records were damaged)."""
        return self._read(lambda txn, sh: txn.stat(sh.lru)["entries"])

    def map_size(self) -> int:
        """The current map size in bytes."""
        return int(self._h().env.info()["map_size"])
