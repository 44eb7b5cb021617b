"""``scrapy domainstate``: look into and manage the domain state store.

Registered through the ``scrapy.commands`` entry point, so it works inside a
project (the store named by the project's settings) and outside one (``-s
DOMAINSTATE_LMDB_PATH=/path/to/db``). Commands that only read open the LMDB
store read-only, so they are safe to run while crawls write to it, and never
create a database that is not there. Subcommands: ``stats``, ``show``, ``set``,
``reset``, ``export``, ``import``, ``sweep``, ``report`` and ``serve``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import inspect
import io
import json
import logging
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, ClassVar, TextIO

from scrapy.commands import ScrapyCommand, ScrapyHelpFormatter
from scrapy.exceptions import UsageError
from scrapy.utils.misc import load_object

from .._time import parse_duration
from ..config import Config, ConfigError
from ..csvio import COLUMNS, read_csv, write_csv
from ..keys import domain_key
from ..policy import Policy
from ..record import DomainStat, State
from ..report import STATE_DECISIONS, summarize, write_report
from ..store import DomainStore, StoreError, create_store

__all__ = ["Command"]

logger = logging.getLogger(__name__)

_STATE_NAMES = [s.value for s in State]
VALID_STATES = ", ".join(_STATE_NAMES)
DAY = 86400.0
#: Records written per write transaction by ``reset --all``.
RESET_BATCH = 1000

#: subcommand -> (min args, max args, options it accepts)
SUBCOMMANDS: dict[str, tuple[int, int, frozenset[str]]] = {
    "stats": (0, 0, frozenset({"json"})),
    "show": (1, 1, frozenset({"json"})),
    "set": (2, 2, frozenset({"ttl"})),
    "reset": (0, 1, frozenset({"all", "yes", "purge"})),
    "export": (0, 0, frozenset({"output", "state"})),
    "import": (1, 1, frozenset()),
    "sweep": (0, 0, frozenset()),
    "report": (0, 0, frozenset({"output", "top"})),
    "serve": (0, 0, frozenset({"port", "host", "token_file", "db"})),
}
_ARGS_SYNTAX = {
    "show": "DOMAIN|URL",
    "set": "DOMAIN STATE",
    "reset": "DOMAIN|--all",
    "import": "FILE",
}
#: option dest -> (flag shown in messages, default)
_OPTIONS: dict[str, tuple[str, Any]] = {
    "json": ("--json", False),
    "ttl": ("--ttl", None),
    "all": ("--all", False),
    "yes": ("--yes", False),
    "purge": ("--purge", False),
    "output": ("-o/--output", None),
    "state": ("--state", None),
    "top": ("--top", 25),
    "port": ("--port", 8790),
    "host": ("--host", "127.0.0.1"),
    "token_file": ("--token-file", None),
    "db": ("--db", None),
}


class _Failure(Exception):
    """Stop the subcommand: print ``error: message`` and exit with ``code``."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


# ------------------------------------------------------------------ helpers


