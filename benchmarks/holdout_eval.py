#!/usr/bin/env python
"""The anti-bot classifier measured on pages it was not tuned on (``tests/unit/holdout``).

The held-out set holds real responses recorded from live sites and found in public projects
(test fixtures, saved page sources, captured robots.txt fetches, and the fingerprints a WAF
scanner files as GitHub issues with the status, headers and body it met). None of its bodies is
in ``tests/unit/corpus``, the set the markers were tuned on. ``manifest.json`` names the
source of each page; ``fidelity`` says whether the body is ``verbatim`` (the bytes the
source stores), ``normalised`` (re-serialised by the capturing tool's HTML parser, text and
markers intact) or ``synthetic`` (hand-written: reported, never counted).

For each vendor and overall it prints the recall on block and challenge pages, the
specificity on normal pages, the grading errors (a passable challenge graded hard, a hard
block graded soft), the vendor named, and then one line per mistake with the page's file
and the classifier's verdict. Pages whose status was not recorded are judged as a 200.

    python benchmarks/holdout_eval.py              # the installed / PYTHONPATH package
    python benchmarks/holdout_eval.py --verbatim   # only the byte-exact captures
    python benchmarks/holdout_eval.py --corpus     # the tuning corpus, same table, to compare
    python benchmarks/holdout_eval.py --saved DIR  # saved normal pages: how many are flagged

``--saved`` takes folders or bare git directories (a ``git clone --mirror``; the files of its
``HEAD`` are read) of saved normal pages, such as the test pages of recipe-scrapers,
trafilatura and readability: every ``*.html``, ``*.htm`` and ``*.testhtml`` file is judged as a
200 and must not be flagged; it prints the count per source and each flagged page.

Not a test: the set is for measuring, so nothing here asserts a score.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scrapy_domainstate.core.record import Outcome
from scrapy_domainstate.detect.classify import Classifier
from scrapy_domainstate.detect.verdict import Verdict

ROOT = Path(__file__).resolve().parent.parent
HOLDOUT = ROOT / "tests" / "unit" / "holdout"
CORPUS = ROOT / "tests" / "unit" / "corpus"
SCORING = ROOT / "tests" / "unit" / "scoring"
PAGE_URL = "https://www.example.com/page"
HARD, SOFT, NORMAL = "block-hard", "challenge-soft", "normal"
NOT_A_VENDOR = frozenset({"unknown", "none"})


@dataclass(frozen=True)
class Page:
    """One manifest entry with its body."""

    file: str
    status: int
    headers: dict[str, str]
    body: bytes
    label: str
    vendor: str
    fidelity: str
    source: str
    duplicate_of: str | None = None

    @property
    def counted(self) -> bool:
        """Real and not a near-copy of a vendor template already counted (``duplicate_of``)."""
        return self.fidelity != "synthetic" and not self.duplicate_of


def load(folder: Path) -> list[Page]:
    """Every page of ``folder/manifest.json`` (gzipped bodies are unpacked)."""
    manifest = json.loads((folder / "manifest.json").read_text("utf-8"))
    pages = []
    for entry in manifest["entries"]:
        raw = (folder / entry["file"]).read_bytes()
        pages.append(
            Page(
                file=entry["file"],
                status=int(entry["status"]),
                headers=dict(entry["headers"]),
                body=gzip.decompress(raw) if entry["file"].endswith(".gz") else raw,
                label=entry["label"],
                vendor=entry["vendor"],
                fidelity=entry.get("fidelity", "verbatim" if entry.get("real", True) else "synthetic"),
                source=entry["source"]["repository"],
                duplicate_of=entry.get("duplicate_of"),
            )
        )
    return pages


def named_vendor(verdict: Verdict) -> str | None:
    """The vendor an anti-bot verdict names (``'challenge:<vendor>:<detail>'``)."""
    if verdict.outcome is not Outcome.ANTIBOT or not verdict.error_class:
        return None
    parts = verdict.error_class.split(":")
    return parts[1] if len(parts) > 2 else None


def describe(verdict: Verdict) -> str:
    hard = " hard" if verdict.is_hard_block else ""
    return f"{verdict.outcome.value}{hard} {verdict.error_class or '-'} (status {verdict.status})"


@dataclass
class Tally:
    """Counts for one vendor (or all of them)."""

    blocks: int = 0
    caught: int = 0
    vendor_known: int = 0
    vendor_right: int = 0
    soft: int = 0
    soft_graded_hard: int = 0
    hard: int = 0
    hard_graded_soft: int = 0
    normal: int = 0
    flagged: int = 0
    mistakes: list[str] = field(default_factory=list)

    def add(self, other: Tally) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


def score(page: Page, verdict: Verdict, tally: Tally) -> None:
    """Count one judged page into ``tally``; a mistake also gets a line."""
    where = f"{page.file} [{page.vendor}, {page.label}, status {page.status}]"
    if page.label == NORMAL:
        tally.normal += 1
        if verdict.outcome is Outcome.ANTIBOT:
            tally.flagged += 1
            tally.mistakes.append(f"FLAGGED   {where}: {describe(verdict)}")
        return
    tally.blocks += 1
    if verdict.outcome is not Outcome.ANTIBOT:
        tally.mistakes.append(f"MISSED    {where}: {describe(verdict)}")
        return
    tally.caught += 1
    if page.label == SOFT:
        tally.soft += 1
        if verdict.is_hard_block:
            tally.soft_graded_hard += 1
            tally.mistakes.append(f"TOO HARD  {where}: {describe(verdict)}")
    else:
        tally.hard += 1
        if not verdict.is_hard_block:
            tally.hard_graded_soft += 1
            tally.mistakes.append(f"TOO SOFT  {where}: {describe(verdict)}")
    if page.vendor not in NOT_A_VENDOR:
        tally.vendor_known += 1
        if named_vendor(verdict) == page.vendor:
            tally.vendor_right += 1
        else:
            tally.mistakes.append(f"VENDOR    {where}: named {named_vendor(verdict)}, {describe(verdict)}")


def evaluate(
    pages: list[Page], classifier: Classifier | None = None, group: Callable[[Page], str] = lambda p: p.vendor
) -> dict[str, Tally]:
    """Tallies of the counted pages (synthetic ones are left out), per vendor or per ``group``."""
    classifier = classifier or Classifier()
    tallies: dict[str, Tally] = defaultdict(Tally)
    for page in pages:
        if page.counted:
            verdict = classifier.response(page.status, page.headers, page.body, PAGE_URL, False)
            score(page, verdict, tallies[group(page)])
    return dict(tallies)


def _pct(num: int, den: int) -> str:
    return f"{num}/{den} ({100 * num / den:.1f} %)" if den else "-"


def table(tallies: dict[str, Tally], first: str = "vendor") -> str:
    """One row per group and the overall row, as aligned plain text."""
    header = (first, "recall", "specificity", "soft->hard", "hard->soft", "vendor named")
    total = Tally()
    rows = []
    for vendor in sorted(tallies, key=lambda v: (-(tallies[v].blocks + tallies[v].normal), v)):
        t = tallies[vendor]
        total.add(t)
        rows.append((vendor, *_cells(t)))
    rows.append(("ALL", *_cells(total)))
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in (header, *rows)]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.insert(len(lines) - 1, lines[1])
    return "\n".join(lines)


def _cells(t: Tally) -> tuple[str, ...]:
    return (
        _pct(t.caught, t.blocks),
        _pct(t.normal - t.flagged, t.normal),
        _pct(t.soft_graded_hard, t.soft),
        _pct(t.hard_graded_soft, t.hard),
        _pct(t.vendor_right, t.vendor_known),
    )


def summary(pages: list[Page]) -> str:
    """How many pages per label, fidelity and source."""
    labels = Counter(p.label for p in pages)
    fidelity = Counter(p.fidelity for p in pages)
    return (
        f"{len(pages)} pages: "
        + ", ".join(f"{n} {label}" for label, n in sorted(labels.items()))
        + "; fidelity: "
        + ", ".join(f"{n} {kind}" for kind, n in sorted(fidelity.items()))
    )


SAVED_SUFFIXES = (".html", ".htm", ".testhtml")


def _git_files(git_dir: Path) -> Iterator[tuple[str, bytes]]:
    """The ``HEAD`` files of a bare git directory whose names end in :data:`SAVED_SUFFIXES`."""
    listing = subprocess.run(
        ["git", "--git-dir", str(git_dir), "ls-tree", "-r", "-z", "--name-only", "HEAD"],
        capture_output=True,
        check=True,
    ).stdout.decode("utf-8", "replace")
    names = [n for n in listing.split("\0") if n.endswith(SAVED_SUFFIXES)]
    with subprocess.Popen(
        ["git", "--git-dir", str(git_dir), "cat-file", "--batch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        for name in names:
            proc.stdin.write(f"HEAD:{name}\n".encode())
            proc.stdin.flush()
            head = proc.stdout.readline().split()
            if len(head) < 3 or head[1] != b"blob":
                continue  # "missing" (a file too large for the snapshot)
            data = proc.stdout.read(int(head[2]))
            proc.stdout.read(1)
            yield name, data
        proc.stdin.close()


def saved_pages(path: Path) -> Iterator[tuple[str, bytes]]:
    """``(name, body)`` of every saved page under ``path`` (a folder or a bare git directory)."""
    if (path / "HEAD").is_file() and (path / "objects").is_dir():
        yield from _git_files(path)
        return
    for file in sorted(path.rglob("*")):
        if file.name.endswith(SAVED_SUFFIXES) and file.is_file():
            yield str(file.relative_to(path)), file.read_bytes()


def saved(paths: list[str], classifier: Classifier | None = None) -> tuple[int, list[str]]:
    """How many saved normal pages there are under ``paths``, and a line per flagged one."""
    classifier = classifier or Classifier()
    total = 0
    flagged: list[str] = []
    for given in paths:
        count = 0
        for name, body in saved_pages(Path(given)):
            count += 1
            verdict = classifier.response(200, {"Content-Type": "text/html"}, body, PAGE_URL, False)
            if verdict.outcome is Outcome.ANTIBOT:
                flagged.append(f"FLAGGED   {given}: {name}: {describe(verdict)}")
        print(f"{given}: {count} pages")
        total += count
    return total, flagged


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--verbatim", action="store_true", help="only the byte-exact captures")
    parser.add_argument("--corpus", action="store_true", help="measure the tuning corpus instead")
    parser.add_argument("--scoring", action="store_true", help="measure the scoring part (tests/unit/scoring)")
    parser.add_argument("--saved", nargs="+", metavar="DIR", help="saved normal pages (folders or bare git dirs)")
    args = parser.parse_args(argv)
    if args.saved:
        total, flagged = saved(args.saved)
        print(f"{total} saved normal pages, {len(flagged)} flagged")
        for line in flagged:
            print(" ", line)
        return
    pages = load(SCORING if args.scoring else CORPUS if args.corpus else HOLDOUT)
    if args.verbatim:
        pages = [p for p in pages if p.fidelity == "verbatim"]
    print(summary(pages))
    print("(recall: blocks and challenges detected; specificity: normal pages not flagged;")
    print(" soft->hard: passable challenges graded hard; hard->soft: hard blocks graded soft)\n")
    tallies = evaluate(pages)
    print(table(tallies))
    print()
    print(table(evaluate(pages, group=lambda p: p.source), first="source"))
    print()
    print(table(evaluate(pages, group=lambda p: p.fidelity), first="fidelity"))
    mistakes = [line for t in tallies.values() for line in t.mistakes]
    print(f"\n{len(mistakes)} mistakes")
    for line in sorted(mistakes):
        print(" ", line)


def report(pages: list[Page]) -> dict[str, Any]:
    """The overall figures as numbers (for other scripts)."""
    total = Tally()
    for tally in evaluate(pages).values():
        total.add(tally)
    return {
        "pages": len(pages),
        "recall": total.caught / total.blocks if total.blocks else None,
        "specificity": (total.normal - total.flagged) / total.normal if total.normal else None,
        "soft_graded_hard": total.soft_graded_hard,
        "hard_graded_soft": total.hard_graded_soft,
        "vendor_named": total.vendor_right / total.vendor_known if total.vendor_known else None,
        "mistakes": len(total.mistakes),
    }


if __name__ == "__main__":
    main()
