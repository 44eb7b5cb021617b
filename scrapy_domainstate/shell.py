"""Inspection helpers for ``scrapy shell``.

With the plugin enabled, ``fetch(url)`` in ``scrapy shell`` goes through the
middleware and ``response.meta["domainstate"]`` shows the decision. The running
plugin is also reachable as ``crawler.domainstate`` (the manager: ``.store``,
``.inspect(url)``), and these helpers find it without arguments::

    >>> from scrapy_domainstate.shell import domainstate, store
    >>> domainstate("https://example.com/about")
    {'domain': 'example.com', 'state': 'friendly', 'decision': 'fetch', 'record': DomainStat(...)}
"""

from __future__ import annotations

import atexit
import weakref
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .manager import DomainStateManager
    from .store import DomainStore

__all__ = ["domainstate", "register", "store"]

_managers: list[weakref.ref[DomainStateManager]] = []


def register(manager: DomainStateManager) -> None:
    """Called by the manager when it opens its store."""
    if not _managers:
        # ``scrapy shell`` never closes its spider: save what a session learned at exit.
        atexit.register(_flush_at_exit)
    _managers[:] = [ref for ref in _managers if ref() is not None]
    _managers.append(weakref.ref(manager))


def _flush_at_exit() -> None:
    for ref in _managers:
        manager = ref()
        if manager is not None and manager.opened:
            manager.flush()


def _latest() -> DomainStateManager:
    for ref in reversed(_managers):
        manager = ref()
        if manager is not None and manager.opened:
            return manager
    raise RuntimeError(
        "scrapy-domainstate is not running in this process: enable it "
        '(ADDONS = {"scrapy_domainstate.Addon": 0}) and fetch() something first'
    )


def domainstate(url: str) -> dict[str, Any]:
    """The domain key, state, record and the decision a request to ``url`` would get now."""
    return _latest().inspect(url)


def store() -> DomainStore:
    """The store of the running plugin."""
    return _latest().store
