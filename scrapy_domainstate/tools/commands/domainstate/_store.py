"""The store as the command opens it: read-only unless the subcommand writes, never created unless it must."""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from scrapy.settings import BaseSettings

from scrapy_domainstate.core.config import Config, import_object
from scrapy_domainstate.core.keys import part_of
from scrapy_domainstate.core.policy import Policy
from scrapy_domainstate.core.record import DomainStat
from scrapy_domainstate.store import DomainStore, create_store
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


def resolve_lmdb_path(path: str) -> str:
    """Where the LMDB store of ``path`` lives, as Scrapy's ``data_path`` resolves it.

    Done here, without creating anything (``data_path`` creates a project's
    ``.scrapy`` directory): relative paths go into the project data directory
    inside a project, into ``./.scrapy`` outside one.
    """
    p = Path(os.path.expanduser(path))
    if not p.is_absolute():
        from scrapy.utils.conf import closest_scrapy_cfg, get_config
        from scrapy.utils.project import DATADIR_CFG_SECTION, inside_project

        base = Path(".scrapy")
        if inside_project():
            cfg = get_config()
            if cfg.has_option(DATADIR_CFG_SECTION, "default"):
                base = Path(cfg.get(DATADIR_CFG_SECTION, "default"))
            else:
                scrapy_cfg = closest_scrapy_cfg()
                if scrapy_cfg:
                    base = Path(scrapy_cfg).parent / ".scrapy"
        p = base / p
    return os.path.realpath(p)


def _open(settings: BaseSettings, access: Access) -> DomainStore:
    """The configured store, opened as ``access`` says."""
    config = Config.from_settings(settings)
    from scrapy_domainstate.store.lmdb import LmdbStore

    try:
        cls = import_object(config.store)
    except (ImportError, NameError, ValueError, AttributeError):
        cls = None  # create_store reports it
    if isinstance(cls, type) and issubclass(cls, LmdbStore):
        path = resolve_lmdb_path(config.lmdb_path)
        if access is not Access.CREATE and not os.path.exists(os.path.join(path, "data.mdb")):
            raise Failure(
                1,
                f"no domainstate database at {path} (DOMAINSTATE_LMDB_PATH="
                f"{settings.get('DOMAINSTATE_LMDB_PATH') or config.lmdb_path!r}); nothing was created. "
                "Run the command in the project directory, or pass -s DOMAINSTATE_LMDB_PATH=/path/to/db.",
            )
        config = dataclasses.replace(config, lmdb_path=path)
    store = create_store(config, Policy(config))
    if access is Access.READ and isinstance(store, LmdbStore):
        store.open(readonly=True)
    else:
        store.open()
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
