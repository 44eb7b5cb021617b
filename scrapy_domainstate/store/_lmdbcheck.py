"""The LMDB file's own structure, checked before LMDB trusts it (issue 22, break 2).

LMDB trusts its meta pages: a flipped bit there (say the free database's DUPSORT flag) is
only noticed by an ``assert`` in the C library, which kills the process with SIGABRT at the
first write; a flipped page header makes a cursor walk abort the same way. So the store
reads the two meta pages with :mod:`struct` and walks the page headers of every B-tree
(branch pages and the headers of their leaves) before it opens a database, under a read
transaction (the pages it checks cannot be reused meanwhile), and refuses a file that does
not add up, naming the file and the fix.

The layouts are LMDB's (``mdb.c``, format version 1, 64-bit): a page starts with a 16-byte
header (``pgno`` u64, ``pad`` u16, ``flags`` u16, ``lower`` u16, ``upper`` u16); a meta
page's body holds the magic, the version, the map address and size, the free and main
databases' records (``MDB_db``: ``pad`` u32 (the free record's is the page size), ``flags``
u16, ``depth`` u16, branch/leaf/overflow page counts, entries and root, u64 each), the last
page used and the transaction id.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

__all__ = ["Damaged", "check_file", "check_tree", "diagnose"]

MAGIC = 0xBEEFC0DE
VERSION = 1
P_INVALID = (1 << 64) - 1
P_BRANCH, P_LEAF, P_OVERFLOW, P_META = 0x01, 0x02, 0x04, 0x08
#: The free database's flags: integer keys (its keys are transaction ids).
FREE_FLAGS = 0x08
#: A leaf node whose data is a named database's record; one whose data is on overflow pages.
F_BIGDATA, F_SUBDATA = 0x01, 0x02
MAX_DEPTH = 32

HEADER = struct.Struct("<QHHHH")
META = struct.Struct("<IIQQ" + "IHHQQQQQ" * 2 + "QQ")
DB = struct.Struct("<IHHQQQQQ")
NODE = struct.Struct("<HHHH")  # lo, hi (data size, or child page for a branch), flags, key size


class Damaged(ValueError):
    """The data file does not add up: what is wrong, for the message."""


@dataclass(frozen=True)
class Db:
    pad: int
    flags: int
    depth: int
    branch: int
    leaf: int
    overflow: int
    entries: int
    root: int


@dataclass(frozen=True)
class Meta:
    index: int
    mapsize: int
    free: Db
    main: Db
    last_pg: int
    txnid: int

    @property
    def psize(self) -> int:
        return self.free.pad


def _meta(page: bytes, index: int) -> Meta:
    if len(page) < HEADER.size + META.size:
        raise Damaged(f"meta page {index} is cut short")
    pgno, _, flags, _, _ = HEADER.unpack_from(page)
    fields = META.unpack_from(page, HEADER.size)
    magic, version, _address, mapsize = fields[:4]
    if pgno != index or flags != P_META:
        raise Damaged(f"page {index} is not a meta page (number {pgno}, flags {flags:#x})")
    if magic != MAGIC or version != VERSION:
        raise Damaged(f"meta page {index} has magic {magic:#x}, version {version}: not an LMDB file of this format")
    return Meta(index, mapsize, Db(*fields[4:12]), Db(*fields[12:20]), fields[20], fields[21])


def read_metas(fd: int) -> tuple[Meta, Meta]:
    first = _meta(os.pread(fd, HEADER.size + META.size, 0), 0)
    psize = first.psize
    if psize < 512 or psize > 65536 or psize & (psize - 1):
        raise Damaged(f"meta page 0 gives a page size of {psize}")
    second = _meta(os.pread(fd, HEADER.size + META.size, psize), 1)
    if second.psize != psize:
        raise Damaged(f"the meta pages disagree on the page size ({psize}, {second.psize})")
    return first, second


def _check_pair(a: Meta, b: Meta) -> None:
    """Commits alternate between the meta pages: transaction ids n (even, page 0) and n +/- 1."""
    if a.txnid == b.txnid == 0:
        return
    if a.txnid == b.txnid and a == Meta(0, b.mapsize, b.free, b.main, b.last_pg, b.txnid):
        return  # a copy (mdb_copy) may write the same meta twice
    if abs(a.txnid - b.txnid) != 1 or a.txnid % 2:
        raise Damaged(f"the meta pages' transaction ids do not follow each other ({a.txnid}, {b.txnid})")


def _check_db(name: str, db: Db, last_pg: int, flags: int, pad: int | None = 0) -> None:
    if db.flags != flags or (pad is not None and db.pad != pad):
        raise Damaged(f"the {name} database has flags {db.flags:#x} (expected {flags:#x})")
    if db.root == P_INVALID:
        if db.depth or db.entries or db.branch or db.leaf or db.overflow:
            raise Damaged(f"the {name} database is empty but counts pages or entries")
        return
    pages = db.branch + db.leaf + db.overflow
    if not 2 <= db.root <= last_pg or not 1 <= db.depth <= MAX_DEPTH or not db.entries:
        raise Damaged(f"the {name} database's root page {db.root}, depth {db.depth} or entries are impossible")
    if db.leaf < 1 or db.branch < db.depth - 1 or (db.depth == 1 and (db.branch or db.leaf != 1)):
        raise Damaged(f"the {name} database's page counts do not fit its depth {db.depth}")
    if pages > last_pg - 1:
        raise Damaged(f"the {name} database counts {pages} pages, the file has {last_pg + 1}")


def check_file(fd: int, size: int, txnid: int) -> Meta:
    """The meta page of transaction ``txnid`` (LMDB's current one), checked with the other.

    Raises :class:`Damaged`; :class:`LookupError` when neither meta page holds ``txnid``
    (two commits happened since it began: the caller begins again).
    """
    a, b = read_metas(fd)
    current = a if a.txnid == txnid else b if b.txnid == txnid else None
    if current is None:
        raise LookupError(txnid)
    _check_pair(a, b)
    newest = a if a.txnid >= b.txnid else b
    if current is not newest and newest.txnid != txnid + 1:
        raise Damaged(f"meta page {newest.index} claims transaction {newest.txnid}, LMDB reads {txnid}")
    psize = current.psize
    if current.last_pg < 1 or (current.last_pg + 1) * psize > size:
        raise Damaged(f"the last commit uses {current.last_pg + 1} pages of {psize} bytes, the file has {size:,} bytes")
    if current.mapsize % psize or current.mapsize < (current.last_pg + 1) * psize or current.mapsize >= 1 << 46:
        raise Damaged(f"the map size {current.mapsize} does not fit the data")
    _check_db("free", current.free, current.last_pg, FREE_FLAGS, pad=None)
    _check_db("main", current.main, current.last_pg, 0)
    return current


def diagnose(data: str) -> str | None:
    """What is wrong with the meta pages of ``data``, read without LMDB (after LMDB failed
    to open it); ``None`` when they add up (or cannot be read)."""
    try:
        fd = os.open(data, os.O_RDONLY)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        a, b = read_metas(fd)
        check_file(fd, size, max(a.txnid, b.txnid))
    except Damaged as exc:
        return str(exc)
    except (OSError, LookupError, struct.error):
        return None
    finally:
        os.close(fd)
    return None


# ------------------------------------------------------------------ the trees


class _Walk:
    """Reads pages of one snapshot through ``pread`` and checks their headers."""

    def __init__(self, fd: int, meta: Meta) -> None:
        self.fd, self.psize, self.last_pg = fd, meta.psize, meta.last_pg
        self.seen: set[int] = set()

    def page(self, pgno: int, name: str) -> bytes:
        if not 2 <= pgno <= self.last_pg:
            raise Damaged(f"the {name} database points to page {pgno}, beyond the last page {self.last_pg}")
        if pgno in self.seen:
            raise Damaged(f"page {pgno} is reached twice (in the {name} database)")
        self.seen.add(pgno)
        page = os.pread(self.fd, self.psize, pgno * self.psize)
        if len(page) < self.psize:
            raise Damaged(f"page {pgno} is cut short")
        return page

    def nodes(self, page: bytes, pgno: int, flags: int, name: str, tile: bool = True) -> list[int]:
        """The offsets of the page's nodes, after checking its header (and, with ``tile``, that
        the nodes fill the page exactly: a node-by-node walk, skipped for the leaves of big
        databases, whose headers and entry counts are checked)."""
        number, _, got, lower, upper = HEADER.unpack_from(page)
        if number != pgno or got != flags:
            raise Damaged(f"page {pgno} of the {name} database has number {number} and flags {got:#x}")
        if lower < HEADER.size or lower > upper or upper > self.psize or lower % 2:
            raise Damaged(f"page {pgno} of the {name} database has bounds {lower}..{upper}")
        count = (lower - HEADER.size) // 2
        if not count:
            raise Damaged(f"page {pgno} of the {name} database is empty")
        offsets = struct.unpack_from(f"<{count}H", page, HEADER.size)
        if min(offsets) < upper or max(offsets) + NODE.size > self.psize:
            raise Damaged(f"page {pgno} of the {name} database has a node outside its bounds")
        if not tile:
            return list(offsets)
        # LMDB keeps the nodes packed from `upper` to the page's end: they tile it exactly.
        end = upper
        leaf = flags == P_LEAF
        for off in sorted(offsets):
            lo, hi, nflags, ksize = NODE.unpack_from(page, off)
            size = NODE.size + ksize
            if leaf:
                size += 8 if nflags & F_BIGDATA else lo | hi << 16
            if off != end:
                raise Damaged(f"page {pgno} of the {name} database has nodes that overlap or leave gaps")
            end = off + size + (size & 1)
        if end != self.psize:
            raise Damaged(f"page {pgno} of the {name} database has nodes that do not fill it")
        return list(offsets)

    def node(self, page: bytes, off: int, pgno: int, name: str) -> tuple[int, int, bytes, int]:
        """``(lo | hi << 16, flags, key, data offset)`` of the node at ``off``."""
        lo, hi, flags, ksize = NODE.unpack_from(page, off)
        start = off + NODE.size
        if start + ksize > self.psize:
            raise Damaged(f"page {pgno} of the {name} database has a key past its end")
        return lo | hi << 16, flags, page[start : start + ksize], start + ksize

    def overflow(self, pgno: int, size: int, name: str) -> bytes:
        """The ``size`` bytes of a value kept on the overflow pages starting at ``pgno``."""
        page = self.page(pgno, name)
        number, _, flags, _, _ = HEADER.unpack_from(page)
        (pages,) = struct.unpack_from("<I", page, 12)
        if number != pgno or flags != P_OVERFLOW or pages * self.psize < size + HEADER.size:
            raise Damaged(f"overflow page {pgno} of the {name} database has number {number}, flags {flags:#x}")
        if pgno + pages - 1 > self.last_pg:
            raise Damaged(f"overflow page {pgno} of the {name} database runs past the last page")
        for extra in range(pgno + 1, pgno + pages):
            if extra in self.seen:
                raise Damaged(f"page {extra} is reached twice (in the {name} database)")
            self.seen.add(extra)
        return os.pread(self.fd, size, pgno * self.psize + HEADER.size)

    def values(self, page: bytes, offsets: list[int], pgno: int, name: str) -> list[tuple[bytes, int, int, bytes]]:
        """``(key, flags, size, value)`` of a leaf's nodes (overflow pages read and counted)."""
        out = []
        for off in offsets:
            size, nflags, key, data_at = self.node(page, off, pgno, name)
            if nflags & F_BIGDATA:
                (first,) = struct.unpack_from("<Q", page, data_at)
                value = self.overflow(first, size, name)
            else:
                value = page[data_at : data_at + size]
            out.append((key, nflags, size, value))
        return out

    def tree(self, db: Db, name: str, leaves: bool = False) -> list[tuple[bytes, int, int, bytes]]:
        """Walk ``db``'s branch pages and leaf headers; its leaves' nodes when ``leaves``."""
        if db.root == P_INVALID:
            return []
        out: list[tuple[bytes, int, int, bytes]] = []
        level = [db.root]
        counts = {P_BRANCH: 0, P_LEAF: 0}
        entries = 0
        for depth in range(1, db.depth + 1):
            flags = P_LEAF if depth == db.depth else P_BRANCH
            below: list[int] = []
            for pgno in level:
                page = self.page(pgno, name)
                offsets = self.nodes(page, pgno, flags, name, tile=flags == P_BRANCH or leaves or bool(db.overflow))
                counts[flags] += 1
                if flags == P_LEAF:
                    entries += len(offsets)
                if flags == P_BRANCH:
                    for off in offsets:
                        lo, hi, top, _ = NODE.unpack_from(page, off)
                        below.append(lo | hi << 16 | top << 32)
                elif leaves or db.overflow:
                    values = self.values(page, offsets, pgno, name)
                    if leaves:
                        out.extend(values)
            level = below
        if entries != db.entries:
            raise Damaged(f"the {name} database has {entries} entries, its record says {db.entries}")
        if counts[P_BRANCH] != db.branch or counts[P_LEAF] != db.leaf:
            raise Damaged(
                f"the {name} database has {counts[P_BRANCH]} branch and {counts[P_LEAF]} leaf pages, "
                f"its record says {db.branch} and {db.leaf}"
            )
        return out


