"""The reference service's logic, independent of HTTP: authentication, rate and quota,
lookups, reports, and the consensus records mirrored into a :class:`DomainStore`."""

from __future__ import annotations

import hashlib
import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from scrapy_domainstate.core.config import Config, ConfigError
from scrapy_domainstate.core.record import DomainStat
from scrapy_domainstate.fleet.limits import Limits
from scrapy_domainstate.fleet.validation import ApiError
from scrapy_domainstate.fleet.votes import Consensus, VoteTable, compute_consensus
from scrapy_domainstate.store import DomainStore

__all__ = ["DomainStateService"]

logger = logging.getLogger(__name__)


class DomainStateService:
    """The API's logic, independent of HTTP: authentication, lookups, reports."""

    def __init__(
        self,
        tokens: Mapping[str, str],
        votes: VoteTable,
        store: DomainStore,
        *,
        config: Config | None = None,
        limits: Limits | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not tokens:
            raise ConfigError("the domain-state service needs at least one token")
        for token, reporter in tokens.items():
            if not isinstance(token, str) or not token or not isinstance(reporter, str) or not reporter:
                raise ConfigError("tokens must map non-empty token strings to non-empty reporter ids")
        self._tokens = {_digest(t): r for t, r in tokens.items()}
        self.votes = votes
        self.store = store
        self.config = config or store.config
        self.limits = limits or Limits()
        self.clock = clock
        self.counters: Counter[str] = Counter()
        #: reporter -> (tokens, monotonic time of the last refill): DOMAINSTATE_SERVICE_RATE.
        self._buckets: dict[str, tuple[float, float]] = {}
        #: reporter -> votes held (DOMAINSTATE_SERVICE_QUOTA), counted on first use.
        self._held: dict[str, int] = {}
        self.monotonic: Callable[[], float] = time.monotonic

    def check_rate(self, reporter: str) -> None:
        """Take one request from ``reporter``'s bucket (``DOMAINSTATE_SERVICE_RATE`` a
        second, bursts of 10 seconds' worth); raises 429 with ``Retry-After`` when empty."""
        rate = self.config.service_rate
        if not rate:
            return
        now = self.monotonic()
        burst = max(rate * 10.0, 1.0)
        tokens, last = self._buckets.get(reporter, (burst, now))
        tokens = min(burst, tokens + (now - last) * rate)
        if tokens < 1.0:
            self._buckets[reporter] = (tokens, now)
            wait = max(1, math.ceil((1.0 - tokens) / rate))
            self.counters["rate_limited"] += 1
            raise ApiError(
                429, f"too many requests: at most {rate:g} a second per reporter", "Authorization", retry_after=wait
            )
        self._buckets[reporter] = (tokens - 1.0, now)

    def _check_quota(self, reporter: str, reports: list[dict[str, Any]]) -> int:
        """The number of votes ``reporter`` holds after these reports; raises 429 beyond
        ``DOMAINSTATE_SERVICE_QUOTA`` (a newer vote on a domain it already voted on is free)."""
        held = self._held.get(reporter)
        if held is None:
            held = self._held[reporter] = self.votes.count_by(reporter)
        domains = {r["domain"] for r in reports}
        new = len(domains - self.votes.held(reporter, domains))
        quota = self.config.service_quota
        if quota and held + new > quota:
            self.counters["over_quota"] += 1
            raise ApiError(
                429,
                f"storage quota: this reporter holds {held:,} votes, at most {quota:,}; "
                "they free up as they expire (or report on domains already voted on)",
                "reports",
                retry_after=3600,
            )
        return held + new

    def authenticate(self, header: bytes | None) -> str:
        """The reporter id of an ``Authorization`` header; raises 401."""
        if not header:
            raise ApiError(401, "missing 'Authorization: Bearer <token>'", "Authorization")
        scheme, _, token = header.partition(b" ")
        if scheme.lower() != b"bearer" or not token.strip():
            raise ApiError(401, "use 'Authorization: Bearer <token>'", "Authorization")
        reporter = self._tokens.get(_digest(token.strip()))
        if reporter is None:
            raise ApiError(401, "invalid token", "Authorization")
        return reporter

    def lookup(self, domains: list[str]) -> dict[str, Any]:
        now = self.clock()
        answers = {d: v.as_json() for d, v in self._verdicts(domains, now) if v is not None}
        self.counters["domains_looked_up"] += len(domains)
        self.counters["domains_known"] += len(answers)
        return {"domains": answers}

    def report(self, reporter: str, reports: list[dict[str, Any]]) -> dict[str, Any]:
        now = self.clock()
        held = self._check_quota(reporter, reports)
        accepted = self.votes.record(reporter, reports, now)
        self._held[reporter] = held
        self.counters["reports_received"] += len(reports)
        self.counters["reports_accepted"] += accepted
        self._mirror({r["domain"] for r in reports}, now)
        return {"accepted": accepted}

    def _verdicts(self, domains: list[str], now: float) -> list[tuple[str, Consensus | None]]:
        """Each domain's consensus at ``now`` (``None``: no verdict), from the votes kept."""
        ttl, max_age = self.config.ttl, self.limits.max_vote_age
        return [(d, compute_consensus(v, ttl, now, max_age)) for d, v in self.votes.votes(domains).items()]

    def _mirror(self, domains: set[str], now: float) -> None:
        """Write the consensus of ``domains`` into the store (best effort)."""
        try:
            for domain, verdict in self._verdicts(sorted(domains), now):
                if verdict is None:
                    self.store.delete(domain)
                    continue
                stat = self.store.get(domain)
                stat = DomainStat(domain, first_seen=verdict.last_seen) if stat is None else stat.copy()
                if stat.state is not verdict.state:
                    stat.state = verdict.state
                    stat.state_changed_at = now
                stat.last_seen = verdict.last_seen
                stat.state_expires_at = verdict.expires_at
                self.store.put(stat)
        except Exception:
            self.counters["store_errors"] += 1
            logger.warning("could not write the consensus records to %s", self.store.describe(), exc_info=True)

    def prune(self) -> int:
        self._held.clear()  # recounted on next use
        return self.votes.prune(self.config.ttl, self.clock(), self.limits.max_vote_age)

    def stats(self) -> dict[str, Any]:
        return {
            "requests": {k[4:]: v for k, v in sorted(self.counters.items()) if k.startswith("req/")},
            "errors": {k[4:]: v for k, v in sorted(self.counters.items()) if k.startswith("err/")},
            "counters": {k: v for k, v in sorted(self.counters.items()) if "/" not in k},
            "votes": self.votes.count(),
            "domains": self.votes.count_domains(),
        }

    def close(self) -> None:
        try:
            self.store.close()
        finally:
            self.votes.close()


def _digest(token: str | bytes) -> bytes:
    data = token.encode("utf-8") if isinstance(token, str) else token
    return hashlib.sha256(data).digest()
