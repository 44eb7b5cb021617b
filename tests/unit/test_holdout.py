"""The held-out page set (``tests/unit/holdout``) is intact: files, hashes, labels, provenance.

The set measures the anti-bot classifier on pages it was not tuned on
(``python benchmarks/holdout_eval.py``), so these tests check the data only, never the
classifier's scores.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

HOLDOUT = Path(__file__).parent / "holdout"
CORPUS = Path(__file__).parent / "corpus"
LABELS = {"block-hard", "challenge-soft", "normal"}
FIDELITY = {"verbatim", "abridged", "normalised", "synthetic"}
SOURCE_FIELDS = ("repository", "path", "commit", "licence")
MAX_PAGE = 1_000_000
MAX_SET = 8 * 1024 * 1024


def _entries() -> list[dict[str, Any]]:
    manifest = json.loads((HOLDOUT / "manifest.json").read_text("utf-8"))
    assert manifest["format"] == 1
    return list(manifest["entries"])


def _body(folder: Path, name: str) -> bytes:
    raw = (folder / name).read_bytes()
    return gzip.decompress(raw) if name.endswith(".gz") else raw


ENTRIES = _entries()


def test_the_set_is_not_empty_and_ids_and_files_are_unique() -> None:
    assert ENTRIES
    assert len({e["id"] for e in ENTRIES}) == len(ENTRIES)
    assert len({e["file"] for e in ENTRIES}) == len(ENTRIES)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["id"] for e in ENTRIES])
def test_entry_is_complete_and_its_file_matches(entry: dict[str, Any]) -> None:
    path = HOLDOUT / entry["file"]
    assert path.is_file(), entry["file"]
    assert path.resolve().parent == (HOLDOUT / "pages").resolve()
    body = _body(HOLDOUT, entry["file"])
    assert len(body) == entry["bytes"]
    assert len(body) <= MAX_PAGE
    assert hashlib.sha256(body).hexdigest() == entry["sha256"]
    assert entry["file"].endswith(".gz") == (len(body) > 8192)
    assert entry["label"] in LABELS
    assert entry["fidelity"] in FIDELITY
    assert entry["real"] is (entry["fidelity"] != "synthetic")
    assert isinstance(entry["vendor"], str) and entry["vendor"]
    assert isinstance(entry["kind"], str) and entry["kind"]
    assert 100 <= int(entry["status"]) <= 999
    assert isinstance(entry["headers"], dict)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in entry["headers"].items())
    assert entry["status_source"]
    for name in SOURCE_FIELDS:
        assert isinstance(entry["source"].get(name), str) and entry["source"][name], name
    assert entry["source"]["repository"].count("/") == 1


def test_no_page_is_in_the_tuning_corpus() -> None:
    corpus = json.loads((CORPUS / "manifest.json").read_text("utf-8"))["entries"]
    tuned = {e["sha256"] for e in corpus} | {hashlib.sha256(_body(CORPUS, e["file"])).hexdigest() for e in corpus}
    assert not [e["id"] for e in ENTRIES if e["sha256"] in tuned]
    assert len({e["sha256"] for e in ENTRIES}) == len(ENTRIES)


def test_every_page_file_is_listed_and_the_set_stays_small() -> None:
    listed = {e["file"] for e in ENTRIES}
    on_disk = {f"pages/{p.name}" for p in (HOLDOUT / "pages").iterdir()}
    assert on_disk == listed
    assert sum((HOLDOUT / name).stat().st_size for name in listed) < MAX_SET
