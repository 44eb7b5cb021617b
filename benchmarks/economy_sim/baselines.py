"""The memoryless policies scrapy-domainstate is compared with, one host visit at a time.

Each returns ``(requests, renders, found)``: requests sent (a render is also a request),
browser renders, and per page whether its contacts were found. robots.txt is counted by
the caller.

``plain``
    Scrapy without the plugin: one GET per page.
``fallback``
    The naive fetch-with-fallback: one GET per page and a render whenever it fails. It
    finds every contact any policy can reach (the reference for *lost* pages): so it is
    run paced (a rate-limited host never answers it 429), where plain, fixable and browser
    send at Scrapy's full speed (:meth:`.World.at_full_speed`: past a rate-limited host's
    burst, 429s, each sent again ``retries`` times at once by Scrapy's RetryMiddleware).
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

#: A 429 to a burst (Retry-After): Scrapy's RetryMiddleware sends it again ``retries`` times at
#: once (it ignores Retry-After), within the window: every retry is a 429 too.
BURST = w.BURST_LIMITED
#: A real page the classifier calls a challenge: what the page holds is there for a policy that
#: does not classify (plain fetch) or knows better (the oracle).
FALSE_WALL = w.FALSE_WALL

__all__ = ["browser", "fallback", "fixable", "oracle", "plain"]

Visit = tuple[int, int, int]
"""``(requests, renders, found)``; ``found``: a bit per page whose contacts were found."""

#: Failures a second request (a render) can get past: the oracle's re-issue rule.
_TRANSIENT = frozenset({w.TIMEOUT, w.SERVER_ERROR, w.SERVER_ERROR_500, w.CHALLENGE, w.BLOCKED, w.JS_SHELL})
_RENDER_KINDS = frozenset({w.WALL, w.BLOCK, w.SHELL})
OK = w.OK


def _known(pages: list[Page], discover: bool, root_yielded: bool) -> list[Page]:
    """With pages discovered from the root, a root that yielded no page is all there is."""
    return pages if not discover or root_yielded or not pages else pages[:1]


def plain(pages: list[Page], retries: int = 0, discover: bool = False) -> Visit:
    pages = _known(pages, discover, bool(pages) and pages[0][0] in (OK, FALSE_WALL))
    found = extra = 0
    for i, (g, _, _, c) in enumerate(pages):
        if c and g in (OK, FALSE_WALL):
            found |= 1 << i
        elif g == BURST:
            extra += retries
    return len(pages) + extra, 0, found


def fallback(pages: list[Page], retries: int = 0, discover: bool = False) -> Visit:
    pages = _known(pages, discover, bool(pages) and OK in pages[0][:2])
    renders = found = extra = 0
    for i, (g, t, _, c) in enumerate(pages):
        if g != OK:
            renders += 1
            if g == BURST:
                extra += retries
                renders += retries if t == BURST else 0
        if c and OK in (g, t):
            found |= 1 << i
    return len(pages) + renders + extra, renders, found


def fixable(pages: list[Page], reissued: frozenset[int], retries: int = 0, discover: bool = False) -> Visit:
    """``reissued``: the GET results the plugin's evidence rules re-issue (:meth:`.Judge.reissued`)."""
    if pages:
        g, t = pages[0][:2]
        pages = _known(pages, discover, g == OK or (g in reissued and t == OK))
    renders = found = extra = 0
    for i, (g, t, _, c) in enumerate(pages):
        if g in reissued:
            renders += 1
            if c and t == OK:
                found |= 1 << i
        elif c and g == OK:
            found |= 1 << i
        elif g == BURST:
            extra += retries
    return len(pages) + renders + extra, renders, found


def browser(pages: list[Page], retries: int = 0, discover: bool = False) -> Visit:
    pages = _known(pages, discover, bool(pages) and pages[0][1] == OK)
    found = extra = 0
    for i, (_, t, _, c) in enumerate(pages):
        if c and t == OK:
            found |= 1 << i
        elif t == BURST:
            extra += retries
    return len(pages) + extra, len(pages) + extra, found


def oracle(pages: list[Page], behaviour: int, contactless: bool, discover: bool = False) -> Visit:
    """(Paced: a rate-limited host is never sent more than it takes.)"""
    if behaviour in (w.DEAD, w.PARKED_SITE) or contactless:
        return 0, 0, 0
    requests = renders = found = 0
    render_first = behaviour in _RENDER_KINDS
    for i, (g, t, _, c) in enumerate(pages):
        if g == w.URL_404:
            continue
        got = OK if g == FALSE_WALL else g
        if render_first or got in _TRANSIENT:
            requests += 1 + (not render_first)
            renders += 1
            if c and t == OK:
                found |= 1 << i
            elif i == 0 and discover and t != OK:
                break  # the root gave no page: no other URL is known
        else:
            requests += 1
            if c and got == OK:
                found |= 1 << i
            elif i == 0 and discover and got != OK:
                break
    return requests, renders, found
