"""The Quick start scripts on a fresh machine: a virtualenv of their own (``scripts/venv.sh``).

Debian 12 and Ubuntu 23.04+ mark the system Python as externally managed (PEP 668: ``pip
install`` is refused) and may have no ``python`` command. ``scripts/test.sh`` and
``scripts/demo.sh`` therefore install into a virtualenv: the active one, or ``.venv/`` in the
repository, made with ``python3 -m venv``. These tests run the scripts' own functions with
bash, with the system ``/usr/bin/python3`` where there is one (the whole install is too slow
for the suite; it is what ``bash scripts/test.sh`` does on CI's fresh clone).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import ROOT

SYSTEM_PYTHON = "/usr/bin/python3"


def bash(script: str, env: dict[str, str], cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    full = f"set -euo pipefail\n. scripts/venv.sh\n{script}"
    return subprocess.run(
        ["bash", "-c", full], cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "DOMAINSTATE_VENV", "DOMAINSTATE_PYTHON")}
    env.update(extra)
    return env


def test_scripts_call_no_bare_python() -> None:
    for name in ("test.sh", "demo.sh"):
        text = (ROOT / "scripts" / name).read_text()
        assert ". scripts/venv.sh" in text and "ds_venv" in text, name
        lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
        commands = [re.sub(r'"\$PY" -m \S+', "", line) for line in lines]
        assert not [c for c in commands if re.search(r"(^|\s)(python3?|pip3?|ruff|pytest)\s", c)], name


def test_an_active_virtualenv_is_used_as_it_is(tmp_path: Path) -> None:
    venv = tmp_path / "active"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    proc = bash('ds_venv; echo "PY=$PY"', clean_env(VIRTUAL_ENV=str(venv)))
    assert proc.returncode == 0, proc.stderr
    assert f"PY={venv}/bin/python" in proc.stdout


@pytest.mark.skipif(not os.access(SYSTEM_PYTHON, os.X_OK), reason=f"no {SYSTEM_PYTHON}")
def test_the_system_python_gets_a_virtualenv_of_its_own(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    env = clean_env(DOMAINSTATE_PYTHON=SYSTEM_PYTHON, DOMAINSTATE_VENV=str(venv))
    check = "import sys; print(sys.prefix, sys.base_prefix, sys.executable)"
    proc = bash(f'ds_venv; echo "PY=$PY"; "$PY" -c "{check}"; "$PY" -m pip --version', env)
    if proc.returncode != 0 and "apt-get" in proc.stdout + proc.stderr and os.geteuid() != 0:
        pytest.skip("python3-venv is missing and apt-get needs root here")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"PY={venv}/bin/python" in proc.stdout
    assert f"Making the virtualenv {venv} with {SYSTEM_PYTHON}" in proc.stdout
    prefix, base_prefix, _ = proc.stdout.strip().splitlines()[-2].split()
    assert prefix == str(venv) and base_prefix != prefix  # a real virtualenv, not the system's
    assert "pip " in proc.stdout.splitlines()[-1]
    # made once, then reused
    again = bash('ds_venv; echo "PY=$PY"', env)
    assert again.returncode == 0, again.stderr
    assert "Making" not in again.stdout and f"PY={venv}/bin/python" in again.stdout
    # an install already done for this setup.cfg and pyproject.toml is not done again
    stamp = bash(
        'ds_venv; want="test $(cat setup.cfg pyproject.toml | cksum) $PWD"; '
        'echo "$want" > "$("$PY" -c "import sys; print(sys.prefix)")/.scrapy-domainstate-installed"; '
        "ds_install test; echo done",
        env,
    )
    assert stamp.returncode == 0, stamp.stderr
    assert stamp.stdout.strip().splitlines() == ["done"]


def test_system_packages_are_named_first_and_installed_without_recommends() -> None:
    script = ROOT / "scripts" / "install-system-deps.sh"
    text = script.read_text()
    assert "--no-install-recommends" in text and "-qq" in text
    # the notice comes before apt-get runs
    assert text.index('echo "Installing Debian packages') < text.index("apt-get update")
    # the demo asks only for the browser (and not at all with --no-browser); the tests for both
    assert "install-system-deps.sh chromium ;;" in (ROOT / "scripts" / "demo.sh").read_text()
    assert "install-system-deps.sh chromium redis-server" in (ROOT / "scripts" / "test.sh").read_text()
    env = clean_env()
    unknown = subprocess.run(["bash", str(script), "avahi"], env=env, capture_output=True, text=True, check=False)
    assert unknown.returncode == 2 and "unknown package avahi" in unknown.stderr
    if shutil.which("redis-server") and os.access("/usr/bin/chromium", os.X_OK):
        present = subprocess.run(
            ["bash", str(script), "chromium", "redis-server"], env=env, capture_output=True, text=True, check=False
        )
        assert present.returncode == 0 and present.stdout == "" and present.stderr == ""  # nothing to do, quiet
