"""Every setting of the plugin: declared once, validated once.

:data:`SETTINGS` is the single list: each row gives a setting's name, default,
type, doc, parser and README example. Everything else is derived from it: the
fields of :class:`Config` (their defaults are the rows' defaults, parsed), the
README's settings table (``scripts/settings_table.py``), and the check for
misspelt names (:func:`unknown_settings`). So ``Config() ==
Config.from_settings({})`` holds by construction.

To add a setting: add a row with ``_s(name, default, type, doc)`` (the parser
follows from the type; pass ``parse=`` for bounds or a special form), add the
typed field ``name_without_prefix: type = FROM_TABLE`` to :class:`Config`, and
run ``python scripts/settings_table.py --write``.

:meth:`Config.from_settings` turns a Scrapy ``Settings`` (or any mapping) into
a frozen :class:`Config`, raising :class:`ConfigError` with the setting's name
when a value is wrong. Values may be Python objects (``settings.py``,
``custom_settings``) or strings (``scrapy crawl -s NAME=VALUE``; dicts as JSON).
"""

from __future__ import annotations

import difflib
import importlib
import json
import logging
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from scrapy_domainstate.core.clock import DAY, parse_duration  # DAY: also imported from here by older code
from scrapy_domainstate.core.record import State

if TYPE_CHECKING:
    from scrapy_domainstate.core.wallrules import WallRules

__all__ = [
    "DEFAULT_TTL",
    "SETTINGS",
    "Config",
    "ConfigError",
    "Setting",
    "log_unknown_settings",
    "unknown_settings",
]

logger = logging.getLogger(__name__)

PREFIX = "DOMAINSTATE_"

#: TTL in seconds per state; ``None`` means the state never expires.
DEFAULT_TTL: dict[State, float | None] = {
    State.UNKNOWN: 7 * DAY,
    State.DEAD: 30 * DAY,
    State.ANTIBOT_SOFT: 7 * DAY,
    State.ANTIBOT_HARD: 90 * DAY,
    State.FRIENDLY: None,
    State.COLD: 90 * DAY,
}

#: ``DOMAINSTATE_*`` settings read elsewhere than :class:`Config` (so not misspellings).
OTHER_SETTINGS: frozenset[str] = frozenset(
    {
        "DOMAINSTATE_TEST_HOSTS",  # scrapy_domainstate.testing.resolver
    }
)


class ConfigError(ValueError):
    """A setting has a value the plugin cannot use. The message names it."""


#: A parser takes the setting's name (for messages) and the raw value, and returns the value.
Parser = Callable[[str, Any], Any]

# ---------------------------------------------------------------- parsers


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("1", "0", "true", "false", "yes", "no", "on", "off"):
        return value.strip().lower() in ("1", "true", "yes", "on")
    raise ConfigError(f"{name} must be a boolean, got {value!r}")


_N = TypeVar("_N", int, float)


#: The largest LMDB map the store reserves or grows to (16 TiB): a map of 64 TiB or more
#: is what a damaged meta page looks like (``store._lmdbcheck``), so none is ever written.
LMDB_MAX_MAP_SIZE = 1 << 44


def _number(name: str, value: Any, kind: type[_N], minimum: float, maximum: float | None = None) -> _N:
    if isinstance(value, bool):
        raise ConfigError(f"{name} must be a number, got {value!r}")
    try:
        number = kind(value)
        if kind is int and isinstance(value, float) and not value.is_integer():
            raise ValueError
    except (TypeError, ValueError, OverflowError):  # (int(float("inf")) overflows)
        raise ConfigError(f"{name} must be {'an integer' if kind is int else 'a number'}, got {value!r}") from None
    if math.isnan(number) or number < minimum or (maximum is not None and number > maximum):
        bound = f">= {minimum}" if maximum is None else f"between {minimum} and {maximum}"
        raise ConfigError(f"{name} must be {bound}, got {value!r}")
    return number


def _int(minimum: int, maximum: int | None = None) -> Parser:
    def parse(name: str, value: Any) -> int:
        return _number(name, value, int, minimum, maximum)

    return parse


