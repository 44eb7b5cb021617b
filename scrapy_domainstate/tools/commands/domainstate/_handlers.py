"""The subcommands: one function each, ``handler(ctx, args, opts)``; the table in ``_table`` says which is which."""

from __future__ import annotations

import argparse
import io
import json
import logging
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from scrapy.exceptions import UsageError

from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.record import State
from scrapy_domainstate.detect.classify import Classifier
from scrapy_domainstate.tools.commands.domainstate._context import Context
from scrapy_domainstate.tools.commands.domainstate._import import SHOWN_ERRORS, Checked, Spool, check, write
from scrapy_domainstate.tools.commands.domainstate._output import (
    VALID_STATES,
    Failure,
    Progress,
    disk_usage,
    isatty,
    output,
    parse_state,
    parse_ttl,
    size,
    stat_json,
)
from scrapy_domainstate.tools.commands.domainstate._store import batches, derived_cells, put_all
from scrapy_domainstate.tools.crawllog import read_crawls
from scrapy_domainstate.tools.csvio import write_csv
from scrapy_domainstate.tools.explain import explain_lines, parse_saved_response, response_lines
from scrapy_domainstate.tools.report import STATE_DECISIONS, Summary, plural, summarize, write_report
from scrapy_domainstate.tools.showtext import iso, look, relative, show_lines

#: Records written per write transaction by ``reset --all``.
RESET_BATCH = 1000


# ------------------------------------------------------------------ stats


def stats(ctx: Context, args: list[str], opts: argparse.Namespace) -> None:
    now = time.time()
    with ctx.store() as store:
        total = store.count()
        with Progress("reading records", total) as progress:
            summary = summarize(store.iter_records(), store.policy, now, top=0, rows=0, tick=progress.tick)
        path = getattr(store, "path", None)
        map_size_of = getattr(store, "map_size", None)
        map_size = map_size_of() if callable(map_size_of) else None
        corrupt = store.corrupt_records
        where = store.describe()
    disk = disk_usage(path)
    if opts.json:
        data = {
            "store": where,
            "path": path,
            "size_bytes": disk,
            "map_size_bytes": map_size,
            "domains": summary.total,
            "parts": {"hosts": summary.parts["host"], "purposes": summary.parts["purpose"]},
            "states": {str(s): {"count": summary.states[s], "share": round(summary.share(s), 6)} for s in State},
            "expiring": {"24h": summary.expiring_24h, "7d": summary.expiring_7d},
            "expired": summary.expired,
            "changed": {"24h": summary.changed_24h, "7d": summary.changed_7d},
            "corrupt": corrupt,
            "now": now,
        }
        print(json.dumps(data, indent=2))
        return
    print("\n".join(_stats_lines(summary, where, disk, map_size, corrupt)))


def _stats_lines(summary: Summary, where: str, disk: int | None, map_size: int | None, corrupt: int) -> list[str]:
    lines = [f"store:   {where}"]
    if disk is not None:
        extra = f", map {size(map_size)}" if map_size else ""
        lines.append(f"size:    {size(disk)} on disk{extra}")
    lines.append(f"domains: {summary.total:,}")
    if summary.parts:
        held = ", ".join(
            plural(summary.parts[kind], label)
            for kind, label in (("host", "host"), ("purpose", "purpose record"))
            if summary.parts[kind]
        )
        lines.append(f"         plus {held} of these domains (their parts; not counted below)")
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
    return lines


# ------------------------------------------------------------------ show


def show(ctx: Context, args: list[str], opts: argparse.Namespace) -> None:
    target = args[0]
    key = ctx.key(target)
    now = time.time()
    with ctx.store() as store:
        shown = look(store, target, key, now)
    if opts.json:
        data = {
            "input": target,
            "key": key,
            "found": shown.stored is not None,
            "corrupt": shown.corrupt,
            "state": str(shown.state),
            "state_expires_at": shown.expires,
            "expired": shown.expired,
            "decision": str(shown.decision),
            "now": now,
            "record": None if shown.stored is None else stat_json(shown.stored),
        }
        print(json.dumps(data, indent=2, ensure_ascii=False))
        return
    print("\n".join(show_lines(shown)))


# ------------------------------------------------------------------ explain


