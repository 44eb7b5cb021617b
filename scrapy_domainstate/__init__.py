"""scrapy-domainstate: a persistent, per-domain memory for Scrapy crawls."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .config import Config, ConfigError
from .policy import Decision, Policy, Transition
from .record import DomainStat, Method, Outcome, RecentEntry, State

if TYPE_CHECKING:  # imported on first use at run time (see __getattr__); seen by type checkers
    from .addon import Addon
    from .extension import DomainStateExtension
    from .middleware import DomainStateMiddleware
    from .spidermw import DomainStateSpiderMiddleware

__version__ = "0.1.0"

__all__ = [
    "Addon",
    "Config",
    "ConfigError",
    "Decision",
    "DomainStat",
    "DomainStateExtension",
    "DomainStateMiddleware",
    "DomainStateSpiderMiddleware",
    "Method",
    "Outcome",
    "Policy",
    "RecentEntry",
    "State",
    "Transition",
    "__version__",
]

#: Public name -> the module that defines it, imported on first access. The Scrapy
#: components load lazily, so the pure parts (policy, record, keys) import without
#: pulling in Scrapy's machinery.
_LAZY = {
    "Addon": ".addon",
    "DomainStateExtension": ".extension",
    "DomainStateMiddleware": ".middleware",
    "DomainStateSpiderMiddleware": ".spidermw",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
