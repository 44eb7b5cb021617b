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
    the plugin's own evidence rules (``scrapy_domainstate._evidence``) would re-issue it.
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
from .answers import Judge
from .world import Page

__all__ = ["browser", "fallback", "fixable", "oracle", "plain"]

Visit = tuple[int, int, list[bool]]

#: Failures a second request (a render) can get past: the oracle's re-issue rule.
_TRANSIENT = frozenset({w.TIMEOUT, w.SERVER_ERROR, w.SERVER_ERROR_500, w.CHALLENGE, w.BLOCKED, w.JS_SHELL})
_RENDER_KINDS = frozenset({w.WALL, w.BLOCK, w.SHELL})


def plain(pages: list[Page]) -> Visit:
    return len(pages), 0, [c and g == w.OK for g, _, _, c in pages]


def fallback(pages: list[Page]) -> Visit:
    renders = sum(1 for g, _, _, _ in pages if g != w.OK)
    found = [c and w.OK in (g, t) for g, t, _, c in pages]
    return len(pages) + renders, renders, found


def fixable(pages: list[Page], judge: Judge) -> Visit:
    renders = 0
    found = []
    for g, t, _, c in pages:
        if judge.answer(g, False, True, c).reissue:
            renders += 1
            found.append(c and t == w.OK)
        else:
            found.append(c and g == w.OK)
    return len(pages) + renders, renders, found


def browser(pages: list[Page]) -> Visit:
    return len(pages), len(pages), [c and t == w.OK for _, t, _, c in pages]


def oracle(pages: list[Page], behaviour: int, contactless: bool) -> Visit:
    if behaviour == w.DEAD or contactless:
        return 0, 0, [False] * len(pages)
    requests = renders = 0
    found = []
    render_first = behaviour in _RENDER_KINDS
    for g, t, _, c in pages:
        if g == w.URL_404:
            found.append(False)
        elif render_first or g in _TRANSIENT:
            requests += 1 + (not render_first)
            renders += 1
            found.append(c and t == w.OK)
        else:
            requests += 1
            found.append(c and g == w.OK)
    return requests, renders, found
