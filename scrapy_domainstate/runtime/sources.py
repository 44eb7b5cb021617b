"""The outcome sources: whether a fetched page was useful (``ok-contact``) or not (``ok-empty``).

``DOMAINSTATE_OUTCOME`` (validated in :mod:`scrapy_domainstate.core.config`) picks one:

- ``"contacts"`` (default): an e-mail address or a phone link in the body's first
  ``DOMAINSTATE_BODY_SCAN_BYTES`` (:func:`scrapy_domainstate.detect.contacts.scan_has_contact`,
  on the response's :class:`~scrapy_domainstate.detect.scan.BodyScan` the classifier read first);
  non-text responses are not evidence.
- ``"items"``: what the callback yields, counted by the spider middleware
  (:mod:`scrapy_domainstate.spidermw`): at least one item is ``ok-contact`` (useful); no item
  but follow-up requests to the same site is ``navigation`` (a home or category page: neither
  useful nor empty); neither is ``ok-empty``. A callback may decide itself with
  ``response.meta["domainstate_outcome"]``.
- a dotted path to a callable ``(response) -> bool | str | Outcome | None``: ``True`` /
  ``False`` are ``ok-contact`` / ``ok-empty``; ``None``: the callback decides whether it is
  ``navigation`` (follow-up requests, no items), else the page is not evidence.

Usefulness is per purpose: with ``items`` or a callable, the counters behind ``cold`` and
``friendly`` live in the site's record for that purpose (:func:`~scrapy_domainstate.core.keys.purpose_key`),
so a contacts spider's ``cold`` never makes a products spider skip a shop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scrapy.http import TextResponse

from scrapy_domainstate.core.config import Config, ConfigError, import_object
from scrapy_domainstate.core.record import Outcome
from scrapy_domainstate.detect.contacts import scan_has_contact, text_body
from scrapy_domainstate.detect.scan import BodyScan

if TYPE_CHECKING:
    from scrapy.http import Response

__all__ = ["CALLBACK", "META_OUTCOME", "OutcomeSource"]

logger = logging.getLogger(__name__)

#: Request meta key (in, ``DOMAINSTATE_OUTCOME='items'``): set by a callback to override.
META_OUTCOME = "domainstate_outcome"
#: :meth:`OutcomeSource.useful`'s answer when what the callback yields decides (``items``, or a
#: callable that returned None): the spider middleware records it.
CALLBACK = "callback"


def _load(path: str) -> Callable[[Response], Any]:
    try:
        fn = import_object(path)
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
        self._path = config.outcome
        self._fn: Callable[[Response], Any] | None = None if self.kind != "callable" else _load(config.outcome)

    @property
    def purpose(self) -> str | None:
        """What usefulness means for this spider, when it is not the default (``contacts``):
        ``"items"`` or the callable's dotted path. Its worth records are kept apart
        (:func:`~scrapy_domainstate.core.keys.purpose_key`)."""
        if self.kind == "contacts":
            return None
        return "items" if self.kind == "items" else self._path

    @property
    def from_items(self) -> bool:
        """The outcome is known once the callback has run (the spider middleware's count)."""
        return self.kind == "items"

    def useful(self, response: Response, scan: BodyScan | None = None) -> Outcome | str | None:
        """``ok-contact`` / ``ok-empty`` for a fetched page; ``None``: not evidence;
        :data:`CALLBACK`: the callback decides (``items``, a callable that returned None).

        ``scan``: the response's body as the classifier read it (the contact scan reads what
        it left there); made here when not given. A callable that raises is logged with its
        traceback and gives ``None``.
        """
        if self.kind == "items":
            return CALLBACK
        try:
            return self._useful(response, scan)
        except Exception:
            logger.exception("DOMAINSTATE_OUTCOME callable failed for %s", response.url)
            return None

    def _useful(self, response: Response, scan: BodyScan | None) -> Outcome | str | None:
        if self._fn is not None:
            result = self._fn(response)
            if result is None:
                return CALLBACK
            if isinstance(result, bool):
                return Outcome.OK_CONTACT if result else Outcome.OK_EMPTY
            return Outcome(result)
        if not isinstance(response, TextResponse):
            return None
        body = text_body(response.body)
        if scan is None or scan.body is not body or scan.limit != self._scan_bytes:
            scan = BodyScan(body, self._scan_bytes)
        return Outcome.OK_CONTACT if scan_has_contact(scan) else Outcome.OK_EMPTY

    @staticmethod
    def from_count(
        n_items: int, override: Any = None, url: str = "", n_follow: int = 0, items: bool = True
    ) -> Outcome | None:
        """The outcome of a page from what its callback yielded: the callback's own
        ``domainstate_outcome``, else ``ok-contact`` with at least one item, ``navigation``
        with none but follow-up requests to the same site (``n_follow``), ``ok-empty`` with
        neither. ``items=False`` (a callable that returned None): navigation or nothing
        (``None``, not evidence)."""
        if override is not None:
            try:
                return Outcome(override)
            except ValueError:
                logger.warning("Ignoring unknown %s=%r on %s", META_OUTCOME, override, url)
        if not n_items and n_follow:
            return Outcome.NAVIGATION
        if not items:
            return None
        return Outcome.OK_CONTACT if n_items else Outcome.OK_EMPTY
