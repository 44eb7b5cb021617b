"""How the stores keep a record: its binary encoding, versioned and compact.

A fixed header (state, counters, timestamps) that the hot decision path reads with a
single ``struct.unpack`` (:func:`decode_decision`), followed by the ``recent`` entries,
decoded only when an outcome is applied; an integrity envelope (checksums) around both.
:func:`decode` never raises on garbage: it raises :class:`RecordError`, which stores turn
into "treat as unknown, warn once". Pure: no Scrapy, no I/O.
"""

from __future__ import annotations

import math
import struct
import zlib

from scrapy_domainstate.core.record import DomainStat, Method, Outcome, RecentEntry, State

__all__ = ["MAX_TIME", "U32_MAX", "RecordError", "decode", "decode_decision", "encode"]


# ---------------------------------------------------------------- encoding

#: Version 3 is version 2 with an integrity envelope (see :func:`encode`); version 2
#: records (no checksums) are still read.
VERSION = 3
_V2 = 2
_STATES = list(State)
_METHODS = list(Method)
_OUTCOMES = list(Outcome)
_STATE_CODE = {s: i for i, s in enumerate(_STATES)}
#: entry code byte -> (method, outcome)
_CODES = {(mi << 4) | oi: (m, o) for mi, m in enumerate(_METHODS) for oi, o in enumerate(_OUTCOMES)}

# version, state, n_recent, domain length, 5 counters, first_seen, last_seen,
# state_changed_at, state_expires_at (NaN = no TTL), probed_at. Then the domain,
# then the table of the distinct error classes of the entries (count, then each
# as length + UTF-8), then the entries.
_HEADER = struct.Struct("<BBBH5I5d")
# seconds after first_seen, method<<4 | outcome, status (0 = none),
# 1 + index of the error class in the table (0 = none).
_ENTRY = struct.Struct("<IBHB")
U32_MAX = 0xFFFFFFFF
#: Flags in the state byte: the extension follows the entries; the domain needs the browser.
_EXT_BIT = 0x40
_BROWSER_BIT = 0x80
_STATE_MASK = 0x3F
# The extension (fields added in 0.2): dead_visits, dead_at, browser_since.
_EXT = struct.Struct("<Idd")


class RecordError(ValueError):
    """A stored record that cannot be decoded."""


#: method, outcome -> entry code byte
_ENTRY_CODE = {(m, o): code for code, (m, o) in _CODES.items()}
_NAN = float("nan")
#: Packers of "header + domain + empty error table + n entries" and of "n entries", by shape.
_FLAT_STRUCTS: dict[tuple[int, int], struct.Struct] = {}
_ENTRIES_STRUCTS: dict[int, struct.Struct] = {}
_MAX_STRUCTS = 1024


def _flat_struct(dlen: int, n: int) -> struct.Struct:
    packer = _FLAT_STRUCTS.get((dlen, n))
    if packer is None:
        packer = struct.Struct(f"{_HEADER.format}{dlen}sB{_ENTRY.format[1:] * n}")
        if len(_FLAT_STRUCTS) < _MAX_STRUCTS:
            _FLAT_STRUCTS[dlen, n] = packer
    return packer


def _entries_struct(n: int) -> struct.Struct:
    packer = _ENTRIES_STRUCTS.get(n)
    if packer is None:
        packer = struct.Struct("<" + _ENTRY.format[1:] * n)
        if len(_ENTRIES_STRUCTS) < _MAX_STRUCTS:
            _ENTRIES_STRUCTS[n] = packer
    return packer


def _err_table(table: dict[str, int]) -> list[bytes] | None:
    """The stored form of an error-class table (by first use), or ``None`` when two
    classes truncate to the same bytes (the caller then numbers them by bytes)."""
    parts = []
    seen = set()
    for err in table:
        raw = err.encode("utf-8")[:255]
        if raw in seen:
            return None
        seen.add(raw)
        parts.append(bytes((len(raw),)) + raw)
    return parts


