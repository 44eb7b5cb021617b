"""Render the settings reference (docs/settings.rst) from ``scrapy_domainstate.core.config.SETTINGS``, the one list of settings.

``python scripts/settings_table.py --write`` rewrites the table in docs/settings.rst, ``--check``
exits 1 when it is out of date, no option prints it; ``tests/tools/test_docs.py`` fails when the
page and the code disagree.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
START, END = ".. SETTINGS-TABLE-START", ".. SETTINGS-TABLE-END"
PAGE = "docs/settings.rst"


def _default(value: object) -> str:
    if isinstance(value, dict):
        return json.dumps(value).replace("true", "True").replace("false", "False")
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1 << 20:
        return f"{value:_}"
    return repr(value)


def _span(seconds: float) -> str:
    for unit, size in (("w", 7 * 86400), ("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


def render() -> str:
    """The table: one entry per row of ``SETTINGS`` (name, type, default, doc, example)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from scrapy_domainstate.core.config import SETTINGS

    lines = []
    for s in SETTINGS:
        default = f"``{_default(s.default)}``"
        if s.type == "duration" and isinstance(s.default, (int, float)) and s.default >= 60:
            default += f" ({_span(s.default)})"
        lines.append(f"``{s.name}``")
        lines.append(f"    *{s.type}*, default {default}. {s.doc}")
        if s.example is not None:
            lines.append(f"    Example: ``{s.name} = {s.example}``.")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def readme_block(text: str) -> str:
    start = text.index(START) + len(START)
    return text[start : text.index(END)].strip("\n") + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="rewrite docs/settings.rst")
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/settings.rst's table is out of date")
    args = parser.parse_args()
    table = render()
    path = ROOT / PAGE
    text = path.read_text(encoding="utf-8")
    if args.check:
        if readme_block(text) == table:
            return 0
        sys.stderr.write(f"{PAGE}'s settings table is out of date: run python scripts/settings_table.py --write\n")
        return 1
    if not args.write:
        sys.stdout.write(table)
        return 0
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    path.write_text(f"{head}{START}\n\n{table}\n{END}{tail}", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
