"""What the subcommands print and parse: the progress counter, times, sizes, states, TTLs, output files."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, TextIO

from scrapy_domainstate.core.clock import TTL_SYNTAX
from scrapy_domainstate.core.clock import parse_ttl as parse_ttl_value
from scrapy_domainstate.core.record import DomainStat, State
from scrapy_domainstate.core.record import parse_state as parse_state_value

STATE_NAMES = [s.value for s in State]
VALID_STATES = ", ".join(STATE_NAMES)


class Failure(Exception):
    """Stop the subcommand: print ``error: message`` and exit with ``code``."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def isatty(stream: IO[Any]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Progress:
    """A ``\\r``-updated counter on stderr, only when stderr is a terminal.

    Nothing is drawn for operations that end within ``delay`` seconds, and
    nothing at all when stderr is piped or redirected, unless ``every`` is given:
    then a piped stderr gets one plain line every ``every`` seconds (a long
    operation run from cron or CI is not silent; a short one still prints nothing).
    """

    def __init__(
        self, label: str, total: int | None = None, stream: TextIO | None = None, every: float | None = None
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        terminal = isatty(self.stream)
        self.enabled = terminal or every is not None
        self.label = label
        self.total = total
        self.delay = 0.3 if terminal else float(every or 0)
        self.interval = 0.1 if terminal else float(every or 0)
        self._lines = not terminal
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
        if self._lines:
            self.stream.write(f"{text[1:]} ({now - self._start:.0f} s)\n")
            self.stream.flush()
            return
        self._width = max(self._width, len(text))
        self.stream.write(text)
        self.stream.flush()

    def note(self, text: str) -> None:
        """A one-off status line (for steps that report no progress)."""
        if self.enabled and not self._lines:
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


def size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover


def disk_usage(path: str | None) -> int | None:
    if not path or not os.path.isdir(path):
        return None
    total = 0
    with os.scandir(path) as it:
        for entry in it:
            if entry.is_file(follow_symlinks=False):
                total += entry.stat(follow_symlinks=False).st_size
    return total


def parse_state(name: str) -> State:
    try:
        return parse_state_value(name)
    except ValueError as exc:
        raise Failure(2, str(exc)) from None


def parse_ttl(text: str | None) -> float | None:
    """``None`` (option absent): the state's default (-1); ``none``: no TTL; ``90``, ``12h``, ``7d``: seconds
    (:func:`~scrapy_domainstate.core.clock.parse_ttl`, as the Python API reads it)."""
    if text is None:
        return -1.0
    try:
        return parse_ttl_value(text)
    except ValueError:
        raise Failure(2, f"--ttl must be {TTL_SYNTAX}; got {text!r}") from None


def stat_json(stat: DomainStat) -> dict[str, Any]:
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
def output(path: str | None, newline: str | None = None) -> Iterator[TextIO]:
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
        raise Failure(1, f"cannot write {path}: {exc}") from None
    try:
        with open(fd, "w", encoding="utf-8", newline=newline) as fh:
            yield fh
        umask = os.umask(0o022)
        os.umask(umask)
        try:
            os.chmod(tmp, 0o666 & ~umask)
            os.replace(tmp, target)
        except OSError as exc:
            raise Failure(1, f"cannot write {path}: {exc}") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