def explain(ctx: Context, args: list[str], opts: argparse.Namespace) -> None:
    target = args[0]
    config = ctx.config()
    classifier = Classifier(config)
    if opts.response is None:
        if opts.status is not None or opts.header:
            raise Failure(2, "--status and --header apply to 'explain --response FILE'")
        key = ctx.key(target)
        with ctx.store() as store:
            shown = look(store, target, key, time.time())
        print("\n".join(explain_lines(shown, config, classifier)))
        return
    headers = {}
    for given in opts.header or ():
        name, colon, value = given.partition(":")
        if not colon or not name.strip():
            raise Failure(2, f"--header must be 'Name: value', got {given!r}")
        headers[name.strip()] = value.strip()
    try:
        data = sys.stdin.buffer.read() if opts.response == "-" else Path(opts.response).read_bytes()
    except OSError as exc:
        raise Failure(1, f"cannot read {opts.response}: {exc.strerror or exc}") from None
    try:
        saved = parse_saved_response(data, opts.status, headers)
    except ValueError as exc:
        raise Failure(1, f"{opts.response}: {exc}") from None
    url = target if "://" in target else f"https://{target}/"
    print("\n".join(response_lines(classifier, url, saved.status, saved.headers, saved.body)))


# ------------------------------------------------------------------ set, reset


def set_state(ctx: Context, args: list[str], opts: argparse.Namespace) -> None:
    target, name = args
    state = parse_state(name)
    ttl = parse_ttl(opts.ttl)
    key = ctx.key(target)
    now = time.time()
    with ctx.store() as store:
        old = store.current(key, now).state if store.get(key) is not None else None
        new = store.set_state(key, state, now, ttl)
    expires = (
        "never (no TTL)"
        if new.state_expires_at is None
        else f"{iso(new.state_expires_at)} ({relative(new.state_expires_at, now)})"
    )
    before = "(new record)" if old is None else str(old)
    print(f"{key}: {before} -> {new.state}, expires {expires}")


def reset(ctx: Context, args: list[str], opts: argparse.Namespace) -> None:
    if opts.all == bool(args):
        raise UsageError("reset takes a DOMAIN or --all (not both)", print_help=False)
    if (opts.yes or opts.purge) and not opts.all:
        raise UsageError("--yes and --purge go with reset --all", print_help=False)
    if opts.all:
        _reset_all(ctx, opts)
        return
    key = ctx.key(args[0])
    now = time.time()
    with ctx.store() as store:
        store.flush()
        stored = store.get(key)
        if stored is None:
            print(f"{key}: no record, nothing to reset")
            return
        old = store.current(key, now).state
        new = store.policy.set_state(store.policy.current(stored, key, now), State.UNKNOWN, now)
        new.recent = []
        store.put(new)
    print(f"{key}: {old} -> unknown (recent history cleared, counters kept; it will be probed again)")


def _confirm(what: str) -> None:
    """Ask on a terminal; refuse without one (the caller passes ``--yes`` to skip this)."""
    if not (isatty(sys.stdin) and isatty(sys.stderr)):
        raise Failure(2, f"refusing to {what[0].lower()}{what[1:]} without confirmation: pass --yes")
    sys.stderr.write(f"{what}? [y/N] ")
    sys.stderr.flush()
    answer = sys.stdin.readline().strip().lower()
    if answer not in ("y", "yes"):
        raise Failure(1, "aborted, nothing changed")


def _reset_all(ctx: Context, opts: argparse.Namespace) -> None:
    with ctx.store() as store:
        total = store.count()
        where = store.describe()
        if not opts.yes:
            _confirm(
                f"Delete all {total:,} records (and URL dead marks) of {where}"
                if opts.purge
                else f"Reset all {total:,} domains of {where} to unknown"
            )
        if opts.purge:
            removed = store.clear()
            print(f"deleted {removed:,} records from {where}")
            return
        now = time.time()
        done = 0
        with Progress("resetting", total) as progress:
            for batch in batches(store.iter_records(), RESET_BATCH):
                fresh = []
                for stat in batch:
                    new = store.policy.set_state(stat, State.UNKNOWN, now)
                    new.recent = []
                    fresh.append(new)
                put_all(store, fresh)
                done += len(batch)
                if progress.tick is not None:
                    progress.tick(done)
    print(f"reset {done:,} domains of {where} to unknown (recent history cleared, counters kept)")


# ------------------------------------------------------------------ export, import


def export(ctx: Context, args: list[str], opts: argparse.Namespace) -> None:
    wanted: set[State] | None = None
    if opts.state:
        wanted = {parse_state(s) for value in opts.state for s in value.split(",") if s.strip()}
        if not wanted:
            raise Failure(2, f"--state needs a state name; valid states: {VALID_STATES}")
    with ctx.store() as store:
        total = store.count()
        keep = None if wanted is None else (lambda stat: stat.state in wanted)
        with Progress("exporting", total) as progress, output(opts.output, newline="") as fh:
            derived = derived_cells(store, time.time())
            written = write_csv(store.iter_records(), fh, keep=keep, tick=progress.tick, derived=derived)
    if opts.output not in (None, "-"):
        print(f"exported {written:,} domains to {opts.output}", file=sys.stderr)


