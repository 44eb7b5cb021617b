"""The Redis store: one state table shared by a fleet of crawlers on many machines.

Key layout, under ``DOMAINSTATE_REDIS_PREFIX`` (``P``, default ``domainstate:``)::

    P d:{<domain>}           the record (record.encode bytes)
    P lru                    sorted set domain -> last_seen: the DOMAINSTATE_MAX_DOMAINS cap, count()
    P u:<fingerprint>        URL-level dead mark: value = until (epoch seconds), expires at until
    P w:<token>              write token of one transaction (exactly-once after a lost EXEC reply)
    P w:{<domain>}:<token>   the same, for a one-domain transaction
    P marker                 a random value set at the first open: gone after a reconnect = Redis came back empty

Design (the README's "Running a fleet" section quotes these):

- **No lost update.** A flush re-applies each buffered entry to the record *as it is in
  Redis*, inside an optimistic transaction: ``WATCH`` the batch's keys (chunks of
  :attr:`RedisStore.chunk_size`), ``MGET``, apply in Python with the same
  :class:`~scrapy_domainstate.core.policy.Policy`, then ``MULTI`` ``SET``/``ZADD``/``EXEC``.
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
  client retries; ``?socket_timeout=`` and ``?socket_connect_timeout=`` in the URL win),
  and a deadline per call that bounds the whole call, every connect, send and reply of it
  (:attr:`RedisStore.read_deadline` 0.2 s for a decision's ``GET`` or a URL mark,
  :attr:`RedisStore.write_deadline` 0.6 s for a flush, which starts no new chunk after
  :attr:`RedisStore.flush_budget`: a backlog is written in slices; the trial flush after a
  breaker's wait gets the read's deadline). Two circuit breakers,
  one for reads and one for writes: a lost connection, a call cut at its deadline, or
  :attr:`RedisStore.slow_threshold` calls in a row that waited over
  :attr:`RedisStore.slow_reply` for a reply open both; an error reply to a write (Redis at
  ``maxmemory`` with ``noeviction``, a read-only replica) opens only the write breaker, and
  decisions keep reading Redis. While the read breaker is open reads answer "not stored" (a
  request is treated as for an unknown domain); while the write breaker is open outcomes
  stay buffered; each for :attr:`RedisStore.breaker_seconds` without touching the network.
  One warning per outage (from the first failure until both breakers are closed again),
  counted in ``errors`` and ``slow_calls``, with no record bytes or keys in it (redis-py
  quotes a failed pipeline command with its arguments: only the command's name is kept);
  the next flush after Redis is back writes the buffer. The buffer is capped
  (:attr:`RedisStore.max_buffered`); beyond it the oldest buffered outcomes are dropped,
  counted in ``dropped``, with a warning.
- **Redis that comes back empty says so.** ``open()`` reads the ``marker`` key (setting a
  random value if there is none); after every reconnect the store reads it again. Gone, or
  another value (another crawler of the fleet set a new one first), means Redis restarted
  without persistence or was flushed: one warning each time, counted in ``emptied``.
- **Start-up fails loudly**: no URL is a ``ConfigError`` naming ``DOMAINSTATE_REDIS_URL``
  (Scrapy's ``REDIS_URL``, as scrapy-redis reads it, is the fallback); an unreachable
  server, or one older than Redis 6.2 (``SET ... PXAT``, ``ZADD ... GT``), is a
  ``StoreError`` naming the URL with its password masked. Nothing connects before ``open()``.
- **Reads that do not wait** (in a crawl): decisions read a local cache
  (:mod:`scrapy_domainstate.store._readcache`) that a reader thread fills with batched ``MGET``
  on its own connection and refreshes every :attr:`RedisStore.refresh` seconds (0.4 s) for
  the records decisions use; a request whose records are not cached, or cached longer ago
  than :attr:`RedisStore.max_age` (0.75 s), waits (a Deferred, in the downloader
  middleware) for its own batch, never the reactor. The store's own writes go into the
  cache as written. So a decision's record is at most ``max_age`` old while Redis answers;
  a verdict another crawler learns reaches this one within its flush interval
  (``DOMAINSTATE_FLUSH_INTERVAL``, 1 s) plus that. Outside a
  running reactor (scripts, operators' commands) the store is synchronous: one ``GET`` per
  decision (only the fixed header is decoded). Writes: one transaction per ``chunk_size``
  domains per flush (from the crawl's flush timer); a URL dead mark waits for that flush in
  a crawl. While Redis is down, decisions are those for a domain seen for the first time
  (cached records keep answering as last read), refined by this process's own buffered
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
import math
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
    from redis.connection import AbstractConnection, Connection, parse_url
    from redis.exceptions import RedisClusterException, RedisError, ResponseError, WatchError
    from redis.maint_notifications import MaintNotificationsConfig
    from redis.retry import Retry
    from redis.utils import SENTINEL
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("the Redis store needs redis-py: pip install 'scrapy-domainstate[redis]'") from exc

from scrapy_domainstate.core.breaker import CircuitBreaker
from scrapy_domainstate.core.config import Config, ConfigError
from scrapy_domainstate.core.policy import EXPIRES_TO, Policy, Transition
from scrapy_domainstate.core.record import DomainStat, RecentEntry, State
from scrapy_domainstate.store._readcache import ReadCache
from scrapy_domainstate.store.base import DomainStore, StoreError, apply_entries
from scrapy_domainstate.store.codec import RecordError, decode, encode

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


class _Deadline:
    """The end of the store call in progress, read by the store's connections.

    ``at`` is on the monotonic clock (``inf``: no deadline). ``worst`` is the longest wait
    for one reply since the call began; ``connects`` counts new connections (a reconnect
    makes the store check its marker key: did Redis come back empty?).
    """

    __slots__ = ("at", "connects", "worst")

    def __init__(self) -> None:
        self.at = math.inf
        self.worst = 0.0
        self.connects = 0

    def start(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds
        self.worst = 0.0

    def end(self) -> None:
        self.at = math.inf

    def left(self) -> float:
        return self.at - time.monotonic()


class _DeadlineConnection(AbstractConnection):
    """A redis-py connection whose every connect, send and reply wait ends by the deadline.

    The socket timeout bounds one read; a store call is several round trips (a flush is
    WATCH, MGET, EXEC per chunk), so each waits at most what is left of the call's
    :class:`_Deadline`. Past it the connection is dropped (a reply may still be on its way)
    and ``redis.TimeoutError`` raised. Subclassed per store with its own ``deadline``, over
    the connection class the URL asks for (TCP, TLS, Unix socket): it comes first in the
    MRO and defers to that class for the socket itself.
    """

    deadline: _Deadline

    def _expired(self, what: str) -> redis.TimeoutError:
        self.disconnect()
        return redis.TimeoutError(f"domainstate call deadline passed before {what}")

    def _connect(self) -> Any:
        left = self.deadline.left()
        if left <= 0:
            raise TimeoutError("domainstate call deadline passed before connecting")
        saved = self.socket_connect_timeout
        if left != math.inf:
            self.socket_connect_timeout = min(saved or left, left)
        try:
            sock = super()._connect()  # type: ignore[safe-super]  # the URL's class, next in the MRO
        finally:
            self.socket_connect_timeout = saved
        self.deadline.connects += 1
        return sock

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        if self.deadline.left() <= 0:
            raise self._expired("sending")
        super().send_packed_command(command, check_health)

    def read_response(self, disable_decoding: bool = False, *, timeout: Any = SENTINEL, **kwargs: Any) -> Any:
        deadline = self.deadline
        left = deadline.left()
        if left <= 0:
            raise self._expired("the reply")
        if left != math.inf:
            cap = timeout if isinstance(timeout, (int, float)) else self.socket_timeout
            timeout = min(cap, left) if cap else left
        started = time.monotonic()
        try:
            return super().read_response(disable_decoding, timeout=timeout, **kwargs)
        finally:
            deadline.worst = max(deadline.worst, time.monotonic() - started)


def _connection_class(url: str, deadline: _Deadline) -> type[AbstractConnection]:
    """:class:`_DeadlineConnection` over the URL's own connection class, bound to ``deadline``."""
    base = parse_url(url).get("connection_class", Connection)
    return type(f"Deadline{base.__name__}", (_DeadlineConnection, base), {"deadline": deadline})


