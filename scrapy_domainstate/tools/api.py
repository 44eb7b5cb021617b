"""The Python API for scripts and notebooks: :func:`open_store`.

::

    import scrapy_domainstate

    with scrapy_domainstate.open_store(".scrapy/domainstate") as store:
        store.get("example.com")                    # DomainStat, or None if never seen
        store.decide("https://example.com/contact") # what a crawl would do with it now
        for domain, stat in store.items():          # every record, expiry applied
            ...

It reads what a crawl wrote without starting one: no reactor, no crawler, no
signals. Read-only by default (LMDB opens read-only, safe while a crawl writes,
and nothing is ever created).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from scrapy_domainstate.core.clock import parse_ttl
from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.keys import domain_key
from scrapy_domainstate.core.policy import Decision
from scrapy_domainstate.core.record import DomainStat, State, parse_state
from scrapy_domainstate.store import DomainStore, StoreError, create_store
from scrapy_domainstate.tools.showtext import look, show_lines

__all__ = ["StoreHandle", "UrlDecision", "open_store"]

_LMDB = "scrapy_domainstate.store.lmdb.LmdbStore"
_REDIS = "scrapy_domainstate.store.redis.RedisStore"
_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


@dataclass(frozen=True)
class UrlDecision:
    """What a crawl would do now with a request to ``url``."""

    url: str
    domain: str
    state: State
    decision: Decision
    #: When the state expires (Unix seconds), or None.
    expires_at: float | None
    #: Why the decision is a skip: the domain's state, or ``"dead URL"`` (404/410).
    reason: str | None = None

    @property
    def skip(self) -> bool:
        return self.decision is Decision.SKIP


class StoreHandle:
    """An opened store, keyed by URL or domain. Build it with :func:`open_store`.

    ``store`` is the underlying :class:`~scrapy_domainstate.store.DomainStore` and
    ``config`` the :class:`~scrapy_domainstate.core.config.Config` it was built from.
    """

    def __init__(self, store: DomainStore, config: Config, *, readonly: bool) -> None:
        self.store = store
        self.config = config
        self.readonly = readonly

    # --------------------------------------------------------------- keys

    def key(self, url_or_domain: str) -> str:
        """The state key of a URL or a host (``https://shop.example.co.uk/`` -> ``example.co.uk``)."""
        key = domain_key(url_or_domain, self.config.per_hostname)
        if not key:
            raise ValueError(f"{url_or_domain!r} has no usable host name")
        return key

    # ------------------------------------------------------------ reading

    def get(self, url_or_domain: str, now: float | None = None) -> DomainStat | None:
        """The domain's record as a crawl would see it at ``now`` (expiry applied); None if never seen."""
        key = self.key(url_or_domain)
        stored = self.store.get(key)
        if stored is None:
            return None
        return self.store.policy.current(stored, key, time.time() if now is None else now)

    def decide(self, url: str, now: float | None = None) -> UrlDecision:
        """The decision a request to ``url`` would get at ``now``.

        A URL that answered 404/410 off its site root (the URL-level dead table)
        is a skip, as in a crawl; the URL's fingerprint is Scrapy's default one
        for a GET request.
        """
        key = self.key(url)
        when = time.time() if now is None else now
        decision, state, expires = self.store.decide(key, when)
        if decision is Decision.SKIP:
            return UrlDecision(url, key, state, decision, expires, f"domain {key} is {state}")
        if "://" in url:
            until = self.store.url_dead_until(_fingerprint(url))
            if until is not None and until > when:
                return UrlDecision(url, key, state, Decision.SKIP, expires, "dead URL")
        return UrlDecision(url, key, state, decision, expires)

    def items(self, now: float | None = None) -> Iterator[tuple[str, DomainStat]]:
        """Every ``(domain, record)`` of the store, expiry applied; read in chunks."""
        when = time.time() if now is None else now
        policy = self.store.policy
        for stat in self.store.iter_records():
            yield stat.domain, policy.current(stat, stat.domain, when)

    def __len__(self) -> int:
        return self.store.count()

    def __contains__(self, url_or_domain: object) -> bool:
        return isinstance(url_or_domain, str) and self.get(url_or_domain) is not None

    def describe(self) -> str:
        return self.store.describe()

    # ------------------------------------------------------------ writing

    def set_state(self, url_or_domain: str, state: State | str, ttl: float | str | None = "default") -> DomainStat:
        """Force a state, as ``scrapy domainstate set`` does. Needs ``readonly=False``.

        ``state`` is a :class:`State` or its name; ``ttl`` what ``set --ttl`` takes: seconds or
        a duration (``"12h"``, ``"7d"``), ``"none"``/``None`` for no TTL, ``"default"`` (or
        ``-1``) for the state's own TTL. Anything else (zero, negatives, ``"3x"``) raises
        :class:`ValueError` naming what is accepted, before anything is written.
        """
        self._writable("set_state")
        seconds = parse_ttl(ttl)
        return self.store.set_state(self.key(url_or_domain), parse_state(state), time.time(), seconds)

    def show(self, url_or_domain: str, now: float | None = None) -> str:
        """The text ``scrapy domainstate show`` prints for this URL or domain."""
        key = self.key(url_or_domain)
        return "\n".join(show_lines(look(self.store, url_or_domain, key, time.time() if now is None else now)))

    def reset(self, url_or_domain: str) -> DomainStat:
        """Back to ``unknown`` (probed again, recent history cleared). Needs ``readonly=False``."""
        return self.set_state(url_or_domain, State.UNKNOWN)

    def _writable(self, what: str) -> None:
        if self.readonly:
            raise StoreError(f"{what}: this store was opened read-only; use open_store(..., readonly=False)")

    # ---------------------------------------------------------- lifecycle

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> StoreHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = "read-only" if self.readonly else "read-write"
        return f"<StoreHandle {self.describe()} ({mode})>"


def _fingerprint(url: str) -> str:
    from scrapy import Request
    from scrapy.utils.request import fingerprint

    return fingerprint(Request(url)).hex()


def _config(path_or_settings: Any) -> Config:
    if path_or_settings is None:
        from scrapy.utils.project import get_project_settings

        return Config.from_settings(get_project_settings())
    if isinstance(path_or_settings, Config):
        return path_or_settings
    if isinstance(path_or_settings, (str, os.PathLike)):
        text = os.fspath(path_or_settings)
        if not text:
            raise ValueError("open_store: the path is empty")
        if text.startswith(_REDIS_SCHEMES):
            return Config(store=_REDIS, redis_url=text)
        # A path given to a script means what it says: relative to the working directory.
        return Config(store=_LMDB, lmdb_path=os.path.abspath(os.path.expanduser(text)))
    if isinstance(path_or_settings, Mapping) or hasattr(path_or_settings, "getbool"):
        return Config.from_settings(path_or_settings)
    raise TypeError(
        "open_store() takes an LMDB path, a redis:// URL, a Config, or settings "
        f"(a dict or scrapy Settings with DOMAINSTATE_* keys), got {type(path_or_settings).__name__}"
    )


def open_store(path_or_settings: Any = None, readonly: bool = True) -> StoreHandle:
    """Open the store a crawl uses, for a script or a notebook.

    ``path_or_settings`` is one of:

    * an LMDB directory (``".scrapy/domainstate"``; relative to the working
      directory) or a ``redis://`` URL;
    * settings, as a dict or Scrapy ``Settings`` with ``DOMAINSTATE_*`` keys
      (a relative ``DOMAINSTATE_LMDB_PATH`` lives in the project data directory,
      as in a crawl), or a :class:`~scrapy_domainstate.core.config.Config`;
    * ``None``: the settings of the Scrapy project in the working directory.

    ``readonly=True`` (the default) never writes and, for LMDB, never creates a
    database: a missing one raises :class:`~scrapy_domainstate.store.StoreError`
    naming the path. Use it as a context manager, or call ``close()``.
    """
    config = _config(path_or_settings)
    store = create_store(config)
    store.open(readonly=readonly)
    return StoreHandle(store, config, readonly=readonly)