def import_(ctx: Context, args: list[str], opts: argparse.Namespace) -> None:
    """Two passes in bounded memory (``_import``): check every row, then write in batches."""
    source = args[0]
    config = ctx.config()
    now = time.time()
    try:
        spool = Spool()
    except (OSError, sqlite3.Error) as exc:
        raise Failure(1, _spool_failed(exc)) from None
    with spool:
        checked = _check_source(source, config, now, spool)
        if checked.bad:
            if checked.bad > SHOWN_ERRORS:
                more = checked.bad - SHOWN_ERRORS
                print(f"{source}: ... and {more:,} more bad row{'' if more == 1 else 's'}", file=sys.stderr)
            bad = checked.bad
            raise Failure(1, f"{bad:,} bad row{'' if bad == 1 else 's'} in {source}: nothing imported")
        if not checked.rows:
            print(f"{source}: no rows, nothing imported")
            return
        with ctx.store() as store:
            try:
                evicted = write(store, spool, source, checked.rows)
            except sqlite3.Error as exc:
                raise Failure(1, _spool_failed(exc) + "; the rows before it were imported, run it again") from None
            where = store.describe()
    note = f" ({evicted:,} least recently seen domains evicted by DOMAINSTATE_MAX_DOMAINS)" if evicted else ""
    print(f"imported {checked.rows:,} domains into {where}{note}")


def _check_source(source: str, config: Config, now: float, spool: Spool) -> Checked:
    """Pass 1 over the file or stdin (``-``)."""
    try:
        if source == "-":
            # Bytes that are not UTF-8 become lone surrogates, which iter_csv reports by line.
            text = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8-sig", errors="surrogateescape", newline="")
            return check(text, source, config, now, spool)
        with open(source, encoding="utf-8-sig", errors="surrogateescape", newline="") as fh:
            return check(fh, source, config, now, spool)
    except OSError as exc:
        raise Failure(1, f"cannot read {source}: {exc}") from None
    except sqlite3.Error as exc:
        raise Failure(1, _spool_failed(exc)) from None


def _spool_failed(exc: BaseException) -> str:
    return (
        f"the import's temporary file in {tempfile.gettempdir()} failed ({exc}): set TMPDIR to a directory "
        "with room for about 200 bytes a row"
    )


# ------------------------------------------------------------------ sweep, report, serve


def sweep(ctx: Context, args: list[str], opts: argparse.Namespace) -> None:
    now = time.time()
    with ctx.store() as store:
        with Progress("sweeping") as progress:
            progress.note(f"sweeping {store.count():,} records...")
            removed = store.sweep(now)
        remaining = store.count()
    print(f"dropped {removed:,} expired record{'' if removed == 1 else 's'}; {remaining:,} remain")


def report(ctx: Context, args: list[str], opts: argparse.Namespace) -> None:
    if opts.top < 0:
        raise Failure(2, "--top must be >= 0")
    now = time.time()
    with ctx.store() as store:
        total = store.count()
        where = store.describe()
        with Progress("reading records", total) as progress, output(opts.output) as fh:
            summary = write_report(
                store.iter_records(),
                fh,
                store.policy,
                now,
                source=where,
                top=opts.top,
                crawls=read_crawls(store),
                tick=progress.tick,
            )
    if opts.output not in (None, "-"):
        print(f"wrote the report of {summary.total:,} domains to {opts.output}", file=sys.stderr)


def serve(ctx: Context, args: list[str], opts: argparse.Namespace) -> None:
    if not opts.token_file:
        raise UsageError("serve needs --token-file FILE (lines 'REPORTER_ID TOKEN')", print_help=False)
    if not 0 <= opts.port <= 65535:
        raise Failure(2, f"--port must be between 0 and 65535, got {opts.port}")
    try:
        from scrapy_domainstate import service
    except ImportError as exc:
        raise Failure(1, f"the shared-state service is not available: {exc}") from None
    run: Any = getattr(service, "serve", None)
    load_tokens: Any = getattr(service, "load_tokens", None)
    if not callable(run) or not callable(load_tokens):
        raise Failure(1, "scrapy_domainstate.service has no serve() / load_tokens()")
    level = ctx.settings.get("LOG_LEVEL") if opts.loglevel else logging.INFO
    logging.basicConfig(level=level, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    from twisted.internet.error import CannotListenError

    tokens = load_tokens(opts.token_file)  # ConfigError -> exit 2
    try:
        run(port=opts.port, host=opts.host, tokens=tokens, db_path=opts.db, config=ctx.config())
    except (CannotListenError, OSError) as exc:
        raise Failure(1, str(exc)) from None
