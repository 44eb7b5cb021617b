"""``scrapy domainstate import`` in bounded memory: two passes over a spool on disk.

Pass 1 reads the CSV row by row (:func:`~scrapy_domainstate.tools.csvio.iter_csv`): each bad
row is printed as ``line N: ...`` as it is found; each good row's key goes to the
duplicate check and its record, encoded, to the spool. Both live in one temporary
SQLite file (in ``TMPDIR``), never in memory: memory stays flat whatever the file's
size. If any row is bad, nothing is written. Pass 2 reads the records back from the
spool in file order and writes them in batches of :data:`BATCH` (one transaction each
in LMDB). Stdin is read once, like a file.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TextIO

from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.record import DomainStat
from scrapy_domainstate.store import DomainStore, StoreError
from scrapy_domainstate.store.codec import decode, encode
from scrapy_domainstate.tools.commands.domainstate._output import Failure, Progress
from scrapy_domainstate.tools.commands.domainstate._store import batches
from scrapy_domainstate.tools.csvio import RowError, iter_csv

#: Records per write transaction of pass 2.
BATCH = 10_000
#: Bad rows printed; the rest are counted.
SHOWN_ERRORS = 100
#: Without a terminal, a progress line every this many seconds (a long import is not silent).
PROGRESS_LINE_SECONDS = 10.0
#: SQLite's page cache for the spool, in KiB (its whole share of memory).
_CACHE_KIB = 2048
#: Records handed to SQLite at once.
_INSERT_CHUNK = 1000


class Spool:
    """Pass 1's keys (duplicate check) and records, in a temporary SQLite file.

    ``keys`` is a B-tree of the normalised domains with their line; ``rows`` the encoded
    records in file order. Removed when closed.
    """

    def __init__(self, directory: str | None = None) -> None:
        self._dir = tempfile.mkdtemp(prefix="domainstate-import-", dir=directory)
        try:
            self._db = sqlite3.connect(os.path.join(self._dir, "spool.sqlite"), isolation_level=None)
            for pragma in ("journal_mode=OFF", "synchronous=OFF", "temp_store=FILE", f"cache_size=-{_CACHE_KIB}"):
                self._db.execute(f"PRAGMA {pragma}")
            self._db.execute("CREATE TABLE keys (key TEXT PRIMARY KEY, line INTEGER NOT NULL) WITHOUT ROWID")
            self._db.execute("CREATE TABLE rows (n INTEGER PRIMARY KEY, record BLOB NOT NULL)")
            self._db.execute("BEGIN")
        except BaseException:
            shutil.rmtree(self._dir, ignore_errors=True)
            raise
        self._chunk: list[tuple[bytes]] = []

    def first_line(self, key: str, line: int) -> int | None:
        """:data:`~scrapy_domainstate.tools.csvio.FirstLine` on disk."""
        cur = self._db.execute("INSERT OR IGNORE INTO keys VALUES (?, ?)", (key, line))
        if cur.rowcount == 1:
            return None
        row = self._db.execute("SELECT line FROM keys WHERE key = ?", (key,)).fetchone()
        return int(row[0])

    def add(self, stat: DomainStat) -> None:
        self._chunk.append((encode(stat),))
        if len(self._chunk) >= _INSERT_CHUNK:
            self._insert()

    def _insert(self) -> None:
        self._db.executemany("INSERT INTO rows (record) VALUES (?)", self._chunk)
        self._chunk.clear()

    def stats(self) -> Iterator[DomainStat]:
        """The records added, in the order they were added."""
        if self._chunk:
            self._insert()
        cur = self._db.execute("SELECT record FROM rows ORDER BY n")
        while True:
            rows = cur.fetchmany(_INSERT_CHUNK)
            if not rows:
                return
            for (raw,) in rows:
                yield decode(raw)

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self._db.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class Checked:
    """What pass 1 found."""

    #: valid rows (all spooled when there is no bad one)
    rows: int = 0
    #: bad rows (printed up to SHOWN_ERRORS)
    bad: int = 0


def check(fh: TextIO, source: str, config: Config, now: float, spool: Spool) -> Checked:
    """Pass 1: validate every row of ``fh``, print the bad ones, spool the good ones while none is bad."""
    checked = Checked()
    with Progress(f"{source}: rows checked", every=PROGRESS_LINE_SECONDS) as progress:
        rows = iter_csv(
            fh,
            per_hostname=config.per_hostname,
            tick=progress.tick,
            now=now,
            ttl=config.ttl,
            first_line=spool.first_line,
        )
        for item in rows:
            if isinstance(item, RowError):
                checked.bad += 1
                if checked.bad <= SHOWN_ERRORS:
                    progress.done()
                    print(f"{source}: {item}", file=sys.stderr)
                continue
            checked.rows += 1
            if checked.bad:
                continue  # nothing will be written: keys only, for the duplicate check
            spool.add(item)
    return checked


def write(store: DomainStore, spool: Spool, source: str, total: int) -> int:
    """Pass 2: the spooled records into ``store``, :data:`BATCH` per call; returns how many were evicted."""
    before = store.evicted
    done = 0
    with Progress(f"{source}: rows imported", total, every=PROGRESS_LINE_SECONDS) as progress:
        try:
            for batch in batches(spool.stats(), BATCH):
                store.put_many(batch)
                done += len(batch)
                if progress.tick is not None:
                    progress.tick(done)
        except StoreError as exc:
            raise Failure(
                1,
                f"{exc}; {done:,} of {total:,} rows were imported before it, the others not: "
                "once the store is fixed, run the import again (rows replace the records of their domains)",
            ) from exc
    return store.evicted - before
