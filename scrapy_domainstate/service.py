"""The reference shared domain-state service (docs/SPEC.md section 7), on Twisted.

Run it with ``scrapy domainstate serve`` or ``python -m scrapy_domainstate.service``; the
API is described in ``docs/openapi.yaml``:

* ``GET /api/scrape/domain-state?domains=a.com,b.com`` answers the fleet's verdict on up to
  100 domains: ``{"domains": {"a.com": {"state", "consensus", "reporters", "agreeing",
  "last_seen", "expires_at"}}}``; domains without a current vote are left out.
* ``POST /api/scrape/domain-state`` with ``{"reports": [{"domain", "state", "last_seen",
  "evidence"?}]}`` (at most 100 reports, 64 KiB) records the caller's votes:
  ``{"accepted": n}``.
* ``GET /api/scrape/stats``: request counters (for operators and tests).

Every call needs ``Authorization: Bearer <token>``; the token names the reporter
(server-side table), never the body. Each reporter has one vote per domain: a newer report
replaces its earlier vote. A domain's verdict is computed from the distinct reporters'
current votes (a vote older than its state's TTL no longer counts): the most common state,
the share of reporters agreeing with it (``consensus``) and the number of reporters.

Storage: the votes live in SQLite (stdlib, transactional and crash-safe, and the
``(domain, reporter)`` primary key *is* the one-vote rule); after each report the
consensus of every domain it touched is written, as a :class:`DomainStat`, into a
:class:`DomainStore` (LMDB by default), where ``scrapy domainstate show/export/stats``
can inspect it. Lookups are computed from the votes, so vote ageing is exact.
Every input is validated; errors are JSON ``{"error": "...", "field": "..."}`` with a
400, 401, 404, 405, 413, 415 or 429 (with ``Retry-After``) status; connections are
bounded and must send their request within deadlines (see :class:`Limits`).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import io
import json
import logging
import math
import os
import sqlite3
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from twisted.internet.error import CannotListenError
from twisted.web import http, server
from twisted.web.resource import Resource

from .config import DAY, Config, ConfigError
from .record import DomainStat, State
from .remote import API_PATH, MAX_BATCH, MAX_EVIDENCE, MAX_SKEW, is_domain_key
from .store import DomainStore, MemoryStore, StoreError, create_store

__all__ = [
    "STATS_PATH",
    "ApiError",
    "Consensus",
    "DomainStateService",
    "Limits",
    "VoteTable",
    "compute_consensus",
    "load_tokens",
    "main",
    "make_site",
    "serve",
]

logger = logging.getLogger(__name__)

STATS_PATH = "/api/scrape/stats"
_JSON = b"application/json; charset=utf-8"
_STATES = {s.value: s for s in State}
_REPORT_FIELDS = frozenset({"domain", "state", "last_seen", "evidence"})


@dataclass(frozen=True)
class Limits:
    """What one request may hold."""

    max_domains: int = MAX_BATCH
    max_reports: int = MAX_BATCH
    max_body: int = 64 * 1024
    #: Seconds a report's ``last_seen`` may lie in the future.
    max_skew: float = MAX_SKEW
    max_evidence: int = MAX_EVIDENCE
    #: Age after which a vote for a state without TTL (``friendly``) stops counting.
    max_vote_age: float = 90 * DAY
    #: Open connections at most (lowered to the open-file limit minus a reserve at start).
    max_connections: int = 512
    #: Connections waiting for a request's bytes (slow or idle clients) at most: beyond it,
    #: the one waiting longest is closed.
    max_waiting: int = 256
    #: Seconds a client has to send a request's headers, then its body.
    header_timeout: float = 10.0
    body_timeout: float = 10.0
    #: Seconds an idle keep-alive connection is kept.
    idle_timeout: float = 30.0


class ApiError(Exception):
    """A request the service refuses: HTTP status, message, offending field."""

    def __init__(self, status: int, message: str, field: str | None = None, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field
        #: Seconds for a ``Retry-After`` header (429).
        self.retry_after = retry_after


# ------------------------------------------------------------------ votes


@dataclass(frozen=True, slots=True)
class Vote:
    reporter: str
    state: State
    last_seen: float


@dataclass(frozen=True, slots=True)
class Consensus:
    state: State
    consensus: float
    reporters: int
    agreeing: int
    last_seen: float
    expires_at: float | None

    def as_json(self) -> dict[str, Any]:
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
            _private(path, 0o600)
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
            parsed = _STATES.get(state)
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


# -------------------------------------------------------------- validation


def _number(value: object) -> float | None:
    """A finite float, or ``None`` (wrong type, NaN, infinite, or too large for a float)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:  # an integer of hundreds of digits
        return None
    return value if math.isfinite(value) else None


