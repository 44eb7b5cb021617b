"""The scoring part of the real-page material (``tests/unit/scoring``): the split and the floor.

The split (``tests/unit/corpus/README.rst``, fixed 2026-12-02 before any new page was looked
at) puts a page in the scoring part by its source repository: the first hex digit of the
SHA-256 of the lower-case ``owner/name`` is ``0``-``7`` and the repository was never used by
the tuning part (``tests/unit/corpus``, ``tests/unit/holdout``, ``tests/unit/parked``). The
scoring part is kept out of every marker's design, and the classifier must stay at or above
the floor on it (the issue-26 targets where they are met; see ``FLOOR``). Near-copies of a
vendor template (``duplicate_of``) and synthetic pages are kept but never counted.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
SCORING = HERE / "scoring"
TUNING = (HERE / "corpus", HERE / "holdout", HERE / "parked")

_spec = importlib.util.spec_from_file_location("holdout_eval", ROOT / "benchmarks" / "holdout_eval.py")
assert _spec and _spec.loader
holdout_eval = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("holdout_eval", holdout_eval)  # its dataclasses look their module up
_spec.loader.exec_module(holdout_eval)

#: Every repository the tuning part used before the split was fixed (2026-12-02): they stay
#: in the tuning part whatever their hash.
BEFORE_THE_SPLIT = frozenset(
    {
        "bbsetup/public-bugbounty-data",
        "hhursev/recipe-scrapers",
        "microlinkhq/is-antibot",
        "VeNoMouS/cloudscraper",
        "codemanki/cloudscraper",
        "silverfoxy/JSCryptoMinerStudy",
        "alvarolobato/inmo-tool",
        "adbar/trafilatura",
        "mozilla/readability",
        "Anorov/cloudflare-scrape",
        "ziplokk1/incapsula-cracker-py3",
        "Ekultek/WhatWaf",
        "felix2056/famouscooperative",
        "ZhengJie98/Domain-IP-Enrichment",
        "Husky169/kxz69web",
        "0xjas0/Chegg-Answer-Bot",
        "nrjones8/robots-dot-txt-archive-bot",
        "atomia/puppet-atomia",
    }
)

#: The floor (issue 26's targets). ``None``: the scoring part has no page to measure it on yet
#: (no hard block so far), so only the target is stated, not enforced.
FLOOR = {
    "recall": 0.97,
    "specificity": 0.97,
    "soft_graded_hard": 0,
    "hard_graded_hard": None,
    "vendor_named": 0.95,
}
HARD_TARGET = 0.90
#: The part may grow, never shrink below what it held when the floor was set.
MIN_BLOCKS, MIN_NORMAL = 2, 60


def scoring_side(repository: str) -> bool:
    """Whether a page from ``repository`` belongs to the scoring part by the split's hash."""
    return hashlib.sha256(repository.lower().encode("utf-8")).hexdigest()[0] in "01234567"


def _entries(folder: Path) -> list[dict[str, Any]]:
    return list(json.loads((folder / "manifest.json").read_text("utf-8"))["entries"])


SCORING_ENTRIES = _entries(SCORING)
TUNING_ENTRIES = [e for folder in TUNING for e in _entries(folder)]
PAGES = {p.file: p for p in holdout_eval.load(SCORING)}


def test_every_scoring_page_sits_on_the_scoring_side() -> None:
    tuned = {e["source"]["repository"].lower() for e in TUNING_ENTRIES} | {r.lower() for r in BEFORE_THE_SPLIT}
    for entry in SCORING_ENTRIES:
        repo = entry["source"]["repository"]
        assert scoring_side(repo), (entry["id"], repo)
        assert repo.lower() not in tuned, (entry["id"], repo)


def test_no_tuning_page_added_after_the_split_belongs_to_the_scoring_side() -> None:
    before = {r.lower() for r in BEFORE_THE_SPLIT}
    for entry in TUNING_ENTRIES:
        repo = entry["source"]["repository"]
        assert repo.lower() in before or not scoring_side(repo), (entry["id"], repo)


def test_the_split_rule_is_the_hash_of_the_repository() -> None:
    # the examples the README's rule gives, recomputed by hand once
    assert scoring_side("FlareSolverr/FlareSolverr")
    assert not scoring_side("oscarotero/Embed")
    assert scoring_side("flaresolverr/flaresolverr") == scoring_side("FlareSolverr/FlareSolverr")


def test_no_scoring_page_is_a_tuning_page() -> None:
    tuned = {e["sha256"] for e in TUNING_ENTRIES}
    assert not [e["id"] for e in SCORING_ENTRIES if e["sha256"] in tuned]
    assert len({e["sha256"] for e in SCORING_ENTRIES}) == len(SCORING_ENTRIES)


@pytest.mark.parametrize("entry", SCORING_ENTRIES, ids=[e["id"] for e in SCORING_ENTRIES])
def test_entry_is_complete_and_its_file_matches(entry: dict[str, Any]) -> None:
    page = PAGES[entry["file"]]
    assert hashlib.sha256(page.body).hexdigest() == entry["sha256"] and len(page.body) == entry["bytes"]
    assert entry["file"].endswith(".gz") == (len(page.body) > 8192)
    assert entry["label"] in ("block-hard", "challenge-soft", "normal")
    assert entry["fidelity"] in ("verbatim", "abridged", "normalised", "transcribed", "synthetic")
    assert entry["status_source"] and isinstance(entry["headers"], dict)
    source = entry["source"]
    assert source["repository"].count("/") == 1 and source["path"] and source["licence"]
    assert len(source["commit"]) == 40
    dup = entry.get("duplicate_of")
    if dup:
        part, _, ident = dup.rpartition(":")
        ids = {e["id"] for e in (SCORING_ENTRIES if not part else _entries(HERE / part))}
        assert ident in ids and ident != entry["id"], dup


def test_every_page_file_is_listed() -> None:
    assert {f"pages/{p.name}" for p in (SCORING / "pages").iterdir()} == {e["file"] for e in SCORING_ENTRIES}


def test_the_classifier_stays_above_the_floor_on_the_scoring_part() -> None:
    total = holdout_eval.Tally()
    for tally in holdout_eval.evaluate(list(PAGES.values())).values():
        total.add(tally)
    report = "\n".join(total.mistakes)
    assert total.blocks >= MIN_BLOCKS and total.normal >= MIN_NORMAL, (total.blocks, total.normal)
    assert total.caught / total.blocks >= FLOOR["recall"], report
    assert (total.normal - total.flagged) / total.normal >= FLOOR["specificity"], report
    assert total.soft_graded_hard <= FLOOR["soft_graded_hard"], report
    if total.hard:
        assert (total.hard - total.hard_graded_soft) / total.hard >= HARD_TARGET, report
    if total.vendor_known:
        assert total.vendor_right / total.vendor_known >= FLOOR["vendor_named"], report
