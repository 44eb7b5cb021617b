# Sourced by scripts/test.sh and scripts/demo.sh: pick the Python to use, as $PY.
#
# - An active virtualenv ($VIRTUAL_ENV) is used as it is.
# - Otherwise the repository's own one, .venv/ (or $DOMAINSTATE_VENV), is used, and made on
#   first use with `python3 -m venv` (Debian/Ubuntu: python3-venv is installed with apt-get
#   when missing). A system Python that refuses `pip install` (PEP 668) is fine: only the
#   virtualenv gets packages. $DOMAINSTATE_PYTHON picks the interpreter that makes it.
# - ds_install EXTRAS installs the package (editable) with those extras into it, again only
#   when setup.cfg or pyproject.toml changed since the last time.
ds_venv() {
    if [ -n "${VIRTUAL_ENV:-}" ] && [ -x "$VIRTUAL_ENV/bin/python" ]; then
        PY="$VIRTUAL_ENV/bin/python"
        return
    fi
    local dir="${DOMAINSTATE_VENV:-$PWD/.venv}"
    if [ ! -x "$dir/bin/python" ]; then
        local base="${DOMAINSTATE_PYTHON:-}"
        [ -n "$base" ] || base="$(command -v python3 || true)"
        if [ -z "$base" ]; then
            echo "No python3 on this machine: apt-get install python3 python3-venv" >&2
            exit 1
        fi
        echo "Making the virtualenv $dir with $base ($("$base" --version 2>&1))"
        if ! "$base" -m venv "$dir" >/dev/null 2>&1; then
            rm -rf "$dir"
            local ver sudo=""
            ver="$("$base" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
            [ "$(id -u)" -eq 0 ] || sudo="sudo"
            echo "Installing python3-venv (apt-get) to make it"
            $sudo apt-get update -qq
            DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-venv \
                || DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "python$ver-venv"
            "$base" -m venv "$dir"
        fi
    fi
    PY="$dir/bin/python"
}

ds_install() {
    local extras="$1" stamp want
    stamp="$("$PY" -c 'import sys; print(sys.prefix)')/.scrapy-domainstate-installed"
    want="$extras $(cat setup.cfg pyproject.toml | cksum) $PWD"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        return
    fi
    echo "Installing scrapy-domainstate[$extras] into $("$PY" -c 'import sys; print(sys.prefix)')"
    PIP_ROOT_USER_ACTION=ignore "$PY" -m pip install -q -e ".[$extras]"
    echo "$want" >"$stamp"
}
