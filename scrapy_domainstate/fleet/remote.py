"""The client of a shared domain-state service (docs/SPEC.md section 7).

A fleet of crawlers shares verdicts through a small HTTP service (``scrapy domainstate
serve`` runs the reference one, :mod:`scrapy_domainstate.service`; the API is described in
``docs/openapi.yaml``):

* :meth:`RemoteClient.lookup` asks for the state of a domain seen for the first time.
  Lookups are batched (one ``GET /api/scrape/domain-state?domains=a,b,c`` per batch of up
  to 100 domains collected for at most 50 ms) and always *succeed*: with a
  :class:`RemoteVerdict`, or with ``None`` when the service does not know the domain, is
  slow, down, or answers garbage.
* :meth:`RemoteClient.report` queues a local verdict (``dead``, ``antibot-hard``); reports
  are sent in batched ``POST`` requests, fire-and-forget, from a bounded queue.
* :func:`adopt` decides whether a remote verdict replaces the local state: only with a
  consensus above ``DOMAINSTATE_REMOTE_CONSENSUS`` among at least
  ``DOMAINSTATE_REMOTE_MIN_REPORTERS`` distinct reporters, and only when it is newer than
  the local verdict.

The service is never trusted to behave: every call has a hard timeout, answers are capped
in size and validated field by field, and a circuit breaker stops calling a failing
service for a cool-down period. None of this raises into the crawl: failures are counted
(:meth:`RemoteClient.counters`) and logged, and the crawl goes on as if no service were
configured.

The code lives in :mod:`scrapy_domainstate.fleet` (:mod:`~.fleet.client`,
:mod:`~.fleet.protocol`, :mod:`~.fleet.verdicts`); this module is the client's public face.
"""

from __future__ import annotations

from scrapy_domainstate.core.breaker import CircuitBreaker
from scrapy_domainstate.fleet.client import RemoteClient
from scrapy_domainstate.fleet.protocol import (
    API_PATH,
    MAX_BATCH,
    MAX_DOMAIN_LENGTH,
    MAX_EVIDENCE,
    MAX_SKEW,
    InvalidResponse,
    is_domain_key,
    parse_lookup_response,
)
from scrapy_domainstate.fleet.verdicts import RemoteVerdict, adopt, adoption_ttl

__all__ = [
    "API_PATH",
    "MAX_BATCH",
    "MAX_DOMAIN_LENGTH",
    "MAX_EVIDENCE",
    "MAX_SKEW",
    "CircuitBreaker",
    "InvalidResponse",
    "RemoteClient",
    "RemoteVerdict",
    "adopt",
    "adoption_ttl",
    "is_domain_key",
    "parse_lookup_response",
]
