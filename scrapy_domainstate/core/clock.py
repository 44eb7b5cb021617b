"""Time units and the duration syntax shared by the settings and the command.

A duration is a number of seconds or a string with a unit: ``90``, ``90s``,
``90m``, ``12h``, ``7d``, ``2w``. ``none`` (also ``never``, ``inf``) means "no
expiry" where a setting or an option allows it.
"""

from __future__ import annotations

import math

__all__ = [
    "DAY",
    "DEFAULT_TTL_WORDS",
    "FUTURE_MARGIN",
    "HOUR",
    "MINUTE",
    "NO_EXPIRY",
    "UNITS",
    "WEEK",
    "parse_duration",
    "parse_ttl",
]

MINUTE = 60.0
HOUR = 3600.0
DAY = 86400.0
WEEK = 7 * DAY
#: A stamp more than this ahead of ``now`` was made by a clock that ran ahead (and was set back
#: since): the record is judged as if it had been stamped ``now`` (eviction, TTLs, the dead
#: rule's "later visit"). The shared-state service refuses such stamps with the same margin.
FUTURE_MARGIN = 5 * MINUTE

#: Unit suffix -> seconds.
UNITS: dict[str, float] = {"s": 1.0, "m": MINUTE, "h": HOUR, "d": DAY, "w": WEEK}
#: Words that mean "never expires".
NO_EXPIRY: frozenset[str] = frozenset({"none", "never", "inf", "infinite"})


def parse_duration(text: str) -> float | None:
    """Seconds for ``text`` (``"90"``, ``"12h"``, ``"7d"``, ``"2w"``), ``None`` for ``"none"``.

    Raises :class:`ValueError` for anything else (a bad number or unit, NaN,
    an infinity written as a number). The sign is the caller's to check.
    """
    value = text.strip().lower()
    if value in NO_EXPIRY:
        return None
    scale = 1.0
    if value[-1:] in UNITS:
        scale = UNITS[value[-1]]
        value = value[:-1].rstrip()
    try:
        seconds = float(value) * scale
    except ValueError:
        raise ValueError(f"not a duration: {text!r}") from None
    if not math.isfinite(seconds):
        raise ValueError(f"not a duration: {text!r}")
    return seconds


#: Words for "the state's own TTL" (``set --ttl default``; the API's ``ttl="default"``).
DEFAULT_TTL_WORDS: frozenset[str] = frozenset({"default"})
#: What :func:`parse_ttl` accepts, for error messages.
TTL_SYNTAX = (
    "a positive number of seconds or a duration (90m, 12h, 7d, 2w), 'none' for no TTL, "
    "or 'default' for the state's own TTL"
)


def parse_ttl(value: object) -> float | None:
    """A TTL as ``scrapy domainstate set --ttl`` and the Python API take it: ``-1.0`` for the
    state's own TTL (``"default"``, or ``-1`` as the API's historical default), ``None`` for no
    TTL (``"none"`` or ``None``), else positive seconds (a number, ``"90"``, ``"12h"``, ``"7d"``).
    Raises :class:`ValueError` naming :data:`TTL_SYNTAX` for anything else (zero, negatives, NaN)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"ttl must be {TTL_SYNTAX}; got {value!r}")
    if isinstance(value, (int, float)):
        seconds = float(value)
        if seconds == -1.0:
            return -1.0
    elif isinstance(value, str):
        if value.strip().lower() in DEFAULT_TTL_WORDS:
            return -1.0
        try:
            parsed = parse_duration(value)
        except ValueError:
            parsed = math.nan
        if parsed is None:
            return None
        seconds = parsed
    else:
        raise ValueError(f"ttl must be {TTL_SYNTAX}; got {type(value).__name__} {value!r}")
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"ttl must be {TTL_SYNTAX}; got {value!r}")
    return seconds
