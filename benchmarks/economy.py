#!/usr/bin/env python
"""Crawl-economy simulator: what the domain state machine saves, measured.

A seeded synthetic population of sites (default 220,000, the seed's scale) whose
behaviour mixes the kinds of docs/SPEC.md section 2 with noise (dead sites, DNS outages,
anti-bot challenges and blocks, JavaScript shells, flaky servers, subdomains of
one site, sites that turn hostile, recover or die) is crawled over several rounds
(default 4, a week apart, on a simulated clock so that TTLs matter) by five
policies that all meet the same world:

``plain``
    Scrapy without the plugin: one GET per page.
``fallback``
    One GET per page and a browser render whenever it fails; no memory.
``browser``
    A browser render for every page.
``domainstate``
    scrapy-domainstate with its defaults (or ``--config-override``): the real
    :class:`~scrapy_domainstate.policy.Policy` and store (LMDB by default), fed
    the outcomes the plugin's middleware would record.
``oracle``
    Knows every site's true kind at every round (not the per-request noise) and
    does the least that still finds every contact there is to find: nothing for
    dead and contact-less sites and for broken URLs, a render for walled, blocked
    and JavaScript-shell sites, a GET (and a render when the GET fails in a way a
    second request can get past) for the rest. It is the lower bound of the cost
    per contact of a policy that loses nothing.

Accounting, the same for every policy: a *request* is anything sent over the
wire (a HEAD probe, a GET or a browser render); a *render* is a browser render
and so is also counted as a request. A *contact* is a page fetched or rendered
successfully whose content has contacts. Every random draw comes from a hash of
``(seed, site, round, page, method)``, never from a shared stream, so the world
(which pages have contacts, which request times out, which fetch is challenged)
is identical for every policy. *Lost* pages are those whose contacts the
fetch-with-fallback policy finds and the policy does not (fallback tries both
methods on every failure, so it finds every contact any policy can reach, and
the oracle finds exactly the same ones).

What scrapy-domainstate does per page mirrors ``manager.py``: a URL marked dead
is skipped; otherwise ``store.decide(domain, now)``; PROBE sends one HEAD
(recorded, ``no-verdict`` when it says nothing) and decides again; SKIP sends
nothing; FETCH one GET; FETCH_THEN_BROWSER one GET and, on an antibot or
browser-fixable verdict (timeouts, 403/503, JavaScript shells; not 500/502, DNS,
refused or 404), one render; BROWSER one render. Every outcome is recorded with
``store.record(domain, RecentEntry(...))`` using the classifier's vocabulary
(``block:...`` for hard blocks, ``js-shell`` as a browser-fixable ``ok-empty``,
not recorded when the browser renders the page next; a 404 off the root marks
the URL dead and is not recorded),
and a GET answering 404 off the root marks that URL dead.

Assumptions worth knowing when reading the numbers: there is no
RetryMiddleware (the noise rates are what is left after Scrapy's retries);
a site's pages are visited back to back at a time drawn in the round's crawl
window; a DNS outage lasts a whole visit; the browser is a fresh, independent
attempt (its own timeout and server-error draws).

Run ``python benchmarks/economy.py --help``. The mix of site kinds is the
documented parameter file ``benchmarks/economy_mix.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

try:
    import scrapy_domainstate  # noqa: F401
except ImportError:  # run from a checkout without installing the package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scrapy_domainstate.config import SETTINGS, Config, ConfigError
from scrapy_domainstate.policy import Decision, Policy
from scrapy_domainstate.record import Method, Outcome, RecentEntry, State
from scrapy_domainstate.store.base import DomainStore
from scrapy_domainstate.store.memory import MemoryStore

__all__ = [
    "DEFAULT_MIX_PATH",
    "POLICIES",
    "TARGETS",
    "MixError",
    "evaluate_targets",
    "format_report",
    "load_mix",
    "main",
    "simulate",
    "write_chart",
]

DAY = 86400.0
#: The simulated clock starts here (2026-01-01 UTC): a real epoch, since the store
#: treats 0 as "never" (``probed_at``, ``first_seen``).
T0 = 1_767_225_600.0
DEFAULT_MIX_PATH = Path(__file__).resolve().parent / "economy_mix.json"

#: Policy keys, in table order, and their labels.
POLICIES = ("plain", "fallback", "browser", "domainstate", "oracle")
LABELS = {
    "plain": "plain fetch",
    "fallback": "fetch + fallback",
    "browser": "browser always",
    "domainstate": "scrapy-domainstate",
    "oracle": "oracle",
}
METRICS = ("requests", "renders", "heads", "contacts", "lost", "gained")

#: The issue's targets, checked from round 2 on: (key, label, limit).
TARGETS = (
    ("contacts", "finds >= 99% of fetch+fallback's contacts", 0.99),
    ("requests", "sends <= 50% of fetch+fallback's requests", 0.50),
    ("renders", "renders <= 50% of fetch+fallback's renders", 0.50),
    ("cost", "requests per contact <= 1.15x the oracle's", 1.15),
)

# ------------------------------------------------------------------ hashing

_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_FULL = 1 << 16  # draws are 16-bit fields: u = field / 65536


def _mix(x: int) -> int:
    """splitmix64's finaliser: a well-spread 64-bit hash of a 64-bit integer."""
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9 & _M64
    x = (x ^ (x >> 27)) * 0x94D049BB133111EB & _M64
    return x ^ (x >> 31)


def _thr(p: float) -> int:
    """A probability as a threshold on a 16-bit field (``field < thr`` has probability ``p``)."""
    return round(min(max(p, 0.0), 1.0) * _FULL)


def _in_range(lo: float, hi: float, field: int) -> float:
    return lo + (hi - lo) * field / (_FULL - 1)


# ------------------------------------------------------------------- world

# Behaviours (how a site answers).
FRIENDLY, SHELL, SOFT, WALL, BLOCK, DEAD = range(6)
BEHAVIOURS = {"friendly": FRIENDLY, "js-shell": SHELL, "soft": SOFT, "wall": WALL, "block": BLOCK, "dead": DEAD}