def _encode_payload(stat: DomainStat) -> bytes:
    domain = stat.domain.encode("utf-8")
    recent = stat.recent
    base = stat.first_seen
    codes = _ENTRY_CODE
    table: dict[str, int] = {}
    flat: list[int] = []
    for entry in recent:
        err = entry.error_class
        index = 0
        if err:
            index = table.get(err, 0)
            if not index:
                index = table[err] = len(table) + 1
        offset = round(entry.at - base)  # round, not int: base + n - base may be n - 1e-7
        if offset < 0:
            offset = 0
        elif offset > U32_MAX:
            offset = U32_MAX
        flat += (offset, codes[entry.method, entry.outcome], entry.status or 0, index)
    ext = _extension(stat)
    head = _header_fields(stat, _state_byte(stat, ext), len(recent), len(domain))
    if not table:
        # Header, domain, empty error table and entries in one pack.
        return _flat_struct(len(domain), len(recent)).pack(*head, domain, 0, *flat) + ext
    parts = _err_table(table)
    if parts is None:  # error classes equal once truncated: number them by their bytes
        by_bytes: dict[bytes, int] = {}
        renumber = [0]
        for err in table:
            raw = err.encode("utf-8")[:255]
            renumber.append(by_bytes.setdefault(raw, len(by_bytes) + 1))
        flat[3::4] = [renumber[i] for i in flat[3::4]]
        parts = [bytes((len(raw),)) + raw for raw in by_bytes]
    return b"".join(
        (
            _flat_struct(len(domain), 0).pack(*head, domain, len(parts)),
            *parts,
            _entries_struct(len(recent)).pack(*flat),
            ext,
        )
    )


def _extension(stat: DomainStat) -> bytes:
    """The fields added in 0.2, after the entries; empty when they hold their defaults,
    so a record without them encodes exactly as before (and older records decode)."""
    if not (stat.dead_visits or stat.dead_at or stat.browser_since):
        return b""
    visits = stat.dead_visits if stat.dead_visits <= U32_MAX else U32_MAX
    return _EXT.pack(visits, stat.dead_at, stat.browser_since)


def _state_byte(stat: DomainStat, ext: bytes) -> int:
    return _STATE_CODE[stat.state] | (_EXT_BIT if ext else 0) | (_BROWSER_BIT if stat.browser_since else 0)


# ------------------------------------------------------------- envelope
#
# Version 3 = the version 2 layout (header, domain, error table, entries) with the
# version byte set to 3 and two CRC32s inserted right after the header: one of the
# header bytes (so the decision path, which reads the header only, detects a flipped
# bit there) and one of everything after the CRCs. A record whose checksums do not
# match, or whose times are not finite or out of range, is a RecordError: stores treat
# it as unknown, warn once and overwrite it on the next write.

_CRC = struct.Struct("<II")
_HEAD_SIZE = _HEADER.size
_BODY_AT = _HEAD_SIZE + _CRC.size
#: Latest time a record may hold: 9999-12-31T23:59:59Z (what ``datetime`` can show).
MAX_TIME = 253402300799.0
_crc32 = zlib.crc32
_isnan = math.isnan


def _check_times(head: tuple) -> None:
    # first_seen, last_seen, state_changed_at, probed_at: finite and in range (NaN fails
    # every comparison); state_expires_at: NaN (no TTL) or in range.
    top = MAX_TIME
    if not (
        0.0 <= head[9] <= top
        and 0.0 <= head[10] <= top
        and 0.0 <= head[11] <= top
        and 0.0 <= head[13] <= top
        and (_isnan(head[12]) or 0.0 <= head[12] <= top)
    ):
        raise RecordError("corrupt record: a time is not finite or out of range")


def encode(stat: DomainStat) -> bytes:
    """The stored bytes of ``stat`` (version 3). Raises :class:`RecordError` when a time
    is not finite or out of range (such a record could not be read back)."""
    top = MAX_TIME
    expires = stat.state_expires_at
    if not (
        0.0 <= stat.first_seen <= top
        and 0.0 <= stat.last_seen <= top
        and 0.0 <= stat.state_changed_at <= top
        and 0.0 <= stat.probed_at <= top
        and (expires is None or expires >= 0.0)
    ):
        raise RecordError(f"cannot encode the record of {stat.domain!r}: a time is not finite or out of range")
    try:
        payload = _encode_payload(stat)
    except (struct.error, ValueError, OverflowError) as exc:
        raise RecordError(f"cannot encode the record of {stat.domain!r}: {exc}") from exc
    head = payload[:_HEAD_SIZE]
    body = payload[_HEAD_SIZE:]
    return b"".join((head, _CRC.pack(_crc32(head), _crc32(body)), body))


