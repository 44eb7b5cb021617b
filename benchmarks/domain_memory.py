#!/usr/bin/env python
"""The plugin's own memory over a crawl of many distinct domains.

Drives the downloader middleware as Scrapy's component tests do (``get_crawler`` +
``build_from_crawler``, no engine, no network) with one request and its 404 response per
domain (``--domains`` distinct ones; a 404 off the root marks the URL dead, so the
dead-URL domain table sees every domain too), on an LMDB store in a temporary directory,
and prints after each step:

``domains``     distinct domains so far;
``seen``        entries of the manager's set of seen domains (the close tally);
``dead-url``    entries of the dead-URL domain table (a cache);
``heap MB``     the process's anonymous resident memory (``RssAnon``) minus what it
                was before the first request (the store's file pages are not in it).

``--direct`` skips the requests and responses (a millisecond each here) and drives the
two structures as a visit does: 1,000,000 domains in about a minute.

Usage: ``python benchmarks/domain_memory.py [--domains 1000000] [--max-domains 1000000] [--direct]``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scrapy import Spider
from scrapy.http import HtmlResponse, Request
from scrapy.utils.misc import build_from_crawler
from scrapy.utils.test import get_crawler

from scrapy_domainstate.middleware import DomainStateMiddleware
from scrapy_domainstate.runtime.deadurls import DeadUrls

_BODY = b"<html><body><p>No such page here.</p></body></html>"


class _Spider(Spider):
    name = "domain-memory"


def rss_anon_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024
    return 0.0


def middleware(db: str, max_domains: int) -> DomainStateMiddleware:
    crawler: Any = get_crawler(
        _Spider,
        {
            "DOMAINSTATE_STORE": "scrapy_domainstate.store.lmdb.LmdbStore",
            "DOMAINSTATE_LMDB_PATH": db,
            "DOMAINSTATE_MAX_DOMAINS": max_domains,
            "DOMAINSTATE_FLUSH_INTERVAL": 0,
            "LOG_LEVEL": "INFO",
        },
    )
    crawler.spider = crawler._create_spider()
    mw = build_from_crawler(DomainStateMiddleware, crawler)
    mw.manager.spider_opened()
    return mw


def visit(mw: DomainStateMiddleware, i: int) -> None:
    request = Request(f"https://site-{i}.example/missing/page")
    mw.process_request(request)
    mw.process_response(request, HtmlResponse(request.url, status=404, body=_BODY, request=request))


def touch(mw: DomainStateMiddleware, i: int, now: float) -> None:
    """``--direct``: what a visit does to the two per-domain structures, without the rest."""
    manager = mw.manager
    domain = f"site-{i}.example"
    if domain not in manager._seen:
        manager._see(domain)
    fingerprint = f"{i:040x}"
    if not manager.dead_urls.is_dead(domain, lambda: fingerprint, now) and i % 8 == 0:
        manager.dead_urls.mark(domain, lambda: fingerprint, now)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domains", type=int, default=1_000_000)
    parser.add_argument("--max-domains", type=int, default=1_000_000)
    parser.add_argument("--dead-url-cache", type=int, default=DeadUrls.max_domains, help="DeadUrls.max_domains")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument(
        "--direct", action="store_true", help="drive the seen set and the dead-URL table alone (fast: 1M in a minute)"
    )
    args = parser.parse_args()
    DeadUrls.max_domains = args.dead_url_cache
    tmp = tempfile.mkdtemp(prefix="domain-memory-")
    try:
        mw = middleware(str(Path(tmp) / "db"), args.max_domains)
        manager = mw.manager
        visit(mw, -1)  # warm: first-use imports and caches
        base = rss_anon_mb()
        print(f"DOMAINSTATE_MAX_DOMAINS={args.max_domains:,}, DeadUrls.max_domains={manager.dead_urls.max_domains:,}")
        print(f"{'domains':>10} {'seen':>10} {'dead-url':>10} {'heap MB':>8} {'us/domain':>9}")
        step = max(1, args.domains // args.steps)
        done = 0
        started = time.perf_counter()
        while done < args.domains:
            now = time.time()
            for i in range(done, min(done + step, args.domains)):
                if args.direct:
                    touch(mw, i, now)
                else:
                    visit(mw, i)
            done = min(done + step, args.domains)
            per = (time.perf_counter() - started) / done * 1e6
            seen, dead = len(manager._seen), len(manager.dead_urls._domains)
            print(f"{done:>10,} {seen:>10,} {dead:>10,} {rss_anon_mb() - base:>8.0f} {per:>9.0f}", flush=True)
        manager.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
