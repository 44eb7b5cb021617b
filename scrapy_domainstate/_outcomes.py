"""The outcome sources: whether a fetched page was useful (``ok-contact``) or not (``ok-empty``).

``DOMAINSTATE_OUTCOME`` (validated in :mod:`scrapy_domainstate.config`) picks one:

- ``"contacts"`` (default): an e-mail address or a phone link in the body's first
  ``DOMAINSTATE_BODY_SCAN_BYTES`` (:func:`scrapy_domainstate.contacts.has_contact`);
  non-text responses are not evidence.
- ``"items"``: what the callback yields, counted by the spider middleware
  (:mod:`scrapy_domainstate.spidermw`): at least one item is ``ok-contact``. A callback may
  decide itself with ``response.meta["domainstate_outcome"]``.
- a dotted path to a callable ``(response) -> bool | str | Outcome | None``: ``True`` /
  ``False`` are ``ok-contact`` / ``ok-empty``; ``None`` means "not evidence".
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scrapy.http import TextResponse
from scrapy.utils.misc import load_object

from .config import Config, ConfigError
from .contacts import has_contact
from .record import Outcome

if TYPE_CHECKING:
    from scrapy.http import Response

__all__ = ["META_OUTCOME", "OutcomeSource"]

logger = logging.getLogger("scrapy_domainstate")

#: Request meta key (in, ``DOMAINSTATE_OUTCOME='items'``): set by a callback to override.
META_OUTCOME = "domainstate_outcome"


def _load(path: str) -> Callable[[Response], Any]:
    try:
        fn = load_object(path)
    except (ImportError, NameError, ValueError, AttributeError) as exc:
        raise ConfigError(f"DOMAINSTATE_OUTCOME: cannot import {path!r}: {exc}") from exc
    if not callable(fn):
        raise ConfigError(f"DOMAINSTATE_OUTCOME: {path!r} is not callable")
    return fn


class OutcomeSource:
    """The configured outcome source. Raises :class:`ConfigError` for a bad callable path."""

    def __init__(self, config: Config) -> None:
        self.kind = config.outcome if config.outcome in ("contacts", "items") else "callable"
        self._scan_bytes = config.body_scan_bytes
        self._fn: Callable[[Response], Any] | None = None if self.kind != "callable" else _load(config.outcome)

    @property
    def from_items(self) -> bool:
        """The outcome is known once the callback has run (the spider middleware's count)."""
        return self.kind == "items"

    def useful(self, response: Response) -> Outcome | None:
        """``ok-contact`` / ``ok-empty`` for a fetched page; ``None``: not evidence.

        A callable that raises is logged with its traceback and gives ``None``.
        """
        try:
            return self._useful(response)
        except Exception:
            logger.exception("DOMAINSTATE_OUTCOME callable failed for %s", response.url)
            return None

    def _useful(self, response: Response) -> Outcome | None:
        if self._fn is not None:
            result = self._fn(response)
            if result is None:
                return None
            if isinstance(result, bool):
                return Outcome.OK_CONTACT if result else Outcome.OK_EMPTY
            return Outcome(result)
        if not isinstance(response, TextResponse):
            return None
        return Outcome.OK_CONTACT if has_contact(response.body, self._scan_bytes) else Outcome.OK_EMPTY

    @staticmethod
    def from_count(n_items: int, override: Any = None, url: str = "") -> Outcome:
        """The ``items`` outcome: the callback's own ``domainstate_outcome``, else the item count."""
        if override is not None:
            try:
                return Outcome(override)
            except ValueError:
                logger.warning("Ignoring unknown %s=%r on %s", META_OUTCOME, override, url)
        return Outcome.OK_CONTACT if n_items else Outcome.OK_EMPTY