#: A version 3 header and its checksum, in one unpack (the decision path).
_HEAD_V3 = struct.Struct(_HEADER.format + "I")


def decode_header(data: bytes) -> tuple[State, float | None, float, float]:
    """The decision fields only: ``(state, expires_at, changed_at, probed_at)``."""
    state, expires, changed, probed, _ = decode_decision(data)
    return state, expires, changed, probed


def decode_decision(data: bytes) -> tuple[State, float | None, float, float, bool]:
    """What a decision reads: ``(state, expires_at, changed_at, probed_at, needs_browser)``.

    Checks the header's own checksum (version 3) and its times, not the rest: a record
    whose tail is damaged is decided from its header (the damage shows on a full read).
    """
    try:
        if data[0] == VERSION:
            head = _HEAD_V3.unpack_from(data)
            if _crc32(data[:_HEAD_SIZE]) != head[-1]:
                raise RecordError("corrupt record: header checksum mismatch")
        else:
            head = _HEADER.unpack_from(data)
            if head[0] != _V2:
                raise RecordError(f"unsupported record version {head[0]}")
        code = head[1]
        state = _STATES[code & _STATE_MASK]
    except (struct.error, IndexError, TypeError) as exc:
        raise RecordError(str(exc)) from exc
    changed, expires, probed = head[11], head[12], head[13]
    top = MAX_TIME
    if not (
        0.0 <= head[9] <= top
        and 0.0 <= head[10] <= top
        and 0.0 <= changed <= top
        and 0.0 <= probed <= top
        and (_isnan(expires) or 0.0 <= expires <= top)
    ):
        raise RecordError("corrupt record: a time is not finite or out of range")
    return state, (None if _isnan(expires) else expires), changed, probed, bool(code & _BROWSER_BIT)


def decode(data: bytes) -> DomainStat:
    """The record stored as ``data`` (version 3, or 2). Raises only :class:`RecordError`."""
    return decode_with_layout(data)[0]


def decode_with_layout(data: bytes) -> tuple[DomainStat, Layout | None]:
    """:func:`decode`, and the :data:`Layout` of ``data`` for :func:`encode_on` (``None``
    when the record is not one the spliced encoding can extend: version 2, a class that is
    not valid UTF-8, ...). Raises only :class:`RecordError`."""
    try:
        version = data[0]
        if version == VERSION:
            crc_head, crc_body = _CRC.unpack_from(data, _HEAD_SIZE)
            body = data[_BODY_AT:]
            if _crc32(data[:_HEAD_SIZE]) != crc_head or _crc32(body) != crc_body:
                raise RecordError("corrupt record: checksum mismatch")
            return _decode_payload(data[:_HEAD_SIZE] + body, True)
        if version != _V2:
            raise RecordError(f"unsupported record version {version}")
    except (struct.error, IndexError, TypeError) as exc:
        raise RecordError(f"corrupt record: {exc}") from exc
    return _decode_payload(data, False)


