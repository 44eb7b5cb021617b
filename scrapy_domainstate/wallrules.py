"""Detection rules of the user's own: ``DOMAINSTATE_WALL_RULES`` and ``DOMAINSTATE_WALL_PREDICATE``.

Pure: no Scrapy, no I/O, no clock. :func:`parse_wall_rules` turns the setting's value into a
frozen :class:`WallRules` (raising :class:`~scrapy_domainstate.config.ConfigError` with the
setting's name and the rule's place for anything wrong); :class:`UserRules` is what the
classifier consults, in this order (docs/detection-rules.rst):

1. the predicate, ``f(response) -> verdict | None``: ``"hard"`` or ``"soft"`` (optionally
   ``"hard:<vendor>"``), ``"clean"`` (not a wall: no built-in anti-bot rule applies), or
   ``None`` (no opinion: go on);
2. the user's wall rules (``walls``), first match wins: a status, headers, body strings and a
   domain scope, every given condition must hold;
3. the built-in classifier, whose anti-bot verdict is dropped when a "never a wall" exception
   (``never``: a domain, a status, a body string, a built-in marker) matches.

Evidence (the ``error_class`` a verdict records) keeps the project's form,
``'<challenge|block>:<vendor>:<name>'``: ``'block:acme:rule:acme-403'`` for a wall rule named
``acme-403``, ``'challenge:acme:predicate'`` for the predicate.
"""

from __future__ import annotations

import fnmatch
import importlib
import json
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any
from urllib.parse import urlsplit

from .textscan import lowered

__all__ = [
    "CLEAN",
    "GRADES",
    "Conditions",
    "NeverWall",
    "Ruling",
    "Seen",
    "UserRules",
    "WallRule",
    "WallRules",
    "load_predicate",
    "parse_predicate",
    "parse_wall_rules",
    "rule_of_evidence",
    "spider_settings",
    "user_rules",
]

logger = logging.getLogger(__name__)

RULES_SETTING = "DOMAINSTATE_WALL_RULES"
PREDICATE_SETTING = "DOMAINSTATE_WALL_PREDICATE"

#: grade -> the evidence prefix the classifier uses for it (``block:`` marks a hard block).
GRADES: dict[str, str] = {"soft": "challenge", "hard": "block"}
#: The predicate's "not a wall" verdict.
CLEAN = "clean"
#: The rule kind in evidence: ``'<prefix>:<vendor>:rule:<name>'`` / ``'<prefix>:<vendor>:predicate'``.
RULE_TAG = "rule"
PREDICATE_TAG = "predicate"
DEFAULT_VENDOR = "custom"
#: Names and vendors stay short: the evidence is stored in every observation (255 bytes at most).
MAX_NAME = 60

_WALL_KEYS = ("name", "grade", "vendor", "status", "header", "body", "domain")
_NEVER_KEYS = ("name", "status", "header", "body", "domain", "marker")


class _Bad(ValueError):
    """A rule problem; :func:`parse_wall_rules` turns it into a ``ConfigError`` naming the setting."""


# ------------------------------------------------------------------ the rules


@dataclass(frozen=True, slots=True)
class Conditions:
    """What a response must show for a rule to apply; every given condition must hold."""

    statuses: frozenset[int] = frozenset()
    #: ``(header name, values)``: the header is present and (values given) contains one of them.
    headers: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: one of these (lower case) is in the first ``DOMAINSTATE_BODY_SCAN_BYTES`` of the body
    body: tuple[str, ...] = ()
    #: the URL's host is one of these or a subdomain of one
    domains: tuple[str, ...] = ()

    def hold(self, seen: Seen) -> bool:
        if self.statuses and seen.status not in self.statuses:
            return False
        if self.domains and not _in_domains(seen.host, self.domains):
            return False
        for name, values in self.headers:
            value = seen.headers.get(name)
            if value is None:
                return False
            if values and not any(v in value.lower() for v in values):
                return False
        return not self.body or any(b.encode("utf-8") in seen.low for b in self.body)

    def describe(self) -> str:
        parts = []
        if self.statuses:
            parts.append("status " + "/".join(str(s) for s in sorted(self.statuses)))
        for name, values in self.headers:
            parts.append(f"header {name}" + (f" containing {' or '.join(repr(v) for v in values)}" if values else ""))
        if self.body:
            parts.append("body containing " + " or ".join(repr(b) for b in self.body))
        if self.domains:
            parts.append("on " + ", ".join(self.domains))
        return ", ".join(parts)


