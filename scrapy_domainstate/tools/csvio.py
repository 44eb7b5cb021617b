"""CSV export and import of :class:`~scrapy_domainstate.core.record.DomainStat` records.

One row per domain, one column per field of the record (``docs/SPEC.md`` section 5), in
this order: :data:`COLUMNS`. Timestamps are Unix seconds written with ``repr`` (so
they read back bit for bit); ``state_expires_at`` is empty when the state has no
TTL; ``recent`` is a compact JSON list of ``{"at", "method", "outcome"[, "status"]
[, "error_class"]}`` objects, oldest first.

:func:`iter_csv` validates every row and never raises on bad data: it yields the
records of good rows and a :class:`RowError` (``line N: problem``) for each bad one,
one row at a time (a file of any size streams through it; :func:`read_csv` collects
them in memory), so a caller can refuse to write anything when one row is wrong;
each error names every problem of
its row, and numbers or text a record cannot hold (a 400-digit integer, NaN, text
that is not UTF-8, nesting too deep) are errors like any other. A minimal file with
the columns ``domain,state[,ttl]`` seeds states (a block list). Entry times are
written as whole seconds (what the record keeps), never after ``last_seen``. Pure:
no Scrapy, no store.
"""

from __future__ import annotations

import csv
import json
import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any, TextIO

from scrapy_domainstate.core.clock import parse_duration
from scrapy_domainstate.core.config import DEFAULT_TTL
from scrapy_domainstate.core.keys import (
    _DIGEST_CHARS,
    MAX_KEY_BYTES,
    domain_key,
    host_fact_key,
    host_of,
    purpose_key,
    purpose_of_key,
)
from scrapy_domainstate.core.record import DomainStat, Method, Outcome, RecentEntry, State
from scrapy_domainstate.store.codec import MAX_TIME, U32_MAX

__all__ = [
    "COLUMNS",
    "DERIVED_COLUMNS",
    "EXPORTED_COLUMNS",
    "MINIMAL_COLUMNS",
    "FirstLine",
    "RowError",
    "iter_csv",
    "read_csv",
    "row_of",
    "write_csv",
]

#: The record's fields, ``recent`` (a JSON cell) last.
#: Fields added in 0.2 (the dead confirmation chain, a learned "needs the browser"): after
#: ``recent``, and optional on import (absent columns, or rows that stop before them, as an
#: older export has them, take the defaults).
_OPTIONAL = {"dead_visits": "0", "dead_at": "0.0", "browser_since": "0.0"}
COLUMNS = (*(f.name for f in fields(DomainStat) if f.name != "recent" and f.name not in _OPTIONAL), "recent")
#: What an export writes: :data:`COLUMNS`, then the optional columns.
EXPORTED_COLUMNS = (*COLUMNS, *_OPTIONAL)
#: Written by ``scrapy domainstate export`` after :data:`EXPORTED_COLUMNS`, read by people, ignored
#: on import (derived from the records): ``part_of`` says whose part a record is (``host of
#: example.com`` for a hostname's own facts, ``items of example.com`` for a purpose's worth;
#: empty for a domain), ``effective_state`` the state its requests are decided by now.
DERIVED_COLUMNS = ("part_of", "effective_state")
#: Columns an older row may stop before (the derived ones are never needed).
_OMISSIBLE = frozenset((*_OPTIONAL, *DERIVED_COLUMNS))
_COUNTERS = ("fetch_total", "fetch_ok", "fetch_ok_empty", "tab_total", "tab_ok")
_TIMES = ("first_seen", "last_seen", "state_changed_at", "probed_at")
_VALID_STATES = ", ".join(s.value for s in State)
_VALID_METHODS = ", ".join(m.value for m in Method)
_VALID_OUTCOMES = ", ".join(o.value for o in Outcome)
#: Limits of the binary record (``record.encode``): counters and offsets are u32,
#: a status is u16, an error class at most 255 bytes, at most 255 recent entries.
_MAX_STATUS = 0xFFFF
_MAX_ERROR_BYTES = 255
_MAX_RECENT = 255
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