# What one request gets: an index into _RESULTS.
OK, TIMEOUT, SERVER_ERROR, CHALLENGE, BLOCKED, JS_SHELL = range(6)
DNS_NXDOMAIN, DNS_TEMPORARY, URL_404, REFUSED, TLS_INVALID, ROOT_404, NO_VERDICT, SERVER_ERROR_500 = range(6, 14)

#: result -> (outcome, status, error_class, browser-fixable): what the plugin's
#: classifier (``classify.py``) says. The outcome of OK depends on the page
#: (ok-contact / ok-empty). The middleware re-issues a FETCH_THEN_BROWSER request
#: in the browser on an antibot outcome or a browser-fixable verdict.
_RESULTS: tuple[tuple[Outcome | None, int | None, str | None, bool], ...] = (
    (None, 200, None, False),
    (Outcome.NETWORK_ERROR, None, "timeout", True),
    (Outcome.HTTP_ERROR, 503, "http:503", True),
    (Outcome.ANTIBOT, 403, "challenge:cloudflare:title", True),
    (Outcome.ANTIBOT, 403, "block:cloudflare:1020", False),
    (Outcome.OK_EMPTY, 200, "js-shell", True),
    (Outcome.DEAD, None, "dns", False),
    (Outcome.NETWORK_ERROR, None, "dns-temporary", False),
    (Outcome.HTTP_ERROR, 404, "http:404", False),
    (Outcome.DEAD, None, "refused", False),
    (Outcome.DEAD, None, "tls:expired", False),
    (Outcome.DEAD, 404, "http:404", False),
    (Outcome.NO_VERDICT, 200, None, False),
    (Outcome.HTTP_ERROR, 500, "http:500", False),
)
#: The middleware's re-issue rule.
_REISSUE = tuple(r[0] is Outcome.ANTIBOT or r[3] for r in _RESULTS)
#: The oracle's: any failure a second request could get past (not a dead site, a
#: DNS outage or a 404), since it knows which failures are transient.
_TRANSIENT = (False, True, True, True, True, True, False, False, False, False, False, False, False, True)
_DEAD_RESULTS = (DNS_NXDOMAIN, REFUSED, TLS_INVALID, ROOT_404)


class MixError(ValueError):
    """The mix file is malformed; the message names the bad entry."""


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in over.items():
        if key == "kinds" or not isinstance(value, Mapping) or not isinstance(out.get(key), dict):
            out[key] = copy.deepcopy(value)
        else:
            out[key].update(copy.deepcopy(dict(value)))
    return out


def _range(name: str, value: Any) -> tuple[float, float]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = [value, value]
    if (
        not isinstance(value, (list, tuple))
        or len(value) != 2
        or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
        or not 0.0 <= value[0] <= value[1] <= 1.0
    ):
        raise MixError(f"{name} must be a probability or a range [lo, hi] within 0..1, got {value!r}")
    return float(value[0]), float(value[1])


