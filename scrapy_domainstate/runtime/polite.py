"""How to be polite to each site: a download slot slowed on 429/503, remembered; hosts paused.

- :class:`Politeness`: a response ``429`` or ``503`` (seen as it is downloaded, before
  Scrapy's retries) raises a *floor* under its download slot's delay: ``Retry-After`` (seconds
  or an HTTP date, and a tenth more) when the response has one, else twice the current floor (1 s at first),
  never above ``DOMAINSTATE_POLITE_MAX_DELAY``. Every later response of the slot brings the
  slot's delay back up to the floor after AutoThrottle (or ``DOWNLOAD_SLOTS``) set it, so the
  three coexist: the slot waits at least the floor, more when they say so (without jitter:
  a floor is exact). Five successes (< 400) in a row lower the floor by a quarter; below 0.1 s
  it is gone and the slot's own delay and jitter are back.
  The floor is remembered per domain in a record of its own (``<domain>|polite``,
  :func:`~.keys.purpose_key`) with ``DOMAINSTATE_POLITE_TTL``: the next crawl, and with Redis the
  rest of the fleet, starts that domain's slots from it. A 429 never makes a domain dead, cold
  or antibot-hard (the policy's own rule, ``policy.RATE_LIMIT_STATUS``).
  A ``Retry-After`` longer than the cap pauses the host for the rest of the crawl instead
  (its queued requests would each wait that long): the next crawl starts it at the cap.
- :class:`HostPauses`: a host whose requests time out or lose their connection
  ``DOMAINSTATE_PAUSE_AFTER`` times in a row in a crawl is paused for the rest of it.

Scrapy glue: reads and writes the download slots of the crawler's engine; no store I/O of
its own (the manager hands it the store's records).
"""

from __future__ import annotations

import email.utils
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scrapy_domainstate.core.keys import purpose_key
from scrapy_domainstate.core.record import DomainStat, Method, Outcome, RecentEntry, State

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Request, Response

    from scrapy_domainstate.core.config import Config

__all__ = ["POLITE", "HostPauses", "Politeness", "polite_key", "retry_after"]

logger = logging.getLogger(__name__)

#: The purpose name of a domain's politeness record (``example.com|polite``).
POLITE = "polite"


def _slot_jitter_name() -> str:
    """Scrapy 2.19 gives a slot a ``jitter`` (a share of its delay); before, ``randomize_delay``
    (a bool: 0.5-1.5 times the delay)."""
    from scrapy.core.downloader import Slot

    return "jitter" if "jitter" in getattr(Slot, "__annotations__", {}) else "randomize_delay"


_JITTER = _slot_jitter_name()


def _jitter(slot: Any) -> float:
    if _JITTER == "jitter":
        return float(slot.jitter)
    return 0.5 if slot.randomize_delay else 0.0


def _set_jitter(slot: Any, jitter: float) -> None:
    if _JITTER == "jitter":
        slot.jitter = jitter
    else:
        slot.randomize_delay = jitter > 0


#: Statuses that slow a slot down.
SLOW_DOWN = frozenset({429, 503})
#: A Retry-After is waited a tenth longer: the server counts from when it answered, the slot
#: from when it sent.
MARGIN = 1.1
#: A floor starts here when the response says nothing (no ``Retry-After``).
FIRST_FLOOR = 1.0
#: After :data:`PATIENCE` successes in a row at a floor, it is lowered to this share of itself;
#: below :data:`GONE` the floor is dropped.
PATIENCE = 5
RECOVERY = 0.75
GONE = 0.1
#: Failures that pause a host (the classifier's error classes).
PAUSING = frozenset({"timeout", "ConnectionLost", "ConnectionDone", "ResponseNeverReceived", "ConnectionAborted"})
#: not read yet (a domain's remembered delay)
_UNREAD = -1.0
#: Slots (and hosts) tracked at once; the least recent go first beyond it.
MAX_TRACKED = 100_000


def polite_key(domain: str) -> str:
    """The key of a domain's politeness record."""
    return purpose_key(domain, POLITE)


def retry_after(value: bytes | str | None, now: float) -> float | None:
    """Seconds a ``Retry-After`` header asks for (a number, or an HTTP date), ``None`` if unreadable."""
    if value is None:
        return None
    text = value.decode("latin-1", "replace") if isinstance(value, bytes) else value
    text = text.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if when is None:
            return None
        seconds = when.timestamp() - now
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


@dataclass
class _Floor:
    domain: str
    delay: float
    #: the slot's delay before the first floor (given back when the floor is gone)
    base: float
    #: the slot's jitter before the first floor (a floor is exact: no jitter while it holds)
    jitter: float | None = None
    changed: bool = True
    #: successes in a row at this floor
    ok: int = 0


