"""The markers of :mod:`scrapy_domainstate.detect.markers` compiled for matching: each
:class:`~scrapy_domainstate.detect.markers.Marker` as a :class:`CompiledMarker` (lowercase bytes
literals, its regex, its header names and values), the :class:`Plan` of markers eligible in one
situation (status, page size, body or not), the checks a body marker's conditions make, and the
parking cues compiled (:class:`ParkingCues`). Built once per classifier; read on every response.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from scrapy_domainstate.detect.markers import (
    LANDER_MAX_BYTES,
    LANDER_MAX_TEXT,
    PARKING_MARKUP,
    PARKING_PHRASES,
    PARKING_TITLES,
    Marker,
)
from scrapy_domainstate.detect.page import Shape
from scrapy_domainstate.detect.scan import Subset, title_of, visible_text

__all__ = [
    "CompiledMarker",
    "ParkingCues",
    "Plan",
    "compile_marker",
    "conditions_hold",
    "in_script",
    "outside_scripts",
]


@dataclass(frozen=True, slots=True)
class CompiledMarker:
    vendor: str
    marker: Marker
    kind: str
    prefix: str
    allowed: frozenset[int] | None
    literals: frozenset[bytes]
    requires: tuple[bytes, ...]
    regex: re.Pattern[bytes] | None
    anchor: bytes
    header_names: tuple[str, ...]
    header_prefixes: tuple[str, ...]
    values: frozenset[str]
    exclude: frozenset[str]
    title_patterns: tuple[bytes, ...]
    outside_scripts: bool
    unless: tuple[bytes, ...] = ()
    short_page: bool = False

    def evidence(self, detail: str | None = None) -> str:
        name = self.marker.name
        if detail is not None and "{}" in name:
            name = name.replace("{}", detail)
        return f"{self.prefix}:{self.vendor}:{name}"

    def scanned(self) -> set[bytes]:
        """The literals the body scan must report for this marker to be checked (title
        patterns are matched against the title, ``requires`` against the views, directly)."""
        out = set(self.literals)
        if self.anchor:
            out.add(self.anchor)
        return out


def compile_marker(vendor: str, marker: Marker) -> CompiledMarker:
    patterns = tuple(p.lower() for p in marker.patterns)
    encoded = tuple(p.encode("utf-8") for p in patterns)
    regex = None
    anchor = b""
    if marker.kind == "regex":
        regex = re.compile(marker.patterns[0].encode("utf-8"), re.S)
        anchor = marker.anchor.lower().encode("utf-8")
    return CompiledMarker(
        vendor=vendor,
        marker=marker,
        kind=marker.kind,
        prefix="block" if marker.hard else "challenge",
        allowed=marker.allowed_statuses(),
        literals=frozenset(encoded) if marker.kind == "body" else frozenset(),
        requires=tuple(r.lower().encode("utf-8") for r in marker.requires),
        regex=regex,
        anchor=anchor,
        header_names=tuple(p for p in patterns if not p.endswith("*")) if marker.kind == "header" else (),
        header_prefixes=tuple(p[:-1] for p in patterns if p.endswith("*")) if marker.kind == "header" else (),
        values=frozenset(v.lower() for v in marker.values),
        exclude=frozenset(v.lower() for v in marker.exclude),
        title_patterns=encoded if marker.kind == "title" else (),
        outside_scripts=marker.outside_scripts,
        unless=tuple(u.lower().encode("utf-8") for u in marker.unless),
        short_page=marker.short_page,
    )


@dataclass(frozen=True, slots=True)
class Plan:
    """The markers eligible for one (status, page size, body?) situation."""

    markers: tuple[CompiledMarker, ...]
    headless: tuple[CompiledMarker, ...]  # the same without body/regex/title markers
    #: Markers that fire on the status alone (then there is no fast "clean" answer).
    has_status: bool
    #: The literals this plan's markers need from the body scan.
    literals: Subset
    #: Every title pattern of the plan's title markers (a quick "no title marker" check).
    title_patterns: tuple[bytes, ...]


def in_script(low: bytes, pos: int) -> bool:
    """Whether offset ``pos`` of a lowercase view lies inside a ``<script>`` element."""
    return low.rfind(b"<script", 0, pos) > low.rfind(b"</script", 0, pos)


def outside_scripts(low: bytes, literal: bytes) -> bool:
    """Whether ``literal`` occurs in ``low`` at least once outside ``<script>`` elements."""
    pos = low.find(literal)
    hits = 0
    while pos >= 0 and hits < 64:
        if not in_script(low, pos):
            return True
        hits += 1
        pos = low.find(literal, pos + 1)
    return False


def conditions_hold(c: CompiledMarker, low: bytes | None, ext: bytes) -> bool:
    """A marker's ``requires`` literals are in the body, none of its ``unless`` literals is, and
    a ``short_page`` marker's page is interstitial-shaped."""
    if c.requires and (low is None or not all(r in low or r in ext for r in c.requires)):
        return False
    if c.unless and low is not None and any(u in low or u in ext for u in c.unless):
        return False
    return not c.short_page or (low is not None and Shape.of(low, ext).interstitial)


@dataclass(frozen=True, slots=True)
class ParkingCues:
    """The parking cues of :mod:`~scrapy_domainstate.detect.markers`, compiled: title rules (a key
    literal and a regex), markup literals by service, phrases of the visible text."""

    titles: tuple[tuple[str, bytes, re.Pattern[bytes]], ...]
    markup: tuple[tuple[str, bytes], ...]
    phrases: tuple[bytes, ...]
    literals: frozenset[bytes]

    @classmethod
    def build(cls) -> ParkingCues:
        titles = tuple((svc, key.encode(), re.compile(rx.encode())) for svc, key, rx in PARKING_TITLES)
        markup = tuple((svc, lit.encode("utf-8")) for svc, lits in PARKING_MARKUP.items() for lit in lits)
        phrases = tuple(p.encode("utf-8") for p in PARKING_PHRASES)
        literals = frozenset({key for _, key, _ in titles} | {lit for _, lit in markup} | set(phrases))
        return cls(titles, markup, phrases, literals)

    def may_fire(self, low: bytes, size: int) -> bool:
        """Whether any rule could fire on ``low`` (a page of ``size`` bytes): a title rule's key
        is in the title, or the page is small enough to be a lander."""
        if size <= LANDER_MAX_BYTES:
            return True
        title = title_of(low)
        return bool(title) and any(key in title for _, key, _ in self.titles)

    def service(self, low: bytes, hits: set[bytes], size: int) -> str | None:
        """The service ``low`` (a lowercased home page of ``size`` bytes holding ``hits``) is
        parked with, or ``None``.

        A parking title counts at any length; markup and phrases only on a lander-shaped page
        (at most :data:`LANDER_MAX_BYTES`, less visible text than :data:`LANDER_MAX_TEXT`),
        markup only where it is not part of the visible text (an article quoting it)."""
        vendor = next((svc for svc, lit in self.markup if lit in hits), None)
        title = title_of(low) if any(key in hits for _, key, _ in self.titles) else b""
        for svc, key, regex in self.titles:
            match = regex.search(title) if key in hits else None
            if match is not None:
                named = match.groupdict().get("svc")
                return (named.decode("ascii", "replace") if named else None) or vendor or svc
        text = visible_text(low, LANDER_MAX_TEXT) if size <= LANDER_MAX_BYTES else None
        if text is None:
            return None
        for svc, lit in self.markup:
            if lit in hits and lit not in text:
                return svc
        if any(p in hits and p in text for p in self.phrases):
            return vendor or "generic"
        return None
