"""One domain as ``scrapy domainstate show`` prints it, for the command, the shell and the API.

:func:`look` reads what a show needs through the store interface (the stored record, the
record with expiry applied, the decision a request gets now, the host facts of a hostname);
:func:`show_lines` turns it into the lines the command prints and the shell's
``domainstate(url)`` and :meth:`~scrapy_domainstate.StoreHandle.show` return. Times in UTC.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from scrapy_domainstate.core.clock import DAY, HOUR, MINUTE
from scrapy_domainstate.core.keys import host_fact_key, part_of
from scrapy_domainstate.core.policy import Decision
from scrapy_domainstate.core.record import DomainStat, State
from scrapy_domainstate.store.codec import MAX_TIME

if TYPE_CHECKING:
    from scrapy_domainstate.store import DomainStore

#: The earliest time shown (1900-01-01; a negative time is a clock's or a file's error).
MAX_TIME_PAST = 2208988800.0

__all__ = [
    "NO_BROWSER_SKIP",
    "Shown",
    "decided_as",
    "decision_text",
    "iso",
    "look",
    "part_label",
    "plural",
    "relative",
    "show_lines",
    "span",
]


def iso(ts: float | None) -> str:
    if ts is None:
        return "never"
    if not ts or math.isnan(ts):  # (0 and NaN: no time)
        return "-"
    # (as a record stores it: clamped to 9999-12-31, which ``--ttl 1e15`` would pass)
    return datetime.fromtimestamp(max(min(ts, MAX_TIME), -MAX_TIME_PAST), tz=timezone.utc).strftime(
        "%Y-%m-%d %H:%M:%S UTC"
    )


def span(seconds: float) -> str:
    """``3d 4h``, ``5m 2s``...: the two largest units."""
    seconds = abs(seconds)
    if seconds < 1:
        return "0s"
    parts: list[str] = []
    for unit, size in (("d", DAY), ("h", HOUR), ("m", MINUTE), ("s", 1.0)):
        if seconds >= size or parts:
            n = int(seconds // size)
            seconds -= n * size
            if n or not parts:
                parts.append(f"{n}{unit}")
        if len(parts) == 2:
            break
    return " ".join(parts)


def relative(ts: float, now: float) -> str:
    return f"in {span(ts - now)}" if ts >= now else f"{span(now - ts)} ago"


def plural(n: int, word: str) -> str:
    """``1 domain``, ``2 domains``, ``1,000 requests``."""
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def part_label(part: tuple[str, str]) -> str:
    """``host of example.com`` or ``items record of example.com``."""
    domain, relation = part
    return f"host of {domain}" if relation == "host" else f"{relation} record of {domain}"


def decided_as(store: DomainStore, key: str, now: float) -> tuple[Decision, State, float | None]:
    """How a request to ``key`` is decided now: a host's facts with its domain's record as the
    prior, a purpose's worth with its site's record (the policy's own combinations)."""
    own = store.decide(key, now)
    part = part_of(key, store.config.per_hostname)
    if part is None:
        return own
    parent = store.decide(part[0], now)
    if part[1] == "host":
        return store.policy.decide_with_host(parent, own)
    return store.policy.decide_with_worth(parent, own)


@dataclass(frozen=True)
class Shown:
    """What a show of one target reads from the store."""

    target: str
    key: str
    now: float
    stored: DomainStat | None
    current: DomainStat
    decision: Decision
    state: State
    expires: float | None
    expired: bool
    corrupt: bool
    #: what the key is part of (:func:`~.keys.part_of`)
    part: tuple[str, str] | None
    #: for a hostname with facts of its own: ``(host, decided by its own facts, decision)``
    host: tuple[str, bool, tuple[Decision, State, float | None]] | None
    #: whether the crawl has a browser route (without one, browser-only is a skip); ``None``:
    #: not known here (the command: the route is the running crawl's start-up check)
    browser: bool | None = None

    @property
    def decision_text(self) -> str:
        """The decision as a crawl takes it: without a browser, a browser-only domain is
        skipped but for each crawl's plain canary."""
        return decision_text(self.decision, self.browser, self.state)


def decision_text(decision: Decision, browser: bool | None = None, state: State | None = None) -> str:
    """The decision as a crawl takes it; ``browser``: whether the crawl has a browser route
    (``None``: not known, both are said)."""
    if decision is not Decision.BROWSER or browser:
        return str(decision)
    canary = "; each crawl's first request is a plain canary" if state is State.ANTIBOT_HARD else ""
    if browser is None:
        return f"{decision} (a crawl without a browser route skips it{canary})"
    return f"{Decision.SKIP} ({NO_BROWSER_SKIP}{canary})"


#: Why a browser-only decision is a skip in a crawl without a browser route.
NO_BROWSER_SKIP = "browser only, and no browser is configured"


def look(store: DomainStore, target: str, key: str, now: float, browser: bool | None = None) -> Shown:
    """Read what :func:`show_lines` prints about ``target`` (whose key is ``key``);
    ``browser``: whether the crawl has a browser route (``None``: not known)."""
    before = store.corrupt_records
    stored = store.get(key)
    current = store.current(key, now)
    decision, state, expires = decided_as(store, key, now)
    per_hostname = store.config.per_hostname
    host = None
    host_key = host_fact_key(target, per_hostname)
    if host_key is not None and host_key != key and store.get(host_key) is not None:
        decided = decided_as(store, host_key, now)
        host = (host_key, decided == store.decide(host_key, now), decided)
    expired = stored is not None and store.policy.is_expired(stored, now)
    corrupt = store.corrupt_records > before
    return Shown(
        target,
        key,
        now,
        stored,
        current,
        decision,
        state,
        expires,
        expired,
        corrupt,
        part_of(key, per_hostname),
        host,
        browser,
    )


def show_lines(shown: Shown) -> list[str]:
    """The lines of ``scrapy domainstate show``."""
    key, now, stored, current = shown.key, shown.now, shown.stored, shown.current
    head = key if shown.target.strip().lower() == key else f"{key}  (key of {shown.target!r})"
    if shown.part is not None:
        head += f"  ({part_label(shown.part)})"
    out = [head]
    if stored is None:
        why = "its record is corrupt and is treated as unknown" if shown.corrupt else "no record: never seen, or swept"
        out.append(f"  {why}")
        out.append(f"  decision now: {shown.decision_text}")
        return out
    out.append(f"  state:        {shown.state}, since {iso(current.state_changed_at)}")
    if shown.expired:
        out.append(
            f"                (stored as {stored.state}, which expired {relative(stored.state_expires_at or 0, now)})"
        )
    if shown.expires is None:
        out.append("  expires:      never (no TTL)")
    else:
        out.append(f"  expires:      {iso(shown.expires)} ({relative(shown.expires, now)})")
    out.append(f"  decision now: {shown.decision_text}")
    out.extend(_record_lines(stored, current, now, shown.expired))
    if shown.host is not None:
        host, own, (decision, state, _) = shown.host
        whose = "by its own facts" if own else f"as {key}: no facts of its own yet"
        out.append(
            f"  host {host}: decided {whose}: {state}; decision now: {decision_text(decision, shown.browser, state)}"
        )
    return out


def _record_lines(stored: DomainStat, current: DomainStat, now: float, expired: bool) -> list[str]:
    out = [
        f"  fetches:      {stored.fetch_total:,} ({stored.fetch_ok:,} ok-contact, {stored.fetch_ok_empty:,} ok-empty)",
        f"  browser tabs: {stored.tab_total:,} ({stored.tab_ok:,} ok-contact)",
        f"  first seen:   {iso(stored.first_seen)}",
        f"  last seen:    {iso(stored.last_seen)} ({relative(stored.last_seen, now)})",
        f"  probed:       {iso(current.probed_at) if current.probed_at else 'not in this period'}",
    ]
    if not stored.recent:
        out.append("  recent:       (none)")
        return out
    note = "; cleared as the expiry is applied" if expired else ""
    out.append(f"  recent ({len(stored.recent)}, oldest first{note}):")
    for e in stored.recent:
        status = "" if e.status is None else str(e.status)
        error = e.error_class or ""
        out.append(f"    {iso(e.at)}  {e.method!s:<5}  {e.outcome!s:<13}  {status:>3}  {error}".rstrip())
    return out
