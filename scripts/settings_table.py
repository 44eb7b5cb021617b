"""Render the README's settings table from ``scrapy_domainstate.config.SETTINGS``.

``python scripts/settings_table.py --write`` rewrites the table in README.rst;
``tests/test_readme.py`` fails when the README and the code disagree.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
START, END = ".. SETTINGS-TABLE-START", ".. SETTINGS-TABLE-END"

EXAMPLES = {
    "DOMAINSTATE_ENABLED": "False",
    "DOMAINSTATE_STORE": '"scrapy_domainstate.store.redis.RedisStore"',
    "DOMAINSTATE_LMDB_PATH": '"/var/lib/crawl/domainstate"',
    "DOMAINSTATE_LMDB_MAP_SIZE": "8 << 30",
    "DOMAINSTATE_REDIS_URL": '"redis://cache:6379/0"',
    "DOMAINSTATE_REDIS_PREFIX": '"shop-crawl:ds:"',
    "DOMAINSTATE_TTL": '{"dead": 14 * 86400, "cold": None}',
    "DOMAINSTATE_OUTCOME": '"items"',
    "DOMAINSTATE_CHALLENGE_MARKERS": '{"acme-waf": ["acme-wall-v2"]}',
    "DOMAINSTATE_BROWSER_META": '{"playwright": True, "playwright_include_page": False}',
    "DOMAINSTATE_REMOTE_URL": '"http://127.0.0.1:8790"',
    "DOMAINSTATE_REMOTE_TOKEN": '"s3cret-token"',
}


def _default(value: object) -> str:
    if isinstance(value, dict):
        return json.dumps(value).replace("true", "True").replace("false", "False")
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1 << 20:
        return f"{value:_}"
    return repr(value)


def render() -> str:
    sys.path.insert(0, str(ROOT))
    from scrapy_domainstate.config import SETTINGS

    lines = []
    for s in SETTINGS:
        lines.append(f"``{s.name}``")
        lines.append(f"    *{s.type}*, default ``{_default(s.default)}``. {s.doc}")
        if s.name in EXAMPLES:
            lines.append(f"    Example: ``{s.name} = {EXAMPLES[s.name]}``.")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def readme_block(text: str) -> str:
    start = text.index(START) + len(START)
    return text[start : text.index(END)].strip("\n") + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="rewrite README.rst")
    args = parser.parse_args()
    table = render()
    if not args.write:
        sys.stdout.write(table)
        return 0
    path = ROOT / "README.rst"
    text = path.read_text(encoding="utf-8")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    path.write_text(f"{head}{START}\n\n{table}\n{END}{tail}", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
