"""The one store interface: LMDB, Redis and memory stores implement it.

A store keeps :class:`~scrapy_domainstate.core.record.DomainStat` records by domain
key and the URL-level dead table. Writes of outcomes are buffered: :meth:`record`
applies the outcome to this process's view at once (so the next decision and the
transition signal see it), and :meth:`flush` writes the buffered *entries* in one
batch, re-applying each to the record as it is in the backend at that moment, so
that several processes recording outcomes for the same domain lose nothing.

Subclasses implement the ``_load``/``_write_batch``/... primitives; the buffering,
the flush triggers and the corrupt-record handling live here once.
"""

from __future__ import annotations

import itertools
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.policy import Decision, Policy, Transition
from scrapy_domainstate.core.record import DomainStat, RecentEntry, State
from scrapy_domainstate.store.codec import RecordError, decode_decision

__all__ = ["DomainStore", "StoreError"]

logger = logging.getLogger(__name__)

#: Decisions served from memory (see DomainStore.decide), at most this many: the domains a
#: crawl is working through. A full memo forgets its DECIDED_DROP oldest (tens of us).
DECIDED_MAX = 4096
DECIDED_DROP = 256


class StoreError(RuntimeError):
    """The backend failed (I/O, connection). Callers degrade, never crash a crawl."""


