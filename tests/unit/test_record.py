"""The record encoding: round trips, the size budget, and garbage in -> RecordError out."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import struct
import zlib
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from scrapy_domainstate.core.record import DomainStat, Method, Outcome, RecentEntry, State
from scrapy_domainstate.store.codec import MAX_TIME, VERSION, RecordError, decode, decode_header, encode
from tests import T0

U32 = 0xFFFFFFFF
HEADER_SIZE = len(encode(DomainStat("")))
#: Budget: a full record (20 entries) on disk: 300 bytes of fields, plus the 8 bytes of
#: the version 3 integrity envelope (two CRC32s).
FULL_RECORD_BUDGET = 300 + 8

times = st.floats(min_value=0.0, max_value=4e9, allow_nan=False, allow_infinity=False)
counters = st.integers(min_value=0, max_value=U32 + 1000)  # beyond u32: clamped


@st.composite
def entries(draw: st.DrawFn, first_seen: float) -> RecentEntry:
    return RecentEntry(
        at=first_seen + draw(st.floats(min_value=-100.0, max_value=3e8, allow_nan=False)),
        method=draw(st.sampled_from(list(Method))),
        outcome=draw(st.sampled_from(list(Outcome))),
        status=draw(st.none() | st.integers(min_value=0, max_value=65535)),
        error_class=draw(st.none() | st.text(max_size=300)),
    )


@st.composite
def stats(draw: st.DrawFn) -> DomainStat:
    first_seen = draw(times)
    return DomainStat(
        domain=draw(st.text(min_size=1, max_size=80)),
        state=draw(st.sampled_from(list(State))),
        recent=draw(st.lists(entries(first_seen), max_size=25)),
        fetch_total=draw(counters),
        fetch_ok=draw(counters),
        fetch_ok_empty=draw(counters),
        tab_total=draw(counters),
        tab_ok=draw(counters),
        first_seen=first_seen,
        last_seen=draw(times),
        state_changed_at=draw(times),
        state_expires_at=draw(st.none() | times),
        probed_at=draw(st.just(0.0) | times),
    )


def expected_after_roundtrip(stat: DomainStat) -> DomainStat:
    """What the encoding keeps: entry times as whole seconds after first_seen (rounded), clamped to
    a u32; counters clamped to a u32; error classes cut at 255 UTF-8 bytes; a 0 status
    or an empty error class read back as None."""
    out = stat.copy()
    for name in ("fetch_total", "fetch_ok", "fetch_ok_empty", "tab_total", "tab_ok"):
        setattr(out, name, min(getattr(stat, name), U32))
    recent = []
    for e in stat.recent:
        offset = min(max(round(e.at - stat.first_seen), 0), U32)
        err = (e.error_class or "").encode("utf-8")[:255]
        recent.append(
            RecentEntry(
                stat.first_seen + offset,
                e.method,
                e.outcome,
                e.status or None,
                err.decode("utf-8", "replace") if err else None,
            )
        )
    out.recent = recent
    return out


@settings(max_examples=300, deadline=None)
@given(stats())
def test_roundtrip(stat: DomainStat) -> None:
    data = encode(stat)
    assert decode(data) == expected_after_roundtrip(stat)
    assert decode_header(data) == (stat.state, stat.state_expires_at, stat.state_changed_at, stat.probed_at)


def test_roundtrip_whole_seconds_exact() -> None:
    stat = DomainStat("example.com", State.FRIENDLY, first_seen=T0, last_seen=T0 + 50, state_changed_at=T0 + 9)
    stat.recent = [RecentEntry(T0 + i, Method.FETCH, Outcome.OK_CONTACT, 200) for i in range(20)]
    assert decode(encode(stat)) == stat


@settings(max_examples=200, deadline=None)
@given(
    st.floats(min_value=1e9, max_value=2e9, allow_nan=False),
    st.lists(st.floats(min_value=0.0, max_value=1e7, allow_nan=False), max_size=20),
)
@example(first_seen=1063741825.2587596, offsets=[10000000.0])  # base + n - base == n - 1e-7
def test_reencoding_is_stable(first_seen: float, offsets: list[float]) -> None:
    """Stores decode and re-encode a record on every write: entry times must not drift."""
    stat = DomainStat("example.com", first_seen=first_seen, last_seen=first_seen)
    stat.recent = [RecentEntry(first_seen + o, Method.FETCH, Outcome.OK_EMPTY, None, "timeout") for o in offsets]
    data = encode(stat)
    again = data
    for _ in range(5):
        again = encode(decode(again))
    assert again == data


# ------------------------------------------------------------------ budget

DOMAIN = "example-shop.co.uk"


def _history(pattern: list[tuple[Method, Outcome, int | None, str | None]]) -> DomainStat:
    stat = DomainStat(DOMAIN, State.UNKNOWN, first_seen=T0, last_seen=T0 + 86400 * 30)
    stat.fetch_total, stat.fetch_ok, stat.tab_total, stat.tab_ok = 1234, 800, 40, 30
    stat.state_changed_at, stat.state_expires_at, stat.probed_at = T0 + 3600, T0 + 90 * 86400, T0
    stat.recent = [RecentEntry(T0 + 3600 * 7 * i, *pattern[i % len(pattern)]) for i in range(20)]
    return stat


F, H, TAB = Method.FETCH, Method.HEAD, Method.TAB
# Error classes as classify.py writes them.
PROFILES = {
    "friendly": [(F, Outcome.OK_CONTACT, 200, None)] * 8 + [(F, Outcome.HTTP_ERROR, 503, "http:503")],
    "flaky": [
        (F, Outcome.OK_CONTACT, 200, None),
        (F, Outcome.NETWORK_ERROR, None, "timeout"),
        (F, Outcome.HTTP_ERROR, 503, "http:503"),
        (F, Outcome.OK_EMPTY, 200, None),
    ],
    "antibot": [
        (H, Outcome.ANTIBOT, 403, "challenge:cloudflare:header"),
        (F, Outcome.ANTIBOT, 403, "challenge:cloudflare:title"),
        (TAB, Outcome.OK_CONTACT, 200, None),
    ],
}
# Histories full of error classes are the worst case: the v2 format keeps one table of
# a record's distinct error classes, so even those stay within the budget.
PROFILE_PARAMS = ["friendly", "flaky", "antibot"]


@pytest.mark.parametrize("profile", PROFILE_PARAMS)
def test_full_record_size_budget(profile: str) -> None:
    stat = _history(PROFILES[profile])
    assert len(stat.recent) == 20
    data = encode(stat)
    assert decode(data).recent == stat.recent
    assert len(data) <= FULL_RECORD_BUDGET, f"{profile}: {len(data)} bytes"


def test_full_record_without_error_classes_fits_with_room() -> None:
    stat = _history([(F, Outcome.OK_CONTACT, 200, None)])
    assert len(encode(stat)) <= FULL_RECORD_BUDGET - 40


# ----------------------------------------------------------------- garbage


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=600))
def test_garbage_raises_only_record_error(data: bytes) -> None:
    try:
        stat = decode(data)
    except RecordError:
        pass
    else:  # astronomically unlikely, but then it must be a real record
        assert isinstance(stat, DomainStat)
    with contextlib.suppress(RecordError):
        decode_header(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=1, max_size=300), st.integers(min_value=0, max_value=255))
def test_garbage_after_a_valid_header_raises_only_record_error(tail: bytes, n_recent: int) -> None:
    good = bytearray(encode(_history(PROFILES["flaky"])))
    good[2] = n_recent  # entry count
    cut = HEADER_SIZE + len(DOMAIN)
    with contextlib.suppress(RecordError):
        decode(bytes(good[:cut]) + tail)


@pytest.mark.parametrize("profile", list(PROFILES))
def test_truncated_records_raise(profile: str) -> None:
    data = encode(_history(PROFILES[profile]))
    for n in range(len(data)):
        with pytest.raises(RecordError):
            decode(data[:n])
    full = decode_header(data)
    for n in range(len(data)):
        try:
            header = decode_header(data[:n])
        except RecordError:
            assert n < HEADER_SIZE
        else:  # the header alone is enough for the decision fields
            assert header == full


def test_trailing_bytes_raise() -> None:
    data = encode(_history(PROFILES["friendly"]))
    with pytest.raises(RecordError):
        decode(data + b"\x00")


@pytest.mark.parametrize("version", [0, 1, VERSION + 1, 255])
def test_version_mismatch_raises(version: int) -> None:
    data = bytearray(encode(_history(PROFILES["flaky"])))
    assert data[0] == VERSION
    data[0] = version
    with pytest.raises(RecordError, match="version"):
        decode(bytes(data))
    with pytest.raises(RecordError, match="version"):
        decode_header(bytes(data))


def test_bad_codes_raise() -> None:
    data = bytearray(encode(_history(PROFILES["friendly"])))
    bad_state = bytearray(data)
    bad_state[1] = 200
    with pytest.raises(RecordError):
        decode(bytes(bad_state))
    with pytest.raises(RecordError):
        decode_header(bytes(bad_state))


def test_copy_copies_every_field() -> None:
    """``DomainStat.copy()`` lists the fields by hand (for speed): a new field must be added there."""
    values: dict[str, Any] = {}
    for i, f in enumerate(dataclasses.fields(DomainStat), start=1):
        if f.name == "domain":
            values[f.name] = "copy.example"
        elif f.name == "state":
            values[f.name] = State.COLD
        elif f.name == "recent":
            values[f.name] = [RecentEntry(T0, Method.FETCH, Outcome.OK_EMPTY)]
        else:
            values[f.name] = float(i) if "seen" in f.name or "_at" in f.name else i
    original = DomainStat(**values)
    copied = original.copy()
    assert copied == original
    assert copied.recent is not original.recent


# ------------------------------------------------------- integrity (v3 envelope)


def _as_v2(data: bytes) -> bytes:
    """The version 2 form of a version 3 record: no checksums, version byte 2."""
    return bytes((2,)) + data[1:_HEAD] + data[_HEAD + 8 :]


_HEAD = struct.calcsize("<BBBH5I5d")


@pytest.mark.parametrize("profile", list(PROFILES))
def test_version_2_records_still_decode(profile: str) -> None:
    stat = _history(PROFILES[profile])
    old = _as_v2(encode(stat))
    assert decode(old) == stat
    assert decode_header(old) == decode_header(encode(stat))
    assert encode(decode(old))[0] == VERSION == 3


@pytest.mark.parametrize("profile", list(PROFILES))
def test_every_flipped_bit_is_detected(profile: str) -> None:
    data = encode(_history(PROFILES[profile]))
    header_fields = decode_header(data)
    for i in range(len(data) * 8):
        flipped = bytearray(data)
        flipped[i // 8] ^= 1 << (i % 8)
        with pytest.raises(RecordError):
            decode(bytes(flipped))
        try:
            fields = decode_header(bytes(flipped))
        except RecordError:
            continue
        # The header path checks the header's own checksum: a flip it lets through is one
        # outside the header (or the version byte turned 3 -> 2, same fields).
        assert fields == header_fields, i


@settings(max_examples=200, deadline=None)
@given(stats(), st.data())
def test_random_corruption_is_detected(stat: DomainStat, data: st.DataObject) -> None:
    raw = bytearray(encode(stat))
    # Distinct bytes (so two changes never cancel), never the version byte.
    where = data.draw(st.lists(st.integers(min_value=1, max_value=len(raw) - 1), min_size=1, max_size=8, unique=True))
    for at in where:
        raw[at] ^= data.draw(st.integers(min_value=1, max_value=255))
    with pytest.raises(RecordError):
        decode(bytes(raw))


BAD_TIMES = [math.nan, math.inf, -math.inf, -1.0, 1e300]


@pytest.mark.parametrize("name", ["first_seen", "last_seen", "state_changed_at", "probed_at", "state_expires_at"])
@pytest.mark.parametrize("value", BAD_TIMES)
def test_time_not_finite_or_out_of_range_is_corrupt(name: str, value: float) -> None:
    """A stored time that is NaN, infinite or out of range reads as corrupt (the store then
    treats the domain as unknown), whether the checksums match (v3) or there are none (v2)."""
    stat = _history(PROFILES["flaky"])
    offset = _HEAD - 8 * (
        5 - ("first_seen", "last_seen", "state_changed_at", "state_expires_at", "probed_at").index(name)
    )
    v2 = bytearray(_as_v2(encode(stat)))
    struct.pack_into("<d", v2, offset, value)
    if name == "state_expires_at" and math.isnan(value):
        assert decode(bytes(v2)).state_expires_at is None  # NaN is "no TTL"
        return
    # v3 with checksums that match the bad value: what a writer with a broken clock would store.
    head, body = bytes(v2[:_HEAD]), bytes(v2[_HEAD:])
    head = bytes((3,)) + head[1:]
    v3 = head + struct.pack("<II", zlib.crc32(head), zlib.crc32(body)) + body
    for raw in (bytes(v2), v3):
        with pytest.raises(RecordError, match="time"):
            decode(raw)
        with pytest.raises(RecordError, match="time"):
            decode_header(raw)


@pytest.mark.parametrize("name", ["first_seen", "last_seen", "state_changed_at", "probed_at"])
@pytest.mark.parametrize("value", BAD_TIMES)
def test_encoding_a_bad_time_raises_record_error(name: str, value: float) -> None:
    stat = _history(PROFILES["flaky"])
    setattr(stat, name, value)
    with pytest.raises(RecordError):
        encode(stat)


def test_far_expiry_is_clamped_not_refused() -> None:
    stat = _history(PROFILES["friendly"])
    stat.state_expires_at = 1e300
    assert decode(encode(stat)).state_expires_at == MAX_TIME
    stat.state_expires_at = math.inf
    assert decode(encode(stat)).state_expires_at == MAX_TIME
    stat.state_expires_at = math.nan
    with pytest.raises(RecordError):
        encode(stat)
