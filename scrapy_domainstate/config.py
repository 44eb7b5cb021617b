"""Every setting of the plugin: declared once with its default, validated once.

:data:`SETTINGS` is the single source of defaults; the README's settings table
is checked against it by a test. :meth:`Config.from_settings` turns a Scrapy
``Settings`` (or any mapping) into a frozen :class:`Config`, raising
:class:`ConfigError` with the setting's name when a value is wrong.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .record import State

__all__ = ["DEFAULT_TTL", "SETTINGS", "Config", "ConfigError", "Setting"]

DAY = 86400.0

#: TTL in seconds per state; ``None`` means the state never expires.
DEFAULT_TTL: dict[State, float | None] = {
    State.UNKNOWN: 7 * DAY,
    State.DEAD: 30 * DAY,
    State.ANTIBOT_SOFT: 7 * DAY,
    State.ANTIBOT_HARD: 90 * DAY,
    State.FRIENDLY: None,
    State.COLD: 90 * DAY,
}


class ConfigError(ValueError):
    """A setting has a value the plugin cannot use. The message names it."""


@dataclass(frozen=True)
class Setting:
    name: str
    default: Any
    type: str
    doc: str


def _s(name: str, default: Any, type_: str, doc: str) -> Setting:
    return Setting(name, default, type_, doc)


SETTINGS: tuple[Setting, ...] = (
    _s("DOMAINSTATE_ENABLED", True, "bool", "Switch the plugin on or off."),
    _s(
        "DOMAINSTATE_STORE",
        "scrapy_domainstate.store.lmdb.LmdbStore",
        "str",
        "Class path of the store (LMDB, Redis or memory).",
    ),
    _s(
        "DOMAINSTATE_LMDB_PATH",
        "domainstate",
        "str",
        "LMDB directory; relative paths live in the project data dir (like HTTPCACHE_DIR).",
    ),
    _s(
        "DOMAINSTATE_LMDB_MAP_SIZE",
        1 << 30,
        "int",
        "Bytes reserved for the LMDB map (sparse); grown on demand when full.",
    ),
    _s("DOMAINSTATE_REDIS_URL", None, "str", "Redis URL for the Redis store (falls back to REDIS_URL)."),
    _s("DOMAINSTATE_REDIS_PREFIX", "domainstate:", "str", "Key prefix in Redis."),
    _s(
        "DOMAINSTATE_TTL",
        {},
        "dict",
        "State -> seconds (None = no TTL); merged with the defaults.",
    ),
    _s("DOMAINSTATE_DEAD_THRESHOLD", 2, "int", "Consecutive dead signals that make an unknown domain dead."),
    _s("DOMAINSTATE_ANTIBOT_HARD_THRESHOLD", 3, "int", "Consecutive antibot outcomes that make a domain antibot-hard."),
    _s("DOMAINSTATE_COLD_THRESHOLD", 5, "int", "Consecutive ok-empty outcomes that make a domain cold."),
    _s("DOMAINSTATE_FRIENDLY_WINDOW", 10, "int", "How many recent fetch outcomes the friendly rule looks at."),
    _s(
        "DOMAINSTATE_FRIENDLY_RATIO",
        0.7,
        "float",
        "Share of ok-contact fetches in the window that makes a domain friendly.",
    ),
    _s("DOMAINSTATE_FRIENDLY_MIN_FETCHES", 5, "int", "Fetches needed in the window before the friendly rule applies."),
    _s("DOMAINSTATE_FRIENDLY_DEMOTE", 5, "int", "Consecutive failed fetches that demote a friendly domain to unknown."),
    _s("DOMAINSTATE_RECENT_SIZE", 20, "int", "Entries kept in a record's recent history (FIFO)."),
    _s(
        "DOMAINSTATE_URL_DEAD_TTL", 30 * DAY, "float", "Seconds a URL answering 404/410 (off the site root) is skipped."
    ),
    _s("DOMAINSTATE_MAX_DOMAINS", 1_000_000, "int", "Cap on stored domains; the least recently seen are evicted."),
    _s("DOMAINSTATE_HEAD_PROBE", True, "bool", "Probe unknown domains with one HEAD request first."),
    _s(
        "DOMAINSTATE_BROWSER_META",
        {"playwright": True},
        "dict",
        "Meta merged into a request to send it to the browser.",
    ),
    _s("DOMAINSTATE_PER_HOSTNAME", False, "bool", "Track every hostname on its own instead of by eTLD+1."),
    _s(
        "DOMAINSTATE_OUTCOME",
        "contacts",
        "str",
        "What makes a page useful: 'contacts', 'items' or a dotted path to a callable.",
    ),
    _s("DOMAINSTATE_CHALLENGE_MARKERS", {}, "dict", "Extra body markers: vendor -> list of strings."),
    _s("DOMAINSTATE_BODY_SCAN_BYTES", 65536, "int", "Bytes of a body scanned for challenge markers and contacts."),
    _s("DOMAINSTATE_FLUSH_INTERVAL", 5.0, "float", "Seconds between batched store writes."),
    _s("DOMAINSTATE_FLUSH_SIZE", 500, "int", "Buffered outcomes that trigger a store write."),
    _s(
        "DOMAINSTATE_PROBE_TIMEOUT", 15.0, "float", "Seconds a HEAD probe may take before requests stop waiting for it."
    ),
    _s("DOMAINSTATE_REMOTE_URL", None, "str", "Base URL of a shared-state service (off when None)."),
    _s("DOMAINSTATE_REMOTE_TOKEN", None, "str", "Bearer token for the shared-state service."),
    _s("DOMAINSTATE_REMOTE_TIMEOUT", 2.0, "float", "Seconds before a call to the shared-state service is abandoned."),
    _s(
        "DOMAINSTATE_REMOTE_CONSENSUS",
        0.8,
        "float",
        "Share of agreeing reporters above which a remote state is adopted.",
    ),
    _s("DOMAINSTATE_REMOTE_MIN_REPORTERS", 3, "int", "Distinct reporters needed before a remote consensus counts."),
    _s("DOMAINSTATE_STATS_PER_DOMAIN", False, "bool", "Also count decisions per domain in stats (many keys)."),
)

_BY_NAME = {s.name: s for s in SETTINGS}


def _setting_value(settings: Mapping[str, Any], name: str) -> Any:
    value = settings.get(name, None) if hasattr(settings, "get") else None
    return _BY_NAME[name].default if value is None else value


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("1", "0", "true", "false", "yes", "no", "on", "off"):
        return value.strip().lower() in ("1", "true", "yes", "on")
    raise ConfigError(f"{name} must be a boolean, got {value!r}")


def _number(name: str, value: Any, kind: type, minimum: float, maximum: float | None = None) -> Any:
    if isinstance(value, bool):
        raise ConfigError(f"{name} must be a number, got {value!r}")
    try:
        number = kind(value)
        if kind is int and isinstance(value, float) and not value.is_integer():
            raise ValueError
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be {'an integer' if kind is int else 'a number'}, got {value!r}") from None
    if math.isnan(number) or number < minimum or (maximum is not None and number > maximum):
        bound = f">= {minimum}" if maximum is None else f"between {minimum} and {maximum}"
        raise ConfigError(f"{name} must be {bound}, got {value!r}")
    return number


def _dict(name: str, value: Any) -> dict[Any, Any]:
    if isinstance(value, str):
        import json

        try:
            value = json.loads(value)
        except ValueError:
            raise ConfigError(f"{name} must be a dict (or its JSON), got {value!r}") from None
    if hasattr(value, "copy_to_dict"):
        value = value.copy_to_dict()
    if not isinstance(value, Mapping):
        raise ConfigError(f"{name} must be a dict, got {value!r}")
    return dict(value)


def _ttl(value: Any) -> dict[State, float | None]:
    name = "DOMAINSTATE_TTL"
    ttl = dict(DEFAULT_TTL)
    for key, seconds in _dict(name, value).items():
        try:
            state = State(str(key).lower())
        except ValueError:
            valid = ", ".join(s.value for s in State)
            raise ConfigError(f"{name} has an unknown state {key!r}; valid states: {valid}") from None
        ttl[state] = None if seconds is None else _number(f"{name}[{key!r}]", seconds, float, 1.0)
    return ttl


def _optional_str(name: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{name} must be a non-empty string, got {value!r}")
    return value


def _markers(value: Any) -> dict[str, tuple[str, ...]]:
    name = "DOMAINSTATE_CHALLENGE_MARKERS"
    out: dict[str, tuple[str, ...]] = {}
    for vendor, given in _dict(name, value).items():
        markers = [given] if isinstance(given, str) else given
        if not isinstance(markers, (list, tuple)) or not all(isinstance(m, str) and m for m in markers):
            raise ConfigError(f"{name}[{vendor!r}] must be a list of non-empty strings, got {given!r}")
        out[str(vendor)] = tuple(markers)
    return out


@dataclass(frozen=True)
class Config:
    """The validated settings. Build it with :meth:`from_settings`."""

    enabled: bool = True
    store: str = _BY_NAME["DOMAINSTATE_STORE"].default
    lmdb_path: str = _BY_NAME["DOMAINSTATE_LMDB_PATH"].default
    lmdb_map_size: int = _BY_NAME["DOMAINSTATE_LMDB_MAP_SIZE"].default
    redis_url: str | None = None
    redis_prefix: str = "domainstate:"
    ttl: Mapping[State, float | None] = field(default_factory=lambda: dict(DEFAULT_TTL))
    dead_threshold: int = 2
    antibot_hard_threshold: int = 3
    cold_threshold: int = 5
    friendly_window: int = 10
    friendly_ratio: float = 0.7
    friendly_min_fetches: int = 5
    friendly_demote: int = 5
    recent_size: int = 20
    url_dead_ttl: float = 30 * DAY
    max_domains: int = 1_000_000
    head_probe: bool = True
    browser_meta: Mapping[str, Any] = field(default_factory=lambda: {"playwright": True})
    per_hostname: bool = False
    outcome: str = "contacts"
    challenge_markers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    body_scan_bytes: int = 65536
    flush_interval: float = 5.0
    flush_size: int = 500
    probe_timeout: float = 15.0
    remote_url: str | None = None
    remote_token: str | None = None
    remote_timeout: float = 2.0
    remote_consensus: float = 0.8
    remote_min_reporters: int = 3
    stats_per_domain: bool = False

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any] | None = None) -> Config:
        s = settings if settings is not None else {}

        def get(name: str) -> Any:
            return _setting_value(s, name)

        recent_size = _number("DOMAINSTATE_RECENT_SIZE", get("DOMAINSTATE_RECENT_SIZE"), int, 1, 255)

        def threshold(name: str) -> int:
            value = _number(name, get(name), int, 1)
            if value > recent_size:
                raise ConfigError(f"{name} ({value}) cannot exceed DOMAINSTATE_RECENT_SIZE ({recent_size})")
            return value

        window = threshold("DOMAINSTATE_FRIENDLY_WINDOW")
        min_fetches = threshold("DOMAINSTATE_FRIENDLY_MIN_FETCHES")
        if min_fetches > window:
            raise ConfigError(
                f"DOMAINSTATE_FRIENDLY_MIN_FETCHES ({min_fetches}) cannot exceed "
                f"DOMAINSTATE_FRIENDLY_WINDOW ({window}): no domain could ever become friendly"
            )
        redis_url = get("DOMAINSTATE_REDIS_URL")
        if redis_url is None and hasattr(s, "get"):
            redis_url = s.get("REDIS_URL")
        outcome = get("DOMAINSTATE_OUTCOME")
        if not isinstance(outcome, str) and callable(outcome):
            outcome = f"{outcome.__module__}.{outcome.__qualname__}"
        if not isinstance(outcome, str) or not outcome or (outcome not in ("contacts", "items") and "." not in outcome):
            raise ConfigError(
                f"DOMAINSTATE_OUTCOME must be 'contacts', 'items' or a dotted path to a callable, got {outcome!r}"
            )
        store = get("DOMAINSTATE_STORE")
        if not isinstance(store, str):
            store = f"{store.__module__}.{store.__qualname__}" if isinstance(store, type) else store
        if not isinstance(store, str) or "." not in store:
            raise ConfigError(f"DOMAINSTATE_STORE must be a class path like 'pkg.module.Class', got {store!r}")
        browser_meta = _dict("DOMAINSTATE_BROWSER_META", get("DOMAINSTATE_BROWSER_META"))
        if not browser_meta:
            raise ConfigError("DOMAINSTATE_BROWSER_META must not be empty: it is what routes a request to the browser")
        lmdb_path = get("DOMAINSTATE_LMDB_PATH")
        if not isinstance(lmdb_path, str) or not lmdb_path:
            raise ConfigError(f"DOMAINSTATE_LMDB_PATH must be a non-empty path, got {lmdb_path!r}")
        return cls(
            enabled=_bool("DOMAINSTATE_ENABLED", get("DOMAINSTATE_ENABLED")),
            store=store,
            lmdb_path=lmdb_path,
            lmdb_map_size=_number("DOMAINSTATE_LMDB_MAP_SIZE", get("DOMAINSTATE_LMDB_MAP_SIZE"), int, 1 << 16),
            redis_url=_optional_str("DOMAINSTATE_REDIS_URL", redis_url),
            redis_prefix=str(get("DOMAINSTATE_REDIS_PREFIX")),
            ttl=_ttl(get("DOMAINSTATE_TTL")),
            dead_threshold=threshold("DOMAINSTATE_DEAD_THRESHOLD"),
            antibot_hard_threshold=threshold("DOMAINSTATE_ANTIBOT_HARD_THRESHOLD"),
            cold_threshold=threshold("DOMAINSTATE_COLD_THRESHOLD"),
            friendly_window=window,
            friendly_ratio=_number("DOMAINSTATE_FRIENDLY_RATIO", get("DOMAINSTATE_FRIENDLY_RATIO"), float, 0.0, 1.0),
            friendly_min_fetches=min_fetches,
            friendly_demote=threshold("DOMAINSTATE_FRIENDLY_DEMOTE"),
            recent_size=recent_size,
            url_dead_ttl=_number("DOMAINSTATE_URL_DEAD_TTL", get("DOMAINSTATE_URL_DEAD_TTL"), float, 0.0),
            max_domains=_number("DOMAINSTATE_MAX_DOMAINS", get("DOMAINSTATE_MAX_DOMAINS"), int, 1),
            head_probe=_bool("DOMAINSTATE_HEAD_PROBE", get("DOMAINSTATE_HEAD_PROBE")),
            browser_meta=browser_meta,
            per_hostname=_bool("DOMAINSTATE_PER_HOSTNAME", get("DOMAINSTATE_PER_HOSTNAME")),
            outcome=outcome,
            challenge_markers=_markers(get("DOMAINSTATE_CHALLENGE_MARKERS")),
            body_scan_bytes=_number("DOMAINSTATE_BODY_SCAN_BYTES", get("DOMAINSTATE_BODY_SCAN_BYTES"), int, 256),
            flush_interval=_number("DOMAINSTATE_FLUSH_INTERVAL", get("DOMAINSTATE_FLUSH_INTERVAL"), float, 0.0),
            flush_size=_number("DOMAINSTATE_FLUSH_SIZE", get("DOMAINSTATE_FLUSH_SIZE"), int, 1),
            probe_timeout=_number("DOMAINSTATE_PROBE_TIMEOUT", get("DOMAINSTATE_PROBE_TIMEOUT"), float, 0.001),
            remote_url=_optional_str("DOMAINSTATE_REMOTE_URL", get("DOMAINSTATE_REMOTE_URL")),
            remote_token=_optional_str("DOMAINSTATE_REMOTE_TOKEN", get("DOMAINSTATE_REMOTE_TOKEN")),
            remote_timeout=_number("DOMAINSTATE_REMOTE_TIMEOUT", get("DOMAINSTATE_REMOTE_TIMEOUT"), float, 0.001),
            remote_consensus=_number(
                "DOMAINSTATE_REMOTE_CONSENSUS", get("DOMAINSTATE_REMOTE_CONSENSUS"), float, 0.0, 1.0
            ),
            remote_min_reporters=_number(
                "DOMAINSTATE_REMOTE_MIN_REPORTERS", get("DOMAINSTATE_REMOTE_MIN_REPORTERS"), int, 1
            ),
            stats_per_domain=_bool("DOMAINSTATE_STATS_PER_DOMAIN", get("DOMAINSTATE_STATS_PER_DOMAIN")),
        )