class Politeness:
    """The floors of one crawler's download slots (see the module's docstring)."""

    def __init__(self, config: Config, crawler: Crawler, clock: Any) -> None:
        self.enabled = config.politeness
        self.cap = config.polite_max_delay
        self.ttl = config.polite_ttl
        self.crawler = crawler
        self.clock = clock
        self.floors: dict[str, _Floor] = {}
        #: domain -> its remembered delay (None: none), read once per crawl
        self._remembered: dict[str, float | None] = {}
        #: slots started from a remembered floor in this crawl
        self._primed: set[str] = set()
        #: domains whose floor went away in this crawl (their records are dropped at close)
        self._recovered: set[str] = set()
        self.slowed = 0

    # ------------------------------------------------------------ slots

    def _downloader(self) -> Any:
        try:
            engine = self.crawler.engine
        except RuntimeError:  # Scrapy >= 2.14 before the crawl starts (component tests)
            return None
        return getattr(engine, "downloader", None)

    def _slot_key(self, request: Request) -> str | None:
        downloader = self._downloader()
        if downloader is None:
            return None
        key: str = downloader.get_slot_key(request)
        return key

    def _apply(self, key: str, delay: float) -> None:
        """Make the slot ``key`` wait at least ``delay`` (also a slot not made yet)."""
        downloader = self._downloader()
        if downloader is None:
            return
        slot = downloader.slots.get(key)
        if slot is not None:
            floor = self.floors.get(key)
            if floor is not None and floor.jitter is None:
                floor.jitter = _jitter(slot)
            _set_jitter(slot, 0.0)
            slot.delay = max(slot.delay, delay)
            return
        per_slot = downloader.per_slot_settings.setdefault(key, {})
        per_slot[_JITTER] = 0.0 if _JITTER == "jitter" else False
        per_slot["delay"] = max(per_slot.get("delay", 0.0), delay)

    def _base(self, key: str) -> float:
        downloader = self._downloader()
        slot = None if downloader is None else downloader.slots.get(key)
        if slot is not None:
            return float(slot.delay)
        if downloader is None:
            return 0.0
        return float(
            downloader.per_slot_settings.get(key, {}).get("delay", self.crawler.settings.getfloat("DOWNLOAD_DELAY"))
        )

    # ------------------------------------------------------------ signals and hooks

    def downloaded(self, response: Response, request: Request, domain: str | None) -> bool:
        """``response_downloaded`` (every response, retried ones too). True when the response
        asks for more than the cap (``Retry-After`` over ``DOMAINSTATE_POLITE_MAX_DELAY``): its
        host is then paused for the crawl rather than waited for, and the next crawl starts it
        at the cap."""
        if not self.enabled or domain is None or (response.status not in SLOW_DOWN and not self.floors):
            return False
        key = self._slot_key(request)
        if key is None:
            return False
        floor = self.floors.get(key)
        if response.status in SLOW_DOWN:
            asked = retry_after(response.headers.get(b"Retry-After"), self.clock())
            if asked is not None:
                delay = asked * MARGIN
            elif floor is not None:
                delay = 2 * floor.delay
            else:
                delay = FIRST_FLOOR
            self.slow(key, domain, min(delay, self.cap), response.status, asked)
            return asked is not None and asked > self.cap
        elif response.status < 400 and floor is not None:
            floor.ok += 1
            if floor.ok < PATIENCE:
                self._apply(key, floor.delay)
                return False
            floor.delay *= RECOVERY
            floor.ok = 0
            floor.changed = True
            if floor.delay < GONE:
                self._drop(key, floor)
            else:
                self._apply(key, floor.delay)
        return False

    def enforce(self, request: Request) -> None:
        """After AutoThrottle adjusted the slot on a response: back up to the floor."""
        if not self.floors:
            return
        key = self._slot_key(request)
        floor = None if key is None else self.floors.get(key)
        if floor is not None and key is not None:
            self._apply(key, floor.delay)

    def slow(self, key: str, domain: str, delay: float, status: int | None = None, asked: float | None = None) -> None:
        floor = self.floors.get(key)
        if floor is not None and floor.delay >= delay:
            self._apply(key, floor.delay)
            return
        if floor is None:
            if len(self.floors) >= MAX_TRACKED:
                self.floors.pop(next(iter(self.floors)))
            floor = self.floors[key] = _Floor(domain, delay, self._base(key))
            self.slowed += 1
            self.crawler.stats.inc_value("domainstate/polite/slowed")
        else:
            floor.delay, floor.changed, floor.ok = delay, True, 0
        self._recovered.discard(domain)
        self._apply(key, delay)
        why = "remembered" if status is None else f"{status}" + ("" if asked is None else f", Retry-After {asked:g} s")
        logger.info(
            "scrapy-domainstate: slowing %s down to one request every %.1f s (%s)",
            key,
            delay,
            why,
            extra={"crawler": self.crawler},
        )

    def _drop(self, key: str, floor: _Floor) -> None:
        del self.floors[key]
        downloader = self._downloader()
        slot = None if downloader is None else downloader.slots.get(key)
        if slot is not None:
            slot.delay = min(slot.delay, floor.base)
            if floor.jitter is not None:
                _set_jitter(slot, floor.jitter)
        self._recovered.add(floor.domain)
        self.crawler.stats.inc_value("domainstate/polite/recovered")

    # ------------------------------------------------------------ memory

    def prime(self, request: Request, domain: str, read: Callable[[str], DomainStat | None]) -> None:
        """Before a request is sent: its slot starts from the domain's remembered floor. The
        domain's politeness record is read once per crawl (``read``); a domain without one
        costs a dictionary lookup per request."""
        if not self.enabled:
            return
        delay = self._remembered.get(domain, _UNREAD)
        if delay is _UNREAD:
            if len(self._remembered) >= MAX_TRACKED:
                self._remembered.clear()
            delay = self._remembered[domain] = remembered(read(domain), self.clock())
        if delay is None:
            return
        key = self._slot_key(request)
        if key is None or key in self._primed:
            return
        if len(self._primed) >= MAX_TRACKED:
            self._primed.clear()
        self._primed.add(key)
        if key not in self.floors:
            self.crawler.stats.inc_value("domainstate/polite/remembered")
            self.slow(key, domain, min(delay, self.cap))
            self.floors[key].changed = False

    def records(self, now: float) -> tuple[list[DomainStat], list[str]]:
        """The politeness records to write at the end of a crawl, and those to drop."""
        best: dict[str, float] = {}
        for floor in self.floors.values():
            if floor.changed:
                best[floor.domain] = max(best.get(floor.domain, 0.0), floor.delay)
        keep = [polite_record(domain, delay, now, self.ttl) for domain, delay in best.items()]
        drop = [polite_key(d) for d in self._recovered if d not in best]
        return keep, drop


