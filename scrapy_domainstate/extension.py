"""The extension: the plugin's runtime for a crawl, also when no middleware is listed first.

Building it builds the crawler's :class:`~scrapy_domainstate.runtime.lifecycle.DomainStateManager`,
which opens the store at ``spider_opened``, flushes it every ``DOMAINSTATE_FLUSH_INTERVAL``
seconds, and at ``spider_closed`` flushes, fills the state-at-close stats and closes it.
The lifecycle is wired once, by the manager, whichever component comes first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy_domainstate.runtime.lifecycle import DomainStateManager

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from typing_extensions import Self

__all__ = ["DomainStateExtension"]


class DomainStateExtension:
    def __init__(self, crawler: Crawler) -> None:
        self.manager = DomainStateManager.for_crawler(crawler)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)
