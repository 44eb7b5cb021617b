"""The Redis store: one state table shared by a fleet of crawlers on many machines.

Key layout, under ``DOMAINSTATE_REDIS_PREFIX`` (``P``, default ``domainstate:``)::

    P d:{<domain>}           the record (record.encode bytes)
    P lru                    sorted set domain -> last_seen: the DOMAINSTATE_MAX_DOMAINS cap, count()
    P u:<fingerprint>        URL-level dead mark: value = until (epoch seconds), expires at until
    P w:<token>              write token of one transaction (exactly-once after a lost EXEC reply)
    P w:{<domain>}:<token>   the same, for a one-domain transaction

Design (the README's "Running a fleet" section quotes these):

- **No lost update.** A flush re-applies each buffered entry to the record *as it is in
  Redis*, inside an optimistic transaction: ``WATCH`` the batch's keys (chunks of
  :attr:`RedisStore.chunk_size`), ``MGET``, apply in Python with the same
  :class:`~scrapy_domainstate.policy.Policy`, then ``MULTI`` ``SET``/``ZADD``/``EXEC``.
  A concurrent writer makes ``EXEC`` fail with ``WatchError``; the chunk is retried with
  jitter, then domain by domain. The policy is Python, so a Lua script cannot apply it.
- **Exactly once.** If the connection dies after ``EXEC`` was sent, the client cannot tell
  whether it ran. Every transaction also sets a token key; the entries stay buffered and
  the next flush checks the token first (``EXISTS``), dropping them if they were applied.
  Tokens are deleted in the next transaction and expire after a day anyway.
- **Redis Cluster.** Detected at ``open()`` (``INFO cluster``); multi-key
  ``WATCH``/``MGET`` across slots is impossible there, so each domain gets its own
  transaction (the record and its token share the ``{<domain>}`` hash tag) and the LRU
  ``ZADD ... GT`` follows in a plain pipeline. A prefix with its own hash tag
  (``{ds}:``) puts every key in one slot and keeps the batched path, on one node.
- **Degrade, never stall a crawl.** Short socket timeouts (0.5 s connect and read, no
  client retries; ``?socket_timeout=`` and ``?socket_connect_timeout=`` in the URL win)
  and a circuit breaker: after a failure, reads answer "not stored" (a request is
  treated as for an unknown domain) and writes stay buffered for
  :attr:`RedisStore.breaker_seconds` without touching the network. One warning with the
  traceback per outage, counted in ``errors``; the next flush after Redis is back writes
  the buffer. The buffer is capped (:attr:`RedisStore.max_buffered`); beyond it the
  oldest buffered outcomes are dropped, counted in ``dropped``, with a warning.
- **Start-up fails loudly**: no URL is a ``ConfigError`` naming ``DOMAINSTATE_REDIS_URL``
  (Scrapy's ``REDIS_URL``, as scrapy-redis reads it, is the fallback); an unreachable
  server, or one older than Redis 6.2 (``SET ... PXAT``, ``ZADD ... GT``), is a
  ``StoreError`` naming the URL with its password masked. Nothing connects before ``open()``.
- **Synchronous, like the LMDB store**: one ``GET`` per decision (only the fixed header
  is decoded), one ``GET`` per outcome of a domain with nothing buffered, and one
  transaction per ``chunk_size`` domains per flush. While Redis is down, decisions are
  those for a domain seen for the first time, refined by this process's own buffered
  outcomes.
- **Record expiry in Redis.** States expire lazily and an expired record keeps its
  counters, so Redis must not drop a record while it still means something. A record
  stops influencing decisions once its state has run down to ``unknown`` with its history
  cleared (``dead`` after 30 d, ``antibot-hard`` after 90 + 7 d, ...); the key expires
  :attr:`RedisStore.retention` (90 days) after that, after ``last_seen`` and after the
  write, whichever is last. A state without TTL (``friendly``) gives a key without
  expiry: memory stays bounded by the LRU cap. Expired keys leave a member in the LRU set
  until the next eviction or ``sweep``, so ``count()`` may briefly over-count.
- **LRU cap** with a sorted set scored by ``last_seen``: ``ZCARD`` rides in the write
  transaction; beyond the cap a Lua script pops the oldest (``ZPOPMIN``) and deletes their
  records atomically (cluster: a checked transaction per popped domain).
- **Operators' commands** (``iter_records`` by ``SCAN``, ``count`` by ``ZCARD``, ``clear``)
  touch only this prefix's keys, never ``FLUSHDB``, and raise ``StoreError`` when Redis is down.
"""