def _prob(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise MixError(f"{name} must be a probability within 0..1, got {value!r}")
    return float(value)


def load_mix(mix: str | Path | Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The default mix, updated by a mix file or mapping, validated.

    Sections given replace the default's keys one by one; a ``kinds`` section
    replaces the whole kind table. Keys named ``why`` document and are ignored.
    """
    with open(DEFAULT_MIX_PATH, encoding="utf-8") as f:
        base = json.load(f)
    if mix is not None:
        if not isinstance(mix, Mapping):
            try:
                with open(mix, encoding="utf-8") as f:
                    mix = json.load(f)
            except (OSError, ValueError) as exc:
                raise MixError(f"cannot read mix file {mix}: {exc}") from exc
            if not isinstance(mix, Mapping):
                raise MixError("a mix file must hold a JSON object")
        base = _merge(base, mix)
    _validate(base)
    return base


def _kinds(mix: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in mix["kinds"].items() if not k.startswith("why")}


def _validate(mix: dict[str, Any]) -> None:
    kinds = _kinds(mix)
    if not kinds:
        raise MixError("the mix has no kinds")
    total = 0.0
    for name, kind in kinds.items():
        where = f"kinds.{name}"
        if not isinstance(kind, Mapping):
            raise MixError(f"{where} must be an object")
        share = kind.get("share")
        if isinstance(share, bool) or not isinstance(share, (int, float)) or share < 0:
            raise MixError(f"{where}.share must be a number >= 0, got {share!r}")
        total += share
        for key in ("behaviour", "to"):
            if key in kind and kind[key] not in BEHAVIOURS:
                raise MixError(f"{where}.{key} must be one of {', '.join(BEHAVIOURS)}, got {kind[key]!r}")
        if "behaviour" not in kind:
            raise MixError(f"{where}.behaviour is missing")
        contacts = kind.get("contacts", "useful")
        if isinstance(contacts, str):
            if contacts not in mix["contacts"] or contacts.startswith("why"):
                raise MixError(f"{where}.contacts names no range of section 'contacts': {contacts!r}")
        else:
            _range(f"{where}.contacts", contacts)
        for key in ("server_error", "challenge"):
            if key in kind:
                _range(f"{where}.{key}", kind[key])
    if not math.isclose(total, 1.0, abs_tol=1e-6):
        raise MixError(f"kind shares must add up to 1, they add up to {total:.6g}")
    for name, value in mix["contacts"].items():
        if not name.startswith("why"):
            _range(f"contacts.{name}", value)
    weights = mix["pages"]["weights"]
    if (
        not isinstance(weights, list)
        or not weights
        or any(isinstance(w, bool) or not isinstance(w, (int, float)) or w < 0 for w in weights)
        or sum(weights) <= 0
    ):
        raise MixError(f"pages.weights must be a list of weights >= 0 for 1, 2, ... pages, got {weights!r}")
    noise = mix["noise"]
    for key in (
        "timeout",
        "render_timeout",
        "server_error",
        "server_error_503",
        "render_passes_challenge",
        "render_passes_block",
        "head_404",
        "broken_url",
        "dns_outage",
        "dns_outage_nxdomain",
    ):
        _prob(f"noise.{key}", noise.get(key))
    _range("noise.soft_challenge", noise["soft_challenge"])
    lo, hi = mix["drift"]["rounds"]
    if not (isinstance(lo, int) and isinstance(hi, int) and 1 <= lo <= hi):
        raise MixError(f"drift.rounds must be [first, last] round numbers, got {mix['drift']['rounds']!r}")
    sub = mix["subdomains"]
    _prob("subdomains.share", sub["share"])
    _prob("subdomains.same_kind", sub["same_kind"])
    lo, hi = sub["size"]
    if not (isinstance(lo, int) and isinstance(hi, int) and 2 <= lo <= hi):
        raise MixError(f"subdomains.size must be [min, max] hosts with min >= 2, got {sub['size']!r}")
    for key in ("hours", "page_seconds"):
        value = mix["crawl"][key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise MixError(f"crawl.{key} must be a number >= 0, got {value!r}")
    # Failure reasons of one request are exclusive (timeout, then server error, then
    # challenge): their shares must fit in 1. A render's challenge share only clips.
    for name, kind in kinds.items():
        err = _range("", kind.get("server_error", noise["server_error"]))[1]
        soft = "soft" in (kind["behaviour"], kind.get("to"))
        challenge = _range("", kind.get("challenge", noise["soft_challenge"]))[1] if soft else 0.0
        if noise["timeout"] + err + challenge > 1.0 + 1e-9:
            raise MixError(f"kinds.{name}: timeout + server errors + challenges exceed 1")


class World:
    """The population: every site's kind and parameters, and the answer to any request.

    Sites are *hosts*; hosts of one group share a registered domain (and so, by
    default, one domain state). Nothing here depends on the policy or on the
    number of rounds, so every policy meets the same world.
    """

    def __init__(self, sites: int, seed: int, mix: Mapping[str, Any]) -> None:
        if sites < 1:
            raise ValueError("sites must be >= 1")
        self.sites = sites
        self.seed = seed
        self.mix = mix
        kinds = _kinds(mix)
        self.kind_names = list(kinds)
        noise = mix["noise"]
        self.timeout_thr = _thr(noise["timeout"])
        self.render_timeout_thr = _thr(noise["render_timeout"])
        self.render_fail_challenge_thr = _thr(1.0 - noise["render_passes_challenge"])
        self.render_fail_block_thr = _thr(1.0 - noise["render_passes_block"])
        self.outage_thr = _thr(noise["dns_outage"])
        self.outage_nx_thr = _thr(noise["dns_outage_nxdomain"])
        self.err503_thr = _thr(noise["server_error_503"])
        self.crawl_span = float(mix["crawl"]["hours"]) * 3600.0
        self.page_seconds = float(mix["crawl"]["page_seconds"])
        self._seed_key = _mix((seed * _GOLDEN + 0x5DEECE66D) & _M64)
        self._round_salts: list[int] = []

        # Kind table, as cumulative thresholds.
        cum, acc = [], 0.0
        total = sum(k["share"] for k in kinds.values())
        for k in kinds.values():
            acc += k["share"] / total
            cum.append(_thr(acc))
        cum[-1] = _FULL
        weights = mix["pages"]["weights"]
        pcum, acc = [], 0.0
        for w in weights:
            acc += w / sum(weights)
            pcum.append(_thr(acc))
        pcum[-1] = _FULL

        n = sites
        self.kind = kind_of = [0] * n
        self.before = [FRIENDLY] * n
        self.after = [FRIENDLY] * n
        self.change = [0] * n  # round (1-based) from which `after` applies; 0: never
        self.contact_thr = [0] * n
        self.error_thr = [0] * n
        self.challenge_thr = [0] * n
        self.head_404 = [False] * n
        self.dead_result = [DNS_NXDOMAIN] * n
        self.pages = [1] * n
        self.broken: list[int] = [0] * n  # bitmask of broken (404) pages; the root never is
        self.hash = [0] * n
        self.leader = list(range(n))

        sub = mix["subdomains"]
        lo, hi = sub["size"]
        mean = (lo + hi) / 2
        share = sub["share"]
        start_thr = _thr(share / (mean * (1 - share) + share)) if share < 1 else _FULL
        same_thr = _thr(sub["same_kind"])
        group_key = _mix(self._seed_key ^ 0xA0761D6478BD642F)
        i = 0
        self.groups: list[tuple[int, ...]] = []
        while i < n:
            h = _mix((group_key + (i + 1) * _GOLDEN) & _M64)
            size = 1
            if (h & 0xFFFF) < start_thr:
                size = min(lo + ((h >> 16) & 0xFFFF) % (hi - lo + 1), n - i)
            self.groups.append(tuple(range(i, i + size)))
            for j in range(i, i + size):
                self.leader[j] = i
            i += size

        drift_lo, drift_hi = mix["drift"]["rounds"]
        broken_thr = _thr(noise["broken_url"])
        head_404_thr = _thr(noise["head_404"])
        specs = []
        for k in kinds.values():
            contacts = k.get("contacts", "useful")
            c_lo, c_hi = _range("", mix["contacts"][contacts] if isinstance(contacts, str) else contacts)
            e_lo, e_hi = _range("", k.get("server_error", noise["server_error"]))
            s_lo, s_hi = _range("", k.get("challenge", noise["soft_challenge"]))
            before = BEHAVIOURS[k["behaviour"]]
            after = BEHAVIOURS[k.get("to", k["behaviour"])]
            specs.append((before, after, c_lo, c_hi, e_lo, e_hi, s_lo, s_hi, "to" in k))
        for i in range(n):
            h1 = _mix((self._seed_key + (i + 1) * _GOLDEN) & _M64)
            self.hash[i] = h1
            u = h1 & 0xFFFF
            kind = 0
            while u >= cum[kind]:
                kind += 1
            if self.leader[i] != i and ((h1 >> 48) & 0xFFFF) < same_thr:
                kind = kind_of[self.leader[i]]
            kind_of[i] = kind
            before, after, c_lo, c_hi, e_lo, e_hi, s_lo, s_hi, drifts = specs[kind]
            self.before[i], self.after[i] = before, after
            self.contact_thr[i] = _thr(_in_range(c_lo, c_hi, (h1 >> 16) & 0xFFFF))
            self.error_thr[i] = _thr(_in_range(e_lo, e_hi, (h1 >> 32) & 0xFFFF))
            h2 = _mix(h1 ^ 0xE7037ED1A0B428DB)
            self.challenge_thr[i] = _thr(_in_range(s_lo, s_hi, h2 & 0xFFFF))
            u = (h2 >> 16) & 0xFFFF
            pages = 0
            while u >= pcum[pages]:
                pages += 1
            self.pages[i] = pages + 1
            self.head_404[i] = ((h2 >> 32) & 0xFFFF) < head_404_thr
            self.dead_result[i] = _DEAD_RESULTS[(h2 >> 48) % len(_DEAD_RESULTS)]
            h3 = _mix(h2 ^ 0x8EBC6AF09C88C6E3)
            if drifts:
                self.change[i] = drift_lo + (h3 & 0xFFFF) % (drift_hi - drift_lo + 1)
            mask = 0
            for page in range(1, self.pages[i]):
                if (_mix((h3 + page * _GOLDEN) & _M64) & 0xFFFF) < broken_thr:
                    mask |= 1 << page
            self.broken[i] = mask

    def round_salt(self, rnd: int) -> int:
        while len(self._round_salts) <= rnd:
            n = len(self._round_salts) + 1
            self._round_salts.append(_mix((self._seed_key ^ (n * 0xD1B54A32D192ED03)) & _M64))
        return self._round_salts[rnd]

    def behaviour(self, host: int, rnd: int) -> int:
        """How a host answers in round ``rnd`` (0-based)."""
        change = self.change[host]
        return self.after[host] if change and rnd + 1 >= change else self.before[host]

    def domain_names(self, per_hostname: bool) -> list[str]:
        names = []
        for i in range(self.sites):
            lead = self.leader[i]
            if lead == i or not per_hostname:
                names.append(f"site{lead}.example")
            else:
                names.append(f"h{i - lead}.site{lead}.example")
        return names


# --------------------------------------------------------------- simulation


def _new_counts(n_kinds: int) -> dict[str, Any]:
    return {
        "policies": {p: dict.fromkeys(METRICS, 0) for p in POLICIES},
        "by_kind": {p: [[0, 0, 0] for _ in range(n_kinds)] for p in ("fallback", "domainstate", "oracle")},
        "decisions": {d.value: 0 for d in Decision},
        "states": {},
    }


def _make_store(kind: str, config: Config, policy: Policy) -> DomainStore:
    if kind == "memory":
        return MemoryStore(config, policy)
    from scrapy_domainstate.store.lmdb import LmdbStore

    return LmdbStore(config, policy)


def lmdb_available() -> bool:
    try:
        import scrapy_domainstate.store.lmdb  # noqa: F401
    except ImportError:
        return False
    return True


def parse_overrides(items: Iterable[str] | Mapping[str, Any] | None) -> dict[str, Any]:
    """``KEY=VALUE`` strings (or a mapping) as Scrapy-style settings; unknown names are an error."""
    if items is None:
        return {}
    pairs = items.items() if isinstance(items, Mapping) else (_split(item) for item in items)
    known = {s.name for s in SETTINGS}
    out = {}
    for key, value in pairs:
        name = key.strip().upper()
        if not name.startswith("DOMAINSTATE_"):
            name = "DOMAINSTATE_" + name
        if name not in known:
            raise ConfigError(f"--config-override: unknown setting {key!r}")
        out[name] = value
    return out


def _split(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--config-override takes KEY=VALUE, got {item!r}")
    return key, value


def simulate(
    *,
    sites: int = 220_000,
    rounds: int = 4,
    days_between: float = 7.0,
    seed: int = 1,
    mix: str | Path | Mapping[str, Any] | None = None,
    store: str | None = None,
    overrides: Iterable[str] | Mapping[str, Any] | None = None,
    progress: bool = False,
    lmdb_dir: str | Path | None = None,
) -> dict[str, Any]:
    """Run every policy over the same world; return the per-round and total counts.

    ``store``: ``"lmdb"``, ``"memory"`` or ``None`` (LMDB when the package has it).
    ``overrides``: DOMAINSTATE_* settings (``KEY=VALUE`` strings or a mapping)
    given to :meth:`Config.from_settings`, so they are validated as in a crawl.
    ``lmdb_dir``: where the LMDB store's temporary environment lives (default:
    ``/dev/shm`` when it exists, so the run measures the store's code, not the
    disk's fsync latency; the write path is the same).
    """
    if rounds < 1:
        raise ValueError("rounds must be >= 1")
    if days_between < 0:
        raise ValueError("days_between must be >= 0")
    started = time.perf_counter()
    cpu_started = time.process_time()
    mix_data = load_mix(mix)
    settings = parse_overrides(overrides)
    if store is None:
        store = "lmdb" if lmdb_available() else "memory"
    if store not in ("lmdb", "memory"):
        raise ValueError(f"store must be 'lmdb' or 'memory', got {store!r}")
    tmpdir = tempfile.mkdtemp(prefix="economy-", dir=_lmdb_parent(lmdb_dir)) if store == "lmdb" else None
    try:
        config = Config.from_settings(
            {
                **settings,
                "DOMAINSTATE_LMDB_PATH": str(Path(tmpdir) / "domainstate") if tmpdir else "domainstate",
                "DOMAINSTATE_STORE": (
                    "scrapy_domainstate.store.lmdb.LmdbStore"
                    if store == "lmdb"
                    else "scrapy_domainstate.store.memory.MemoryStore"
                ),
            }
        )
        world = World(sites, seed, mix_data)
        built = time.perf_counter()
        if progress:
            _say(f"economy: {sites:,} sites built in {built - started:.1f} s; store {store}")
        policy = Policy(config)
        domain_store = _make_store(store, config, policy)
        names = world.domain_names(config.per_hostname)
        per_round = []
        with domain_store:
            for rnd in range(rounds):
                t0 = time.perf_counter()
                per_round.append(_run_round(world, names, domain_store, config, rnd=rnd, days_between=days_between))
                if progress:
                    ds = per_round[-1]["policies"]["domainstate"]
                    _say(
                        f"economy: round {rnd + 1}/{rounds} done in {time.perf_counter() - t0:.1f} s"
                        f" (domainstate: {ds['requests']:,} requests, {ds['contacts']:,} contacts)"
                    )
            domain_store.flush()
            stored = domain_store.count()
    finally:
        if tmpdir:
            shutil.rmtree(tmpdir, ignore_errors=True)
    elapsed = time.perf_counter() - started
    result = _assemble(
        world,
        per_round=per_round,
        settings=settings,
        store=store,
        rounds=rounds,
        days_between=days_between,
        mix=mix,
        stored=stored,
    )
    cpu = time.process_time() - cpu_started
    result["runtime"] = {
        "seconds": round(elapsed, 2),
        "cpu_seconds": round(cpu, 2),
        "build_seconds": round(built - started, 2),
    }
    if progress:
        _say(f"economy: done in {elapsed:.1f} s ({cpu:.1f} s of CPU)")
    return result


def _lmdb_parent(lmdb_dir: str | Path | None) -> str | None:
    if lmdb_dir is not None:
        return str(lmdb_dir)
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _run_round(
    world: World, names: list[str], store: DomainStore, config: Config, *, rnd: int, days_between: float
) -> dict[str, Any]:
    """One crawl of every site by every policy. The hot loop: locals only."""
    counts = _new_counts(len(world.kind_names))
    by_kind = counts["by_kind"]
    bk_fb, bk_ds, bk_or = by_kind["fallback"], by_kind["domainstate"], by_kind["oracle"]
    decisions = dict.fromkeys(Decision, 0)
    states: dict[tuple[int, State], int] = {}
    losses: dict[tuple[Decision, State | str], int] = {}

    salt = world.round_salt(rnd)
    round_start = T0 + rnd * days_between * DAY
    span = world.crawl_span
    pace = world.page_seconds
    timeout_thr = world.timeout_thr
    rt_thr = world.render_timeout_thr
    rfail_chal = world.render_fail_challenge_thr
    rfail_block = world.render_fail_block_thr
    outage_thr, outage_nx_thr = world.outage_thr, world.outage_nx_thr
    err503 = world.err503_thr
    w_hash, w_kind = world.hash, world.kind
    w_before, w_after, w_change = world.before, world.after, world.change
    w_contact, w_error, w_chal = world.contact_thr, world.error_thr, world.challenge_thr
    w_head404, w_dead, w_pages, w_broken = world.head_404, world.dead_result, world.pages, world.broken
    reissue, transient = _REISSUE, _TRANSIENT
    results = _RESULTS

    decide = store.decide
    record = store.record
    url_dead_until = store.url_dead_until
    mark_url_dead = store.mark_url_dead
    url_dead_ttl = config.url_dead_ttl
    SKIP, PROBE, FTB, BROWSER = (
        Decision.SKIP,
        Decision.PROBE,
        Decision.FETCH_THEN_BROWSER,
        Decision.BROWSER,
    )
    HEAD, GET, TAB = Method.HEAD, Method.FETCH, Method.TAB
    OK_CONTACT, OK_EMPTY = Outcome.OK_CONTACT, Outcome.OK_EMPTY

    pl_req = pl_con = 0
    fb_req = fb_ren = fb_con = 0
    br_req = br_con = 0
    or_req = or_ren = or_con = 0
    ds_req = ds_ren = ds_head = ds_con = 0
    lost_pl = lost_br = lost_ds = lost_or = 0
    gain_pl = gain_br = gain_ds = gain_or = 0

    for group in world.groups:
        lead = group[0]
        h_lead = _mix(w_hash[lead] ^ salt)
        outage = None
        if ((h_lead >> 32) & 0xFFFF) < outage_thr:
            outage = DNS_NXDOMAIN if ((h_lead >> 48) & 0xFFFF) < outage_nx_thr else DNS_TEMPORARY
        now = round_start + span * (h_lead & 0xFFFF) / _FULL
        for host in group:
            kind = w_kind[host]
            change = w_change[host]
            beh = w_after[host] if change and rnd + 1 >= change else w_before[host]
            cthr = w_contact[host]
            ethr = w_error[host]
            chal = w_chal[host]
            h_round = h_lead if host == lead else _mix(w_hash[host] ^ salt)
            broken = w_broken[host]
            domain = names[host]
            oracle_skip = beh == DEAD or cthr == 0
            oracle_render = beh in (WALL, BLOCK, SHELL)
            first = True
            k_fb = bk_fb[kind]
            k_ds = bk_ds[kind]
            k_or = bk_or[kind]
            for page in range(w_pages[host]):
                hp = _mix((h_round + (page + 1) * _GOLDEN) & _M64)
                contact = (hp & 0xFFFF) < cthr
                g = (hp >> 32) & 0xFFFF
                b = hp >> 48
                # -- what a GET and a render get (a HEAD is drawn only when one is sent)
                if outage is not None:
                    get = tab = outage
                elif beh == DEAD:
                    get = tab = w_dead[host]
                elif broken >> page & 1:
                    get = tab = URL_404
                else:
                    if g < timeout_thr:
                        get = TIMEOUT
                    elif g < timeout_thr + ethr:
                        get = SERVER_ERROR if g & 0xFF < err503 >> 8 else SERVER_ERROR_500
                    elif beh == FRIENDLY:
                        get = OK
                    elif beh == SOFT:
                        get = CHALLENGE if g < timeout_thr + ethr + chal else OK
                    elif beh == WALL:
                        get = CHALLENGE
                    elif beh == BLOCK:
                        get = BLOCKED
                    else:
                        get = JS_SHELL
                    if b < rt_thr:
                        tab = TIMEOUT
                    elif b < rt_thr + ethr:
                        tab = SERVER_ERROR if b & 0xFF < err503 >> 8 else SERVER_ERROR_500
                    elif beh in (SOFT, WALL):
                        tab = CHALLENGE if b < rt_thr + ethr + rfail_chal else OK
                    elif beh == BLOCK:
                        tab = BLOCKED if b < rt_thr + ethr + rfail_block else OK
                    else:
                        tab = OK
                got_get = contact and get == OK
                got_tab = contact and tab == OK

                # -- plain fetch
                pl_req += 1
                pl_con += got_get
                # -- fetch with a browser fallback on every failure
                fb_c = got_get
                if get == OK:
                    fb_req += 1
                    k_fb[0] += 1
                else:
                    fb_req += 2
                    fb_ren += 1
                    fb_c = got_tab
                    k_fb[0] += 2
                    k_fb[1] += 1
                fb_con += fb_c
                k_fb[2] += fb_c
                # -- browser for everything
                br_req += 1
                br_con += got_tab
                # -- oracle
                or_c = False
                if oracle_skip or broken >> page & 1:
                    pass
                elif oracle_render:
                    or_req += 1
                    or_ren += 1
                    or_c = got_tab
                    k_or[0] += 1
                    k_or[1] += 1
                elif transient[get]:
                    or_req += 2
                    or_ren += 1
                    or_c = got_tab
                    k_or[0] += 2
                    k_or[1] += 1
                else:
                    or_req += 1
                    or_c = got_get
                    k_or[0] += 1
                or_con += or_c
                k_or[2] += or_c

                # -- scrapy-domainstate: the middleware's path (manager.py) through the real store
                ds_c = False
                req0, ren0 = ds_req, ds_ren
                fp = f"{host}/{page}" if page and broken else None
                until = url_dead_until(fp) if fp else None
                if until is not None and until > now:
                    decisions[SKIP] += 1
                    decision, state = SKIP, "url-dead"
                else:
                    decision, state, _ = decide(domain, now)
                    decisions[decision] += 1
                    if first:
                        first = False
                        key = (kind, state)
                        states[key] = states.get(key, 0) + 1
                    if decision is PROBE:
                        # One HEAD to this URL, recorded; then the request goes as the verdict says.
                        if outage is not None:
                            head = outage
                        elif beh == DEAD:
                            head = w_dead[host]
                        else:
                            hh = (hp >> 16) & 0xFFFF
                            if hh < timeout_thr:
                                head = TIMEOUT
                            elif beh == WALL or (beh == SOFT and hh < timeout_thr + chal):
                                head = CHALLENGE
                            elif beh == BLOCK:
                                head = BLOCKED
                            elif page == 0 and w_head404[host]:
                                head = ROOT_404  # a HEAD-shy server: 404 on the root, GET works
                            else:
                                head = NO_VERDICT
                        ds_req += 1
                        ds_head += 1
                        res = results[head]
                        record(domain, RecentEntry(now, HEAD, res[0], res[1], res[2]))
                        decision, state, _ = decide(domain, now)
                        if decision is PROBE:  # no verdict stamped: the middleware goes on as unknown
                            decision = FTB
                    if decision is not SKIP:
                        ds_req += 1
                        if decision is BROWSER:
                            ds_ren += 1
                            got, ds_c, method, at = tab, got_tab, TAB, now + 1.0
                        else:
                            got, ds_c, method, at = get, got_get, GET, now + 0.5
                        res = results[got]
                        outcome = res[0] or (OK_CONTACT if contact else OK_EMPTY)
                        if not ((got == JS_SHELL and decision is FTB) or got == URL_404):
                            # not evidence (manager.py): a shell the browser will render, and a
                            # 404 off the root (only that URL is dead, the domain is untouched)
                            record(domain, RecentEntry(at, method, outcome, res[1], res[2]))
                        if got == URL_404 and method is GET:
                            mark_url_dead(fp, now + url_dead_ttl)
                        elif decision is FTB and reissue[got]:
                            ds_req += 1
                            ds_ren += 1
                            res = results[tab]
                            outcome = res[0] or (OK_CONTACT if contact else OK_EMPTY)
                            record(domain, RecentEntry(now + 1.0, TAB, outcome, res[1], res[2]))
                            ds_c = got_tab
                ds_con += ds_c
                k_ds[0] += ds_req - req0
                k_ds[1] += ds_ren - ren0
                k_ds[2] += ds_c

                lost_pl += fb_c > got_get
                gain_pl += got_get > fb_c
                lost_br += fb_c > got_tab
                gain_br += got_tab > fb_c
                if fb_c > ds_c:
                    lost_ds += 1
                    why = (decision, state)
                    losses[why] = losses.get(why, 0) + 1
                gain_ds += ds_c > fb_c
                lost_or += fb_c > or_c
                gain_or += or_c > fb_c
                now += pace

    pol = counts["policies"]
    pol["plain"].update(requests=pl_req, contacts=pl_con, lost=lost_pl, gained=gain_pl)
    pol["fallback"].update(requests=fb_req, renders=fb_ren, contacts=fb_con)
    pol["browser"].update(requests=br_req, renders=br_req, contacts=br_con, lost=lost_br, gained=gain_br)
    pol["domainstate"].update(
        requests=ds_req, renders=ds_ren, heads=ds_head, contacts=ds_con, lost=lost_ds, gained=gain_ds
    )
    pol["oracle"].update(requests=or_req, renders=or_ren, contacts=or_con, lost=lost_or, gained=gain_or)
    counts["decisions"] = {d.value: n for d, n in decisions.items()}
    counts["states"] = {f"{world.kind_names[k]}|{s.value}": n for (k, s), n in sorted(states.items())}
    counts["losses"] = {f"{d.value}|{s}": n for (d, s), n in sorted(losses.items(), key=lambda kv: -kv[1])}
    return counts


# ------------------------------------------------------------------ report


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def _with_ratios(row: dict[str, int]) -> dict[str, Any]:
    out: dict[str, Any] = dict(row)
    out["requests_per_contact"] = _ratio(row["requests"], row["contacts"])
    out["renders_per_contact"] = _ratio(row["renders"], row["contacts"])
    return out


def _assemble(
    world: World,
    *,
    per_round: list[dict[str, Any]],
    settings: Mapping[str, Any],
    store: str,
    rounds: int,
    days_between: float,
    mix: Any,
    stored: int,
) -> dict[str, Any]:
    total = {p: dict.fromkeys(METRICS, 0) for p in POLICIES}
    for r in per_round:
        for p in POLICIES:
            for m in METRICS:
                total[p][m] += r["policies"][p][m]
    population: dict[str, int] = dict.fromkeys(world.kind_names, 0)
    for k in world.kind:
        population[world.kind_names[k]] += 1
    rows = [{p: _with_ratios(r["policies"][p]) for p in POLICIES} for r in per_round]
    by_kind = [
        {
            p: {
                world.kind_names[k]: dict(zip(("requests", "renders", "contacts"), v, strict=True))
                for k, v in enumerate(table)
            }
            for p, table in r["by_kind"].items()
        }
        for r in per_round
    ]
    result = {
        "params": {
            "sites": world.sites,
            "registered_domains": len(world.groups),
            "rounds": rounds,
            "days_between": days_between,
            "seed": world.seed,
            "mix": str(mix) if isinstance(mix, (str, Path)) else ("default" if mix is None else "custom"),
            "store": store,
            "overrides": {
                k: v if isinstance(v, (int, float, bool)) or v is None else str(v) for k, v in settings.items()
            },
            "stored_domains": stored,
        },
        "population": population,
        "rounds": rows,
        "total": {p: _with_ratios(total[p]) for p in POLICIES},
        "by_kind": by_kind,
        "decisions": [r["decisions"] for r in per_round],
        "states": [r["states"] for r in per_round],
        "losses": [r["losses"] for r in per_round],
    }
    result["targets"] = evaluate_targets(result)
    return result


def evaluate_targets(result: Mapping[str, Any], first_round: int = 2) -> list[dict[str, Any]]:
    """The issue's targets for scrapy-domainstate, per round from ``first_round`` (1-based) on.

    A target is met when it holds in every one of those rounds (and there is at least one).
    """
    rows = result["rounds"]
    out = []
    for key, label, limit in TARGETS:
        values = []
        for i in range(first_round - 1, len(rows)):
            ds, fb, oracle = rows[i]["domainstate"], rows[i]["fallback"], rows[i]["oracle"]
            if key == "cost":
                mine, best = ds["requests_per_contact"], oracle["requests_per_contact"]
                value = None if mine is None or not best else mine / best
            else:
                value = _ratio(ds[key], fb[key])
                if value is None:  # nothing to compare with: zero of zero meets a cap, not a floor
                    value = 1.0 if key == "contacts" else 0.0
            values.append(value)
        if key == "contacts":
            met = bool(values) and all(v is not None and v >= limit for v in values)
        else:
            met = bool(values) and all(v is not None and v <= limit for v in values)
        out.append(
            {
                "target": key,
                "label": label,
                "limit": limit,
                "rounds": list(range(first_round, len(rows) + 1)),
                "values": values,
                "met": met,
            }
        )
    return out


def _fmt_ratio(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _table(result: Mapping[str, Any]) -> list[str]:
    head = ("round", "policy", "requests", "renders", "contacts", "req/contact", "renders/contact", "lost")
    lines = []
    body = []
    labelled = [(str(i + 1), row) for i, row in enumerate(result["rounds"])] + [("total", result["total"])]
    for label, row in labelled:
        name = label
        for p in POLICIES:
            r = row[p]
            body.append(
                (
                    name,
                    LABELS[p],
                    f"{r['requests']:,}",
                    f"{r['renders']:,}",
                    f"{r['contacts']:,}",
                    _fmt_ratio(r["requests_per_contact"]),
                    _fmt_ratio(r["renders_per_contact"]),
                    f"{r['lost']:,}",
                )
            )
            name = ""
        body.append(None)
    widths = [max(len(head[i]), *(len(b[i]) for b in body if b)) for i in range(len(head))]

    def fmt(cells: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    lines.append(fmt(head))
    lines.append("  ".join("-" * w for w in widths))
    for b in body[:-1]:
        lines.append("" if b is None else fmt(b))
    return lines


def format_report(result: Mapping[str, Any], by_kind: bool = False) -> str:
    """The table and the targets, as plain text."""
    p = result["params"]
    overrides = ", ".join(f"{k}={v}" for k, v in p["overrides"].items()) or "plugin defaults"
    lines = [
        f"Crawl economy: {p['sites']:,} sites ({p['registered_domains']:,} registered domains), "
        f"{p['rounds']} rounds {p['days_between']:g} days apart, seed {p['seed']}, mix {p['mix']}, "
        f"store {p['store']}, {overrides}",
        "requests: HEAD + GET + browser renders (a render is also a request); "
        "lost: contacts fetch+fallback finds and the policy does not",
        "",
        *_table(result),
        "",
    ]
    if len(result["rounds"]) >= 2:
        lines.append("Targets for scrapy-domainstate, every round from round 2 on:")
        for t in result["targets"]:
            values = ", ".join(
                f"r{r} {'-' if v is None else (f'{v:.1%}' if t['target'] != 'cost' else f'{v:.2f}x')}"
                for r, v in zip(t["rounds"], t["values"], strict=True)
            )
            lines.append(f"  [{'met' if t['met'] else 'MISSED'}] {t['label']}: {values}")
    else:
        lines.append("Targets need at least 2 rounds.")
    if "runtime" in result:
        lines.append("")
        rt = result["runtime"]
        lines.append(f"Simulated in {rt['seconds']:.1f} s ({rt['cpu_seconds']:.1f} s of CPU, one core).")
    if by_kind:
        lines.append("")
        lines.extend(_kind_table(result))
    return "\n".join(lines)


def _kind_table(result: Mapping[str, Any]) -> list[str]:
    """Per true kind: scrapy-domainstate's requests, renders and contacts next to the oracle's and fallback's."""
    lines = ["Per kind (requests / renders / contacts): fetch+fallback | scrapy-domainstate | oracle"]
    pop = result["population"]
    for i, row in enumerate(result["by_kind"]):
        lines.append(f"round {i + 1}")
        for kind, n in pop.items():
            cells = []
            for p in ("fallback", "domainstate", "oracle"):
                c = row[p][kind]
                cells.append(f"{c['requests']:>9,} {c['renders']:>8,} {c['contacts']:>8,}")
            lines.append(f"  {kind:<14} {n:>7,}  " + " | ".join(cells))
        states = result["states"][i]
        lines.append(
            "  state at a site's first request (kind|state: sites): "
            + ", ".join(f"{k}: {v:,}" for k, v in states.items())
        )
        losses = result["losses"][i]
        lines.append(
            "  scrapy-domainstate's lost pages by decision|state: "
            + (", ".join(f"{k}: {v:,}" for k, v in losses.items()) or "none")
        )
    return lines


def write_chart(result: Mapping[str, Any], path: str | Path) -> bool:
    """Requests, renders and contacts per policy per round, as a PNG. False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = result["rounds"]
    n = len(rows)
    colors = {
        "plain": "#9e9e9e",
        "fallback": "#e69f00",
        "browser": "#d55e00",
        "domainstate": "#0072b2",
        "oracle": "#009e73",
    }
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.6), constrained_layout=True)
    width = 0.8 / len(POLICIES)
    ds_at = POLICIES.index("domainstate")
    panels = (("requests", "Requests sent"), ("renders", "Browser renders"), ("contacts", "Pages with contacts found"))
    for ax, (metric, title) in zip(axes, panels, strict=True):
        top = max(rows[i][p][metric] for i in range(n) for p in POLICIES) / 1000 or 1.0
        for j, p in enumerate(POLICIES):
            xs = [i + (j - (len(POLICIES) - 1) / 2) * width for i in range(n)]
            ys = [rows[i][p][metric] / 1000 for i in range(n)]
            ax.bar(xs, ys, width, label=LABELS[p], color=colors[p])
            if j == ds_at:  # scrapy-domainstate as a share of fetch+fallback
                for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
                    base = rows[i]["fallback"][metric]
                    if base:
                        share = rows[i]["domainstate"][metric] / base
                        ax.text(x, y + top * 0.01, f"{share:.0%}", ha="center", va="bottom", fontsize=7)
        ax.set_title(title)
        ax.set_xticks(range(n), [f"round {i + 1}" for i in range(n)])
        ax.set_ylabel("thousands")
        ax.set_ylim(0, top * 1.08)
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(POLICIES), fontsize=9, frameon=False)
    prm = result["params"]
    settings = ", ".join(f"{k.removeprefix('DOMAINSTATE_')}={v}" for k, v in prm["overrides"].items())
    fig.suptitle(
        f"Crawl economy: {prm['sites']:,} sites, {prm['rounds']} crawls {prm['days_between']:g} days apart, "
        f"seed {prm['seed']}, {settings or 'scrapy-domainstate defaults'}"
        "\n(% over the scrapy-domainstate bars: its share of fetch + fallback's)",
        fontsize=10,
    )
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# --------------------------------------------------------------------- CLI


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python benchmarks/economy.py",
        description="Simulate repeated crawls of a synthetic population and compare what each policy costs and finds.",
    )
    parser.add_argument("--sites", type=int, default=220_000, help="sites (hosts) in the population (220000)")
    parser.add_argument("--rounds", type=int, default=4, help="crawls of the whole population (4)")
    parser.add_argument("--days-between", type=float, default=7.0, help="days between two crawls (7)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the world (1)")
    parser.add_argument("--mix", default=None, help=f"mix file (default {DEFAULT_MIX_PATH.name})")
    parser.add_argument(
        "--store",
        choices=("lmdb", "memory"),
        default=None,
        help="scrapy-domainstate's store (default: lmdb, the plugin's default, when available)",
    )
    parser.add_argument(
        "--lmdb-dir",
        default=None,
        help="parent directory of the LMDB store's temporary environment (default: /dev/shm when present)",
    )
    parser.add_argument("--chart", default=None, help="write a PNG chart here (needs matplotlib)")
    parser.add_argument("--json", default=None, help="write the full result as JSON here")
    parser.add_argument(
        "--config-override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a DOMAINSTATE_* setting for scrapy-domainstate, as in a crawl (repeatable)",
    )
    parser.add_argument("--by-kind", action="store_true", help="also print a per-kind breakdown")
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress on stderr (default: when stderr is a terminal)",
    )
    args = parser.parse_args(argv)
    progress = sys.stderr.isatty() if args.progress is None else args.progress
    store = args.store
    if store is None and not lmdb_available():
        store = "memory"
        _say("economy: scrapy_domainstate.store.lmdb is not available: using the memory store")
    try:
        result = simulate(
            sites=args.sites,
            rounds=args.rounds,
            days_between=args.days_between,
            seed=args.seed,
            mix=args.mix,
            store=store,
            overrides=args.config_override,
            progress=progress,
            lmdb_dir=args.lmdb_dir,
        )
    except (ConfigError, MixError, ValueError) as exc:
        parser.error(str(exc))
    print(format_report(result, by_kind=args.by_kind))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    if args.chart:
        if write_chart(result, args.chart):
            _say(f"economy: chart written to {args.chart}")
        else:
            _say("economy: matplotlib is not installed, no chart (pip install 'scrapy-domainstate[chart]')")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
