"""scrapy-domainstate: a persistent, per-domain memory for Scrapy crawls."""

from .config import Config, ConfigError
from .policy import Decision, Policy, Transition
from .record import DomainStat, Method, Outcome, RecentEntry, State

__version__ = "0.1.0"

__all__ = [
    "Config",
    "ConfigError",
    "Decision",
    "DomainStat",
    "Method",
    "Outcome",
    "Policy",
    "RecentEntry",
    "State",
    "Transition",
    "__version__",
]
