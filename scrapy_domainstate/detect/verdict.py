"""The classifier's answer: what one HEAD, GET, browser load or failure says about a domain
(:class:`Verdict`, the outcome and its short evidence), as every module of the floor that
judges a response, a failure or a certificate returns it.
"""

from __future__ import annotations

from dataclasses import dataclass

from scrapy_domainstate.core.record import FETCHED, HARD_BLOCK_PREFIX, Outcome

__all__ = ["Verdict"]

_SUCCESS = FETCHED


@dataclass(frozen=True, slots=True)
class Verdict:
    """What one HEAD, GET, browser load or failure says about a domain.

    ``error_class`` is short evidence: ``'challenge:cloudflare:title'``,
    ``'block:cloudflare:1020'`` (the ``block:`` prefix marks a hard block), ``'dns'``,
    ``'dns-temporary'``, ``'refused'``, ``'timeout'``, ``'tls:expired'``, ``'http:404'``,
    ``'js-shell'``, or an exception class name. ``browser_fixable`` is true when re-issuing
    the request in a headless browser could plausibly get the page.
    """

    outcome: Outcome
    status: int | None = None
    error_class: str | None = None
    browser_fixable: bool = False

    @property
    def success(self) -> bool:
        """The page was fetched (``ok-contact``, ``ok-empty`` or ``navigation``)."""
        return self.outcome in _SUCCESS

    @property
    def is_hard_block(self) -> bool:
        """An anti-bot verdict that sends the domain straight to ``antibot-hard``."""
        return self.outcome is Outcome.ANTIBOT and bool(
            self.error_class and self.error_class.startswith(HARD_BLOCK_PREFIX)
        )
