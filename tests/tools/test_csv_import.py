"""CSV import and export (issue 13 break 6, issue 15 item 7).

The codec (:mod:`scrapy_domainstate.tools.csvio`) directly, fuzzed with hypothesis (never an
exception other than the returned row errors), and ``scrapy domainstate import`` as a
user runs it: a subprocess, so a traceback would show on stderr.
"""

from __future__ import annotations

import csv
import io
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_domainstate.core.config import DAY, DEFAULT_TTL, Config
from scrapy_domainstate.core.record import DomainStat, Method, Outcome, RecentEntry, State
from scrapy_domainstate.store import StoreError
from scrapy_domainstate.store.codec import decode, encode
from scrapy_domainstate.store.lmdb import LmdbStore
from scrapy_domainstate.store.memory import MemoryStore
from scrapy_domainstate.tools.commands.domainstate._import import Spool, check, write
from scrapy_domainstate.tools.commands.domainstate._output import Failure
from scrapy_domainstate.tools.csvio import COLUMNS, read_csv, write_csv

NOW = 1_750_000_000.0
HEADER = ",".join(COLUMNS)
SCRAPY = (sys.executable, "-m", "scrapy", "domainstate")


def full_row(domain: str = "a.com", **cells: str) -> str:
    values = {
        "domain": domain,
        "state": "dead",
        "fetch_total": "1",
        "fetch_ok": "0",
        "fetch_ok_empty": "0",
        "tab_total": "0",
        "tab_ok": "0",
        "first_seen": "1700000000.0",
        "last_seen": "1700000000.0",
        "state_changed_at": "1700000000.0",
        "state_expires_at": "",
        "probed_at": "0.0",
        "recent": "[]",
    }
    values.update(cells)
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow([values[c] for c in COLUMNS])
    return buf.getvalue()


def read(text: str, **kwargs: object) -> tuple[list[DomainStat], list[str]]:
    records, errors = read_csv(io.StringIO(text), now=NOW, **kwargs)  # type: ignore[arg-type]
    return records, [str(e) for e in errors]


# ------------------------------------------------------------ minimal rows


def test_minimal_rows_seed_states_with_default_or_given_ttls() -> None:
    records, errors = read("domain,state\nBad.Example.COM,dead\nshop.example.org,antibot-hard\n")
    assert errors == []
    assert [(r.domain, r.state) for r in records] == [("example.com", State.DEAD), ("example.org", State.ANTIBOT_HARD)]
    dead = records[0]
    assert (dead.first_seen, dead.last_seen, dead.state_changed_at) == (NOW, NOW, NOW)
    assert dead.state_expires_at == NOW + DEFAULT_TTL[State.DEAD]
    assert dead.recent == [] and dead.fetch_total == 0

    text = "state,ttl,domain\ndead,7d,a.com\ncold,none,b.com\nfriendly,,c.com\nunknown,90m,d.com\n"
    records, errors = read(text, ttl={**DEFAULT_TTL, State.DEAD: 3600.0})
    assert errors == []
    assert [r.state_expires_at for r in records] == [NOW + 7 * DAY, None, None, NOW + 5400]
    # The records it makes are storable as they are.
    assert all(decode(encode(r)) == r for r in records)


def test_minimal_rows_report_every_problem_of_a_row() -> None:
    text = "domain,state,ttl\n,zombie,soon\nok.com,dead,12h\n"
    records, errors = read(text)
    assert [r.domain for r in records] == ["ok.com"]
    assert len(errors) == 1
    message = errors[0]
    assert message.startswith("line 2: ")
    assert (
        "domain is empty" in message
        and "unknown state 'zombie'" in message
        and "ttl must be a positive duration" in message
    )


def test_a_header_that_is_neither_form_names_both() -> None:
    _, errors = read("domain,state,colour\n")
    assert len(errors) == 1 and errors[0].startswith("line 1: ")
    assert "unknown columns: 'colour'" in errors[0] and "minimal domain,state[,ttl]" in errors[0]
    _, errors = read("domain\nx.com\n")
    assert "missing columns" in errors[0]


# ------------------------------------------------------- full rows, problems


def test_every_problem_of_a_full_row_is_reported() -> None:
    bad = full_row("", state="zombie", fetch_total="lots", first_seen="nan", probed_at="-1")
    _, errors = read(f"{HEADER}\n{bad}\n")
    assert len(errors) == 1
    for part in ("domain is empty", "unknown state", "fetch_total must be a whole number", "first_seen must be"):
        assert part in errors[0], errors[0]
    assert "probed_at must be a finite number >= 0" in errors[0]