def _decode_payload(data: bytes, with_layout: bool) -> tuple[DomainStat, Layout | None]:
    """A record in the version 2 layout (the version byte is checked by the caller), and
    its :data:`Layout` if ``with_layout`` and the spliced encoding can reuse it."""
    try:
        head = _HEADER.unpack_from(data)
        _check_times(head)
        pos = _HEADER.size
        n_recent, dlen = head[2], head[3]
        raw_domain = data[pos : pos + dlen]
        domain = raw_domain.decode("utf-8")
        if len(raw_domain) != dlen:
            raise RecordError("truncated domain")
        table, parts, strict, pos = _read_table(data, pos + dlen)
        base = head[9]
        end = pos + n_recent * _ENTRY.size
        ext = (0, 0.0, 0.0)
        if head[1] & _EXT_BIT:
            if end + _EXT.size != len(data):
                raise RecordError("truncated extension" if end + _EXT.size > len(data) else "trailing bytes")
            ext = _EXT.unpack_from(data, end)
        elif end != len(data):
            raise RecordError("truncated entries" if end > len(data) else "trailing bytes")
        codes = _CODES
        recent: list[RecentEntry] = []
        append = recent.append
        new_entry = object.__new__
        packed = data[pos:end]
        for offset, code, status, index in _ENTRY.iter_unpack(packed):
            # Slots set directly: measured ~40 % faster than RecentEntry(...) per entry.
            entry = new_entry(RecentEntry)
            entry.at = base + offset
            entry.method, entry.outcome = codes[code]
            entry.status = status or None
            entry.error_class = table[index]
            append(entry)
        expires = head[12]
        stat = DomainStat(
            domain,
            _STATES[head[1] & _STATE_MASK],
            recent,
            head[4],
            head[5],
            head[6],
            head[7],
            head[8],
            base,
            head[10],
            head[11],
            None if _isnan(expires) else expires,
            head[13],
            ext[0],
            ext[1],
            ext[2],
        )
    except RecordError:
        raise
    except (struct.error, IndexError, KeyError, TypeError, UnicodeDecodeError, ValueError) as exc:
        raise RecordError(f"corrupt record: {exc}") from exc
    layout: Layout | None = None
    if strict and with_layout:
        classes = {name: i for i, name in enumerate(table) if name is not None}
        if len(classes) == len(parts):
            layout = _canonical(base, raw_domain, parts, classes, packed)
    return stat, layout


def _read_table(data: bytes, pos: int) -> tuple[list[str | None], list[bytes], bool, int]:
    """The error-class table at ``pos``: ``[None, class 1, ...]``, each class as stored,
    whether every class is valid UTF-8 (else it reads with replacement characters), and
    where the entries start."""
    table: list[str | None] = [None]
    parts: list[bytes] = []
    strict = True
    for _ in range(data[pos]):
        elen = data[pos + 1]
        part = data[pos + 1 : pos + 2 + elen]
        if len(part) != elen + 1 or not elen:
            raise RecordError("truncated error class")
        raw = part[1:]
        try:
            table.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            table.append(raw.decode("utf-8", "replace"))
            strict = False
        parts.append(part)
        pos += 1 + elen
    return table, parts, strict, pos + 1


# ------------------------------------------------------- spliced encoding


def _header_fields(stat: DomainStat, state_byte: int, n_recent: int, dlen: int) -> tuple[object, ...]:
    """The header fields of ``stat`` as :func:`encode` and the spliced encoding pack them
    (counters capped at 32 bits, a far expiry at :data:`MAX_TIME`)."""
    expires = stat.state_expires_at
    fetch_total, fetch_ok, fetch_ok_empty = stat.fetch_total, stat.fetch_ok, stat.fetch_ok_empty
    tab_total, tab_ok = stat.tab_total, stat.tab_ok
    return (
        VERSION,
        state_byte,
        n_recent,
        dlen,
        fetch_total if fetch_total <= U32_MAX else U32_MAX,
        fetch_ok if fetch_ok <= U32_MAX else U32_MAX,
        fetch_ok_empty if fetch_ok_empty <= U32_MAX else U32_MAX,
        tab_total if tab_total <= U32_MAX else U32_MAX,
        tab_ok if tab_ok <= U32_MAX else U32_MAX,
        stat.first_seen,
        stat.last_seen,
        stat.state_changed_at,
        _NAN if expires is None else (expires if expires <= MAX_TIME else MAX_TIME),
        stat.probed_at,
    )


def kept_entries(old: list[RecentEntry], new: list[RecentEntry]) -> int:
    """How many entries ``new`` starts with that are the last ones of ``old`` (0 if it does not).

    ``new`` is a record's ``recent`` after outcomes were applied to the record whose
    ``recent`` was ``old``: the oldest entries dropped, new ones appended (the same
    entry objects, so the test is mostly by identity).
    """
    if not old or not new:
        return 0
    first = new[0]
    if old[0] is first:
        j = 0
    elif len(old) > 1 and old[1] is first:  # the usual: a full record dropped its oldest entry
        j = 1
    else:
        try:
            j = list(map(id, old)).index(id(first))
        except ValueError:
            return 0
    kept = len(old) - j
    if kept > len(new) or new[:kept] != old[j:]:
        return 0
    return kept


