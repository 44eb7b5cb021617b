"""What the plugin costs a crawl: the same crawl with the plugin on (warm store) and off.

Usage::

    python benchmarks/overhead.py [--urls 3000] [--hosts 300] [--rounds 3]

A loopback web server (a separate process) serves ``--hosts`` sites with a
contact page each; the crawl requests ``--urls`` URLs spread over them. The
store is warmed first (one crawl with the plugin, so every site is
``friendly``); then crawls with the plugin **on** and **off** alternate, each
in a fresh process, and the script prints the wall-time ratio and the plugin's
own time per request (measured around its middleware methods, its spider
middleware and its store flushes). Names resolve through the table resolver of
``scrapy_domainstate.testing``: no traffic leaves loopback.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SERVER = r"""
import sys
from twisted.internet import reactor
from twisted.web import resource, server

PAGE = b"<html><body><h1>%s</h1><p>Write to <a href='mailto:info@%s'>info@%s</a>.</p>" + b"<p>text</p>" * 50 + b"</body></html>"

class Page(resource.Resource):
    isLeaf = True
    def render(self, request):
        host = (request.getHeader("host") or "x").split(":")[0].encode()
        request.setHeader(b"content-type", b"text/html; charset=utf-8")
        if request.method == b"HEAD":
            return b""
        return PAGE % (host, host, host)

port = reactor.listenTCP(0, server.Site(Page()), interface="127.0.0.1")
print(port.getHost().port, flush=True)
reactor.run()
"""


def child(args: argparse.Namespace) -> None:
    from scrapy import Request, Spider
    from scrapy.crawler import CrawlerProcess

    timings = {"ns": 0, "calls": 0}

    def timed(fn):  # type: ignore[no-untyped-def]
        def wrapper(*a, **kw):  # type: ignore[no-untyped-def]
            t0 = time.perf_counter_ns()
            try:
                return fn(*a, **kw)
            finally:
                timings["ns"] += time.perf_counter_ns() - t0
                timings["calls"] += 1

        return wrapper

    if args.mode == "on":
        from scrapy_domainstate import manager

        for name in ("before_request", "after_response", "after_exception", "record_items", "flush", "close"):
            setattr(manager.DomainStateManager, name, timed(getattr(manager.DomainStateManager, name)))

    urls = [f"http://site-{i % args.hosts}.test:{args.port}/page/{i}" for i in range(args.urls)]

    class Bench(Spider):
        name = "bench"

        async def start(self):  # type: ignore[no-untyped-def]
            for url in urls:
                yield Request(url, dont_filter=True)

        def parse(self, response):  # type: ignore[no-untyped-def]
            return None

    settings = {
        "LOG_LEVEL": "ERROR",
        "TWISTED_DNS_RESOLVER": "scrapy_domainstate.testing.resolver.TableResolver",
        "CONCURRENT_REQUESTS": 64,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 8,
        "ROBOTSTXT_OBEY": False,
        "TELNETCONSOLE_ENABLED": False,
        "RETRY_ENABLED": False,
        "COOKIES_ENABLED": False,
        "DNSCACHE_ENABLED": True,
        "DOMAINSTATE_LMDB_PATH": args.store,
    }
    if args.mode == "on":
        settings["ADDONS"] = {"scrapy_domainstate.Addon": 0}
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(Bench)
    process.crawl(crawler)
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    process.start()
    wall = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    stats = crawler.stats.get_stats()
    print(
        json.dumps(
            {
                "wall": wall,
                "cpu": cpu,
                "responses": stats.get("response_received_count", 0),
                "plugin_ns": timings["ns"],
                "plugin_calls": timings["calls"],
                "methods": {k: v for k, v in stats.items() if k.startswith("domainstate/method/")},
            }
        )
    )


def run_child(mode: str, args: argparse.Namespace, port: int, store: str) -> dict[str, float]:
    cmd = [
        sys.executable,
        __file__,
        "--child",
        mode,
        "--port",
        str(port),
        "--store",
        store,
        "--urls",
        str(args.urls),
        "--hosts",
        str(args.hosts),
    ]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--urls", type=int, default=3000)
    parser.add_argument("--hosts", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", choices=("on", "off"), dest="mode", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mode:
        child(args)
        return 0

    server = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        with tempfile.TemporaryDirectory() as tmp:
            store = os.path.join(tmp, "ds")
            warm = run_child("on", args, port, store)
            print(f"warm-up crawl (plugin on, cold store): {warm['responses']} responses, {warm['wall']:.2f} s")
            walls: dict[str, list[float]] = {"on": [], "off": []}
            cpus: dict[str, list[float]] = {"on": [], "off": []}
            per_request_us: list[float] = []
            last_methods: dict[str, int] = {}
            for i in range(args.rounds):
                order = ("off", "on") if i % 2 == 0 else ("on", "off")
                for mode in order:
                    res = run_child(mode, args, port, store)
                    walls[mode].append(res["wall"])
                    cpus[mode].append(res["cpu"])
                    if mode == "on":
                        per_request_us.append(res["plugin_ns"] / 1000 / max(res["responses"], 1))
                        last_methods = res["methods"]
                    print(f"round {i + 1} plugin {mode:3}: {res['wall']:.2f} s wall, {res['cpu']:.2f} s CPU")
    finally:
        server.terminate()
        server.wait()

    on, off = statistics.median(walls["on"]), statistics.median(walls["off"])
    con, coff = statistics.median(cpus["on"]), statistics.median(cpus["off"])
    print()
    print(f"URLs per crawl:                 {args.urls} over {args.hosts} sites (warm store: all friendly)")
    print(f"decisions in the last 'on' run: {last_methods}")
    print(f"median wall time, plugin off:   {off:.2f} s")
    print(f"median wall time, plugin on:    {on:.2f} s")
    print(f"wall-time ratio on/off:         {on / off:.3f}   (target <= 1.03)")
    print(f"process CPU ratio on/off:       {con / coff:.3f}")
    print(f"plugin time per request:        {statistics.median(per_request_us):.1f} us   (target <= 30 us)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
