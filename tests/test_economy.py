"""The crawl-economy simulator (``benchmarks/economy.py``): determinism, accounting, known answers."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from scrapy_domainstate.config import ConfigError

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("economy", ROOT / "benchmarks" / "economy.py")
assert _spec is not None and _spec.loader is not None
economy = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("economy", economy)
_spec.loader.exec_module(economy)

POLICIES = economy.POLICIES
DAY = 86400

QUIET_NOISE = {
    "timeout": 0.0,
    "render_timeout": 0.0,
    "server_error": 0.0,
    "head_404": 0.0,
    "broken_url": 0.0,
    "dns_outage": 0.0,
}
NO_SUBDOMAINS = {"share": 0.0}


def one_kind(behaviour: str, contacts: object = "useful", **extra: object) -> dict:
    """A mix where every site is of one kind, without noise or subdomains."""
    return {
        "kinds": {"only": {"share": 1.0, "behaviour": behaviour, "contacts": contacts, **extra}},
        "noise": dict(QUIET_NOISE),
        "subdomains": NO_SUBDOMAINS,
    }


def run(**kwargs: object) -> dict:
    kwargs.setdefault("store", "memory")
    return economy.simulate(**kwargs)


def strip_runtime(result: dict) -> dict:
    return {k: v for k, v in result.items() if k != "runtime"}


def rows(result: dict) -> list[dict]:
    return [*result["rounds"], result["total"]]


# ---------------------------------------------------------------- determinism


def test_same_seed_same_result():
    a = run(sites=600, rounds=3, seed=7)
    b = run(sites=600, rounds=3, seed=7)
    assert strip_runtime(a) == strip_runtime(b)


def test_different_seeds_differ():
    a = run(sites=600, rounds=2, seed=1)
    b = run(sites=600, rounds=2, seed=2)
    assert a["rounds"] != b["rounds"]


def test_world_does_not_depend_on_the_policy_settings():
    """Overrides change scrapy-domainstate only: the baselines meet the same world."""
    a = run(sites=500, rounds=2, seed=3)
    b = run(sites=500, rounds=2, seed=3, overrides=["DOMAINSTATE_COLD_THRESHOLD=2", "DOMAINSTATE_HEAD_PROBE=false"])
    for ra, rb in zip(a["rounds"], b["rounds"], strict=True):
        for p in ("plain", "fallback", "browser", "oracle"):
            assert ra[p] == rb[p]
    assert a["rounds"][0]["domainstate"] != b["rounds"][0]["domainstate"]


def test_memory_and_lmdb_stores_agree():
    pytest.importorskip("scrapy_domainstate.store.lmdb")
    a = run(sites=400, rounds=3, seed=5, store="memory")
    b = run(sites=400, rounds=3, seed=5, store="lmdb")
    assert a["rounds"] == b["rounds"]
    assert b["params"]["store"] == "lmdb"
    assert b["params"]["stored_domains"] == b["params"]["registered_domains"]


# ------------------------------------------------------------------ accounting


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_accounting_invariants_and_the_oracle_is_never_beaten(seed):
    result = run(sites=1500, rounds=4, seed=seed)
    for row in rows(result):
        findable = row["fallback"]["contacts"]
        # fetch+fallback tries every method on every failure: it finds every contact there is.
        assert row["oracle"]["contacts"] == findable
        best = row["oracle"]["requests_per_contact"]
        for p in POLICIES:
            r = row[p]
            assert r["gained"] == 0, p  # nobody finds a contact fetch+fallback misses
            assert r["contacts"] + r["lost"] == findable, p
            assert r["contacts"] <= findable
            assert r["renders"] <= r["requests"]
            assert r["contacts"] <= r["requests"]  # a contact costs at least one request
            assert r["heads"] <= r["requests"]
            assert r["requests_per_contact"] >= best, p
        assert row["plain"]["renders"] == 0
        assert row["browser"]["renders"] == row["browser"]["requests"] == row["plain"]["requests"]
        assert row["domainstate"]["requests"] <= row["fallback"]["requests"] + row["domainstate"]["heads"]
    # Totals are the sums of the rounds.
    for p in POLICIES:
        for m in ("requests", "renders", "heads", "contacts", "lost"):
            assert result["total"][p][m] == sum(r[p][m] for r in result["rounds"])


def test_per_kind_breakdown_adds_up():
    result = run(sites=800, rounds=2, seed=4)
    for i, by_kind in enumerate(result["by_kind"]):
        for p in ("fallback", "domainstate", "oracle"):
            for metric in ("requests", "renders", "contacts"):
                assert sum(k[metric] for k in by_kind[p].values()) == result["rounds"][i][p][metric]
        assert sum(result["losses"][i].values()) == result["rounds"][i]["domainstate"]["lost"]
    assert sum(result["population"].values()) == 800


# --------------------------------------------------------------- known answers


def test_dead_sites_cost_two_requests_once():
    result = run(sites=10, rounds=4, mix=one_kind("dead", "none"))
    r1 = result["rounds"][0]
    assert r1["domainstate"]["requests"] == 20  # HEAD + confirming GET per site
    assert r1["domainstate"]["heads"] == 10
    assert r1["domainstate"]["renders"] == 0  # dead is not browser-fixable
    for later in result["rounds"][1:]:  # within the 30-day TTL: skipped
        assert later["domainstate"]["requests"] == 0
        assert later["oracle"]["requests"] == 0
    pages = r1["plain"]["requests"]
    assert pages >= 10
    assert r1["fallback"]["requests"] == 2 * pages
    assert r1["fallback"]["renders"] == pages
    assert all(row[p]["contacts"] == 0 for row in rows(result) for p in POLICIES)
    assert result["total"]["oracle"]["requests_per_contact"] is None


def test_dead_sites_are_probed_again_after_the_ttl():
    result = run(sites=10, rounds=2, days_between=31, mix=one_kind("dead", "none"))
    assert [r["domainstate"]["requests"] for r in result["rounds"]] == [20, 20]


def test_friendly_sites_never_go_to_the_browser():
    result = run(sites=300, rounds=4, mix=one_kind("friendly"))
    for row in rows(result):
        assert row["domainstate"]["renders"] == 0
        assert row["fallback"]["contacts"] == row["plain"]["contacts"]
        assert row["fallback"]["renders"] == 0
        assert row["oracle"]["requests"] == row["plain"]["requests"]
    # Without noise, the only pages lost are those of sites an unlucky run of empty pages made cold.
    assert all(set(losses) <= {"skip|cold"} for losses in result["losses"])


def test_friendly_sites_with_five_pages_of_contacts():
    """HEAD + 5 GETs in round 1 make a site friendly; then 5 GETs, no probe, no TTL."""
    mix = one_kind("friendly", [1.0, 1.0])
    mix["pages"] = {"weights": [0, 0, 0, 0, 1]}
    result = run(sites=20, rounds=3, mix=mix)
    assert [r["domainstate"]["requests"] for r in result["rounds"]] == [120, 100, 100]
    assert [r["domainstate"]["heads"] for r in result["rounds"]] == [20, 0, 0]
    assert all(r["domainstate"]["contacts"] == 100 for r in result["rounds"])
    assert result["states"][1] == {"only|friendly": 20}
    assert result["rounds"][1]["oracle"]["requests_per_contact"] == 1.0


def test_contact_less_sites_go_cold():
    mix = one_kind("friendly", "none")
    mix["pages"] = {"weights": [0, 0, 0, 0, 1]}
    result = run(sites=10, rounds=2, mix=mix)
    # HEAD + 5 empty pages: the fifth ok-empty in a row makes the site cold.
    assert result["rounds"][0]["domainstate"]["requests"] == 60
    assert result["rounds"][1]["domainstate"]["requests"] == 0
    assert result["states"][1] == {"only|cold": 10}
    assert result["total"]["oracle"]["requests"] == 0


def test_hard_blocked_sites():
    mix = one_kind("block")
    mix["noise"]["render_passes_block"] = 0.3
    result = run(sites=300, rounds=3, mix=mix)
    for row in rows(result):
        assert row["plain"]["contacts"] == 0
        assert row["browser"]["contacts"] == row["fallback"]["contacts"] == row["oracle"]["contacts"]
        assert row["browser"]["lost"] == 0
    assert result["total"]["browser"]["contacts"] > 0
    r1, r2 = result["rounds"][0], result["rounds"][1]
    # The HEAD sees the block: antibot-hard at once, every page goes to the browser.
    assert r1["domainstate"]["heads"] == 300
    assert r1["domainstate"]["renders"] == r1["browser"]["renders"]
    assert r2["domainstate"]["requests"] == r2["domainstate"]["renders"] == r2["browser"]["requests"]
    assert r2["domainstate"]["contacts"] == r2["browser"]["contacts"]


def test_js_shell_sites_need_the_browser():
    result = run(sites=200, rounds=2, mix=one_kind("js-shell"))
    for row in rows(result):
        assert row["plain"]["contacts"] == 0
        assert row["fallback"]["contacts"] > 0
        assert row["oracle"]["requests"] == row["oracle"]["renders"] == row["browser"]["requests"]
    # Every GET is re-issued in the browser (js-shell is browser-fixable). The shell's
    # ok-empty counts towards 'cold' like the empty render that follows it, so a site can
    # go cold after three contact-less pages: the only pages lost.
    r1 = result["rounds"][0]["domainstate"]
    assert r1["requests"] == r1["heads"] + 2 * r1["renders"]
    assert all(set(losses) <= {"skip|cold"} for losses in result["losses"])


def test_subdomains_share_a_state_unless_per_hostname():
    mix = {"subdomains": {"share": 1.0, "size": [3, 3], "same_kind": 1.0}}
    merged = run(sites=300, rounds=1, mix=mix)
    assert merged["params"]["registered_domains"] == 100
    per_host = run(sites=300, rounds=1, mix=mix, overrides={"DOMAINSTATE_PER_HOSTNAME": True})
    assert merged["rounds"][0]["plain"] == per_host["rounds"][0]["plain"]
    # One probe per registered domain, or one per host.
    assert merged["rounds"][0]["domainstate"]["heads"] <= 100
    assert per_host["rounds"][0]["domainstate"]["heads"] > 100


def test_drift_changes_behaviour_from_its_round():
    mix = one_kind("friendly", to="dead")
    mix["drift"] = {"rounds": [3, 3]}
    result = run(sites=50, rounds=3, mix=mix)
    assert result["rounds"][1]["plain"]["contacts"] > 0
    assert result["rounds"][2]["plain"]["contacts"] == 0
    assert result["rounds"][2]["oracle"]["requests"] == 0


# ---------------------------------------------------------------------- targets


def _fake(rows_in: list[tuple[dict, dict, dict]]) -> dict:
    def row(r: tuple[int, int, int]) -> dict:
        requests, renders, contacts = r
        return {
            "requests": requests,
            "renders": renders,
            "contacts": contacts,
            "requests_per_contact": requests / contacts if contacts else None,
        }

    return {"rounds": [{"domainstate": row(d), "fallback": row(f), "oracle": row(o)} for d, f, o in rows_in]}


def test_targets_from_the_table():
    result = _fake(
        [
            ((900, 90, 50), (1000, 100, 100), (500, 50, 100)),  # round 1 is not judged
            ((500, 50, 99), (1000, 100, 100), (440, 40, 100)),  # 99%, 50%, 50%, 5.05/4.4 = 1.148x
        ]
    )
    targets = {t["target"]: t for t in economy.evaluate_targets(result)}
    assert targets["contacts"]["values"] == [0.99] and targets["contacts"]["met"]
    assert targets["requests"]["values"] == [0.5] and targets["requests"]["met"]
    assert targets["renders"]["values"] == [0.5] and targets["renders"]["met"]
    assert targets["cost"]["values"][0] == pytest.approx(5.0505 / 4.4, rel=1e-3)
    assert targets["cost"]["met"]

    result["rounds"].append(_fake([((510, 51, 98), (1000, 100, 100), (400, 40, 100))])["rounds"][0])
    targets = {t["target"]: t for t in economy.evaluate_targets(result)}
    assert targets["contacts"]["rounds"] == [2, 3]
    assert not targets["contacts"]["met"]  # 98% in round 3
    assert not targets["requests"]["met"]  # 51%
    assert not targets["renders"]["met"]
    assert not targets["cost"]["met"]  # 5.2 / 4.0 = 1.3x


def test_targets_need_a_second_round():
    result = _fake([((1, 1, 1), (1, 1, 1), (1, 1, 1))])
    assert not any(t["met"] for t in economy.evaluate_targets(result))


def test_targets_in_a_real_run_match_its_rows():
    result = run(sites=500, rounds=3, seed=9)
    targets = {t["target"]: t for t in result["targets"]}
    for i, rnd in enumerate((2, 3)):
        row = result["rounds"][rnd - 1]
        ds, fb, oracle = row["domainstate"], row["fallback"], row["oracle"]
        assert targets["requests"]["values"][i] == ds["requests"] / fb["requests"]
        assert targets["contacts"]["values"][i] == ds["contacts"] / fb["contacts"]
        assert targets["cost"]["values"][i] == ds["requests_per_contact"] / oracle["requests_per_contact"]


# ------------------------------------------------------------- inputs and CLI


def test_config_overrides_use_the_real_validation():
    with pytest.raises(ConfigError, match="DOMAINSTATE_COLD_THRESHOLD"):
        run(sites=10, rounds=1, overrides=["DOMAINSTATE_COLD_THRESHOLD=0"])
    with pytest.raises(ConfigError, match="unknown setting"):
        run(sites=10, rounds=1, overrides=["DOMAINSTATE_NO_SUCH=1"])
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        run(sites=10, rounds=1, overrides=["DOMAINSTATE_COLD_THRESHOLD"])
    result = run(sites=10, rounds=1, overrides=['DOMAINSTATE_TTL={"unknown": 2592000}', "COLD_THRESHOLD=10"])
    assert result["params"]["overrides"] == {
        "DOMAINSTATE_TTL": '{"unknown": 2592000}',
        "DOMAINSTATE_COLD_THRESHOLD": "10",
    }


def test_mix_validation():
    economy.load_mix()  # the shipped default is valid
    with pytest.raises(economy.MixError, match="add up to 1"):
        economy.load_mix({"kinds": {"a": {"share": 0.5, "behaviour": "friendly"}}})
    with pytest.raises(economy.MixError, match="behaviour"):
        economy.load_mix({"kinds": {"a": {"share": 1, "behaviour": "haunted"}}})
    with pytest.raises(economy.MixError, match=r"noise\.timeout"):
        economy.load_mix({"noise": {"timeout": 2}})
    with pytest.raises(economy.MixError, match="cannot read"):
        economy.load_mix("/nonexistent/mix.json")


def test_default_mix_is_documented():
    data = json.loads(economy.DEFAULT_MIX_PATH.read_text())
    for name, kind in data["kinds"].items():
        if name != "why":
            assert kind.get("why"), name
    for section in ("kinds", "contacts", "pages", "noise", "drift", "subdomains", "crawl"):
        assert data[section].get("why"), section
    for key in data["noise"]:
        if not key.startswith("why"):
            assert data["noise"]["why_each"].get(key), key


def test_cli_prints_the_table_and_writes_json(tmp_path, capsys):
    out = tmp_path / "economy.json"
    code = economy.main(
        ["--sites", "300", "--rounds", "2", "--store", "memory", "--json", str(out), "--no-progress", "--by-kind"]
    )
    assert code == 0
    captured = capsys.readouterr()
    assert "scrapy-domainstate" in captured.out and "oracle" in captured.out
    assert "Targets for scrapy-domainstate" in captured.out
    assert "Per kind" in captured.out
    assert captured.err == ""  # progress only on a terminal or with --progress
    data = json.loads(out.read_text())
    assert data["params"]["sites"] == 300 and len(data["rounds"]) == 2


def test_cli_progress_and_bad_override(capsys):
    economy.main(["--sites", "100", "--rounds", "2", "--store", "memory", "--progress"])
    err = capsys.readouterr().err
    assert "round 1/2" in err and "round 2/2" in err
    with pytest.raises(SystemExit):
        economy.main(["--sites", "10", "--store", "memory", "--config-override", "DOMAINSTATE_FRIENDLY_RATIO=2"])
    assert "DOMAINSTATE_FRIENDLY_RATIO" in capsys.readouterr().err


def test_chart(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    path = tmp_path / "economy.png"
    economy.main(["--sites", "200", "--rounds", "2", "--store", "memory", "--chart", str(path)])
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_chart_without_matplotlib(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails
    path = tmp_path / "economy.png"
    economy.main(["--sites", "100", "--rounds", "1", "--store", "memory", "--chart", str(path)])
    assert not path.exists()
    assert "matplotlib is not installed" in capsys.readouterr().err