_PIPELINE_ARGS = re.compile(r"Command # (\d+) \((\S+).*\) of pipeline caused error", re.DOTALL)


def _reason(exc: BaseException) -> str:
    """An error as logs and messages may show it: redis-py quotes a failed pipeline command
    with its arguments (record bytes, keys); only the command's name is kept."""
    text = _PIPELINE_ARGS.sub(r"Command # \1 (\2 ...) of pipeline caused error", str(exc).rstrip("."))
    text = "".join(c if c.isprintable() else "?" for c in text)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _log_exc_info(exc: BaseException) -> tuple[type[BaseException], BaseException, Any]:
    """``exc_info`` for a log record: the traceback, with the message cleaned by :func:`_reason`
    and without the chained exceptions (whose messages may quote record bytes)."""
    try:
        clean = type(exc)(_reason(exc).partition(": ")[2])
    except Exception:
        clean = RedisError(_reason(exc))
    return type(exc), clean, exc.__traceback__


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


def _reactor_running() -> bool:
    """A crawl's reactor runs (never imported here: that would install the default one)."""
    import sys

    reactor = sys.modules.get("twisted.internet.reactor")
    return bool(getattr(reactor, "running", False))


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
    #: The most one read (a decision's GET) may take, connecting included; past it the call
    #: is cut, the read answers "not stored" and both breakers open (Redis is slow).
    read_deadline = 0.2
    #: The most one flush may take, every round trip and retry included.
    write_deadline = 0.6
    #: A flush starts no new chunk after this long: the rest stay buffered for the next one
    #: (a large backlog is written in slices of this size, never in one long call).
    flush_budget = 0.25
    #: A call that waited longer than this for one reply was slow; ``slow_threshold`` slow
    #: calls in a row open both breakers (a Redis slow but within the deadlines).
    slow_reply = 0.05
    slow_threshold = 3
    #: How long close() may write what is still buffered.
    close_deadline = 10.0
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
    #: The read cache (a crawl's decisions, see :mod:`scrapy_domainstate.store._readcache`): a record
    #: a decision uses is read again from Redis every ``refresh`` seconds (``?refresh=`` in the
    #: URL), and one older than ``max_age`` is read again before a request is decided on it
    #: (``?max_age=``): the staleness bound of a decision while Redis answers.
    refresh = 0.4
    max_age = 0.75

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
        # Two circuit breakers (a fixed wait of breaker_seconds): reads and writes fail apart
        # (a Redis at maxmemory refuses writes and still serves reads); a lost connection or a
        # slow Redis opens both. Slow calls open them after slow_threshold in a row.
        self.read_breaker = self._new_breaker()
        self.write_breaker = self._new_breaker()
        self._outage: str | None = None
        self._deadline = _Deadline()
        self._connects_seen = 0
        self._marker: bytes | None = None
        self.errors = 0
        self.dropped = 0
        self.short_circuits = 0
        self.conflicts = 0
        #: Calls cut at their deadline or slow (a reply waited over slow_reply).
        self.slow_calls = 0
        #: Times Redis was found to have come back empty (the marker key gone).
        self.emptied = 0
        # Flush bookkeeping.
        self._auto_flush = False
        self._written: set[str] = set()
        self._unconfirmed: dict[str, dict[str, list[RecentEntry]]] = {}
        self._done_tokens: list[str] = []
        self._lru_updates: dict[str, float] = {}
        self._lru_size = 0
        self._url_pending: dict[str, float] = {}
        self._budget_end = math.inf
        #: The read cache, started by the first prefetch() while a reactor runs (a crawl).
        self.cache: ReadCache | None = None
        self._reader: tuple[str, dict[str, Any], bool] | None = None
        self._reader_client: Any = None
        self._reader_deadline = _Deadline()
        self._slow_reads = 0

    # ------------------------------------------------------------ lifecycle

    @property
    def url(self) -> str | None:
        return self.config.redis_url

    def append_log(self, name: str, line: str, keep: int) -> None:
        """The log is a Redis list, ``<prefix><name>``, newest first."""
        client = self._require()
        client.lpush(f"{self.prefix}{name}", line)
        client.ltrim(f"{self.prefix}{name}", 0, keep - 1)

    def read_log(self, name: str, keep: int) -> list[str]:
        raw = self._require().lrange(f"{self.prefix}{name}", 0, keep - 1)
        return [x.decode("utf-8", "replace") if isinstance(x, bytes) else x for x in reversed(raw)]

    def describe(self) -> str:
        return f"redis {mask_url(self.url)} (prefix {self.prefix!r})"

    def open(self, readonly: bool = False) -> None:
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
        try:
            url = self._take_url_options(url)
            kwargs: dict[str, Any] = {
                "socket_timeout": self.socket_timeout,
                "socket_connect_timeout": self.socket_connect_timeout,
                "retry": Retry(NoBackoff(), 0),
                # every connect/send/reply bounded by the call's deadline; no CLIENT SETINFO or
                # MAINT_NOTIFICATIONS round trips on each reconnect
                "connection_class": _connection_class(url, self._deadline),
                "driver_info": None,
                "maint_notifications_config": MaintNotificationsConfig(enabled=False),
            }
            client: redis.Redis | redis.RedisCluster = redis.Redis.from_url(url, **kwargs)
            pool_kwargs = getattr(client, "connection_pool", None)
            for name, value in getattr(pool_kwargs, "connection_kwargs", {}).items():
                # (redis-py refuses these only once connected, leaving its socket open)
                if name in ("socket_timeout", "socket_connect_timeout") and value is not None and not value >= 0:
                    raise ValueError(f"{name} must be >= 0, got {value!r}")
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
        self._reader = (url, kwargs, self._cluster)
        self._per_domain = self._cluster and not _has_hash_tag(self.prefix)
        self._evict_script = None if self._cluster else client.register_script(_EVICT_LUA)
        self.read_breaker.reset()
        self.write_breaker.reset()
        self._outage = None
        self._marker = self._open_marker()
        self._connects_seen = self._deadline.connects
        logger.info(
            "scrapy-domainstate: Redis store at %s (prefix %r%s)",
            masked,
            self.prefix,
            ", cluster, one transaction per domain" if self._per_domain else (", cluster" if self._cluster else ""),
        )

    #: The store's own URL parameters (seconds): taken out of the URL before redis-py sees it.
    URL_OPTIONS = ("read_deadline", "write_deadline", "slow_reply", "refresh", "max_age")

    def _take_url_options(self, url: str) -> str:
        """Set :attr:`URL_OPTIONS` given in the URL's query (``?read_deadline=0.5``) on this
        store; the URL without them. A Redis far away (tens of ms a round trip) needs them."""
        parts = urlsplit(url)
        if not any(name in parts.query for name in self.URL_OPTIONS):
            return url
        kept = []
        for name, value in parse_qsl(parts.query, keep_blank_values=True):
            if name not in self.URL_OPTIONS:
                kept.append((name, value))
                continue
            try:
                seconds = float(value)
            except ValueError:
                seconds = -1.0
            if not 0 < seconds < math.inf:
                raise ValueError(f"{name}={value!r} must be a positive number of seconds")
            setattr(self, name, seconds)
        return urlunsplit(parts._replace(query=urlencode(kept)))

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
            self._stop_cache()  # (no more reads: the reader's last reply is not an outage of this store)
            self._flush(force=True)
            if self._done_tokens:
                self._unlink_quietly(self._done_tokens)
        except StoreError as exc:
            lost = self._n_pending + len(self._url_pending)
            logger.error(
                "scrapy-domainstate: closing %s with %d buffered outcomes not written: %s", self.describe(), lost, exc
            )
            raise StoreError(f"{exc} ({lost} buffered outcomes were not written)") from exc
        finally:
            self._stop_cache()
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

    # ----------------------------------------------------- circuit breakers

    def _new_breaker(self) -> CircuitBreaker:
        return CircuitBreaker(self.slow_threshold, self.breaker_seconds, max_cooldown=self.breaker_seconds)

    def _tune(self, breaker: CircuitBreaker) -> CircuitBreaker:
        # breaker_seconds and slow_threshold may be changed on the instance: a fixed wait, never doubled.
        breaker.base_cooldown = breaker.cooldown = breaker.max_cooldown = self.breaker_seconds
        breaker.threshold = max(1, self.slow_threshold)
        return breaker

    @property
    def _down_until(self) -> float:
        """When the breakers' wait ends (monotonic clock; 0: both closed). Setting 0 closes them."""
        return max(self.read_breaker.open_until(), self.write_breaker.open_until())

    @_down_until.setter
    def _down_until(self, value: float) -> None:
        if not value:
            self.read_breaker.reset()
            self.write_breaker.reset()

    def _available(self) -> bool:
        """Whether a write may be tried now."""
        return self.write_breaker.allow()

    def _breakers(self, exc: BaseException | None, kind: str) -> tuple[CircuitBreaker, ...]:
        """The breakers a failure opens: both when the connection failed or was slow, else the
        one of the call (Redis refusing writes at maxmemory still serves reads)."""
        if exc is None or isinstance(exc, _CONNECTION_ERRORS):
            return (self.read_breaker, self.write_breaker)
        return (self.read_breaker,) if kind == "read" else (self.write_breaker,)

    @staticmethod
    def _outage_kind(exc: BaseException, kind: str) -> str:
        if isinstance(exc, (redis.TimeoutError, TimeoutError)):
            return "slow"
        if isinstance(exc, _CONNECTION_ERRORS) or kind == "read":
            return "down"
        return "writes"

    def _failed(self, exc: BaseException, what: str, kind: str = "write") -> None:
        """A call failed: open its breaker(s) at once; the first failure of an outage warns."""
        self.errors += 1
        if isinstance(exc, (redis.TimeoutError, TimeoutError)):
            self.slow_calls += 1
        for breaker in self._breakers(exc, kind):
            # allow() first: a breaker whose wait is over starts a new one now (the other
            # breaker's trial just failed: no second trial right after it)
            self._tune(breaker).allow()
            breaker.failure(hard=True)
        self._outage_begins(self._outage_kind(exc, kind), what, exc)

    def _succeeded(self, kind: str) -> None:
        """A call answered: close its breaker, unless it was slow (``slow_threshold`` slow calls
        in a row open both); after a reconnect, check that Redis did not come back empty."""
        deadline = self._deadline
        own = self.read_breaker if kind == "read" else self.write_breaker
        if deadline.worst > self.slow_reply:
            self.slow_calls += 1
            if own.state == CircuitBreaker.CLOSED:
                # counted while closed; a trial call that answered within its deadline closes
                opened = [
                    self._tune(b).failure() for b in self._breakers(None, kind) if b.state == CircuitBreaker.CLOSED
                ]
                if any(opened):
                    self._outage_begins("slow", kind, None)
                return
        own.success()
        if self._outage is not None and self.read_breaker.state == self.write_breaker.state == CircuitBreaker.CLOSED:
            self._outage_ends()
        if deadline.connects != self._connects_seen:
            self._check_marker()

    def _outage_begins(self, kind: str, what: str, exc: BaseException | None) -> None:
        if self._outage is not None:
            logger.debug(
                "scrapy-domainstate: Redis store still failing (%s): %s", what, _reason(exc) if exc else "slow"
            )
            return
        self._outage = kind
        describe, buffered, wait = self.describe(), self._n_pending, self.breaker_seconds
        if kind == "writes":
            assert exc is not None
            logger.warning(
                "scrapy-domainstate: Redis store %s refuses writes (%s): %s. Decisions still read Redis; "
                "outcomes stay buffered (%d now); retrying every %.1f s",
                describe,
                what,
                _reason(exc),
                buffered,
                wait,
            )
            return
        if kind == "slow":
            reason = _reason(exc) if exc else f"{self.slow_threshold} calls in a row waited over {self.slow_reply:g} s"
            logger.warning(
                "scrapy-domainstate: Redis store %s is too slow (%s): %s. Requests are decided as for unknown domains "
                "and outcomes stay buffered (%d now); retrying every %.1f s (a read may take %g s, a flush %g s)",
                describe,
                what,
                reason,
                buffered,
                wait,
                self.read_deadline,
                self.write_deadline,
            )
            return
        assert exc is not None
        logger.warning(
            "scrapy-domainstate: Redis store %s failed (%s): %s. Requests are decided as for unknown domains "
            "and outcomes stay buffered (%d now); retrying every %.1f s",
            describe,
            what,
            _reason(exc),
            buffered,
            wait,
            exc_info=_log_exc_info(exc),
        )

    def _outage_ends(self) -> None:
        kind, self._outage = self._outage, None
        logger.info(
            "scrapy-domainstate: Redis store %s %s (%d errors so far, %d outcomes buffered)",
            self.describe(),
            "accepts writes again" if kind == "writes" else "reachable again",
            self.errors,
            self._n_pending,
        )

    # ------------------------------------------------------------ marker key

    @property
    def _marker_key(self) -> str:
        return f"{self.prefix}marker"

    def _get_or_set_marker(self) -> bytes | None:
        client, key = self._client, self._marker_key
        value = client.get(key)
        if value is None:
            client.set(key, uuid.uuid4().hex.encode("ascii"), nx=True)
            value = client.get(key)
        return value

    def _open_marker(self) -> bytes | None:
        """At open: the marker key's value (set now if missing); ``None`` if Redis refuses it."""
        try:
            return self._get_or_set_marker()
        except RedisError as exc:
            logger.debug("scrapy-domainstate: no Redis marker key at open: %s", _reason(exc))
            return None

    def _check_marker(self) -> None:
        """After a reconnect: the marker key seen at open gone (or another one in its place)
        means Redis came back empty. Said once per time it happens, counted in ``emptied``."""
        try:
            value = self._get_or_set_marker()
        except RedisError as exc:
            logger.debug("scrapy-domainstate: cannot check the Redis marker key: %s", _reason(exc))
            return
        self._connects_seen = self._deadline.connects
        known, self._marker = self._marker, value
        if known is None or value == known:
            return
        self.emptied += 1
        logger.warning(
            "scrapy-domainstate: Redis store %s came back empty (its marker key %r is gone): Redis restarted without "
            "persistence or its data was flushed, and what the crawlers had learned is lost; it is learned "
            "again. Run Redis with appendonly yes to keep it",
            self.describe(),
            self._marker_key,
        )

    # ------------------------------------------------------------ read cache

    def prefetch(self, domains: tuple[str, ...]) -> Any:
        """The read cache's answer (see :mod:`scrapy_domainstate.store._readcache`): ``None`` when
        these domains' records (and the first one's dead-URL mark) are cached, else a Deferred
        fired once the reader thread has read them. Outside a running reactor (a script, the
        operators' commands): ``None``, and decisions read Redis as they come."""
        cache = self.cache
        if cache is None:
            if self._client is None or not _reactor_running():
                return None
            cache = self._start_cache()
        keys = [f"{self.prefix}d:{{{domain}}}" for domain in domains]
        keys.append(f"{self.prefix}u:domain:{domains[0]}")  # (DeadUrls' per-domain mark)
        return cache.want(keys)

    def _start_cache(self) -> ReadCache:
        from twisted.internet import reactor

        self.cache = ReadCache(
            self._reader_fetch,
            self._reader_report,
            self.refresh,
            max(self.max_age, self.refresh),
            self.breaker_seconds,
            reactor.callFromThread,  # type: ignore[attr-defined]
        ).start()
        return self.cache

    def _stop_cache(self) -> None:
        cache, self.cache = self.cache, None
        if cache is not None:
            cache.stop()
        client, self._reader_client = self._reader_client, None
        if client is not None:
            client.close()

    def _reader_fetch(self, keys: list[str]) -> tuple[list[Any], float]:
        """In the reader thread: one MGET on the reader's own connection, within read_deadline."""
        client = self._reader_client
        if client is None:
            assert self._reader is not None
            url, kwargs, cluster = self._reader
            kwargs = {**kwargs, "connection_class": _connection_class(url, self._reader_deadline)}
            client = (redis.RedisCluster if cluster else redis.Redis).from_url(url, **kwargs)
            self._reader_client = client
        deadline = self._reader_deadline
        deadline.start(self.read_deadline)
        try:
            values = client.mget_nonatomic(keys) if self._cluster else client.mget(keys)
        finally:
            deadline.end()
        return values, deadline.worst

    def _reader_report(self, exc: BaseException | None, worst: float, short: bool) -> None:
        """On the reactor thread: a reader round trip's outcome, for the breakers and counters."""
        if short:
            self.short_circuits += 1
            return
        if exc is not None:
            self._slow_reads = 0
            self._failed(exc, "read", "read")
            return
        if worst > self.slow_reply:
            self.slow_calls += 1
            self._slow_reads += 1
            if self._slow_reads >= self.slow_threshold:
                self._slow_reads = 0
                self._failed(
                    redis.TimeoutError(f"{self.slow_threshold} reads in a row waited over {self.slow_reply:g} s"),
                    "read",
                    "read",
                )
            return
        self._slow_reads = 0
        self.read_breaker.success()
        if self._outage is not None and self.read_breaker.state == self.write_breaker.state == CircuitBreaker.CLOSED:
            self._outage_ends()

    def _cached(self, key: str) -> bytes | None:
        """The cached value of ``key`` if the cache holds it, else a read of Redis (as before)."""
        cache = self.cache
        if cache is not None:
            entry = cache.entries.get(key)
            if entry is not None:
                entry.used = True
                return entry.raw
        return self._read(key)

    # -------------------------------------------------------------- reading

    def _read(self, key: str) -> bytes | None:
        """GET on the hot path: ``None`` when missing, unreachable, slow or short-circuited."""
        client = self._require()
        if not self.read_breaker.allow():
            self.short_circuits += 1
            return None
        deadline = self._deadline
        deadline.start(self.read_deadline)
        try:
            raw = client.get(key)
            self._succeeded("read")
        except ResponseError as exc:
            if str(exc).startswith("WRONGTYPE"):
                return b""  # not one of our records: decodes as corrupt
            self._failed(exc, "read", "read")
            return None
        except RedisError as exc:
            self._failed(exc, "read", "read")
            return None
        finally:
            deadline.end()
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
        raw = self._cached(self._rkey(domain))
        return None if raw is None else self._decode(domain, raw)

    def _record_for_decide(self, domain: str, now: float) -> DomainStat | bytes | None:
        """:meth:`DomainStore.decide`'s lookup: this process's view, else the stored bytes from
        the read cache (marked used, so the reader keeps it fresh) or, without one, one ``GET``."""
        view = self._view.get(domain)
        if view is not None:
            return view
        key = self._rkey(domain)
        cache = self.cache
        entry = None if cache is None else cache.entries.get(key)
        if entry is not None:
            entry.used = True
            return entry.raw
        return self._read(key)

    def _current_for_decide(self, domain: str, raw: bytes, now: float) -> DomainStat | None:
        """The whole record at ``now``, decoded once per cached reply (the record as it stands
        while it holds), not at every decision."""
        cache = self.cache
        entry = None if cache is None else cache.entries.get(self._rkey(domain))
        if entry is not None and entry.raw is not raw:
            entry = None  # replaced by the reader meanwhile: not this reply's record
        stat = None if entry is None else entry.current
        if stat is None or not self.policy.stands(stat, now):  # brought to an earlier now: still so?
            stat = self._decode_or_none(domain, raw)
            if stat is not None:
                stat = self.policy.current(stat, domain, now)
                if entry is not None:
                    entry.current = stat
        return stat

    # ------------------------------------------------------- URL dead marks

    def url_dead_until(self, fingerprint: str) -> float | None:
        until = self._url_pending.get(fingerprint)
        if until is not None:
            return until
        raw = self._cached(self._ukey(fingerprint))
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
        if self.cache is None and self._available():  # (in a crawl, the next flush writes it)
            deadline = self._deadline
            deadline.start(self.read_deadline)  # one round trip on the hot path, like a read
            try:
                client.set(self._ukey(fingerprint), repr(float(until)), pxat=self._url_expiry_ms(until))
                self._succeeded("write")
                return
            except RedisError as exc:
                self._failed(exc, "mark URL dead")
            finally:
                deadline.end()
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
        cache = self.cache
        for fingerprint, until in marks.items():
            self._url_pending.pop(fingerprint, None)
            if cache is not None:
                cache.put(self._ukey(fingerprint), repr(until).encode("ascii"))

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
                logger.debug("scrapy-domainstate: flush deferred: %s", exc)
                return 0
            raise

    def _flush(self, force: bool) -> int:
        """One flush within :attr:`write_deadline` (:attr:`close_deadline` when ``force``), which
        starts no chunk after :attr:`flush_budget` (no limit when ``force``)."""
        if not (self._pending or self._url_pending or self._unconfirmed or self._lru_updates):
            return 0
        self._require()
        if not force and not self._available():
            self.short_circuits += 1
            raise StoreError(
                f"{self.describe()} unavailable: {self._n_pending} outcomes stay buffered "
                f"(next attempt within {self.breaker_seconds:g} s)"
            )
        deadline = self._deadline
        if force:
            deadline.start(self.close_deadline)
        elif self.write_breaker.state == CircuitBreaker.HALF_OPEN:
            deadline.start(min(self.read_deadline, self.write_deadline))  # a trial: as short as a read
        else:
            deadline.start(self.write_deadline)
        self._budget_end = math.inf if force else time.monotonic() + self.flush_budget
        try:
            return self._flush_within_deadline()
        finally:
            deadline.end()

    def _flush_within_deadline(self) -> int:
        try:
            self._resolve_unconfirmed()
            self._flush_urls()
            if self._lru_updates and not self._pending:
                self._post_per_domain()
        except RedisError as exc:
            self._failed(exc, "flush")
            raise StoreError(
                f"{self.describe()}: write failed: {_reason(exc)}"
            ) from None  # (the cause quotes record bytes)
        if not self._pending:
            self._succeeded("write")
            return 0
        batch, n = self._pending, self._n_pending
        self._pending, self._n_pending = {}, 0
        self._written = set()
        try:
            self._write_batch(batch)
        except BaseException:
            self._restore_unwritten(batch)
            raise
        if len(self._written) < len(batch):
            # out of budget: the rest stay buffered for the next flush
            n = sum(len(batch[domain]) for domain in self._written)
            self._restore_unwritten(batch)
            return n
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
                if self.cache is not None:  # (it holds the record as it was before that write)
                    self.cache.drop(self._rkey(domain))
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
        budget_end = self._budget_end
        try:
            if self._per_domain:
                for i, (domain, entries) in enumerate(items):
                    if i and time.monotonic() > budget_end:
                        break
                    out[domain] = self._tx_domain(domain, entries)
                self._post_per_domain()
            else:
                for i in range(0, len(items), self.chunk_size):
                    if i and time.monotonic() > budget_end:
                        break
                    out.update(self._tx_chunk(items[i : i + self.chunk_size]))
        except RedisError as exc:
            self._failed(exc, "write")
            raise StoreError(
                f"{self.describe()}: write failed: {_reason(exc)}"
            ) from None  # (the cause quotes record bytes)
        self._succeeded("write")
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
                encoded = [encode(stat) for stat in results.values()]
                for key, stat, raw in zip(keys, results.values(), encoded, strict=True):
                    pipe.set(key, raw, pxat=self._expiry_ms(stat))
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
            cache = self.cache
            if cache is not None:
                for key, raw in zip(keys, encoded, strict=True):
                    cache.put(key, raw)
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
                encoded = encode(stat)
                pipe.set(key, encoded, pxat=self._expiry_ms(stat))
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
            if self.cache is not None:
                self.cache.put(key, encoded)
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
            logger.debug("scrapy-domainstate: could not delete Redis write tokens (they expire): %s", exc)

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
            if self.cache is not None:
                self.cache.put(key, encode(stat))
            if self._lru_size > self.config.max_domains:
                self._evict()
        except RedisError as exc:
            raise StoreError(f"{self.describe()}: cannot write {stat.domain}: {_reason(exc)}") from None

    def _delete(self, domain: str) -> bool:
        client = self._require()
        try:
            with client.pipeline(transaction=not self._per_domain) as pipe:
                pipe.unlink(self._rkey(domain))
                pipe.zrem(self._lru_key, domain)
                deleted = pipe.execute()[0]
            if self.cache is not None:
                self.cache.put(self._rkey(domain), None)
        except RedisError as exc:
            raise StoreError(f"{self.describe()}: cannot delete {domain}: {_reason(exc)}") from exc
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
            raise StoreError(f"{self.describe()}: clear failed: {_reason(exc)}") from exc
        self._unconfirmed.clear()
        self._done_tokens.clear()
        self._lru_updates.clear()
        self._url_pending.clear()
        self._lru_size = 0
        if self.cache is not None:
            self.cache.clear()
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
            raise StoreError(f"{self.describe()}: cannot list records: {_reason(exc)}") from exc

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
            raise StoreError(f"{self.describe()}: cannot count records: {_reason(exc)}") from exc

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
            raise StoreError(f"{self.describe()}: sweep failed: {_reason(exc)}") from exc
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