#: What the spliced encoding reuses of a stored record: ``first_seen`` (the base of the
#: entry offsets), the domain (UTF-8), the error-class table (each class as stored:
#: length byte + bytes), the classes as ``{class: index}`` (in table order) and the packed
#: entries. Only valid for the bytes it was taken from: callers keep it next to them.
Layout = tuple[float, bytes, tuple[bytes, ...], dict[str, int], bytes]


def encode_spliced(stat: DomainStat, old: bytes, kept: int) -> bytes:
    """:func:`encode` of ``stat``, reusing the packed entries of ``old``.

    ``old`` is a stored record and ``stat.recent`` starts with the last ``kept`` entries
    of ``decode(old).recent`` (see :func:`kept_entries`), followed by new ones: only
    the header and the new entries are packed, the kept entries' bytes are copied.
    The result is byte for byte ``encode(stat)`` (the error-class table renumbered
    as encode numbers it); when the shortcut does not apply (``first_seen`` or the
    domain changed, a damaged ``old``), it *is* ``encode(stat)``.
    """
    layout = layout_of(old)
    if layout is not None and layout[1] == stat.domain.encode("utf-8"):
        spliced = encode_on(stat, layout, kept)
        if spliced is not None:
            return spliced[0]
    return encode(stat)  # which says why, if it cannot (RecordError)


def layout_of(old: bytes) -> Layout | None:
    """The :data:`Layout` of the stored record ``old``; ``None`` when it is not a sound
    version 3 record whose table the spliced encoding can reuse."""
    try:
        head = _HEADER.unpack_from(old)
    except struct.error:
        return None
    n_old, dlen = head[2], head[3]
    pos = _SPLICE_BODY_AT + dlen
    if head[0] != VERSION or pos >= len(old):
        return None
    end = len(old) - (_EXT.size if head[1] & _EXT_BIT else 0)
    parts: list[bytes] = []
    classes: dict[str, int] = {}
    table_at = pos + 1
    for i in range(1, old[pos] + 1):
        elen = old[table_at] if table_at < end else 0
        part = old[table_at : table_at + 1 + elen]
        if not elen or len(part) != elen + 1:
            return None
        try:
            classes[part[1:].decode("utf-8")] = i
        except UnicodeDecodeError:
            return None
        parts.append(part)
        table_at += 1 + elen
    if len(classes) != len(parts) or table_at + n_old * _ENTRY.size != end:
        return None
    return _canonical(head[9], old[_SPLICE_BODY_AT:pos], parts, classes, old[table_at:end])


def _canonical(
    first_seen: float, domain: bytes, parts: list[bytes], classes: dict[str, int], entries: bytes
) -> Layout | None:
    """The layout, if its table is numbered as :func:`encode` numbers it (by first use
    over the entries, every class used): what :func:`encode_on` relies on."""
    if parts:
        first_use = dict.fromkeys(entries[_ENTRY.size - 1 :: _ENTRY.size])
        first_use.pop(0, None)
        if list(first_use) != list(range(1, len(parts) + 1)):
            return None
    return first_seen, domain, tuple(parts), classes, entries


