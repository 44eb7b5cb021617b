"""The memoryless policies scrapy-domainstate is compared with, one host visit at a time.

Each returns ``(requests, renders, found)``: requests sent (a render is also a request),
browser renders, and per page whether its contacts were found. robots.txt is counted by
the caller.

``plain``
    Scrapy without the plugin: one GET per page.
``fallback``
    The naive fetch-with-fallback: one GET per page and a render whenever it fails. It
    finds every contact any policy can reach (the reference for *lost* pages).
``fixable``
    The fair baseline: no memory, no HEAD, one GET per page and one render exactly when
    the plugin's own evidence rules (``scrapy_domainstate.detect.evidence``) would re-issue it.
``browser``
    A render for every page.
``oracle``
    Knows every host's true behaviour this round (not the per-request noise) and does the
    least that still finds every contact there is: nothing for dead and contact-less hosts
    and broken URLs, a render for walled, blocked and script-shell hosts, a GET (and a
    render when it failed in a way a second request can get past) for the rest.
"""

from __future__ import annotations

from . import world as w
from .world import Page

__all__ = ["browser", "fallback", "fixable", "oracle", "plain"]

Visit = tuple[int, int, int]
"""``(requests, renders, found)``; ``found``: a bit per page whose contacts were found."""

#: Failures a second request (a render) can get past: the oracle's re-issue rule.
_TRANSIENT = frozenset({w.TIMEOUT, w.SERVER_ERROR, w.SERVER_ERROR_500, w.CHALLENGE, w.BLOCKED, w.JS_SHELL})
_RENDER_KINDS = frozenset({w.WALL, w.BLOCK, w.SHELL})
OK = w.OK


def plain(pages: list[Page]) -> Visit:
    found = 0
    for i, (g, _, _, c) in enumerate(pages):
        if c and g == OK:
            found |= 1 << i
    return len(pages), 0, found


def fallback(pages: list[Page]) -> Visit:
    renders = found = 0
    for i, (g, t, _, c) in enumerate(pages):
        if g != OK:
            renders += 1
        if c and OK in (g, t):
            found |= 1 << i
    return len(pages) + renders, renders, found


def fixable(pages: list[Page], reissued: frozenset[int]) -> Visit:
    """``reissued``: the GET results the plugin's evidence rules re-issue (:meth:`.Judge.reissued`)."""
    renders = found = 0
    for i, (g, t, _, c) in enumerate(pages):
        if g in reissued:
            renders += 1
            if c and t == OK:
                found |= 1 << i
        elif c and g == OK:
            found |= 1 << i
    return len(pages) + renders, renders, found


def browser(pages: list[Page]) -> Visit:
    found = 0
    for i, (_, t, _, c) in enumerate(pages):
        if c and t == OK:
            found |= 1 << i
    return len(pages), len(pages), found


def oracle(pages: list[Page], behaviour: int, contactless: bool) -> Visit:
    if behaviour == w.DEAD or contactless:
        return 0, 0, 0
    requests = renders = found = 0
    render_first = behaviour in _RENDER_KINDS
    for i, (g, t, _, c) in enumerate(pages):
        if g == w.URL_404:
            continue
        if render_first or g in _TRANSIENT:
            requests += 1 + (not render_first)
            renders += 1
            if c and t == OK:
                found |= 1 << i
        else:
            requests += 1
            if c and g == OK:
                found |= 1 << i
    return requests, renders, found
