"""Decide a request when it is about to be sent, not when it enters the downloader.

Scrapy calls the downloader middlewares' ``process_request`` when a request *enters* the
downloader; the request then waits in its download slot's queue until one of the slot's
``CONCURRENT_REQUESTS_PER_DOMAIN`` transfers is free. A decision taken on entry is stale by
the time a queued request leaves: a domain that turned ``cold`` or ``dead`` meanwhile was
still fetched. :class:`SendGate` moves that wait in front of the decision: a request waits
in the middleware (holding the same place in ``CONCURRENT_REQUESTS`` it would hold in the
slot queue) until its slot has room, and is decided then. At most the slot's concurrency
of requests per slot is between "decided" and "done", so after a domain changes state at
most ``concurrency - 1`` requests decided before the change are still sent (those already
on the wire). The manager sends only the requests of domains still being learned
(``unknown``, ``antibot-soft``) through the gate: the other states hold for a crawl.

A place is taken by :meth:`SendGate.enter` and given back by :meth:`SendGate.leave` —
when the request leaves the downloader (``request_left_downloader``), when its response
or failure comes back through the middleware (an HTTP cache hit never reaches the
downloader), when it is skipped, or when a copy of it comes back for a retry or a
redirect. ``leave`` is idempotent: the place is an object in the request's meta (a copy
of the request made for a retry or a redirect shares it) and is given back once.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from twisted.internet.defer import CancelledError, Deferred

if TYPE_CHECKING:
    from scrapy.http import Request

__all__ = ["META_GATE", "SendGate"]

#: Request meta key: the download slot whose place this request holds.
META_GATE = "_domainstate_gate"


class _Place:
    __slots__ = ("held", "key")

    def __init__(self, key: str) -> None:
        self.key = key
        self.held = True


class _Slot:
    __slots__ = ("active", "waiters")

    def __init__(self) -> None:
        self.active = 0
        self.waiters: deque[tuple[Deferred[None], _Place]] = deque()


class SendGate:
    """Per download slot: at most ``limit`` requests between decision and done."""

    def __init__(self) -> None:
        self._slots: dict[str, _Slot] = {}
        #: Requests that waited for a place (for the stats).
        self.waited = 0

    def enter(self, request: Request, key: str, limit: int) -> Deferred[None] | None:
        """Take a place in ``key`` for ``request``: None when it has one now, else a
        Deferred that fires when it has one (the place is handed over by :meth:`leave`)."""
        slot = self._slots.get(key)
        if slot is None:
            slot = self._slots[key] = _Slot()
        place = request.meta[META_GATE] = _Place(key)
        if slot.active < max(1, limit):
            slot.active += 1
            return None
        self.waited += 1
        waiter: Deferred[None] = Deferred(lambda d: self._cancelled(key, d))
        slot.waiters.append((waiter, place))
        return waiter

    def leave(self, request: Request | None) -> None:
        """Give back ``request``'s place, if it holds one; the longest waiter gets it."""
        if request is None:
            return
        place = request.meta.pop(META_GATE, None)
        if not isinstance(place, _Place) or not place.held:
            return
        place.held = False
        key = place.key
        slot = self._slots.get(key)
        if slot is None:
            return
        while slot.waiters:
            waiter, _ = slot.waiters.popleft()
            if not waiter.called:
                waiter.callback(None)  # the place passes to it: ``active`` is unchanged
                return
        slot.active = max(0, slot.active - 1)
        if not slot.active:
            del self._slots[key]

    def left(self, request: Request, later: Callable[[Callable[[Request], None], Request], object]) -> None:
        """``request`` left the downloader (``request_left_downloader``).

        Its response is on its way back through the middlewares, where its outcome is
        recorded and its place given back. When nobody waits for the place, it goes back now
        (nothing is decided meanwhile); otherwise ``later(self.leave, request)`` gives it back
        after that way back, or for the responses that never come back to this middleware
        (a retry, a redirect or a failure raised above it).
        """
        place = request.meta.get(META_GATE)
        if not isinstance(place, _Place) or not place.held:
            return
        slot = self._slots.get(place.key)
        if slot is not None and slot.waiters:
            later(self.leave, request)
        else:
            self.leave(request)

    def _cancelled(self, key: str, waiter: Deferred[None]) -> None:
        slot = self._slots.get(key)
        if slot is None:
            return
        for item in list(slot.waiters):
            if item[0] is waiter:
                item[1].held = False  # it never had a place: nothing to give back
                slot.waiters.remove(item)

    def active(self, key: str) -> int:
        slot = self._slots.get(key)
        return 0 if slot is None else slot.active

    def waiting(self, key: str | None = None) -> int:
        if key is not None:
            slot = self._slots.get(key)
            return 0 if slot is None else len(slot.waiters)
        return sum(len(s.waiters) for s in self._slots.values())

    def close(self) -> None:
        """Release every waiter (the crawl is closing): they go on undecided-by-the-gate."""
        slots, self._slots = self._slots, {}
        for slot in slots.values():
            for waiter, place in slot.waiters:
                place.held = False
                if not waiter.called:
                    waiter.errback(CancelledError("scrapy-domainstate: the crawl is closing"))