from __future__ import annotations

import logging
import random
import re
import time
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

try:
    import redis
    from redis.backoff import NoBackoff
    from redis.exceptions import RedisClusterException, RedisError, ResponseError, WatchError
    from redis.retry import Retry
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("the Redis store needs redis-py: pip install 'scrapy-domainstate[redis]'") from exc

from .._breaker import CircuitBreaker
from ..config import Config, ConfigError
from ..policy import EXPIRES_TO, Decision, Policy, Transition
from ..record import DomainStat, RecentEntry, RecordError, State, decode, decode_decision, encode
from .base import DomainStore, StoreError, apply_entries

__all__ = ["RedisStore", "mask_url"]

logger = logging.getLogger(__name__)

DAY = 86400.0

# KEYS[1] = lru set; ARGV = cap, record key prefix, record key suffix, max pops.
_EVICT_LUA = """
local extra = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[1])
if extra <= 0 then return 0 end
if extra > tonumber(ARGV[4]) then extra = tonumber(ARGV[4]) end
local popped = redis.call('ZPOPMIN', KEYS[1], extra)
for i = 1, #popped, 2 do
  redis.call('UNLINK', ARGV[2] .. popped[i] .. ARGV[3])
end
return #popped / 2
"""

_CONNECTION_ERRORS = (redis.ConnectionError, redis.TimeoutError, OSError)


class _Contention(StoreError):
    """Other writers kept changing the watched keys; the entries stay buffered."""


def mask_url(url: str | None) -> str:
    """``url`` with its password (in the userinfo or a ``password=`` parameter) masked."""
    if not url:
        return "<no URL>"
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if parts.password is not None:
            netloc = f"{parts.username or ''}:***@{netloc.rpartition('@')[2]}"
        query = parts.query
        if "password" in query:
            pairs = [(k, "***" if k == "password" else v) for k, v in parse_qsl(query, keep_blank_values=True)]
            query = urlencode(pairs, safe="*")
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:
        return "<unparsable URL>"


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


_TAGGED_PREFIX = re.compile(r"[^{}]*\{[^{}]+\}[^{}]*")


def _has_hash_tag(prefix: str) -> bool:
    return _TAGGED_PREFIX.fullmatch(prefix) is not None


def _disconnect_cause(exc: BaseException) -> BaseException | None:
    """redis-py turns a lost connection under WATCH into a WatchError: find the real cause."""
    if isinstance(exc, WatchError):
        ctx = exc.__context__
        return ctx if isinstance(ctx, _CONNECTION_ERRORS) else None
    return exc if isinstance(exc, _CONNECTION_ERRORS) else None


