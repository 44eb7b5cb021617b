"""Bounded connections for the reference service: deadlines and a cap on open sockets.

A client sending a byte now and then, or opening thousands of idle connections, cannot
hold the service's file descriptors: :class:`BoundedChannel` gives each request deadlines,
:class:`BoundedSite` caps the open and the waiting connections.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from twisted.internet.interfaces import ITCPTransport
from twisted.web import http, server

from scrapy_domainstate.fleet.limits import Limits

if TYPE_CHECKING:
    from scrapy_domainstate.fleet.service import DomainStateService

__all__ = ["BoundedChannel", "BoundedSite"]


class BoundedChannel(http.HTTPChannel):
    """A connection with deadlines: the headers of a request within ``header_timeout``, its
    body within ``body_timeout`` more (a client sending a byte now and then cannot hold a
    connection for ever), the next request of a kept-alive one within ``idle_timeout``."""

    # 100 domains of 253 characters fit in the request line.
    MAX_LENGTH = 64 * 1024
    totalHeadersSize = 64 * 1024
    site: BoundedSite
    _deadline: Any = None

    def connectionMade(self) -> None:
        super().connectionMade()
        self._await(self.site.limits.header_timeout)
        self.site.waiting_for(self)

    def _await(self, seconds: float) -> None:
        self._stop_deadline()
        self._deadline = self.callLater(seconds, self._too_slow)

    def _stop_deadline(self) -> None:
        deadline, self._deadline = self._deadline, None
        if deadline is not None and deadline.active():
            deadline.cancel()

    def _too_slow(self) -> None:
        self._deadline = None
        self.site.service.counters["conn/too_slow"] += 1
        _abort(self)

    def allHeadersReceived(self) -> None:
        super().allHeadersReceived()
        self._await(self.site.limits.body_timeout)

    def allContentReceived(self) -> None:
        self._stop_deadline()
        self.site.busy(self)
        super().allContentReceived()

    def requestDone(self, request: Any) -> None:
        super().requestDone(request)
        if self.persistent and self.transport is not None and not getattr(self.transport, "disconnecting", False):
            limits = self.site.limits
            self._await(limits.idle_timeout + limits.header_timeout)
            self.site.waiting_for(self)

    def connectionLost(self, reason: Any = None) -> None:
        self._stop_deadline()
        self.site.closed(self)
        super().connectionLost(reason)


class BoundedSite(server.Site):
    """Bounds the connections, so slow clients cannot hold every file descriptor.

    At most ``max_connections`` open: a new connection beyond closes the one waiting longest
    for a request's bytes (or is refused when none waits). At most ``max_waiting`` waiting:
    beyond, the longest waiting are closed :attr:`sweep_delay` seconds later (time for a
    client that sends its request at once to have it read, so a fast client is never
    closed for slow ones).
    """

    # The channel itself, not Twisted's HTTP/1-or-2 wrapper: the site tracks its channels.
    protocol = BoundedChannel  # type: ignore[assignment]
    limits = Limits()
    service: DomainStateService
    sweep_delay = 0.25

    def startFactory(self) -> None:
        super().startFactory()
        self._init_bounds()

    def _init_bounds(self) -> None:
        self.channels: set[BoundedChannel] = set()
        #: Channels waiting for bytes, the longest waiting first.
        self.waiting: dict[BoundedChannel, None] = {}
        self._sweep: Any = None

    def buildProtocol(self, addr: Any) -> Any:
        if not hasattr(self, "channels"):
            self._init_bounds()
        if len(self.channels) >= self.limits.max_connections and not self._evict_waiting():
            self.service.counters["conn/refused"] += 1
            return None
        return super().buildProtocol(addr)

    def _evict_waiting(self) -> bool:
        if not self.waiting:
            return False
        oldest = next(iter(self.waiting))
        del self.waiting[oldest]
        self.channels.discard(oldest)
        self.service.counters["conn/evicted"] += 1
        _abort(oldest)
        return True

    def _sweep_waiting(self) -> None:
        self._sweep = None
        while len(self.waiting) > self.limits.max_waiting:
            self._evict_waiting()

    def waiting_for(self, channel: BoundedChannel) -> None:
        self.channels.add(channel)
        self.waiting.pop(channel, None)
        self.waiting[channel] = None
        if len(self.waiting) > self.limits.max_waiting and self._sweep is None:
            self._sweep = self.reactor.callLater(self.sweep_delay, self._sweep_waiting)

    def busy(self, channel: BoundedChannel) -> None:
        self.waiting.pop(channel, None)

    def closed(self, channel: BoundedChannel) -> None:
        self.channels.discard(channel)
        self.waiting.pop(channel, None)

    def log(self, request: Any) -> None:  # no access log: it would hold the tokens' callers
        pass


def _abort(channel: BoundedChannel) -> None:
    """Close ``channel`` now, without waiting for its buffers to drain."""
    if channel.transport is not None:
        cast(ITCPTransport, channel.transport).abortConnection()
