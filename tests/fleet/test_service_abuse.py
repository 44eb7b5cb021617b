"""The shared-state service under abuse (issue 13, break 7, 8 and the "Also" list).

Real processes on loopback: ``python -m scrapy_domainstate.service`` (launched by
:class:`test_service.ServiceProcess`), real sockets for the slow clients, the real remote
client's parser and adoption rule.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import selectors
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.record import DomainStat, State
from scrapy_domainstate.fleet.remote import RemoteVerdict, adopt, parse_lookup_response
from tests.fleet.test_service import TOKENS, ServiceProcess, lookup, report, request

#: Real processes and real crawls, each test seconds long: run in CI, skipped by -m 'not slow'.
pytestmark = pytest.mark.slow

HUGE = int("1" + "0" * 399)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    tmp = tmp_path_factory.mktemp("abuse")
    proc = ServiceProcess(tmp, TOKENS, tmp / "db")
    try:
        yield proc
    finally:
        proc.stop()


def post(service: ServiceProcess, reporter: str, raw: bytes, **kw: Any) -> tuple[int, Any, Any]:
    return request(service, "POST", token=TOKENS[reporter], raw=raw, **kw)


# ------------------------------------------------ numbers and text: 4xx, never 500


@pytest.mark.parametrize(
    ("report", "field"),
    [
        ({"last_seen": HUGE}, "reports[0].last_seen"),
        ({"last_seen": -HUGE}, "reports[0].last_seen"),
        ({"evidence": "\ud800"}, "reports[0].evidence"),
        ({"evidence": "ok \udfff"}, "reports[0].evidence"),
    ],
    ids=["huge", "minus-huge", "lone-high-surrogate", "lone-low-surrogate"],
)
def test_unrepresentable_numbers_and_lone_surrogates_are_400(
    service: ServiceProcess, report: dict[str, Any], field: str
) -> None:
    body = {"domain": "n.example", "state": "dead", "last_seen": time.time(), **report}
    raw = json.dumps({"reports": [body]}).encode()  # json escapes the surrogates as \\udXXX
    status, answer, _ = post(service, "r1", raw)
    assert status == 400, answer
    assert answer["field"] == field


@pytest.mark.parametrize(
    "raw",
    [
        b'{"reports": [{"domain": "x.example", "state": "dead", "last_seen": 1e999}]}',
        b'{"reports": [{"domain": "x.example", "state": "dead", "last_seen": NaN}]}',
        b'{"reports": [{"domain": "x.example", "state": "d\xffad", "last_seen": 1}]}',
        b'{"reports": [{"domain": "x.example", "state": "dead", "last_seen": ' + b"9" * 5000 + b"}]}",
        b'{"reports": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    ],
    ids=["inf", "nan", "invalid-utf8", "5000-digits", "deep"],
)
def test_garbage_numbers_and_bytes_are_400(service: ServiceProcess, raw: bytes) -> None:
    status, answer, _ = post(service, "r1", raw)
    assert status == 400, answer


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.one_of(
        st.binary(max_size=300),
        st.recursive(
            st.none()
            | st.booleans()
            | st.integers(min_value=-(10**500), max_value=10**500)
            | st.floats()
            | st.text(max_size=20),
            lambda children: (
                st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
            ),
            max_leaves=20,
        ).map(lambda v: json.dumps({"reports": v} if isinstance(v, list) else v).encode()),
        st.lists(
            st.fixed_dictionaries(
                {
                    "domain": st.sampled_from(["a.example", "", "A.example", "x" * 300, "\ud800.example"]),
                    "state": st.sampled_from(["dead", "friendly", "unknown", "", "zombie"]),
                    "last_seen": st.one_of(st.floats(), st.integers(min_value=-(10**400), max_value=10**400)),
                },
                optional={"evidence": st.text(max_size=250), "reporter": st.text(max_size=5)},
            ),
            max_size=3,
        ).map(lambda reports: json.dumps({"reports": reports}).encode()),
    )
)
def test_fuzzed_bodies_never_get_a_500(service: ServiceProcess, raw: bytes) -> None:
    status, answer, _ = post(service, "r2", raw)
    assert status in (200, 400, 413), (status, answer, raw[:200])


def test_the_client_drops_one_bad_entry_not_the_batch() -> None:
    now = time.time()
    good = {"state": "dead", "consensus": 1.0, "reporters": 3, "agreeing": 3, "last_seen": now - 60, "expires_at": None}
    body = json.dumps(
        {
            "domains": {
                "a.example": good,
                "b.example": {**good, "last_seen": HUGE},
                "c.example": {**good, "consensus": HUGE},
            }
        }
    ).encode()
    verdicts, invalid = parse_lookup_response(body, ["a.example", "b.example", "c.example"], now)
    assert list(verdicts) == ["a.example"] and invalid == 2


# -------------------------------------------------------- consensus rule


def verdict_of(entry: dict[str, Any], domain: str) -> RemoteVerdict:
    return RemoteVerdict(
        domain,
        State(entry["state"]),
        entry["consensus"],
        entry["reporters"],
        entry["last_seen"],
        entry["expires_at"],
        entry["agreeing"],
    )


@pytest.mark.parametrize("honest", [2, 3, 4, 5])
@pytest.mark.parametrize("attack", ["friendly", "unknown"])
def test_one_dissenter_cannot_veto_what_enough_others_agree_on(
    service: ServiceProcess, honest: int, attack: str
) -> None:
    """Rule: adopted when at least DOMAINSTATE_REMOTE_MIN_REPORTERS (3) agree and the share
    agreeing, one dissenter set aside, is above DOMAINSTATE_REMOTE_CONSENSUS; votes for
    ``unknown`` are no verdict."""
    now = time.time()
    domain = f"veto-{attack}-{honest}.example"
    for reporter in [f"r{i}" for i in range(1, honest + 1)]:
        report(service, reporter, (domain, "dead", now - 60))
    report(service, "r8", (domain, attack, now - 10))  # the attacker, voting last
    entry = lookup(service, "r1", domain)[domain]
    assert entry["state"] == "dead"
    if attack == "unknown":
        assert (entry["reporters"], entry["agreeing"], entry["consensus"]) == (honest, honest, 1.0)
    else:
        assert (entry["reporters"], entry["agreeing"]) == (honest + 1, honest)
    adopted = adopt(None, verdict_of(entry, domain), Config(), now)
    assert adopted is (State.DEAD if honest >= 3 else None)
    assert adopt(DomainStat(domain, State.UNKNOWN), verdict_of(entry, domain), Config(), now) is adopted


def test_two_dissenters_still_count(service: ServiceProcess) -> None:
    now = time.time()
    domain = "two-dissent.example"
    for reporter in ("r1", "r2", "r3"):
        report(service, reporter, (domain, "dead", now - 60))
    for reporter in ("r7", "r8"):
        report(service, reporter, (domain, "friendly", now - 10))
    entry = lookup(service, "r1", domain)[domain]
    assert (entry["state"], entry["reporters"], entry["agreeing"]) == ("dead", 5, 3)
    assert adopt(None, verdict_of(entry, domain), Config(), now) is None  # 3 / 4 = 0.75


# -------------------------------------------------------- rate and quota


def test_rate_and_quota_answer_429_with_retry_after(tmp_path: Path) -> None:
    args = ("-s", "DOMAINSTATE_SERVICE_RATE=1", "-s", "DOMAINSTATE_SERVICE_QUOTA=5")
    proc = ServiceProcess(tmp_path, TOKENS, tmp_path / "db", args=args)
    try:
        now = time.time()
        # Quota: five domains held, a sixth refused, a newer vote on a held one accepted.
        for i in range(5):
            status, _, _ = request(
                proc,
                "POST",
                token=TOKENS["r1"],
                body={"reports": [{"domain": f"q{i}.example", "state": "dead", "last_seen": now}]},
            )
            assert status == 200
        status, answer, headers = request(
            proc,
            "POST",
            token=TOKENS["r1"],
            body={"reports": [{"domain": "q5.example", "state": "dead", "last_seen": now}]},
        )
        assert status == 429 and "quota" in answer["error"], answer
        assert int(headers["Retry-After"]) > 0
        status, _, _ = request(
            proc,
            "POST",
            token=TOKENS["r1"],
            body={"reports": [{"domain": "q0.example", "state": "cold", "last_seen": now + 1}]},
        )
        assert status == 200
        # Rate: 1 a second, bursts of 10: the burst runs out, then 429 with Retry-After.
        statuses = []
        for _ in range(15):
            status, _, headers = request(proc, query="domains=q0.example", token=TOKENS["r2"])
            statuses.append(status)
            if status == 429:
                assert int(headers["Retry-After"]) >= 1
        assert statuses[:5] == [200] * 5 and 429 in statuses
        # Another reporter has its own bucket.
        assert request(proc, query="domains=q0.example", token=TOKENS["r3"])[0] == 200
    finally:
        proc.stop()


# -------------------------------------------------------- files


def test_data_files_are_private_and_a_readable_token_file_is_refused(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        proc = ServiceProcess(tmp_path, TOKENS, tmp_path / "db")
        try:
            assert report(proc, "r1", ("p.example", "dead", time.time())) == 1
        finally:
            proc.stop()
    finally:
        os.umask(old)
    db = tmp_path / "db"
    modes = {str(p.relative_to(tmp_path)): stat.S_IMODE(p.stat().st_mode) for p in [db, *db.rglob("*")]}
    assert modes["db"] == 0o700 and modes["db/consensus"] == 0o700, modes
    files = {name: mode for name, mode in modes.items() if (tmp_path / name).is_file()}
    assert "db/votes.sqlite3" in files and "db/consensus/data.mdb" in files, files
    assert all(mode == 0o600 for mode in files.values()), files

    tokens = tmp_path / "tokens.txt"
    tokens.chmod(0o644)
    run = subprocess.run(
        [sys.executable, "-m", "scrapy_domainstate.service", "--port", "0", "--token-file", str(tokens)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 2
    assert str(tokens) in run.stderr and "chmod 600" in run.stderr


# ------------------------------------------------------------ slowloris

SLOW = 1100
LOOKUPS = 46


class Slowloris:
    """SLOW connections that send a request one byte at a time (a byte every 2 s),
    reconnecting every 2 s those the service closed. ``stats["established"]`` counts the
    connections the kernel completed (accepted by the service, or queued for it)."""

    REQUEST = b"GET /api/scrape/domain-state?domains=a.example HTTP/1.1\r\nHost: x\r\n"

    def __init__(self, host: str, port: int) -> None:
        self.address = (host, port)
        self.stop = threading.Event()
        self.stats = {"opened": 0, "closed": 0, "established": 0}
        self._sel = selectors.DefaultSelector()
        #: socket -> bytes of REQUEST sent (-1: still connecting)
        self._socks: dict[socket.socket, int] = {}
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _connect(self) -> None:
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(self.address)
        self._socks[s] = -1
        self._sel.register(s, selectors.EVENT_WRITE)
        self.stats["opened"] += 1

    def _drop(self, s: socket.socket) -> None:
        self._sel.unregister(s)
        self._socks.pop(s, None)
        s.close()
        self.stats["closed"] += 1

    def _event(self, s: socket.socket, events: int) -> None:
        if self._socks.get(s) == -1 and events & selectors.EVENT_WRITE:
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                self._drop(s)
                return
            self._socks[s] = 0
            self.stats["established"] += 1
            self._sel.modify(s, selectors.EVENT_READ)
            return
        try:
            data = s.recv(4096)
        except OSError:
            data = b""
        if not data:  # closed by the service: come back with the next drip
            self._drop(s)

    def _drip(self) -> None:
        for s, sent in list(self._socks.items()):
            if 0 <= sent < len(self.REQUEST):
                with contextlib.suppress(OSError):
                    s.send(self.REQUEST[sent : sent + 1])
                    self._socks[s] = sent + 1
        for _ in range(SLOW - len(self._socks)):
            self._connect()

    def _run(self) -> None:
        for _ in range(SLOW):
            self._connect()
        last_drip = time.monotonic()
        while not self.stop.is_set():
            for key, events in self._sel.select(0.2):
                assert isinstance(key.fileobj, socket.socket)
                self._event(key.fileobj, events)
            if time.monotonic() - last_drip > 2.0:
                last_drip = time.monotonic()
                self._drip()
        for s in self._socks:
            s.close()
        self._sel.close()


def test_slow_clients_cannot_starve_others_at_1024_open_files(tmp_path: Path) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < SLOW + 200:
        pytest.skip(f"the test process needs {SLOW + 200} open files (hard limit {hard})")
    if soft != resource.RLIM_INFINITY and soft < SLOW + 200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (SLOW + 200, hard))
    proc = ServiceProcess(tmp_path, TOKENS, None, nofile=1024)
    attacker = Slowloris(proc.host, proc.port)
    stats = attacker.stats
    try:
        assert report(proc, "r1", ("busy.example", "dead", time.time())) == 1
        attacker.thread.start()
        deadline = time.monotonic() + 30
        # More slow connections than the service has file descriptors (SYNs dropped by a
        # full accept queue are retried after 1, 3, 7 s).
        while stats["established"] < 1100 and time.monotonic() < deadline:
            time.sleep(0.2)
        answered = 0
        started = time.monotonic()
        for _ in range(LOOKUPS):
            try:
                status, body, _ = request(proc, query="domains=busy.example", token=TOKENS["r2"])
            except OSError:
                continue
            if status == 200 and "busy.example" in body["domains"]:
                answered += 1
            time.sleep(0.1)
        elapsed = time.monotonic() - started
        assert answered == LOOKUPS, f"{answered} of {LOOKUPS} lookups answered in {elapsed:.1f} s; {stats}"
        assert stats["established"] >= 1100, stats
        assert proc.proc.poll() is None  # still serving
    finally:
        attacker.stop.set()
        attacker.thread.join(10)
        code = proc.stop()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert code in (0, -15)
