"""The URL-level dead table: URLs that answered 404/410 off the site root, skipped for a while.

Entries live in the store (``mark_url_dead`` / ``url_dead_until``), keyed by the request
fingerprint. Most domains have no dead URL, so a per-domain mark (``domain:<key>``, read
once per crawl) spares computing the fingerprint of every request. Store errors go to
``on_error`` (``"read"`` / ``"write"``) and count as "not dead".

The marks read are cached for at most :attr:`DeadUrls.max_domains` domains (the oldest
half is forgotten past it): a forgotten domain costs one more store read, never a
different answer.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from scrapy_domainstate.core.keys import _CACHE_SIZE
from scrapy_domainstate.store import DomainStore

__all__ = ["DeadUrls"]

#: Key prefix of "this domain has dead URLs" marks (fingerprints are hex: no collision).
_DOMAIN_MARK = "domain:"


class DeadUrls:
    #: Domains whose mark is cached (about 100 bytes each): as many as the key caches hold.
    max_domains = _CACHE_SIZE

    def __init__(self, store: DomainStore, ttl: float, on_error: Callable[[str], None]) -> None:
        self.store = store
        self.ttl = ttl
        self._on_error = on_error
        #: domain -> it has dead URLs (its mark), as last read or written; insertion order
        self._domains: dict[str, bool] = {}

    def _cache(self, domain: str, has_dead: bool) -> None:
        domains = self._domains
        domains.pop(domain, None)
        domains[domain] = has_dead
        if len(domains) > self.max_domains:
            # The oldest half: amortised O(1) a call, as the next trim is max_domains / 2 calls away.
            for old in list(itertools.islice(domains, len(domains) // 2)):
                del domains[old]

    def is_dead(self, domain: str, fingerprint: Callable[[], str], now: float) -> bool:
        """The URL (``fingerprint()``, computed only when needed) is marked dead at ``now``."""
        if not self.ttl:
            return False
        try:
            has_dead = self._domains.get(domain)
            if has_dead is None:
                until = self.store.url_dead_until(_DOMAIN_MARK + domain)
                has_dead = until is not None and until > now
                self._cache(domain, has_dead)
            if not has_dead:
                return False
            until = self.store.url_dead_until(fingerprint())
        except Exception:
            self._on_error("read")
            return False
        return until is not None and until > now

    def mark(self, domain: str, fingerprint: Callable[[], str], now: float) -> bool:
        """Mark the URL dead for the TTL; False when off or the store failed."""
        if not self.ttl:
            return False
        until = now + self.ttl
        try:
            self.store.mark_url_dead(fingerprint(), until)
            self.store.mark_url_dead(_DOMAIN_MARK + domain, until)
            self._cache(domain, True)
        except Exception:
            self._on_error("write")
            return False
        return True
