"""Rounds of crawls of the whole population by every policy, and their counts."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from scrapy_domainstate.core.config import SETTINGS, Config, ConfigError
from scrapy_domainstate.core.policy import Policy
from scrapy_domainstate.store.base import DomainStore
from scrapy_domainstate.store.memory import MemoryStore

from . import baselines
from . import world as w
from .answers import Judge
from .mix import load_mix
from .plugin import PluginVisit
from .report import BY_KIND, METRICS, POLICIES, assemble

__all__ = ["METRICS", "POLICIES", "T0", "lmdb_available", "parse_overrides", "simulate"]

DAY = 86400.0
#: The simulated clock starts here (2026-01-01 UTC): a real epoch, since the store
#: treats 0 as "never" (``probed_at``, ``first_seen``).
T0 = 1_767_225_600.0


def lmdb_available() -> bool:
    try:
        import scrapy_domainstate.store.lmdb  # noqa: F401
    except ImportError:
        return False
    return True


def _split(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--config-override takes KEY=VALUE, got {item!r}")
    return key, value


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


class _Round:
    """The counts of one round, filled visit by visit."""

    def __init__(self, n_kinds: int) -> None:
        #: per policy: requests, robots, renders, contacts, sites, lost, gained
        self.rows = [[0] * 7 for _ in POLICIES]
        self.heads = 0
        #: per policy of BY_KIND, per kind: requests, renders, contacts, sites
        self.kinds = [[[0, 0, 0, 0] for _ in range(n_kinds)] if p in BY_KIND else None for p in POLICIES]
        self.decisions: dict[Any, int] = {}
        self.states: dict[tuple[int, Any], int] = {}
        self.losses: dict[tuple[int, Any, Any], int] = {}
        #: pages whose contacts the fixable fallback finds and the plugin does not, by kind, decision, state
        self.fixable_losses: dict[tuple[int, Any, Any], int] = {}

    def add(self, kind: int, visits: tuple[tuple[int, int, int], ...], ref: int, robots: bool) -> None:
        """One host visit of every policy (``found`` and ``ref``: a bit per page with contacts found)."""
        for (requests, renders, found), row, table in zip(visits, self.rows, self.kinds, strict=True):
            sent = requests + (robots and requests > 0)
            contacts = found.bit_count()
            row[0] += sent
            row[1] += sent - requests
            row[2] += renders
            row[3] += contacts
            row[4] += found != 0
            if found != ref:
                row[5] += (ref & ~found).bit_count()
                row[6] += (found & ~ref).bit_count()
            if table is not None:
                cell = table[kind]
                cell[0] += sent
                cell[1] += renders
                cell[2] += contacts
                cell[3] += found != 0

    @property
    def policies(self) -> dict[str, dict[str, int]]:
        out = {}
        for p, row in zip(POLICIES, self.rows, strict=True):
            requests, robots, renders, contacts, sites, lost, gained = row
            out[p] = {
                "requests": requests,
                "renders": renders,
                "heads": self.heads if p == "domainstate" else 0,
                "robots": robots,
                "contacts": contacts,
                "sites": sites,
                "lost": lost,
                "gained": gained,
            }
        return out

    @property
    def by_kind(self) -> dict[str, list[list[int]]]:
        return {p: t for p, t in zip(POLICIES, self.kinds, strict=True) if t is not None}

    def plugin_detail(self, kind: int, why: list, ref: int, fixable: int, found: int) -> None:
        decisions = self.decisions
        for decision, _ in why:
            decisions[decision] = decisions.get(decision, 0) + 1
        first = (kind, why[0][1])
        self.states[first] = self.states.get(first, 0) + 1
        for mask, losses in ((ref & ~found, self.losses), (fixable & ~found, self.fixable_losses)):
            for i, key in enumerate(why):
                if mask >> i & 1:
                    losses[(kind, *key)] = losses.get((kind, *key), 0) + 1


class _Crawl:
    """Everything a round needs: the world, the plugin's store, the baselines' judge."""

    def __init__(self, world: w.World, store: DomainStore, config: Config) -> None:
        self.world = world
        self.judge = Judge()
        self.reissued = self.judge.reissued()
        names, hosts = world.domain_names(config.per_hostname)
        self.plugin = PluginVisit(store, config, self.judge, names, hosts, world.concurrency, world.nav, world)
        contact = world.contact_thr
        self.contactless = [contact[i] == 0 and world.contact_page_thr[i] == 0 for i in range(world.sites)]

    def round(self, rnd: int, days_between: float) -> _Round:
        world = self.world
        counts = _Round(len(world.kind_names))
        start = T0 + rnd * days_between * DAY
        salt = world.round_salt(rnd)
        self.plugin.start_round(start)
        for group in world.groups:
            now, outage, h_lead = world.visit_start(group[0], rnd, start)
            for host in group:
                h_round = h_lead if host == group[0] else w.mix64(world.hash[host] ^ salt)
                pages = world.visit(host, rnd, outage, h_round)
                self._account(counts, host, rnd, pages, now)
                now += world.page_seconds * len(pages)
        self.plugin.end_round(start + world.crawl_span)
        return counts

    def _account(self, counts: _Round, host: int, rnd: int, pages: list[w.Page], now: float) -> None:
        world, plugin = self.world, self.plugin
        kind = world.kind[host]
        # plain, fixable and browser send at full speed (a rate-limited host 429s past its burst);
        # the plugin's slot follows its politeness; the oracle and fetch + fallback (the reference
        # of what can be found) pace
        fast, retries, discover = world.at_full_speed(host, pages), world.retries, world.discover
        ref = baselines.fallback(pages, retries, discover)
        found = plugin.visit(host, pages, now, world.page_seconds)
        visits = (  # in POLICIES order
            baselines.plain(fast, retries, discover),
            ref,
            baselines.fixable(fast, self.reissued, retries, discover),
            baselines.browser(fast, retries, discover),
            # (a cold domain's robots.txt is sent, with the contact-page rule, even when none of its
            # pages is: the plugin lets it through before it knows the URLs)
            (plugin.requests + (world.robots and plugin.robots_only and not plugin.requests), plugin.renders, found),
            (0, 0, 0)
            if world.down_now
            else baselines.oracle(pages, world.behaviour(host, rnd), self.contactless[host], discover),
        )
        counts.add(kind, visits, ref[2], world.robots)
        counts.heads += plugin.heads
        counts.plugin_detail(kind, plugin.why, ref[2], visits[2][2], found)


def _make_store(kind: str, config: Config, policy: Policy) -> DomainStore:
    if kind == "memory":
        return MemoryStore(config, policy)
    from scrapy_domainstate.store.lmdb import LmdbStore

    return LmdbStore(config, policy)


def _lmdb_parent(lmdb_dir: str | Path | None) -> str | None:
    if lmdb_dir is not None:
        return str(lmdb_dir)
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def _config(settings: Mapping[str, Any], store: str, tmpdir: str | None) -> Config:
    return Config.from_settings(
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


def _say(message: str) -> None:
    import sys

    print(message, file=sys.stderr, flush=True)


def _rounds(
    world: w.World, config: Config, store: str, rounds: int, days_between: float, progress: bool
) -> tuple[list[_Round], int, dict[str, int]]:
    domain_store = _make_store(store, config, Policy(config))
    crawl = _Crawl(world, domain_store, config)
    per_round = []
    with domain_store:
        for rnd in range(rounds):
            t0 = time.perf_counter()
            per_round.append(crawl.round(rnd, days_between))
            if progress:
                ds = per_round[-1].policies["domainstate"]
                _say(
                    f"economy: round {rnd + 1}/{rounds} done in {time.perf_counter() - t0:.1f} s"
                    f" (domainstate: {ds['requests']:,} requests, {ds['contacts']:,} contacts)"
                )
        domain_store.flush()
        plugin = crawl.plugin
        stored = domain_store.count() - len(plugin.manners.kept)
    manners = {
        "polite_records": len(plugin.manners.kept),
        "burst_429s": plugin.limited,
        "slowed_slots": plugin.manners.slowed,
        "paused_hosts": plugin.manners.paused_hosts,
    }
    return per_round, stored, manners


def simulate(
    *,
    sites: int | None = None,
    rounds: int | None = None,
    days_between: float | None = None,
    seed: int = 1,
    mix: str | Path | Mapping[str, Any] | None = None,
    store: str | None = None,
    overrides: Iterable[str] | Mapping[str, Any] | None = None,
    progress: bool = False,
    lmdb_dir: str | Path | None = None,
    render_cost: float = 10.0,
    outcome: str | None = None,
    noise: Mapping[str, float] | None = None,
    head_cost: float = 1.0,
) -> dict[str, Any]:
    """Run every policy over the same world; return the per-round and total counts.

    ``sites``, ``rounds``, ``days_between``: default to the mix's ``cadence``.
    ``store``: ``"lmdb"``, ``"memory"`` or ``None`` (LMDB when the package has it).
    ``overrides``: DOMAINSTATE_* settings given to :meth:`Config.from_settings`, so they are
    validated as in a crawl. ``render_cost``: what a render costs in GETs (the weighted cost).
    ``outcome``: ``"contacts"`` or ``"items"`` (default: the mix's ``crawl.outcome``, else
    contacts); under items a site's navigation pages are recorded as ``navigation``.
    ``noise``: values that replace the mix's ``noise`` entries (the sensitivity runs).
    ``head_cost``: what a HEAD costs in GETs (the weighted cost).
    """
    started, cpu_started = time.perf_counter(), time.process_time()
    mix_data = load_mix(mix)
    if noise:
        unknown = set(noise) - set(mix_data["noise"])
        if unknown:
            raise ValueError(f"--noise: unknown noise entries {sorted(unknown)}; known: {sorted(mix_data['noise'])}")
        mix_data = {**mix_data, "noise": {**mix_data["noise"], **noise}}
    cadence = mix_data["cadence"]
    sites = cadence["sites"] if sites is None else sites
    rounds = cadence["rounds"] if rounds is None else rounds
    days_between = float(cadence["days_between"] if days_between is None else days_between)
    if rounds < 1:
        raise ValueError("rounds must be >= 1")
    if days_between < 0:
        raise ValueError("days_between must be >= 0")
    if not 0 <= head_cost <= 1:
        raise ValueError("head_cost must be between 0 and 1 (a HEAD costs at most a GET)")
    if render_cost < 1:
        raise ValueError("render_cost must be >= 1 (a render is at least a request)")
    settings = parse_overrides(overrides)
    outcome = outcome or str(mix_data["crawl"].get("outcome", "contacts"))
    if outcome not in ("contacts", "items"):
        raise ValueError(f"outcome must be 'contacts' or 'items', got {outcome!r}")

    store = store or ("lmdb" if lmdb_available() else "memory")
    if store not in ("lmdb", "memory"):
        raise ValueError(f"store must be 'lmdb' or 'memory', got {store!r}")
    tmpdir = tempfile.mkdtemp(prefix="economy-", dir=_lmdb_parent(lmdb_dir)) if store == "lmdb" else None
    try:
        config = _config({"DOMAINSTATE_OUTCOME": outcome, **settings}, store, tmpdir)
        world = w.World(sites, seed, mix_data)
        built = time.perf_counter()
        if progress:
            _say(f"economy: {sites:,} sites built in {built - started:.1f} s; store {store}")
        per_round, stored, manners = _rounds(world, config, store, rounds, days_between, progress)
    finally:
        if tmpdir:
            shutil.rmtree(tmpdir, ignore_errors=True)
    params = {
        "sites": world.sites,
        "registered_domains": len(world.groups),
        "rounds": rounds,
        "days_between": days_between,
        "seed": seed,
        "mix": str(mix) if isinstance(mix, (str, Path)) else ("default" if mix is None else "custom"),
        "store": store,
        "render_cost": render_cost,
        "head_cost": head_cost,
        "outcome": outcome,
        "noise": dict(noise or {}),
        "concurrency": world.concurrency,
        "robotstxt_obey": world.robots,
        "overrides": {k: v if isinstance(v, (int, float, bool)) or v is None else str(v) for k, v in settings.items()},
        "stored_domains": stored,
        "manners": manners,
        # hosts dead by the last round (a decayed list is judged against 0.90x the fixable fallback)
        "dead_share": round(
            sum(world.behaviour(h, rounds - 1) in (w.DEAD, w.PARKED_SITE) for h in range(world.sites)) / world.sites, 4
        ),
        "discovery": "root" if world.discover else "list",
    }
    result = assemble(world.kind_names, world.kind, per_round, params)
    elapsed = time.perf_counter() - started
    result["runtime"] = {
        "seconds": round(elapsed, 2),
        "cpu_seconds": round(time.process_time() - cpu_started, 2),
        "build_seconds": round(built - started, 2),
    }
    if progress:
        _say(f"economy: done in {elapsed:.1f} s ({result['runtime']['cpu_seconds']:.1f} s of CPU)")
    return result
