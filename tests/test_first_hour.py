"""What a new user meets in the first hour (issue 15): the Python API, the start-up and
close lines, stats that add up, the exit status when the store cannot open, and requests
re-checked when they leave the slot queue.

Real parts throughout: Scrapy's engine, the loopback sites, real LMDB files, and ``scrapy
crawl`` run as a subprocess where the exit status is the point.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted

import scrapy_domainstate
from scrapy_domainstate import open_store
from scrapy_domainstate.config import Config
from scrapy_domainstate.policy import Decision
from scrapy_domainstate.record import DomainStat, State
from scrapy_domainstate.store import StoreError
from scrapy_domainstate.store.lmdb import LmdbStore

ADDON = {"scrapy_domainstate.Addon": 0}


def ds(settings: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {**settings, "ADDONS": ADDON, **extra}


def pages(sites: Any, host: str, n: int) -> list[str]:
    paths = ["/", "/page1", "/page2", "/contact"]
    return [sites.url(host, paths[i % len(paths)]) for i in range(n)]


# ------------------------------------------------------------------ open_store


@pytest_twisted.ensureDeferred
async def test_open_store_reads_what_a_crawl_learned(sites: Any, crawl_settings: Any, run_crawl: Any) -> None:
    settings = ds(crawl_settings)
    urls = [*pages(sites, "friendly.test", 6), *pages(sites, "cold.test", 6), sites.url("dead-root.test")]
    urls.append(sites.url("friendly.test", "/missing"))  # a 404 off the root: a dead URL
    await run_crawl(settings, urls)
    path = crawl_settings["DOMAINSTATE_LMDB_PATH"]

    assert "open_store" in scrapy_domainstate.__all__
    with open_store(path) as store:  # a plain path, read-only by default
        assert store.readonly
        assert len(store) == 3
        assert repr(store).startswith("<StoreHandle lmdb:")
        friendly = store.get("friendly.test")
        assert isinstance(friendly, DomainStat)
        assert friendly.state is State.FRIENDLY
        # A URL or a host: the same key as in a crawl.
        assert store.get(sites.url("friendly.test", "/contact")) == friendly
        assert store.key("https://www.Friendly.test:8443/x") == "friendly.test"
        assert store.get("never-seen.test") is None
        assert "cold.test" in store and "never-seen.test" not in store

        cold = store.decide(sites.url("cold.test", "/page1"))
        assert (cold.domain, cold.state, cold.decision, cold.skip) == ("cold.test", State.COLD, Decision.SKIP, True)
        assert cold.reason == "domain cold.test is cold"
        assert cold.expires_at is not None and cold.expires_at > time.time() + 80 * 86400
        assert store.decide(sites.url("friendly.test", "/page1")).decision is Decision.FETCH
        dead_url = store.decide(sites.url("friendly.test", "/missing"))
        assert (dead_url.decision, dead_url.reason) == (Decision.SKIP, "dead URL")
        fresh = store.decide("https://never-seen.test/")
        assert (fresh.state, fresh.decision) == (State.UNKNOWN, Decision.PROBE)

        items = dict(store.items())
        assert {d: s.state for d, s in items.items()} == {
            "friendly.test": State.FRIENDLY,
            "cold.test": State.COLD,
            "dead-root.test": State.DEAD,
        }
        with pytest.raises(StoreError, match="read-only"):
            store.set_state("cold.test", "unknown")

    # Settings (as a crawl has them) open the same store; writable on request.
    with open_store(settings, readonly=False) as store:
        assert store.reset("cold.test").state is State.UNKNOWN
    with open_store(Config.from_settings(settings)) as store:
        assert store.get("cold.test").state is State.UNKNOWN  # type: ignore[union-attr]
        assert store.decide(sites.url("cold.test")).decision is Decision.PROBE
    # The expiry is applied as a crawl would at that time.
    with open_store(path) as store:
        later = time.time() + 400 * 86400
        assert store.get("dead-root.test", now=later).state is State.UNKNOWN  # type: ignore[union-attr]
        assert store.decide(sites.url("dead-root.test"), now=later).decision is Decision.PROBE


def test_open_store_relative_path_and_bad_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    # Read-only never creates anything: a missing database is an error naming the path.
    with pytest.raises(StoreError, match=r"no domainstate database at .*/\.scrapy/domainstate"):
        open_store(".scrapy/domainstate")
    assert not (tmp_path / ".scrapy").exists()
    # Writable creates it, relative to the working directory (what the user tried).
    with open_store(".scrapy/domainstate", readonly=False) as store:
        store.set_state("example.com", State.DEAD)
    assert (tmp_path / ".scrapy" / "domainstate" / "data.mdb").exists()
    with open_store(tmp_path / ".scrapy" / "domainstate") as store:  # a pathlib.Path works too
        assert store.get("https://example.com/a").state is State.DEAD  # type: ignore[union-attr]
    with pytest.raises(TypeError, match="takes an LMDB path"):
        open_store(42)
    with pytest.raises(ValueError, match="no usable host"), open_store(".scrapy/domainstate") as store:
        store.get("")
    with pytest.raises(ValueError, match="empty"):
        open_store("")


def test_lmdb_store_given_a_path_says_what_to_use() -> None:
    # The issue: LmdbStore(".scrapy/domainstate") failed with "'str' object has no attribute 'ttl'".
    with pytest.raises(TypeError, match=r"open_store\("):
        LmdbStore(".scrapy/domainstate")  # type: ignore[arg-type]
