"""What one request, and one connection, may hold at the reference service."""

from __future__ import annotations

from dataclasses import dataclass

from scrapy_domainstate.core.clock import DAY
from scrapy_domainstate.fleet.protocol import MAX_BATCH, MAX_EVIDENCE, MAX_SKEW

__all__ = ["Limits"]


@dataclass(frozen=True)
class Limits:
    """What one request may hold."""

    max_domains: int = MAX_BATCH
    max_reports: int = MAX_BATCH
    max_body: int = 64 * 1024
    #: Seconds a report's ``last_seen`` may lie in the future.
    max_skew: float = MAX_SKEW
    max_evidence: int = MAX_EVIDENCE
    #: Age after which a vote for a state without TTL (``friendly``) stops counting.
    max_vote_age: float = 90 * DAY
    #: Open connections at most (lowered to the open-file limit minus a reserve at start).
    max_connections: int = 512
    #: Connections waiting for a request's bytes (slow or idle clients) at most: beyond it,
    #: the one waiting longest is closed.
    max_waiting: int = 256
    #: Seconds a client has to send a request's headers, then its body.
    header_timeout: float = 10.0
    body_timeout: float = 10.0
    #: Seconds an idle keep-alive connection is kept.
    idle_timeout: float = 30.0
