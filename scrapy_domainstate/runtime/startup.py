"""The start-up INFO line: which store, what "useful" means, whether the browser route is on,
which scan engine runs.

Pure: it reads a :class:`~scrapy_domainstate.core.config.Config` and the crawler's
:class:`~scrapy_domainstate.runtime.browser.BrowserRoute`, and returns text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy_domainstate.core.config import Config
from scrapy_domainstate.detect.scan import ENGINE_ENV, HAVE_HYPERSCAN

if TYPE_CHECKING:
    from scrapy_domainstate.runtime.browser import BrowserRoute

__all__ = ["outcome_meaning", "scan_engine_text", "startup_message"]


def outcome_meaning(config: Config) -> str:
    """What makes a page useful (``ok-contact``) with this outcome source."""
    if config.outcome == "contacts":
        return (
            "useful = the page shows an e-mail address, a phone number or a social-profile link; "
            "set DOMAINSTATE_OUTCOME = 'items' to count pages whose callback yields items"
        )
    if config.outcome == "items":
        return (
            "useful = the callback yielded at least one item (or set response.meta['domainstate_outcome']); "
            "a page that yields only requests to the same site is navigation, never empty; "
            "usefulness kept apart for this purpose (<domain>|items)"
        )
    return f"useful = what {config.outcome}(response) returns (None: navigation if the callback only follows links)"


def scan_engine_text(engine: str) -> str:
    """Which body-scan engine runs, for the start-up line."""
    if engine == "hyperscan":
        return "scan engine hyperscan"
    why = f"{ENGINE_ENV}=pure" if HAVE_HYPERSCAN else "hyperscan is not installed"
    return f"scan engine pure Python ({why}: slower scans, the same verdicts)"


def startup_message(
    config: Config, store: str, browser: BrowserRoute, engine: str | None = None
) -> tuple[str, tuple[Any, ...]]:
    """The INFO line logged when the store is open, as a lazy ``%`` message and its arguments.

    ``engine``: the classifier's scan engine (``'hyperscan'`` or ``'pure'``), named when given."""
    if browser.enabled:
        schemes = "/".join(sorted(browser.schemes))
        launches = f"{browser.launches}, " if browser.launches else ""
        route = f"browser route on ({launches}{schemes}, meta {dict(browser.meta or {})!r})"
    else:
        route = f"browser route off ({browser.reason})"
    if engine is None:
        return (
            "scrapy-domainstate: using %s; outcome source %r (%s); %s",
            (store, config.outcome, outcome_meaning(config), route),
        )
    return (
        "scrapy-domainstate: using %s; outcome source %r (%s); %s; %s",
        (store, config.outcome, outcome_meaning(config), route, scan_engine_text(engine)),
    )
