"""The start-up INFO line: which store, what "useful" means, whether the browser route is on.

Pure: it reads a :class:`~scrapy_domainstate.config.Config` and Scrapy's
``DOWNLOAD_HANDLERS`` (any mapping), and returns text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .config import Config

__all__ = ["browser_handler", "outcome_meaning", "startup_message"]

#: Scrapy's own download handlers: none of them renders a page.
_SCRAPY_HANDLERS = "scrapy.core.downloader.handlers."


def _path(handler: Any) -> str:
    if isinstance(handler, str):
        return handler
    return f"{getattr(handler, '__module__', '')}.{getattr(handler, '__qualname__', type(handler).__name__)}"


def browser_handler(download_handlers: Mapping[str, Any]) -> str | None:
    """The class path of the http(s) download handler that is not one of Scrapy's own, if any.

    ``download_handlers`` is ``settings.getwithbase("DOWNLOAD_HANDLERS")``. A handler that is
    not Scrapy's (scrapy-playwright's, scrapy-zyte-api's, your own) is taken to be the one
    the browser meta reaches.
    """
    for scheme in ("https", "http"):
        handler = download_handlers.get(scheme)
        if handler is None:
            continue
        path = _path(handler)
        if not path.startswith(_SCRAPY_HANDLERS):
            return path
    return None


def outcome_meaning(config: Config) -> str:
    """What makes a page useful (``ok-contact``) with this outcome source."""
    if config.outcome == "contacts":
        return (
            "useful = the page shows an e-mail address, a phone number or a social-profile link; "
            "set DOMAINSTATE_OUTCOME = 'items' to count pages whose callback yields items"
        )
    if config.outcome == "items":
        return "useful = the callback yielded at least one item (or set response.meta['domainstate_outcome'])"
    return f"useful = what {config.outcome}(response) returns"


def startup_message(config: Config, store: str, handler: str | None) -> tuple[str, tuple[Any, ...]]:
    """The INFO line logged when the store is open, as a lazy ``%`` message and its arguments."""
    if handler is not None:
        route = f"browser route on ({handler}, meta {dict(config.browser_meta)!r})"
    else:
        route = "browser route off (no browser download handler in DOWNLOAD_HANDLERS)"
    return (
        "scrapy-domainstate: store %s; outcome source %r (%s); %s",
        (store, config.outcome, outcome_meaning(config), route),
    )
