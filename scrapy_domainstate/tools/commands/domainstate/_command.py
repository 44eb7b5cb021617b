"""The Scrapy command: help text and options from the subcommand table, dispatch, errors to exit codes."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import Any, ClassVar

from scrapy.commands import ScrapyCommand, ScrapyHelpFormatter
from scrapy.exceptions import UsageError

from scrapy_domainstate.core.config import ConfigError
from scrapy_domainstate.store import StoreError
from scrapy_domainstate.tools.commands.domainstate._context import Context
from scrapy_domainstate.tools.commands.domainstate._output import Failure
from scrapy_domainstate.tools.commands.domainstate._table import BY_NAME, OPTIONS, add_options, help_text

_LONG_DESC = f"""\
Inspect and manage the scrapy-domainstate store: the one the project's settings
name, or, outside a project, -s DOMAINSTATE_LMDB_PATH=/path/to/db (a relative
path lives in the project's .scrapy/ directory, or in ./.scrapy/ outside one).
Subcommands that only read open the LMDB store read-only: they are safe while
crawls write to it, and never create a database.

subcommands:
{help_text()}

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
        return f"SUBCOMMAND [ARGS] [options]  ({', '.join(BY_NAME)})"

    def short_desc(self) -> str:
        return "Inspect and manage the per-domain state store (scrapy-domainstate)"

    def long_desc(self) -> str:
        return _LONG_DESC

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        # Keep the line breaks of long_desc (Scrapy's formatter reflows it into one paragraph).
        parser.formatter_class = _HelpFormatter
        add_options(parser.add_argument_group("Subcommand Options"))

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if not args:
            raise UsageError(f"a subcommand is needed: {', '.join(BY_NAME)}")
        name, rest = args[0], args[1:]
        sub = BY_NAME.get(name)
        if sub is None:
            raise UsageError(f"unknown subcommand {name!r}; one of: {', '.join(BY_NAME)}", print_help=False)
        stray = [a for a in rest if a.startswith("-") and a != "-"]
        if stray:
            raise UsageError(f"unknown option {stray[0]!r}", print_help=False)
        if not sub.min_args <= len(rest) <= sub.max_args:
            raise UsageError(f"usage: scrapy domainstate {f'{name} {sub.args}'.strip()}", print_help=False)
        for option in OPTIONS:
            if option.dest not in sub.options and getattr(opts, option.dest, option.default) != option.default:
                raise UsageError(f"{option.shown} does not apply to '{name}'", print_help=False)
        assert self.settings is not None
        try:
            sub.handler(Context(self.settings, sub.access), rest, opts)
        except Failure as exc:
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
