"""Whether the plugin is off for a crawl, and the one INFO line that says so.

Used by the add-on and by the manager (components listed by hand), so a disabled
plugin logs one INFO line per crawler whichever part notices first, and raises a bare
``NotConfigured`` (Scrapy logs a ``NotConfigured`` *message* as a WARNING).
"""

from __future__ import annotations

import logging
from typing import Any

from scrapy_domainstate.core.config import Config

__all__ = ["off_reason", "report_off"]

logger = logging.getLogger(__name__)

_LOGGED = "_domainstate_off_logged"


def off_reason(config: Config, spider: Any) -> str | None:
    """Why the plugin is off for this crawl (``None``: it is on)."""
    if not config.enabled:
        return "DOMAINSTATE_ENABLED = False"
    if spider is not None and not getattr(spider, "domainstate_enabled", True):
        return f"domainstate_enabled = False on spider {getattr(spider, 'name', spider)!r}"
    return None


def report_off(crawler: Any, reason: str) -> None:
    """Log that the plugin is off, once per crawler."""
    if crawler is not None:
        if getattr(crawler, _LOGGED, False):
            return
        setattr(crawler, _LOGGED, True)
    logger.info("scrapy-domainstate is disabled (%s)", reason, extra={"crawler": crawler})
