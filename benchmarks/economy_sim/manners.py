"""The plugin's manners in the simulator: its real :class:`~scrapy_domainstate.runtime.polite.Politeness`
(a download slot slowed on 429, remembered per domain) and :class:`~scrapy_domainstate.runtime.polite.HostPauses`
(a host paused after timeouts in a row), one of each per round (a round is a crawl).

``Politeness`` reads and writes Scrapy's download slots; here it gets a stand-in for the
engine's downloader that holds the same two things it touches (``slots`` with ``delay`` and
``jitter``, ``per_slot_settings`` for slots not made yet) and makes a slot when a request is
sent, as Scrapy's downloader does. Every delay is the plugin's own: the simulator only asks
what the slot's delay is when it sends a request. The learned delays are written to the
plugin's store at the end of a round, as the manager does at the end of a crawl, and read
back by the next round's ``Politeness``.
"""

from __future__ import annotations

from typing import Any

from scrapy.http import Request, Response

from scrapy_domainstate.core.config import Config
from scrapy_domainstate.runtime.polite import HostPauses, Politeness, polite_key
from scrapy_domainstate.store.base import DomainStore

__all__ = ["Manners"]


class _Slot:
    __slots__ = ("delay", "jitter")

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.jitter = 0.5  # Scrapy's RANDOMIZE_DOWNLOAD_DELAY


class _Downloader:
    """What :class:`Politeness` reads of Scrapy's downloader: a slot per host."""

    def __init__(self) -> None:
        self.slots: dict[str, _Slot] = {}
        self.per_slot_settings: dict[str, dict[str, Any]] = {}

    @staticmethod
    def get_slot_key(request: Request) -> str:
        return request.meta["slot"]

    def send(self, key: str) -> float:
        """A request leaves through slot ``key`` (made when first used): its delay."""
        slot = self.slots.get(key)
        if slot is None:
            slot = self.slots[key] = _Slot(float(self.per_slot_settings.get(key, {}).get("delay", 0.0)))
        return slot.delay


class _Stats:
    def __init__(self) -> None:
        self.values: dict[str, int] = {}

    def inc_value(self, key: str, count: int = 1) -> None:
        self.values[key] = self.values.get(key, 0) + count


class _Settings:
    @staticmethod
    def getfloat(name: str, default: float = 0.0) -> float:
        return 0.0  # DOWNLOAD_DELAY: Scrapy's default


class _Engine:
    def __init__(self) -> None:
        self.downloader = _Downloader()


class _Crawler:
    def __init__(self) -> None:
        self.engine = _Engine()
        self.stats = _Stats()
        self.settings = _Settings()


class Manners:
    """One round's politeness and pauses; ``start`` begins a crawl, ``end`` saves what it learned."""

    def __init__(self, config: Config, store: DomainStore) -> None:
        self.config = config
        self.store = store
        self.now = 0.0
        self.slowed = self.paused_hosts = 0
        #: the politeness records in the store (not domain records)
        self.kept: set[str] = set()
        self.start(0.0)

    def start(self, now: float) -> None:
        self.now = now
        self.crawler = _Crawler()
        self.polite = Politeness(self.config, self.crawler, lambda: self.now)  # type: ignore[arg-type]
        self.pauses = HostPauses(self.config.pause_after)
        self._requests: dict[str, Request] = {}

    def end(self, now: float) -> None:
        self.now = now
        keep, drop = self.polite.records(now)
        for stat in keep:
            self.store.put(stat)
            self.kept.add(stat.domain)
        for key in drop:
            self.store.delete(key)
            self.kept.discard(key)
        self.slowed += self.polite.slowed
        self.paused_hosts += len(self.pauses.paused)

    def _request(self, host: str) -> Request:
        request = self._requests.get(host)
        if request is None:
            request = self._requests[host] = Request(f"http://{host}/", meta={"slot": host})
        return request

    def send(self, host: str, domain: str, now: float) -> float:
        """A request to ``host`` is sent: the slot primed from the domain's remembered delay (read
        once a crawl), then its delay."""
        self.now = now
        self.polite.prime(self._request(host), domain, lambda d: self.store.get(polite_key(d)))
        return self.crawler.engine.downloader.send(host)

    def answered(self, host: str, domain: str, status: int, retry_after: int | None, now: float) -> bool:
        """A response downloaded (``response_downloaded``); True when it pauses the host
        (a Retry-After over the cap)."""
        self.now = now
        headers = {} if retry_after is None else {"Retry-After": str(retry_after)}
        response = Response(f"http://{host}/", status=status, headers=headers)
        request = self._request(host)
        over = self.polite.downloaded(response, request, domain)
        self.polite.enforce(request)
        return over

    def delay(self, host: str) -> float:
        slot = self.crawler.engine.downloader.slots.get(host)
        return 0.0 if slot is None else slot.delay
