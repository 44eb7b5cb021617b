"""The per-domain record (``DomainStat``), its vocabulary, and its binary encoding.

Pure data: no Scrapy, no I/O. The encoding is versioned and compact: a fixed
header (state, counters, timestamps) that the hot decision path reads with a
single ``struct.unpack``, followed by the ``recent`` entries, decoded lazily only
when an outcome is applied. :func:`decode` never raises on garbage: it raises
:class:`RecordError`, which stores turn into "treat as unknown, warn once".
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from enum import Enum

__all__ = [
    "DomainStat",
    "Method",
    "Outcome",
    "RecentEntry",
    "RecordError",
    "State",
    "decode",
    "encode",
]


class State(str, Enum):
    UNKNOWN = "unknown"
    DEAD = "dead"
    ANTIBOT_SOFT = "antibot-soft"
    ANTIBOT_HARD = "antibot-hard"
    FRIENDLY = "friendly"
    COLD = "cold"

    def __str__(self) -> str:
        return self.value


class Method(str, Enum):
    HEAD = "head"
    FETCH = "fetch"
    TAB = "tab"

    def __str__(self) -> str:
        return self.value


class Outcome(str, Enum):
    OK_CONTACT = "ok-contact"
    OK_EMPTY = "ok-empty"
    HTTP_ERROR = "http-error"
    NETWORK_ERROR = "network-error"
    ANTIBOT = "antibot"
    DEAD = "dead"
    #: A HEAD probe that says nothing either way (2xx/3xx, 405/501 "HEAD not
    #: supported", 5xx): the policy stamps ``probed_at`` and keeps no entry.
    NO_VERDICT = "no-verdict"

    def __str__(self) -> str:
        return self.value


#: ``error_class`` prefix of an antibot verdict that is a hard block (firewall
#: rule, IP ban): it sends the domain straight to ``antibot-hard``.
HARD_BLOCK_PREFIX = "block:"


@dataclass(slots=True)
class RecentEntry:
    at: float
    method: Method
    outcome: Outcome
    status: int | None = None
    error_class: str | None = None

    @property
    def is_hard_block(self) -> bool:
        return self.outcome is Outcome.ANTIBOT and bool(
            self.error_class and self.error_class.startswith(HARD_BLOCK_PREFIX)
        )


@dataclass(slots=True)
class DomainStat:
    domain: str
    state: State = State.UNKNOWN
    recent: list[RecentEntry] = field(default_factory=list)
    fetch_total: int = 0
    fetch_ok: int = 0
    fetch_ok_empty: int = 0
    tab_total: int = 0
    tab_ok: int = 0
    first_seen: float = 0.0
    last_seen: float = 0.0
    state_changed_at: float = 0.0
    #: ``None``: the state has no TTL (``friendly``).
    state_expires_at: float | None = None
    #: When the HEAD probe of the current period ran (0: not yet).
    probed_at: float = 0.0

    def copy(self) -> DomainStat:
        new = DomainStat(**{name: getattr(self, name) for name in _FIELDS})
        new.recent = list(self.recent)
        return new


_FIELDS = tuple(DomainStat.__dataclass_fields__)

# ---------------------------------------------------------------- encoding

VERSION = 2
_STATES = list(State)
_METHODS = list(Method)
_OUTCOMES = list(Outcome)
_STATE_CODE = {s: i for i, s in enumerate(_STATES)}
_METHOD_CODE = {m: i for i, m in enumerate(_METHODS)}
_OUTCOME_CODE = {o: i for i, o in enumerate(_OUTCOMES)}
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
_U32 = 0xFFFFFFFF


class RecordError(ValueError):
    """A stored record that cannot be decoded."""


def encode(stat: DomainStat) -> bytes:
    domain = stat.domain.encode("utf-8")
    recent = stat.recent
    expires = stat.state_expires_at
    parts = [
        _HEADER.pack(
            VERSION,
            _STATE_CODE[stat.state],
            len(recent),
            len(domain),
            min(stat.fetch_total, _U32),
            min(stat.fetch_ok, _U32),
            min(stat.fetch_ok_empty, _U32),
            min(stat.tab_total, _U32),
            min(stat.tab_ok, _U32),
            stat.first_seen,
            stat.last_seen,
            stat.state_changed_at,
            float("nan") if expires is None else expires,
            stat.probed_at,
        ),
        domain,
    ]
    base = stat.first_seen
    table: dict[bytes, int] = {}
    packed = []
    for entry in recent:
        err = (entry.error_class or "").encode("utf-8")[:255]
        index = 0
        if err:
            index = table.get(err, 0)
            if not index:
                index = table[err] = len(table) + 1
        offset = int(entry.at - base)
        packed.append(
            _ENTRY.pack(
                min(max(offset, 0), _U32),
                (_METHOD_CODE[entry.method] << 4) | _OUTCOME_CODE[entry.outcome],
                entry.status or 0,
                index,
            )
        )
    parts.append(bytes((len(table),)))
    for err in table:
        parts.append(bytes((len(err),)))
        parts.append(err)
    parts.extend(packed)
    return b"".join(parts)


def decode_header(data: bytes) -> tuple[State, float | None, float, float]:
    """The decision fields only: ``(state, expires_at, changed_at, probed_at)``."""
    try:
        head = _HEADER.unpack_from(data)
        if head[0] != VERSION:
            raise RecordError(f"unsupported record version {head[0]}")
        state = _STATES[head[1]]
    except (struct.error, IndexError, TypeError) as exc:
        raise RecordError(str(exc)) from exc
    expires = head[12]
    return state, (None if math.isnan(expires) else expires), head[11], head[13]


def decode(data: bytes) -> DomainStat:
    try:
        head = _HEADER.unpack_from(data)
        if head[0] != VERSION:
            raise RecordError(f"unsupported record version {head[0]}")
        pos = _HEADER.size
        n_recent, dlen = head[2], head[3]
        domain = data[pos : pos + dlen].decode("utf-8")
        if len(domain.encode("utf-8")) != dlen:
            raise RecordError("truncated domain")
        pos += dlen
        table: list[str | None] = [None]
        for _ in range(data[pos]):
            elen = data[pos + 1]
            raw = data[pos + 2 : pos + 2 + elen]
            if len(raw) != elen or not elen:
                raise RecordError("truncated error class")
            table.append(raw.decode("utf-8", "replace"))
            pos += 1 + elen
        pos += 1
        base = head[9]
        end = pos + n_recent * _ENTRY.size
        if end != len(data):
            raise RecordError("truncated entries" if end > len(data) else "trailing bytes")
        codes = _CODES
        recent = [
            RecentEntry(base + offset, *codes[code], status or None, table[index])
            for offset, code, status, index in _ENTRY.iter_unpack(data[pos:end])
        ]
        expires = head[12]
        return DomainStat(
            domain=domain,
            state=_STATES[head[1]],
            recent=recent,
            fetch_total=head[4],
            fetch_ok=head[5],
            fetch_ok_empty=head[6],
            tab_total=head[7],
            tab_ok=head[8],
            first_seen=head[9],
            last_seen=head[10],
            state_changed_at=head[11],
            state_expires_at=None if math.isnan(expires) else expires,
            probed_at=head[13],
        )
    except RecordError:
        raise
    except (struct.error, IndexError, KeyError, TypeError, UnicodeDecodeError, ValueError) as exc:
        raise RecordError(f"corrupt record: {exc}") from exc