def test_a_broken_json_cell_is_a_recent_problem_and_empty_probed_at_is_never_probed() -> None:
    records, errors = read(f"{HEADER}\n{full_row(recent='[{')}\n{full_row('b.com', probed_at='')}\n")
    assert len(errors) == 1 and "line 2: recent is not valid JSON" in errors[0]
    assert "probed_at" not in errors[0]
    assert [(r.domain, r.probed_at) for r in records] == [("b.com", 0.0)]
    # An unquoted JSON cell splits into more fields: the message says why.
    _, errors = read(HEADER + '\na.com,dead,1,0,0,0,0,1,1,1,,0,[{"at":1,"method":"fetch"}]\n')
    assert "expected 13 fields, got 14" in errors[0] and "double quotes" in errors[0]


HUGE = "1" + "0" * 399


@pytest.mark.parametrize(
    ("cells", "expected"),
    [
        ({"recent": '[{"at":' + HUGE + ',"method":"fetch","outcome":"dead"}]'}, "recent[0].at must be a time"),
        ({"recent": '[{"at":NaN,"method":"fetch","outcome":"dead"}]'}, "recent is not valid JSON"),
        ({"recent": '[{"at":Infinity,"method":"fetch","outcome":"dead"}]'}, "recent is not valid JSON"),
        ({"recent": '[{"at":1e999,"method":"fetch","outcome":"dead"}]'}, "recent[0].at must be a finite number"),
        ({"recent": "[" * 2000 + "]" * 2000}, "recent is nested too deep"),
        ({"recent": '[{"at":1700000000,"method":"fetch","outcome":"dead","status":' + HUGE + "}]"}, "status"),
        ({"first_seen": HUGE}, "first_seen must be"),
        ({"last_seen": "1e400"}, "last_seen must be a finite number"),
        ({"fetch_total": HUGE}, "fetch_total must be between 0 and"),
        ({"state_expires_at": "inf"}, "state_expires_at must be a finite number"),
        ({"state_changed_at": "1e15"}, "state_changed_at must be a time before the year 10000"),
    ],
    ids=lambda v: str(v)[:30] if isinstance(v, str) else None,
)
def test_numbers_a_record_cannot_hold_are_row_errors(cells: dict[str, str], expected: str) -> None:
    _, errors = read(f"{HEADER}\n{full_row(**cells)}\n")
    assert len(errors) == 1, errors
    assert errors[0].startswith("line 2: ") and expected in errors[0], errors[0]


def test_text_that_is_not_utf8_is_reported_by_line() -> None:
    raw = (HEADER + "\n" + full_row("good.com") + "\n" + full_row("bad.com", recent="[]") + "\n").encode()
    raw = raw.replace(b"bad.com", b"b\xffd.com")
    fh = io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8", errors="surrogateescape", newline="")
    records, errors = read_csv(fh, now=NOW)
    assert [r.domain for r in records] == ["good.com"]
    assert [str(e) for e in errors] == ["line 3: domain: not valid UTF-8 text"]
    # A JSON escape for a lone surrogate is text no record can hold either.
    bad = '[{"at":1700000000,"method":"fetch","outcome":"dead","error_class":"\\ud800"}]'
    _, errors = read(f"{HEADER}\n{full_row(recent=bad)}\n")
    assert "error_class is not valid Unicode text" in errors[0]


# ----------------------------------------------------------- exact times


def test_export_times_are_whole_seconds_and_never_after_last_seen() -> None:
    first = 1_700_000_000.7
    stat = DomainStat(
        "t.com",
        State.UNKNOWN,
        recent=[RecentEntry(first + 3.6, Method.FETCH, Outcome.OK_EMPTY, 200)],  # stored as first + 4
        fetch_total=1,
        fetch_ok_empty=1,
        first_seen=first,
        last_seen=first + 3.6,
        state_changed_at=first,
    )
    stored = decode(encode(stat))
    assert stored.recent[0].at > stored.last_seen  # what the record keeps: whole seconds after first_seen
    buf = io.StringIO()
    write_csv([stored, decode(encode(DomainStat("u.com", first_seen=first, last_seen=first + 100)))], buf)
    rows = list(csv.DictReader(io.StringIO(buf.getvalue())))
    (entry,) = json.loads(rows[0]["recent"])
    assert entry["at"] == stored.last_seen  # clamped: never after last_seen
    many = decode(
        encode(
            DomainStat(
                "m.com",
                recent=[RecentEntry(first + i * 10, Method.FETCH, Outcome.OK_EMPTY, 200) for i in range(5)],
                first_seen=first,
                last_seen=first + 100,
            )
        )
    )
    buf = io.StringIO()
    write_csv([many], buf)
    times = [e["at"] for e in json.loads(next(csv.DictReader(io.StringIO(buf.getvalue())))["recent"])]
    assert all(t == int(t) for t in times)  # no fraction repeated from first_seen
    assert all(t <= many.last_seen for t in times)
    back, errors = read_csv(io.StringIO(buf.getvalue()))
    assert errors == [] and decode(encode(back[0])) == many  # and it reads back as stored