def polite_record(domain: str, delay: float, now: float, ttl: float) -> DomainStat:
    """A domain's politeness record: one entry whose error class holds the learned delay."""
    entry = RecentEntry(now, Method.FETCH, Outcome.NO_VERDICT, None, f"delay={delay:.3f}")
    return DomainStat(
        polite_key(domain),
        State.UNKNOWN,
        [entry],
        first_seen=now,
        last_seen=now,
        state_changed_at=now,
        state_expires_at=now + ttl,
    )


def remembered(record: DomainStat | None, now: float) -> float | None:
    """The delay a politeness record holds, unless it has expired."""
    if record is None or not record.recent:
        return None
    if record.state_expires_at is not None and record.state_expires_at <= now:
        return None
    text = record.recent[-1].error_class or ""
    if not text.startswith("delay="):
        return None
    try:
        delay = float(text[len("delay=") :])
    except ValueError:
        return None
    return delay if math.isfinite(delay) and delay > 0 else None


class HostPauses:
    """Hosts paused for the rest of a crawl after ``after`` timeouts or lost connections in a row."""

    def __init__(self, after: int) -> None:
        self.after = after
        self._streaks: dict[str, int] = {}
        self.paused: set[str] = set()

    def failed(self, host: str, error_class: str | None) -> bool:
        """A failure of a request to ``host``; True when it pauses the host (once)."""
        if not self.after or error_class not in PAUSING:
            self._streaks.pop(host, None)
            return False
        n = self._streaks.get(host, 0) + 1
        if len(self._streaks) >= MAX_TRACKED and host not in self._streaks:
            self._streaks.pop(next(iter(self._streaks)))
        self._streaks[host] = n
        if n >= self.after and host not in self.paused:
            self.paused.add(host)
            return True
        return False

    def pause(self, host: str) -> bool:
        """Pause ``host`` now (a Retry-After past the cap); True the first time."""
        if host in self.paused:
            return False
        self.paused.add(host)
        return True

    def failing(self, host: str) -> bool:
        """The host's last two requests or more failed this way (a server problem, not a page's)."""
        return self._streaks.get(host, 0) >= 2

    @property
    def tracking(self) -> bool:
        """Some host has a failure streak going (only then does a success need its host)."""
        return bool(self._streaks)

    def succeeded(self, host: str) -> None:
        self._streaks.pop(host, None)
