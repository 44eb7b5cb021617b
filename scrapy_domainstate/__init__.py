"""scrapy-domainstate: a persistent, per-domain memory for Scrapy crawls."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from scrapy_domainstate.core.config import Config, ConfigError
from scrapy_domainstate.core.policy import Decision, Policy, Transition
from scrapy_domainstate.core.record import DomainStat, Method, Outcome, RecentEntry, State

if TYPE_CHECKING:  # imported on first use at run time (see __getattr__); seen by type checkers
    from scrapy_domainstate.addon import Addon
    from scrapy_domainstate.extension import DomainStateExtension
    from scrapy_domainstate.middleware import DomainStateDownloadedMiddleware, DomainStateMiddleware
    from scrapy_domainstate.pipeline import DomainStatePipeline
    from scrapy_domainstate.spidermw import DomainStateQueueFilter, DomainStateSpiderMiddleware
    from scrapy_domainstate.tools.api import StoreHandle, UrlDecision, open_store

__version__ = "0.1.0"

__all__ = [
    "Addon",
    "Config",
    "ConfigError",
    "Decision",
    "DomainStat",
    "DomainStateDownloadedMiddleware",
    "DomainStateExtension",
    "DomainStateMiddleware",
    "DomainStatePipeline",
    "DomainStateQueueFilter",
    "DomainStateSpiderMiddleware",
    "Method",
    "Outcome",
    "Policy",
    "RecentEntry",
    "State",
    "StoreHandle",
    "Transition",
    "UrlDecision",
    "__version__",
    "open_store",
]

#: Public name -> the module that defines it, imported on first access. The Scrapy
#: components load lazily, so the pure parts (policy, record, keys) import without
#: pulling in Scrapy's machinery.
_LAZY = {
    "Addon": "scrapy_domainstate.addon",
    "DomainStateDownloadedMiddleware": "scrapy_domainstate.middleware",
    "DomainStateExtension": "scrapy_domainstate.extension",
    "DomainStateMiddleware": "scrapy_domainstate.middleware",
    "DomainStatePipeline": "scrapy_domainstate.pipeline",
    "DomainStateQueueFilter": "scrapy_domainstate.spidermw",
    "DomainStateSpiderMiddleware": "scrapy_domainstate.spidermw",
    "StoreHandle": "scrapy_domainstate.tools.api",
    "UrlDecision": "scrapy_domainstate.tools.api",
    "open_store": "scrapy_domainstate.tools.api",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
