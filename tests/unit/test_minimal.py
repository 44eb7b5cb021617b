"""No verdict from a script alone (issue 26): minimal pages with invisible captchas stay clean.

``tests/unit/minimal`` holds small pages that load a captcha provider's script invisibly
(reCAPTCHA v3, Turnstile, hCaptcha, Yandex SmartCaptcha, Tencent) or a bot manager's sensor
(DataDome's tag, PerimeterX's snippet, Akamai's ``/akam/`` script) on a landing, coming-soon,
login, contact or thank-you page, or a 404. Without a visible challenge none is a challenge.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from scrapy_domainstate.core.record import Outcome
from scrapy_domainstate.detect.classify import Classifier

MINIMAL = Path(__file__).parent / "minimal"
ENTRIES: list[dict[str, Any]] = json.loads((MINIMAL / "manifest.json").read_text("utf-8"))["entries"]
CLASSIFIERS = {engine: Classifier(engine=engine) for engine in ("pure", "auto")}


def _body(entry: dict[str, Any]) -> bytes:
    raw = (MINIMAL / entry["file"]).read_bytes()
    return gzip.decompress(raw) if entry["file"].endswith(".gz") else raw


def test_the_set_covers_the_shapes() -> None:
    kinds = {e["kind"] for e in ENTRIES}
    assert {"landing", "coming-soon", "login", "contact-form", "form-success", "http-404"} <= kinds
    assert len(ENTRIES) >= 15
    assert {f"pages/{p.name}" for p in (MINIMAL / "pages").iterdir()} == {e["file"] for e in ENTRIES}


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["id"] for e in ENTRIES])
@pytest.mark.parametrize("engine", sorted(CLASSIFIERS))
@pytest.mark.parametrize("root", [True, False], ids=["home", "inner"])
def test_a_minimal_page_with_a_script_is_not_a_challenge(entry: dict[str, Any], engine: str, root: bool) -> None:
    body = _body(entry)
    assert hashlib.sha256(body).hexdigest() == entry["sha256"] and len(body) == entry["bytes"]
    assert entry["label"] == "normal" and entry["fidelity"] == "synthetic" and entry["real"] is False
    url = "https://www.example.com/" if root else "https://www.example.com/contact"
    verdict = CLASSIFIERS[engine].response(int(entry["status"]), entry["headers"], body, url, root)
    assert verdict.outcome is not Outcome.ANTIBOT, (entry["id"], verdict)