class RedisStore(DomainStore):
    """Records in Redis, shared by every crawler that uses the same URL and prefix."""

    name = "redis"

    #: Seconds reads short-circuit to "not stored" and flushes wait after a failure.
    breaker_seconds = 5.0
    #: Buffered outcomes kept while Redis is unreachable; the oldest beyond it are dropped.
    max_buffered = 100_000
    #: Domains per optimistic transaction in the batched path.
    chunk_size = 100
    #: Attempts of a chunk transaction before it falls back to one transaction per domain.
    chunk_attempts = 4
    #: Attempts of a one-domain transaction before the flush gives up (entries stay buffered).
    domain_attempts = 25
    #: How long an unused record outlives the moment it stops mattering (see module docs).
    retention = 90 * DAY
    #: A URL dead mark whose ``until`` is already past is still kept this long (simulated clocks).
    url_min_keep = 3600.0
    #: URL dead marks buffered while Redis is unreachable.
    max_buffered_urls = 10_000
    #: Default socket timeouts (seconds) unless the URL sets them.
    socket_timeout = 0.5
    socket_connect_timeout = 0.5
    token_ttl_ms = 86_400_000
    scan_count = 1000
    evict_batch = 1000

    def __init__(self, config: Config | None = None, policy: Policy | None = None, *, cluster: bool | None = None):
        super().__init__(config, policy)
        prefix = self.config.redis_prefix
        self.prefix = prefix
        self._lru_key = f"{prefix}lru"
        self._cluster_wanted = cluster
        self._client: Any = None
        self._cluster = False
        self._per_domain = False
        self._evict_script: Any = None
        # Circuit breaker (a fixed wait of breaker_seconds after any failure) and counters.
        self.breaker = CircuitBreaker(1, self.breaker_seconds, max_cooldown=self.breaker_seconds)
        self._outage = False
        self.errors = 0
        self.dropped = 0
        self.short_circuits = 0
        self.conflicts = 0
        # Flush bookkeeping.
        self._auto_flush = False
        self._written: set[str] = set()
        self._unconfirmed: dict[str, dict[str, list[RecentEntry]]] = {}
        self._done_tokens: list[str] = []
        self._lru_updates: dict[str, float] = {}
        self._lru_size = 0
        self._url_pending: dict[str, float] = {}

    # ------------------------------------------------------------ lifecycle

    @property
    def url(self) -> str | None:
        return self.config.redis_url

    def describe(self) -> str:
        return f"redis {mask_url(self.url)} (prefix {self.prefix!r})"

    def open(self) -> None:
        if self._client is not None:
            return
        url = self.url
        if not url:
            raise ConfigError(
                "DOMAINSTATE_REDIS_URL is not set: the Redis store needs a URL such as "
                "redis://localhost:6379/0 (REDIS_URL is used when DOMAINSTATE_REDIS_URL is unset)"
            )
        if ("{" in self.prefix or "}" in self.prefix) and not _has_hash_tag(self.prefix):
            raise ConfigError(
                f"DOMAINSTATE_REDIS_PREFIX {self.prefix!r}: braces are allowed only as one Redis Cluster "
                "hash tag such as '{domainstate}:'"
            )
        masked = mask_url(url)
        kwargs: dict[str, Any] = {
            "socket_timeout": self.socket_timeout,
            "socket_connect_timeout": self.socket_connect_timeout,
            "retry": Retry(NoBackoff(), 0),
        }
        try:
            client: redis.Redis | redis.RedisCluster = redis.Redis.from_url(url, **kwargs)
        except ValueError as exc:
            raise ConfigError(f"DOMAINSTATE_REDIS_URL {masked!r} is not a valid Redis URL: {exc}") from None
        cluster = self._cluster_wanted
        try:
            client.ping()
            self._check_version(client, masked)
            if cluster is None:
                try:
                    cluster = bool(client.info("cluster").get("cluster_enabled"))
                except ResponseError:
                    cluster = False
            if cluster:
                client.close()
                client = redis.RedisCluster.from_url(url, **kwargs)
                client.ping()
        except (RedisError, RedisClusterException) as exc:
            client.close()
            raise StoreError(f"Redis store: cannot reach {masked} (DOMAINSTATE_REDIS_URL): {exc}") from exc
        self._client = client
        self._cluster = bool(cluster)
        self._per_domain = self._cluster and not _has_hash_tag(self.prefix)
        self._evict_script = None if self._cluster else client.register_script(_EVICT_LUA)
        self.breaker.reset()
        self._outage = False
        logger.info(
            "domainstate: Redis store at %s (prefix %r%s)",
            masked,
            self.prefix,
            ", cluster, one transaction per domain" if self._per_domain else (", cluster" if self._cluster else ""),
        )

    @staticmethod
    def _check_version(client: Any, masked: str) -> None:
        """SET ... PXAT and ZADD ... GT need Redis 6.2; say so at start-up rather than mid-crawl."""
        try:
            version = str(client.info("server").get("redis_version", ""))
        except ResponseError:
            return  # INFO disabled: trust the operator
        try:
            major_minor = tuple(int(part) for part in version.split(".")[:2])
        except ValueError:
            return
        if len(major_minor) == 2 and major_minor < (6, 2):
            client.close()
            raise StoreError(f"Redis store: {masked} runs Redis {version}; the Redis store needs Redis 6.2 or later")

    def close(self) -> None:
        """Write what is buffered (one attempt, even while the breaker is open) and disconnect."""
        client = self._client
        if client is None:
            return
        try:
            self._flush(force=True)
            if self._done_tokens:
                self._unlink_quietly(self._done_tokens)
        except StoreError as exc:
            lost = self._n_pending + len(self._url_pending)
            logger.error(
                "domainstate: closing %s with %d buffered outcomes not written: %s", self.describe(), lost, exc
            )
            raise StoreError(f"{exc} ({lost} buffered outcomes were not written)") from exc
        finally:
            self._client = None
            client.close()

    # ----------------------------------------------------------------- keys

    def _rkey(self, domain: str) -> str:
        return f"{self.prefix}d:{{{domain}}}"

    def _ukey(self, fingerprint: str) -> str:
        return f"{self.prefix}u:{fingerprint}"

    def _require(self) -> Any:
        if self._client is None:
            raise StoreError(f"{self.describe()} is not open: call open() first")
        return self._client

    # ------------------------------------------------------ circuit breaker

    @property
    def _down_until(self) -> float:
        """When the breaker's wait ends (monotonic clock; 0: closed). Setting 0 closes it."""
        return self.breaker.open_until()

    @_down_until.setter
    def _down_until(self, value: float) -> None:
        if not value:
            self.breaker.reset()

    def _available(self) -> bool:
        return self.breaker.allow()

    def _failed(self, exc: BaseException, what: str) -> None:
        self.errors += 1
        breaker = self.breaker
        # breaker_seconds may be changed on the instance: a fixed wait, never doubled.
        breaker.base_cooldown = breaker.cooldown = breaker.max_cooldown = self.breaker_seconds
        breaker.failure(hard=True)
        if not self._outage:
            self._outage = True
            logger.warning(
                "domainstate: Redis store %s failed (%s): %s. Requests are decided as for unknown domains "
                "and outcomes stay buffered (%d now); retrying every %.1f s",
                self.describe(),
                what,
                str(exc).rstrip("."),
                self._n_pending,
                self.breaker_seconds,
                exc_info=exc,
            )
        else:
            logger.debug("domainstate: Redis store still failing (%s): %s", what, exc)

    def _recovered(self) -> None:
        if self._outage:
            self._outage = False
            logger.info(
                "domainstate: Redis store %s reachable again (%d errors so far, %d outcomes buffered)",
                self.describe(),
                self.errors,
                self._n_pending,
            )
        self.breaker.success()

    # -------------------------------------------------------------- reading

    def _read(self, key: str) -> bytes | None:
        """GET on the hot path: ``None`` when missing, unreachable or short-circuited."""
        client = self._require()
        if not self.breaker.allow():
            self.short_circuits += 1
            return None
        try:
            raw = client.get(key)
        except ResponseError as exc:
            if str(exc).startswith("WRONGTYPE"):
                return b""  # not one of our records: decodes as corrupt
            self._failed(exc, "read")
            return None
        except RedisError as exc:
            self._failed(exc, "read")
            return None
        if self._outage or self.breaker.state != CircuitBreaker.CLOSED:
            self._recovered()
        return raw

    @staticmethod
    def _decode(domain: str, raw: bytes) -> DomainStat:
        stat = decode(raw)
        if stat.domain != domain:
            raise RecordError(f"the record under this key is for {stat.domain!r}")
        return stat

    def _decode_or_none(self, domain: str, raw: bytes | None) -> DomainStat | None:
        if raw is None:
            return None
        try:
            return self._decode(domain, raw)
        except RecordError as exc:
            self._note_corrupt(domain, exc)
            return None

    def _load_raw(self, domain: str) -> DomainStat | None:
        raw = self._read(self._rkey(domain))
        return None if raw is None else self._decode(domain, raw)

    def decide(self, domain: str, now: float) -> tuple[Decision, State, float | None]:
        # Hot path: decode only the fixed header unless the state has expired.
        if domain in self._view:
            return super().decide(domain, now)
        raw = self._read(self._rkey(domain))
        if raw is not None:
            try:
                state, expires, changed, probed, browser = decode_decision(raw)
            except RecordError as exc:
                self._note_corrupt(domain, exc)
            else:
                if expires is None or now < expires:
                    return self.policy.decide_state(state, probed, changed, browser), state, expires
                stat = self._decode_or_none(domain, raw)
                if stat is not None:
                    stat = self.policy.current(stat, domain, now)
                    return self.policy.decide(stat, now), stat.state, stat.state_expires_at
        new = self.policy.new(domain, now)
        return self.policy.decide(None, now), new.state, new.state_expires_at

    # ------------------------------------------------------- URL dead marks

    def url_dead_until(self, fingerprint: str) -> float | None:
        until = self._url_pending.get(fingerprint)
        if until is not None:
            return until
        raw = self._read(self._ukey(fingerprint))
        if not raw:
            return None
        try:
            return float(raw)
        except ValueError:
            return None

    def _url_expiry_ms(self, until: float) -> int:
        # A mark already past by the wall clock only comes from a simulated clock: keep it a while.
        wall = time.time()
        return int((until if until > wall else wall + self.url_min_keep) * 1000)

    def mark_url_dead(self, fingerprint: str, until: float) -> None:
        client = self._require()
        if self._available():
            try:
                client.set(self._ukey(fingerprint), repr(float(until)), pxat=self._url_expiry_ms(until))
                return
            except RedisError as exc:
                self._failed(exc, "mark URL dead")
        self._url_pending[fingerprint] = float(until)
        while len(self._url_pending) > self.max_buffered_urls:
            del self._url_pending[next(iter(self._url_pending))]
            self.dropped += 1

    def _flush_urls(self) -> None:
        if not self._url_pending:
            return
        marks = dict(self._url_pending)
        with self._require().pipeline(transaction=False) as pipe:
            for fingerprint, until in marks.items():
                pipe.set(self._ukey(fingerprint), repr(until), pxat=self._url_expiry_ms(until))
            pipe.execute()
        for fingerprint in marks:
            self._url_pending.pop(fingerprint, None)

    # -------------------------------------------------------------- writing

    def record(self, domain: str, entry: RecentEntry) -> tuple[DomainStat, Transition | None]:
        # A flush triggered by record() never raises: while Redis is away, entries stay buffered.
        return self._record_buffering(domain, entry)

    def flush(self) -> int:
        """Write buffered outcomes. Raises StoreError (entries stay buffered) unless called by record()."""
        try:
            return self._flush(force=False)
        except StoreError as exc:
            if self._auto_flush:
                logger.debug("domainstate: flush deferred: %s", exc)
                return 0
            raise

    def _flush(self, force: bool) -> int:
        if not (self._pending or self._url_pending or self._unconfirmed or self._lru_updates):
            return 0
        self._require()
        if not force and not self._available():
            self.short_circuits += 1
            raise StoreError(
                f"{self.describe()} unavailable: {self._n_pending} outcomes stay buffered "
                f"(next attempt within {self.breaker_seconds:g} s)"
            )
        try:
            self._resolve_unconfirmed()
            self._flush_urls()
            if self._lru_updates and not self._pending:
                self._post_per_domain()
        except RedisError as exc:
            self._failed(exc, "flush")
            raise StoreError(f"{self.describe()}: write failed: {exc}") from exc
        if not self._pending:
            return 0
        batch, n = self._pending, self._n_pending
        self._pending, self._n_pending = {}, 0
        self._written = set()
        try:
            self._write_batch(batch)
        except BaseException:
            self._restore_unwritten(batch)
            raise
        self._written = set()
        for domain in batch:
            if domain not in self._pending:
                self._view.pop(domain, None)
        return n

    def _restore_unwritten(self, batch: dict[str, list[RecentEntry]]) -> None:
        """Put a failed batch back in the buffer, less the domains already written."""
        # Entries of domains already written are not re-applied; the rest go back in
        # front of anything recorded meanwhile.
        written, self._written = self._written, set()
        back = {d: e for d, e in batch.items() if d not in written}
        for domain, entries in self._pending.items():
            back.setdefault(domain, []).extend(entries)
        self._pending = back
        self._n_pending = sum(len(e) for e in back.values())
        for domain in written:
            if domain not in back:
                self._view.pop(domain, None)
        if self._n_pending > self.max_buffered:
            self._trim_buffer()

    def _resolve_unconfirmed(self) -> None:
        """Find out whether transactions whose EXEC reply was lost ran; drop their entries if so."""
        if not self._unconfirmed:
            return
        tokens = list(self._unconfirmed)
        with self._require().pipeline(transaction=False) as pipe:
            for token in tokens:
                pipe.exists(token)
            found = pipe.execute()
        for token, hit in zip(tokens, found, strict=True):
            by_domain = self._unconfirmed.pop(token)
            if not hit:
                continue  # did not run: the entries are still buffered and will be written
            self._done_tokens.append(token)
            for domain, entries in by_domain.items():
                ids = {id(e) for e in entries}
                buffered = self._pending.get(domain)
                if not buffered:
                    continue
                keep = [e for e in buffered if id(e) not in ids]
                self._n_pending -= len(buffered) - len(keep)
                if keep:
                    self._pending[domain] = keep
                else:
                    del self._pending[domain]
                    self._view.pop(domain, None)

    def _expiry_ms(self, stat: DomainStat) -> int | None:
        """PXAT for a record key, ``None`` for no expiry (see the module docs)."""
        state, at = stat.state, stat.state_expires_at
        settled = None
        for _ in range(len(State) + 1):
            if at is None:
                return None
            following = EXPIRES_TO[state]
            if state is State.UNKNOWN or following is State.UNKNOWN:
                settled = at
                break
            ttl = self.config.ttl.get(following)
            if ttl is None:
                return None
            state, at = following, at + ttl
        if settled is None:
            return None
        return int((max(settled, stat.last_seen, time.time()) + self.retention) * 1000)

    def _write_batch(self, batch: dict[str, list[RecentEntry]]) -> dict[str, DomainStat]:
        self._require()
        out: dict[str, DomainStat] = {}
        items = list(batch.items())
        try:
            if self._per_domain:
                for domain, entries in items:
                    out[domain] = self._tx_domain(domain, entries)
                self._post_per_domain()
            else:
                for i in range(0, len(items), self.chunk_size):
                    out.update(self._tx_chunk(items[i : i + self.chunk_size]))
        except RedisError as exc:
            self._failed(exc, "write")
            raise StoreError(f"{self.describe()}: write failed: {exc}") from exc
        self._recovered()
        if self._lru_size > self.config.max_domains:
            try:
                self._evict()
            except RedisError as exc:
                self._failed(exc, "evict")
        return out

    def _backoff(self, attempt: int) -> None:
        self.conflicts += 1
        time.sleep(random.uniform(0, min(0.05, 0.001 * 2**attempt)))

    def _tx_chunk(self, chunk: list[tuple[str, list[RecentEntry]]]) -> dict[str, DomainStat]:
        client = self._client
        keys = [self._rkey(domain) for domain, _ in chunk]
        token = f"{self.prefix}w:{uuid.uuid4().hex}"
        for attempt in range(self.chunk_attempts):
            with client.pipeline(transaction=True) as pipe:
                try:
                    pipe.watch(*keys)
                    raws = pipe.execute_command("MGET", *keys)  # ClusterPipeline blocks .mget()
                except WatchError as exc:
                    raise (_disconnect_cause(exc) or exc) from None
                results = {
                    domain: apply_entries(self.policy, self._decode_or_none(domain, raw), domain, entries)
                    for (domain, entries), raw in zip(chunk, raws, strict=True)
                }
                pipe.multi()
                for key, stat in zip(keys, results.values(), strict=True):
                    pipe.set(key, encode(stat), pxat=self._expiry_ms(stat))
                pipe.zadd(self._lru_key, {domain: stat.last_seen for domain, stat in results.items()})
                pipe.set(token, b"1", px=self.token_ttl_ms)
                done = list(self._done_tokens)
                if done:
                    pipe.unlink(*done)
                pipe.zcard(self._lru_key)
                replies = self._execute(pipe, token, chunk, attempt)
                if replies is None:
                    continue
            del self._done_tokens[: len(done)]
            self._done_tokens.append(token)
            self._lru_size = replies[-1]
            self._written.update(results)
            return results
        # Heavy contention on a wide WATCH: narrow it to one domain at a time.
        return {domain: self._tx_domain(domain, entries) for domain, entries in chunk}

    def _execute(
        self, pipe: Any, token: str, chunk: list[tuple[str, list[RecentEntry]]], attempt: int
    ) -> list[Any] | None:
        """EXEC a transaction; ``None`` when a watched key changed (backed off: retry).

        On a lost connection the outcome is unknown: the token's entries are kept as
        unconfirmed (the next flush checks the token) and the cause is raised.
        """
        try:
            return pipe.execute()
        except WatchError as exc:
            cause = _disconnect_cause(exc)
            if cause is None:
                self._backoff(attempt)
                return None
            self._unconfirmed[token] = {domain: list(entries) for domain, entries in chunk}
            raise cause from None
        except RedisError:
            self._unconfirmed[token] = {domain: list(entries) for domain, entries in chunk}
            raise

    def _tx_domain(self, domain: str, entries: list[RecentEntry]) -> DomainStat:
        client = self._client
        key = self._rkey(domain)
        token = f"{self.prefix}w:{{{domain}}}:{uuid.uuid4().hex}"
        for attempt in range(self.domain_attempts):
            with client.pipeline(transaction=True) as pipe:
                try:
                    pipe.watch(key)
                    raw = pipe.get(key)
                except WatchError as exc:
                    raise (_disconnect_cause(exc) or exc) from None
                stat = apply_entries(self.policy, self._decode_or_none(domain, raw), domain, entries)
                pipe.multi()
                pipe.set(key, encode(stat), pxat=self._expiry_ms(stat))
                pipe.set(token, b"1", px=self.token_ttl_ms)
                if not self._per_domain:  # one slot: the LRU update rides in the transaction
                    pipe.zadd(self._lru_key, {domain: stat.last_seen})
                    pipe.zcard(self._lru_key)
                replies = self._execute(pipe, token, [(domain, entries)], attempt)
                if replies is None:
                    continue
            self._done_tokens.append(token)
            if self._per_domain:
                self._lru_updates[domain] = max(stat.last_seen, self._lru_updates.get(domain, 0.0))
            else:
                self._lru_size = replies[-1]
            self._written.add(domain)
            return stat
        raise _Contention(f"{self.describe()}: {domain} kept changing under {self.domain_attempts} attempts")

    def _post_per_domain(self) -> None:
        """Cluster, one transaction per domain: LRU scores and token clean-up in a plain pipeline."""
        updates, done = dict(self._lru_updates), list(self._done_tokens)
        with self._client.pipeline(transaction=False) as pipe:
            if updates:
                pipe.zadd(self._lru_key, updates, gt=True)
            for token in done:
                pipe.unlink(token)
            pipe.zcard(self._lru_key)
            replies = pipe.execute()
        for domain in updates:
            self._lru_updates.pop(domain, None)
        del self._done_tokens[: len(done)]
        self._lru_size = replies[-1]

    def _unlink_quietly(self, keys: list[str]) -> None:
        try:
            with self._require().pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.unlink(key)
                pipe.execute()
            keys.clear()
        except RedisError as exc:
            logger.debug("domainstate: could not delete Redis write tokens (they expire): %s", exc)

    # -------------------------------------------------------------- the cap

    def _evict(self) -> None:
        cap = self.config.max_domains
        if self._evict_script is not None:
            while True:
                n = int(
                    self._evict_script(
                        keys=[self._lru_key],
                        args=[cap, f"{self.prefix}d:{{", "}", self.evict_batch],
                    )
                )
                self.evicted += n
                if n < self.evict_batch:
                    break
            self._lru_size = cap
            return
        client = self._client
        while True:
            extra = client.zcard(self._lru_key) - cap
            if extra <= 0:
                break
            popped = client.zpopmin(self._lru_key, min(extra, self.evict_batch))
            restore: dict[str, float] = {}
            for member, score in popped:
                domain = member.decode("utf-8", "replace")
                if self._evict_one(domain, score, restore):
                    self.evicted += 1
            if restore:
                client.zadd(self._lru_key, restore, gt=True)
        self._lru_size = cap

    def _evict_one(self, domain: str, score: float, restore: dict[str, float]) -> bool:
        """Delete a popped domain's record unless it was seen again meanwhile (cluster path)."""
        key = self._rkey(domain)
        with self._client.pipeline(transaction=True) as pipe:
            pipe.watch(key)
            raw = pipe.get(key)
            stat = None
            if raw is not None:
                try:
                    stat = self._decode(domain, raw)
                except RecordError:
                    stat = None
            if stat is not None and stat.last_seen > score:
                restore[domain] = stat.last_seen
                return False
            pipe.multi()
            pipe.unlink(key)
            try:
                pipe.execute()
            except WatchError:
                return False  # written meanwhile: its writer adds it back to the LRU set
        return raw is not None

    # ----------------------------------------------------------- operators

    def _put(self, stat: DomainStat) -> None:
        client = self._require()
        key = self._rkey(stat.domain)
        try:
            with client.pipeline(transaction=not self._per_domain) as pipe:
                pipe.set(key, encode(stat), pxat=self._expiry_ms(stat))
                pipe.zadd(self._lru_key, {stat.domain: stat.last_seen})
                pipe.zcard(self._lru_key)
                self._lru_size = pipe.execute()[-1]
            if self._lru_size > self.config.max_domains:
                self._evict()
        except RedisError as exc:
            raise StoreError(f"{self.describe()}: cannot write {stat.domain}: {exc}") from exc

    def _delete(self, domain: str) -> bool:
        client = self._require()
        try:
            with client.pipeline(transaction=not self._per_domain) as pipe:
                pipe.unlink(self._rkey(domain))
                pipe.zrem(self._lru_key, domain)
                deleted = pipe.execute()[0]
        except RedisError as exc:
            raise StoreError(f"{self.describe()}: cannot delete {domain}: {exc}") from exc
        return bool(deleted)

    def _scan(self, family: str) -> Iterator[bytes]:
        pattern = f"{_glob_escape(self.prefix)}{family}*"
        seen: set[bytes] = set()
        for key in self._require().scan_iter(match=pattern, count=self.scan_count):
            if key not in seen:  # SCAN may return a key twice while the keyspace is rehashed
                seen.add(key)
                yield key

    def _clear(self) -> int:
        client = self._require()
        n = 0
        try:
            for family in ("d:", "u:", "w:"):
                batch: list[bytes] = []
                for key in self._scan(family):
                    batch.append(key)
                    if len(batch) >= self.scan_count:
                        deleted = self._unlink_keys(batch)
                        n += deleted if family == "d:" else 0
                        batch = []
                if batch:
                    deleted = self._unlink_keys(batch)
                    n += deleted if family == "d:" else 0
            client.unlink(self._lru_key)
        except RedisError as exc:
            raise StoreError(f"{self.describe()}: clear failed: {exc}") from exc
        self._unconfirmed.clear()
        self._done_tokens.clear()
        self._lru_updates.clear()
        self._url_pending.clear()
        self._lru_size = 0
        return n

    def _unlink_keys(self, keys: list[bytes]) -> int:
        with self._require().pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.unlink(key)
            return sum(pipe.execute())

    def _fetch(self, keys: list[bytes]) -> list[bytes | None]:
        client = self._require()
        if self._cluster:
            return client.mget_nonatomic(keys)
        return client.mget(keys)

    def iter_records(self) -> Iterator[DomainStat]:
        try:
            batch: list[bytes] = []
            for key in self._scan("d:"):
                batch.append(key)
                if len(batch) >= self.scan_count:
                    yield from self._decode_batch(batch)
                    batch = []
            if batch:
                yield from self._decode_batch(batch)
        except RedisError as exc:
            raise StoreError(f"{self.describe()}: cannot list records: {exc}") from exc

    def _decode_batch(self, keys: list[bytes]) -> Iterator[DomainStat]:
        start = len(self.prefix.encode("utf-8")) + 3  # 'd:{'
        for key, raw in zip(keys, self._fetch(keys), strict=True):
            if raw is None:
                continue  # deleted since the scan saw it
            domain = key[start:-1].decode("utf-8", "replace")
            stat = self._decode_or_none(domain, raw)
            if stat is not None:
                yield stat

    def count(self) -> int:
        try:
            return int(self._require().zcard(self._lru_key))
        except RedisError as exc:
            raise StoreError(f"{self.describe()}: cannot count records: {exc}") from exc

    def sweep(self, now: float) -> int:
        """Drop expired records, and LRU members whose record Redis has already expired."""
        n = super().sweep(now)
        client = self._require()
        try:
            batch: list[bytes] = []
            for member, _ in client.zscan_iter(self._lru_key, count=self.scan_count):
                batch.append(member)
                if len(batch) >= self.scan_count:
                    self._prune(batch)
                    batch = []
            if batch:
                self._prune(batch)
        except RedisError as exc:
            raise StoreError(f"{self.describe()}: sweep failed: {exc}") from exc
        return n

    def _prune(self, members: list[bytes]) -> None:
        client = self._client
        with client.pipeline(transaction=False) as pipe:
            for member in members:
                pipe.exists(self._rkey(member.decode("utf-8", "replace")))
            exists = pipe.execute()
        ghosts = [m for m, e in zip(members, exists, strict=True) if not e]
        if ghosts:
            client.zrem(self._lru_key, *ghosts)