def _entry_time(at: float, last_seen: float) -> float:
    """An entry's time as the record keeps it: whole seconds (the record stores entries as
    whole seconds after ``first_seen``, so a fraction would only repeat first_seen's),
    never after ``last_seen``."""
    whole = float(round(at))
    return last_seen if last_seen and whole > last_seen else whole


def _recent_json(recent: list[RecentEntry], last_seen: float = 0.0) -> str:
    entries = []
    for e in recent:
        item: dict[str, Any] = {
            "at": _entry_time(e.at, last_seen),
            "method": str(e.method),
            "outcome": str(e.outcome),
        }
        if e.status is not None:
            item["status"] = e.status
        if e.error_class is not None:
            item["error_class"] = e.error_class
        entries.append(item)
    return json.dumps(entries, separators=(",", ":"), ensure_ascii=False)


def row_of(stat: DomainStat) -> list[str]:
    """The CSV cells of one record, in :data:`EXPORTED_COLUMNS` order."""
    return [
        stat.domain,
        str(stat.state),
        *(str(int(getattr(stat, name))) for name in _COUNTERS),
        _time(stat.first_seen),
        _time(stat.last_seen),
        _time(stat.state_changed_at),
        "" if stat.state_expires_at is None else _time(stat.state_expires_at),
        _time(stat.probed_at),
        _recent_json(stat.recent, stat.last_seen),
        str(int(stat.dead_visits)),
        _time(stat.dead_at),
        _time(stat.browser_since),
    ]


def write_csv(
    stats: Iterable[DomainStat],
    fh: TextIO,
    *,
    keep: Callable[[DomainStat], bool] | None = None,
    tick: Callable[[int], None] | None = None,
    derived: Callable[[DomainStat], tuple[str, str]] | None = None,
) -> int:
    """Write a header and one row per record to ``fh``; returns the rows written.

    ``keep`` filters records; ``tick(n_seen)`` is called for every record read
    (progress display); ``derived`` adds the :data:`DERIVED_COLUMNS`. ``fh`` should be
    opened with ``newline=""``.
    """
    writer = csv.writer(fh, lineterminator="\n")
    writer.writerow(EXPORTED_COLUMNS if derived is None else (*EXPORTED_COLUMNS, *DERIVED_COLUMNS))
    written = seen = 0
    for stat in stats:
        seen += 1
        if tick is not None:
            tick(seen)
        if keep is not None and not keep(stat):
            continue
        writer.writerow(row_of(stat) if derived is None else (*row_of(stat), *derived(stat)))
        written += 1
    return written


# ------------------------------------------------------------------ reading

#: The columns of a minimal row (``domain,state[,ttl]``): the domain is set to that state as
#: by ``scrapy domainstate set`` on a new domain (``ttl`` as ``set --ttl``; empty: the default).
MINIMAL_COLUMNS = ("domain", "state", "ttl")


class _Bad(ValueError):
    pass


def _int_cell(name: str, text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise _Bad(f"{name} must be a whole number, got {text[:40]!r}") from None
    if not 0 <= value <= U32_MAX:
        raise _Bad(f"{name} must be between 0 and {U32_MAX}, got {text.strip()[:40]}")
    return value


def _float(name: str, value: Any) -> float:
    if isinstance(value, bool):
        raise _Bad(f"{name} must be a number, got {value!r}")
    if isinstance(value, int) and not -(10**20) < value < 10**20:
        raise _Bad(f"{name} must be a time in Unix seconds, got a {len(str(abs(value)))}-digit number")
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError, OverflowError):
        raise _Bad(f"{name} must be a number (Unix seconds), got {str(value)[:40]!r}") from None
    if not math.isfinite(number) or number < 0:
        raise _Bad(f"{name} must be a finite number >= 0, got {str(value)[:40]!r}")
    if number > MAX_TIME:
        raise _Bad(f"{name} must be a time before the year 10000 (<= {MAX_TIME:.0f}), got {str(value)[:40]!r}")
    return number


