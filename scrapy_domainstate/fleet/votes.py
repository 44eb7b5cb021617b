"""The reporters' votes and the consensus computed from them.

One vote per ``(domain, reporter)``: :class:`VoteTable` keeps them in SQLite (stdlib,
transactional and crash-safe, and the primary key *is* the one-vote rule);
:func:`compute_consensus` turns a domain's current votes into its verdict (pure).
"""

from __future__ import annotations

import os
import sqlite3
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from scrapy_domainstate.core.clock import DAY
from scrapy_domainstate.core.record import State
from scrapy_domainstate.fleet.files import make_private
from scrapy_domainstate.fleet.protocol import STATES

__all__ = ["Consensus", "Vote", "VoteTable", "compute_consensus"]


@dataclass(frozen=True, slots=True)
class Vote:
    """One reporter's vote on a domain."""

    reporter: str
    state: State
    last_seen: float


@dataclass(frozen=True, slots=True)
class Consensus:
    """A domain's verdict computed from its current votes (see :func:`compute_consensus`)."""

    state: State
    consensus: float
    reporters: int
    agreeing: int
    last_seen: float
    expires_at: float | None

    def as_json(self) -> dict[str, Any]:
        """The verdict as a lookup answers it (what :mod:`.protocol` parses on the client)."""
        return {
            "state": self.state.value,
            "consensus": round(self.consensus, 4),
            "reporters": self.reporters,
            "agreeing": self.agreeing,
            "last_seen": self.last_seen,
            "expires_at": self.expires_at,
        }


def _vote_ttl(state: State, ttl: Mapping[State, float | None], max_vote_age: float) -> float:
    seconds = ttl.get(state)
    return max_vote_age if seconds is None else seconds


def compute_consensus(
    votes: Iterable[Vote], ttl: Mapping[State, float | None], now: float, max_vote_age: float = 90 * DAY
) -> Consensus | None:
    """The verdict of the current votes (one per reporter); ``None`` when none counts.

    A vote counts while ``now - last_seen`` is within its state's TTL (``max_vote_age`` for a
    state without one). The verdict is the most common state (ties: the one seen last),
    ``consensus`` the share of the counting reporters that voted for it, ``last_seen`` the
    newest vote for it and ``expires_at`` when that vote stops counting (``None`` when the
    state has no TTL).
    """
    current: dict[str, Vote] = {}
    for vote in votes:
        if now - vote.last_seen > _vote_ttl(vote.state, ttl, max_vote_age):
            continue
        held = current.get(vote.reporter)
        if held is None or vote.last_seen > held.last_seen:
            current[vote.reporter] = vote
    if not current:
        return None
    # "unknown" is no verdict: such votes count only when there is nothing else.
    current = {r: v for r, v in current.items() if v.state is not State.UNKNOWN} or current
    counts = Counter(v.state for v in current.values())
    newest: dict[State, float] = {}
    for v in current.values():
        newest[v.state] = max(newest.get(v.state, 0.0), v.last_seen)
    state = max(counts, key=lambda s: (counts[s], newest[s], s.value))
    last_seen = newest[state]
    seconds = ttl.get(state)
    return Consensus(
        state=state,
        consensus=counts[state] / len(current),
        reporters=len(current),
        agreeing=counts[state],
        last_seen=last_seen,
        expires_at=None if seconds is None else last_seen + seconds,
    )


class VoteTable:
    """Votes in SQLite: one row per ``(domain, reporter)``.

    ``path=None`` keeps them in memory. Used from the reactor thread only.
    """

    _SCHEMA = """
        CREATE TABLE IF NOT EXISTS votes (
            domain TEXT NOT NULL,
            reporter TEXT NOT NULL,
            state TEXT NOT NULL,
            last_seen REAL NOT NULL,
            received_at REAL NOT NULL,
            evidence TEXT,
            PRIMARY KEY (domain, reporter)
        ) WITHOUT ROWID;
    """
    _UPSERT = """
        INSERT INTO votes (domain, reporter, state, last_seen, received_at, evidence)
        VALUES (?, ?, ?, ?, ?, ?)
        ON CONFLICT (domain, reporter) DO UPDATE SET
            state = excluded.state, last_seen = excluded.last_seen,
            received_at = excluded.received_at, evidence = excluded.evidence
        WHERE excluded.last_seen >= votes.last_seen
    """

    def __init__(self, path: str | None = None) -> None:
        self.path = path
        if path:
            # Private from the start (SQLite gives its -wal/-shm files the same mode).
            os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
            make_private(path, 0o600)
        self._db = sqlite3.connect(path or ":memory:", isolation_level=None)
        if path:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(self._SCHEMA)

    def held(self, reporter: str, domains: Iterable[str]) -> set[str]:
        """Which of ``domains`` ``reporter`` has a vote on."""
        domains = list(domains)
        if not domains:
            return set()
        marks = ",".join("?" * len(domains))
        rows = self._db.execute(
            f"SELECT domain FROM votes WHERE reporter = ? AND domain IN ({marks})", [reporter, *domains]
        )
        return {row[0] for row in rows}

    def count_by(self, reporter: str) -> int:
        return self._db.execute("SELECT COUNT(*) FROM votes WHERE reporter = ?", (reporter,)).fetchone()[0]

    def record(self, reporter: str, reports: Iterable[Mapping[str, Any]], now: float) -> int:
        """Store the reports as ``reporter``'s votes; how many became its current vote.

        A report older than the reporter's current vote on the domain changes nothing.
        """
        db = self._db
        before = db.total_changes
        db.execute("BEGIN IMMEDIATE")
        try:
            db.executemany(
                self._UPSERT,
                [(r["domain"], reporter, r["state"], r["last_seen"], now, r.get("evidence")) for r in reports],
            )
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return db.total_changes - before

    def votes(self, domains: Iterable[str]) -> dict[str, list[Vote]]:
        domains = list(domains)
        out: dict[str, list[Vote]] = {d: [] for d in domains}
        if not domains:
            return out
        marks = ",".join("?" * len(domains))
        rows = self._db.execute(
            f"SELECT domain, reporter, state, last_seen FROM votes WHERE domain IN ({marks})",
            domains,
        )
        for domain, reporter, state, last_seen in rows:
            parsed = STATES.get(state)
            if parsed is not None:
                out[domain].append(Vote(reporter, parsed, last_seen))
        return out

    def prune(self, ttl: Mapping[State, float | None], now: float, max_vote_age: float) -> int:
        """Delete the votes that no longer count."""
        before = self._db.total_changes
        for state in State:
            self._db.execute(
                "DELETE FROM votes WHERE state = ? AND last_seen < ?",
                (state.value, now - _vote_ttl(state, ttl, max_vote_age)),
            )
        return self._db.total_changes - before

    def count(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM votes").fetchone()[0]

    def count_domains(self) -> int:
        return self._db.execute("SELECT COUNT(DISTINCT domain) FROM votes").fetchone()[0]

    def close(self) -> None:
        self._db.close()
