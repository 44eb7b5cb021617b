"""Fleets of crawlers, end to end, with real parts only (loopback, no mocks).

* three ``scrapy`` processes crawl the same sites at the same time through one real
  ``redis-server``: every outcome each of them saw is in Redis afterwards (no lost update);
* Redis goes away in the middle of a crawl and comes back: the crawl delivers every response,
  the stats show the outage, and the outcomes buffered meanwhile reach Redis while the crawl
  is still running; a Redis that is unreachable at start-up stops the crawl before it sends
  anything;
* two fleets share verdicts through the real service process (``python -m
  scrapy_domainstate.service``): what three reporters found dead, a fourth crawler skips
  without sending a request, while one reporter alone cannot make it skip a site;
* a shared-state service that is down costs a crawl nothing but counted errors.

Four tests pin fixes found by writing them: the crawl stops at start when Redis or the
service URL is unusable, a crawler reporting to the service closes cleanly, and a crawler
without HEAD probes still asks the fleet on first sight.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import pytest_twisted
from scrapy import signals
from scrapy.exceptions import DontCloseSpider, IgnoreRequest
from twisted.internet import reactor as _reactor
from twisted.internet.task import deferLater
from twisted.internet.threads import deferToThread

from scrapy_domainstate.core.config import Config, ConfigError
from scrapy_domainstate.core.record import DomainStat, State
from scrapy_domainstate.store.lmdb import LmdbStore
from scrapy_domainstate.testing.crawl import RecordingSpider
from scrapy_domainstate.testing.redis_server import RedisServer, require_redis_server
from scrapy_domainstate.testing.resolver import HOSTS_SETTING, NXDOMAIN
from tests import ROOT, SEED_READINGS
from tests.fleet.test_service import ServiceProcess, request

#: Real processes and real crawls, each test seconds long: run in CI, skipped by -m 'not slow'.
pytestmark = pytest.mark.slow

reactor: Any = _reactor
ADDON = {"scrapy_domainstate.Addon": 0}
REDIS_STORE = "scrapy_domainstate.store.redis.RedisStore"
RESOLVER = "scrapy_domainstate.testing.resolver.TableResolver"
PAGES = ("/", "/page1", "/page2", "/contact")


def pages(sites: Any, host: str, n: int) -> list[str]:
    return [sites.url(host, PAGES[i % len(PAGES)]) for i in range(n)]


def gets(sites: Any, host: str) -> int:
    return len(sites.requests(host, method="GET"))


def redis_records(url: str, domains: list[str]) -> dict[str, DomainStat | None]:
    """The records as they are in Redis, read by a store of the test's own."""
    from scrapy_domainstate.store.redis import RedisStore

    store = RedisStore(Config(redis_url=url))
    store.open()
    try:
        return {domain: store.get(domain) for domain in domains}
    finally:
        store.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server of this test only, with the append-only file on: data survives a restart."""
    require_redis_server()
    server = RedisServer(tmp_path / "redis", persist=True)
    server.start()
    yield server
    server.close()


# ------------------------------------------------- 1. three processes, one Redis

CHILD = r"""
import json, sys, time
from pathlib import Path
from urllib.parse import urlsplit

from scrapy import Request, Spider
from scrapy.crawler import CrawlerProcess
from scrapy_domainstate.testing.offline import loopback_only

job = json.loads(Path(sys.argv[1]).read_text())