def _is_text(value: str) -> bool:
    """Whether ``value`` is valid Unicode text (JSON escapes can make lone surrogates)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def parse_domains(query: bytes, limits: Limits) -> list[str]:
    """The domains of a lookup query string; raises :class:`ApiError`."""
    try:
        text = query.decode("ascii")
        params = parse_qsl(text, keep_blank_values=True, strict_parsing=bool(text), max_num_fields=8)
    except (UnicodeDecodeError, ValueError):
        raise ApiError(400, "malformed query string", "domains") from None
    names = [name for name, _ in params]
    for name in names:
        if name != "domains":
            raise ApiError(400, f"unknown query parameter {name!r}", name)
    if not names:
        raise ApiError(400, "missing query parameter 'domains'", "domains")
    if len(names) > 1:
        raise ApiError(400, "give 'domains' once, as a comma-separated list", "domains")
    domains = params[0][1].split(",")
    if len(domains) > limits.max_domains:
        raise ApiError(400, f"too many domains: at most {limits.max_domains} per request", "domains")
    for i, domain in enumerate(domains):
        if not is_domain_key(domain):
            raise ApiError(
                400,
                f"not a domain key: {domain[:80]!r} (lowercase LDH labels, xn-- for IDNs, or an IP address)",
                f"domains[{i}]",
            )
    return list(dict.fromkeys(domains))


def parse_reports(body: bytes, limits: Limits, now: float) -> list[dict[str, Any]]:
    """The validated reports of a POST body; raises :class:`ApiError`."""
    try:
        data = json.loads(body.decode("utf-8"), parse_constant=_reject_constant, object_pairs_hook=_no_duplicates)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ApiError(400, f"malformed JSON: {exc}"[:300]) from None
    if not isinstance(data, dict):
        raise ApiError(400, 'the body must be a JSON object {"reports": [...]}')
    for key in data:
        if key != "reports":
            raise ApiError(400, f"unknown field {key[:80]!r}", key[:80])
    reports = data.get("reports")
    if not isinstance(reports, list):
        raise ApiError(400, "'reports' must be an array", "reports")
    if not reports:
        raise ApiError(400, "'reports' must not be empty", "reports")
    if len(reports) > limits.max_reports:
        raise ApiError(400, f"too many reports: at most {limits.max_reports} per request", "reports")
    out = []
    for i, report in enumerate(reports):
        where = f"reports[{i}]"
        if not isinstance(report, dict):
            raise ApiError(400, "a report must be an object", where)
        for key in report:
            if key not in _REPORT_FIELDS:
                raise ApiError(400, f"unknown field {key[:80]!r} (the reporter comes from the token)", f"{where}.{key}")
        domain = report.get("domain")
        if not isinstance(domain, str):
            raise ApiError(400, "'domain' must be a string", f"{where}.domain")
        if not is_domain_key(domain):
            raise ApiError(400, f"not a domain key: {domain[:80]!r}", f"{where}.domain")
        state = report.get("state")
        if not isinstance(state, str):
            raise ApiError(400, "'state' must be a string", f"{where}.state")
        if state not in _STATES:
            raise ApiError(400, f"unknown state {state[:40]!r}; one of {', '.join(_STATES)}", f"{where}.state")
        last_seen = _number(report.get("last_seen"))
        if last_seen is None:
            raise ApiError(400, "'last_seen' must be a finite number (epoch seconds)", f"{where}.last_seen")
        if last_seen <= 0:
            raise ApiError(400, "'last_seen' must be positive (epoch seconds)", f"{where}.last_seen")
        if last_seen > now + limits.max_skew:
            raise ApiError(400, "'last_seen' is in the future", f"{where}.last_seen")
        evidence = report.get("evidence")
        if evidence is not None:
            if not isinstance(evidence, str):
                raise ApiError(400, "'evidence' must be a string", f"{where}.evidence")
            if not _is_text(evidence):
                raise ApiError(400, "'evidence' is not valid Unicode text (a lone surrogate)", f"{where}.evidence")
            if len(evidence) > limits.max_evidence:
                raise ApiError(400, f"'evidence' is longer than {limits.max_evidence} characters", f"{where}.evidence")
            if any(ord(c) < 32 or ord(c) == 127 for c in evidence):
                raise ApiError(400, "'evidence' holds control characters", f"{where}.evidence")
        out.append({"domain": domain, "state": state, "last_seen": last_seen, "evidence": evidence})
    return out


# ----------------------------------------------------------------- service


class DomainStateService:
    """The API's logic, independent of HTTP: authentication, lookups, reports."""

    def __init__(
        self,
        tokens: Mapping[str, str],
        votes: VoteTable,
        store: DomainStore,
        *,
        config: Config | None = None,
        limits: Limits | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not tokens:
            raise ConfigError("the domain-state service needs at least one token")
        for token, reporter in tokens.items():
            if not isinstance(token, str) or not token or not isinstance(reporter, str) or not reporter:
                raise ConfigError("tokens must map non-empty token strings to non-empty reporter ids")
        self._tokens = {_digest(t): r for t, r in tokens.items()}
        self.votes = votes
        self.store = store
        self.config = config or store.config
        self.limits = limits or Limits()
        self.clock = clock
        self.counters: Counter[str] = Counter()
        #: reporter -> (tokens, monotonic time of the last refill): DOMAINSTATE_SERVICE_RATE.
        self._buckets: dict[str, tuple[float, float]] = {}
        #: reporter -> votes held (DOMAINSTATE_SERVICE_QUOTA), counted on first use.
        self._held: dict[str, int] = {}
        self.monotonic: Callable[[], float] = time.monotonic

    def check_rate(self, reporter: str) -> None:
        """Take one request from ``reporter``'s bucket (``DOMAINSTATE_SERVICE_RATE`` a
        second, bursts of 10 seconds' worth); raises 429 with ``Retry-After`` when empty."""
        rate = self.config.service_rate
        if not rate:
            return
        now = self.monotonic()
        burst = max(rate * 10.0, 1.0)
        tokens, last = self._buckets.get(reporter, (burst, now))
        tokens = min(burst, tokens + (now - last) * rate)
        if tokens < 1.0:
            self._buckets[reporter] = (tokens, now)
            wait = max(1, math.ceil((1.0 - tokens) / rate))
            self.counters["rate_limited"] += 1
            raise ApiError(
                429, f"too many requests: at most {rate:g} a second per reporter", "Authorization", retry_after=wait
            )
        self._buckets[reporter] = (tokens - 1.0, now)

    def _check_quota(self, reporter: str, reports: list[dict[str, Any]]) -> int:
        """The number of votes ``reporter`` holds after these reports; raises 429 beyond
        ``DOMAINSTATE_SERVICE_QUOTA`` (a newer vote on a domain it already voted on is free)."""
        held = self._held.get(reporter)
        if held is None:
            held = self._held[reporter] = self.votes.count_by(reporter)
        domains = {r["domain"] for r in reports}
        new = len(domains - self.votes.held(reporter, domains))
        quota = self.config.service_quota
        if quota and held + new > quota:
            self.counters["over_quota"] += 1
            raise ApiError(
                429,
                f"storage quota: this reporter holds {held:,} votes, at most {quota:,}; "
                "they free up as they expire (or report on domains already voted on)",
                "reports",
                retry_after=3600,
            )
        return held + new

    def authenticate(self, header: bytes | None) -> str:
        """The reporter id of an ``Authorization`` header; raises 401."""
        if not header:
            raise ApiError(401, "missing 'Authorization: Bearer <token>'", "Authorization")
        scheme, _, token = header.partition(b" ")
        if scheme.lower() != b"bearer" or not token.strip():
            raise ApiError(401, "use 'Authorization: Bearer <token>'", "Authorization")
        reporter = self._tokens.get(_digest(token.strip()))
        if reporter is None:
            raise ApiError(401, "invalid token", "Authorization")
        return reporter

    def lookup(self, domains: list[str]) -> dict[str, Any]:
        now = self.clock()
        answers = {}
        for domain, votes in self.votes.votes(domains).items():
            verdict = compute_consensus(votes, self.config.ttl, now, self.limits.max_vote_age)
            if verdict is not None:
                answers[domain] = verdict.as_json()
        self.counters["domains_looked_up"] += len(domains)
        self.counters["domains_known"] += len(answers)
        return {"domains": answers}

    def report(self, reporter: str, reports: list[dict[str, Any]]) -> dict[str, Any]:
        now = self.clock()
        held = self._check_quota(reporter, reports)
        accepted = self.votes.record(reporter, reports, now)
        self._held[reporter] = held
        self.counters["reports_received"] += len(reports)
        self.counters["reports_accepted"] += accepted
        self._mirror({r["domain"] for r in reports}, now)
        return {"accepted": accepted}

    def _mirror(self, domains: set[str], now: float) -> None:
        """Write the consensus of ``domains`` into the store (best effort)."""
        try:
            for domain, votes in self.votes.votes(sorted(domains)).items():
                verdict = compute_consensus(votes, self.config.ttl, now, self.limits.max_vote_age)
                if verdict is None:
                    self.store.delete(domain)
                    continue
                stat = self.store.get(domain)
                stat = DomainStat(domain, first_seen=verdict.last_seen) if stat is None else stat.copy()
                if stat.state is not verdict.state:
                    stat.state = verdict.state
                    stat.state_changed_at = now
                stat.last_seen = verdict.last_seen
                stat.state_expires_at = verdict.expires_at
                self.store.put(stat)
        except Exception:
            self.counters["store_errors"] += 1
            logger.warning("could not write the consensus records to %s", self.store.describe(), exc_info=True)

    def prune(self) -> int:
        self._held.clear()  # recounted on next use
        return self.votes.prune(self.config.ttl, self.clock(), self.limits.max_vote_age)

    def stats(self) -> dict[str, Any]:
        return {
            "requests": {k[4:]: v for k, v in sorted(self.counters.items()) if k.startswith("req/")},
            "errors": {k[4:]: v for k, v in sorted(self.counters.items()) if k.startswith("err/")},
            "counters": {k: v for k, v in sorted(self.counters.items()) if "/" not in k},
            "votes": self.votes.count(),
            "domains": self.votes.count_domains(),
        }

    def close(self) -> None:
        try:
            self.store.close()
        finally:
            self.votes.close()


def _digest(token: str | bytes) -> bytes:
    data = token.encode("utf-8") if isinstance(token, str) else token
    return hashlib.sha256(data).digest()


# -------------------------------------------------------------------- HTTP


class _Request(server.Request):
    """A request that keeps at most ``max_body`` bytes of its body (the rest is dropped)."""

    max_body = Limits().max_body

    def gotLength(self, length: int | None) -> None:
        self.body_size = 0
        self.body_too_large = length is not None and length > self.max_body
        self.content = io.BytesIO()  # never more than max_body bytes: no temporary file

    def handleContentChunk(self, data: bytes) -> None:
        if self.body_too_large:
            return
        self.body_size += len(data)
        if self.body_size > self.max_body:
            self.body_too_large = True
            self.content.seek(0)
            self.content.truncate()
            return
        super().handleContentChunk(data)


class _Api(Resource):
    isLeaf = True

    def __init__(self, service: DomainStateService) -> None:
        super().__init__()
        self.service = service

    def render(self, request: server.Request) -> bytes:
        service = self.service
        try:
            status, payload = self._handle(request)
        except ApiError as exc:
            status, payload = exc.status, {"error": exc.message, "field": exc.field}
            service.counters[f"err/{status}"] += 1
            if status == 401:
                request.setHeader(b"WWW-Authenticate", b'Bearer realm="domainstate"')
            if exc.retry_after is not None:
                request.setHeader(b"Retry-After", str(exc.retry_after).encode())
        except Exception:
            logger.exception("domain-state service: internal error")
            status, payload = 500, {"error": "internal error", "field": None}
            service.counters["err/500"] += 1
        request.setResponseCode(status)
        request.setHeader(b"Content-Type", _JSON)
        request.setHeader(b"Cache-Control", b"no-store")
        return json.dumps(payload, separators=(",", ":")).encode("utf-8")

    def _handle(self, request: server.Request) -> tuple[int, dict[str, Any]]:
        service = self.service
        path, _, query = request.uri.partition(b"?")
        method = request.method
        if path == API_PATH.encode():
            allowed = (b"GET", b"POST")
        elif path == STATS_PATH.encode():
            allowed = (b"GET",)
        else:
            raise ApiError(404, "no such resource")
        if method not in allowed:
            request.setHeader(b"Allow", b", ".join(allowed))
            raise ApiError(405, f"method not allowed; use {' or '.join(m.decode() for m in allowed)}")
        reporter = service.authenticate(request.getHeader(b"Authorization"))
        service.check_rate(reporter)
        if path == STATS_PATH.encode():
            service.counters["req/stats"] += 1
            return 200, service.stats()
        if method == b"GET":
            service.counters["req/lookup"] += 1
            return 200, service.lookup(parse_domains(query, service.limits))
        service.counters["req/report"] += 1
        content_type = (request.getHeader(b"Content-Type") or b"").decode("latin-1")
        media, *params = (p.strip().lower() for p in content_type.split(";"))
        charset = next((p.partition("=")[2].strip('"') for p in params if p.startswith("charset=")), "utf-8")
        if media != "application/json" or charset not in ("utf-8", "utf8"):
            raise ApiError(415, "the body must be 'application/json' (UTF-8)", "Content-Type")
        if getattr(request, "body_too_large", False):
            raise ApiError(413, f"the body is larger than {service.limits.max_body} bytes", "body")
        request.content.seek(0)
        body = request.content.read(service.limits.max_body + 1)
        if len(body) > service.limits.max_body:
            raise ApiError(413, f"the body is larger than {service.limits.max_body} bytes", "body")
        reports = parse_reports(body, service.limits, service.clock())
        return 200, service.report(reporter, reports)


class _Channel(http.HTTPChannel):
    """A connection with deadlines: the headers of a request within ``header_timeout``, its
    body within ``body_timeout`` more (a client sending a byte now and then cannot hold a
    connection for ever), the next request of a kept-alive one within ``idle_timeout``."""

    # 100 domains of 253 characters fit in the request line.
    MAX_LENGTH = 64 * 1024
    totalHeadersSize = 64 * 1024
    site: _Site
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
        if self.transport is not None:
            self.transport.abortConnection()

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


class _Site(server.Site):
    """Bounds the connections, so slow clients cannot hold every file descriptor.

    At most ``max_connections`` open: a new connection beyond closes the one waiting longest
    for a request's bytes (or is refused when none waits). At most ``max_waiting`` waiting:
    beyond, the longest waiting are closed :attr:`sweep_delay` seconds later (time for a
    client that sends its request at once to have it read, so a fast client is never
    closed for slow ones).
    """

    protocol = _Channel
    limits = Limits()
    service: DomainStateService
    sweep_delay = 0.25

    def startFactory(self) -> None:
        super().startFactory()
        self._init_bounds()

    def _init_bounds(self) -> None:
        self.channels: set[_Channel] = set()
        #: Channels waiting for bytes, the longest waiting first.
        self.waiting: dict[_Channel, None] = {}
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
        if oldest.transport is not None:
            oldest.transport.abortConnection()
        return True

    def _sweep_waiting(self) -> None:
        self._sweep = None
        while len(self.waiting) > self.limits.max_waiting:
            self._evict_waiting()

    def waiting_for(self, channel: _Channel) -> None:
        self.channels.add(channel)
        self.waiting.pop(channel, None)
        self.waiting[channel] = None
        if len(self.waiting) > self.limits.max_waiting and self._sweep is None:
            self._sweep = self.reactor.callLater(self.sweep_delay, self._sweep_waiting)

    def busy(self, channel: _Channel) -> None:
        self.waiting.pop(channel, None)

    def closed(self, channel: _Channel) -> None:
        self.channels.discard(channel)
        self.waiting.pop(channel, None)

    def log(self, request: Any) -> None:  # no access log: it would hold the tokens' callers
        pass


def make_site(
    tokens: Mapping[str, str],
    db_path: str | None = None,
    *,
    store: DomainStore | None = None,
    config: Config | None = None,
    limits: Limits | None = None,
    clock: Callable[[], float] = time.time,
) -> server.Site:
    """A Twisted ``Site`` serving the API; ``site.service`` is its :class:`DomainStateService`.

    ``tokens`` maps bearer tokens to reporter ids. ``db_path`` is a directory holding
    ``votes.sqlite3`` and the ``consensus`` LMDB store; ``None`` keeps everything in
    memory. ``store`` replaces the :class:`DomainStore` of the consensus records (it is
    opened here). ``config`` gives the TTLs (``DOMAINSTATE_TTL``); its store settings are
    not used, so a project's config can be passed as it is.
    """
    limits = limits or Limits()
    config = config or Config()
    if db_path is not None:
        # The votes name who reported what: directories 0700, files 0600.
        os.makedirs(db_path, mode=0o700, exist_ok=True)
        _private(db_path, 0o700)
        consensus = os.path.join(db_path, "consensus")
        os.makedirs(consensus, mode=0o700, exist_ok=True)
        _private(consensus, 0o700)
        # The consensus records live next to the votes, whatever store the config names.
        config = dataclasses.replace(
            config,
            store="scrapy_domainstate.store.lmdb.LmdbStore",
            lmdb_path=os.path.abspath(os.path.join(db_path, "consensus")),
        )
    if store is None:
        store = MemoryStore(config) if db_path is None else create_store(config)
    votes = VoteTable(os.path.join(db_path, "votes.sqlite3") if db_path else None)
    store.open()
    if db_path is not None:
        for name in os.listdir(consensus):
            _private(os.path.join(consensus, name), 0o600)
    service = DomainStateService(tokens, votes, store, config=config, limits=limits, clock=clock)
    site = _Site(
        _Api(service),
        requestFactory=type("Request", (_Request,), {"max_body": limits.max_body}),
        timeout=limits.idle_timeout,
    )
    site.limits = _fit_open_files(limits)
    site.service = service
    return site


#: File descriptors kept free of connections (stores, logs, accepts in flight).
_FD_RESERVE = 200


def _fit_open_files(limits: Limits) -> Limits:
    """``limits`` with ``max_connections`` below this process's open-file limit."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):  # pragma: no cover - not POSIX
        return limits
    if soft == resource.RLIM_INFINITY:
        return limits
    fit = max(16, soft - _FD_RESERVE)
    if limits.max_connections <= fit:
        return limits
    return dataclasses.replace(limits, max_connections=fit, max_waiting=min(limits.max_waiting, fit // 2))


def _private(path: str, mode: int) -> None:
    """Make ``path`` (created by this process) accessible to its owner only."""
    try:
        if os.stat(path).st_mode & 0o777 != mode:
            os.chmod(path, mode)
    except OSError as exc:
        logger.warning("cannot make %s private (chmod %o): %s", path, mode, exc)


def load_tokens(path: str) -> dict[str, str]:
    """Read a token file: one ``REPORTER_ID TOKEN`` pair a line; ``#`` comments.

    Returns ``{token: reporter_id}``. Raises :class:`ConfigError` naming the line, or
    when other users may read or change the file (it must be ``chmod 600``).
    """
    tokens: dict[str, str] = {}
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise ConfigError(f"cannot read the token file {path}: {exc}") from None
    if mode & 0o077:
        raise ConfigError(
            f"the token file {path} can be read or changed by other users (mode {mode & 0o777:o}): "
            f"run 'chmod 600 {path}'"
        )
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read the token file {path}: {exc}") from None
    for n, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 2:
            raise ConfigError(f"{path}:{n}: expected 'REPORTER_ID TOKEN'")
        reporter, token = parts
        if token in tokens:
            raise ConfigError(f"{path}:{n}: this token is already given to {tokens[token]!r}")
        tokens[token] = reporter
    if not tokens:
        raise ConfigError(f"{path}: no tokens")
    return tokens


def serve(
    port: int,
    host: str = "127.0.0.1",
    *,
    tokens: Mapping[str, str],
    db_path: str | None,
    store: DomainStore | None = None,
    config: Config | None = None,
    limits: Limits | None = None,
    reactor: Any = None,
    run: bool = True,
) -> Any:
    """Listen on ``host:port`` (0: any free port), print the URL, and run the reactor.

    Prints ``domainstate service listening on http://HOST:PORT`` on stdout once listening.
    Votes older than their TTL are pruned hourly; the stores are closed at shutdown.
    With ``run=False`` returns the listening port without running the reactor.
    """
    if reactor is None:
        from twisted.internet import reactor as default_reactor

        reactor = default_reactor
    from twisted.internet.task import LoopingCall

    site = make_site(tokens, db_path, store=store, config=config, limits=limits)
    service: DomainStateService = site.service  # type: ignore[attr-defined]
    listening = reactor.listenTCP(port, site, interface=host)
    address = listening.getHost()
    shown = f"[{address.host}]" if ":" in address.host else address.host
    print(f"domainstate service listening on http://{shown}:{address.port}", flush=True)
    pruner = LoopingCall(service.prune)
    pruner.clock = reactor
    pruner.start(3600, now=True).addErrback(lambda f: logger.error("pruning votes failed: %s", f.getErrorMessage()))

    def shutdown() -> None:
        if pruner.running:
            pruner.stop()
        service.close()

    reactor.addSystemEventTrigger("before", "shutdown", shutdown)
    if run:
        reactor.run()
    return listening


def main(argv: list[str] | None = None) -> int:
    """``python -m scrapy_domainstate.service --port 0 --token-file F --db DIR``."""
    parser = argparse.ArgumentParser(prog="python -m scrapy_domainstate.service", description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=8790, help="TCP port (0: any free port); default 8790")
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on; default 127.0.0.1")
    parser.add_argument("--token-file", required=True, help="file of 'REPORTER_ID TOKEN' lines")
    parser.add_argument("--db", default=None, help="directory of the votes and consensus stores (default: memory)")
    parser.add_argument(
        "-s",
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a DOMAINSTATE_* setting (DOMAINSTATE_TTL, DOMAINSTATE_SERVICE_RATE, DOMAINSTATE_SERVICE_QUOTA)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        settings = {}
        for item in args.set:
            name, sep, value = item.partition("=")
            if not sep or not name.startswith("DOMAINSTATE_"):
                raise ConfigError(f"-s {item!r}: expected DOMAINSTATE_NAME=VALUE")
            settings[name] = value
        config = Config.from_settings(settings)
        tokens = load_tokens(args.token_file)
        serve(args.port, args.host, tokens=tokens, db_path=args.db, config=config)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (OSError, CannotListenError, sqlite3.Error, StoreError) as exc:  # port in use, unwritable db
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
