"""What a page looks like, read from its lowercased view: binary or not, how much text it
shows, how many links, whether it has a field a person types into, and the resulting shape
(:class:`Shape`: branded, interstitial, empty) the classifier's structural rules and the
markers' ``short_page`` condition read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from scrapy_domainstate.detect.scan import visible_text

__all__ = [
    "BRANDED_MAX_TEXT",
    "EMPTY_PAGE_MAX_TEXT",
    "INTERSTITIAL_MAX_LINKS",
    "INTERSTITIAL_MAX_TEXT",
    "JS_SHELL_MIN_TEXT",
    "Shape",
    "is_binary",
    "links_at_least",
    "person_fields",
    "visible_text_below",
]

#: A script-only shell shows fewer visible characters than this outside ``<script>``/``<style>``.
JS_SHELL_MIN_TEXT = 50
#: An interstitial shows fewer visible characters than this, and fewer links than
#: :data:`INTERSTITIAL_MAX_LINKS` (real challenge pages: at most ~950 characters and 6 links).
INTERSTITIAL_MAX_TEXT = 1200
INTERSTITIAL_MAX_LINKS = 10
#: A long page with a challenge marker counts as interstitial-shaped up to this much text
#: (site-branded challenge pages explain themselves in several languages).
BRANDED_MAX_TEXT = 4000
#: "Empty but for a script": no title, fewer visible characters than this, at most 2 links and
#: 6 scripts (vendors inject their sensor scripts into every page, small ones included).
EMPTY_PAGE_MAX_TEXT = 40


_BINARY_MAGIC = (b"%PDF", b"\x89PNG", b"GIF8", b"\xff\xd8\xff", b"PK\x03\x04", b"\x1f\x8b", b"RIFF", b"OggS", b"ID3")
_BINARY_TYPES = (
    "image/",
    "audio/",
    "video/",
    "font/",
    "application/pdf",
    "application/zip",
    "application/gzip",
    "application/x-gzip",
    "application/octet-stream",
    "application/wasm",
)


#: The same as they read in a lowercased view.
_BINARY_MAGIC_LOW = tuple(m.lower() for m in _BINARY_MAGIC)


def is_binary(content_type: str, low: bytes) -> bool:
    """Binary by content type, by the magic bytes of a lowercased view, or by a NUL byte."""
    if content_type and content_type.lstrip().lower().startswith(_BINARY_TYPES):
        return True
    return low.startswith(_BINARY_MAGIC_LOW) or b"\x00" in low[:1024]


_WS = b" \t\r\n\f\v"
_HIDDEN_ELEMENTS = (b"script", b"style", b"noscript", b"template")


def visible_text_below(low: bytes, threshold: int) -> bool:
    """True when ``low`` shows fewer than ``threshold`` non-space characters as text.

    Text inside ``<script>``, ``<style>``, ``<noscript>``, ``<template>`` and comments does
    not count; counting starts at ``<body`` when there is one and stops at ``threshold``.
    """
    n = len(low)
    i = low.find(b"<body")
    i = 0 if i < 0 else i
    visible = 0
    while i < n:
        lt = low.find(b"<", i)
        end = n if lt < 0 else lt
        if end > i:
            visible += len(low[i:end].translate(None, _WS))
            if visible >= threshold:
                return False
        if lt < 0:
            break
        if low.startswith(b"<!--", lt):
            close = low.find(b"-->", lt + 4)
            i = n if close < 0 else close + 3
            continue
        hidden = next((t for t in _HIDDEN_ELEMENTS if low.startswith(t, lt + 1)), None)
        if hidden is not None:
            close = low.find(b"</" + hidden, lt)
            if close < 0:
                break
            lt = close
        gt = low.find(b">", lt)
        i = n if gt < 0 else gt + 1
    return visible < threshold


#: Inputs a person types into (a login or contact form), as opposed to a challenge's hidden fields.
_PERSON_FIELD = re.compile(
    rb"<textarea|<input(?![^>]*type=[\"']?(?:hidden|submit|button|image|checkbox)\b)[^>]*>", re.S
)


def person_fields(view: bytes) -> bool:
    return _PERSON_FIELD.search(view) is not None


def links_at_least(view: bytes, n: int) -> bool:
    """Whether ``view`` has at least ``n`` links (stops counting there)."""
    pos = view.find(b"<a ")
    while pos >= 0:
        n -= 1
        if n <= 0:
            return True
        pos = view.find(b"<a ", pos + 3)
    return False


@dataclass(frozen=True, slots=True)
class Shape:
    """What a page looks like: its visible text (when short), and whether it is branded
    (little text for a long page), an interstitial (less text, few links) or empty (no text
    to speak of, a few scripts)."""

    view: bytes
    text: bytes
    branded: bool
    interstitial: bool
    empty: bool

    @classmethod
    def of(cls, low: bytes, ext: bytes) -> Shape:
        view = low + ext if ext else low
        if links_at_least(view, INTERSTITIAL_MAX_LINKS):
            return cls(view, b"", False, False, False)
        text = visible_text(view, BRANDED_MAX_TEXT)
        if text is None:
            return cls(view, b"", False, False, False)
        interstitial = len(text) < INTERSTITIAL_MAX_TEXT
        empty = interstitial and len(text) < EMPTY_PAGE_MAX_TEXT and not links_at_least(view, 3)
        empty = empty and view.count(b"<script") <= 6
        return cls(view, text, True, interstitial, empty)
