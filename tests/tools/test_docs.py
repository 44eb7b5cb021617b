"""The user's page (README.rst) and the reference (docs/): every setting documented with the
code's default, the README short and clean, the quick-start commands real."""

from __future__ import annotations

import importlib.util
import pathlib
import re

from scrapy_domainstate.core.config import SETTINGS, Config
from tests import ROOT


def _table_module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("settings_table", ROOT / "scripts" / "settings_table.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SETTINGS_PAGE = ROOT / "docs" / "settings.rst"


def test_settings_page_table_matches_code() -> None:
    table = _table_module()
    readme = SETTINGS_PAGE.read_text(encoding="utf-8")
    assert table.readme_block(readme) == table.render(), "run: python scripts/settings_table.py --write"


def test_every_setting_is_documented_with_its_default() -> None:
    readme = SETTINGS_PAGE.read_text(encoding="utf-8")
    table = _table_module()
    for setting in SETTINGS:
        assert f"``{setting.name}``" in readme
        assert f"default ``{table._default(setting.default)}``" in readme


def test_settings_table_defaults_are_the_config_defaults() -> None:
    config = Config.from_settings({})
    assert config.recent_size == 20
    for setting in SETTINGS:
        if setting.name == "DOMAINSTATE_TTL":
            continue
        field = setting.name.removeprefix("DOMAINSTATE_").lower()
        value = getattr(config, field)
        expected = setting.default
        if isinstance(expected, dict):
            assert dict(value) == expected, setting.name
        else:
            assert value == expected, setting.name


def test_readme_renders_without_warnings() -> None:
    import io

    from docutils.core import publish_string
    from docutils.writers.null import Writer

    errors = io.StringIO()
    publish_string(
        (ROOT / "README.rst").read_text(encoding="utf-8"),
        writer=Writer(),
        settings_overrides={"report_level": 2, "halt_level": 5, "warning_stream": errors},
    )
    assert errors.getvalue() == ""


def test_readme_quick_start_commands_exist() -> None:
    readme = (ROOT / "README.rst").read_text(encoding="utf-8")
    assert "    bash scripts/demo.sh" in readme
    assert "    bash scripts/test.sh" in readme
    assert (ROOT / "scripts" / "demo.sh").exists()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "scripts/test.sh" in ci


def test_settings_table_script_checks_and_writes(tmp_path: pathlib.Path) -> None:
    import shutil
    import subprocess
    import sys

    copy = tmp_path / "repo"
    (copy / "scripts").mkdir(parents=True)
    (copy / "docs").mkdir()
    shutil.copy(ROOT / "scripts" / "settings_table.py", copy / "scripts")
    shutil.copytree(ROOT / "scrapy_domainstate", copy / "scrapy_domainstate")
    readme = SETTINGS_PAGE.read_text(encoding="utf-8")
    table = _table_module()
    stale = readme.replace(table.readme_block(readme), "``DOMAINSTATE_GONE``\n    *int*, default ``1``. Old.\n")
    (copy / "docs" / "settings.rst").write_text(stale, encoding="utf-8")

    def run(*args: str) -> int:
        done = subprocess.run(
            [sys.executable, str(copy / "scripts" / "settings_table.py"), *args],
            check=False,
            capture_output=True,
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(copy)},
        )
        return done.returncode

    assert run("--check") == 1
    assert run("--write") == 0
    assert run("--check") == 0
    assert (copy / "docs" / "settings.rst").read_text(encoding="utf-8") == readme


def test_readme_is_the_users_page() -> None:
    """Under 400 lines, and every reference page it points to exists."""
    readme = (ROOT / "README.rst").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 400
    linked = set(re.findall(r"<(docs/[\w-]+\.rst)>`__", readme))
    assert linked, "the README links the reference pages"
    missing = [page for page in linked if not (ROOT / page).exists()]
    assert not missing, missing
    index = (ROOT / "docs" / "index.rst").read_text(encoding="utf-8")
    for page in sorted((ROOT / "docs").glob("*.rst")):
        if page.stem != "index":
            assert f"   {page.stem}\n" in index, f"docs/index.rst does not list {page.name}"
