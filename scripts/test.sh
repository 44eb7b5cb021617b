#!/usr/bin/env bash
# Install everything the test suite needs, then run it. Usage: bash scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-system-deps.sh
python -m pip install -q -e ".[test]"
ruff check scrapy_domainstate tests benchmarks example_project
python -m mypy  # [tool.mypy] in pyproject.toml: the package, type-checked
set +e
python -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
    echo "No tests were collected: failing." >&2
    exit 1
fi
exit "$rc"