def _float(minimum: float, maximum: float | None = None) -> Parser:
    def parse(name: str, value: Any) -> float:
        return _number(name, value, float, minimum, maximum)

    return parse


def _seconds(name: str, value: Any, minimum: float, allow_none: bool) -> float | None:
    """A duration: a number of seconds or ``"90m"``, ``"12h"``, ``"7d"``, ``"2w"`` (``"none"`` if allowed)."""
    if value is None and allow_none:
        return None
    if isinstance(value, str):
        try:
            seconds = parse_duration(value)
        except ValueError:
            forms = "'90m', '12h', '7d', '2w'" + (" or 'none'" if allow_none else "")
            raise ConfigError(
                f"{name} must be a number of seconds or a duration such as {forms}, got {value!r}"
            ) from None
        if seconds is None:
            if allow_none:
                return None
            raise ConfigError(f"{name} cannot be 'none' (no expiry), got {value!r}")
        value = seconds
    return _number(name, value, float, minimum)


def _duration(minimum: float) -> Parser:
    def parse(name: str, value: Any) -> float | None:
        return _seconds(name, value, minimum, allow_none=False)

    return parse


def _str(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{name} must be a non-empty string, got {value!r}")
    return value


def _optional_str(name: str, value: Any) -> str | None:
    return None if value is None else _str(name, value)


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{name} must be a string, got {value!r}")
    return value


def _dict(name: str, value: Any) -> dict[Any, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ConfigError(f"{name} must be a dict (or its JSON), got {value!r}") from None
    if hasattr(value, "copy_to_dict"):
        value = value.copy_to_dict()
    if not isinstance(value, Mapping):
        raise ConfigError(f"{name} must be a dict, got {value!r}")
    return dict(value)


def _ttl(name: str, value: Any) -> dict[State, float | None]:
    ttl = dict(DEFAULT_TTL)
    for key, seconds in _dict(name, value).items():
        try:
            state = State(str(key).lower())
        except ValueError:
            valid = ", ".join(s.value for s in State)
            raise ConfigError(f"{name} has an unknown state {key!r}; valid states: {valid}") from None
        ttl[state] = _seconds(f"{name}[{key!r}]", seconds, 1.0, allow_none=True)
    return ttl


def _markers(name: str, value: Any) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for vendor, given in _dict(name, value).items():
        markers = [given] if isinstance(given, str) else given
        if not isinstance(markers, (list, tuple)) or not all(isinstance(m, str) and m for m in markers):
            raise ConfigError(f"{name}[{vendor!r}] must be a list of non-empty strings, got {given!r}")
        out[str(vendor)] = tuple(markers)
    return out


def _wall_rules(name: str, value: Any) -> Any:
    from scrapy_domainstate.core.wallrules import parse_wall_rules

    return parse_wall_rules(name, value)


def _wall_predicate(name: str, value: Any) -> str | None:
    from scrapy_domainstate.core.wallrules import parse_predicate

    return parse_predicate(name, value)


def _browser_meta(name: str, value: Any) -> dict[str, Any] | None:
    """The browser meta, or ``None`` (also ``"None"``/``"null"``/``""`` from ``-s``): no browser."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "null")):
        return None
    meta = _dict(name, value)
    if not meta:
        raise ConfigError(f"{name} must not be empty: it is what routes a request to the browser (None: no browser)")
    return meta


def _dotted(what: str) -> Parser:
    """A dotted path (``pkg.module.name``); a class or function given as an object becomes its path."""

    def parse(name: str, value: Any) -> str:
        if not isinstance(value, str) and callable(value):
            value = f"{value.__module__}.{value.__qualname__}"
        if not isinstance(value, str) or "." not in value:
            raise ConfigError(f"{name} must be {what}, got {value!r}")
        return value

    return parse


def import_object(path: str) -> Any:
    """The object a dotted path (``pkg.module.name``) names, imported.

    Raises ``ImportError``, ``AttributeError`` or ``ValueError`` (not a dotted path), the
    errors Scrapy's ``load_object`` raises, so callers report one message for all of them.
    """
    module, _, name = path.rpartition(".")
    if not module:
        raise ValueError(f"not a dotted path: {path!r}")
    return getattr(importlib.import_module(module), name)


def _outcome(name: str, value: Any) -> str:
    if not isinstance(value, str) and callable(value):
        value = f"{value.__module__}.{value.__qualname__}"
    if not isinstance(value, str) or not value or (value not in ("contacts", "items") and "." not in value):
        raise ConfigError(f"{name} must be 'contacts', 'items' or a dotted path to a callable, got {value!r}")
    return value


def _path(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{name} must be a non-empty path, got {value!r}")
    return value


def _parser_for(type_: str, default: Any) -> Parser:
    """The parser a row gets when it names none: by its type (numbers must be >= 0)."""
    if type_ == "str":
        return _optional_str if default is None else _text
    by_type: dict[str, Parser] = {
        "bool": _bool,
        "int": _int(0),
        "float": _float(0.0),
        "duration": _duration(0.0),
        "dict": _dict,
    }
    if type_ not in by_type:
        raise TypeError(f"unknown setting type {type_!r}")
    return by_type[type_]


# ---------------------------------------------------------------- the table

#: "Not set at all" (distinct from an explicit ``None``).
_UNSET: Any = object()


@dataclass(frozen=True)
class Setting:
    """One row of :data:`SETTINGS`."""

    name: str
    default: Any
    type: str
    doc: str
    parse: Parser
    #: The right-hand side of a README example (``NAME = <example>``), if any.
    example: str | None = None
    #: A setting read instead when this one is unset (``REDIS_URL`` for ``DOMAINSTATE_REDIS_URL``).
    fallback: str | None = None
    #: Settings whose value this one may not exceed (checked after every value is parsed).
    at_most: tuple[str, ...] = ()
    #: An explicit ``None`` is a value given to the parser (e.g. "off"), not "use the default".
    nullable: bool = False

    @property
    def field(self) -> str:
        """The :class:`Config` attribute: the name without its prefix, lowercased."""
        return self.name.removeprefix(PREFIX).lower()

    def value(self, raw: Any = _UNSET) -> Any:
        """The parsed value of ``raw``; unset (or ``None``, unless the row is nullable): the default."""
        if raw is _UNSET or (raw is None and not self.nullable):
            raw = self.default
        return self.parse(self.name, raw)


def _s(
    name: str,
    default: Any,
    type_: str,
    doc: str,
    *,
    parse: Parser | None = None,
    example: str | None = None,
    fallback: str | None = None,
    at_most: tuple[str, ...] = (),
    nullable: bool = False,
) -> Setting:
    parser = parse or _parser_for(type_, default)
    return Setting(name, default, type_, doc, parser, example, fallback, at_most, nullable)


#: Thresholds count entries of a record's recent history, so none may exceed its size.
_IN_RECENT = ("DOMAINSTATE_RECENT_SIZE",)

SETTINGS: tuple[Setting, ...] = (
    _s(
        "DOMAINSTATE_ENABLED",
        True,
        "bool",
        "Switch the plugin on or off. Off (also: ``domainstate_enabled = False`` on a spider), it logs "
        "one INFO line and enables nothing.",
        example="False",
    ),
    _s(
        "DOMAINSTATE_STORE",
        "scrapy_domainstate.store.lmdb.LmdbStore",
        "str",
        "Class path of the store (LMDB, Redis or memory).",
        parse=_dotted("a class path like 'pkg.module.Class'"),
        example='"scrapy_domainstate.store.redis.RedisStore"',
    ),
    _s(
        "DOMAINSTATE_LMDB_PATH",
        "domainstate",
        "str",
        "LMDB directory; relative paths live in the project data dir (like HTTPCACHE_DIR).",
        parse=_path,
        example='"/var/lib/crawl/domainstate"',
    ),
    _s(
        "DOMAINSTATE_LMDB_MAP_SIZE",
        1 << 30,
        "int",
        "Bytes reserved for the LMDB map (sparse); grown on demand when full, up to 16 TiB.",
        parse=_int(1 << 16, LMDB_MAX_MAP_SIZE),
        example="8 << 30",
    ),
    _s(
        "DOMAINSTATE_REDIS_URL",
        None,
        "str",
        "Redis URL for the Redis store (falls back to REDIS_URL).",
        fallback="REDIS_URL",
        example='"redis://cache:6379/0"',
    ),
    _s("DOMAINSTATE_REDIS_PREFIX", "domainstate:", "str", "Key prefix in Redis.", example='"shop-crawl:ds:"'),
    _s(
        "DOMAINSTATE_TTL",
        {},
        "dict",
        "State -> TTL (a duration; None or 'none' = no TTL); merged with the defaults.",
        parse=_ttl,
        example='{"dead": "14d", "cold": None}',
    ),
    _s(
        "DOMAINSTATE_DEAD_THRESHOLD",
        2,
        "int",
        "Consecutive dead signals that make an unknown domain dead on a first visit (a later visit "
        "confirms the verdict with its first dead signal; on a host that has answered before, "
        "the third visit does).",
        parse=_int(1),
        at_most=_IN_RECENT,
    ),
    _s(
        "DOMAINSTATE_ANTIBOT_HARD_THRESHOLD",
        3,
        "int",
        "Consecutive antibot outcomes that make a domain antibot-hard.",
        parse=_int(1),
        at_most=_IN_RECENT,
    ),
    _s(
        "DOMAINSTATE_COLD_THRESHOLD",
        10,
        "int",
        "Consecutive ok-empty outcomes (navigation pages aside) that make a never-useful domain cold "
        "(when an expiry cleared recent, its lifetime empty fetches count).",
        parse=_int(1),
        at_most=_IN_RECENT,
    ),
    _s(
        "DOMAINSTATE_FRIENDLY_WINDOW",
        10,
        "int",
        "How many recent fetch outcomes the friendly rule looks at.",
        parse=_int(1),
        at_most=_IN_RECENT,
    ),
    _s(
        "DOMAINSTATE_FRIENDLY_RATIO",
        0.7,
        "float",
        "Share of ok-contact fetches in the window that makes a domain friendly.",
        parse=_float(0.0, 1.0),
    ),
    _s(
        "DOMAINSTATE_FRIENDLY_MIN_FETCHES",
        5,
        "int",
        "Fetches needed in the window before the friendly rule applies.",
        parse=_int(1),
        # above the window, no domain could ever become friendly
        at_most=(*_IN_RECENT, "DOMAINSTATE_FRIENDLY_WINDOW"),
    ),
    _s(
        "DOMAINSTATE_FRIENDLY_DEMOTE",
        5,
        "int",
        "Consecutive failed fetches that demote a friendly domain to unknown.",
        parse=_int(1),
        at_most=_IN_RECENT,
    ),
    _s("DOMAINSTATE_RECENT_SIZE", 20, "int", "Entries kept in a record's recent history (FIFO).", parse=_int(1, 255)),
    _s(
        "DOMAINSTATE_DEAD_HOLD",
        12 * 3600.0,
        "duration",
        "How long one visit's dead signals keep a domain dead (at most DOMAINSTATE_TTL['dead']); a "
        "crawl that begins at least DOMAINSTATE_DEAD_CONFIRM_AFTER after the verdict ends the hold "
        "(it is the later visit).",
        parse=_duration(1.0),
        example='"12h"',
    ),
    _s(
        "DOMAINSTATE_COLD_CONFIRM_AFTER",
        3600.0,
        "duration",
        "How long a never-useful domain must have been known before its empty streak makes it cold "
        "(the streak spans at least two visits).",
        example='"6h"',
    ),
    _s(
        "DOMAINSTATE_DEAD_CONFIRM_AFTER",
        3600.0,
        "duration",
        "How long after a dead verdict new dead signals count as a later visit that confirms it.",
        example='"6h"',
    ),
    _s(
        "DOMAINSTATE_DEAD_TTL_MAX",
        180 * DAY,
        "duration",
        "Cap of a confirmed dead TTL, which starts at DOMAINSTATE_TTL['dead'] and doubles per confirmation.",
        parse=_duration(1.0),
        example='"365d"',
    ),
    _s(
        "DOMAINSTATE_FRIENDLY_MIN_WINDOW",
        3,
        "int",
        "Fetch outcomes in recent history the friendly ratio needs at least (at most the window).",
        parse=_int(1),
    ),
    _s(
        "DOMAINSTATE_BROWSER_LEARN",
        2,
        "int",
        "Script-only shells rendered by the browser in a row after which a domain is rendered at once.",
        parse=_int(1),
    ),
    _s(
        "DOMAINSTATE_BROWSER_LEARN_TTL",
        30 * DAY,
        "duration",
        "How long a learned 'needs the browser' holds before plain fetches are tried again.",
        parse=_duration(1.0),
        example='"14d"',
    ),
    _s(
        "DOMAINSTATE_FRIENDLY_FALLBACK",
        True,
        "bool",
        "Re-issue a friendly domain's failed fetch in the browser when a browser can fix it (timeouts, 503, "
        "challenges); off: friendly is fetch only (the seed's reading; it loses the pages a render fixes).",
    ),
    _s(
        "DOMAINSTATE_COLD_CONTACT_PAGES",
        True,
        "bool",
        "While a domain is cold, still fetch its pages whose URL says they hold contacts (/contact, /about, "
        "/impressum, /kontakt, /team, /legal and their equivalents); a page with contacts makes the domain "
        "unknown again. Only with DOMAINSTATE_OUTCOME = 'contacts'. Off: cold skips every page (the seed's reading).",
    ),
    _s(
        "DOMAINSTATE_SCAN_FRIENDLY",
        False,
        "bool",
        "Scan a friendly domain's pages for contacts too. Off: once a domain is friendly and has yielded a "
        "useful page, what a page holds moves no rule (it can never turn cold), so its fetched pages are not "
        "scanned for contacts (a cheaper pass) and are recorded as navigation with 'not-scanned'; the "
        "outcome/ok-contact and ok-empty stats then count the other domains' pages only. Only with "
        "DOMAINSTATE_OUTCOME = 'contacts'; a host with facts of its own, a render and a page behind an invalid certificate are always scanned.",
    ),
    _s(
        "DOMAINSTATE_RENEWAL_CLEARS_RECENT",
        False,
        "bool",
        "Whether unknown's own expiry (unknown -> unknown) also clears recent history.",
    ),
    _s(
        "DOMAINSTATE_URL_DEAD_TTL",
        30 * DAY,
        "duration",
        "How long a URL answering 404/410 (off the site root) is skipped.",
        example='"7d"',
    ),
    _s(
        "DOMAINSTATE_MAX_DOMAINS",
        1_000_000,
        "int",
        "Cap on stored domains; the least recently seen are evicted.",
        parse=_int(1),
    ),
    _s(
        "DOMAINSTATE_HEAD_PROBE",
        False,
        "bool",
        "Probe unknown domains with one HEAD request first (the seed's pipeline; off: the first request "
        "is the probe, see DOMAINSTATE_PROBE_ALONE).",
    ),
    _s(
        "DOMAINSTATE_PROBE_ALONE",
        True,
        "bool",
        "An unknown domain's first request of a crawl goes alone, as its probe: the domain's other requests "
        "wait for its outcome (at most DOMAINSTATE_PROBE_TIMEOUT); its dead signal holds them for the crawl. "
        "An antibot-soft domain's first fetch goes alone too (its challenge may make it antibot-hard).",
    ),
    _s(
        "DOMAINSTATE_BROWSER_META",
        {"playwright": True},
        "dict",
        "Meta merged into a request to send it to the browser; None: no browser (antibot-hard domains are skipped).",
        parse=_browser_meta,
        example="None",
        nullable=True,
    ),
    _s(
        "DOMAINSTATE_BROWSER_RENDERED",
        "scrapy_domainstate.runtime.browser.rendered_by_playwright",
        "str",
        "Dotted path to a callable (response) -> bool: did the browser handler produce this response?",
        parse=_dotted("a dotted path to a callable (response) -> bool"),
        example='"myproject.browser.rendered_by_zyte_api"',
    ),
    _s(
        "DOMAINSTATE_BROWSER_CHALLENGE_WAIT",
        15.0,
        "duration",
        "How long a scrapy-playwright render waits for a challenge page to pass (0: no wait).",
        example="30.0",
    ),
    _s("DOMAINSTATE_PER_HOSTNAME", False, "bool", "Track every hostname on its own instead of by eTLD+1."),
    _s(
        "DOMAINSTATE_OUTCOME",
        "contacts",
        "str",
        "What makes a page useful: 'contacts', 'items' or a dotted path to a callable.",
        parse=_outcome,
        example='"items"',
    ),
    _s(
        "DOMAINSTATE_CHALLENGE_MARKERS",
        {},
        "dict",
        "Extra body markers: vendor -> list of strings.",
        parse=_markers,
        example='{"acme-waf": ["acme-wall-v2"]}',
    ),
    _s(
        "DOMAINSTATE_WALL_RULES",
        {},
        "dict",
        "Block and challenge rules of your own, and never-a-wall exceptions: "
        "{'walls': [rule, ...], 'never': [exception, ...]} (docs/detection-rules.rst).",
        parse=_wall_rules,
        example='{"walls": [{"name": "acme-403", "status": 403, "header": {"x-acme": "deny"}, "grade": "hard", '
        '"vendor": "acme"}], "never": [{"domain": "partner.example"}]}',
    ),
    _s(
        "DOMAINSTATE_WALL_PREDICATE",
        None,
        "str",
        "Dotted path to f(response) -> 'hard' | 'soft' | 'clean' | None, consulted before every other "
        "anti-bot rule (docs/detection-rules.rst).",
        parse=_wall_predicate,
        example='"myproject.walls.is_wall"',
    ),
    _s(
        "DOMAINSTATE_BODY_SCAN_BYTES",
        65536,
        "int",
        "Bytes of a body scanned for challenge markers and contacts.",
        parse=_int(256),
    ),
    _s(
        "DOMAINSTATE_FLUSH_INTERVAL",
        1.0,
        "duration",
        "Time between batched store writes: at most this much learning is lost when a crawl is killed.",
    ),
    _s("DOMAINSTATE_FLUSH_SIZE", 500, "int", "Buffered outcomes that trigger a store write.", parse=_int(1)),
    _s(
        "DOMAINSTATE_SKIP_BEFORE_QUEUE",
        True,
        "bool",
        "Drop requests to domains the memory skips (dead, cold, dead URLs) before they reach the scheduler.",
    ),
    _s(
        "DOMAINSTATE_POLITENESS",
        True,
        "bool",
        "Slow a domain's download slot on 429/503 (Retry-After honoured), recover on success, remember it.",
    ),
    _s(
        "DOMAINSTATE_POLITE_MAX_DELAY",
        30.0,
        "duration",
        "The longest delay between two requests to a slot that a 429/503 can set; a Retry-After "
        "beyond it pauses the host for the crawl.",
        parse=_duration(0.001),
    ),
    _s(
        "DOMAINSTATE_POLITE_TTL",
        7 * DAY,
        "duration",
        "How long a domain's learned delay is remembered after the crawl that learned it.",
        parse=_duration(1.0),
    ),
    _s(
        "DOMAINSTATE_PAUSE_AFTER",
        5,
        "int",
        "Timeouts or lost connections in a row that pause a host for the rest of the crawl (0: never).",
        parse=_int(0),
    ),
    _s(
        "DOMAINSTATE_BLOCKED_SHARE",
        0.8,
        "float",
        "Share of anti-bot outcomes over the last DOMAINSTATE_BLOCKED_WINDOW responses that raises the "
        "blocked-crawl alarm (0: never).",
        parse=_float(0.0, 1.0),
    ),
    _s(
        "DOMAINSTATE_BLOCKED_WINDOW",
        200,
        "int",
        "Responses (of at least 20 domains) the blocked-crawl alarm looks at.",
        parse=_int(20),
    ),
    _s(
        "DOMAINSTATE_BLOCKED_CLOSE",
        False,
        "bool",
        "Close the spider (reason domainstate_blocked) when the blocked-crawl alarm goes off.",
    ),
    _s(
        "DOMAINSTATE_PROBE_TIMEOUT",
        15.0,
        "duration",
        "How long the domain's other requests wait for its probe (the first request sent alone, or the "
        "HEAD) or canary before they go on.",
        parse=_duration(0.001),
    ),
    _s(
        "DOMAINSTATE_REMOTE_URL",
        None,
        "str",
        "Base URL of a shared-state service (off when None).",
        example='"http://127.0.0.1:8790"',
    ),
    _s(
        "DOMAINSTATE_REMOTE_TOKEN",
        None,
        "str",
        "Bearer token for the shared-state service.",
        example='"s3cret-token"',
    ),
    _s(
        "DOMAINSTATE_REMOTE_TIMEOUT",
        2.0,
        "duration",
        "How long a call to the shared-state service may take before it is abandoned.",
        parse=_duration(0.001),
    ),
    _s(
        "DOMAINSTATE_REMOTE_CONSENSUS",
        0.8,
        "float",
        "Share of agreeing reporters above which a remote state is adopted.",
        parse=_float(0.0, 1.0),
    ),
    _s(
        "DOMAINSTATE_REMOTE_MIN_REPORTERS",
        3,
        "int",
        "Distinct reporters needed before a remote consensus counts.",
        parse=_int(1),
    ),
    _s("DOMAINSTATE_STATS_PER_DOMAIN", False, "bool", "Also count decisions per domain in stats (many keys)."),
    _s(
        "DOMAINSTATE_SERVICE_RATE",
        50.0,
        "float",
        "Service: API requests a second per reporter (bursts of 10 s worth); beyond, 429. 0: no limit.",
        parse=_float(0.0),
    ),
    _s(
        "DOMAINSTATE_SERVICE_QUOTA",
        1_000_000,
        "int",
        "Service: votes one reporter may hold (about 200 bytes each); beyond, 429. 0: no limit.",
        parse=_int(0),
    ),
)

_BY_NAME = {s.name: s for s in SETTINGS}
_BY_FIELD = {s.field: s for s in SETTINGS}

# ---------------------------------------------------------------- the dataclass

#: The default of a :class:`Config` field: the parsed default of its row in :data:`SETTINGS`.
FROM_TABLE: Any = object()

_C = TypeVar("_C")


def _defaults_from_table(cls: type[_C]) -> type[_C]:
    """Give each annotated field its row's parsed default; fail at import on any mismatch."""
    names = list(cls.__annotations__)
    missing = [s.name for s in SETTINGS if s.field not in names]
    extra = [n for n in names if n not in _BY_FIELD]
    if missing or extra:
        raise TypeError(
            f"Config and SETTINGS disagree: settings without a field {missing}, fields without a row {extra}"
        )
    for name in names:
        setting = _BY_FIELD[name]
        given = cls.__dict__.get(name, MISSING)
        if given is not FROM_TABLE and given is not MISSING and given != setting.value():
            raise TypeError(f"Config.{name} = {given!r} differs from the default of {setting.name} in SETTINGS")
        setattr(cls, name, field(default_factory=setting.value))
    return cls


@dataclass(frozen=True)
@_defaults_from_table
class Config:
    """The validated settings, one field per row of :data:`SETTINGS`. Build it with :meth:`from_settings`."""

    enabled: bool = FROM_TABLE
    store: str = FROM_TABLE
    lmdb_path: str = FROM_TABLE
    lmdb_map_size: int = FROM_TABLE
    redis_url: str | None = FROM_TABLE
    redis_prefix: str = FROM_TABLE
    ttl: Mapping[State, float | None] = FROM_TABLE
    dead_threshold: int = FROM_TABLE
    antibot_hard_threshold: int = FROM_TABLE
    cold_threshold: int = FROM_TABLE
    friendly_window: int = FROM_TABLE
    friendly_ratio: float = FROM_TABLE
    friendly_min_fetches: int = FROM_TABLE
    friendly_demote: int = FROM_TABLE
    recent_size: int = FROM_TABLE
    dead_hold: float = FROM_TABLE
    cold_confirm_after: float = FROM_TABLE
    dead_confirm_after: float = FROM_TABLE
    dead_ttl_max: float = FROM_TABLE
    friendly_min_window: int = FROM_TABLE
    browser_learn: int = FROM_TABLE
    browser_learn_ttl: float = FROM_TABLE
    friendly_fallback: bool = FROM_TABLE
    cold_contact_pages: bool = FROM_TABLE
    scan_friendly: bool = FROM_TABLE
    renewal_clears_recent: bool = FROM_TABLE
    url_dead_ttl: float = FROM_TABLE
    max_domains: int = FROM_TABLE
    head_probe: bool = FROM_TABLE
    probe_alone: bool = FROM_TABLE
    browser_meta: Mapping[str, Any] | None = FROM_TABLE
    browser_rendered: str = FROM_TABLE
    browser_challenge_wait: float = FROM_TABLE
    per_hostname: bool = FROM_TABLE
    outcome: str = FROM_TABLE
    challenge_markers: Mapping[str, tuple[str, ...]] = FROM_TABLE
    wall_rules: WallRules = FROM_TABLE
    wall_predicate: str | None = FROM_TABLE
    body_scan_bytes: int = FROM_TABLE
    flush_interval: float = FROM_TABLE
    flush_size: int = FROM_TABLE
    skip_before_queue: bool = FROM_TABLE
    politeness: bool = FROM_TABLE
    polite_max_delay: float = FROM_TABLE
    polite_ttl: float = FROM_TABLE
    pause_after: int = FROM_TABLE
    blocked_share: float = FROM_TABLE
    blocked_window: int = FROM_TABLE
    blocked_close: bool = FROM_TABLE
    probe_timeout: float = FROM_TABLE
    remote_url: str | None = FROM_TABLE
    remote_token: str | None = FROM_TABLE
    remote_timeout: float = FROM_TABLE
    remote_consensus: float = FROM_TABLE
    remote_min_reporters: int = FROM_TABLE
    stats_per_domain: bool = FROM_TABLE
    service_rate: float = FROM_TABLE
    service_quota: int = FROM_TABLE

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any] | None = None) -> Config:
        """Parse every row of :data:`SETTINGS` from ``settings`` (unset or ``None``: the default)."""
        values = {s.field: s.value(_raw(settings, s)) for s in SETTINGS}
        for s in SETTINGS:
            for other in s.at_most:
                mine, limit = values[s.field], values[_BY_NAME[other].field]
                if mine > limit:
                    raise ConfigError(f"{s.name} ({mine}) cannot exceed {other} ({limit})")
        return cls(**values)


