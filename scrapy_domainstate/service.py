"""The reference shared domain-state service (docs/SPEC.md section 7), on Twisted.

Run it with ``scrapy domainstate serve`` or ``python -m scrapy_domainstate.service``; the
API is described in ``docs/openapi.yaml``:

* ``GET /api/scrape/domain-state?domains=a.com,b.com`` answers the fleet's verdict on up to
  100 domains: ``{"domains": {"a.com": {"state", "consensus", "reporters", "agreeing",
  "last_seen", "expires_at"}}}``; domains without a current vote are left out.
* ``POST /api/scrape/domain-state`` with ``{"reports": [{"domain", "state", "last_seen",
  "evidence"?}]}`` (at most 100 reports, 64 KiB) records the caller's votes:
  ``{"accepted": n}``.
* ``GET /api/scrape/stats``: request counters (for operators and tests).

Every call needs ``Authorization: Bearer <token>``; the token names the reporter
(server-side table), never the body. Each reporter has one vote per domain: a newer report
replaces its earlier vote. A domain's verdict is computed from the distinct reporters'
current votes (a vote older than its state's TTL no longer counts): the most common state,
the share of reporters agreeing with it (``consensus``) and the number of reporters.

Storage: the votes live in SQLite (stdlib, transactional and crash-safe, and the
``(domain, reporter)`` primary key *is* the one-vote rule); after each report the
consensus of every domain it touched is written, as a :class:`DomainStat`, into a
:class:`DomainStore` (LMDB by default), where ``scrapy domainstate show/export/stats``
can inspect it. Lookups are computed from the votes, so vote ageing is exact.
Every input is validated; errors are JSON ``{"error": "...", "field": "..."}`` with a
400, 401, 404, 405, 413, 415 or 429 (with ``Retry-After``) status; connections are
bounded and must send their request within deadlines (see :class:`Limits`).

The code lives in :mod:`scrapy_domainstate.fleet` (:mod:`~.fleet.votes`,
:mod:`~.fleet.validation`, :mod:`~.fleet.service`, :mod:`~.fleet.http`, :mod:`~.fleet.cli`);
this module is the service's public face and its ``python -m`` entry point.
"""

from __future__ import annotations

import sys

from scrapy_domainstate.fleet.cli import main, serve
from scrapy_domainstate.fleet.files import load_tokens
from scrapy_domainstate.fleet.http import make_site
from scrapy_domainstate.fleet.limits import Limits
from scrapy_domainstate.fleet.service import DomainStateService
from scrapy_domainstate.fleet.votes import Consensus, Vote, compute_consensus

__all__ = [
    "Consensus",
    "DomainStateService",
    "Limits",
    "Vote",
    "compute_consensus",
    "load_tokens",
    "main",
    "make_site",
    "serve",
]

if __name__ == "__main__":
    sys.exit(main())