@dataclass(frozen=True, slots=True)
class WallRule:
    """One ``walls`` entry: a response that matches is an anti-bot wall of ``grade``."""

    name: str
    grade: str
    vendor: str
    when: Conditions

    @property
    def evidence(self) -> str:
        return f"{GRADES[self.grade]}:{self.vendor}:{RULE_TAG}:{self.name}"

    def describe(self) -> str:
        return f"wall rule {self.name!r} ({self.grade}, vendor {self.vendor}): {self.when.describe()}"


@dataclass(frozen=True, slots=True)
class NeverWall:
    """One ``never`` entry: a built-in anti-bot verdict on a matching response is dropped."""

    name: str
    when: Conditions
    #: built-in evidence patterns (``fnmatch``, lower case): ``'challenge:datadome:*'``
    markers: tuple[str, ...] = ()

    def excuses(self, seen: Seen, evidence: str) -> bool:
        if self.markers and not any(fnmatch.fnmatchcase(evidence.lower(), m) for m in self.markers):
            return False
        return self.when.hold(seen)

    def describe(self) -> str:
        parts = [self.when.describe()] if self.when.describe() else []
        if self.markers:
            parts.append("built-in marker " + " or ".join(repr(m) for m in self.markers))
        return f"never-a-wall exception {self.name!r}: {', '.join(parts)}"


@dataclass(frozen=True, slots=True)
class WallRules(Mapping[str, tuple[Any, ...]]):
    """The parsed ``DOMAINSTATE_WALL_RULES``: wall rules in order, then the exceptions.

    A read-only mapping of the parts given (``'walls'``, ``'never'``), like the setting's
    value: ``dict(WallRules()) == {}``."""

    walls: tuple[WallRule, ...] = ()
    never: tuple[NeverWall, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.walls or self.never)

    def __getitem__(self, key: str) -> tuple[Any, ...]:
        if key in ("walls", "never") and getattr(self, key):
            return getattr(self, key)
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter([k for k in ("walls", "never") if getattr(self, k)])

    def __len__(self) -> int:
        return sum(1 for k in ("walls", "never") if getattr(self, k))


# ------------------------------------------------------------------ what a rule sees


class Seen:
    """The response as the rules (and the predicate) see it: ``url``, ``status``, ``headers``
    (lower-case names, ``str`` values, repeated headers joined with ``", "``), ``body``
    (bytes), ``text`` (the body decoded, UTF-8 with replacement) and ``host``.

    Not a Scrapy ``Response`` (the classifier is pure and is also run on saved responses by
    ``scrapy domainstate explain --response``); it has the attributes a predicate usually reads.
    """

    def __init__(
        self, url: str, status: int, headers: Mapping[str, str], body: bytes, scan_bytes: int, raw: Any = None
    ) -> None:
        self.url = url
        self.status = status
        self.headers = headers
        self.body = body
        self.scan_bytes = scan_bytes
        #: the body as the classifier got it (the same object, for the shared lowercase copy)
        self.raw = body if raw is None else raw

    @cached_property
    def host(self) -> str:
        try:
            return (urlsplit(self.url).hostname or "").rstrip(".").lower()
        except ValueError:
            return ""

    @cached_property
    def low(self) -> bytes:
        # (memoised by the body's identity: the classifier's own scan reuses this copy)
        return lowered(self.raw, self.scan_bytes)

    @cached_property
    def text(self) -> str:
        return bytes(self.body).decode("utf-8", "replace")

    def __repr__(self) -> str:
        return f"<Seen {self.status} {self.url}>"


def _in_domains(host: str, domains: tuple[str, ...]) -> bool:
    return any(host == d or host.endswith("." + d) for d in domains)


# ------------------------------------------------------------------ consulting them


@dataclass(frozen=True, slots=True)
class Ruling:
    """What the user's rules decided: a wall (``grade`` ``soft``/``hard``, with its
    ``evidence``), or ``clean`` (``grade`` :data:`CLEAN`: the predicate said "not a wall");
    ``source`` says which rule, for ``explain``."""

    grade: str
    evidence: str
    source: str

    @property
    def wall(self) -> bool:
        return self.grade in GRADES


