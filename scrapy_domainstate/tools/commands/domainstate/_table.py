"""The subcommands and options of ``scrapy domainstate``, declared once: the help text and the checks come from here."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from scrapy_domainstate.tools.commands.domainstate import _handlers as h
from scrapy_domainstate.tools.commands.domainstate._context import Context
from scrapy_domainstate.tools.commands.domainstate._output import STATE_NAMES
from scrapy_domainstate.tools.commands.domainstate._store import Access
from scrapy_domainstate.tools.csvio import COLUMNS

Handler = Callable[[Context, list[str], argparse.Namespace], None]


@dataclass(frozen=True)
class Subcommand:
    name: str
    handler: Handler
    #: how the store is opened (READ: LMDB read-only, safe next to crawls)
    access: Access
    #: positional arguments as the usage line shows them ("" for none)
    args: str = ""
    min_args: int = 0
    max_args: int = 0
    #: dests of the options it accepts (any other option given is an error)
    options: frozenset[str] = frozenset()
    #: (usage, description) pairs of the help text; the description keeps its line breaks
    help: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Option:
    flags: tuple[str, ...]
    dest: str
    help: str
    #: the flag as error messages name it
    shown: str
    default: Any = None
    kwargs: dict[str, Any] = field(default_factory=dict)


_STATES = f"{', '.join(STATE_NAMES[:3])},\n{', '.join(STATE_NAMES[3:])}"
_COLS = f"{', '.join(COLUMNS[:4])},\n{', '.join(COLUMNS[4:8])},\n{', '.join(COLUMNS[8:11])},\n{', '.join(COLUMNS[11:])}"

SUBCOMMANDS: tuple[Subcommand, ...] = (
    Subcommand(
        "stats",
        h.stats,
        Access.READ,
        options=frozenset({"json"}),
        help=(
            (
                "stats",
                "domains per state (all six, count and share, as a crawl\n"
                "would see them now), how many expire within 24 h and\n"
                "7 days, expired records a sweep would drop, the store\n"
                "and its size on disk (--json: one JSON object)",
            ),
        ),
    ),
    Subcommand(
        "show",
        h.show,
        Access.READ,
        args="DOMAIN|URL",
        min_args=1,
        max_args=1,
        options=frozenset({"json"}),
        help=(
            (
                "show DOMAIN|URL",
                "the key a URL or host maps to, its record (state,\n"
                "expiry, counters, recent observations) and the decision\n"
                "a request would get now (--json: one JSON object,\n"
                "timestamps in Unix seconds)",
            ),
        ),
    ),
    Subcommand(
        "explain",
        h.explain,
        Access.READ,
        args="URL",
        min_args=1,
        max_args=1,
        options=frozenset({"response", "status", "header"}),
        help=(
            (
                "explain URL",
                "the decision a request to URL gets now, its domain's\n"
                "state and why (the observations that moved it, with\n"
                "their evidence) and what would change it",
            ),
            (
                "  --response FILE",
                "the classifier's verdict on a saved response and the\n"
                "rule or marker that fired: FILE is what 'curl -i'\n"
                "prints, or a body alone ('-': stdin) with --status N\n"
                "and --header 'Name: value' (repeatable); the settings'\n"
                "DOMAINSTATE_WALL_RULES apply; the store is not read",
            ),
        ),
    ),
    Subcommand(
        "set",
        h.set_state,
        Access.CREATE,
        args="DOMAIN STATE",
        min_args=2,
        max_args=2,
        options=frozenset({"ttl"}),
        help=(
            (
                "set DOMAIN STATE",
                f"force a state: {_STATES}; --ttl TTL: 'none' for\n"
                "no TTL, or 3600 / 90m / 12h / 7d / 2w (default: the\n"
                "state's own TTL)",
            ),
        ),
    ),
    Subcommand(
        "reset",
        h.reset,
        Access.WRITE,
        args="DOMAIN|--all",
        min_args=0,
        max_args=1,
        options=frozenset({"all", "yes", "purge"}),
        help=(
            (
                "reset DOMAIN",
                "back to unknown for re-evaluation: probed again, recent\nhistory cleared, counters kept",
            ),
            (
                "reset --all",
                "the same for every domain (--purge: delete every record\n"
                "and URL dead mark instead); asks for confirmation on a\n"
                "terminal, needs --yes otherwise",
            ),
        ),
    ),
    Subcommand(
        "export",
        h.export,
        Access.READ,
        options=frozenset({"output", "state"}),
        help=(
            (
                "export",
                "CSV to stdout (-o FILE: to a file), one row per domain:\n"
                f"{_COLS}\n"
                "(times in Unix seconds, state_expires_at empty when the\n"
                "state has no TTL, recent as JSON); --state STATE keeps\n"
                "the rows in that stored state (repeatable, or a,b)",
            ),
        ),
    ),
    Subcommand(
        "import",
        h.import_,
        Access.CREATE,
        args="FILE",
        min_args=1,
        max_args=1,
        help=(
            (
                "import FILE",
                "that CSV back ('-': stdin). Every row is checked first:\n"
                "if one is bad, each problem is printed as 'line N: ...'\n"
                "and nothing is written (exit 1). Rows replace the\n"
                "records of their domains; other records stay. Memory\n"
                "stays flat: checked rows wait in a temporary file\n"
                "(TMPDIR), then go in 10,000 at a time.",
            ),
        ),
    ),
    Subcommand(
        "sweep",
        h.sweep,
        Access.WRITE,
        help=(("sweep", "drop the records whose state has expired, say how many"),),
    ),
    Subcommand(
        "report",
        h.report,
        Access.READ,
        options=frozenset({"output", "top"}),
        help=(
            (
                "report",
                "a self-contained HTML page to stdout (-o FILE: to a\n"
                "file): state distribution, transitions and outcomes per\n"
                "day, the domains that changed most (--top N rows)",
            ),
        ),
    ),
    Subcommand(
        "serve",
        h.serve,
        Access.NONE,
        options=frozenset({"port", "host", "token_file", "db"}),
        help=(
            (
                "serve",
                "run the reference shared-state service: --token-file\n"
                "FILE (lines 'REPORTER_ID TOKEN'), --port (8790), --host\n"
                "(127.0.0.1), --db DIR (default: votes kept in memory)",
            ),
        ),
    ),
)
BY_NAME: dict[str, Subcommand] = {s.name: s for s in SUBCOMMANDS}

OPTIONS: tuple[Option, ...] = (
    Option(("--json",), "json", "stats, show: print JSON", "--json", False, {"action": "store_true"}),
    Option(
        ("--ttl",),
        "ttl",
        "set: seconds (or 12h, 7d, 2w), 'none' for no TTL; default: the state's TTL",
        "--ttl",
        kwargs={"metavar": "TTL"},
    ),
    Option(("--all",), "all", "reset: every domain", "--all", False, {"action": "store_true"}),
    Option(("--yes",), "yes", "reset --all: do not ask for confirmation", "--yes", False, {"action": "store_true"}),
    Option(
        ("--purge",), "purge", "reset --all: delete the records instead", "--purge", False, {"action": "store_true"}
    ),
    Option(
        ("-o", "--output"),
        "output",
        "export, report: write FILE instead of stdout",
        "-o/--output",
        kwargs={"metavar": "FILE"},
    ),
    Option(
        ("--state",),
        "state",
        "export: only rows in this state (repeatable, or comma-separated)",
        "--state",
        kwargs={"action": "append", "metavar": "STATE"},
    ),
    Option(
        ("--response",),
        "response",
        "explain: a saved response (raw HTTP message or a body)",
        "--response",
        kwargs={"metavar": "FILE"},
    ),
    Option(
        ("--status",),
        "status",
        "explain --response: the status of a body-only FILE (default 200)",
        "--status",
        kwargs={"type": int, "metavar": "N"},
    ),
    Option(
        ("--header",),
        "header",
        "explain --response: a header 'Name: value' (repeatable)",
        "--header",
        kwargs={"action": "append", "metavar": "'NAME: VALUE'"},
    ),
    Option(("--top",), "top", "report: rows of 'changed most'", "--top", 25, {"type": int, "metavar": "N"}),
    Option(("--port",), "port", "serve: TCP port (0: any free port)", "--port", 8790, {"type": int}),
    Option(("--host",), "host", "serve: interface to listen on", "--host", "127.0.0.1"),
    Option(
        ("--token-file",), "token_file", "serve: lines 'REPORTER_ID TOKEN'", "--token-file", kwargs={"metavar": "FILE"}
    ),
    Option(("--db",), "db", "serve: directory of the service's votes and records", "--db", kwargs={"metavar": "DIR"}),
)


def add_options(group: Any) -> None:
    """Declare :data:`OPTIONS` on an argparse group, in table order."""
    for option in OPTIONS:
        kwargs = dict(option.kwargs)
        if option.default is not None and kwargs.get("action") != "store_true":
            kwargs["default"] = option.default
        group.add_argument(*option.flags, help=option.help, **kwargs)


def help_text() -> str:
    """The ``subcommands:`` block of the long help: usage in a column of 22, descriptions beside it."""
    lines = []
    for sub in SUBCOMMANDS:
        for usage, text in sub.help:
            first, *rest = text.split("\n")
            lines.append(f"  {usage:<22}{first}")
            lines.extend(f"{'':24}{line}" for line in rest)
    return "\n".join(lines)