def encode_on(stat: DomainStat, layout: Layout, kept: int) -> tuple[bytes, Layout] | None:
    """:func:`encode` of ``stat`` and its :data:`Layout`, from the layout of the record it
    extends (``stat.recent`` starts with the last ``kept`` entries of that record, then new
    ones; its domain is the layout's). ``None`` when the shortcut does not apply
    (``first_seen`` moved, a time :func:`encode` refuses, a class it would truncate):
    the caller then encodes in full."""
    first_seen, domain, parts, classes, entries = layout
    recent = stat.recent
    size = _ENTRY.size
    drop = len(entries) // size - kept
    top = MAX_TIME
    expires = stat.state_expires_at
    if not (
        stat.first_seen == first_seen
        and drop >= 0
        and 0 <= kept <= len(recent) <= 255
        and 0.0 <= first_seen <= top
        and 0.0 <= stat.last_seen <= top
        and 0.0 <= stat.state_changed_at <= top
        and 0.0 <= stat.probed_at <= top
        and (expires is None or expires >= 0.0)
    ):
        return None
    kept_bytes = entries
    if not kept:
        kept_bytes, parts, classes = b"", (), {}
    elif drop:
        kept_bytes = entries[drop * size :]
        if parts and entries[size - 1 : drop * size : size].count(0) != drop:
            # A dropped entry had an error class: encode() numbers the classes by first
            # use over the entries, so the order (or the set) may have changed: renumber.
            renumbered = _renumbered(parts, classes, kept_bytes)
            if renumbered is None:
                return None
            parts, classes, kept_bytes = renumbered
    if kept < len(recent):
        added = _pack_added(recent, kept, first_seen, classes)
        if added is None:
            return None
        new_parts, classes, packed = added
        if new_parts:
            parts = parts + tuple(new_parts)
        kept_bytes += packed
    ext = _extension(stat)
    try:
        head = _HEADER.pack(*_header_fields(stat, _state_byte(stat, ext), len(recent), len(domain)))
    except struct.error:
        return None
    body = b"".join((domain, bytes((len(parts),)), *parts, kept_bytes, ext))
    data = b"".join((head, _CRC.pack(_crc32(head), _crc32(body)), body))
    return data, (first_seen, domain, parts, classes, kept_bytes)


def _renumbered(
    parts: tuple[bytes, ...], classes: dict[str, int], entries: bytes
) -> tuple[tuple[bytes, ...], dict[str, int], bytes] | None:
    """The table and the entries numbered by first use over ``entries`` (unused classes dropped)."""
    size = _ENTRY.size
    index_bytes = entries[size - 1 :: size]
    first_use = dict.fromkeys(index_bytes)
    first_use.pop(0, None)
    used = list(first_use)
    if used == list(range(1, len(parts) + 1)):
        return parts, classes, entries
    if used and max(used) > len(parts):
        return None
    renumbered = bytearray(entries)
    renumbered[size - 1 :: size] = index_bytes.translate(bytes.maketrans(bytes(used), bytes(range(1, len(used) + 1))))
    names = list(classes)
    return (
        tuple(parts[i - 1] for i in used),
        {names[i - 1]: new_index for new_index, i in enumerate(used, 1)},
        bytes(renumbered),
    )


#: Where the body (domain, error table, entries) starts in a stored record (the layout
#: :func:`encode` writes: header, two CRC32s, body).
_SPLICE_BODY_AT = _BODY_AT


def _pack_added(
    recent: list[RecentEntry], kept: int, base: float, classes: dict[str, int]
) -> tuple[list[bytes], dict[str, int], bytes] | None:
    """The table entries of the new error classes, the classes with them (a new dict when
    there are any: ``classes`` may be shared) and the packed entries ``recent[kept:]``;
    ``None`` when encode would truncate a class."""
    codes = _ENTRY_CODE
    flat: list[int] = []
    parts: list[bytes] = []
    for entry in recent[kept:]:
        err = entry.error_class
        index = 0
        if err:
            index = classes.get(err, 0)
            if not index:
                raw = err.encode("utf-8")
                if len(raw) > 255:
                    return None
                if not parts:
                    classes = dict(classes)
                index = classes[err] = len(classes) + 1
                parts.append(bytes((len(raw),)) + raw)
        offset = round(entry.at - base)
        if offset < 0:
            offset = 0
        elif offset > U32_MAX:
            offset = U32_MAX
        flat += (offset, codes[entry.method, entry.outcome], entry.status or 0, index)
    if len(classes) > 255:
        return None
    try:
        packed = _ENTRY.pack(*flat) if len(flat) == 4 else _entries_struct(len(flat) // 4).pack(*flat)
    except struct.error:  # a status no record can hold: encode() says so
        return None
    return parts, classes, packed
