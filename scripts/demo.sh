#!/usr/bin/env bash
# The offline demo: install what is missing (Chromium via apt-get, the package with
# scrapy-playwright into a virtualenv: the active one, or .venv/ in the repository, see
# scripts/venv.sh), then crawl a simulated web of a few hundred sites on loopback three times
# (learn, confirm, remember) and show what the last crawl saved. Usage: bash scripts/demo.sh [demo.py options]
#   --quick        60 sites instead of 300: the same checks in less time
#   --sites N      population size (default 300)
#   --no-browser   without Chromium (the plugin's no-browser mode)
#   --keep DIR     keep the store, the logs and the items in DIR
#   --json FILE    write a JSON summary
set -euo pipefail
cd "$(dirname "$0")/.."
case " $* " in
    *" --no-browser "*) ;;  # no Chromium needed
    *) bash scripts/install-system-deps.sh chromium ;;
esac
. scripts/venv.sh
ds_venv
ds_install browser
exec "$PY" example_project/demo.py "$@"
