#!/usr/bin/env bash
# The offline demo: install what is missing (Chromium via apt-get, the package with
# scrapy-playwright), then crawl a simulated web of a few hundred sites on loopback twice
# and show what the second crawl saved. Usage: bash scripts/demo.sh [demo.py options]
#   --sites N      population size (default 300)
#   --no-browser   without Chromium
#   --keep DIR     keep the store, the logs and the items in DIR
#   --json FILE    write a JSON summary
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-system-deps.sh
PIP_ROOT_USER_ACTION=ignore python -m pip install -q -e ".[browser]"
exec python example_project/demo.py "$@"
