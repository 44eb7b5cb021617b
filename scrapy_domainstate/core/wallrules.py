"""The vocabulary of the user's own detection rules: ``DOMAINSTATE_WALL_RULES`` and
``DOMAINSTATE_WALL_PREDICATE`` parsed and validated (:func:`parse_wall_rules`,
:func:`parse_predicate`: what :mod:`scrapy_domainstate.core.config` calls at start-up) into
frozen :class:`WallRules`, and the evidence the rules record.

Pure: no Scrapy, no I/O. What the classifier consults at run time, and in which order, is
:mod:`scrapy_domainstate.detect.wallrules` (docs/detection-rules.rst).
"""

from __future__ import annotations

import fnmatch
import importlib
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol


class Seen(Protocol):
    """What a rule reads of a response (:class:`scrapy_domainstate.detect.wallrules.Seen`)."""

    @property
    def status(self) -> int: ...
    @property
    def host(self) -> str: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    @property
    def low(self) -> bytes: ...


__all__ = [
    "CLEAN",
    "GRADES",
    "Conditions",
    "NeverWall",
    "RuleError",
    "WallRule",
    "WallRules",
    "load_predicate",
    "parse_predicate",
    "parse_verdict",
    "parse_wall_rules",
    "rule_of_evidence",
]

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


class RuleError(ValueError):
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


def _in_domains(host: str, domains: tuple[str, ...]) -> bool:
    return any(host == d or host.endswith("." + d) for d in domains)


def parse_verdict(answer: Any) -> tuple[str, str]:
    """``(grade, vendor)`` from a predicate's answer: ``'hard'``, ``'soft:acme'``, ``'clean'``,
    ``('hard', 'acme')``."""
    if isinstance(answer, (tuple, list)) and len(answer) == 2 and all(isinstance(a, str) for a in answer):
        grade, vendor = answer
    elif isinstance(answer, str):
        grade, _, vendor = answer.partition(":")
    else:
        raise RuleError("a verdict is None, 'clean', 'soft', 'hard', 'soft:<vendor>' or ('hard', '<vendor>')")
    grade = grade.strip().lower()
    if grade not in (*GRADES, CLEAN):
        raise RuleError(f"unknown grade {grade!r}; one of soft, hard, clean")
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
        raise RuleError(f"{what} must be a non-empty string, got {value!r}")
    value = value.strip()
    if len(value) > MAX_NAME or any(c in value for c in ": \t\r\n"):
        raise RuleError(f"{what} must be at most {MAX_NAME} characters without ':' or spaces, got {value!r}")
    return value


def _strings(value: Any, what: str) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not items or not all(isinstance(s, str) and s.strip() for s in items):
        raise RuleError(f"{what} must be a non-empty string or a list of them, got {value!r}")
    return tuple(s.strip().lower() for s in items)


def _statuses(value: Any) -> frozenset[int]:
    items = [value] if isinstance(value, (int, str)) else value
    if not isinstance(items, (list, tuple)) or not items:
        raise RuleError(f"status must be a status code or a list of them, got {value!r}")
    out = set()
    for item in items:
        try:
            code = int(item)
            if isinstance(item, (bool, float)):
                raise ValueError
        except (TypeError, ValueError):
            raise RuleError(f"status must be a status code or a list of them, got {value!r}") from None
        if not 100 <= code <= 999:
            raise RuleError(f"status {code} is not an HTTP status (100-999)")
        out.add(code)
    return frozenset(out)


def _headers(value: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``'x-acme'``, ``['x-acme', 'x-other']`` (present) or ``{'server': 'acme'}`` /
    ``{'x-acme': ['block', 'deny']}`` / ``{'x-acme': None}`` (present, containing one of)."""
    if isinstance(value, (str, list, tuple)):
        return tuple((name, ()) for name in _strings(value, "header"))
    if not isinstance(value, Mapping) or not value:
        raise RuleError(f"header must be a header name, a list of them or a dict name -> value(s), got {value!r}")
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
            raise RuleError(f"domain must be a host name such as 'example.com', got {given!r}")
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
        raise RuleError(f"must be a dict with some of the keys {', '.join(valid)}, got {entry!r}")
    unknown = [k for k in entry if k not in valid]
    if unknown:
        raise RuleError(f"unknown key {unknown[0]!r}; valid keys: {', '.join(valid)}")
    return entry


def _wall(entry: Any, index: int) -> WallRule:
    entry = _check_keys(entry, _WALL_KEYS)
    if "grade" not in entry:
        raise RuleError("needs a grade: 'soft' (a challenge a browser can pass) or 'hard' (a block)")
    grade = str(entry["grade"]).strip().lower()
    if grade not in GRADES:
        raise RuleError(f"grade must be 'soft' or 'hard', got {entry['grade']!r}")
    if not any(k in entry for k in ("status", "header", "body")):
        raise RuleError("needs at least one of status, header, body (a domain alone would make every page a wall)")
    name = _label(entry.get("name", f"wall{index + 1}"), "name")
    vendor = _label(entry.get("vendor", DEFAULT_VENDOR), "vendor").lower()
    return WallRule(name, grade, vendor, _conditions(entry))


def _never(entry: Any, index: int) -> NeverWall:
    entry = _check_keys(entry, _NEVER_KEYS)
    if not any(k in entry for k in ("status", "header", "body", "domain", "marker")):
        raise RuleError("needs at least one of domain, marker, status, header, body")
    markers: tuple[str, ...] = ()
    if "marker" in entry:
        markers = tuple(m if ":" in m else f"*:{m}:*" for m in _strings(entry["marker"], "marker"))
    return NeverWall(_label(entry.get("name", f"never{index + 1}"), "name"), _conditions(entry), markers)


def parse_wall_rules(name: str, value: Any) -> WallRules:
    """The setting's value (a dict, or its JSON from ``-s``) as :class:`WallRules`.

    ``{"walls": [rule, ...], "never": [exception, ...]}``; a bad entry raises ``ConfigError``
    naming the setting and the entry (``DOMAINSTATE_WALL_RULES['walls'][1]: ...``).
    """
    from scrapy_domainstate.core.config import ConfigError  # (config imports this module's parser)

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
            except RuleError as exc:
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
    from scrapy_domainstate.core.config import ConfigError

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
