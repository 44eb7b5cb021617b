"""A real crawl killed with SIGKILL loses at most the documented second of outcomes.

Each child process runs Scrapy's real engine (``CrawlerProcess``) against its own loopback
:class:`~scrapy_domainstate.testing.sites.SiteServer` with the plugin's default flush
settings, and appends ``domain time`` to an acknowledgement file (``O_APPEND``, one
``write`` each) for every outcome the plugin records (its ``outcome_recorded`` signal).
The test kills it at a random moment of its crawl, then reads the LMDB store: every
outcome acknowledged more than :data:`BOUND` seconds before the kill must be on disk.

20 kills, five crawls at a time from one process that imported Scrapy once (each\ncrawl is a fork of it), so the test stays bounded (about 30 s on a quiet machine).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from scrapy_domainstate.core.config import SETTINGS, Config
from scrapy_domainstate.store.lmdb import LmdbStore
from tests import ROOT

KILLS = 20
AT_ONCE = 5
#: The documented bound (README "Failure modes"): DOMAINSTATE_FLUSH_INTERVAL (1 s by
#: default) plus the time one write transaction takes; 0.5 s of slack for busy CI machines.
FLUSH_INTERVAL = next(s.default for s in SETTINGS if s.name == "DOMAINSTATE_FLUSH_INTERVAL")
BOUND = FLUSH_INTERVAL + 0.5

#: A process that imports Scrapy once, then forks one crawler per line it reads
#: (``TMPDIR``), printing the crawler's pid: a crawl starts in a fraction of a second.
ZYGOTE = r"""
import os, signal, sys, time
from pathlib import Path

from scrapy import Request, Spider
from scrapy.crawler import CrawlerProcess
from scrapy_domainstate import signals as ds_signals
from scrapy_domainstate.testing.offline import loopback_only
from scrapy_domainstate.testing.sites import FRIENDLY, PAGES, SiteServer
import scrapy_domainstate.addon, scrapy_domainstate.runtime.lifecycle, scrapy_domainstate.store.lmdb  # noqa

HOSTS = 400
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel


def crawl(tmp):
    log = os.open(tmp / "child.log", os.O_WRONLY | os.O_CREAT, 0o600)
    os.dup2(log, 2)
    ack = os.open(tmp / "ack", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    class KilledSpider(Spider):
        name = "killed"

        @classmethod
        def from_crawler(cls, crawler, *args, **kwargs):
            spider = super().from_crawler(crawler, *args, **kwargs)
            crawler.signals.connect(spider.recorded, signal=ds_signals.outcome_recorded)
            return spider

        def recorded(self, domain, entry, **kwargs):
            os.write(ack, f"{domain} {time.time():.6f}\n".encode())

        async def start(self):
            server = SiteServer.start(tmp / "certs")
            for i in range(HOSTS):
                server.set_kind(f"h{i}.test", FRIENDLY)
            for path in PAGES:
                for i in range(HOSTS):
                    yield Request(server.url(f"h{i}.test", path), dont_filter=True)

        def parse(self, response):
            pass

    settings = {
        "ADDONS": {"scrapy_domainstate.Addon": 0},
        "DOMAINSTATE_LMDB_PATH": str(tmp / "db"),
        "DOMAINSTATE_HEAD_PROBE": False,
        "TWISTED_DNS_RESOLVER": "scrapy_domainstate.testing.resolver.TableResolver",
        "CONCURRENT_REQUESTS": 32,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 2,
        "DOWNLOAD_DELAY": 0,
        "RETRY_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        "TELNETCONSOLE_ENABLED": False,
        "HTTPERROR_ALLOW_ALL": True,
        "LOG_LEVEL": "WARNING",
    }
    with loopback_only():
        process = CrawlerProcess(settings)
        process.crawl(KilledSpider)
        process.start()


for line in sys.stdin:
    tmp = Path(line.strip())
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        try:
            crawl(tmp)
        finally:
            os._exit(0)
    print(pid, flush=True)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _acked(path: Path) -> dict[str, list[float]]:
    times: dict[str, list[float]] = defaultdict(list)
    for line in path.read_text().splitlines():
        domain, _, at = line.partition(" ")
        if at:  # a line cut by the kill has no time yet
            times[domain].append(float(at))
    return times


def _stored(db: Path) -> dict[str, int]:
    store = LmdbStore(Config(lmdb_path=str(db)), readonly=True)
    try:
        store.open()
    except Exception:  # killed before the first write: nothing stored
        if not (db / "data.mdb").exists():
            return {}
        raise
    try:
        return {stat.domain: stat.fetch_total for stat in store.iter_records()}
    finally:
        store.close()


def _after_kill(tmp: Path, pid: int, killed_at: float) -> dict[str, float]:
    """What the killed crawl in ``tmp`` recorded, stored and lost; checks the bound."""
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.005)
    acked = _acked(tmp / "ack")
    stored = _stored(tmp / "db")
    lost = [t for domain, times in acked.items() for t in sorted(times)[stored.get(domain, 0) :]]
    oldest_lost = max((killed_at - t for t in lost), default=0.0)
    result = {
        "acked": sum(len(t) for t in acked.values()),
        "stored": sum(stored.values()),
        "lost": len(lost),
        "oldest_lost_s": round(oldest_lost, 3),
    }
    assert oldest_lost <= BOUND, f"run {tmp.name}: lost an outcome {oldest_lost:.2f} s old: {result}"
    # Nothing stored that was not recorded (the last may be stored before its line is written).
    assert all(stored.get(d, 0) <= len(t) + 1 for d, t in acked.items())
    return result


