"""The reference service over HTTP: the Twisted resource of the API and its site.

:func:`make_site` builds everything (vote table, consensus store, service) and returns
the ``Site`` to listen with; the resource maps requests to :class:`DomainStateService`
calls and every refusal to a JSON error.
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from twisted.web import server
from twisted.web.resource import Resource

from scrapy_domainstate.core.config import Config
from scrapy_domainstate.fleet.connections import BoundedSite
from scrapy_domainstate.fleet.files import make_private
from scrapy_domainstate.fleet.limits import Limits
from scrapy_domainstate.fleet.protocol import API_PATH, STATS_PATH
from scrapy_domainstate.fleet.service import DomainStateService
from scrapy_domainstate.fleet.validation import ApiError, parse_domains, parse_reports
from scrapy_domainstate.fleet.votes import VoteTable
from scrapy_domainstate.store import DomainStore, MemoryStore, create_store

__all__ = ["make_site"]

logger = logging.getLogger(__name__)

_JSON = b"application/json; charset=utf-8"


class _Request(server.Request):
    """A request that keeps at most ``max_body`` bytes of its body (the rest is dropped)."""

    max_body = Limits().max_body

    def gotLength(self, length: int | None) -> None:
        self.body_size = 0
        self.body_too_large = length is not None and length > self.max_body
        self._buffer = io.BytesIO()  # never more than max_body bytes: no temporary file
        self.content = self._buffer

    def handleContentChunk(self, data: bytes) -> None:
        if self.body_too_large:
            return
        self.body_size += len(data)
        if self.body_size > self.max_body:
            self.body_too_large = True
            self._buffer.seek(0)
            self._buffer.truncate()
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
            logger.exception("scrapy-domainstate service: internal error")
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
            allowed: tuple[bytes, ...] = (b"GET", b"POST")
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
        reports = parse_reports(_json_body(request, service.limits.max_body), service.limits, service.clock())
        return 200, service.report(reporter, reports)


def _json_body(request: server.Request, max_body: int) -> bytes:
    """The body of a POST: UTF-8 JSON of at most ``max_body`` bytes; raises 415 or 413."""
    content_type = (request.getHeader(b"Content-Type") or b"").decode("latin-1")
    media, *params = (p.strip().lower() for p in content_type.split(";"))
    charset = next((p.partition("=")[2].strip('"') for p in params if p.startswith("charset=")), "utf-8")
    if media != "application/json" or charset not in ("utf-8", "utf8"):
        raise ApiError(415, "the body must be 'application/json' (UTF-8)", "Content-Type")
    too_large = ApiError(413, f"the body is larger than {max_body} bytes", "body")
    if getattr(request, "body_too_large", False) or request.content is None:
        raise too_large
    request.content.seek(0)
    body = request.content.read(max_body + 1)
    if len(body) > max_body:
        raise too_large
    return body


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
        make_private(db_path, 0o700)
        consensus = os.path.join(db_path, "consensus")
        os.makedirs(consensus, mode=0o700, exist_ok=True)
        make_private(consensus, 0o700)
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
            make_private(os.path.join(consensus, name), 0o600)
    service = DomainStateService(tokens, votes, store, config=config, limits=limits, clock=clock)
    site = BoundedSite(
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
