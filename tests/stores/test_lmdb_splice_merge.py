"""Two writers on one LMDB file, each splicing onto the layout it remembers: nothing is lost.

Each store remembers the bytes (and their layout) it last read or wrote; at a flush it
writes its own view spliced onto them when the stored bytes are still those, and
re-applies its entries to the stored record otherwise. Interleaved at random (two stores
on the same environment, as two processes would, with error classes that make the splice
renumber its table), every stored record must be byte for byte the plain encoding of all
the outcomes applied in the order the flushes landed.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.policy import Policy
from scrapy_domainstate.core.record import DomainStat, Method, Outcome, RecentEntry
from scrapy_domainstate.store import lmdb as lmdb_store
from scrapy_domainstate.store.base import apply_entries
from scrapy_domainstate.store.codec import encode
from scrapy_domainstate.store.lmdb import LmdbStore
from tests import T0

ERRORS = [None, None, "timeout", "http:503", "dns", "challenge:cloudflare:title", "block:cloudflare:1020"]


def open_store(db: Path, **overrides: object) -> LmdbStore:
    store = LmdbStore(Config(lmdb_path=str(db), flush_interval=1e9, flush_size=10**6, **overrides))  # type: ignore[arg-type]
    store.open()
    return store


@pytest.mark.parametrize("seed", range(6))
def test_interleaved_writers_store_every_outcome(tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    spliced = []
    real_encode_on = lmdb_store.encode_on

    def counting_encode_on(*args: object) -> object:
        out = real_encode_on(*args)  # type: ignore[arg-type]
        spliced.append(out is not None)
        return out

    monkeypatch.setattr(lmdb_store, "encode_on", counting_encode_on)
    recent_size = rng.choice([5, 20])
    stores = [open_store(tmp_path / "db", recent_size=recent_size) for _ in range(2)]
    policy = Policy(Config(recent_size=recent_size))
    domains = [f"site-{i}.example" for i in range(4)]
    expected: dict[str, DomainStat | None] = dict.fromkeys(domains)
    buffered: list[dict[str, list[RecentEntry]]] = [{}, {}]
    try:
        at = T0
        for _ in range(400):
            i = rng.randrange(2)
            if rng.random() < 0.15:
                stores[i].flush()
                for domain, entries in buffered[i].items():  # this flush lands now
                    expected[domain] = apply_entries(policy, expected[domain], domain, entries)
                buffered[i] = {}
                continue
            at += rng.choice([1.0, 60.0, 3600.0])
            domain = rng.choice(domains)
            entry = RecentEntry(
                at,
                rng.choice([Method.FETCH, Method.FETCH, Method.HEAD, Method.TAB]),
                rng.choice(list(Outcome)),
                rng.choice([None, 200, 403, 503]),
                rng.choice(ERRORS),
            )
            stores[i].record(domain, entry)
            buffered[i].setdefault(domain, []).append(entry)
        for i in range(2):
            stores[i].flush()
            for domain, entries in buffered[i].items():
                expected[domain] = apply_entries(policy, expected[domain], domain, entries)
        shared = stores[0]._h()
        with shared.env.begin() as txn:
            for domain, stat in expected.items():
                if stat is not None:
                    assert txn.get(domain.encode(), db=shared.records) == encode(stat), domain
        for store in stores:  # each reads what the other wrote
            for domain, stat in expected.items():
                assert store.get(domain) == stat
        assert stores[0].lru_count() == stores[0].count() == sum(s is not None for s in expected.values())
        assert any(spliced)  # the shortcut was taken (and its result checked above)
    finally:
        for store in stores:
            store.close()
