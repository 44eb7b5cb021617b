"""Random populations: mixes nobody tuned a rule to (``economy.py --random-mixes N``).

The shipped mixes are built from published figures, and the rules were measured on them;
a population a user brings differs from all of them. A drawn population keeps the
default mix's kinds (what a site can be) and varies what it is made of:

- each kind's share is the default's times ``exp(g)``, ``g`` normal with sigma 1 (so a kind
  at 5 % lands between 1.8 % and 14 % two times in three, before the shares are normalised);
- the pages a crawl asks of a site: one of :data:`PAGE_PLANS` (1-2 URLs of a lead list to
  10-40 of a deep crawl);
- the cadence (1 to 45 days between crawls, 3 to 8 crawls), the visit's span and the
  concurrency per host, robots.txt obeyed or not;
- the noise: timeouts, server errors, DNS outages (partial ones too), contacts that stay
  on their pages, renders that fail with the GET, classifier errors, dead sites that come
  back, each uniform in a range around the default's (:data:`NOISE_RANGES`).

A draw depends only on its index: ``draw_population(7)`` is the same population on every
machine, so a miss can be run again alone (``--random-mixes 1 --random-start 7``).
"""

from __future__ import annotations

import math
import random
from typing import Any

from .mix import kinds_of, load_mix

__all__ = ["NOISE_RANGES", "PAGE_PLANS", "describe", "draw_population"]

#: What a crawl asks of each site: weights for 1, 2, ... pages, or a uniform range.
PAGE_PLANS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("1-2 URLs (a lead list)", {"range": [1, 2]}),
    ("1-3 URLs, mostly 1", {"weights": [0.6, 0.2, 0.1, 0.1]}),
    ("1-3 URLs (home, contact, about)", {"weights": [0.3, 0.45, 0.25]}),
    ("1-5 URLs (the default's)", {"weights": [0.15, 0.25, 0.3, 0.15, 0.15]}),
    ("3-12 URLs", {"range": [3, 12]}),
    ("10-40 URLs (a deep crawl)", {"range": [10, 40]}),
)

#: Noise entries drawn uniformly from these ranges (the others keep the default's).
NOISE_RANGES: dict[str, tuple[float, float]] = {
    "timeout": (0.002, 0.04),
    "server_error": (0.002, 0.04),
    "dns_outage": (0.0, 0.03),
    "dns_outage_partial": (0.0, 0.5),
    "stable_contacts": (0.0, 1.0),
    "render_fails_with_get": (0.0, 0.5),
    "classifier_false_empty": (0.0, 0.02),
    "classifier_false_antibot": (0.0, 0.01),
    "dead_revive": (0.0, 0.1),
}

DAYS_BETWEEN = (1, 2, 3, 7, 14, 30, 45)
ROUNDS = (3, 4, 6, 8)
CONCURRENCY = (1, 4, 8, 16)
VISIT_HOURS = (6, 24, 72)
SITES = 3000


def draw_population(index: int, sites: int = SITES) -> dict[str, Any]:
    """The mix of random population ``index`` (a mapping :func:`.mix.load_mix` accepts)."""
    if index < 0:
        raise ValueError(f"a random population's index is >= 0, got {index}")
    rng = random.Random(f"scrapy-domainstate random population {index}")
    kinds = kinds_of(load_mix())  # (a fresh copy of the default mix)
    weights = {name: kind["share"] * math.exp(rng.gauss(0.0, 1.0)) for name, kind in kinds.items()}
    total = sum(weights.values())
    for name, kind in kinds.items():
        kind["share"] = weights[name] / total
    # (shares must add up to 1 within 1e-6: give the rounding to the largest)
    largest = max(kinds, key=lambda name: kinds[name]["share"])
    kinds[largest]["share"] += 1.0 - sum(kind["share"] for kind in kinds.values())
    plan_name, plan = PAGE_PLANS[rng.randrange(len(PAGE_PLANS))]
    noise = {name: round(rng.uniform(lo, hi), 4) for name, (lo, hi) in NOISE_RANGES.items()}
    days, rounds = rng.choice(DAYS_BETWEEN), rng.choice(ROUNDS)
    crawl = {
        "hours": rng.choice(VISIT_HOURS),
        "concurrency": rng.choice(CONCURRENCY),
        "robotstxt_obey": rng.random() < 0.3,
    }
    subdomains = {"share": round(rng.uniform(0.0, 0.3), 3)}
    return {
        "about": f"random population {index}: {plan_name}, every {days} days x {rounds}",
        "kinds": kinds,
        "pages": {"why": plan_name, **plan},
        "noise": noise,
        "crawl": crawl,
        "subdomains": subdomains,
        "cadence": {"rounds": rounds, "days_between": days, "sites": sites},
    }


def describe(mix: dict[str, Any], top: int = 5) -> str:
    """One line: the cadence, the page plan, the largest kinds and the crawl's settings."""
    kinds = sorted(kinds_of(mix).items(), key=lambda item: -item[1]["share"])[:top]
    shares = ", ".join(f"{name} {kind['share']:.0%}" for name, kind in kinds)
    cadence, crawl = mix["cadence"], mix["crawl"]
    return (
        f"{mix['about']}; {shares}; concurrency {crawl['concurrency']}, visits over {crawl['hours']} h"
        f"{', robots.txt obeyed' if crawl['robotstxt_obey'] else ''}; {cadence['sites']:,} sites"
    )