# ------------------------------------------------------------------ fuzz

CELL = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["", "0", "-1", "nan", "inf", "1e400", HUGE, "[]", "[{}]", "dead", "7d", "none", '"']),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-(10**500), max_value=10**500).map(str),
)
ENTRY = st.fixed_dictionaries(
    {
        "at": st.one_of(st.floats(), st.integers(min_value=-(10**400), max_value=10**400), st.text(max_size=5)),
        "method": st.sampled_from(["fetch", "tab", "head", "fly", 1]),
        "outcome": st.sampled_from([o.value for o in Outcome] + ["", None]),
    },
    optional={"status": st.integers(min_value=-(10**30), max_value=10**30), "error_class": st.text(max_size=300)},
)
RECENT = st.one_of(
    st.lists(ENTRY, max_size=5).map(lambda items: json.dumps(items, allow_nan=True)),
    st.recursive(st.just("[]"), lambda inner: inner.map(lambda t: f"[{t}]"), max_leaves=40),
    st.text(max_size=40),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(CELL, min_size=13, max_size=13), min_size=1, max_size=4), st.lists(RECENT, min_size=4))
def test_fuzzed_full_rows_never_raise(rows: list[list[str]], recents: list[str]) -> None:
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(COLUMNS)
    for row, recent in zip(rows, recents, strict=False):
        writer.writerow([*row[:-1], recent])
    records, errors = read_csv(io.StringIO(buf.getvalue()), now=NOW)
    assert len(records) + len(errors) <= len(rows)
    for stat in records:
        assert decode(encode(stat)).domain == stat.domain  # whatever it accepts, a record holds
    for err in errors:
        assert str(err).startswith(f"line {err.line}: ")


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400), st.sampled_from(["domain,state", "domain,state,ttl", HEADER]))
def test_fuzzed_bytes_never_raise(data: bytes, header: str) -> None:
    raw = header.encode() + b"\n" + data
    fh = io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8", errors="surrogateescape", newline="")
    records, errors = read_csv(fh, now=NOW)
    for stat in records:
        encode(stat)
    assert all(e.line >= 1 for e in errors)


# ------------------------------------------------------- the command


