"""``scrapy domainstate``, run as a user runs it: a subprocess, outside a project with
``-s DOMAINSTATE_LMDB_PATH=...`` (and once inside a minimal project).

Stores are seeded from Python beforehand and checked from Python afterwards.
"""

from __future__ import annotations

import contextlib
import csv
import http.client
import io
import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from scrapy_domainstate.core.config import DAY, Config
from scrapy_domainstate.core.record import DomainStat, Method, Outcome, RecentEntry, State
from scrapy_domainstate.store.lmdb import LmdbStore
from scrapy_domainstate.tools.commands.domainstate import Progress, _parse_ttl, _span
from scrapy_domainstate.tools.csvio import COLUMNS, DERIVED_COLUMNS, EXPORTED_COLUMNS, read_csv, write_csv

SCRAPY = (sys.executable, "-m", "scrapy", "domainstate")
VALID = "valid states: unknown, dead, antibot-soft, antibot-hard, friendly, cold"


# ------------------------------------------------------------------ helpers


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCRAPY_")}
    env["PYTHONIOENCODING"] = "utf-8"
    return env


def scrapy(*args: str, cwd: Path, db: Path | str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run ``python -m scrapy domainstate ARGS`` and return the finished process (text output)."""
    cmd = [*SCRAPY, *args]
    if db is not None:
        cmd += ["-s", f"DOMAINSTATE_LMDB_PATH={db}"]
    return subprocess.run(
        cmd,
        cwd=cwd,
        env=_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def scrapy_all(
    *calls: tuple[str, ...], cwd: Path, db: Path | str | None = None, timeout: float = 60
) -> list[subprocess.CompletedProcess]:
    """Several independent ``scrapy domainstate`` runs at once (each costs about a second)."""
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return list(pool.map(lambda args: scrapy(*args, cwd=cwd, db=db, timeout=timeout), calls))


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


@contextlib.contextmanager
def opened(db: Path) -> Iterator[LmdbStore]:
    store = LmdbStore(Config(lmdb_path=str(db), flush_size=100_000, flush_interval=1e9))
    store.open()
    try:
        yield store
    finally:
        store.close()


def records(db: Path) -> dict[str, DomainStat]:
    with opened(db) as store:
        return {s.domain: s for s in store.iter_records()}


def _rec(
    store: LmdbStore,
    domain: str,
    at: float,
    method: str,
    outcome: str,
    status: int | None = None,
    error: str | None = None,
) -> None:
    store.record(domain, RecentEntry(at, Method(method), Outcome(outcome), status, error))


#: The state each seeded domain reads as now (expired ones count as what they expire to).
SEEDED = {
    "friendly.com": State.FRIENDLY,
    "dead.org": State.DEAD,
    "soft.net": State.ANTIBOT_SOFT,
    "hard.com": State.ANTIBOT_HARD,
    "cold.io": State.COLD,
    "unknown.de": State.UNKNOWN,
    "example.co.uk": State.UNKNOWN,
    "expiring.com": State.ANTIBOT_SOFT,  # expires within the hour
    "expired-dead.com": State.UNKNOWN,  # stored dead, expired 10 s ago
    "expired-cold.com": State.UNKNOWN,  # stored cold, expired 1000 s ago
}


def seed(db: Path, now: float) -> None:
    with opened(db) as s:
        for i in range(6):
            _rec(s, "friendly.com", now - 3 * DAY + i * 60, "fetch", "ok-contact", 200)
        # (one visit's dead signals hold the domain for a day: docs/SPEC.md section 2 revised)
        _rec(s, "dead.org", now - 3600, "head", "dead", None, "DNSLookupError")
        _rec(s, "dead.org", now - 3600 + 1, "fetch", "dead", None, "DNSLookupError")
        _rec(s, "soft.net", now - 2 * DAY, "fetch", "antibot", 403, "cloudflare:cf-ray")
        for i in range(3):
            # 403 + cf-ray: a 429 does not count towards antibot-hard (docs/SPEC.md section 2 revised)
            _rec(s, "hard.com", now - 3600 + i, "fetch", "antibot", 403, "cloudflare:cf-ray")
        for i in range(10):  # cold: 10 empty pages over two visits (docs/SPEC.md section 2)
            _rec(s, "cold.io", now - 5 * DAY + (i // 5) * DAY + i, "fetch", "ok-empty", 200)
        _rec(s, "unknown.de", now - 100, "fetch", "ok-contact", 200)
        _rec(s, "example.co.uk", now - 7200, "fetch", "ok-contact", 200)
        _rec(s, "example.co.uk", now - 7100, "fetch", "http-error", 500)
        _rec(s, "example.co.uk", now - 7000, "fetch", "network-error", None, "TimeoutError")
        s.flush()
        s.put(
            DomainStat(
                "expiring.com",
                State.ANTIBOT_SOFT,
                first_seen=now - DAY,
                last_seen=now - DAY,
                state_changed_at=now - DAY,
                state_expires_at=now + 3600,
            )
        )
        for domain, state, ago in (("expired-dead.com", State.DEAD, 10), ("expired-cold.com", State.COLD, 1000)):
            s.put(
                DomainStat(
                    domain,
                    state,
                    recent=[RecentEntry(now - 40 * DAY, Method.FETCH, Outcome.OK_EMPTY, 200)],
                    fetch_total=1,
                    fetch_ok_empty=1,
                    first_seen=now - 40 * DAY,
                    last_seen=now - 40 * DAY,
                    state_changed_at=now - 40 * DAY,
                    state_expires_at=now - ago,
                )
            )
    stored = records(db)
    assert {d: s.state for d, s in stored.items() if not d.startswith("expir")} == {
        d: s for d, s in SEEDED.items() if not d.startswith("expir")
    }


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """An empty working directory outside any project."""
    d = tmp_path / "work"
    d.mkdir()
    return d


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "store" / "db"
    seed(path, time.time())
    return path


# --------------------------------------------------------------------- entry


def test_entry_point_outside_a_project(work: Path) -> None:
    listing = subprocess.run(
        [sys.executable, "-m", "scrapy", "-h"], cwd=work, env=_env(), capture_output=True, text=True, check=False
    )
    assert "no active project" in listing.stdout
    assert "domainstate" in listing.stdout
    helped = ok(scrapy("-h", cwd=work))
    for sub in ("stats", "show DOMAIN|URL", "set DOMAIN STATE", "reset --all", "export", "import FILE", "sweep"):
        assert sub in helped.stdout
    assert VALID.split(": ")[1] in " ".join(helped.stdout.split())


def test_bad_usage(work: Path, db: Path) -> None:
    none, bogus, misplaced, bad_setting = scrapy_all(
        (),
        ("frobnicate",),
        ("sweep", "--json"),
        ("stats", "-s", "DOMAINSTATE_RECENT_SIZE=0"),
        cwd=work,
        db=db,
    )
    assert none.returncode == 2
    assert "a subcommand is needed" in none.stderr
    assert bogus.returncode == 2
    assert "unknown subcommand 'frobnicate'" in bogus.stderr
    assert misplaced.returncode == 2
    assert "--json does not apply to 'sweep'" in misplaced.stderr
    assert bad_setting.returncode == 2
    assert "DOMAINSTATE_RECENT_SIZE" in bad_setting.stderr
    assert "Traceback" not in bad_setting.stderr


# --------------------------------------------------------------------- stats


def test_stats(work: Path, db: Path) -> None:
    text = ok(scrapy("stats", cwd=work, db=db)).stdout
    assert f"lmdb:{os.path.realpath(db)}" in text
    assert "domains: 10" in text
    rows = {
        line.split()[0]: line.split()[1:3] for line in text.splitlines() if line.split()[:1] in ([s] for s in State)
    }
    expected = {s: sum(1 for v in SEEDED.values() if v is s) for s in State}
    assert rows == {s.value: [str(n), f"{100 * n / 10:.1f}%"] for s, n in expected.items()}
    assert "expired, not yet swept:  2" in text

    data = json.loads(ok(scrapy("stats", "--json", cwd=work, db=db)).stdout)
    assert data["domains"] == 10
    assert data["path"] == os.path.realpath(db)
    assert data["size_bytes"] > 0
    assert data["states"] == {
        s.value: {"count": n, "share": round(n / 10, 6)} for s, n in expected.items()
    }  # all six, zeros included
    # expiring.com and dead.org (one visit's dead signals hold it a day: docs/SPEC.md section 2
    # revised); + the unknown ones and soft.net
    assert data["expiring"] == {"24h": 2, "7d": 7}
    assert data["expired"] == 2


def test_read_only_commands_create_nothing(work: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "db"
    # A relative path outside a project means ./.scrapy/<path>: not created either.
    calls = [("stats",), ("show", "example.com"), ("export",), ("report",), ("sweep",), ("reset", "a.com")]
    relative = [(*args, "-s", "DOMAINSTATE_LMDB_PATH=relative-db") for args in calls]
    first, *rest = scrapy_all(("stats", "-s", f"DOMAINSTATE_LMDB_PATH={missing}"), *relative, cwd=work)
    assert first.returncode == 1
    assert f"no domainstate database at {missing}" in first.stderr
    assert "nothing was created" in first.stderr
    assert not (tmp_path / "nowhere").exists()
    for args, proc in zip(calls, rest, strict=True):
        assert proc.returncode == 1, args
        assert f"no domainstate database at {work / '.scrapy' / 'relative-db'}" in proc.stderr
    assert list(work.iterdir()) == []


# ---------------------------------------------------------------------- show


def test_show(work: Path, db: Path) -> None:
    by_url, by_host, expired_proc, unseen_proc, hostless, hard, hard_explain = scrapy_all(
        ("show", "https://User@WWW.Shop.Example.co.uk:8443/a?b=1", "--json"),
        ("show", "dead.org"),
        ("show", "expired-dead.com", "--json"),
        ("show", "http://never-seen.example/", "--json"),
        ("show", "mailto:someone@example.com"),
        ("show", "hard.com"),
        ("explain", "hard.com"),
        cwd=work,
        db=db,
    )
    # (the command does not know whether the crawl has a browser route: both are said)
    hard_text = "decision now: browser (a crawl without a browser route skips it; each crawl's first request is a"
    assert hard_text in ok(hard).stdout and hard_text in ok(hard_explain).stdout
    data = json.loads(ok(by_url).stdout)
    assert data["key"] == "example.co.uk"
    assert data["found"] is True
    assert data["state"] == "unknown"
    assert data["decision"] == "fetch-then-browser"  # unknown: its first request is the probe (no HEAD)
    record = data["record"]
    assert record["domain"] == "example.co.uk"
    assert record["fetch_total"] == 3
    assert [e["outcome"] for e in record["recent"]] == ["ok-contact", "http-error", "network-error"]
    assert record["recent"][2] == {
        "at": pytest.approx(record["recent"][2]["at"]),
        "method": "fetch",
        "outcome": "network-error",
        "status": None,
        "error_class": "TimeoutError",
    }
    assert isinstance(record["state_expires_at"], float)

    text = ok(by_host).stdout
    assert text.splitlines()[0] == "dead.org"
    assert "state:        dead" in text
    assert "decision now: skip" in text
    assert "DNSLookupError" in text
    assert "head " in text and "fetch" in text

    expired = json.loads(ok(expired_proc).stdout)
    assert (expired["state"], expired["expired"], expired["record"]["state"]) == ("unknown", True, "dead")

    unseen = json.loads(ok(unseen_proc).stdout)
    assert unseen["key"] == "never-seen.example"
    assert (unseen["found"], unseen["record"], unseen["state"], unseen["decision"]) == (
        False,
        None,
        "unknown",
        "fetch-then-browser",
    )

    assert hostless.returncode == 2
    assert "no usable host name" in hostless.stderr


# ------------------------------------------------------------------ set/reset


def test_set(work: Path, db: Path) -> None:
    before = time.time()
    # Several writers at once, as several operators (or crawls) may be: nothing is lost.
    first, second, third, bad, bad_ttl, far = scrapy_all(
        ("set", "https://www.soft.net/page", "friendly"),
        ("set", "new-site.org", "DEAD", "--ttl", "1h"),
        ("set", "hard.com", "cold", "--ttl", "none"),
        ("set", "soft.net", "zombie"),
        ("set", "soft.net", "dead", "--ttl", "-5"),
        ("set", "far.info", "dead", "--ttl", "99999999999999"),  # past the year 9999: clamped
        cwd=work,
        db=db,
    )
    assert ok(far).stdout.startswith("far.info: (new record) -> dead, expires 9999-12-31 23:59:59 UTC")
    assert ok(first).stdout.startswith("soft.net: antibot-soft -> friendly, expires never")
    ok(second)
    ok(third)
    assert bad.returncode == 2
    assert f"unknown state 'zombie'; {VALID}" in bad.stderr
    assert bad_ttl.returncode == 2
    assert "--ttl must be a positive number" in bad_ttl.stderr

    stored = records(db)
    assert stored["soft.net"].state is State.FRIENDLY
    assert stored["soft.net"].state_expires_at is None
    assert stored["soft.net"].recent  # history kept: only the state is forced
    new = stored["new-site.org"]
    assert new.state is State.DEAD
    assert new.state_expires_at is not None
    assert before + 3600 <= new.state_expires_at <= time.time() + 3600
    assert (stored["hard.com"].state, stored["hard.com"].state_expires_at) == (State.COLD, None)


def test_reset_domain(work: Path, db: Path) -> None:
    before = records(db)["friendly.com"]
    reset, nothing, both = scrapy_all(
        ("reset", "friendly.com"), ("reset", "never-seen.example"), ("reset", "a.com", "--all"), cwd=work, db=db
    )
    assert ok(reset).stdout.startswith("friendly.com: friendly -> unknown")
    after = records(db)["friendly.com"]
    assert after.state is State.UNKNOWN
    assert after.recent == []
    assert after.probed_at == 0.0
    assert (after.fetch_total, after.fetch_ok) == (before.fetch_total, before.fetch_ok) == (6, 6)

    assert "never-seen.example: no record, nothing to reset" in ok(nothing).stdout
    assert "never-seen.example" not in records(db)
    assert both.returncode == 2
    assert "reset takes a DOMAIN or --all" in both.stderr


def test_reset_all(work: Path, db: Path) -> None:
    refused = scrapy("reset", "--all", cwd=work, db=db)
    assert refused.returncode == 2
    assert "without confirmation: pass --yes" in refused.stderr
    assert {d: s.state for d, s in records(db).items()}["dead.org"] is State.DEAD  # untouched

    out = ok(scrapy("reset", "--all", "--yes", cwd=work, db=db)).stdout
    assert "reset 10 domains" in out
    after = records(db)
    assert len(after) == 10
    assert {s.state for s in after.values()} == {State.UNKNOWN}
    assert all(s.recent == [] for s in after.values())
    assert after["friendly.com"].fetch_ok == 6

    ok(scrapy("reset", "--all", "--purge", "--yes", cwd=work, db=db))
    assert records(db) == {}


def test_reset_all_asks_on_a_terminal(work: Path, db: Path) -> None:
    """On a terminal, reset --all asks; anything but y/yes aborts."""

    def run(answer: bytes) -> tuple[int, str]:
        master, slave = pty.openpty()
        proc = subprocess.Popen(
            [*SCRAPY, "reset", "--all", "-s", f"DOMAINSTATE_LMDB_PATH={db}"],
            cwd=work,
            env=_env(),
            stdin=slave,
            stderr=slave,
            stdout=subprocess.PIPE,
        )
        os.close(slave)
        seen = b""
        deadline = time.monotonic() + 30
        while b"[y/N]" not in seen and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    seen += os.read(master, 4096)
                except OSError:
                    break
        os.write(master, answer)
        proc.wait(timeout=30)
        with contextlib.suppress(OSError):
            while select.select([master], [], [], 0.2)[0]:
                chunk = os.read(master, 4096)
                if not chunk:
                    break
                seen += chunk
        os.close(master)
        assert proc.stdout is not None
        proc.stdout.close()
        return proc.returncode, seen.decode("utf-8", "replace")

    code, screen = run(b"n\n")
    assert "Reset all 10 domains of lmdb:" in screen
    assert code == 1
    assert records(db)["dead.org"].state is State.DEAD
    code, _ = run(b"y\n")
    assert code == 0
    assert {s.state for s in records(db).values()} == {State.UNKNOWN}


# ------------------------------------------------------------- export/import


def test_export_import_roundtrip(work: Path, db: Path, tmp_path: Path) -> None:
    proc, piped, filtered, bad = scrapy_all(
        ("export", "-o", "out.csv"),
        ("export",),
        ("export", "--state", "dead,cold", "--state", "friendly"),
        ("export", "--state", "bogus"),
        cwd=work,
        db=db,
    )
    assert ok(proc).stdout == ""
    assert "exported 10 domains to out.csv" in proc.stderr
    exported = (work / "out.csv").read_text(encoding="utf-8")
    assert ok(piped).stdout == exported
    assert piped.stderr == ""  # no progress, no chatter when piped
    rows = list(csv.DictReader(io.StringIO(exported)))
    # COLUMNS, then the optional ones, then the derived ones (ignored on import)
    assert tuple(rows[0]) == (*EXPORTED_COLUMNS, *DERIVED_COLUMNS)
    assert len(rows) == 10
    friendly = next(r for r in rows if r["domain"] == "friendly.com")
    assert (friendly["state"], friendly["fetch_total"], friendly["state_expires_at"]) == ("friendly", "6", "")
    assert len(json.loads(friendly["recent"])) == 6

    states = sorted((r["domain"], r["state"]) for r in csv.DictReader(io.StringIO(ok(filtered).stdout)))
    assert states == [
        ("cold.io", "cold"),
        ("dead.org", "dead"),
        ("expired-cold.com", "cold"),  # the stored state: export is a faithful dump
        ("expired-dead.com", "dead"),
        ("friendly.com", "friendly"),
    ]
    assert bad.returncode == 2
    assert VALID in bad.stderr

    copy = tmp_path / "copy" / "db"
    imported = ok(scrapy("import", str(work / "out.csv"), cwd=work, db=copy))
    assert "imported 10 domains" in imported.stdout
    again = ok(scrapy("export", cwd=work, db=copy)).stdout
    assert again == exported
    assert records(copy) == records(db)


def test_import_bad_rows_writes_nothing(work: Path, db: Path) -> None:
    header = ",".join(COLUMNS)
    good = 'good.com,friendly,3,3,0,0,0,1700000000.0,1700000100.0,1700000100.0,,0.0,"[]"'
    lines = [
        header,  # 1
        good,  # 2
        "bad-state.com,zombie,0,0,0,0,0,0,0,0,,0,",  # 3
        "badnum.com,dead,lots,0,0,0,0,0,0,0,,0,",  # 4
        ",dead,0,0,0,0,0,0,0,0,,0,",  # 5
        'json.com,dead,0,0,0,0,0,0,0,0,,0,"[{""at"":1,"',  # 6
        "short.com,dead,0",  # 7
        'GOOD.com,cold,0,0,0,0,0,0,0,0,,0,""',  # 8: same key as line 2 once normalised
        'ent.com,dead,0,0,0,0,0,10,10,10,,0,"[{""at"":20,""method"":""fly"",""outcome"":""ok-empty""}]"',  # 9
        'multi.com,dead,0,0,0,0,0,10,10,10,,0,"[{""at"":20,\n""method"":""fetch"",""outcome"":""dead""}]"',  # 10-11
        "nan.com,dead,0,0,0,0,0,nan,0,0,,0,",  # 12
    ]
    bad_csv = work / "bad.csv"
    bad_csv.write_text("\n".join(lines) + "\n", encoding="utf-8")
    fresh = work.parent / "fresh" / "db"
    before = records(db)

    for target in (db, fresh):
        proc = scrapy("import", str(bad_csv), cwd=work, db=target)
        assert proc.returncode == 1
        errors = [line.split(": ", 1)[1] for line in proc.stderr.splitlines() if line.startswith(str(bad_csv))]
        assert [e.split(":")[0] for e in errors] == [f"line {n}" for n in (3, 4, 5, 6, 7, 8, 9, 12)], proc.stderr
        assert "unknown state 'zombie'; valid states:" in errors[0]
        assert "fetch_total must be a whole number" in errors[1]
        assert "domain is empty" in errors[2]
        assert "recent is not valid JSON" in errors[3]
        assert "expected 13 fields, got 3" in errors[4]
        assert "domain good.com is already on line 2" in errors[5]
        assert "recent[0].method 'fly'" in errors[6]
        assert "first_seen must be a finite number" in errors[7]
        assert "8 bad rows" in proc.stderr and "nothing imported" in proc.stderr
    assert records(db) == before  # not one row written, not even the good one
    assert not fresh.parent.exists()  # the store was never even opened


# ---------------------------------------------------------------------- sweep


def test_sweep(work: Path, db: Path) -> None:
    out = ok(scrapy("sweep", cwd=work, db=db)).stdout
    assert out.strip() == "dropped 2 expired records; 8 remain"
    assert set(records(db)) == set(SEEDED) - {"expired-dead.com", "expired-cold.com"}
    again = ok(scrapy("sweep", cwd=work, db=db)).stdout
    assert again.strip() == "dropped 0 expired records; 8 remain"


# ---------------------------------------------------------------- concurrency

WRITER = """
import random, sys, time
from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.record import Method, Outcome, RecentEntry
from scrapy_domainstate.store.lmdb import LmdbStore

store = LmdbStore(Config(lmdb_path=sys.argv[1], flush_size=50, flush_interval=0.05))
store.open()
outcomes = list(Outcome)
n = 0
deadline = time.time() + float(sys.argv[2])
while time.time() < deadline:
    for _ in range(50):
        store.record(f"crawl{random.randrange(3000)}.com", RecentEntry(time.time(), Method.FETCH, random.choice(outcomes), 200))
        n += 1
    store.flush()
    if n == 50:
        print("writing", flush=True)
store.close()
print(n, flush=True)
"""


def test_reading_while_a_crawl_writes(work: Path, db: Path) -> None:
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db), "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=_env(),
        cwd=work,
    )
    try:
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "writing"
        first = json.loads(ok(scrapy("stats", "--json", cwd=work, db=db)).stdout)["domains"]
        shown = json.loads(ok(scrapy("show", "friendly.com", "--json", cwd=work, db=db)).stdout)
        assert shown["state"] == "friendly"
        exported = ok(scrapy("export", "--state", "friendly", cwd=work, db=db)).stdout
        assert "friendly.com,friendly" in exported
        second = json.loads(ok(scrapy("stats", "--json", cwd=work, db=db)).stdout)["domains"]
        assert 10 < first <= second  # the crawl's writes show up as they commit
        assert writer.poll() is None, "the writer must still be running: the reads overlapped its writes"
    finally:
        writer.terminate()  # like a crawl killed mid-write: the store stays readable
        writer.wait(timeout=30)
        assert writer.stdout is not None
        writer.stdout.close()
    stored = records(db)
    assert stored["friendly.com"].state is State.FRIENDLY


# -------------------------------------------------------------------- project


def test_inside_a_project(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / "myproj").mkdir(parents=True)
    (project / "scrapy.cfg").write_text("[settings]\ndefault = myproj.settings\n")
    (project / "myproj" / "__init__.py").write_text("")
    (project / "myproj" / "settings.py").write_text('BOT_NAME = "myproj"\nDOMAINSTATE_TTL = {"dead": 60}\n')
    inner = project / "myproj"  # run from a subdirectory: scrapy finds scrapy.cfg upwards
    # No .scrapy yet: stats says so and does not create the project data dir.
    missing = scrapy("stats", cwd=inner)
    assert missing.returncode == 1
    assert f"no domainstate database at {project / '.scrapy' / 'domainstate'}" in missing.stderr
    assert not (project / ".scrapy").exists()

    # `set` writes into <project>/.scrapy/domainstate, with the project's TTL setting.
    out = ok(scrapy("set", "example.com", "dead", cwd=inner)).stdout
    assert out.startswith("example.com: (new record) -> dead")
    db = project / ".scrapy" / "domainstate"
    stored = records(db)["example.com"]
    assert stored.state_expires_at == pytest.approx(stored.state_changed_at + 60)

    data = json.loads(ok(scrapy("stats", "--json", cwd=project)).stdout)
    assert data["path"] == os.path.realpath(db)
    # ... which is where a crawl of this project keeps it (Scrapy's data_path).
    crawl_path = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os; from scrapy.utils.project import data_path; print(data_path('domainstate'))",
        ],
        cwd=inner,
        env=_env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert os.path.realpath(crawl_path) == data["path"]
    assert data["states"]["dead"]["count"] == 1


# ---------------------------------------------------------------------- serve


def test_serve(work: Path, tmp_path: Path) -> None:
    pytest.importorskip("scrapy_domainstate.service")
    missing = scrapy("serve", cwd=work)
    assert missing.returncode == 2
    assert "--token-file" in missing.stderr

    tokens = work / "tokens.txt"
    tokens.write_text("# reporter token\nalice secret-token-alice\n")
    tokens.chmod(0o600)  # the service refuses a token file others can read
    proc = subprocess.Popen(
        [*SCRAPY, "serve", "--port", "0", "--token-file", str(tokens), "--db", str(tmp_path / "service")],
        cwd=work,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("domainstate service listening on http://127.0.0.1:"), line
        port = int(line.rsplit(":", 1)[1])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request(
            "GET",
            "/api/scrape/domain-state?domains=example.com",
            headers={"Authorization": "Bearer secret-token-alice"},
        )
        response = conn.getresponse()
        assert response.status == 200
        assert json.loads(response.read()) == {"domains": {}}
        conn.request("GET", "/api/scrape/domain-state?domains=example.com")
        assert conn.getresponse().status == 401
        conn.close()
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
    assert (tmp_path / "service" / "votes.sqlite3").exists()


# ------------------------------------------------------------ in-process bits


def test_csv_codec_roundtrip_and_line_numbers() -> None:
    stats = [
        DomainStat(
            "a.com",
            State.ANTIBOT_HARD,
            recent=[RecentEntry(1_700_000_005.25, Method.TAB, Outcome.ANTIBOT, 403, 'block:cloudflare "1020",x')],
            tab_total=1,
            first_seen=1_700_000_000.25,
            last_seen=1_700_000_005.25,
            state_changed_at=1_700_000_005.25,
            state_expires_at=1_707_776_005.25,
        ),
        DomainStat("xn--bcher-kva.de", State.FRIENDLY),
    ]
    buf = io.StringIO()
    assert write_csv(stats, buf) == 2
    back, errors = read_csv(io.StringIO(buf.getvalue()))
    assert errors == []
    assert back == stats
    assert write_csv(stats, io.StringIO(), keep=lambda s: s.state is State.FRIENDLY) == 1

    # Unicode hosts are keyed like the crawl keys them; a quoted field spanning lines
    # keeps the line numbers of later rows right.
    text = buf.getvalue().replace("xn--bcher-kva.de", "Bücher.DE")
    text += 'c.com,dead,0,0,0,0,0,0,0,0,,0,"[\n]"\n' + "d.com,dead,0,0,0,0,0,0,0,0,,0,[{}]\n"
    back, errors = read_csv(io.StringIO(text))
    assert [s.domain for s in back] == ["a.com", "xn--bcher-kva.de", "c.com"]
    assert [str(e) for e in errors] == ["line 6: recent[0] needs 'at', 'method' and 'outcome'"]

    _, errors = read_csv(io.StringIO("domain,state,colour\n"))
    assert len(errors) == 1
    assert errors[0].line == 1
    assert "missing columns: fetch_total" in errors[0].message
    assert "unknown columns: 'colour'" in errors[0].message
    assert read_csv(io.StringIO(""))[1][0].message.startswith("empty file")


def test_ttl_parsing_and_spans() -> None:
    assert _parse_ttl(None) == -1.0
    assert _parse_ttl("none") is None
    assert _parse_ttl("90") == 90.0
    assert _parse_ttl("12h") == 12 * 3600
    assert _parse_ttl("2w") == 14 * DAY
    assert _span(3 * DAY + 4 * 3600 + 5) == "3d 4h"
    assert _span(65) == "1m 5s"


def test_progress_only_on_a_terminal() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    piped = io.StringIO()
    assert Progress("x", 10, stream=piped).tick is None
    tty = Tty()
    progress = Progress("exporting", 2000, stream=tty)
    progress.delay = progress.interval = 0.0
    assert progress.tick is not None
    progress.tick(500)
    progress.done()
    assert "\rexporting: 500/2,000 (25%)" in tty.getvalue()
    assert tty.getvalue().endswith("\r")


def test_host_facts_are_shown_as_part_of_their_domain(work: Path, tmp_path: Path) -> None:
    """After a crawl of ``www.``/``blog.`` hosts: the blog is a host of friendly-1.com, decided
    by its own facts as the policy decides it (export, show, stats); the export round-trips."""
    db = tmp_path / "hosts" / "db"
    now = time.time()
    with opened(db) as store:
        for i in range(6):
            _rec(store, "friendly-1.com", now - 100 + i, "fetch", "ok-contact", 200)
        _rec(store, "blog.friendly-1.com", now - 50, "fetch", "ok-empty", 200)
        _rec(store, "shop.friendly-1.com", now - 40, "fetch", "antibot", 403, "challenge:cloudflare")
    assert records(db)["blog.friendly-1.com"].state is State.UNKNOWN  # one empty page: no verdict yet
    exported, shown, stats = scrapy_all(("export",), ("show", "blog.friendly-1.com"), ("stats",), cwd=work, db=db)
    rows = {r["domain"]: r for r in csv.DictReader(io.StringIO(ok(exported).stdout))}
    # a host with facts of its own is decided by them (docs/SPEC.md section 2, rule 6)
    assert (rows["blog.friendly-1.com"]["part_of"], rows["blog.friendly-1.com"]["effective_state"]) == (
        "host of friendly-1.com",
        "unknown",
    )
    assert rows["shop.friendly-1.com"]["effective_state"] == "antibot-soft"  # its own evidence decides
    assert (rows["friendly-1.com"]["part_of"], rows["friendly-1.com"]["effective_state"]) == ("", "friendly")
    out = ok(shown).stdout
    assert out.startswith("friendly-1.com  (key of 'blog.friendly-1.com')")
    assert "host blog.friendly-1.com: decided by its own facts: unknown; decision now: fetch-then-browser" in out
    text = ok(stats).stdout
    assert "domains: 1\n" in text
    assert "plus 2 hosts of these domains" in text
    # the round trip is unchanged: the derived columns are read by people, ignored on import
    (work / "hosts.csv").write_text(exported.stdout, encoding="utf-8")
    copy = tmp_path / "copy2" / "db"
    ok(scrapy("import", str(work / "hosts.csv"), cwd=work, db=copy))
    assert ok(scrapy("export", cwd=work, db=copy)).stdout == exported.stdout
    assert records(copy) == records(db)


def test_progress_lines_when_piped_for_long_operations() -> None:
    """``every``: a piped stderr gets a plain line every so often (a long import is not silent)."""
    piped = io.StringIO()
    progress = Progress("in.csv: rows imported", 2000, stream=piped, every=0.0)
    assert progress.tick is not None
    progress.tick(500)
    progress.note("ignored when piped")
    progress.done()
    assert piped.getvalue().startswith("in.csv: rows imported: 500/2,000 (25%) (0 s)\n")
    assert "\r" not in piped.getvalue() and "ignored" not in piped.getvalue()
    quiet = io.StringIO()
    slow = Progress("x", stream=quiet, every=10.0)
    assert slow.tick is not None
    slow.tick(1)  # within the first 10 s: nothing
    assert quiet.getvalue() == ""