class UserRules:
    """The rules and predicate of one configuration, consulted by the classifier."""

    def __init__(
        self,
        rules: WallRules,
        predicate: Callable[[Seen], Any] | None = None,
        scan_bytes: int = 65536,
        predicate_name: str = "",
    ) -> None:
        self.rules = rules
        self.predicate = predicate
        self.predicate_name = predicate_name or getattr(predicate, "__qualname__", "predicate")
        self.scan_bytes = scan_bytes
        #: Whether anything reads the headers (else the classifier does not decode them for the rules).
        self.wants_headers = predicate is not None or any(r.when.headers for r in (*rules.walls, *rules.never))
        self._warned = False

    def __bool__(self) -> bool:
        return bool(self.rules) or self.predicate is not None

    def seen(self, url: str, status: int, headers: Mapping[str, str], body: Any) -> Seen:
        raw = body if isinstance(body, (bytes, bytearray, memoryview)) else (body or b"")
        if isinstance(raw, str):
            raw = raw.encode("utf-8")
        data = raw if type(raw) is bytes else bytes(raw)
        return Seen(url or "", int(status), headers, data, self.scan_bytes, body if body else data)

    def first(self, seen: Seen) -> Ruling | None:
        """The predicate's verdict, else the first wall rule that matches, else ``None``."""
        if self.predicate is not None:
            ruling = self._ask(seen)
            if ruling is not None:
                return ruling
        for rule in self.rules.walls:
            if rule.when.hold(seen):
                return Ruling(rule.grade, rule.evidence, rule.describe())
        return None

    def excuse(self, seen: Seen, evidence: str | None) -> NeverWall | None:
        """The exception that drops a built-in verdict with ``evidence``, or ``None``."""
        for never in self.rules.never:
            if never.excuses(seen, evidence or ""):
                return never
        return None

    def _ask(self, seen: Seen) -> Ruling | None:
        try:
            answer = self.predicate(seen)  # type: ignore[misc]
        except Exception:
            self._warn("raised", exc_info=True)
            return None
        if answer is None:
            return None
        try:
            grade, vendor = _verdict(answer)
        except _Bad as exc:
            self._warn(f"returned {answer!r}: {exc}")
            return None
        source = f"{PREDICATE_SETTING} {self.predicate_name}"
        if grade == CLEAN:
            return Ruling(CLEAN, "", source)
        return Ruling(grade, f"{GRADES[grade]}:{vendor}:{PREDICATE_TAG}", source)

    def _warn(self, what: str, exc_info: bool = False) -> None:
        if not self._warned:  # once per classifier: a predicate that fails fails on every page
            self._warned = True
            logger.warning(
                "scrapy-domainstate: %s %s (ignored: the built-in rules decide)",
                PREDICATE_SETTING,
                what,
                exc_info=exc_info,
            )


def _verdict(answer: Any) -> tuple[str, str]:
    """``(grade, vendor)`` from a predicate's answer: ``'hard'``, ``'soft:acme'``, ``'clean'``,
    ``('hard', 'acme')``."""
    if isinstance(answer, (tuple, list)) and len(answer) == 2 and all(isinstance(a, str) for a in answer):
        grade, vendor = answer
    elif isinstance(answer, str):
        grade, _, vendor = answer.partition(":")
    else:
        raise _Bad("a verdict is None, 'clean', 'soft', 'hard', 'soft:<vendor>' or ('hard', '<vendor>')")
    grade = grade.strip().lower()
    if grade not in (*GRADES, CLEAN):
        raise _Bad(f"unknown grade {grade!r}; one of soft, hard, clean")
    return grade, _label(vendor.strip().lower() or DEFAULT_VENDOR, "vendor")


def rule_of_evidence(evidence: str | None) -> str | None:
    """``'rule'`` or ``'predicate'`` when ``evidence`` came from the user's rules, else ``None``."""
    parts = (evidence or "").split(":")
    if len(parts) >= 4 and parts[0] in GRADES.values() and parts[2] == RULE_TAG:
        return RULE_TAG
    if len(parts) == 3 and parts[0] in GRADES.values() and parts[2] == PREDICATE_TAG:
        return PREDICATE_TAG
    return None


# ------------------------------------------------------------------ parsing


