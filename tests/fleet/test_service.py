"""The reference domain-state service, run as a real process and spoken to over HTTP.

Every test talks to ``python -m scrapy_domainstate.service`` on 127.0.0.1 with the stdlib
(``http.client``): bad input gets a clear 4xx with a JSON error, one reporter has
one vote per domain, a single reporter cannot flip or establish a verdict, two fleets sharing
the service converge, and the votes outlive a restart.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted

from scrapy_domainstate.core.config import DAY, Config, ConfigError
from scrapy_domainstate.core.record import DomainStat, State
from scrapy_domainstate.fleet.remote import RemoteVerdict, adopt, is_domain_key
from scrapy_domainstate.service import Vote, compute_consensus, load_tokens
from tests import ROOT

API = "/api/scrape/domain-state"
STATS = "/api/scrape/stats"
REPORTERS = [f"r{i}" for i in range(1, 9)]
TOKENS = {r: f"token-{r}-{'x' * 8}" for r in REPORTERS}


# --------------------------------------------------------------- the process


class ServiceProcess:
    """``python -m scrapy_domainstate.service`` on 127.0.0.1, port chosen by the OS."""

    def __init__(
        self,
        tmp: Path,
        tokens: dict[str, str],
        db: Path | None,
        args: tuple[str, ...] = (),
        nofile: int | None = None,
    ) -> None:
        token_file = tmp / "tokens.txt"
        token_file.write_text("# reporter token\n" + "".join(f"{r} {t}\n" for r, t in tokens.items()))
        token_file.chmod(0o600)
        cmd = [sys.executable, "-m", "scrapy_domainstate.service", "--port", "0", "--token-file", str(token_file)]
        if nofile is not None:  # run under an open-file limit
            start = (
                "import resource, sys; from scrapy_domainstate.service import main; "
                f"resource.setrlimit(resource.RLIMIT_NOFILE, ({nofile}, {nofile})); sys.exit(main(sys.argv[1:]))"
            )
            cmd[1:3] = ["-c", start]
        if db is not None:
            cmd += ["--db", str(db)]
        cmd += args
        self.stderr_path = tmp / f"service-{time.monotonic_ns()}.err"
        self._stderr = open(self.stderr_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._stderr, cwd=str(tmp))
        line = self._first_line(timeout=30)
        if not line.startswith("domainstate service listening on http://"):
            self.stop()
            raise RuntimeError(f"service did not start: {line!r}; stderr: {self.stderr_path.read_text()[-2000:]}")
        self.url = line.rsplit(" ", 1)[1]
        self.host, port = self.url.removeprefix("http://").rsplit(":", 1)
        self.port = int(port)

    def _first_line(self, timeout: float) -> str:
        assert self.proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            if not sel.select(timeout):
                return "<no output>"
        return self.proc.stdout.readline().decode().strip()

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._stderr.close()
        return self.proc.returncode


def request(
    service: ServiceProcess,
    method: str = "GET",
    path: str = API,
    *,
    query: str | None = None,
    token: str | None = None,
    body: Any = None,
    raw: bytes | None = None,
    content_type: str | None = "application/json",
    headers: dict[str, str] | None = None,
) -> tuple[int, Any, Any]:
    """``(status, parsed JSON body, headers)`` of one HTTP call (4xx/5xx included)."""
    target = path + (f"?{query}" if query is not None else "")
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    sent = dict(headers or {})
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    if data is not None and content_type is not None:
        sent["Content-Type"] = content_type
    conn = http.client.HTTPConnection(service.host, service.port, timeout=10)
    try:
        conn.request(method, target, body=data, headers=sent)
        resp = conn.getresponse()
        payload = resp.read()
    finally:
        conn.close()
    return resp.status, (json.loads(payload) if payload else None), resp.headers


def report(service: ServiceProcess, reporter: str, *reports: tuple[str, str, float]) -> int:
    status, body, _ = request(
        service,
        "POST",
        token=TOKENS[reporter],
        body={"reports": [{"domain": d, "state": s, "last_seen": t} for d, s, t in reports]},
    )
    assert status == 200, body
    return body["accepted"]


def lookup(service: ServiceProcess, reporter: str, *domains: str) -> dict[str, Any]:
    status, body, _ = request(service, query="domains=" + ",".join(domains), token=TOKENS[reporter])
    assert status == 200, body
    return body["domains"]


def verdict(domain: str, entry: dict[str, Any]) -> RemoteVerdict:
    return RemoteVerdict(
        domain,
        State(entry["state"]),
        entry["consensus"],
        entry["reporters"],
        entry["last_seen"],
        entry["expires_at"],
        entry.get("agreeing"),
    )


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    tmp = tmp_path_factory.mktemp("service")
    proc = ServiceProcess(tmp, TOKENS, tmp / "db")
    yield proc
    assert proc.stop() == 0, proc.stderr_path.read_text()[-2000:]


# ----------------------------------------------------------------- bad input

NOW = time.time()
GOOD = {"reports": [{"domain": "good.example", "state": "dead", "last_seen": NOW - 10}]}
T1 = TOKENS["r1"]


def _post(body: Any = None, **kw: Any) -> dict[str, Any]:
    return {"method": "POST", "token": T1, "body": GOOD if body is None else body, **kw}


def _report(**fields: Any) -> dict[str, Any]:
    entry = {"domain": "good.example", "state": "dead", "last_seen": NOW - 10, **fields}
    return {"reports": [{k: v for k, v in entry.items() if v is not ...}]}


BAD_INPUT = [
    # (id, request kwargs, status, field)
    ("no-token", {"query": "domains=a.com"}, 401, "Authorization"),
    ("bad-token", {"query": "domains=a.com", "token": "nope"}, 401, "Authorization"),
    ("basic-auth", {"query": "domains=a.com", "headers": {"Authorization": f"Basic {T1}"}}, 401, "Authorization"),
    ("empty-bearer", {"query": "domains=a.com", "headers": {"Authorization": "Bearer "}}, 401, "Authorization"),
    ("post-no-token", {"method": "POST", "body": GOOD}, 401, "Authorization"),
    ("uppercase-domain", {"query": "domains=Example.com", "token": T1}, 400, "domains[0]"),
    ("empty-label", {"query": "domains=a.com,b..com", "token": T1}, 400, "domains[1]"),
    ("leading-hyphen", {"query": "domains=-a.com", "token": T1}, 400, "domains[0]"),
    ("underscore", {"query": "domains=a_b.com", "token": T1}, 400, "domains[0]"),
    ("unicode-idn", {"query": "domains=b%C3%BCcher.de", "token": T1}, 400, "domains[0]"),
    ("with-port", {"query": "domains=a.com%3A80", "token": T1}, 400, "domains[0]"),
    ("url-not-key", {"query": "domains=http%3A%2F%2Fa.com%2F", "token": T1}, 400, "domains[0]"),
    ("label-64", {"query": "domains=" + "a" * 64 + ".com", "token": T1}, 400, "domains[0]"),
    ("name-254", {"query": "domains=" + ".".join(["a" * 63] * 4)[:254], "token": T1}, 400, "domains[0]"),
    ("ipv6-not-compressed", {"query": "domains=fe80:0:0:0:0:0:0:1", "token": T1}, 400, "domains[0]"),
    ("trailing-comma", {"query": "domains=a.com,", "token": T1}, 400, "domains[1]"),
    ("empty-domains", {"query": "domains=", "token": T1}, 400, "domains[0]"),
    ("no-domains", {"token": T1}, 400, "domains"),
    ("domains-twice", {"query": "domains=a.com&domains=b.com", "token": T1}, 400, "domains"),
    ("unknown-param", {"query": "domains=a.com&x=1", "token": T1}, 400, "x"),
    (
        "too-many-domains",
        {"query": "domains=" + ",".join(f"d{i}.com" for i in range(101)), "token": T1},
        400,
        "domains",
    ),
    ("unknown-state", _post(_report(state="zombie")), 400, "reports[0].state"),
    ("state-wrong-case", _post(_report(state="DEAD")), 400, "reports[0].state"),
    ("state-not-string", _post(_report(state=3)), 400, "reports[0].state"),
    ("bad-json", _post(raw=b'{"reports": [{"domain": "a.com",'), 400, None),
    ("not-utf8", _post(raw=b'{"reports": "\xff\xfe"}'), 400, None),
    ("nan", _post(raw=b'{"reports": [{"domain": "a.com", "state": "dead", "last_seen": NaN}]}'), 400, None),
    ("duplicate-key", _post(raw=b'{"reports": [], "reports": []}'), 400, None),
    ("deep-nesting", _post(raw=b"[" * 100_000 + b"]" * 100_000), 413, "body"),
    ("deep-nesting-small", _post(raw=b'{"reports": ' + b"[" * 30_000 + b"]" * 30_000 + b"}"), 400, None),
    ("body-not-object", _post([GOOD]), 400, None),
    ("reports-not-list", _post({"reports": {"domain": "a.com"}}), 400, "reports"),
    ("reports-missing", _post({}), 400, "reports"),
    ("reports-empty", _post({"reports": []}), 400, "reports"),
    ("top-level-extra", _post({**GOOD, "reporter": "r2"}), 400, "reporter"),
    ("reporter-in-report", _post(_report(reporter="r2")), 400, "reports[0].reporter"),
    ("report-not-object", _post({"reports": ["a.com"]}), 400, "reports[0]"),
    ("domain-missing", _post(_report(domain=...)), 400, "reports[0].domain"),
    ("domain-not-string", _post(_report(domain=["a.com"])), 400, "reports[0].domain"),
    ("domain-syntax", _post(_report(domain="exa mple.com")), 400, "reports[0].domain"),
    ("last-seen-string", _post(_report(last_seen="yesterday")), 400, "reports[0].last_seen"),
    ("last-seen-bool", _post(_report(last_seen=True)), 400, "reports[0].last_seen"),
    ("last-seen-missing", _post(_report(last_seen=...)), 400, "reports[0].last_seen"),
    ("last-seen-negative", _post(_report(last_seen=-5)), 400, "reports[0].last_seen"),
    ("last-seen-future", _post(_report(last_seen=NOW + 3600)), 400, "reports[0].last_seen"),
    ("evidence-not-string", _post(_report(evidence=5)), 400, "reports[0].evidence"),
    ("evidence-too-long", _post(_report(evidence="x" * 201)), 400, "reports[0].evidence"),
    ("evidence-control", _post(_report(evidence="a\nb")), 400, "reports[0].evidence"),
    (
        "too-many-reports",
        _post({"reports": [{"domain": f"d{i}.com", "state": "dead", "last_seen": NOW} for i in range(101)]}),
        400,
        "reports",
    ),
    ("too-large-body", _post(raw=b'{"reports": [' + b" " * (64 * 1024) + b"]}"), 413, "body"),
    ("text-plain", _post(content_type="text/plain"), 415, "Content-Type"),
    ("form-encoded", _post(content_type="application/x-www-form-urlencoded"), 415, "Content-Type"),
    ("latin1-json", _post(content_type="application/json; charset=latin-1"), 415, "Content-Type"),
    ("no-content-type", _post(content_type=None), 415, "Content-Type"),
    ("put", {"method": "PUT", "token": T1, "body": GOOD}, 405, None),
    ("delete", {"method": "DELETE", "token": T1}, 405, None),
    ("patch-no-token", {"method": "PATCH", "body": GOOD}, 405, None),
    ("post-stats", {"method": "POST", "path": STATS, "token": T1, "body": GOOD}, 405, None),
    ("unknown-path", {"path": "/api/scrape/other", "token": T1}, 404, None),
    ("trailing-slash", {"path": API + "/", "query": "domains=a.com", "token": T1}, 404, None),
    ("root", {"path": "/", "token": T1}, 404, None),
]


@pytest.mark.parametrize(("kwargs", "status", "field"), [b[1:] for b in BAD_INPUT], ids=[b[0] for b in BAD_INPUT])
def test_bad_input_gets_a_clear_4xx(service: ServiceProcess, kwargs: dict[str, Any], status: int, field: Any) -> None:
    before = request(service, path=STATS, token=TOKENS["r8"])[1]["counters"].get("reports_received", 0)
    got, body, headers = request(service, **kwargs)
    assert got == status, body
    assert headers["Content-Type"].startswith("application/json")
    assert isinstance(body["error"], str) and body["error"]
    assert body["field"] == field
    if status == 401:
        assert headers["WWW-Authenticate"].startswith("Bearer")
    if status == 405:
        assert headers["Allow"] in ("GET, POST", "GET")
    # nothing was recorded, and the service still answers
    after = request(service, path=STATS, token=TOKENS["r8"])[1]["counters"].get("reports_received", 0)
    assert after == before


def test_chunked_body_over_the_limit_is_413(service: ServiceProcess) -> None:
    """No Content-Length: the limit is enforced while the body streams in."""
    conn = http.client.HTTPConnection(service.host, service.port, timeout=10)
    try:
        chunks = (b" " * 8192 for _ in range(20))  # 160 KiB
        conn.request(
            "POST",
            API,
            body=chunks,
            headers={"Authorization": f"Bearer {T1}", "Content-Type": "application/json"},
            encode_chunked=True,
        )
        resp = conn.getresponse()
        body = json.loads(resp.read())
    finally:
        conn.close()
    assert resp.status == 413
    assert body["field"] == "body"


def test_hundred_domains_of_full_length_are_accepted(service: ServiceProcess) -> None:
    """The limits are the documented ones: 100 names of 253 characters fit in one lookup."""
    names = [".".join([f"{i:03d}" + "a" * 60, "b" * 63, "c" * 63, "d" * 61]) for i in range(100)]
    assert all(len(n) == 253 for n in names)
    assert lookup(service, "r1", *names) == {}


def test_a_valid_report_and_lookup(service: ServiceProcess) -> None:
    now = time.time()
    assert report(service, "r1", ("valid.example", "dead", now - 5)) == 1
    status, body, _ = request(
        service,
        "POST",
        token=TOKENS["r2"],
        raw=json.dumps(
            {"reports": [{"domain": "valid.example", "state": "dead", "last_seen": now, "evidence": "dns: NXDOMAIN"}]}
        ).encode(),
        content_type="application/json; charset=utf-8",
    )
    assert (status, body) == (200, {"accepted": 1})
    answer = lookup(service, "r3", "valid.example", "unknown.example", "127.0.0.1", "::1")
    assert set(answer) == {"valid.example"}
    entry = answer["valid.example"]
    assert entry["state"] == "dead"
    assert entry["consensus"] == 1.0
    assert entry["reporters"] == 2
    assert entry["last_seen"] == pytest.approx(now)
    assert entry["expires_at"] == pytest.approx(now + 30 * DAY)


# ------------------------------------------------------------------ voting


def test_one_vote_per_reporter(service: ServiceProcess) -> None:
    now = time.time()
    for i in range(5):
        report(service, "r1", ("once.example", "dead", now - 50 + i))
    assert report(service, "r1", *[("once.example", "dead", now - 40 + i) for i in range(5)]) == 5
    entry = lookup(service, "r2", "once.example")["once.example"]
    assert (entry["state"], entry["reporters"], entry["consensus"]) == ("dead", 1, 1.0)
    # a newer report replaces the reporter's vote; it is still one reporter
    report(service, "r1", ("once.example", "antibot-hard", now))
    entry = lookup(service, "r2", "once.example")["once.example"]
    assert (entry["state"], entry["reporters"]) == ("antibot-hard", 1)
    # an older report does not replace a newer vote
    assert report(service, "r1", ("once.example", "friendly", now - 1000)) == 0
    assert lookup(service, "r2", "once.example")["once.example"]["state"] == "antibot-hard"


def test_a_single_reporter_cannot_flip_a_domain(service: ServiceProcess) -> None:
    """Poisoning: one reporter saying "dead" 50 times against three saying "friendly"."""
    now = time.time()
    for reporter in ("r1", "r2", "r3"):
        report(service, reporter, ("victim.example", "friendly", now - 60))
    for i in range(50):
        report(service, "r4", ("victim.example", "dead", now - 50 + i))
    entry = lookup(service, "r5", "victim.example")["victim.example"]
    assert entry["state"] == "friendly"
    assert entry["reporters"] == 4
    assert entry["consensus"] == 0.75
    # "dead" never wins, and the one dissenter cannot veto what three others agree on
    # (issue 13: a single attacker's vote used to block the adoption of a unanimous verdict).
    config = Config()
    assert adopt(None, verdict("victim.example", entry), config) is State.FRIENDLY
    assert (
        adopt(DomainStat("victim.example", State.DEAD, last_seen=now - 3600), verdict("victim.example", entry), config)
        is State.FRIENDLY
    )


def test_a_single_reporter_cannot_reach_adoption(service: ServiceProcess) -> None:
    now = time.time()
    report(service, "r6", *[("lonely.example", "dead", now - i) for i in range(100)])
    entry = lookup(service, "r1", "lonely.example")["lonely.example"]
    assert (entry["state"], entry["consensus"], entry["reporters"]) == ("dead", 1.0, 1)
    assert adopt(None, verdict("lonely.example", entry), Config()) is None
    # it cannot pose as other reporters either: the reporter comes from the token only
    status, body, _ = request(
        service,
        "POST",
        token=TOKENS["r6"],
        body={"reports": [{"domain": "lonely.example", "state": "dead", "last_seen": now, "reporter": "r7"}]},
    )
    assert (status, body["field"]) == (400, "reports[0].reporter")
    assert lookup(service, "r1", "lonely.example")["lonely.example"]["reporters"] == 1


def test_two_fleets_converge(service: ServiceProcess) -> None:
    """Fleet A (r1-r3) finds a dead domain, fleet B (r4-r6) a hard anti-bot one; both agree."""
    now = time.time()
    for reporter in ("r1", "r2", "r3"):
        report(service, reporter, ("fleet-a-dead.example", "dead", now - 30))
    for reporter in ("r4", "r5", "r6"):
        report(service, reporter, ("fleet-b-hard.example", "antibot-hard", now - 20))
    seen_by_a = lookup(service, "r1", "fleet-a-dead.example", "fleet-b-hard.example")
    seen_by_b = lookup(service, "r4", "fleet-a-dead.example", "fleet-b-hard.example")
    assert seen_by_a == seen_by_b
    config = Config()
    for answers in (seen_by_a, seen_by_b):
        states = {d: adopt(None, verdict(d, e), config) for d, e in answers.items()}
        assert states == {"fleet-a-dead.example": State.DEAD, "fleet-b-hard.example": State.ANTIBOT_HARD}
    # a local verdict older than the fleet's gives way; a newer one stands
    old = DomainStat("fleet-a-dead.example", State.FRIENDLY, last_seen=now - 3600)
    new = DomainStat("fleet-a-dead.example", State.FRIENDLY, last_seen=now)
    v = verdict("fleet-a-dead.example", seen_by_b["fleet-a-dead.example"])
    assert adopt(old, v, config) is State.DEAD
    assert adopt(new, v, config) is None


def test_votes_older_than_the_ttl_do_not_count(service: ServiceProcess) -> None:
    now = time.time()
    for reporter in ("r1", "r2", "r3"):
        report(service, reporter, ("stale.example", "dead", now - 31 * DAY))
    report(service, "r4", ("stale.example", "antibot-hard", now - 31 * DAY))  # 90-day TTL: still counts
    entry = lookup(service, "r5", "stale.example")["stale.example"]
    assert (entry["state"], entry["reporters"], entry["consensus"]) == ("antibot-hard", 1, 1.0)
    report(service, "r1", ("old-friend.example", "friendly", now - 100 * DAY))  # no TTL: 90-day vote age
    assert lookup(service, "r5", "old-friend.example") == {}


def test_stats_count_requests(service: ServiceProcess) -> None:
    before = request(service, path=STATS, token=T1)[1]
    lookup(service, "r1", "stats.example")
    report(service, "r1", ("stats.example", "dead", time.time()))
    after = request(service, path=STATS, token=T1)[1]
    assert after["requests"]["lookup"] == before["requests"].get("lookup", 0) + 1
    assert after["requests"]["report"] == before["requests"].get("report", 0) + 1
    assert after["votes"] >= 1


def test_votes_and_consensus_records_survive_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "db"
    now = time.time()
    first = ServiceProcess(tmp_path, TOKENS, db)
    try:
        for reporter in ("r1", "r2", "r3"):
            report(first, reporter, ("persist.example", "dead", now - 5))
    finally:
        assert first.stop() == 0
    second = ServiceProcess(tmp_path, TOKENS, db)
    try:
        entry = lookup(second, "r4", "persist.example")["persist.example"]
        assert (entry["state"], entry["reporters"]) == ("dead", 3)
    finally:
        assert second.stop() == 0
    # the consensus records are a DomainStore's: the LMDB store reads them
    from scrapy_domainstate.store.lmdb import LmdbStore

    store = LmdbStore(Config(lmdb_path=str(db / "consensus")))
    store.open()
    try:
        stat = store.get("persist.example")
    finally:
        store.close()
    assert stat is not None
    assert stat.state is State.DEAD
    assert stat.last_seen == pytest.approx(now - 5)
    assert stat.state_expires_at == pytest.approx(now - 5 + 30 * DAY)


def test_bad_token_file_fails_at_start(tmp_path: Path) -> None:
    bad = tmp_path / "tokens.txt"
    bad.write_text("r1 a b\n")
    bad.chmod(0o600)
    proc = subprocess.run(
        [sys.executable, "-m", "scrapy_domainstate.service", "--port", "0", "--token-file", str(bad)],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert b"tokens.txt:1" in proc.stderr


# -------------------------------------------------------------- pure parts


def test_load_tokens(tmp_path: Path) -> None:
    path = tmp_path / "t"
    path.write_text("# comment\n\nalice  tok-1\nbob tok-2\n")
    path.chmod(0o600)
    assert load_tokens(str(path)) == {"tok-1": "alice", "tok-2": "bob"}
    path.write_text("alice tok-1\nbob tok-1\n")
    with pytest.raises(ConfigError, match="already given"):
        load_tokens(str(path))
    path.write_text("# nothing\n")
    with pytest.raises(ConfigError, match="no tokens"):
        load_tokens(str(path))
    with pytest.raises(ConfigError, match="cannot read"):
        load_tokens(os.path.join(str(tmp_path), "missing"))


TTL = Config().ttl


@pytest.mark.parametrize(
    ("votes", "expected"),
    [
        ([], None),
        ([("a", "dead", 0)], ("dead", 1.0, 1)),
        ([("a", "dead", 0), ("b", "dead", 0), ("c", "friendly", 0)], ("dead", 2 / 3, 3)),
        # a tie goes to the state seen last
        ([("a", "dead", -10), ("b", "cold", -5)], ("cold", 0.5, 2)),
        # expired votes do not count, not even in the number of reporters
        ([("a", "dead", -31 * DAY), ("b", "cold", -DAY)], ("cold", 1.0, 1)),
        ([("a", "dead", -31 * DAY)], None),
        # one reporter counts once, with its newest vote
        ([("a", "dead", -10), ("a", "friendly", -5), ("b", "friendly", -1)], ("friendly", 1.0, 2)),
    ],
)
def test_compute_consensus(votes: list[tuple[str, str, float]], expected: tuple[str, float, int] | None) -> None:
    now = 1_800_000_000.0
    result = compute_consensus([Vote(r, State(s), now + dt) for r, s, dt in votes], TTL, now)
    if expected is None:
        assert result is None
    else:
        assert result is not None
        assert (result.state.value, result.consensus, result.reporters) == pytest.approx(expected)


# ---------------------------------------------------------------- OpenAPI


def _openapi() -> dict[str, Any]:
    yaml = pytest.importorskip("yaml")
    return yaml.safe_load((ROOT / "docs" / "openapi.yaml").read_text())


def test_the_openapi_document_is_valid() -> None:
    validator = pytest.importorskip("openapi_spec_validator")
    doc = _openapi()
    validator.validate(doc)
    assert doc["openapi"].startswith("3.1")
    assert set(doc["paths"]) == {API, STATS}


def test_the_service_answers_what_the_openapi_document_says(service: ServiceProcess) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    doc = _openapi()

    def check(name: str, instance: Any) -> None:
        schema = {"$ref": f"#/components/schemas/{name}", "components": doc["components"]}
        jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()).validate(instance)

    now = time.time()
    for reporter in ("r1", "r2", "r3"):
        report(service, reporter, ("openapi.example", "dead", now - 1), ("openapi-friend.example", "friendly", now))
    status, body, _ = request(
        service,
        "POST",
        token=T1,
        body={"reports": [{"domain": "openapi.example", "state": "dead", "last_seen": now, "evidence": "dns: x"}]},
    )
    assert status == 200
    check("ReportResponse", body)
    check("ReportRequest", {"reports": [{"domain": "openapi.example", "state": "dead", "last_seen": now}]})
    answer = request(service, query="domains=openapi.example,openapi-friend.example,nobody.example", token=T1)[1]
    assert set(answer["domains"]) == {"openapi.example", "openapi-friend.example"}
    assert answer["domains"]["openapi-friend.example"]["expires_at"] is None
    check("LookupResponse", answer)
    check("Stats", request(service, path=STATS, token=T1)[1])
    for kwargs, _status, _field in [b[1:] for b in BAD_INPUT]:
        check("Error", request(service, **kwargs)[1])
    # what the document calls a domain key is what the service accepts
    pattern = doc["components"]["schemas"]["DomainKey"]["anyOf"][0]["pattern"]
    for text in ["a.com", "xn--bcher-kva.de", "1.2.3.4", "a-b.c", "-a.com", "A.com", "a..b", "a_b.c", "a.com."]:
        assert bool(re.fullmatch(pattern, text)) == is_domain_key(text), text


@pytest_twisted.ensureDeferred
async def test_any_domain_store_holds_the_consensus_records() -> None:
    """``make_site`` in-process, with a memory store: the consensus of each report lands in it."""
    from twisted.internet import reactor

    from scrapy_domainstate.fleet.remote import RemoteClient
    from scrapy_domainstate.service import make_site
    from scrapy_domainstate.store import MemoryStore

    store = MemoryStore(Config())
    site = make_site({t: r for r, t in TOKENS.items()}, store=store)
    port = reactor.listenTCP(0, site, interface="127.0.0.1")
    url = f"http://127.0.0.1:{port.getHost().port}"
    clients = [
        RemoteClient(Config(remote_url=url, remote_token=TOKENS[r]), report_delay=0.01) for r in ("r1", "r2", "r3")
    ]
    try:
        now = time.time()
        clients[0].report("memory.example", State.FRIENDLY, now - 2)
        for client in clients[1:]:
            client.report("memory.example", State.DEAD, now - 1)
        for client in clients:
            await client.close()
        stat = store.get("memory.example")
        assert stat is not None
        assert (stat.state, stat.last_seen) == (State.DEAD, pytest.approx(now - 1))
        assert site.service.stats()["votes"] == 3
    finally:
        await port.stopListening()
        site.service.close()
