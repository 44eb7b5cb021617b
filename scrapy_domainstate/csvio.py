"""CSV export and import of :class:`~scrapy_domainstate.record.DomainStat` records.

One row per domain, one column per field of the record (``docs/SPEC.md`` section 5), in
this order: :data:`COLUMNS`. Timestamps are Unix seconds written with ``repr`` (so
they read back bit for bit); ``state_expires_at`` is empty when the state has no
TTL; ``recent`` is a compact JSON list of ``{"at", "method", "outcome"[, "status"]
[, "error_class"]}`` objects, oldest first.

:func:`read_csv` validates every row and never raises on bad data: it returns the
good records and a list of :class:`RowError` (``line N: problem``), so a caller can
refuse to write anything when one row is wrong. Pure: no Scrapy, no store.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from typing import Any, TextIO

from .keys import MAX_KEY_BYTES, domain_key, host_of
from .record import DomainStat, Method, Outcome, RecentEntry, State

__all__ = ["COLUMNS", "RowError", "read_csv", "row_of", "write_csv"]

#: The record's fields, ``recent`` (a JSON cell) last.
COLUMNS = (*(f.name for f in fields(DomainStat) if f.name != "recent"), "recent")
_COUNTERS = ("fetch_total", "fetch_ok", "fetch_ok_empty", "tab_total", "tab_ok")
_TIMES = ("first_seen", "last_seen", "state_changed_at", "probed_at")
_VALID_STATES = ", ".join(s.value for s in State)
_VALID_METHODS = ", ".join(m.value for m in Method)
_VALID_OUTCOMES = ", ".join(o.value for o in Outcome)
#: Limits of the binary record (``record.encode``): counters and offsets are u32,
#: a status is u16, an error class at most 255 bytes, at most 255 recent entries.
_U32 = 0xFFFFFFFF
_MAX_STATUS = 0xFFFF
_MAX_ERROR_BYTES = 255
_MAX_RECENT = 255
#: Hex digits after the '#' of a shortened key (keys._DIGEST_CHARS).
_DIGEST_CHARS = 16
_METHOD_OF = {m.value: m for m in Method}
_OUTCOME_OF = {o.value: o for o in Outcome}
_ENTRY_KEYS = frozenset({"at", "method", "outcome", "status", "error_class"})


@dataclass(frozen=True)
class RowError:
    """A problem in one CSV line (1 is the header)."""

    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


# ------------------------------------------------------------------ writing


def _time(value: float) -> str:
    return repr(float(value))


def _recent_json(recent: list[RecentEntry]) -> str:
    entries = []
    for e in recent:
        item: dict[str, Any] = {"at": float(e.at), "method": str(e.method), "outcome": str(e.outcome)}
        if e.status is not None:
            item["status"] = e.status
        if e.error_class is not None:
            item["error_class"] = e.error_class
        entries.append(item)
    return json.dumps(entries, separators=(",", ":"), ensure_ascii=False)


def row_of(stat: DomainStat) -> list[str]:
    """The CSV cells of one record, in :data:`COLUMNS` order."""
    return [
        stat.domain,
        str(stat.state),
        *(str(int(getattr(stat, name))) for name in _COUNTERS),
        _time(stat.first_seen),
        _time(stat.last_seen),
        _time(stat.state_changed_at),
        "" if stat.state_expires_at is None else _time(stat.state_expires_at),
        _time(stat.probed_at),
        _recent_json(stat.recent),
    ]


def write_csv(
    stats: Iterable[DomainStat],
    fh: TextIO,
    *,
    keep: Callable[[DomainStat], bool] | None = None,
    tick: Callable[[int], None] | None = None,
) -> int:
    """Write a header and one row per record to ``fh``; returns the rows written.

    ``keep`` filters records; ``tick(n_seen)`` is called for every record read
    (progress display). ``fh`` should be opened with ``newline=""``.
    """
    writer = csv.writer(fh, lineterminator="\n")
    writer.writerow(COLUMNS)
    written = seen = 0
    for stat in stats:
        seen += 1
        if tick is not None:
            tick(seen)
        if keep is not None and not keep(stat):
            continue
        writer.writerow(row_of(stat))
        written += 1
    return written


# ------------------------------------------------------------------ reading


class _Bad(ValueError):
    pass


def _int_cell(name: str, text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise _Bad(f"{name} must be a whole number, got {text!r}") from None
    if not 0 <= value <= _U32:
        raise _Bad(f"{name} must be between 0 and {_U32}, got {value}")
    return value


def _float(name: str, value: Any) -> float:
    if isinstance(value, bool):
        raise _Bad(f"{name} must be a number, got {value!r}")
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise _Bad(f"{name} must be a number (Unix seconds), got {value!r}") from None
    if not math.isfinite(number) or number < 0:
        raise _Bad(f"{name} must be a finite number >= 0, got {value!r}")
    return number


def _state(text: str) -> State:
    try:
        return State(text.strip().lower())
    except ValueError:
        raise _Bad(f"unknown state {text!r}; valid states: {_VALID_STATES}") from None


def _entry(i: int, item: Any, first_seen: float) -> RecentEntry:
    where = f"recent[{i}]"
    if not isinstance(item, dict):
        raise _Bad(f"{where} must be an object, got {item!r}")
    if not item.keys() <= _ENTRY_KEYS:
        raise _Bad(f"{where} has unknown keys: {', '.join(sorted(set(item) - _ENTRY_KEYS))}")
    if "at" not in item or "method" not in item or "outcome" not in item:
        raise _Bad(f"{where} needs 'at', 'method' and 'outcome'")
    at = item["at"]
    if type(at) is not float or not math.isfinite(at):
        at = _float(f"{where}.at", at)
    if not 0 <= at - first_seen <= _U32:
        raise _Bad(f"{where}.at ({at!r}) must lie between first_seen ({first_seen!r}) and 136 years after it")
    method = _METHOD_OF.get(item["method"]) if isinstance(item["method"], str) else None
    if method is None:
        raise _Bad(f"{where}.method {item['method']!r} is not one of: {_VALID_METHODS}")
    outcome = _OUTCOME_OF.get(item["outcome"]) if isinstance(item["outcome"], str) else None
    if outcome is None:
        raise _Bad(f"{where}.outcome {item['outcome']!r} is not one of: {_VALID_OUTCOMES}")
    status = item.get("status")
    if status is not None and (type(status) is not int or not 0 < status <= _MAX_STATUS):
        raise _Bad(f"{where}.status must be an HTTP status or null, got {status!r}")
    error_class = item.get("error_class")
    if error_class is not None:
        if not isinstance(error_class, str):
            raise _Bad(f"{where}.error_class must be a string or null, got {error_class!r}")
        try:
            size = len(error_class.encode("utf-8"))
        except UnicodeEncodeError:
            raise _Bad(f"{where}.error_class is not valid Unicode text") from None
        if size > _MAX_ERROR_BYTES:
            raise _Bad(f"{where}.error_class is longer than {_MAX_ERROR_BYTES} bytes")
    return RecentEntry(at, method, outcome, status, error_class)


def _recent(text: str, first_seen: float) -> list[RecentEntry]:
    if not text.strip():
        return []
    try:
        items = json.loads(text)
    except ValueError as exc:
        raise _Bad(f"recent is not valid JSON ({exc})") from None
    if not isinstance(items, list):
        raise _Bad("recent must be a JSON list")
    if len(items) > _MAX_RECENT:
        raise _Bad(f"recent has {len(items)} entries; at most {_MAX_RECENT}")
    return [_entry(i, item, first_seen) for i, item in enumerate(items)]


def _domain(text: str, per_hostname: bool) -> str:
    raw = text.strip()
    if not raw:
        raise _Bad("domain is empty")
    if "#" in raw:
        # A key shortened by keys._fit ("prefix#sha1-digest"): stored as it is.
        prefix, _, digest = raw.rpartition("#")
        if (
            len(digest) == _DIGEST_CHARS
            and all(c in "0123456789abcdef" for c in digest)
            and prefix
            and host_of(prefix) == prefix
            and len(raw.encode("utf-8")) <= MAX_KEY_BYTES
        ):
            return raw
        raise _Bad(f"domain {raw!r} is not a host name nor a shortened key")
    key = domain_key(raw, per_hostname=per_hostname)
    if not key:
        raise _Bad(f"domain {raw!r} has no usable host name")
    return key


def _parse_row(cells: dict[str, str], per_hostname: bool) -> DomainStat:
    domain = _domain(cells["domain"], per_hostname)
    state = _state(cells["state"])
    counters = {name: _int_cell(name, cells[name]) for name in _COUNTERS}
    times = {name: _float(name, cells[name]) for name in _TIMES}
    expires_text = cells["state_expires_at"].strip()
    expires = None if expires_text == "" else _float("state_expires_at", expires_text)
    recent = _recent(cells["recent"], times["first_seen"])
    return DomainStat(
        domain=domain,
        state=state,
        recent=recent,
        state_expires_at=expires,
        **counters,
        **times,
    )


def read_csv(
    fh: TextIO, *, per_hostname: bool = False, tick: Callable[[int], None] | None = None
) -> tuple[list[DomainStat], list[RowError]]:
    """Parse and validate a CSV written by :func:`write_csv`.

    Returns ``(records, errors)``; ``records`` holds the rows that are valid, so a
    caller should write nothing unless ``errors`` is empty. Domains are normalised
    with :func:`~scrapy_domainstate.keys.domain_key` (``per_hostname`` as the
    crawl's setting); two rows with the same key are an error. Columns may come in
    any order, but all of :data:`COLUMNS` must be there and no other. ``tick(n)``
    is called after each row (progress display).
    """
    errors: list[RowError] = []
    records: list[DomainStat] = []
    reader = csv.reader(fh)
    try:
        header = next(reader, None)
    except csv.Error as exc:
        return [], [RowError(1, f"not CSV: {exc}")]
    if header is None:
        return [], [RowError(1, "empty file: expected a header line")]
    names = [h.strip().lstrip("\ufeff") for h in header]
    missing = [c for c in COLUMNS if c not in names]
    unknown = [n for n in names if n not in COLUMNS]
    dupes = sorted({n for n in names if names.count(n) > 1})
    problems = []
    if missing:
        problems.append(f"missing columns: {', '.join(missing)}")
    if unknown:
        problems.append(f"unknown columns: {', '.join(repr(n) for n in unknown)}")
    if dupes:
        problems.append(f"repeated columns: {', '.join(dupes)}")
    if problems:
        return [], [RowError(1, "; ".join(problems) + f" (expected: {','.join(COLUMNS)})")]
    index = {name: i for i, name in enumerate(names)}
    seen: dict[str, int] = {}
    line = reader.line_num + 1
    n = 0
    while True:
        if tick is not None:
            tick(n)
            n += 1
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            errors.append(RowError(line, f"not CSV: {exc}"))
            line = reader.line_num + 1
            continue
        start, line = line, reader.line_num + 1
        if not cells or all(not c.strip() for c in cells):
            continue  # blank line
        if len(cells) != len(names):
            errors.append(RowError(start, f"expected {len(names)} fields, got {len(cells)}"))
            continue
        try:
            stat = _parse_row({name: cells[i] for name, i in index.items()}, per_hostname)
        except _Bad as exc:
            errors.append(RowError(start, str(exc)))
            continue
        first = seen.get(stat.domain)
        if first is not None:
            errors.append(RowError(start, f"domain {stat.domain} is already on line {first}"))
            continue
        seen[stat.domain] = start
        records.append(stat)
    return records, errors
