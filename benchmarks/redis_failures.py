#!/usr/bin/env python
"""Redis at ``maxmemory`` and Redis back empty: what the Redis store does.

Real ``redis-server`` processes on loopback, no crawl (``benchmarks/slow_redis.py`` is the
crawl behind a slow Redis):

``maxmemory``
    A server started with ``--maxmemory 4mb --maxmemory-policy noeviction`` holds one
    domain known to be dead; filler keys then fill it until it refuses writes. For
    ``--seconds`` (default 3) the store decides that domain and records outcomes of
    others (each flush fails), with the breakers' wait at 0.1 s so the write is retried
    often. Prints how many decisions were read from Redis (the dead domain skipped), the
    WARNINGs and "again" lines logged, whether any log text held record bytes, and the
    outcomes written once Redis has room again. Before the fix: the dead domain decided as
    new in most decisions, a WARNING (with the record's bytes) and a "reachable again" per
    retry.
``back empty``
    A server without persistence is restarted mid-run while the store works on; prints
    how many times the store said Redis came back empty (target: once).

Run ``python benchmarks/redis_failures.py --help``; ``--json`` prints the figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.policy import Decision
from scrapy_domainstate.core.record import DomainStat, Method, Outcome, RecentEntry, State
from scrapy_domainstate.store.codec import encode
from scrapy_domainstate.store.redis import RedisStore
from scrapy_domainstate.testing.redis_server import RedisServer

LOGGER = "scrapy_domainstate.store.redis"


class Captured(logging.Handler):
    """Every record of the store's logger, formatted (tracebacks included)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self.texts: list[str] = []
        self.setFormatter(logging.Formatter("%(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self.texts.append(self.format(record))

    def __enter__(self) -> Captured:
        log = logging.getLogger(LOGGER)
        self._level = log.level
        log.setLevel(logging.DEBUG)
        log.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        log = logging.getLogger(LOGGER)
        log.removeHandler(self)
        log.setLevel(self._level)

    def count(self, level: int, text: str = "") -> int:
        return sum(r.levelno == level and text in r.getMessage() for r in self.records)


def entry(at: float) -> RecentEntry:
    return RecentEntry(at, Method.FETCH, Outcome.OK_CONTACT, 200)


def maxmemory(tmp: Path, seconds: float) -> dict[str, Any]:
    now = time.time()
    args = ("--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
    with RedisServer(tmp / "full", extra_args=args) as server:
        store = RedisStore(Config(redis_url=server.url, redis_prefix="bench:oom:", flush_size=3))
        store.open()
        store.breaker_seconds = 0.1
        dead = DomainStat("dead.example", state=State.DEAD, first_seen=now, last_seen=now, state_expires_at=now + 1e6)
        store.put(dead)
        raw = redis.Redis.from_url(server.url)
        filler = 0
        try:
            while True:
                raw.set(f"filler:{filler}", b"x" * 4096)
                filler += 1
        except redis.exceptions.OutOfMemoryError:
            pass
        decisions = from_redis = 0
        with Captured() as log:
            until = time.monotonic() + seconds
            while time.monotonic() < until:
                decisions += 1
                from_redis += store.decide("dead.example", now + decisions)[0] is Decision.SKIP
                store.record(f"new{decisions % 7}.example", entry(now + decisions))
                time.sleep(0.005)
            buffered, retries = store.pending, store.errors
            raw.delete(*[f"filler:{i}" for i in range(filler)])
            time.sleep(store.breaker_seconds + 0.02)
            written = store.flush()
            store.close()
        raw.close()
    text = "\n".join(log.texts)
    return {
        "decisions": decisions,
        "decided_from_redis": from_redis,
        "write_retries": retries,
        "buffered": buffered,
        "written_after": written,
        "warnings": log.count(logging.WARNING),
        "again_lines": sum("again" in r.getMessage() for r in log.records),
        "record_bytes_in_logs": "d:{" in text or encode(dead)[:8].decode("latin-1") in text,
    }


def back_empty(tmp: Path) -> dict[str, Any]:
    now = time.time()
    with RedisServer(tmp / "volatile") as server:
        store = RedisStore(Config(redis_url=server.url, redis_prefix="bench:empty:", flush_size=1))
        store.open()
        store.breaker_seconds = 0.1
        store.record("known.example", entry(now))
        with Captured() as log:
            server.stop()
            server.start()  # no persistence: empty
            for i in range(60):
                store.decide("known.example", now + i)
                store.record("known.example", entry(now + i))
                time.sleep(0.01)
            store.close()
    return {
        "emptied": getattr(store, "emptied", 0),
        "came_back_empty_warnings": log.count(logging.WARNING, "came back empty"),
    }


def report(out: dict[str, Any]) -> str:
    m, e = out["maxmemory"], out["back_empty"]
    return "\n".join(
        [
            "Redis store, Redis at maxmemory (noeviction):",
            f"  {m['decided_from_redis']} of {m['decisions']} decisions of a known-dead domain read from Redis "
            f"(target: all); {m['write_retries']} write attempts refused, {m['buffered']} outcomes buffered, "
            f"{m['written_after']} written once Redis had room",
            f"  {m['warnings']} WARNING(s), {m['again_lines']} 'again' line(s) for the outage (target: 1 and 1); "
            f"record bytes in the logs: {'yes' if m['record_bytes_in_logs'] else 'no'}",
            "Redis restarted without persistence mid-run:",
            f"  'came back empty' said {e['came_back_empty_warnings']} time(s) (target: once); emptied = {e['emptied']}",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0, help="how long Redis stays full (default 3)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="redis-failures-"))
    out = {"maxmemory": maxmemory(tmp, args.seconds), "back_empty": back_empty(tmp)}
    print(json.dumps(out, indent=2) if args.json else report(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
