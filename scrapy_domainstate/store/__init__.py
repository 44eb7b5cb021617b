"""Stores behind one interface: :class:`DomainStore`.

:func:`create_store` builds the store named by ``DOMAINSTATE_STORE``; every
store class takes ``(config, policy)`` and reads what it needs (LMDB path,
Redis URL, ...) from the :class:`~scrapy_domainstate.core.config.Config`.
"""

from __future__ import annotations

from scrapy_domainstate.core.config import Config, ConfigError, import_object
from scrapy_domainstate.core.policy import Policy
from scrapy_domainstate.store.base import DomainStore, StoreError
from scrapy_domainstate.store.memory import MemoryStore

__all__ = ["DomainStore", "MemoryStore", "StoreError", "create_store"]


def create_store(config: Config, policy: Policy | None = None) -> DomainStore:
    """The (unopened) store that ``config.store`` names."""
    try:
        cls = import_object(config.store)
    except (ImportError, NameError, ValueError, AttributeError) as exc:
        raise ConfigError(f"DOMAINSTATE_STORE: cannot import {config.store!r}: {exc}") from exc
    if not (isinstance(cls, type) and issubclass(cls, DomainStore)):
        raise ConfigError(f"DOMAINSTATE_STORE: {config.store!r} is not a DomainStore subclass")
    return cls(config, policy or Policy(config))
