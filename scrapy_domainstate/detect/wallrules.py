"""The user's own detection rules at run time: what the classifier consults, in this order
(docs/detection-rules.rst; the rules themselves are parsed and validated at start-up by
:mod:`scrapy_domainstate.core.wallrules`):

1. the predicate, ``f(response) -> verdict | None``: ``"hard"`` or ``"soft"`` (optionally
   ``"hard:<vendor>"``), ``"clean"`` (not a wall: no built-in anti-bot rule applies), or
   ``None`` (no opinion: go on);
2. the user's wall rules (``walls``), first match wins: a status, headers, body strings and a
   domain scope, every given condition must hold;
3. the built-in classifier, whose anti-bot verdict is dropped when a "never a wall" exception
   (``never``: a domain, a status, a body string, a built-in marker) matches.

Evidence (the ``error_class`` a verdict records) keeps the project's form,
``'<challenge|block>:<vendor>:<name>'``: ``'block:acme:rule:acme-403'`` for a wall rule named
``acme-403``, ``'challenge:acme:predicate'`` for the predicate. Pure: no Scrapy, no I/O.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any
from urllib.parse import urlsplit

from scrapy_domainstate.core.wallrules import (
    CLEAN,
    GRADES,
    PREDICATE_SETTING,
    PREDICATE_TAG,
    RULES_SETTING,
    NeverWall,
    RuleError,
    WallRules,
    load_predicate,
    parse_verdict,
)
from scrapy_domainstate.detect.scan import BodyScan, lowered

__all__ = ["Ruling", "Seen", "UserRules", "spider_settings", "user_rules"]

logger = logging.getLogger(__name__)


# ------------------------------------------------------------------ what a rule sees


class Seen:
    """The response as the rules (and the predicate) see it: ``url``, ``status``, ``headers``
    (lower-case names, ``str`` values, repeated headers joined with ``", "``), ``body``
    (bytes), ``text`` (the body decoded, UTF-8 with replacement) and ``host``.

    Not a Scrapy ``Response`` (the classifier is pure and is also run on saved responses by
    ``scrapy domainstate explain --response``); it has the attributes a predicate usually reads.
    """

    def __init__(
        self,
        url: str,
        status: int,
        headers: Mapping[str, str],
        body: bytes,
        scan_bytes: int,
        scan: BodyScan | None = None,
    ) -> None:
        self.url = url
        self.status = status
        self.headers = headers
        self.body = body
        self.scan_bytes = scan_bytes
        #: the classifier's view of the same body, when given (its lowercased copy is shared)
        self.scan = scan if scan is not None and scan.limit == scan_bytes else None

    @cached_property
    def host(self) -> str:
        try:
            return (urlsplit(self.url).hostname or "").rstrip(".").lower()
        except ValueError:
            return ""

    @cached_property
    def low(self) -> bytes:
        # (the classifier's own scan reads the same copy, when it handed its BodyScan over)
        return self.scan.low if self.scan is not None else lowered(self.body, self.scan_bytes)

    @cached_property
    def text(self) -> str:
        return bytes(self.body).decode("utf-8", "replace")

    def __repr__(self) -> str:
        return f"<Seen {self.status} {self.url}>"


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
        self.wants_headers = (
            predicate is not None
            or any(r.when.headers for r in rules.walls)
            or any(n.when.headers for n in rules.never)
        )
        self._warned = False

    def __bool__(self) -> bool:
        return bool(self.rules) or self.predicate is not None

    def seen(self, url: str, status: int, headers: Mapping[str, str], body: Any, scan: BodyScan | None = None) -> Seen:
        """What the rules see of a response; ``scan``: the classifier's :class:`BodyScan` of
        ``body`` (its lowercased view is then shared)."""
        raw = body if isinstance(body, (bytes, bytearray, memoryview)) else (body or b"")
        if isinstance(raw, str):
            raw = raw.encode("utf-8")
        data = raw if type(raw) is bytes else bytes(raw)
        return Seen(url or "", int(status), headers, data, self.scan_bytes, scan)

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
            grade, vendor = parse_verdict(answer)
        except RuleError as exc:
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


def user_rules(config: Any) -> UserRules | None:
    """The :class:`UserRules` of a :class:`~scrapy_domainstate.core.config.Config`, or ``None`` when
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
