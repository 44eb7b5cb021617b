"""The running plugins of this process, for ``scrapy shell`` and user code.

The runtime registers each manager when its store opens; :mod:`scrapy_domainstate.shell`
reads :func:`latest`. Weak references: a finished crawler is never kept alive. ``scrapy
shell`` never closes its spider, so what a session learned is flushed at exit.
"""

from __future__ import annotations

import atexit
import weakref
from typing import Protocol

__all__ = ["Running", "latest", "register"]


class Running(Protocol):
    """What the registry needs of a running plugin."""

    opened: bool

    def flush(self) -> None: ...


_running: list[weakref.ref[Running]] = []


def register(manager: Running) -> None:
    """Called by the runtime when it opens its store."""
    if not _running:
        atexit.register(_flush_at_exit)
    _running[:] = [ref for ref in _running if ref() is not None]
    _running.append(weakref.ref(manager))


def _flush_at_exit() -> None:
    for ref in _running:
        manager = ref()
        if manager is not None and manager.opened:
            manager.flush()


def latest() -> Running | None:
    """The most recently opened plugin still open, or ``None``."""
    for ref in reversed(_running):
        manager = ref()
        if manager is not None and manager.opened:
            return manager
    return None
