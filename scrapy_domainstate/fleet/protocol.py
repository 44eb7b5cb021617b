"""The wire format of the shared domain-state API, as both sides validate it.

``docs/openapi.yaml`` describes the API; this module holds what the client and the
service must agree on, written once: the paths, the limits of a request, the syntax of a
domain key (:func:`scrapy_domainstate.core.keys.is_domain_key`), what counts as a number, how
JSON is read, and the shape of a verdict (:func:`parse_lookup_response`). Pure: no I/O.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Iterable
from typing import Any

from scrapy_domainstate.core.keys import MAX_DOMAIN_LENGTH, is_domain_key
from scrapy_domainstate.core.record import State
from scrapy_domainstate.fleet.verdicts import RemoteVerdict

__all__ = [
    "API_PATH",
    "MAX_BATCH",
    "MAX_DOMAIN_LENGTH",
    "MAX_EVIDENCE",
    "MAX_SKEW",
    "STATES",
    "STATS_PATH",
    "InvalidResponse",
    "finite_number",
    "has_control",
    "is_domain_key",
    "is_text",
    "load_json",
    "parse_lookup_response",
    "without_control",
]

#: Path of the API, relative to ``DOMAINSTATE_REMOTE_URL``.
API_PATH = "/api/scrape/domain-state"
#: Path of the service's request counters.
STATS_PATH = "/api/scrape/stats"
#: Most domains in one lookup, and most reports in one POST (the service's limits).
MAX_BATCH = 100
#: Longest ``evidence`` string of a report.
MAX_EVIDENCE = 200
#: Seconds a ``last_seen`` may lie in the future (clock skew between machines).
MAX_SKEW = 300.0
#: The states by their wire name.
STATES: dict[str, State] = {s.value: s for s in State}

_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


def finite_number(value: object) -> float | None:
    """A finite float, or ``None`` (wrong type, a bool, NaN, infinite, too large for a float)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:  # an integer of hundreds of digits: not a number we can use
        return None
    return value if math.isfinite(value) else None


def has_control(text: str) -> bool:
    """Whether ``text`` holds a C0 control character or DEL."""
    return _CONTROL_RE.search(text) is not None


def without_control(text: str) -> str:
    """``text`` with every control character (see :func:`has_control`) made a space."""
    return _CONTROL_RE.sub(" ", text)


def is_text(value: str) -> bool:
    """Whether ``value`` is valid Unicode text (JSON escapes can make lone surrogates)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def load_json(body: bytes, *, unique_keys: bool = False) -> Any:
    """Read a UTF-8 JSON body; ``NaN`` and ``Infinity`` are refused, and with
    ``unique_keys`` an object repeating a key. Raises ``ValueError`` with the reason."""
    hook: Callable[[list[tuple[str, Any]]], dict[str, Any]] | None = _no_duplicates if unique_keys else None
    try:
        return json.loads(body.decode("utf-8"), parse_constant=_reject_constant, object_pairs_hook=hook)
    except RecursionError:
        raise ValueError("nested too deeply") from None


# ---------------------------------------------------------------- verdicts


class InvalidResponse(ValueError):
    """The service answered something that is not a valid answer."""


def _count(value: object, low: int, high: int) -> int | None:
    """``value`` when it is an int (not a bool) within ``low..high``, else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return None
    return value


def _parse_verdict(domain: str, entry: object, now: float) -> RemoteVerdict | None:
    if not isinstance(entry, dict):
        return None
    raw_state = entry.get("state")
    state = STATES.get(raw_state) if isinstance(raw_state, str) else None
    consensus = finite_number(entry.get("consensus"))
    reporters = _count(entry.get("reporters"), 1, 10**9)
    last_seen = finite_number(entry.get("last_seen"))
    expires_raw = entry.get("expires_at")
    expires_at = None if expires_raw is None else finite_number(expires_raw)
    agreeing_raw = entry.get("agreeing")
    if (
        state is None
        or consensus is None
        or not 0.0 <= consensus <= 1.0
        or reporters is None
        or last_seen is None
        or not 0.0 <= last_seen <= now + MAX_SKEW  # a "future" verdict would win every conflict
        or (expires_raw is not None and expires_at is None)
    ):
        return None
    agreeing = None if agreeing_raw is None else _count(agreeing_raw, 1, reporters)
    if agreeing_raw is not None and agreeing is None:
        return None
    return RemoteVerdict(domain, state, consensus, reporters, last_seen, expires_at, agreeing)


def parse_lookup_response(
    body: bytes, requested: Iterable[str], now: float | None = None
) -> tuple[dict[str, RemoteVerdict], int]:
    """Validate a lookup answer: ``({domain: verdict}, number of invalid entries)``.

    Raises :class:`InvalidResponse` when the body as a whole is not a valid answer
    (not UTF-8 JSON, not ``{"domains": {...}}``). An entry with a wrong type, an unknown
    state, an out-of-range number or a ``last_seen`` in the future is dropped and counted;
    entries for domains that were not asked for are ignored.
    """
    now = time.time() if now is None else now
    try:
        data = load_json(body)
    except ValueError as exc:
        raise InvalidResponse(f"not JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("domains"), dict):
        raise InvalidResponse('not an object of the form {"domains": {...}}')
    answers = data["domains"]
    verdicts: dict[str, RemoteVerdict] = {}
    invalid = 0
    for domain in requested:
        if domain not in answers:
            continue
        try:
            verdict = _parse_verdict(domain, answers[domain], now)
        except (TypeError, ValueError, OverflowError, AttributeError):  # one bad entry, not the batch
            verdict = None
        if verdict is None:
            invalid += 1
        else:
            verdicts[domain] = verdict
    return verdicts, invalid