def _free_pages(walk: _Walk, meta: Meta) -> list[int]:
    """The pages the free database lists (its values: a count, then that many page numbers)."""
    free: list[int] = []
    for _, _, size, value in walk.tree(meta.free, "free", leaves=True):
        if size < 8 or len(value) != size or size % 8:
            raise Damaged(f"a free-list entry of {size} bytes")
        (count,) = struct.unpack_from("<Q", value)
        if count != size // 8 - 1:
            raise Damaged(f"a free-list entry counts {count} pages in {size} bytes")
        free.extend(struct.unpack_from(f"<{count}Q", value, 8))
    return free


def check_tree(fd: int, meta: Meta, names: tuple[bytes, ...]) -> None:
    """Walk every database of ``meta``'s snapshot and account for every page.

    Each page from 2 to the last one is either in exactly one tree (a branch, leaf or
    overflow page) or on the free list, never both (LMDB's own audit): a page number
    flipped in a header or a branch, or a root pointing at a stale copy, breaks the sum.
    """
    walk = _Walk(fd, meta)
    free = _free_pages(walk, meta)
    for key, flags, size, data in walk.tree(meta.main, "main", leaves=True):
        if not flags & F_SUBDATA:
            continue
        name = key.decode("ascii", "replace")
        if size != DB.size or len(data) < DB.size or flags & F_BIGDATA:
            raise Damaged(f"the record of the {name} database is {size} bytes")
        db = Db(*DB.unpack_from(data))
        _check_db(name, db, meta.last_pg, 0 if key in names else db.flags, pad=0 if key in names else None)
        walk.tree(db, name)
    listed = set(free)
    if len(listed) != len(free) or listed & walk.seen or any(not 2 <= p <= meta.last_pg for p in listed):
        raise Damaged("the free list repeats a page, lists one in use or one past the end")
    accounted = len(walk.seen) + len(listed) + 2
    if accounted != meta.last_pg + 1:
        raise Damaged(f"{accounted} pages accounted for, the last commit uses {meta.last_pg + 1}")