def _scrapy(*args: str, cwd: Path, db: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCRAPY_")}
    env["PYTHONIOENCODING"] = "utf-8"
    return subprocess.run(
        [*SCRAPY, *args, "-s", f"DOMAINSTATE_LMDB_PATH={db}"],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_import_command_refuses_bad_files_by_line_and_seeds_a_block_list(tmp_path: Path) -> None:
    db = tmp_path / "db"
    bad = tmp_path / "bad.csv"
    huge = '[{"at":' + HUGE + ',"method":"fetch","outcome":"dead"}]'
    rows = [HEADER, full_row("ok.com"), full_row("huge.com", recent=huge)]
    rows += [full_row("deep.com", recent="[" * 2000 + "]" * 2000), full_row("bad.com")]
    bad.write_bytes(("\n".join(rows) + "\n").encode().replace(b"bad.com", b"b\xffd.com"))
    one = tmp_path / "one.csv"
    one.write_text("domain,state\nok.com,zombie\n", encoding="utf-8")
    blocklist = tmp_path / "block.csv"
    blocklist.write_text("domain,state,ttl\nspam.example,dead,2w\nwall.example,antibot-hard,\n", encoding="utf-8")

    proc = _scrapy("import", str(bad), cwd=tmp_path, db=db)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith(f"{bad}: line")]
    assert [line.split(": ")[1] for line in lines] == ["line 3", "line 4", "line 5"], proc.stderr
    assert "recent[0].at must be a time" in lines[0]
    assert "nested too deep" in lines[1]
    assert "not valid UTF-8" in lines[2]
    assert "3 bad rows" in proc.stderr and "nothing imported" in proc.stderr
    assert not db.exists()

    proc = _scrapy("import", str(one), cwd=tmp_path, db=db)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "1 bad row in" in proc.stderr and "1 bad rows" not in proc.stderr

    before = time.time()
    proc = _scrapy("import", str(blocklist), cwd=tmp_path, db=db)
    assert proc.returncode == 0, proc.stderr
    assert "imported 2 domains" in proc.stdout
    store = LmdbStore(Config(lmdb_path=str(db)), readonly=True)
    store.open()
    try:
        spam, wall = store.get("spam.example"), store.get("wall.example")
    finally:
        store.close()
    assert spam is not None and spam.state is State.DEAD
    assert before <= spam.state_changed_at <= time.time()
    assert spam.state_expires_at == pytest.approx(spam.state_changed_at + 14 * DAY)
    assert wall is not None and wall.state is State.ANTIBOT_HARD
    assert wall.state_expires_at == pytest.approx(wall.state_changed_at + DEFAULT_TTL[State.ANTIBOT_HARD])


def test_a_sites_worth_to_a_purpose_round_trips() -> None:
    """``shop.example|items`` (keys.purpose_key) exports and imports like a site's own record."""
    worth = DomainStat(
        "shop.example|items",
        State.COLD,
        recent=[RecentEntry(NOW - 60, Method.FETCH, Outcome.NAVIGATION, 200)],
        fetch_total=1,
        first_seen=NOW - 60,
        last_seen=NOW - 60,
        state_changed_at=NOW - 60,
        state_expires_at=NOW + 90 * DAY,
    )
    buf = io.StringIO()
    write_csv([worth], buf)
    records, errors = read_csv(io.StringIO(buf.getvalue()), now=NOW)
    assert errors == []
    assert [(r.domain, r.state, [e.outcome for e in r.recent]) for r in records] == [
        ("shop.example|items", State.COLD, [Outcome.NAVIGATION])
    ]
    # the site part is normalised like any key; a purpose with spaces is refused
    records, errors = read_csv(io.StringIO("domain,state\nWWW.Shop.Example|items,cold\nx.com|a b,cold\n"), now=NOW)
    assert [r.domain for r in records] == ["shop.example|items"]
    assert len(errors) == 1 and "not a purpose" in str(errors[0])


# ------------------------------------------------------- bounded memory (issue 22 item 7)


def _rss_anon_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _import_peak(csv_path: Path, db: Path) -> tuple[int, int, str]:
    """``scrapy domainstate import`` in a child: (its ru_maxrss, its peak RssAnon sampled
    every 20 ms, both KiB; its stdout)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCRAPY_")}
    args = [*SCRAPY, "import", str(csv_path), "-s", f"DOMAINSTATE_LMDB_PATH={db}"]
    with open(db.parent / "out.txt", "w+", encoding="utf-8") as out:
        proc = subprocess.Popen(args, cwd=db.parent, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        heap = 0
        deadline = time.monotonic() + 120
        while True:
            heap = max(heap, _rss_anon_kib(proc.pid))
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)  # this child's own rusage
            if pid:
                proc.returncode = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() > deadline:
                proc.kill()
                pytest.fail("the import took more than 120 s")
            time.sleep(0.02)
        out.seek(0)
        text = out.read()
    assert proc.returncode == 0, text
    return usage.ru_maxrss, heap, text


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_import_memory_does_not_grow_with_the_files_size(tmp_path: Path) -> None:
    """A 4x larger file, same peak memory: pass 1 checks and spools to disk, pass 2 writes in batches.

    Every row is a distinct key. The keys are one site's worth to many purposes
    (``shop.example|pN``): distinct domains would also fill the key caches of
    ``keys`` (bounded, 65,536 entries each), which is not the import's own memory.
    Before: each row held in memory (about 0.8 KB a minimal row, 1.4 KB a full one).
    """
    peaks = []
    for rows in (12_000, 48_000):
        work = tmp_path / str(rows)
        work.mkdir()
        path = work / "in.csv"
        with open(path, "w", encoding="utf-8") as fh:
            fh.write("domain,state\n")
            fh.writelines(f"shop.example|p{i},dead\n" for i in range(rows))
        maxrss, heap, out = _import_peak(path, work / "db")
        assert f"imported {rows:,} domains" in out
        peaks.append((maxrss, heap))
    (small_rss, small_heap), (large_rss, large_heap) = peaks
    # 36,000 more rows: about 29 MB more before; the store's own file pages (mapped, in
    # ru_maxrss) grow by a few MB.
    assert large_rss - small_rss < 12 * 1024, peaks
    assert large_heap - small_heap < 8 * 1024, peaks
    store = LmdbStore(Config(lmdb_path=str(tmp_path / "48000" / "db")), readonly=True)
    store.open()
    try:
        assert store.count() == 48_000
        stat = store.get("shop.example|p47999")
        assert stat is not None and stat.state is State.DEAD
    finally:
        store.close()


def test_a_bad_last_row_after_many_good_ones_writes_nothing(tmp_path: Path) -> None:
    """Pass 1 reads the whole file before pass 2 writes anything; stdin is spooled the same way."""
    path = tmp_path / "in.csv"
    rows = [f"site-{i}.example,dead" for i in range(12_000)]
    path.write_text("domain,state\n" + "\n".join([*rows, "site-3.example,cold", "x.example,zombie"]) + "\n")
    db = tmp_path / "db"
    proc = _scrapy("import", str(path), cwd=tmp_path, db=db)
    assert proc.returncode == 1, proc.stderr
    assert f"{path}: line 12002: domain site-3.example is already on line 5" in proc.stderr
    assert f"{path}: line 12003: unknown state 'zombie'" in proc.stderr
    assert "2 bad rows" in proc.stderr and "nothing imported" in proc.stderr
    assert not db.exists()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCRAPY_")}
    good = "domain,state\n" + "\n".join(rows) + "\n"
    piped = subprocess.run(
        [*SCRAPY, "import", "-", "-s", f"DOMAINSTATE_LMDB_PATH={db}", "-s", "DOMAINSTATE_MAX_DOMAINS=10000"],
        cwd=tmp_path,
        env=env,
        input=good,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert piped.returncode == 0, piped.stderr
    # written in two batches (one transaction each): the cap holds across them
    assert "imported 12,000 domains" in piped.stdout and "2,000 least recently seen" in piped.stdout
    store = LmdbStore(Config(lmdb_path=str(db)), readonly=True)
    store.open()
    try:
        assert store.count() == 10_000
    finally:
        store.close()


def test_a_write_error_in_pass_two_says_how_many_rows_went_in(tmp_path: Path) -> None:
    """Pass 2 writes batches of 10,000: a failing one stops it with the count, the spool is removed."""

    class FailsAtTheSecondBatch(MemoryStore):
        calls = 0

        def put_many(self, stats: Iterable[DomainStat]) -> int:
            self.calls += 1
            if self.calls == 2:
                raise StoreError("writing to memory failed: no space left on device")
            return super().put_many(stats)

    config = Config()
    store = FailsAtTheSecondBatch(config)
    store.open()
    text = "domain,state\n" + "".join(f"site-{i}.example,dead\n" for i in range(25_000))
    with Spool(str(tmp_path)) as spool:
        checked = check(io.StringIO(text), "in.csv", config, NOW, spool)
        assert (checked.rows, checked.bad) == (25_000, 0)
        with pytest.raises(Failure, match=r"no space left on device; 10,000 of 25,000 rows were imported before it"):
            write(store, spool, "in.csv", checked.rows)
    assert store.count() == 10_000
    assert list(tmp_path.iterdir()) == []  # the spool is gone


def test_a_temporary_file_that_cannot_grow_is_named_with_the_fix(tmp_path: Path) -> None:
    """A full TMPDIR in pass 1 (here: files limited to 256 KiB) is an error with the fix, not a traceback."""
    path = tmp_path / "in.csv"
    path.write_text("domain,state\n" + "".join(f"site-{i}.example,dead\n" for i in range(20_000)), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCRAPY_")}
    env["TMPDIR"] = str(tmp_path)

    def small_files() -> None:  # Python ignores SIGXFSZ: a write past the limit fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, 256 * 1024))

    proc = subprocess.run(
        [*SCRAPY, "import", str(path), "-s", f"DOMAINSTATE_LMDB_PATH={tmp_path / 'db'}"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        preexec_fn=small_files,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"error: the import's temporary file in {tmp_path} failed" in proc.stderr, proc.stderr
    assert "set TMPDIR to a directory with room" in proc.stderr
    assert not (tmp_path / "db").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv"]  # the spool is removed
