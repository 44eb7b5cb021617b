"""The extension: opens the store at ``spider_opened``, flushes it on a timer,
and at ``spider_closed`` flushes, fills the state-at-close stats and closes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import task

from .manager import DomainStateManager

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from typing_extensions import Self

__all__ = ["DomainStateExtension"]


class DomainStateExtension:
    def __init__(self, crawler: Crawler) -> None:
        self.manager = DomainStateManager.for_crawler(crawler)
        self._timer: task.LoopingCall | None = None
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def spider_opened(self, spider: Any = None) -> None:
        self.manager.open()
        interval = self.manager.config.flush_interval
        if interval > 0:
            self._timer = task.LoopingCall(self.manager.flush)
            self._timer.start(interval, now=False)

    async def spider_closed(self, spider: Any = None, reason: str = "") -> None:
        if self._timer is not None and self._timer.running:
            self._timer.stop()
        done = self.manager.close()
        if done is not None:  # the remote client drains its reports
            await maybe_deferred_to_future(done)
