#!/usr/bin/env bash
# Install everything the test suite needs, then run it. Usage: bash scripts/test.sh [pytest args]
# Python packages go to a virtualenv: the active one, or .venv/ in the repository (made on
# first use; see scripts/venv.sh). Then lint, types and the docs, and the two nox sessions
# (noxfile.py): `latest`, the whole suite in that virtualenv, and `minimum`, the floors' tests
# on the oldest declared versions in .nox/minimum. Run the tests again with
# .venv/bin/python -m pytest (or .venv/bin/python -m nox -s minimum).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-system-deps.sh chromium redis-server
. scripts/venv.sh
ds_venv
ds_install test,dev,docs
"$PY" -m ruff check scrapy_domainstate tests benchmarks example_project scripts noxfile.py docs/conf.py
"$PY" -m mypy  # [tool.mypy] in pyproject.toml: the package, type-checked
"$PY" -m sphinx -W -q -b html docs docs/_build/html  # the reference pages, warnings as errors
set +e
"$PY" -m nox -s latest -- "$@"
rc=$?
set -e
if [ "$rc" -ne 0 ]; then
    # pytest's 5 (nothing collected) is a failure too
    exit 1
fi
[ $# -gt 0 ] || "$PY" -m nox -s minimum