class DomainStore(ABC):
    """Base class of every store. Not thread-safe: one per crawler thread."""

    #: A short name for logs and the ``scrapy domainstate stats`` output.
    name = "store"
    #: Seconds a decision read from the store is served from memory (see :meth:`decide`): what
    #: another process writes reaches this one's decisions within this long. ``0``: never.
    decision_memo_seconds = 0.0

    def __init__(self, config: Config | None = None, policy: Policy | None = None) -> None:
        if config is not None and not isinstance(config, Config):
            raise TypeError(
                f"{type(self).__name__}() takes a Config, got {config!r}; to open a store by its path "
                "or settings, use scrapy_domainstate.open_store(path_or_settings)"
            )
        self.config = config or Config()
        self.policy = policy or Policy(self.config)
        self._pending: dict[str, list[RecentEntry]] = {}
        self._view: dict[str, DomainStat] = {}
        self._n_pending = 0
        self._oldest_pending = 0.0
        self.corrupt_records = 0
        self._warned_corrupt = False
        self.evicted = 0
        #: Buffered outcomes dropped because the backend kept failing (see _trim_buffer).
        self.dropped = 0
        self._logs: dict[str, list[str]] = {}
        #: domain -> (its decision, read at, valid until): see decide.
        self._decided: dict[str, tuple[tuple[Decision, State, float | None], float, float]] = {}

    # ---------------------------------------------------------- lifecycle

    def open(self, readonly: bool = False) -> None:  # noqa: B027 - optional hook
        """Acquire the backend (called at ``spider_opened``, never at import).

        ``readonly=True`` asks a store that can to never write (LMDB: nor create a
        database); the others ignore it.
        """

    def locate(self, create: bool) -> None:  # noqa: B027 - optional hook
        """Check, before :meth:`open`, that the store is there; ``create``: it may be made.

        Raises :class:`StoreError` naming what is missing (LMDB: a database directory
        with no ``data.mdb``, when ``create`` is false). Creates nothing.
        """

    def close(self) -> None:
        """Flush and release the backend."""
        self.flush()

    def describe(self) -> str:
        return self.name

    # ---------------------------------------------------------- side logs

    def append_log(self, name: str, line: str, keep: int) -> None:
        """Add ``line`` to the store's log ``name`` (e.g. the crawl log), keeping the last ``keep``.

        A store keeps its logs beside its records (LMDB: a file in its directory, Redis: a
        list); this default keeps them in memory, for the store's lifetime. May raise.
        """
        log = self._logs.setdefault(name, [])
        log.append(line)
        del log[:-keep]

    def read_log(self, name: str, keep: int) -> list[str]:
        """The log ``name``, oldest line first (at most the last ``keep``). May raise."""
        return list(self._logs.get(name, ()))[-keep:]

    def write_behind(self, schedule: Callable[[Callable[[], None]], object]) -> bool:
        """Write flushes off the calling thread from now on, if the store can; ``schedule(fn)``
        runs ``fn`` on the calling thread. ``False``: flushes stay synchronous (the default)."""
        return False

    # --------------------------------------------------- backend primitives

    @abstractmethod
    def _load_raw(self, domain: str) -> DomainStat | None:
        """Read one record from the backend; may raise RecordError."""

    @abstractmethod
    def _write_batch(self, batch: dict[str, list[RecentEntry]]) -> dict[str, DomainStat]:
        """Atomically apply the entries to the backend records; return the results."""

    @abstractmethod
    def _put(self, stat: DomainStat) -> None:
        """Overwrite one record (operators and imports)."""

    @abstractmethod
    def _delete(self, domain: str) -> bool: ...

    @abstractmethod
    def _clear(self) -> int: ...

    @abstractmethod
    def iter_records(self) -> Iterator[DomainStat]:
        """Every stored record, as stored (expiry not applied). Corrupt ones are skipped."""

    @abstractmethod
    def count(self) -> int: ...

    @abstractmethod
    def url_dead_until(self, fingerprint: str) -> float | None:
        """When the URL-level dead mark of this request fingerprint expires, if any."""

    @abstractmethod
    def mark_url_dead(self, fingerprint: str, until: float) -> None: ...

    # ------------------------------------------------------------ reading

    def _load(self, domain: str) -> DomainStat | None:
        try:
            return self._load_raw(domain)
        except RecordError as exc:
            self._note_corrupt(domain, exc)
            return None

    def _note_corrupt(self, domain: str, exc: Exception) -> None:
        """Count an undecodable record (treated as unknown); warn once per store."""
        self.corrupt_records += 1
        if not self._warned_corrupt:
            self._warned_corrupt = True
            logger.warning(
                "Corrupt domainstate record for %s in %s (%s): treating it as unknown",
                domain,
                self.describe(),
                exc,
            )

    def get(self, domain: str) -> DomainStat | None:
        """The record as this process sees it (stored, plus its pending outcomes)."""
        view = self._view.get(domain)
        return view if view is not None else self._load(domain)

    def current(self, domain: str, now: float) -> DomainStat:
        """The record at ``now``: a new one if missing, expiry applied."""
        return self.policy.current(self.get(domain), domain, now)

    def prefetch(self, domains: tuple[str, ...]) -> Any:
        """``None`` when :meth:`decide` answers for these keys without a network round trip;
        else a Deferred that fires once it does (a store with a read cache fills it off the
        reactor thread). Local stores read at once: ``None``."""
        return None

    def decide(self, domain: str, now: float) -> tuple[Decision, State, float | None]:
        """``(decision, state, state_expires_at)`` for a request to ``domain`` at ``now``.

        The one decision of every store (the hot path: a few microseconds). The rule is the
        policy's (:meth:`Policy.header_decision` on a record's header, :meth:`Policy.decision`
        on a whole one); a store only says where the record comes from, with two hooks:

        - :meth:`_record_for_decide`: this process's view of the domain (a
          :class:`DomainStat`), its stored encoding (``bytes``: only the fixed header is
          decoded while the state holds), or ``None`` (not stored: decided as a new domain);
        - :meth:`_current_for_decide`: the whole record at ``now``, when the stored header's
          state has expired or was stamped by a clock that ran ahead.

        A corrupt header counts as corrupt (:meth:`_note_corrupt`) and decides as unknown. A
        record whose header is intact but whose tail is damaged is decided from its header;
        the damage is reported when it is next fully read.

        With :attr:`decision_memo_seconds` (LMDB), a decision of a state not expired (from a
        stored header, or from the view of a domain with pending outcomes) is then served from
        memory until the state expires or for that long, whichever comes first, at most
        :data:`DECIDED_MAX` domains. This process's own writes invalidate it (an outcome
        recorded for the domain that moves a field the decision reads: the state, its change
        and expiry times, ``probed_at``, whether it needs the browser; ``put``, ``delete``,
        ``clear``, ``sweep``); another process's verdicts arrive within the bound.
        """
        memo = self._decided.get(domain)
        if memo is not None and memo[1] <= now < memo[2]:
            return memo[0]
        found = self._record_for_decide(domain, now)
        policy = self.policy
        if found is None or isinstance(found, DomainStat):  # not stored, or this process's view
            decided = policy.decision(found, domain, now)
            if found is not None and self.decision_memo_seconds and policy.stands(found, now):
                self._memo_decision(domain, decided, now)
            return decided
        try:
            state, expires, changed, probed, browser = decode_decision(found)
        except RecordError as exc:
            self._note_corrupt(domain, exc)
            return policy.decision(None, domain, now)
        header = policy.header_decision(state, expires, changed, probed, browser, now)
        if header is not None:
            if self.decision_memo_seconds:
                self._memo_decision(domain, header, now)
            return header
        return policy.decision(self._current_for_decide(domain, found, now), domain, now)

    def _record_for_decide(self, domain: str, now: float) -> DomainStat | bytes | None:
        """Hook of :meth:`decide`: where the domain's record comes from.

        This process's view when it has one (pending outcomes), else the stored record: as
        its encoding (``bytes``, of :func:`~scrapy_domainstate.store.codec.encode`) when the
        store reads bytes, so that :meth:`decide` decodes only its header, or decoded. ``None``
        when not stored (or unreadable: the store degrades to "unknown"). Must not raise.
        This default: :meth:`get` (inlined: a call less on the hot path).
        """
        view = self._view.get(domain)
        return view if view is not None else self._load(domain)

    def _current_for_decide(self, domain: str, raw: bytes, now: float) -> DomainStat | None:
        """Hook of :meth:`decide`: the whole record at ``now`` (:meth:`Policy.current`) when the
        header of ``raw`` (what :meth:`_record_for_decide` returned) is not enough; ``None``:
        decided as unknown (e.g. a corrupt tail, counted by :meth:`_load`). This default
        reads it again through :meth:`_load` (which a store may serve from memory)."""
        stat = self._load(domain)
        return None if stat is None else self.policy.current(stat, domain, now)

    def _memo_decision(self, domain: str, decided: tuple[Decision, State, float | None], now: float) -> None:
        """Serve ``decided`` (of a state not expired at ``now``: the decision does not depend on
        the time until it expires) for the next :attr:`decision_memo_seconds` at most."""
        expires = decided[2]
        until = now + self.decision_memo_seconds
        memo_map = self._decided
        if len(memo_map) >= DECIDED_MAX:
            for old in list(itertools.islice(memo_map, DECIDED_DROP)):
                del memo_map[old]
        memo_map[domain] = (decided, now, until if expires is None or expires > until else expires)

    # ------------------------------------------------------------ writing

    def record(self, domain: str, entry: RecentEntry) -> tuple[DomainStat, Transition | None]:
        """Apply an observation now (locally) and buffer it for the next flush."""
        memo = self._decided.pop(domain, None)
        old = self.get(domain)
        stat, transition = self.policy.observe(old, domain, entry)
        if (
            memo is not None
            and old is not None
            and stat.state is old.state
            and stat.state_expires_at == old.state_expires_at
            and stat.state_changed_at == old.state_changed_at
            and stat.probed_at == old.probed_at
            and bool(stat.browser_since) is bool(old.browser_since)
        ):
            # The fields a decision reads did not move (a friendly domain's page, most of a
            # crawl): the memo still answers, within the bound it was given.
            self._decided[domain] = memo
        self._view[domain] = stat
        pending = self._pending.get(domain)
        if pending is None:
            self._pending[domain] = [entry]
        else:
            pending.append(entry)
        now = time.monotonic()
        if not self._n_pending:
            self._oldest_pending = now
        self._n_pending += 1
        config = self.config
        if self._n_pending >= config.flush_size or now - self._oldest_pending >= config.flush_interval:
            self.flush()
        return stat, transition

    @property
    def pending(self) -> int:
        return self._n_pending

    def flush(self) -> int:
        """Write buffered outcomes in one batch. On failure they stay buffered."""
        if not self._pending:
            return 0
        batch, n = self._pending, self._n_pending
        self._pending, self._n_pending = {}, 0
        try:
            self._write_batch(batch)
        except BaseException:
            # Put them back in front of anything recorded meanwhile: nothing is lost.
            for domain, entries in self._pending.items():
                batch.setdefault(domain, []).extend(entries)
            self._pending, self._n_pending = batch, n + self._n_pending
            raise
        for domain in batch:
            if domain not in self._pending:
                self._view.pop(domain, None)
        return n

    def put(self, stat: DomainStat) -> None:
        """Overwrite a record, dropping this process's pending outcomes for it."""
        self._discard_pending(stat.domain)
        self._put(stat)

    def put_many(self, stats: Iterable[DomainStat]) -> int:
        """Overwrite many records; stores override it to write them in one transaction."""
        n = 0
        for stat in stats:
            self.put(stat)
            n += 1
        return n

    def delete(self, domain: str) -> bool:
        self._discard_pending(domain)
        return self._delete(domain)

    def clear(self) -> int:
        self._pending, self._view, self._n_pending = {}, {}, 0
        self._decided.clear()
        return self._clear()

    def set_state(self, domain: str, state: State, now: float, ttl: float | None = -1.0) -> DomainStat:
        """Force a domain's state (``ttl=-1``: the state's default TTL)."""
        self.flush()
        stat = self.policy.set_state(self.current(domain, now), state, now, ttl)
        self.put(stat)
        return stat

    #: Buffered outcomes kept while the backend fails; the oldest beyond it are dropped.
    max_buffered = 100_000
    #: True while :meth:`_record_buffering` runs: a store's flush then keeps a failed batch
    #: buffered instead of raising.
    _auto_flush = False

    def _record_buffering(self, domain: str, entry: RecentEntry) -> tuple[DomainStat, Transition | None]:
        """:meth:`record` for stores that buffer while their backend fails: the flush it
        triggers never raises, and the buffer stays within :attr:`max_buffered`."""
        self._auto_flush = True
        try:
            result = DomainStore.record(self, domain, entry)
        finally:
            self._auto_flush = False
        if self._n_pending > self.max_buffered:
            self._trim_buffer()
        return result

    def _trim_buffer(self) -> None:
        """Drop the oldest buffered outcomes (first-buffered domains first) down to 90 % of
        :attr:`max_buffered`; counted in ``dropped``, with a warning."""
        target = int(self.max_buffered * 0.9)
        excess = self._n_pending - target
        if excess <= 0:
            return
        dropped = 0
        for domain in list(self._pending):
            entries = self._pending[domain]
            k = min(len(entries), excess - dropped)
            if k == len(entries):
                del self._pending[domain]
                self._view.pop(domain, None)
            else:
                del entries[:k]
            dropped += k
            if dropped >= excess:
                break
        self._n_pending -= dropped
        self.dropped += dropped
        logger.warning(
            "scrapy-domainstate: %s failing and %d outcomes buffered: dropped the %d oldest (%d dropped in total)",
            self.describe(),
            self._n_pending + dropped,
            dropped,
            self.dropped,
        )

    def _discard_pending(self, domain: str) -> None:
        self._decided.pop(domain, None)
        self._n_pending -= len(self._pending.pop(domain, ()))
        self._view.pop(domain, None)

    # ------------------------------------------------------- maintenance

    def sweep(self, now: float) -> int:
        """Drop every record whose state has expired; returns how many."""
        self.flush()
        self._decided.clear()
        expired = [s.domain for s in self.iter_records() if self.policy.is_expired(s, now)]
        for domain in expired:
            self._delete(domain)
        return len(expired)

    def __enter__(self) -> DomainStore:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def apply_entries(policy: Policy, stat: DomainStat | None, domain: str, entries: list[RecentEntry]) -> DomainStat:
    """Re-apply buffered entries to a backend record (used inside write transactions)."""
    for entry in entries:
        stat, _ = policy.observe(stat, domain, entry, rebase=False)
    assert stat is not None
    return stat
