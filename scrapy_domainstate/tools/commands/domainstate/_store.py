"""The store as the command opens it: read-only unless the subcommand writes, never created unless it must."""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Callable, Iterable, Iterator

from scrapy.settings import BaseSettings

from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.keys import part_of
from scrapy_domainstate.core.policy import Policy
from scrapy_domainstate.core.record import DomainStat
from scrapy_domainstate.store import DomainStore, StoreError, create_store
from scrapy_domainstate.tools.commands.domainstate._output import Failure
from scrapy_domainstate.tools.showtext import decided_as


class Access(enum.Enum):
    """How a subcommand uses the store."""

    #: LMDB opened read-only (safe next to running crawls); a missing database is an error.
    READ = "read"
    #: opened for writing; a missing database is an error.
    WRITE = "write"
    #: opened for writing; a missing database is created.
    CREATE = "create"
    #: the subcommand does not open the store.
    NONE = "none"


def _open(settings: BaseSettings, access: Access) -> DomainStore:
    """The configured store, opened as ``access`` says."""
    config = Config.from_settings(settings)
    store = create_store(config, Policy(config))
    try:
        store.locate(create=access is Access.CREATE)
    except StoreError as exc:
        raise Failure(
            1,
            f"{exc}; nothing was created. Run the command in the project directory, or pass "
            "-s DOMAINSTATE_LMDB_PATH=/path/to/db.",
        ) from exc
    store.open(readonly=access is Access.READ)
    return store


@contextlib.contextmanager
def opened_store(settings: BaseSettings, access: Access) -> Iterator[DomainStore]:
    """The configured store, open for the ``with`` block and closed after it, whatever happens."""
    if access is Access.NONE:
        raise RuntimeError("this subcommand is declared as not using the store")
    store = _open(settings, access)
    try:
        yield store
    finally:
        store.close()


def derived_cells(store: DomainStore, now: float) -> Callable[[DomainStat], tuple[str, str]]:
    """The export's derived cells of a record: what it is part of, and the state its requests
    are decided by now (``effective_state``)."""
    per_hostname = store.config.per_hostname

    def cells(stat: DomainStat) -> tuple[str, str]:
        part = part_of(stat.domain, per_hostname)
        where = "" if part is None else f"{part[1]} of {part[0]}"
        return where, str(decided_as(store, stat.domain, now)[1])

    return cells


def put_all(store: DomainStore, stats: list[DomainStat]) -> int:
    """Write records in one go (one transaction in LMDB: all or nothing); returns how many were evicted."""
    before = store.evicted
    store.put_many(stats)
    return store.evicted - before


def batches(items: Iterable[DomainStat], size: int) -> Iterator[list[DomainStat]]:
    batch: list[DomainStat] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch
