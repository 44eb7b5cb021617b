"""The Redis store's local read cache: decisions read memory, a reader thread reads Redis.

One :class:`ReadCache` per open Redis store, active once a crawl's reactor runs (the store
turns it on at its first :meth:`~scrapy_domainstate.store.base.DomainStore.prefetch`).

- **Misses wait for their own batch only.** :meth:`ReadCache.want` (reactor thread) returns
  ``None`` when every key is cached, else a Deferred. The keys go to the reader thread,
  which reads everything wanted since its last round trip in one ``MGET`` (``mget_nonatomic``
  on a cluster, chunks of :attr:`ReadCache.chunk`), stores the replies and fires the
  Deferreds on the reactor thread (``callFromThread``). The reactor never waits for Redis.
- **Kept fresh.** Every ``refresh / 4`` seconds the reader re-reads, in the same batched
  way, each entry older than ``refresh`` that a decision used in its last
  :attr:`ReadCache.keep_idle` refreshes (misses go first, between refresh chunks). An entry older than ``max_age`` (not used for a while,
  or a refresh late) counts as a miss: the next request for it waits for a fresh read.
  Entries unused for :attr:`ReadCache.forget` seconds are dropped (memory follows the
  domains being crawled). So while Redis answers, a request is decided on a record at most
  ``max_age`` old (0.75 s by default).
- **The store's own writes** go into the cache as they are written (:meth:`put`), and a
  reply read before a local write never overwrites it.
- **Redis failing.** A failed ``MGET`` pauses the reader for the store's ``breaker_seconds``:
  meanwhile misses answer "not stored" at once (a request is decided as for an unknown
  domain, as the store's read breaker does) and cached entries keep answering with what was
  last read. The failure and each reply are reported to the store on the reactor thread, where
  its breakers, counters and outage warnings live.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where a Deferred is made: the store floor loads no Twisted
    from twisted.internet.defer import Deferred


__all__ = ["Entry", "ReadCache"]

logger = logging.getLogger(__name__)


class Entry:
    """One cached value (``None``: not stored), when it was read (monotonic clock), whether a
    decision used it since, and for how many refreshes in a row none did."""

    __slots__ = ("at", "current", "idle", "raw", "used")

    def __init__(self, raw: bytes | None, at: float, used: bool = False, idle: int = 0) -> None:
        self.raw = raw
        self.at = at
        self.used = used
        self.idle = idle
        #: the store's decoded record as it stands after lazy expiry (set by the store: a
        #: record whose state expired is decoded once, not at every decision)
        self.current: Any = None


class _Waiter:
    __slots__ = ("deferred", "left")

    def __init__(self, keys: set[str]) -> None:
        self.left = keys
        from twisted.internet.defer import Deferred

        self.deferred: Deferred[None] = Deferred()


#: ``fetch(keys) -> (values, worst reply wait in seconds)`` in the reader thread.
Fetch = Callable[[list[str]], tuple[list[Any], float]]
#: ``report(error or None, worst reply wait, short-circuited)`` on the reactor thread.
Report = Callable[[BaseException | None, float, bool], None]


class ReadCache:
    #: Keys per MGET.
    chunk = 500
    #: Entries unused this long are dropped.
    forget = 60.0
    #: Refreshes an entry gets while no decision uses it (12 x 0.4 s: a domain requested every
    #: few seconds stays fresh; one not requested for longer is read again when it is).
    keep_idle = 12

    def __init__(
        self,
        fetch: Fetch,
        report: Report,
        refresh: float,
        max_age: float,
        pause: float,
        call_from_thread: Callable[..., Any],
    ) -> None:
        self.entries: dict[str, Entry] = {}
        self.refresh = refresh
        #: An entry older than this is a miss for :meth:`want`.
        self.max_age = max_age
        self.pause = pause
        self._fetch = fetch
        self._report = report
        self._call = call_from_thread
        self._waiting: dict[str, list[_Waiter]] = {}  # reactor thread only
        self._wanted: list[str] = []  # appended on the reactor thread, taken by the reader
        self._cond = threading.Condition()
        #: Held while an entry is written: the store's own writes (:meth:`put`, :meth:`clear`)
        #: and the reader's "is my reply newer than the entry?" check with its assignment, so a
        #: reply read before the store's write never replaces it.
        self._lock = threading.Lock()
        self._cleared_at = 0.0
        self._dropped: dict[str, float] = {}
        self._stopping = False
        self._paused_until = 0.0
        self._thread: threading.Thread | None = None
        #: round trips and keys read by the reader thread (misses and refreshes)
        self.batches = 0
        self.keys_read = 0

    # ------------------------------------------------------ reactor thread

    def start(self) -> ReadCache:
        self._thread = threading.Thread(target=self._run, name="domainstate-redis-reads", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 2.0) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(timeout)
        # whatever still waits goes on (decided as for what is cached: nothing)
        self._deliver(list(self._waiting))

    def want(self, keys: list[str]) -> Deferred[None] | None:
        """``None`` when every key is cached; else a Deferred fired once they all are."""
        entries = self.entries
        now = time.monotonic()
        oldest = now - self.max_age
        missing = []
        for key in keys:
            entry = entries.get(key)
            if entry is None or entry.at < oldest:
                missing.append(key)
            else:
                entry.used = True
        if not missing:
            return None
        waiter = _Waiter(set(missing))
        new = []
        waiting = self._waiting
        for key in missing:
            queued = waiting.get(key)
            if queued is None:
                waiting[key] = [waiter]
                new.append(key)
            else:
                queued.append(waiter)
        if new:
            with self._cond:
                self._wanted.extend(new)
                self._cond.notify()
        return waiter.deferred

    def put(self, key: str, raw: bytes | None) -> None:
        """The store wrote ``raw`` under ``key`` (``None``: deleted)."""
        with self._lock:
            self.entries[key] = Entry(raw, time.monotonic(), used=True)

    def drop(self, key: str) -> None:
        """Forget ``key`` (read again when next wanted; a reply read before this is not kept)."""
        with self._lock:
            self.entries.pop(key, None)
            self._dropped[key] = time.monotonic()

    def clear(self) -> None:
        with self._lock:
            self.entries.clear()
            self._dropped.clear()
            self._cleared_at = time.monotonic()

    def _delivered(self, keys: list[str], exc: BaseException | None, worst: float, short: bool) -> None:
        try:
            if not self._stopping:  # (a reply after stop(): the store is closing, no more outages)
                self._report(exc, worst, short)
        finally:
            self._deliver(keys)

    def _deliver(self, keys: list[str]) -> None:
        waiting = self._waiting
        for key in keys:
            for waiter in waiting.pop(key, ()):
                waiter.left.discard(key)
                if not waiter.left:
                    waiter.deferred.callback(None)

    # ------------------------------------------------------- reader thread

    def _run(self) -> None:
        tick = self.refresh / 4
        next_sweep = time.monotonic() + tick
        while True:
            with self._cond:
                if not self._wanted and not self._stopping:
                    self._cond.wait(max(0.0, next_sweep - time.monotonic()))
                if self._stopping:
                    return
                batch, self._wanted = self._wanted, []
            now = time.monotonic()
            stale: list[str] = []
            if now >= next_sweep:
                next_sweep = now + tick
                stale = self._sweep(now)
            try:
                if batch:  # misses first: a request waits for them
                    self._read(batch, [], now)
                for i in range(0, len(stale), self.chunk):
                    with self._cond:
                        batch, self._wanted = self._wanted, []
                    if batch:  # (misses that came meanwhile go before the next refresh chunk)
                        self._read(batch, [], time.monotonic())
                    self._read([], stale[i : i + self.chunk], now)
            except Exception:  # never let the thread die: the crawl would wait for it
                logger.exception("scrapy-domainstate: the Redis read-cache thread failed")
                self._call(self._deliver, batch)

    def _sweep(self, now: float) -> list[str]:
        """Entries to read again (used since read); drop those unused for :attr:`forget`."""
        stale = []
        fresh_until = now - self.refresh
        forget_before = now - self.forget
        entries = self.entries
        for key, entry in list(entries.items()):
            if entry.at <= fresh_until:
                if entry.used or entry.idle < self.keep_idle:
                    stale.append(key)
                elif entry.at < forget_before and entries.get(key) is entry:
                    del entries[key]
        return stale

    def _read(self, batch: list[str], stale: list[str], now: float) -> None:
        if not batch and not stale:
            return
        entries = self.entries
        if now < self._paused_until:
            # Redis failing: a miss answers "not stored" now, read again once the pause is over
            for key in batch:
                entries.setdefault(key, Entry(None, now - self.refresh, used=True))
            self._call(self._delivered, batch, None, 0.0, bool(batch))
            return
        keys = batch + stale
        started = time.monotonic()
        values: list[Any] = []
        worst = 0.0
        try:
            for i in range(0, len(keys), self.chunk):
                got, wait = self._fetch(keys[i : i + self.chunk])
                values.extend(got)
                worst = max(worst, wait)
                self.batches += 1
        except Exception as exc:
            self._paused_until = time.monotonic() + self.pause
            for key in batch:
                entries.setdefault(key, Entry(None, started - self.refresh, used=True))
            self._call(self._delivered, batch, exc, worst, False)
            return
        self.keys_read += len(keys)
        dropped = self._dropped
        with self._lock:
            if started > self._cleared_at:
                for key, raw in zip(keys, values, strict=True):
                    old = entries.get(key)
                    if old is not None and old.at > started:
                        continue  # written by the store meanwhile: newer than this reply
                    if dropped and dropped.pop(key, started) > started:
                        continue  # forgotten by the store meanwhile: read again when wanted
                    entries[key] = Entry(raw, started, idle=0 if old is None or old.used else old.idle + 1)
        self._call(self._delivered, batch, None, worst, False)