def _state(text: str) -> State:
    try:
        return State(text.strip().lower())
    except ValueError:
        raise _Bad(f"unknown state {text[:40]!r}; valid states: {_VALID_STATES}") from None


def _entry_at(where: str, value: Any, first_seen: float | None) -> float:
    """An entry's time, checked and put on the record's grid; raises _Bad."""
    at: float = value
    if type(value) is not float or not math.isfinite(value):
        at = _float(f"{where}.at", value)
    if first_seen is not None:
        # On the record's grid (whole seconds after first_seen), as the store keeps it:
        # an exported time (whole seconds) reads back as the entry it was.
        offset = round(at - first_seen)
        if not 0 <= offset <= U32_MAX:
            raise _Bad(f"{where}.at ({at!r}) must lie between first_seen ({first_seen!r}) and 136 years after it")
        at = first_seen + offset
    return at


def _error_class_problem(where: str, error_class: Any) -> str | None:
    """What is wrong with a non-null error_class, or ``None``."""
    if not isinstance(error_class, str):
        return f"{where}.error_class must be a string or null, got {str(error_class)[:40]}"
    try:
        size = len(error_class.encode("utf-8"))
    except UnicodeEncodeError:
        return f"{where}.error_class is not valid Unicode text"
    if size > _MAX_ERROR_BYTES:
        return f"{where}.error_class is longer than {_MAX_ERROR_BYTES} bytes"
    return None


def _entry(i: int, item: Any, first_seen: float | None) -> RecentEntry:
    where = f"recent[{i}]"
    if not isinstance(item, dict):
        raise _Bad(f"{where} must be an object, got {str(item)[:40]}")
    if not item.keys() <= _ENTRY_KEYS:
        raise _Bad(f"{where} has unknown keys: {', '.join(sorted(set(item) - _ENTRY_KEYS))[:80]}")
    if "at" not in item or "method" not in item or "outcome" not in item:
        raise _Bad(f"{where} needs 'at', 'method' and 'outcome'")
    problems = []
    at = item["at"]
    try:
        at = _entry_at(where, at, first_seen)
    except _Bad as exc:
        problems.append(str(exc))
    method = _METHOD_OF.get(item["method"]) if isinstance(item["method"], str) else None
    if method is None:
        problems.append(f"{where}.method {str(item['method'])[:40]!r} is not one of: {_VALID_METHODS}")
    outcome = _OUTCOME_OF.get(item["outcome"]) if isinstance(item["outcome"], str) else None
    if outcome is None:
        problems.append(f"{where}.outcome {str(item['outcome'])[:40]!r} is not one of: {_VALID_OUTCOMES}")
    status = item.get("status")
    if status is not None and (type(status) is not int or not 0 < status <= _MAX_STATUS):
        problems.append(f"{where}.status must be an HTTP status or null, got {str(status)[:40]}")
    error_class = item.get("error_class")
    if error_class is not None:
        problem = _error_class_problem(where, error_class)
        if problem is not None:
            problems.append(problem)
    if problems:
        raise _Bad("; ".join(problems))
    return RecentEntry(at, method, outcome, status, error_class)  # type: ignore[arg-type]


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not a number JSON allows")


def _recent(text: str, first_seen: float | None) -> list[RecentEntry]:
    if not text.strip():
        return []
    try:
        items = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise _Bad("recent is nested too deep (it is a list of flat objects)") from None
    except ValueError as exc:
        raise _Bad(f"recent is not valid JSON ({str(exc)[:120]})") from None
    if not isinstance(items, list):
        raise _Bad("recent must be a JSON list")
    if len(items) > _MAX_RECENT:
        raise _Bad(f"recent has {len(items)} entries; at most {_MAX_RECENT}")
    out: list[RecentEntry] = []
    problems: list[str] = []
    for i, item in enumerate(items):
        try:
            out.append(_entry(i, item, first_seen))
        except _Bad as exc:
            problems.append(str(exc))
    if problems:
        raise _Bad("; ".join(problems))
    return out


