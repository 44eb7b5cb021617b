"""The hot-path shortcuts give exactly what the plain code gives.

- :func:`~scrapy_domainstate.store.codec.encode_spliced` (a record's kept entries copied
  from its stored bytes) is byte for byte :func:`~scrapy_domainstate.store.codec.encode`;
- the LMDB store, which splices and writes in key order, stores the same bytes as a
  plain encode of what the policy computes.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.policy import Policy
from scrapy_domainstate.core.record import DomainStat, Method, Outcome, RecentEntry, State
from scrapy_domainstate.store.base import apply_entries
from scrapy_domainstate.store.codec import decode, encode, encode_spliced, kept_entries
from scrapy_domainstate.store.lmdb import LmdbStore
from tests import T0

ERRORS = [None, None, "timeout", "http:503", "dns", "challenge:cloudflare:title", "block:cloudflare:1020", "é" * 10]


@st.composite
def outcome(draw: st.DrawFn, at: float) -> RecentEntry:
    return RecentEntry(
        at=at,
        method=draw(st.sampled_from(list(Method))),
        outcome=draw(st.sampled_from(list(Outcome))),
        status=draw(st.sampled_from([None, 200, 403, 404, 503])),
        error_class=draw(st.sampled_from(ERRORS) | st.text(max_size=300)),
    )


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[RecentEntry], list[RecentEntry]]:
    """Outcomes that build a stored record, then a batch of outcomes applied to it."""
    n_old = draw(st.integers(min_value=0, max_value=30))
    n_new = draw(st.integers(min_value=1, max_value=25))
    steps = draw(
        st.lists(st.floats(min_value=0.0, max_value=40 * 86400.0), min_size=n_old + n_new, max_size=n_old + n_new)
    )
    at, entries = T0, []
    for step in steps:
        at += step
        entries.append(draw(outcome(at)))
    if draw(st.booleans()) and entries:
        entries[-1].at = T0 - 5.0  # out of order: first_seen moves back
    return entries[:n_old], entries[n_old:]


@settings(max_examples=200, deadline=None)
@given(histories(), st.sampled_from([5, 20]))
def test_splice_is_encode(history: tuple[list[RecentEntry], list[RecentEntry]], recent_size: int) -> None:
    old_entries, new_entries = history
    policy = Policy(Config(recent_size=recent_size))
    old = apply_entries(policy, None, "example.com", old_entries) if old_entries else policy.new("example.com", T0)
    raw = encode(old)
    stored = decode(raw)
    new = apply_entries(policy, stored, "example.com", new_entries)
    kept = kept_entries(stored.recent, new.recent)
    assert encode_spliced(new, raw, kept) == encode(new)
    # Whatever `kept` a caller passes that is true of the record, the bytes are encode's.
    assert encode_spliced(new, raw, 0) == encode(new)


def test_splice_reuses_the_stored_entries() -> None:
    policy = Policy(Config())
    entries = [RecentEntry(T0 + i, Method.FETCH, Outcome.OK_CONTACT, 200, None) for i in range(20)]
    stored = decode(encode(apply_entries(policy, None, "example.com", entries)))
    new = apply_entries(
        policy, stored, "example.com", [RecentEntry(T0 + 99, Method.FETCH, Outcome.OK_EMPTY, 200, None)]
    )
    assert kept_entries(stored.recent, new.recent) == 19
    assert encode_spliced(new, encode(stored), 19) == encode(new)


def test_splice_falls_back_on_damaged_bytes() -> None:
    stat = DomainStat("example.com", State.FRIENDLY, [RecentEntry(T0, Method.FETCH, Outcome.OK_CONTACT, 200, "x")])
    stat.first_seen = T0
    for garbage in (b"", b"\x02", encode(stat)[:-3], encode(stat) + b"\x00"):
        assert encode_spliced(stat, garbage, 1) == encode(stat)


def test_lmdb_batches_store_what_the_policy_computes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Random outcomes over a few domains, flushed in small batches: every stored record is
    the plain encode of the outcomes applied in order."""
    rng = random.Random(3)
    config = Config(lmdb_path=str(tmp_path / "db"), flush_size=7, flush_interval=3600.0)
    policy = Policy(config)
    expected: dict[str, DomainStat | None] = {}
    domains = [f"site-{i}.example" for i in range(12)]
    with LmdbStore(config, policy) as store:
        for i in range(600):
            domain = rng.choice(domains)
            entry = RecentEntry(
                T0 + i * 60.0,
                rng.choice(list(Method)),
                rng.choice(list(Outcome)),
                rng.choice([None, 200, 403, 503]),
                rng.choice(ERRORS),
            )
            store.record(domain, entry)
            expected[domain], _ = policy.observe(expected.get(domain), domain, entry)
        store.flush()
        shared = store._h()
        with shared.env.begin() as txn:
            for domain, stat in expected.items():
                assert stat is not None
                assert txn.get(domain.encode(), db=shared.records) == encode(stat)
        assert store.lru_count() == store.count() == len(expected)
