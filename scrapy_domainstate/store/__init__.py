"""Stores behind one interface: :class:`DomainStore`.

:func:`create_store` builds the store named by ``DOMAINSTATE_STORE``; every
store class takes ``(config, policy)`` and reads what it needs (LMDB path,
Redis URL, ...) from the :class:`~scrapy_domainstate.config.Config`.
"""

from __future__ import annotations

from scrapy.utils.misc import load_object

from ..config import Config, ConfigError
from ..policy import Policy
from .base import DomainStore, StoreError
from .memory import MemoryStore

__all__ = ["DomainStore", "MemoryStore", "StoreError", "create_store"]


def create_store(config: Config, policy: Policy | None = None) -> DomainStore:
    """The (unopened) store that ``config.store`` names."""
    try:
        cls = load_object(config.store)
    except (ImportError, NameError, ValueError, AttributeError) as exc:
        raise ConfigError(f"DOMAINSTATE_STORE: cannot import {config.store!r}: {exc}") from exc
    if not (isinstance(cls, type) and issubclass(cls, DomainStore)):
        raise ConfigError(f"DOMAINSTATE_STORE: {config.store!r} is not a DomainStore subclass")
    return cls(config, policy or Policy(config))