def _domain(text: str, per_hostname: bool, hosts: bool = False) -> str:
    """The key of a row's ``domain`` cell: a domain key; with ``hosts`` (an export's full rows),
    a hostname whose facts are its own keeps its key (``blog.example.com``, see
    :func:`~.keys.host_fact_key`), so an export with host facts reads back as it was."""
    raw = text.strip()
    if not raw:
        raise _Bad("domain is empty")
    purposed = purpose_of_key(raw)
    if purposed is not None:
        # A site's worth to one purpose (keys.purpose_key): the site part is a key like any other.
        site, purpose = purposed
        if len(purpose) > 32 or not purpose.isprintable() or any(c.isspace() for c in purpose):
            raise _Bad(f"domain {raw[:80]!r}: {purpose[:40]!r} is not a purpose (items or a dotted path)")
        return purpose_key(_domain(site, per_hostname), purpose)
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
        raise _Bad(f"domain {raw[:80]!r} is not a host name nor a shortened key")
    try:
        key = (hosts and host_fact_key(raw, per_hostname)) or domain_key(raw, per_hostname=per_hostname)
    except (ValueError, UnicodeError):
        key = ""
    if not key:
        raise _Bad(f"domain {raw[:80]!r} has no usable host name")
    return key


class _Row:
    """Collects every problem of one row; each cell parsed once."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def cell(self, parse: Callable[..., Any], *args: Any) -> Any:
        try:
            return parse(*args)
        except _Bad as exc:
            self.problems.append(str(exc))
            return None


#: ``ttl`` cell for "the state's own TTL" (as ``DomainStore.set_state``'s ``ttl=-1``).
_DEFAULT_TTL_MARK = -1.0


def _ttl_cell(text: str) -> float | None:
    """Seconds, ``None`` (no TTL) or :data:`_DEFAULT_TTL_MARK` (empty or ``default``)."""
    value = text.strip().lower()
    if value in ("", "default"):
        return _DEFAULT_TTL_MARK
    try:
        seconds = parse_duration(value)
    except ValueError:
        seconds = math.nan
    if seconds is None:
        return None
    if not seconds > 0:
        raise _Bad(
            f"ttl must be a positive duration (90, 90m, 12h, 7d, 2w), 'none' for no TTL or empty for the "
            f"state's default; got {text[:40]!r}"
        )
    return seconds


def _parse_row(cells: dict[str, str], per_hostname: bool) -> DomainStat:
    row = _Row()
    domain = row.cell(_domain, cells["domain"], per_hostname, True)
    state = row.cell(_state, cells["state"])
    counters = {name: row.cell(_int_cell, name, cells[name]) for name in _COUNTERS}
    times = {name: row.cell(_float, name, cells[name]) for name in _TIMES if name != "probed_at"}
    probed_text = cells["probed_at"].strip()
    times["probed_at"] = 0.0 if probed_text == "" else row.cell(_float, "probed_at", probed_text)
    expires_text = cells["state_expires_at"].strip()
    expires = None if expires_text == "" else row.cell(_float, "state_expires_at", expires_text)
    recent = row.cell(_recent, cells["recent"], times["first_seen"])
    dead_visits = row.cell(_int_cell, "dead_visits", cells.get("dead_visits") or "0")
    learned = {name: row.cell(_float, name, cells.get(name) or "0.0") for name in ("dead_at", "browser_since")}
    if row.problems:
        raise _Bad("; ".join(row.problems))
    return DomainStat(
        domain=domain,
        state=state,
        recent=recent,
        state_expires_at=expires,
        **counters,
        **times,
        dead_visits=dead_visits,
        **learned,
    )


def _parse_minimal(
    cells: dict[str, str], per_hostname: bool, now: float, ttl: Mapping[State, float | None]
) -> DomainStat:
    row = _Row()
    domain = row.cell(_domain, cells["domain"], per_hostname)
    state = row.cell(_state, cells["state"])
    seconds = row.cell(_ttl_cell, cells.get("ttl", ""))
    if row.problems:
        raise _Bad("; ".join(row.problems))
    if seconds == _DEFAULT_TTL_MARK:
        seconds = ttl.get(state)
    expires = None if seconds is None else min(now + seconds, MAX_TIME)
    return DomainStat(domain, state, first_seen=now, last_seen=now, state_changed_at=now, state_expires_at=expires)


def _not_utf8(cells: list[str], names: list[str]) -> str | None:
    """The columns holding text that is not valid UTF-8 (a file read with
    ``errors="surrogateescape"``), or ``None``."""
    bad = []
    for i, cell in enumerate(cells):
        try:
            cell.encode("utf-8")
        except UnicodeEncodeError:
            bad.append(names[i] if i < len(names) else f"field {i + 1}")
    if not bad:
        return None
    return f"{', '.join(bad)}: not valid UTF-8 text"


def _header(reader: Any) -> list[str] | RowError:
    """The column names of the header line, or the error that it is missing or unreadable."""
    try:
        header = next(reader, None)
    except csv.Error as exc:
        return RowError(1, f"not CSV: {exc}")
    if header is None:
        return RowError(1, "empty file: expected a header line")
    names = [h.strip().lstrip("\ufeff") for h in header]
    bad_text = _not_utf8(names, names)
    if bad_text is not None:
        return RowError(1, "the header is not valid UTF-8 text")
    return names


def _header_error(names: list[str], minimal: bool) -> RowError | None:
    """The error of a header with missing, unknown or repeated columns, or ``None``."""
    expected = MINIMAL_COLUMNS if minimal else (*EXPORTED_COLUMNS, *DERIVED_COLUMNS)
    missing = [c for c in COLUMNS if c not in names] if not minimal else []
    unknown = [n for n in names if n not in expected]
    dupes = sorted({n for n in names if names.count(n) > 1})
    problems = []
    if missing:
        problems.append(f"missing columns: {', '.join(missing)}")
    if unknown:
        problems.append(f"unknown columns: {', '.join(repr(n[:40]) for n in unknown)}")
    if dupes:
        problems.append(f"repeated columns: {', '.join(dupes)}")
    if problems:
        return RowError(
            1,
            "; ".join(problems) + f" (expected: {','.join(COLUMNS)}; or the minimal domain,state[,ttl])",
        )
    return None


def _trailing_optional(names: list[str]) -> int:
    """How many optional columns end the header (an older file's rows may lack them)."""
    trailing_optional = 0
    while trailing_optional < len(names) and names[len(names) - 1 - trailing_optional] in _OMISSIBLE:
        trailing_optional += 1
    return trailing_optional


def _checked_cells(cells: list[str], names: list[str], trailing_optional: int) -> tuple[list[str], str | None]:
    """``cells`` padded for absent optional cells, and what is wrong with them (field
    count, then text that is not UTF-8) or ``None``."""
    if len(names) - trailing_optional <= len(cells) < len(names):
        cells = cells + [""] * (len(names) - len(cells))  # an older row: optional cells absent
    if len(cells) != len(names):
        hint = " (a cell holding commas, such as recent, must be in double quotes)" if len(cells) > len(names) else ""
        wanted = len(names) - trailing_optional if len(cells) < len(names) else len(names)
        return cells, f"expected {wanted} fields, got {len(cells)}{hint}"
    return cells, _not_utf8(cells, names)


def _columns(reader: Any) -> tuple[list[str], bool] | RowError:
    """The header's column names and whether they are the minimal ones, or its error."""
    names = _header(reader)
    if isinstance(names, RowError):
        return names
    minimal = set(names) <= set(MINIMAL_COLUMNS) and {"domain", "state"} <= set(names)
    header_error = _header_error(names, minimal)
    return (names, minimal) if header_error is None else header_error


def read_csv(
    fh: TextIO,
    *,
    per_hostname: bool = False,
    tick: Callable[[int], None] | None = None,
    now: float | None = None,
    ttl: Mapping[State, float | None] | None = None,
) -> tuple[list[DomainStat], list[RowError]]:
    """Parse and validate a CSV written by :func:`write_csv`, or a minimal one, in memory.

    Returns ``(records, errors)``: what :func:`iter_csv` yields, sorted into the records
    of the valid rows and one :class:`RowError` per bad row, so a caller should write
    nothing unless ``errors`` is empty. Holds every record: for a file of any size,
    iterate :func:`iter_csv` instead (``scrapy domainstate import`` does).
    """
    errors: list[RowError] = []
    records: list[DomainStat] = []
    for item in iter_csv(fh, per_hostname=per_hostname, tick=tick, now=now, ttl=ttl):
        if isinstance(item, RowError):
            errors.append(item)
        else:
            records.append(item)
    return records, errors


#: ``first_line(key, line)`` of :func:`iter_csv`: remembers that ``key`` is on ``line``
#: and returns ``None``, or returns the line that already holds ``key``.
FirstLine = Callable[[str, int], "int | None"]


def _in_memory_lines() -> FirstLine:
    seen: dict[str, int] = {}

    def first_line(key: str, line: int) -> int | None:
        first = seen.get(key)
        if first is None:
            seen[key] = line
        return first

    return first_line


def iter_csv(
    fh: TextIO,
    *,
    per_hostname: bool = False,
    tick: Callable[[int], None] | None = None,
    now: float | None = None,
    ttl: Mapping[State, float | None] | None = None,
    first_line: FirstLine | None = None,
) -> Iterator[DomainStat | RowError]:
    """Parse and validate a CSV written by :func:`write_csv`, or a minimal one, row by row.

    Yields, in line order, the record of each valid row and one :class:`RowError` per
    bad row, naming every problem of the row (a header that is missing or wrong: one
    error for line 1, and nothing else). Domains are normalised with
    :func:`~scrapy_domainstate.core.keys.domain_key` (``per_hostname`` as the crawl's
    setting); two rows with the same key are an error, found by ``first_line`` (see
    :data:`FirstLine`; default: a dict of every key, in memory). Columns may come in
    any order: either all of :data:`COLUMNS` and no other, or the minimal
    ``domain,state[,ttl]`` (:data:`MINIMAL_COLUMNS`): each domain then gets a new
    record in that state at ``now`` (default: the current time) with ``ttl`` (a
    duration such as ``7d``, ``none`` for no TTL; empty: the state's TTL in ``ttl``,
    default the plugin's defaults). Text that is not UTF-8 is reported by line when
    ``fh`` decodes with ``errors="surrogateescape"``. ``tick(n)`` is called after each
    row (progress display). Keeps nothing of a row once it is yielded.
    """
    reader = csv.reader(fh)
    columns = _columns(reader)
    if isinstance(columns, RowError):
        yield columns
        return
    names, minimal = columns
    if minimal:
        now = time.time() if now is None else now
        ttl = DEFAULT_TTL if ttl is None else ttl
    if first_line is None:
        first_line = _in_memory_lines()
    index = {name: i for i, name in enumerate(names)}
    trailing_optional = _trailing_optional(names)
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
            yield RowError(line, f"not CSV: {exc}")
            line = reader.line_num + 1
            continue
        start, line = line, reader.line_num + 1
        if not cells or all(not c.strip() for c in cells):
            continue  # blank line
        cells, wrong = _checked_cells(cells, names, trailing_optional)
        if wrong is not None:
            yield RowError(start, wrong)
            continue
        row = {name: cells[i] for name, i in index.items()}
        try:
            stat = (
                _parse_minimal(row, per_hostname, now, ttl)  # type: ignore[arg-type]
                if minimal
                else _parse_row(row, per_hostname)
            )
        except _Bad as exc:
            yield RowError(start, str(exc))
            continue
        first = first_line(stat.domain, start)
        if first is not None:
            yield RowError(start, f"domain {stat.domain} is already on line {first}")
            continue
        yield stat