class FleetSpider(Spider):
    name = "fleet"

    def __init__(self, *args, urls=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.urls = list(urls)
        self.responses, self.failures = {}, {}
        self.started = self.finished = 0.0

    async def start(self):
        # the engine is open: tell the test, and start crawling together with the other processes
        Path(job["ready"]).touch()
        deadline = time.monotonic() + 60
        while not Path(job["go"]).exists():
            if time.monotonic() > deadline:
                raise RuntimeError("no go signal")
            time.sleep(0.005)
        self.started = time.time()
        for url in self.urls:
            yield Request(url, callback=self.parse, errback=self.failed, dont_filter=True)

    def parse(self, response):
        host = urlsplit(response.url).hostname
        self.responses[host] = self.responses.get(host, 0) + 1

    def failed(self, failure):
        key = urlsplit(failure.request.url).hostname + " " + type(failure.value).__name__
        self.failures[key] = self.failures.get(key, 0) + 1

    def closed(self, reason):
        self.finished = time.time()


with loopback_only():
    process = CrawlerProcess(job["settings"])
    crawler = process.create_crawler(FleetSpider)
    process.crawl(crawler, urls=job["urls"])
    process.start()
spider = crawler.spider
stats = {k: v for k, v in crawler.stats.get_stats().items() if isinstance(v, (int, float, str))}
Path(job["out"]).write_text(json.dumps({
    "responses": spider.responses, "failures": spider.failures,
    "started": spider.started, "finished": spider.finished, "stats": stats,
}))
"""


def run_processes(tmp: Path, jobs: list[dict[str, Any]], timeout: float = 120.0) -> list[dict[str, Any]]:
    """Run one child per job at the same time (they start crawling together); their results.

    Blocking: call it in a thread, the test web server lives in this process's reactor.
    """
    script = tmp / "fleet_child.py"
    script.write_text(CHILD)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    procs: list[tuple[subprocess.Popen[bytes], Any, dict[str, Any]]] = []
    try:
        for i, spec in enumerate(jobs):
            job = {**spec, "ready": str(tmp / f"ready-{i}"), "go": str(tmp / "go"), "out": str(tmp / f"out-{i}.json")}
            (tmp / f"job-{i}.json").write_text(json.dumps(job))
            log = open(tmp / f"child-{i}.log", "wb")  # noqa: SIM115 - closed below
            proc = subprocess.Popen(
                [sys.executable, str(script), str(tmp / f"job-{i}.json")],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=str(tmp),
            )
            procs.append((proc, log, job))
        deadline = time.monotonic() + timeout
        while not all(Path(job["ready"]).exists() for _, _, job in procs):
            failed = [p for p, _, _ in procs if p.poll() is not None]
            if failed or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        (tmp / "go").touch()
        for proc, _, _ in procs:
            proc.wait(max(deadline - time.monotonic(), 1.0))
    finally:
        for proc, log, _ in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            log.close()
    results = []
    for i, (proc, _, job) in enumerate(procs):
        log_text = (tmp / f"child-{i}.log").read_text(errors="replace")
        assert proc.returncode == 0, f"crawler process {i} exited with {proc.returncode}:\n{log_text[-4000:]}"
        results.append({**json.loads(Path(job["out"]).read_text()), "log": log_text})
    return results


@pytest.mark.redis
@pytest_twisted.ensureDeferred
async def test_three_crawler_processes_sharing_one_redis_lose_no_outcome(
    sites: Any, redis_server: RedisServer, tmp_path: Path
) -> None:
    friendly = [f"friendly-{i}.test" for i in range(5)]
    cold = [f"cold-{i}.test" for i in range(5)]
    hosts = friendly + cold
    per_host = 12
    urls = [url for host in hosts for url in pages(sites, host, per_host)]
    settings = {
        "ADDONS": ADDON,
        **SEED_READINGS,  # (the tests of a fleet learn dead and cold within one crawl)
        "DOMAINSTATE_STORE": REDIS_STORE,
        "DOMAINSTATE_REDIS_URL": redis_server.url,
        "DOMAINSTATE_FLUSH_SIZE": 2,
        "DOMAINSTATE_FLUSH_INTERVAL": 0.1,
        "DOMAINSTATE_HEAD_PROBE": False,
        "DOMAINSTATE_SCAN_FRIENDLY": True,  # (every page judged: each useful one counted once)
        "TWISTED_DNS_RESOLVER": RESOLVER,
        "CONCURRENT_REQUESTS": 16,
        "DOWNLOAD_TIMEOUT": 20,
        "RETRY_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        "TELNETCONSOLE_ENABLED": False,
        "HTTPERROR_ALLOW_ALL": True,
        "LOG_LEVEL": "INFO",
    }
    # the same URLs in three orders, so the processes meet on every host
    orders = [urls, urls[::-1], urls[len(urls) // 2 :] + urls[: len(urls) // 2]]
    jobs = [{"settings": settings, "urls": order} for order in orders]

    results = await deferToThread(run_processes, tmp_path, jobs)

    # The three crawls really ran at the same time.
    assert max(r["started"] for r in results) < min(r["finished"] for r in results), [
        (r["started"], r["finished"]) for r in results
    ]
    for r in results:
        stats = r["stats"]
        assert stats["finish_reason"] == "finished"
        assert "log_count/ERROR" not in stats, r["log"][-4000:]
        assert not any(k.startswith("domainstate/store_error") for k in stats), stats
        assert "domainstate/store/errors" not in stats and "domainstate/store/dropped" not in stats, stats
        # no request lost: each URL got a response, or was skipped by the shared memory
        skipped = {k: v for k, v in r["failures"].items() if k.endswith(" IgnoreRequest")}
        assert skipped == r["failures"], r["failures"]
        assert sum(r["responses"].values()) + sum(skipped.values()) == len(urls)
        assert stats.get("domainstate/method/skip", 0) == sum(skipped.values())

    records = redis_records(redis_server.url, hosts)
    seen = {host: sum(r["responses"].get(host, 0) for r in results) for host in hosts}
    sent = {host: gets(sites, host) for host in hosts}
    stored = {host: records[host].fetch_total if records[host] else 0 for host in hosts}
    assert seen == sent, "every GET the server answered reached a spider"
    assert stored == sent, "Redis holds one outcome per response, from all three processes"
    for host in friendly:
        record = records[host]
        assert record is not None
        assert (record.state, record.fetch_ok) == (State.FRIENDLY, sent[host])
        assert sent[host] == 3 * per_host  # friendly sites are fetched every time, by every process
    for host in cold:
        record = records[host]
        assert record is not None
        assert (record.state, record.fetch_ok_empty) == (State.COLD, sent[host])
        assert sent[host] >= 5  # cold after 5 empty pages in a row
    # Each process alone would need 5 empty pages per cold site before skipping it; sharing one
    # memory, the fleet stops asking well before 3 x 5 (it sends 6-12 per site in practice).
    assert sum(sent[host] for host in cold) < 3 * 5 * len(cold)
    conflicts = sum(r["stats"].get("domainstate/store/conflicts", 0) for r in results)
    overlap = min(r["finished"] for r in results) - max(r["started"] for r in results)
    print(f"fleet: {sum(sent.values())} outcomes, {conflicts} transaction retries, crawls overlap {overlap:.2f} s")


# ---------------------------------------------------------- 2. Redis goes away


class OutageSpider(RecordingSpider):
    """The recording spider, with a hook per response and more work while ``more()`` asks."""

    def __init__(
        self,
        *args: Any,
        on_response: Callable[[OutageSpider], None] | None = None,
        more: Callable[[OutageSpider], list[str]] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.on_response = on_response
        self.more = more
        self.requested = len(self.urls)

    @classmethod
    def from_crawler(cls, crawler: Any, *args: Any, **kwargs: Any) -> OutageSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider.idle, signals.spider_idle)
        return spider

    def parse(self, response: Any) -> Any:
        yield from super().parse(response)
        if self.on_response is not None:
            self.on_response(self)

    def idle(self) -> None:
        urls = self.more(self) if self.more is not None else []
        if not urls:
            return
        assert self.crawler.engine is not None
        for url in urls:
            self.requested += 1
            self.crawler.engine.crawl(self.make_request(url))
        raise DontCloseSpider


@pytest.mark.redis
@pytest_twisted.ensureDeferred
async def test_redis_lost_mid_crawl_loses_no_outcome(
    sites: Any, crawl_settings: dict[str, Any], run_crawl: Any, redis_server: RedisServer, caplog: Any
) -> None:
    hosts = [f"slow-{i}.test" for i in range(8)]
    # extra work that keeps the crawl going until Redis is back, on sites of its own
    fillers = [f"slow-filler-{i}.test" for i in range(4)]
    for host in hosts + fillers:
        sites.set_kind(host, "slow", delay=0.15)
    urls = [url for host in hosts for url in pages(sites, host, 6)]
    settings = {
        **crawl_settings,
        "ADDONS": ADDON,
        **SEED_READINGS,  # (the tests of a fleet learn dead and cold within one crawl)
        "DOMAINSTATE_STORE": REDIS_STORE,
        "DOMAINSTATE_REDIS_URL": redis_server.url,
        "DOMAINSTATE_FLUSH_SIZE": 4,
        "DOMAINSTATE_FLUSH_INTERVAL": 0.2,
        "DOMAINSTATE_HEAD_PROBE": False,
        "CONCURRENT_REQUESTS": 4,
    }
    outage: dict[str, Any] = {}
    give_up = time.monotonic() + 25

    def on_response(spider: OutageSpider) -> None:
        if len(spider.responses) != 10:
            return
        outage["stopped_after"] = len(spider.responses)

        def restarted(_: Any) -> None:
            outage["restarted_after"] = len(spider.responses)

        d = deferToThread(redis_server.stop)
        d.addCallback(lambda _: deferLater(reactor, 0.5, lambda: None))
        d.addCallback(lambda _: deferToThread(redis_server.start))
        d.addCallback(restarted)
        outage["done"] = d

    def more(spider: OutageSpider) -> list[str]:
        """At idle: stop once Redis holds every outcome of the main sites, else crawl on."""
        if time.monotonic() > give_up:
            return []
        if "restarted_after" in outage:
            seen = sum(urlsplit(r.url).hostname in hosts for r in spider.responses)
            in_redis = sum(r.fetch_total for r in redis_records(redis_server.url, hosts).values() if r)
            if in_redis == seen:
                outage["in_redis_before_close"] = (in_redis, seen)
                return []
        return [sites.url(host, "/") for host in fillers]

    with caplog.at_level(logging.INFO):
        result = await run_crawl(settings, urls, spider_cls=OutageSpider, on_response=on_response, more=more)
    await outage["done"]

    stats = result.stats
    spider = result.crawler.spider
    assert result.failures == []
    assert len(result.responses) == spider.requested  # every request got its response
    assert stats["finish_reason"] == "finished"
    # what was buffered during the outage reached Redis while the crawl was still running
    # (at an idle moment after the restart, Redis held exactly the outcomes seen so far)
    assert outage["restarted_after"] > outage["stopped_after"]
    assert outage.get("in_redis_before_close", (0, 0))[1] >= outage["restarted_after"], outage
    # and after the crawl every outcome is in Redis, none twice
    records = redis_records(redis_server.url, hosts + fillers)
    seen = Counter(urlsplit(r.url).hostname for r in result.responses)
    assert {h: gets(sites, h) for h in hosts + fillers} == {h: seen[h] for h in hosts + fillers}
    assert {h: (r.fetch_total if r else 0) for h, r in records.items()} == {h: seen[h] for h in hosts + fillers}
    # the outage is visible: counted failures, reads answered without Redis, a flush refused
    assert stats["domainstate/store/errors"] >= 1
    assert stats["domainstate/store/short_circuits"] >= 1
    assert stats["domainstate/store_error/flush"] >= 1
    assert "domainstate/store/dropped" not in stats
    assert "domainstate/store_error/close" not in stats
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
    messages = [r.getMessage() for r in caplog.records]
    assert any("Redis store" in m and "failed" in m for m in messages)
    assert any("reachable again" in m for m in messages)


@pytest.mark.redis
@pytest_twisted.ensureDeferred
async def test_redis_unreachable_at_start_stops_the_crawl(
    sites: Any, crawl_settings: dict[str, Any], run_crawl: Any, caplog: Any
) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    settings = {**crawl_settings, "ADDONS": ADDON, "DOMAINSTATE_STORE": REDIS_STORE, "DOMAINSTATE_REDIS_URL": url}
    with caplog.at_level(logging.INFO):
        result = await run_crawl(settings, pages(sites, "friendly.test", 4))
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert any(url in m and "DOMAINSTATE_REDIS_URL" in m for m in errors), errors
    # the crawl does not go on without its memory
    assert sites.requests("friendly.test") == []
    assert result.responses == []
    assert result.stats["finish_reason"] != "finished"
    assert "domainstate" in result.stats["finish_reason"]


# --------------------------------------------- 3. two fleets through the service

FLEET_A = ("fleet-a1", "fleet-a2", "fleet-a3")
FLEET_B = "fleet-b"
FLEET_TOKENS = {r: f"token-{r}-{'y' * 12}" for r in (*FLEET_A, FLEET_B)}


@pytest.fixture(scope="module")
def fleet_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    tmp = tmp_path_factory.mktemp("fleet-service")
    proc = ServiceProcess(tmp, FLEET_TOKENS, tmp / "db")
    yield proc
    assert proc.stop() == 0, proc.stderr_path.read_text()[-2000:]


def remote_settings(
    crawl_settings: dict[str, Any], tmp_path: Path, reporter: str, service_url: str, **extra: Any
) -> dict[str, Any]:
    return {
        **crawl_settings,
        "ADDONS": ADDON,
        **SEED_READINGS,  # (the tests of a fleet learn dead and cold within one crawl)
        "DOMAINSTATE_LMDB_PATH": str(tmp_path / reporter),
        "DOMAINSTATE_REMOTE_URL": service_url,
        "DOMAINSTATE_REMOTE_TOKEN": FLEET_TOKENS[reporter],
        "DOMAINSTATE_REMOTE_MIN_REPORTERS": 3,
        **extra,
    }


def local_state(settings: dict[str, Any], domain: str) -> State:
    store = LmdbStore(Config.from_settings(settings))
    store.open()
    try:
        return store.current(domain, time.time()).state
    finally:
        store.close()


@pytest_twisted.ensureDeferred
async def test_two_fleets_share_verdicts_through_the_service(
    sites: Any, crawl_settings: dict[str, Any], run_crawl: Any, fleet_service: ServiceProcess, tmp_path: Path
) -> None:
    dead = [f"dead-root-{i}.test" for i in range(3)]
    poisoned = "friendly.test"
    # Fleet A: three crawlers, each with its own LMDB store, find the dead sites by themselves.
    # The first one alone also sees friendly.test fail to resolve, so it reports it dead too.
    for i, reporter in enumerate(FLEET_A):
        extra = {HOSTS_SETTING: {poisoned: NXDOMAIN}} if i == 0 else {}
        settings = remote_settings(crawl_settings, tmp_path, reporter, fleet_service.url, **extra)
        urls = [sites.url(h) for h in dead] + ([sites.url(poisoned)] if i == 0 else [])
        sites.reset_log()
        result = await run_crawl(settings, urls)
        stats = result.stats
        assert stats.get("domainstate/remote/adopted/dead", 0) == 0  # fewer than 3 reporters so far
        assert stats["domainstate/transition/unknown/dead"] == len(urls)
        assert "domainstate/remote/errors" not in stats
        assert [sites.methods(h) for h in dead] == [["HEAD", "GET"]] * 3  # its own experiments

    status, body, _ = request(
        fleet_service, query="domains=" + ",".join([*dead, poisoned]), token=FLEET_TOKENS[FLEET_B]
    )
    assert status == 200, body
    verdicts = body["domains"]
    for host in dead:
        assert (verdicts[host]["state"], verdicts[host]["reporters"], verdicts[host]["consensus"]) == ("dead", 3, 1.0)
    assert (verdicts[poisoned]["state"], verdicts[poisoned]["reporters"]) == ("dead", 1)

    # Fleet B: a fresh store; it adopts the fleet's verdicts and sends nothing to the dead sites.
    settings = remote_settings(crawl_settings, tmp_path, FLEET_B, fleet_service.url)
    urls = [url for host in dead for url in pages(sites, host, 2)] + pages(sites, poisoned, 3)
    sites.reset_log()
    result = await run_crawl(settings, urls)
    stats = result.stats
    assert [sites.requests(h) for h in dead] == [[], [], []]
    assert stats["domainstate/remote/adopted/dead"] == 3
    assert stats["domainstate/remote/hits"] == 4  # friendly.test's lone vote was heard, not adopted
    skipped = [f for f in result.failures if isinstance(f.exception, IgnoreRequest)]
    assert len(skipped) == len(result.failures) == 6
    assert {f.domainstate["method"] for f in skipped} == {"skip"}
    assert {local_state(settings, h) for h in dead} == {State.DEAD}
    # one reporter alone does not poison friendly.test: fleet B probes and fetches it
    assert sites.methods(poisoned) == ["HEAD", "GET", "GET", "GET"]
    assert [r.status for r in result.responses] == [200, 200, 200]
    assert local_state(settings, poisoned) is not State.DEAD


@pytest_twisted.ensureDeferred
async def test_a_crawler_reporting_to_the_service_closes_cleanly(
    sites: Any,
    crawl_settings: dict[str, Any],
    run_crawl: Any,
    fleet_service: ServiceProcess,
    tmp_path: Path,
    caplog: Any,
) -> None:
    host = "dead-root-closing.test"
    settings = remote_settings(crawl_settings, tmp_path, FLEET_A[0], fleet_service.url)
    with caplog.at_level(logging.INFO):
        result = await run_crawl(settings, [sites.url(host)])
    assert result.stats["domainstate/transition/unknown/dead"] == 1
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    # the report went out at close, and the stats count it
    status, body, _ = request(fleet_service, query=f"domains={host}", token=FLEET_TOKENS[FLEET_B])
    assert status == 200 and body["domains"][host]["reporters"] == 1, body
    assert result.stats["domainstate/remote/reported"] == 1


@pytest_twisted.ensureDeferred
async def test_without_head_probes_a_crawler_still_adopts_the_fleets_verdict(
    sites: Any, crawl_settings: dict[str, Any], run_crawl: Any, fleet_service: ServiceProcess, tmp_path: Path
) -> None:
    dead = [f"dead-root-noprobe-{i}.test" for i in range(2)]
    now = time.time()
    for reporter in FLEET_A:
        reports = [{"domain": h, "state": "dead", "last_seen": now - 5} for h in dead]
        status, body, _ = request(fleet_service, "POST", token=FLEET_TOKENS[reporter], body={"reports": reports})
        assert status == 200 and body["accepted"] == len(dead), body
    settings = remote_settings(crawl_settings, tmp_path, FLEET_B, fleet_service.url, DOMAINSTATE_HEAD_PROBE=False)
    result = await run_crawl(settings, [url for host in dead for url in pages(sites, host, 3)])
    assert [sites.requests(h) for h in dead] == [[], []]
    assert result.stats["domainstate/remote/adopted/dead"] == 2
    assert result.stats["domainstate/remote/lookups"] == 2
    assert len(result.failures) == 6 and all(isinstance(f.exception, IgnoreRequest) for f in result.failures)


# ----------------------------------------------------------- 4. service down


@pytest_twisted.ensureDeferred
async def test_a_crawl_with_the_service_down_delivers_everything(
    sites: Any, crawl_settings: dict[str, Any], run_crawl: Any
) -> None:
    hosts = [f"friendly-down-{i}.test" for i in range(12)]
    settings = {
        **crawl_settings,
        "ADDONS": ADDON,
        **SEED_READINGS,  # (the tests of a fleet learn dead and cold within one crawl)
        "DOMAINSTATE_REMOTE_URL": f"http://127.0.0.1:{free_port()}",
        "DOMAINSTATE_REMOTE_TOKEN": "t",
        "DOMAINSTATE_REMOTE_TIMEOUT": 0.5,
        "CONCURRENT_REQUESTS": 2,
    }
    urls = [url for host in hosts for url in pages(sites, host, 2)]
    result = await run_crawl(settings, urls)
    stats = result.stats
    assert result.failures == []
    assert sorted(r.url for r in result.responses) == sorted(urls)
    assert stats["finish_reason"] == "finished"
    assert stats["domainstate/remote/lookups"] == len(hosts)
    assert stats["domainstate/remote/errors"] >= 3
    assert stats["domainstate/remote/breaker_open"] == 1
    assert stats["domainstate/remote/skipped"] >= 1  # asked nothing while the breaker was open
    assert "domainstate/remote/adopted" not in stats
    # the crawl went on as without a service: probe, then fetch, every site
    assert all(sites.methods(h) == ["HEAD", "GET", "GET"] for h in hosts)
    assert stats["domainstate/outcome/ok-contact"] == len(urls)


@pytest_twisted.ensureDeferred
async def test_a_bad_service_url_stops_the_crawl_at_start(
    sites: Any, crawl_settings: dict[str, Any], run_crawl: Any, caplog: Any
) -> None:
    bad = "ftp://fleet.example/"
    settings = {**crawl_settings, "ADDONS": ADDON, "DOMAINSTATE_REMOTE_URL": bad, "DOMAINSTATE_REMOTE_TOKEN": "t"}
    try:
        with caplog.at_level(logging.INFO):
            result = await run_crawl(settings, [sites.url("friendly.test")])
    except ConfigError as exc:  # rejected with the settings, before the crawl: as good
        assert "DOMAINSTATE_REMOTE_URL" in str(exc)
    else:
        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert any("DOMAINSTATE_REMOTE_URL" in m and bad in m for m in errors), errors
        assert "domainstate" in result.stats["finish_reason"]
    assert sites.requests("friendly.test") == []
