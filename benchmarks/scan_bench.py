"""Per-page cost of the body scans: anti-bot classification and the contact scan.

Two sets of pages. The pages ``benchmarks/overhead.py`` crawls, next to the targets of issue 14
(CPU per response, classification and contact scan together, hyperscan installed: the 652-byte
tiny page <= 5 us, each 50 KB page and the Cloudflare challenge <= 20 us): a tiny page, 50 KB
of real-looking HTML with a contact early, late or not at all, and a 4.4 KB challenge (403).
And real captures from ``tests/unit/corpus`` (a normal page cut to 50 KB, the same with a
contact near its end, a real page repeated to 1 MB, a page whose first 64 KB are all inline
styles and scripts, a small and a site-branded 352 KB challenge), served with a CDN's headers.
For each page it times ``Classifier.response()``, the contact scan and both one after the other
on the same body (what the middleware does: the contact scan only for a page that is not a
challenge): process CPU time, minimum of several rounds, the copy of the body subtracted.

The ``pure`` engine is the fallback without hyperscan (``Classifier(engine='pure')`` and the
plain contact scans); ``hyperscan`` is the default when the package is installed.

    python benchmarks/scan_bench.py              # the installed / PYTHONPATH package
    python benchmarks/scan_bench.py --rounds 9   # more rounds on a noisy machine

Run it with ``PYTHONPATH`` pointing at another checkout to compare two versions (the pages are
read from this file's checkout). Not a test: figures depend on the machine.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import inspect
import json
import time
from pathlib import Path
from typing import Any

import scrapy_domainstate
from scrapy_domainstate.detect import contacts as contacts_module
from scrapy_domainstate.detect.classify import Classifier
from scrapy_domainstate.detect.contacts import has_contact

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent / "tests" / "unit" / "corpus"
#: Targets of issue 14 (hyperscan, classification + contact scan), by page label.
TARGETS = {"tiny page (652 B)": 5.0}


def _page(name: str) -> bytes:
    manifest = json.loads((CORPUS / "manifest.json").read_text("utf-8"))
    entry = next(e for e in manifest["entries"] if e["id"] == name)
    raw = (CORPUS / entry["file"]).read_bytes()
    return gzip.decompress(raw) if entry["file"].endswith(".gz") else raw


def overhead_pages() -> dict[str, tuple[int, dict[str, str], bytes]]:
    """The page kinds of ``benchmarks/overhead.py``, as ``overhead.check_pages()`` judges them."""
    spec = importlib.util.spec_from_file_location("overhead_bench", HERE / "overhead.py")
    assert spec is not None and spec.loader is not None
    overhead = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(overhead)
    html = {"content-type": "text/html; charset=utf-8"}
    cf = {"cf-ray": "8a1b2c3d4e5f6a7b-LHR", "server": "cloudflare", **html}
    labels = {
        "tiny": "tiny page (652 B)",
        "early": "50 KB, contact early",
        "late": "50 KB, contact late",
        "none": "50 KB, no contact",
        "challenge": "4.4 KB CF challenge (403)",
    }
    out = {}
    for kind, template in overhead.pages().items():
        body = template.replace(b"{HOST}", b"site-1.test")
        out[labels[kind]] = (403, cf, body) if kind == "challenge" else (200, html, body)
        TARGETS.setdefault(labels[kind], 20.0)
    return out


def pages() -> dict[str, tuple[int, bytes]]:
    article = _page("normal-recaptcha-pingodoce-pt-pingodoce")  # 119 KB shop page, reCAPTCHA, no contact early
    p50 = article[:50_000]
    contact = p50[:48_000] + b'<a href="mailto:loja@example-shop.pt">loja@example-shop.pt</a>' + p50[48_000:49_900]
    mega = (article * (1_048_576 // len(article) + 1))[:1_048_576]
    return {
        "50 KB page, no contact": (200, p50),
        "50 KB page, contact at 48 KB": (200, contact),
        "1 MB page": (200, mega),
        "341 KB page, head of styles": (200, _page("normal-turnstile-iambaker-net-iambaker-1")),
        "8 KB Cloudflare challenge": (503, _page("cf-js-challenge-11-12-2019")),
        "352 KB branded challenge": (200, _page("cf-bb-api-gusto-demo-com")),
    }


HEADERS = {"Content-Type": "text/html; charset=utf-8", "Server": "cloudflare", "CF-RAY": "8f1c2d3e4a5b6c7d-FRA"}


def timed(fn: Any, rounds: int, inner: int) -> float:
    """CPU time of one call in microseconds: the minimum over ``rounds`` runs of ``inner`` calls
    (process CPU time, so other processes on a shared machine disturb it less than wall time)."""
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(inner):
            fn()
        best = min(best, (time.process_time() - start) / inner)
    return best * 1e6


def measure(
    classifier: Classifier, status: int, body: bytes, rounds: int, headers: Any = None, plain: bool = False
) -> dict[str, float]:
    inner = 20 if len(body) > 200_000 else 300 if len(body) < 10_000 else 100
    url = "https://www.example.com/page"
    headers = HEADERS if headers is None else headers
    # The pure engine's contact scan: the plain scans (has_contact uses hyperscan when it can).
    scan = getattr(contacts_module, "_has_contact_plain", has_contact) if plain else has_contact

    def classify() -> None:
        # A fresh bytes object per call, as each response has its own body.
        classifier.response(status, headers, bytes(memoryview(body)), url, False)

    def contacts() -> None:
        scan(bytes(memoryview(body)), classifier.scan_bytes)

    def both() -> None:
        fresh = bytes(memoryview(body))
        verdict = classifier.response(status, headers, fresh, url, False)
        if verdict.success:
            scan(fresh, classifier.scan_bytes)

    def copy_only() -> None:
        bytes(memoryview(body))

    floor = timed(copy_only, rounds, inner)
    return {
        "classify": max(0.0, timed(classify, rounds, inner) - floor),
        "contacts": max(0.0, timed(contacts, rounds, inner) - floor),
        "both": max(0.0, timed(both, rounds, inner) - floor),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    engines = ["auto"]
    if "engine" in inspect.signature(Classifier).parameters:
        engines.append("pure")
    results: dict[str, dict[str, dict[str, float]]] = {}
    for engine in engines:
        classifier = Classifier(engine=engine) if engine != "auto" else Classifier()
        name = getattr(classifier, "engine", "pure")
        plain = name == "pure"
        rows = {
            label: measure(classifier, s, b, args.rounds, h, plain) for label, (s, h, b) in overhead_pages().items()
        }
        rows.update({label: measure(classifier, s, b, args.rounds, None, plain) for label, (s, b) in pages().items()})
        results[name] = rows
    if args.json:
        print(json.dumps({"package": scrapy_domainstate.__file__, "results": results}, indent=1))
        return
    print(f"package: {Path(scrapy_domainstate.__file__).parent}  (CPU us per page, minimum of {args.rounds} rounds)")
    for engine, rows in results.items():
        print(f"\nengine: {engine}")
        print(f"  {'page':32s} {'classify':>9s} {'contacts':>9s} {'both':>9s} {'target':>9s}")
        for label, row in rows.items():
            target = TARGETS.get(label) if engine == "hyperscan" else None
            mark = "" if target is None else f"<= {target:.0f}" + (" ok" if row["both"] <= target else " --")
            print(f"  {label:32s} {row['classify']:9.1f} {row['contacts']:9.1f} {row['both']:9.1f} {mark:>9s}")


if __name__ == "__main__":
    main()