def test_a_killed_crawl_loses_at_most_the_flush_interval(tmp_path: Path) -> None:
    assert FLUSH_INTERVAL == 1.0  # the documented default
    rng = random.Random(13)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    zygote = subprocess.Popen(
        [sys.executable, "-c", ZYGOTE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        cwd=str(tmp_path),
        text=True,
    )
    assert zygote.stdin is not None and zygote.stdout is not None
    results: list[dict[str, float]] = []
    started = time.monotonic()
    try:
        waiting = list(range(KILLS))
        active: dict[int, dict[str, float]] = {}
        while waiting or active:
            while waiting and len(active) < AT_ONCE:  # start the next crawls
                i = waiting.pop(0)
                tmp = tmp_path / f"kill-{i}"
                tmp.mkdir()
                zygote.stdin.write(f"{tmp}\n")
                zygote.stdin.flush()
                pid = int(zygote.stdout.readline())
                active[i] = {"pid": pid, "delay": rng.uniform(0.2, 2.5), "start": time.monotonic()}
            for i, run in list(active.items()):
                tmp = tmp_path / f"kill-{i}"
                ack = tmp / "ack"
                now = time.monotonic()
                if "kill_at" not in run:
                    # under way once it has recorded some outcomes: kill it after its random delay
                    if ack.exists() and ack.stat().st_size >= 200:
                        run["kill_at"] = now + run["delay"]
                    else:
                        log = tmp / "child.log"
                        assert _alive(int(run["pid"])) and now - run["start"] < 60, (
                            log.read_text()[-3000:] if log.exists() else "no log"
                        )
                    continue
                if now < run["kill_at"]:
                    continue
                assert _alive(int(run["pid"])), (
                    f"the crawl ended before it was killed: {(tmp / 'child.log').read_text()[-3000:]}"
                )
                killed_at = time.time()
                os.kill(int(run["pid"]), signal.SIGKILL)
                del active[i]
                results.append(_after_kill(tmp, int(run["pid"]), killed_at))
            time.sleep(0.01)
    finally:
        zygote.stdin.close()
        zygote.wait(30)
        zygote.stdout.close()
    elapsed = time.monotonic() - started
    print(json.dumps({"elapsed_s": round(elapsed, 1), "runs": results}))
    assert len(results) == KILLS
    assert all(r["acked"] >= 7 for r in results)  # every crawl was under way (200 bytes of acknowledgements)
