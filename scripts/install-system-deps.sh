#!/usr/bin/env bash
# Install the Debian packages named on the command line, only those missing:
#   chromium      the headless browser scrapy-playwright drives (tests, the browser demo)
#   redis-server  fleet mode (tests)
# One line names what will be installed before it is; apt-get runs quietly, without
# recommended packages (--no-install-recommends), its output kept in a log shown on failure.
# Usage: bash scripts/install-system-deps.sh chromium [redis-server]
set -euo pipefail
missing=()
for pkg in "$@"; do
    case "$pkg" in
        chromium) command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ] || missing+=(chromium) ;;
        redis-server) command -v redis-server >/dev/null 2>&1 || missing+=(redis-server) ;;
        *) echo "install-system-deps.sh: unknown package $pkg (chromium or redis-server)" >&2; exit 2 ;;
    esac
done
[ ${#missing[@]} -gt 0 ] || exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
log="$(mktemp -t domainstate-apt.XXXXXX)"
echo "Installing Debian packages (apt-get, without recommends): ${missing[*]} -- log: $log"
if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
    --no-install-recommends --no-upgrade "${missing[@]}"; } >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    echo "apt-get failed (full log: $log); install ${missing[*]} yourself, or run the demo with --no-browser" >&2
    exit 1
fi
echo "Installed ${missing[*]}"
