"""The service's files: private modes for what names the reporters, the token file."""

from __future__ import annotations

import logging
import os

from scrapy_domainstate.core.config import ConfigError

__all__ = ["load_tokens", "make_private"]

logger = logging.getLogger(__name__)


def make_private(path: str, mode: int) -> None:
    """Make ``path`` (created by this process) accessible to its owner only."""
    try:
        if os.stat(path).st_mode & 0o777 != mode:
            os.chmod(path, mode)
    except OSError as exc:
        logger.warning("cannot make %s private (chmod %o): %s", path, mode, exc)


def load_tokens(path: str) -> dict[str, str]:
    """Read a token file: one ``REPORTER_ID TOKEN`` pair a line; ``#`` comments.

    Returns ``{token: reporter_id}``. Raises :class:`ConfigError` naming the line, or
    when other users may read or change the file (it must be ``chmod 600``).
    """
    tokens: dict[str, str] = {}
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise ConfigError(f"cannot read the token file {path}: {exc}") from None
    if mode & 0o077:
        raise ConfigError(
            f"the token file {path} can be read or changed by other users (mode {mode & 0o777:o}): "
            f"run 'chmod 600 {path}'"
        )
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read the token file {path}: {exc}") from None
    for n, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 2:
            raise ConfigError(f"{path}:{n}: expected 'REPORTER_ID TOKEN'")
        reporter, token = parts
        if token in tokens:
            raise ConfigError(f"{path}:{n}: this token is already given to {tokens[token]!r}")
        tokens[token] = reporter
    if not tokens:
        raise ConfigError(f"{path}: no tokens")
    return tokens