def _label(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _Bad(f"{what} must be a non-empty string, got {value!r}")
    value = value.strip()
    if len(value) > MAX_NAME or any(c in value for c in ": \t\r\n"):
        raise _Bad(f"{what} must be at most {MAX_NAME} characters without ':' or spaces, got {value!r}")
    return value


def _strings(value: Any, what: str) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not items or not all(isinstance(s, str) and s.strip() for s in items):
        raise _Bad(f"{what} must be a non-empty string or a list of them, got {value!r}")
    return tuple(s.strip().lower() for s in items)


def _statuses(value: Any) -> frozenset[int]:
    items = [value] if isinstance(value, (int, str)) else value
    if not isinstance(items, (list, tuple)) or not items:
        raise _Bad(f"status must be a status code or a list of them, got {value!r}")
    out = set()
    for item in items:
        try:
            code = int(item)
            if isinstance(item, (bool, float)):
                raise ValueError
        except (TypeError, ValueError):
            raise _Bad(f"status must be a status code or a list of them, got {value!r}") from None
        if not 100 <= code <= 999:
            raise _Bad(f"status {code} is not an HTTP status (100-999)")
        out.add(code)
    return frozenset(out)


def _headers(value: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``'x-acme'``, ``['x-acme', 'x-other']`` (present) or ``{'server': 'acme'}`` /
    ``{'x-acme': ['block', 'deny']}`` / ``{'x-acme': None}`` (present, containing one of)."""
    if isinstance(value, (str, list, tuple)):
        return tuple((name, ()) for name in _strings(value, "header"))
    if not isinstance(value, Mapping) or not value:
        raise _Bad(f"header must be a header name, a list of them or a dict name -> value(s), got {value!r}")
    out = []
    for name, wanted in value.items():
        (key,) = _strings(name, "a header name")
        values = () if wanted is None or wanted == "" else _strings(wanted, f"header[{name!r}]")
        out.append((key, values))
    return tuple(out)


def _domains(value: Any) -> tuple[str, ...]:
    out = []
    for given in _strings(value, "domain"):
        domain = given.rstrip(".").removeprefix("*.")
        if "/" in domain or " " in domain or ("." not in domain and domain != "localhost"):
            raise _Bad(f"domain must be a host name such as 'example.com', got {given!r}")
        out.append(domain)
    return tuple(out)


def _conditions(entry: Mapping[str, Any]) -> Conditions:
    return Conditions(
        statuses=_statuses(entry["status"]) if "status" in entry else frozenset(),
        headers=_headers(entry["header"]) if "header" in entry else (),
        body=_strings(entry["body"], "body") if "body" in entry else (),
        domains=_domains(entry["domain"]) if "domain" in entry else (),
    )


def _check_keys(entry: Any, valid: tuple[str, ...]) -> Mapping[str, Any]:
    if not isinstance(entry, Mapping):
        raise _Bad(f"must be a dict with some of the keys {', '.join(valid)}, got {entry!r}")
    unknown = [k for k in entry if k not in valid]
    if unknown:
        raise _Bad(f"unknown key {unknown[0]!r}; valid keys: {', '.join(valid)}")
    return entry


def _wall(entry: Any, index: int) -> WallRule:
    entry = _check_keys(entry, _WALL_KEYS)
    if "grade" not in entry:
        raise _Bad("needs a grade: 'soft' (a challenge a browser can pass) or 'hard' (a block)")
    grade = str(entry["grade"]).strip().lower()
    if grade not in GRADES:
        raise _Bad(f"grade must be 'soft' or 'hard', got {entry['grade']!r}")
    if not any(k in entry for k in ("status", "header", "body")):
        raise _Bad("needs at least one of status, header, body (a domain alone would make every page a wall)")
    name = _label(entry.get("name", f"wall{index + 1}"), "name")
    vendor = _label(entry.get("vendor", DEFAULT_VENDOR), "vendor").lower()
    return WallRule(name, grade, vendor, _conditions(entry))


def _never(entry: Any, index: int) -> NeverWall:
    entry = _check_keys(entry, _NEVER_KEYS)
    if not any(k in entry for k in ("status", "header", "body", "domain", "marker")):
        raise _Bad("needs at least one of domain, marker, status, header, body")
    markers: tuple[str, ...] = ()
    if "marker" in entry:
        markers = tuple(m if ":" in m else f"*:{m}:*" for m in _strings(entry["marker"], "marker"))
    return NeverWall(_label(entry.get("name", f"never{index + 1}"), "name"), _conditions(entry), markers)


def parse_wall_rules(name: str, value: Any) -> WallRules:
    """The setting's value (a dict, or its JSON from ``-s``) as :class:`WallRules`.

    ``{"walls": [rule, ...], "never": [exception, ...]}``; a bad entry raises ``ConfigError``
    naming the setting and the entry (``DOMAINSTATE_WALL_RULES['walls'][1]: ...``).
    """
    from .config import ConfigError  # (config imports this module's parser)

    if value is None:
        return WallRules()
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except ValueError:
            raise ConfigError(f"{name} must be a dict (or its JSON), got {value!r}") from None
    if hasattr(value, "copy_to_dict"):
        value = value.copy_to_dict()
    if not isinstance(value, Mapping):
        raise ConfigError(f"{name} must be a dict with the keys 'walls' and/or 'never', got {value!r}")
    unknown = [k for k in value if k not in ("walls", "never")]
    if unknown:
        raise ConfigError(f"{name} has an unknown key {unknown[0]!r}; valid keys: walls, never")
    parsed: dict[str, list[Any]] = {"walls": [], "never": []}
    for part, build in (("walls", _wall), ("never", _never)):
        entries = value.get(part) or []
        if isinstance(entries, Mapping) or not isinstance(entries, (list, tuple)):
            raise ConfigError(f"{name}[{part!r}] must be a list of dicts, got {entries!r}")
        for i, entry in enumerate(entries):
            try:
                parsed[part].append(build(entry, i))
            except _Bad as exc:
                raise ConfigError(f"{name}[{part!r}][{i}]: {exc}") from None
    names = [r.name for r in parsed["walls"]]
    twice = next((n for n in names if names.count(n) > 1), None)
    if twice is not None:
        raise ConfigError(f"{name}['walls']: two rules are named {twice!r} (their evidence would be the same)")
    return WallRules(tuple(parsed["walls"]), tuple(parsed["never"]))


def load_predicate(path: str) -> Callable[[Seen], Any]:
    """The callable at dotted ``path`` (``pkg.module.function``); ``ValueError`` if there is none."""
    module_name, _, attr = path.rpartition(".")
    missing: ImportError | None = None
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        missing = exc
        # ``pkg.module.Class.method``: import the longest module prefix, walk the rest.
        parts = path.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            try:
                target = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            attrs = parts[cut:]
            break
        else:
            raise ValueError(f"cannot import {module_name!r}: {exc}") from None
    else:
        attrs = [attr]
    for part in attrs:
        try:
            target = getattr(target, part)
        except AttributeError:
            if missing is not None:  # not a class attribute after all: the module is missing
                raise ValueError(f"cannot import {module_name!r}: {missing}") from None
            raise ValueError(f"{path!r}: no attribute {part!r}") from None
    if not callable(target):
        raise ValueError(f"{path!r} is not callable")
    return target


def parse_predicate(name: str, value: Any) -> str | None:
    """A dotted path to ``f(response) -> verdict | None`` (a function given as an object becomes
    its path); imported here, so a path that does not lead to a callable fails at start-up."""
    from .config import ConfigError

    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "null")):
        return None
    if not isinstance(value, str) and callable(value):
        value = f"{value.__module__}.{value.__qualname__}"
    if not isinstance(value, str) or "." not in value:
        raise ConfigError(f"{name} must be a dotted path to a function f(response) -> verdict | None, got {value!r}")
    try:
        load_predicate(value.strip())
    except ValueError as exc:
        raise ConfigError(f"{name}: {exc}") from None
    return value.strip()


def user_rules(config: Any) -> UserRules | None:
    """The :class:`UserRules` of a :class:`~scrapy_domainstate.config.Config`, or ``None`` when
    it sets neither ``DOMAINSTATE_WALL_RULES`` nor ``DOMAINSTATE_WALL_PREDICATE``."""
    rules = getattr(config, "wall_rules", None) or WallRules()
    path = getattr(config, "wall_predicate", None)
    predicate = load_predicate(path) if path else None
    if not rules and predicate is None:
        return None
    return UserRules(rules, predicate, int(config.body_scan_bytes), path or "")


#: Spider attributes that override the settings for that spider (as ``custom_settings`` does).
SPIDER_ATTRIBUTES: dict[str, str] = {
    "domainstate_wall_rules": RULES_SETTING,
    "domainstate_wall_predicate": PREDICATE_SETTING,
}


class _Overlay:
    """``settings`` with some names overridden (all that :meth:`Config.from_settings` reads)."""

    def __init__(self, settings: Any, overrides: dict[str, Any]) -> None:
        self.settings = settings
        self.overrides = overrides

    def get(self, name: str, default: Any = None) -> Any:
        if name in self.overrides:
            return self.overrides[name]
        return self.settings.get(name, default)

    def __contains__(self, name: object) -> bool:
        return name in self.overrides or name in self.settings


def spider_settings(settings: Any, spider: Any) -> Any:
    """``settings`` with a spider's ``domainstate_wall_rules`` / ``domainstate_wall_predicate``
    attributes (when it has them) in place of the settings' values."""
    overrides = {setting: getattr(spider, attr) for attr, setting in SPIDER_ATTRIBUTES.items() if hasattr(spider, attr)}
    return _Overlay(settings, overrides) if overrides and settings is not None else settings
