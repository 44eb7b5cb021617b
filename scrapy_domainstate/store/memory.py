"""An in-memory store: for tests, simulations and one-off crawls. Nothing persists."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from scrapy_domainstate.core.record import DomainStat, RecentEntry
from scrapy_domainstate.store.base import DomainStore, apply_entries

__all__ = ["MemoryStore"]


class MemoryStore(DomainStore):
    name = "memory"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._records: dict[str, DomainStat] = {}
        self._urls: dict[str, float] = {}

    def _load_raw(self, domain: str) -> DomainStat | None:
        return self._records.get(domain)

    def _write_batch(self, batch: dict[str, list[RecentEntry]]) -> dict[str, DomainStat]:
        out = {}
        for domain, entries in batch.items():
            out[domain] = self._records[domain] = apply_entries(self.policy, self._records.get(domain), domain, entries)
        self._evict()
        return out

    def _evict(self) -> None:
        extra = len(self._records) - self.config.max_domains
        if extra > 0:
            oldest = sorted(self._records.values(), key=lambda s: s.last_seen)[:extra]
            for stat in oldest:
                del self._records[stat.domain]
            self.evicted += extra

    def _put(self, stat: DomainStat) -> None:
        self._records[stat.domain] = stat.copy()
        self._evict()

    def _delete(self, domain: str) -> bool:
        return self._records.pop(domain, None) is not None

    def _clear(self) -> int:
        n = len(self._records)
        self._records.clear()
        self._urls.clear()
        return n

    def iter_records(self) -> Iterator[DomainStat]:
        yield from list(self._records.values())

    def count(self) -> int:
        return len(self._records)

    def url_dead_until(self, fingerprint: str) -> float | None:
        return self._urls.get(fingerprint)

    def mark_url_dead(self, fingerprint: str, until: float) -> None:
        self._urls[fingerprint] = until
