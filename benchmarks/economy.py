#!/usr/bin/env python
"""Crawl-economy simulator: what the domain state machine saves, measured.

A seeded synthetic population of sites (default 220,000, the seed's scale) whose
behaviour mixes the kinds of docs/SPEC.md section 2 with noise (dead sites, DNS outages,
anti-bot challenges, rate limits and blocks, JavaScript shells, flaky servers,
subdomains of one site, sites that turn hostile, recover or die) is crawled over
several rounds (default 4, a week apart, on a simulated clock so that TTLs matter)
by six policies that all meet the same world: ``plain`` (one GET per page),
``fallback`` (the naive fetch-with-fallback: a render on every failure),
``fixable`` (the fair baseline: no memory, no HEAD, one GET per page and one
render exactly when the plugin's own evidence rules would re-issue it),
``browser`` (a render per page), ``domainstate`` (the real Policy and store, fed
what the plugin's evidence module makes of each answer) and ``oracle`` (knows each
site's true behaviour, does the least that finds every contact). See
``benchmarks/economy_sim/`` for each part.

Accounting, the same for every policy: a *request* is anything sent over the wire
(a HEAD probe, a GET, a render, robots.txt when the mix obeys it); a render is also
a request, and the *cost* weighs it ``--render-cost`` GETs (default 10). A
*contact* is a page fetched or rendered successfully whose content has contacts;
*sites* are hosts with at least one. Every random draw comes from a hash of
``(seed, site, round, page, method)``, so the world is identical for every policy.
*Lost* pages are those whose contacts the naive fallback finds and the policy does
not (it tries both methods on every failure, so it finds every contact any policy
can reach, and so does the oracle). The targets compare with the fixable fallback
and the oracle (``--check`` exits 1 when one is missed).

Assumptions worth knowing when reading the numbers: GET noise is what is left after
Scrapy's RetryMiddleware, while the HEAD probe is sent without retries (its own
timeout rate); up to ``crawl.concurrency`` requests of a host (default 8) are
decided before the earlier ones' outcomes return; a group's hosts are visited one
after another at a time drawn in the round's crawl window; a DNS outage lasts a
whole visit; a render is a fresh, independent attempt, except that it meets the
same rate limit as the GET it would re-issue.

Run ``python benchmarks/economy.py --help``. The population is the documented
parameter file ``benchmarks/economy_mix.json``; ``benchmarks/mixes/`` holds other
documented populations and cadences (``--mix daily``, ``--all-mixes``).
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    import scrapy_domainstate  # noqa: F401
except ImportError:  # run from a checkout without installing the package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from economy_sim import (
    DEFAULT_MIX_PATH,
    LABELS,
    METRICS,
    MIXES_DIR,
    POLICIES,
    T0,
    TARGETS,
    MixError,
    draw_population,
    evaluate_targets,
    format_report,
    lmdb_available,
    load_mix,
    main,
    parse_overrides,
    resolve_mix,
    shipped_mixes,
    simulate,
    summarise,
    write_chart,
    write_mixes_chart,
)

__all__ = [
    "DEFAULT_MIX_PATH",
    "LABELS",
    "METRICS",
    "MIXES_DIR",
    "POLICIES",
    "T0",
    "TARGETS",
    "MixError",
    "draw_population",
    "evaluate_targets",
    "format_report",
    "lmdb_available",
    "load_mix",
    "main",
    "parse_overrides",
    "resolve_mix",
    "shipped_mixes",
    "simulate",
    "summarise",
    "write_chart",
    "write_mixes_chart",
]

if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
