"""The spliced encoding from a kept layout gives exactly what the plain encoding gives.

:func:`~scrapy_domainstate.store.codec.encode_on` packs only the header and the new entries of
a record, on the :data:`~scrapy_domainstate.core.record.Layout` of the bytes it extends (taken
by :func:`~scrapy_domainstate.store.codec.decode_with_layout` or returned by the previous
``encode_on``); chained over many batches it must stay byte for byte
:func:`~scrapy_domainstate.store.codec.encode`, and the layout it returns must be the layout
of the bytes it returns.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.policy import Policy
from scrapy_domainstate.core.record import DomainStat, Method, Outcome, RecentEntry, State
from scrapy_domainstate.store.base import apply_entries
from scrapy_domainstate.store.codec import decode, decode_with_layout, encode, encode_on, kept_entries, layout_of
from tests import T0

ERRORS = [None, None, None, "timeout", "http:503", "dns", "challenge:cloudflare:title", "block:x", "é" * 10]


@st.composite
def entry(draw: st.DrawFn, at: float) -> RecentEntry:
    return RecentEntry(
        at=at,
        method=draw(st.sampled_from(list(Method))),
        outcome=draw(st.sampled_from(list(Outcome))),
        status=draw(st.sampled_from([None, 200, 403, 404, 429, 503])),
        error_class=draw(st.sampled_from(ERRORS) | st.text(max_size=140)),
    )


@st.composite
def batches(draw: st.DrawFn) -> list[list[RecentEntry]]:
    """Batches of outcomes, in time order but for an occasional one from the past."""
    at, out = T0, []
    for _ in range(draw(st.integers(min_value=1, max_value=8))):
        batch = []
        for _ in range(draw(st.integers(min_value=1, max_value=12))):
            at += draw(st.sampled_from([0.0, 1.0, 60.0, 3600.0, 86400.0, 9 * 86400.0]))
            item = draw(entry(at))
            if draw(st.integers(min_value=0, max_value=30)) == 0:
                item.at = T0 - 7.0  # out of order: first_seen moves back
            batch.append(item)
        out.append(batch)
    return out


@settings(max_examples=300, deadline=None)
@given(batches(), st.sampled_from([3, 5, 20]))
def test_chained_splices_are_encode(chain: list[list[RecentEntry]], recent_size: int) -> None:
    policy = Policy(Config(recent_size=recent_size))
    stat = apply_entries(policy, None, "example.com", chain[0])
    raw = encode(stat)
    stored, layout = decode_with_layout(raw)
    assert encode(stored) == raw
    for batch in chain[1:]:
        new = apply_entries(policy, stored, "example.com", batch)
        expected = encode(new)
        if layout is not None:
            spliced = encode_on(new, layout, kept_entries(stored.recent, new.recent))
            if spliced is not None:
                data, layout = spliced
                assert data == expected
                assert layout == layout_of(data)
                stored = new
                continue
        # The shortcut did not apply: the store encodes in full and takes the layout anew.
        raw = expected
        stored, layout = decode_with_layout(raw)
        assert layout == layout_of(raw)


def test_the_usual_case_is_spliced() -> None:
    """A full record with error classes, one outcome more (its oldest entry dropped, with or
    without a class): spliced, not refused."""
    policy = Policy(Config())
    errors = ["http:503", None, "timeout", None]
    entries = [RecentEntry(T0 + i, Method.FETCH, Outcome.HTTP_ERROR, 503, errors[i % 4]) for i in range(20)]
    stat = apply_entries(policy, None, "example.com", entries)
    for i in range(8):
        stored, layout = decode_with_layout(encode(stat))
        assert layout is not None
        new = apply_entries(policy, stored, "example.com", [RecentEntry(T0 + 100 + i, Method.FETCH, Outcome.OK_EMPTY)])
        kept = kept_entries(stored.recent, new.recent)
        assert kept == 19
        spliced = encode_on(new, layout, kept)
        assert spliced is not None and spliced[0] == encode(new)
        stat = new


def test_layout_refuses_what_it_cannot_extend() -> None:
    stat = DomainStat("example.com", State.FRIENDLY, [RecentEntry(T0, Method.FETCH, Outcome.OK_CONTACT, 200, "x")])
    stat.first_seen = stat.last_seen = stat.state_changed_at = T0
    raw = encode(stat)
    assert layout_of(raw) is not None
    for garbage in (b"", b"\x03", raw[:-3], raw + b"\x00", b"\x02" + raw[1:]):
        assert layout_of(garbage) is None
    # A table not numbered by first use (only a foreign writer could store one) is refused.
    two = DomainStat(
        "example.com",
        State.UNKNOWN,
        [
            RecentEntry(T0, Method.FETCH, Outcome.HTTP_ERROR, 503, "a"),
            RecentEntry(T0, Method.FETCH, Outcome.HTTP_ERROR, 503, "b"),
        ],
    )
    two.first_seen = two.last_seen = two.state_changed_at = T0
    data = bytearray(encode(two))
    data[-1 - 9], data[-1] = 2, 1  # swap the two index bytes: b is now used first
    assert layout_of(bytes(data)) is None
    # first_seen moved back: refused (every offset changes), so the caller encodes in full.
    layout = layout_of(raw)
    assert layout is not None
    moved = decode(raw)
    moved.first_seen = T0 - 10.0
    assert encode_on(moved, layout, 1) is None