def _isatty(stream: IO[Any]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Progress:
    """A ``\\r``-updated counter on stderr, only when stderr is a terminal.

    Nothing is drawn for operations that end within ``delay`` seconds, and
    nothing at all when stderr is piped or redirected.
    """

    def __init__(self, label: str, total: int | None = None, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = _isatty(self.stream)
        self.label = label
        self.total = total
        self.delay = 0.3
        self.interval = 0.1
        self._start = time.monotonic()
        self._last = 0.0
        self._width = 0

    @property
    def tick(self) -> Callable[[int], None] | None:
        """The callback to pass to a loop, or ``None`` when disabled (no cost)."""
        return self._tick if self.enabled else None

    def _tick(self, n: int) -> None:
        now = time.monotonic()
        if now - self._start < self.delay or now - self._last < self.interval:
            return
        self._last = now
        if self.total:
            text = f"\r{self.label}: {n:,}/{self.total:,} ({100.0 * min(n, self.total) / self.total:.0f}%)"
        else:
            text = f"\r{self.label}: {n:,}"
        self._width = max(self._width, len(text))
        self.stream.write(text)
        self.stream.flush()

    def note(self, text: str) -> None:
        """A one-off status line (for steps that report no progress)."""
        if self.enabled:
            line = f"\r{text}"
            self._width = max(self._width, len(line))
            self.stream.write(line)
            self.stream.flush()

    def done(self) -> None:
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.done()


def _iso(ts: float | None) -> str:
    if ts is None:
        return "never"
    if not ts:
        return "-"
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _span(seconds: float) -> str:
    """``3d 4h``, ``5m 2s``...: the two largest units."""
    seconds = abs(seconds)
    if seconds < 1:
        return "0s"
    parts = []
    for unit, size in (("d", DAY), ("h", 3600.0), ("m", 60.0), ("s", 1.0)):
        if seconds >= size or parts:
            n = int(seconds // size)
            seconds -= n * size
            if n or not parts:
                parts.append(f"{n}{unit}")
        if len(parts) == 2:
            break
    return " ".join(parts)


def _relative(ts: float, now: float) -> str:
    return f"in {_span(ts - now)}" if ts >= now else f"{_span(now - ts)} ago"


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover


def _disk_usage(path: str | None) -> int | None:
    if not path or not os.path.isdir(path):
        return None
    total = 0
    with os.scandir(path) as it:
        for entry in it:
            if entry.is_file(follow_symlinks=False):
                total += entry.stat(follow_symlinks=False).st_size
    return total


def _parse_state(name: str) -> State:
    try:
        return State(name.strip().lower())
    except ValueError:
        raise _Failure(2, f"unknown state {name!r}; valid states: {VALID_STATES}") from None


def _parse_ttl(text: str | None) -> float | None:
    """``None`` (option absent): the state's default (-1); ``none``: no TTL; ``90``, ``12h``, ``7d``: seconds."""
    if text is None or text.strip().lower() == "default":
        return -1.0
    try:  # the same syntax as the duration settings (DOMAINSTATE_TTL)
        seconds = parse_duration(text)
    except ValueError:
        seconds = math.nan
    if seconds is None:
        return None
    if not math.isfinite(seconds) or seconds <= 0:
        raise _Failure(
            2,
            f"--ttl must be a positive number of seconds (units s, m, h, d, w allowed: 12h, 7d), "
            f"'none' for no TTL or 'default'; got {text!r}",
        )
    return seconds


def _stat_json(stat: DomainStat) -> dict[str, Any]:
    data = {f.name: getattr(stat, f.name) for f in dataclasses.fields(stat)}
    data["state"] = str(stat.state)
    data["recent"] = [
        {
            "at": e.at,
            "method": str(e.method),
            "outcome": str(e.outcome),
            "status": e.status,
            "error_class": e.error_class,
        }
        for e in stat.recent
    ]
    return data


@contextlib.contextmanager
def _output(path: str | None, newline: str | None = None) -> Iterator[TextIO]:
    """stdout, or ``path`` written atomically (a temporary file renamed at the end)."""
    if path is None or path == "-":
        yield sys.stdout
        sys.stdout.flush()
        return
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise _Failure(1, f"cannot write {path}: {exc}") from None
    try:
        with open(fd, "w", encoding="utf-8", newline=newline) as fh:
            yield fh
        umask = os.umask(0o022)
        os.umask(umask)
        try:
            os.chmod(tmp, 0o666 & ~umask)
            os.replace(tmp, target)
        except OSError as exc:
            raise _Failure(1, f"cannot write {path}: {exc}") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _resolve_lmdb_path(path: str) -> str:
    """Where the LMDB store of ``path`` lives, as Scrapy's ``data_path`` resolves it.

    Done here, without creating anything (``data_path`` creates a project's
    ``.scrapy`` directory): relative paths go into the project data directory
    inside a project, into ``./.scrapy`` outside one.
    """
    p = Path(os.path.expanduser(path))
    if not p.is_absolute():
        from scrapy.utils.conf import closest_scrapy_cfg, get_config
        from scrapy.utils.project import DATADIR_CFG_SECTION, inside_project

        base = Path(".scrapy")
        if inside_project():
            cfg = get_config()
            if cfg.has_option(DATADIR_CFG_SECTION, "default"):
                base = Path(cfg.get(DATADIR_CFG_SECTION, "default"))
            else:
                scrapy_cfg = closest_scrapy_cfg()
                if scrapy_cfg:
                    base = Path(scrapy_cfg).parent / ".scrapy"
        p = base / p
    return os.path.realpath(p)


def _put_all(store: DomainStore, stats: list[DomainStat]) -> int:
    """Write records in one go (one transaction in LMDB: all or nothing); returns how many were evicted."""
    before = store.evicted
    store.put_many(stats)
    return store.evicted - before


def _batches(items: Iterable[DomainStat], size: int) -> Iterator[list[DomainStat]]:
    batch: list[DomainStat] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


# ------------------------------------------------------------------ command


_LONG_DESC = f"""\
Inspect and manage the scrapy-domainstate store: the one the project's settings
name, or, outside a project, -s DOMAINSTATE_LMDB_PATH=/path/to/db (a relative
path lives in the project's .scrapy/ directory, or in ./.scrapy/ outside one).
Subcommands that only read open the LMDB store read-only: they are safe while
crawls write to it, and never create a database.

subcommands:
  stats                 domains per state (all six, count and share, as a crawl
                        would see them now), how many expire within 24 h and
                        7 days, expired records a sweep would drop, the store
                        and its size on disk (--json: one JSON object)
  show DOMAIN|URL       the key a URL or host maps to, its record (state,
                        expiry, counters, recent observations) and the decision
                        a request would get now (--json: one JSON object,
                        timestamps in Unix seconds)
  set DOMAIN STATE      force a state: {", ".join(_STATE_NAMES[:3])},
                        {", ".join(_STATE_NAMES[3:])}; --ttl TTL: 'none' for
                        no TTL, or 3600 / 90m / 12h / 7d / 2w (default: the
                        state's own TTL)
  reset DOMAIN          back to unknown for re-evaluation: probed again, recent
                        history cleared, counters kept
  reset --all           the same for every domain (--purge: delete every record
                        and URL dead mark instead); asks for confirmation on a
                        terminal, needs --yes otherwise
  export                CSV to stdout (-o FILE: to a file), one row per domain:
                        {", ".join(COLUMNS[:4])},
                        {", ".join(COLUMNS[4:8])},
                        {", ".join(COLUMNS[8:11])},
                        {", ".join(COLUMNS[11:])}
                        (times in Unix seconds, state_expires_at empty when the
                        state has no TTL, recent as JSON); --state STATE keeps
                        the rows in that stored state (repeatable, or a,b)
  import FILE           that CSV back ('-': stdin). Every row is checked first:
                        if one is bad, each problem is printed as 'line N: ...'
                        and nothing is written (exit 1). Rows replace the
                        records of their domains; other records stay.
  sweep                 drop the records whose state has expired, say how many
  report                a self-contained HTML page to stdout (-o FILE: to a
                        file): state distribution, transitions and outcomes per
                        day, the domains that changed most (--top N rows)
  serve                 run the reference shared-state service: --token-file
                        FILE (lines 'REPORTER_ID TOKEN'), --port (8790), --host
                        (127.0.0.1), --db DIR (default: votes kept in memory)

Long operations show a progress counter when stderr is a terminal.
Exit codes: 0 done; 1 failed (no database, bad import rows, store error);
2 bad usage or settings (unknown state, bad option, bad DOMAINSTATE_* value).
"""


class _HelpFormatter(ScrapyHelpFormatter):
    """Scrapy's help formatter, keeping the description's own line breaks."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "".join(indent + line for line in text.splitlines(keepends=True))


class Command(ScrapyCommand):
    requires_project = False
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "SUBCOMMAND [ARGS] [options]  (stats, show, set, reset, export, import, sweep, report, serve)"

    def short_desc(self) -> str:
        return "Inspect and manage the per-domain state store (scrapy-domainstate)"

    def long_desc(self) -> str:
        return _LONG_DESC

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        # Keep the line breaks of long_desc (Scrapy's formatter reflows it into one paragraph).
        parser.formatter_class = _HelpFormatter
        group = parser.add_argument_group("Subcommand Options")
        group.add_argument("--json", action="store_true", help="stats, show: print JSON")
        group.add_argument(
            "--ttl",
            metavar="TTL",
            help="set: seconds (or 12h, 7d, 2w), 'none' for no TTL; default: the state's TTL",
        )
        group.add_argument("--all", action="store_true", help="reset: every domain")
        group.add_argument("--yes", action="store_true", help="reset --all: do not ask for confirmation")
        group.add_argument("--purge", action="store_true", help="reset --all: delete the records instead")
        group.add_argument("-o", "--output", metavar="FILE", help="export, report: write FILE instead of stdout")
        group.add_argument(
            "--state",
            action="append",
            metavar="STATE",
            help="export: only rows in this state (repeatable, or comma-separated)",
        )
        group.add_argument("--top", type=int, default=25, metavar="N", help="report: rows of 'changed most'")
        group.add_argument("--port", type=int, default=8790, help="serve: TCP port (0: any free port)")
        group.add_argument("--host", default="127.0.0.1", help="serve: interface to listen on")
        group.add_argument("--token-file", metavar="FILE", help="serve: lines 'REPORTER_ID TOKEN'")
        group.add_argument("--db", metavar="DIR", help="serve: directory of the service's votes and records")

    # -------------------------------------------------------------- dispatch

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if not args:
            raise UsageError(f"a subcommand is needed: {', '.join(SUBCOMMANDS)}")
        sub, rest = args[0], args[1:]
        if sub not in SUBCOMMANDS:
            raise UsageError(f"unknown subcommand {sub!r}; one of: {', '.join(SUBCOMMANDS)}", print_help=False)
        stray = [a for a in rest if a.startswith("-") and a != "-"]
        if stray:
            raise UsageError(f"unknown option {stray[0]!r}", print_help=False)
        low, high, allowed = SUBCOMMANDS[sub]
        if not low <= len(rest) <= high:
            syntax = f"{sub} {_ARGS_SYNTAX.get(sub, '')}".strip()
            raise UsageError(f"usage: scrapy domainstate {syntax}", print_help=False)
        for dest, (flag, default) in _OPTIONS.items():
            if dest not in allowed and getattr(opts, dest, default) != default:
                raise UsageError(f"{flag} does not apply to '{sub}'", print_help=False)
        handler = getattr(self, f"_{sub}")
        try:
            handler(rest, opts)
        except _Failure as exc:
            self._error(exc.code, str(exc))
        except ConfigError as exc:
            self._error(2, str(exc))
        except StoreError as exc:
            self._error(1, str(exc))
        except BrokenPipeError:
            # `... | head`: the reader went away; stop quietly, as Unix tools do.
            with contextlib.suppress(OSError):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
            self.exitcode = 1

    def _error(self, code: int, message: str) -> None:
        print(f"error: {message}", file=sys.stderr)
        self.exitcode = code

    # ------------------------------------------------------------ the store

    def _config(self) -> Config:
        assert self.settings is not None
        return Config.from_settings(self.settings)

    def _store(self, *, write: bool = False, create: bool = False) -> DomainStore:
        """The configured store, opened; read-only unless ``write``; never created unless ``create``."""
        config = self._config()
        from ..store.lmdb import LmdbStore

        try:
            cls = load_object(config.store)
        except (ImportError, NameError, ValueError, AttributeError):
            cls = None  # create_store reports it
        if isinstance(cls, type) and issubclass(cls, LmdbStore):
            path = _resolve_lmdb_path(config.lmdb_path)
            if not create and not os.path.exists(os.path.join(path, "data.mdb")):
                assert self.settings is not None
                raise _Failure(
                    1,
                    f"no domainstate database at {path} (DOMAINSTATE_LMDB_PATH="
                    f"{self.settings.get('DOMAINSTATE_LMDB_PATH') or config.lmdb_path!r}); nothing was created. "
                    "Run the command in the project directory, or pass -s DOMAINSTATE_LMDB_PATH=/path/to/db.",
                )
            config = dataclasses.replace(config, lmdb_path=path)
        store = create_store(config, Policy(config))
        if not write and "readonly" in inspect.signature(store.open).parameters:
            store.open(readonly=True)  # type: ignore[call-arg]
        else:
            store.open()
        return store

    # ------------------------------------------------------------ subcommands

    def _stats(self, args: list[str], opts: argparse.Namespace) -> None:
        now = time.time()
        store = self._store()
        try:
            total = store.count()
            with Progress("reading records", total) as progress:
                summary = summarize(store.iter_records(), store.policy, now, top=0, tick=progress.tick)
            path = getattr(store, "path", None)
            map_size_of = getattr(store, "map_size", None)
            map_size = map_size_of() if callable(map_size_of) else None
            corrupt = store.corrupt_records
            where = store.describe()
        finally:
            store.close()
        size = _disk_usage(path)
        if opts.json:
            data = {
                "store": where,
                "path": path,
                "size_bytes": size,
                "map_size_bytes": map_size,
                "domains": summary.total,
                "states": {str(s): {"count": summary.states[s], "share": round(summary.share(s), 6)} for s in State},
                "expiring": {"24h": summary.expiring_24h, "7d": summary.expiring_7d},
                "expired": summary.expired,
                "changed": {"24h": summary.changed_24h, "7d": summary.changed_7d},
                "corrupt": corrupt,
                "now": now,
            }
            print(json.dumps(data, indent=2))
            return
        lines = [f"store:   {where}"]
        if size is not None:
            extra = f", map {_size(map_size)}" if map_size else ""
            lines.append(f"size:    {_size(size)} on disk{extra}")
        lines.append(f"domains: {summary.total:,}")
        lines.append("")
        lines.append(f"{'state':<14}{'domains':>10}{'share':>9}   decision")
        for state in State:
            n = summary.states[state]
            lines.append(f"{state.value:<14}{n:>10,}{100.0 * summary.share(state):>8.1f}%   {STATE_DECISIONS[state]}")
        lines.append("")
        lines.append(f"expire within 24 h:      {summary.expiring_24h:,}")
        lines.append(f"expire within 7 days:    {summary.expiring_7d:,}")
        lines.append(f"changed in last 24 h:    {summary.changed_24h:,}")
        lines.append(f"changed in last 7 days:  {summary.changed_7d:,}")
        sweep_hint = " (scrapy domainstate sweep drops them)" if summary.expired else ""
        lines.append(f"expired, not yet swept:  {summary.expired:,}{sweep_hint}")
        if corrupt:
            lines.append(f"corrupt records skipped: {corrupt:,}")
        print("\n".join(lines))

    def _key(self, target: str) -> str:
        key = domain_key(target, per_hostname=self._config().per_hostname)
        if not key:
            raise _Failure(2, f"{target!r} has no usable host name")
        return key

    def _show(self, args: list[str], opts: argparse.Namespace) -> None:
        target = args[0]
        key = self._key(target)
        now = time.time()
        store = self._store()
        try:
            stored = store.get(key)
            current = store.current(key, now)
            decision, state, expires = store.decide(key, now)
            corrupt = store.corrupt_records
        finally:
            store.close()
        expired = stored is not None and store.policy.is_expired(stored, now)
        if opts.json:
            data = {
                "input": target,
                "key": key,
                "found": stored is not None,
                "corrupt": bool(corrupt),
                "state": str(state),
                "state_expires_at": expires,
                "expired": expired,
                "decision": str(decision),
                "now": now,
                "record": None if stored is None else _stat_json(stored),
            }
            print(json.dumps(data, indent=2, ensure_ascii=False))
            return
        head = key if target.strip().lower() == key else f"{key}  (key of {target!r})"
        out = [head]
        if stored is None:
            why = "its record is corrupt and is treated as unknown" if corrupt else "no record: never seen, or swept"
            out.append(f"  {why}")
            out.append(f"  decision now: {decision}")
            print("\n".join(out))
            return
        out.append(f"  state:        {state}, since {_iso(current.state_changed_at)}")
        if expired:
            out.append(
                f"                (stored as {stored.state}, which expired {_relative(stored.state_expires_at or 0, now)})"
            )
        if expires is None:
            out.append("  expires:      never (no TTL)")
        else:
            out.append(f"  expires:      {_iso(expires)} ({_relative(expires, now)})")
        out.append(f"  decision now: {decision}")
        out.append(
            f"  fetches:      {stored.fetch_total:,} ({stored.fetch_ok:,} ok-contact, {stored.fetch_ok_empty:,} ok-empty)"
        )
        out.append(f"  browser tabs: {stored.tab_total:,} ({stored.tab_ok:,} ok-contact)")
        out.append(f"  first seen:   {_iso(stored.first_seen)}")
        out.append(f"  last seen:    {_iso(stored.last_seen)} ({_relative(stored.last_seen, now)})")
        out.append(f"  probed:       {_iso(current.probed_at) if current.probed_at else 'not in this period'}")
        if stored.recent:
            note = "; cleared as the expiry is applied" if expired else ""
            out.append(f"  recent ({len(stored.recent)}, oldest first{note}):")
            for e in stored.recent:
                status = "" if e.status is None else str(e.status)
                error = e.error_class or ""
                out.append(f"    {_iso(e.at)}  {e.method!s:<5}  {e.outcome!s:<13}  {status:>3}  {error}".rstrip())
        else:
            out.append("  recent:       (none)")
        print("\n".join(out))

    def _set(self, args: list[str], opts: argparse.Namespace) -> None:
        target, name = args
        state = _parse_state(name)
        ttl = _parse_ttl(opts.ttl)
        key = self._key(target)
        now = time.time()
        store = self._store(write=True, create=True)
        try:
            old = store.current(key, now).state if store.get(key) is not None else None
            new = store.set_state(key, state, now, ttl)
        finally:
            store.close()
        expires = (
            "never (no TTL)"
            if new.state_expires_at is None
            else f"{_iso(new.state_expires_at)} ({_relative(new.state_expires_at, now)})"
        )
        before = "(new record)" if old is None else str(old)
        print(f"{key}: {before} -> {new.state}, expires {expires}")

    def _reset(self, args: list[str], opts: argparse.Namespace) -> None:
        if opts.all == bool(args):
            raise UsageError("reset takes a DOMAIN or --all (not both)", print_help=False)
        if (opts.yes or opts.purge) and not opts.all:
            raise UsageError("--yes and --purge go with reset --all", print_help=False)
        if opts.all:
            self._reset_all(opts)
            return
        key = self._key(args[0])
        now = time.time()
        store = self._store(write=True)
        try:
            store.flush()
            stored = store.get(key)
            if stored is None:
                print(f"{key}: no record, nothing to reset")
                return
            old = store.current(key, now).state
            new = store.policy.set_state(store.policy.current(stored, key, now), State.UNKNOWN, now)
            new.recent = []
            store.put(new)
        finally:
            store.close()
        print(f"{key}: {old} -> unknown (recent history cleared, counters kept; it will be probed again)")

    def _reset_all(self, opts: argparse.Namespace) -> None:
        store = self._store(write=True)
        try:
            total = store.count()
            where = store.describe()
            if not opts.yes:
                what = (
                    f"Delete all {total:,} records (and URL dead marks) of {where}"
                    if opts.purge
                    else f"Reset all {total:,} domains of {where} to unknown"
                )
                if not (_isatty(sys.stdin) and _isatty(sys.stderr)):
                    raise _Failure(2, f"refusing to {what[0].lower()}{what[1:]} without confirmation: pass --yes")
                sys.stderr.write(f"{what}? [y/N] ")
                sys.stderr.flush()
                answer = sys.stdin.readline().strip().lower()
                if answer not in ("y", "yes"):
                    raise _Failure(1, "aborted, nothing changed")
            if opts.purge:
                removed = store.clear()
                print(f"deleted {removed:,} records from {where}")
                return
            now = time.time()
            done = 0
            with Progress("resetting", total) as progress:
                for batch in _batches(store.iter_records(), RESET_BATCH):
                    fresh = []
                    for stat in batch:
                        new = store.policy.set_state(stat, State.UNKNOWN, now)
                        new.recent = []
                        fresh.append(new)
                    _put_all(store, fresh)
                    done += len(batch)
                    if progress.tick is not None:
                        progress.tick(done)
        finally:
            store.close()
        print(f"reset {done:,} domains of {where} to unknown (recent history cleared, counters kept)")

    def _export(self, args: list[str], opts: argparse.Namespace) -> None:
        wanted: set[State] | None = None
        if opts.state:
            wanted = {_parse_state(s) for value in opts.state for s in value.split(",") if s.strip()}
            if not wanted:
                raise _Failure(2, f"--state needs a state name; valid states: {VALID_STATES}")
        store = self._store()
        try:
            total = store.count()
            keep = None if wanted is None else (lambda stat: stat.state in wanted)
            with Progress("exporting", total) as progress, _output(opts.output, newline="") as fh:
                written = write_csv(store.iter_records(), fh, keep=keep, tick=progress.tick)
        finally:
            store.close()
        if opts.output not in (None, "-"):
            print(f"exported {written:,} domains to {opts.output}", file=sys.stderr)

    def _import(self, args: list[str], opts: argparse.Namespace) -> None:
        source = args[0]
        config = self._config()
        # Bytes that are not UTF-8 become lone surrogates, which read_csv reports by line.
        now = time.time()
        try:
            with Progress(f"reading {source}") as progress:
                if source == "-":
                    text = io.TextIOWrapper(
                        sys.stdin.buffer, encoding="utf-8-sig", errors="surrogateescape", newline=""
                    )
                    records, errors = read_csv(
                        text, per_hostname=config.per_hostname, tick=progress.tick, now=now, ttl=config.ttl
                    )
                else:
                    with open(source, encoding="utf-8-sig", errors="surrogateescape", newline="") as fh:
                        records, errors = read_csv(
                            fh, per_hostname=config.per_hostname, tick=progress.tick, now=now, ttl=config.ttl
                        )
        except OSError as exc:
            raise _Failure(1, f"cannot read {source}: {exc}") from None
        if errors:
            shown = errors[:100]
            for err in shown:
                print(f"{source}: {err}", file=sys.stderr)
            if len(errors) > len(shown):
                more = len(errors) - len(shown)
                print(f"{source}: ... and {more:,} more bad row{'' if more == 1 else 's'}", file=sys.stderr)
            bad = len(errors)
            raise _Failure(1, f"{bad:,} bad row{'' if bad == 1 else 's'} in {source}: nothing imported")
        if not records:
            print(f"{source}: no rows, nothing imported")
            return
        store = self._store(write=True, create=True)
        try:
            with Progress("importing") as progress:
                progress.note(f"importing {len(records):,} domains...")
                evicted = _put_all(store, records)
            where = store.describe()
        finally:
            store.close()
        note = f" ({evicted:,} least recently seen domains evicted by DOMAINSTATE_MAX_DOMAINS)" if evicted else ""
        print(f"imported {len(records):,} domains into {where}{note}")

    def _sweep(self, args: list[str], opts: argparse.Namespace) -> None:
        now = time.time()
        store = self._store(write=True)
        try:
            with Progress("sweeping") as progress:
                progress.note(f"sweeping {store.count():,} records...")
                removed = store.sweep(now)
            remaining = store.count()
        finally:
            store.close()
        print(f"dropped {removed:,} expired record{'' if removed == 1 else 's'}; {remaining:,} remain")

    def _report(self, args: list[str], opts: argparse.Namespace) -> None:
        if opts.top < 0:
            raise _Failure(2, "--top must be >= 0")
        now = time.time()
        store = self._store()
        try:
            total = store.count()
            where = store.describe()
            with Progress("reading records", total) as progress, _output(opts.output) as fh:
                summary = write_report(
                    store.iter_records(), fh, store.policy, now, source=where, top=opts.top, tick=progress.tick
                )
        finally:
            store.close()
        if opts.output not in (None, "-"):
            print(f"wrote the report of {summary.total:,} domains to {opts.output}", file=sys.stderr)

    def _serve(self, args: list[str], opts: argparse.Namespace) -> None:
        if not opts.token_file:
            raise UsageError("serve needs --token-file FILE (lines 'REPORTER_ID TOKEN')", print_help=False)
        if not 0 <= opts.port <= 65535:
            raise _Failure(2, f"--port must be between 0 and 65535, got {opts.port}")
        try:
            from .. import service
        except ImportError as exc:
            raise _Failure(1, f"the shared-state service is not available: {exc}") from None
        serve = getattr(service, "serve", None)
        load_tokens = getattr(service, "load_tokens", None)
        if not callable(serve) or not callable(load_tokens):
            raise _Failure(1, "scrapy_domainstate.service has no serve() / load_tokens()")
        assert self.settings is not None
        level = self.settings.get("LOG_LEVEL") if opts.loglevel else logging.INFO
        logging.basicConfig(level=level, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s: %(message)s")
        from twisted.internet.error import CannotListenError

        tokens = load_tokens(opts.token_file)  # ConfigError -> exit 2
        try:
            serve(port=opts.port, host=opts.host, tokens=tokens, db_path=opts.db, config=self._config())
        except (CannotListenError, OSError) as exc:
            raise _Failure(1, str(exc)) from None
