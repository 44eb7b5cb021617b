#!/usr/bin/env bash
# Install everything the test suite needs, then run it. Usage: bash scripts/test.sh [pytest args]
# Python packages go to a virtualenv: the active one, or .venv/ in the repository (made on
# first use; see scripts/venv.sh). Run the tests again with .venv/bin/python -m pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-system-deps.sh chromium redis-server
. scripts/venv.sh
ds_venv
ds_install test
"$PY" -m ruff check scrapy_domainstate tests benchmarks example_project
"$PY" -m mypy  # [tool.mypy] in pyproject.toml: the package, type-checked
set +e
"$PY" -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
    echo "No tests were collected: failing." >&2
    exit 1
fi
exit "$rc"