def _raw(settings: Mapping[str, Any] | None, setting: Setting) -> Any:
    """The value given for ``setting`` (or its fallback), or ``_UNSET``."""
    if settings is None or not hasattr(settings, "get"):
        return _UNSET
    for name in (setting.name, setting.fallback):
        if name is not None and settings.get(name, None) is not None:
            return settings.get(name)
    if setting.nullable and setting.name in settings:
        return None
    return _UNSET


# ---------------------------------------------------------------- misspelt names


def unknown_settings(names: Iterable[str]) -> list[tuple[str, str | None]]:
    """``(name, closest valid name or None)`` for each ``DOMAINSTATE_*`` name that no part reads."""
    # Compared without the shared prefix, which would make every name look close.
    valid = {n.removeprefix(PREFIX): n for n in [*_BY_NAME, *sorted(OTHER_SETTINGS)]}
    out = []
    for name in names:
        if not isinstance(name, str) or not name.startswith(PREFIX) or name in _BY_NAME or name in OTHER_SETTINGS:
            continue
        close = difflib.get_close_matches(name.removeprefix(PREFIX), valid, n=1, cutoff=0.6)
        out.append((name, valid[close[0]] if close else None))
    return sorted(out)


def log_unknown_settings(settings: Iterable[str], crawler: Any = None) -> int:
    """Log one WARNING per misspelt ``DOMAINSTATE_*`` setting; return how many there were.

    With a ``crawler``, only its first call checks (the add-on and the components both call it).
    """
    if crawler is not None:
        if getattr(crawler, "_domainstate_names_checked", False):
            return 0
        crawler._domainstate_names_checked = True
    found = unknown_settings(settings)
    for name, close in found:
        hint = f"did you mean {close}?" if close else "see the Settings section of the README"
        logger.warning("scrapy-domainstate: unknown setting %s ignored; %s", name, hint, extra={"crawler": crawler})
    return len(found)
