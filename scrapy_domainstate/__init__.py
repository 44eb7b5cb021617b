"""scrapy-domainstate: a persistent, per-domain memory for Scrapy crawls."""

from .config import Config, ConfigError
from .policy import Decision, Policy, Transition
from .record import DomainStat, Method, Outcome, RecentEntry, State

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


def __getattr__(name: str) -> object:
    # The Scrapy components are imported lazily, so the pure parts (policy,
    # record, keys) import without pulling in Scrapy's machinery.
    if name == "Addon":
        from .addon import Addon

        return Addon
    if name == "DomainStateMiddleware":
        from .middleware import DomainStateMiddleware

        return DomainStateMiddleware
    if name == "DomainStateSpiderMiddleware":
        from .spidermw import DomainStateSpiderMiddleware

        return DomainStateSpiderMiddleware
    if name == "DomainStateExtension":
        from .extension import DomainStateExtension

        return DomainStateExtension
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
