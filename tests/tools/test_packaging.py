"""Packaging: the metadata in the top-level setup.cfg, a LICENSE, CHANGES.rst, docs the code cites.

The wheel is built for real (setuptools' PEP 517 backend, in a copy of the source tree)
and its metadata read back, as pip would see it.
"""

from __future__ import annotations

import configparser
import email.parser
import re
import shutil
import subprocess
import sys
import zipfile
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from tests import ROOT

tomllib = pytest.importorskip("tomllib")


def _pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _setup_cfg() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(ROOT / "setup.cfg", encoding="utf-8")
    return parser


def _lines(value: str) -> list[str]:
    return [line.strip() for line in value.strip().splitlines() if line.strip()]


def test_metadata_lives_in_setup_cfg() -> None:
    """The project card's top-level setup.cfg; pyproject.toml: the build system and the tools."""
    cfg = _setup_cfg()
    assert "project" not in _pyproject()
    assert _pyproject()["build-system"]["build-backend"] == "setuptools.build_meta"
    assert not (ROOT / "setup.py").exists()
    assert cfg["metadata"]["name"] == "scrapy-domainstate"
    assert cfg["metadata"]["license_expression"] == "BSD-3-Clause"
    assert cfg["metadata"]["version"] == "attr: scrapy_domainstate.__version__"
    assert _lines(cfg["options.entry_points"]["scrapy.commands"]) == [
        "domainstate = scrapy_domainstate.tools.commands.domainstate:Command"
    ]
    assert set(cfg["options.extras_require"]) == {"browser", "redis", "chart", "test", "dev", "docs"}
    install = [Requirement(r) for r in _lines(cfg["options"]["install_requires"])]
    assert {r.name for r in install} == {"scrapy", "twisted", "tldextract", "lmdb", "hyperscan"}


#: Where hyperscan publishes wheels (``pip download hyperscan --platform ...``), as environment
#: markers see those machines; and some where it does not.
_HS_WHEELS = [("linux", "x86_64"), ("linux", "aarch64"), ("darwin", "arm64"), ("darwin", "x86_64"), ("win32", "AMD64")]
_HS_NONE = [("linux", "ppc64le"), ("linux", "s390x"), ("linux", "armv7l"), ("win32", "ARM64"), ("freebsd14", "amd64")]


@pytest.mark.parametrize(("platform", "machine"), _HS_WHEELS + _HS_NONE)
def test_hyperscan_is_installed_where_a_wheel_exists(platform: str, machine: str) -> None:
    """The fast scan engine is the default install where a wheel exists, and only there."""
    install = [Requirement(r) for r in _lines(_setup_cfg()["options"]["install_requires"])]
    hs = [r for r in install if r.name == "hyperscan"]
    assert len(hs) == 1 and hs[0].marker is not None
    wanted = hs[0].marker.evaluate({"sys_platform": platform, "platform_machine": machine})
    assert wanted is ((platform, machine) in _HS_WHEELS)


def test_declared_minimums_are_met_by_the_tested_environment() -> None:
    """The tests run against versions that satisfy what the package declares."""
    cfg = _setup_cfg()
    install = _lines(cfg["options"]["install_requires"])
    for text in [*install, *_lines(cfg["options.extras_require"]["test"])]:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate():
            continue
        assert req.specifier.contains(Version(version(req.name)), prereleases=True), (text, version(req.name))


def test_the_floors_are_the_versions_the_minimum_session_pins() -> None:
    """setup.cfg's minimums are exactly constraints/minimum.txt's pins (the nox session's)."""
    pins = {}
    for line in (ROOT / "constraints" / "minimum.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            req = Requirement(line)
            pins[req.name] = next(iter(req.specifier)).version
    install = {Requirement(r).name: Requirement(r) for r in _lines(_setup_cfg()["options"]["install_requires"])}
    for name, pinned in pins.items():
        floors = [spec.version for spec in install[name].specifier if spec.operator == ">="]
        assert floors and Version(pinned) == Version(floors[0]), (name, pinned, floors)
    assert set(pins) == {"scrapy", "twisted", "tldextract", "lmdb"}
    noxfile = (ROOT / "noxfile.py").read_text(encoding="utf-8")
    assert "constraints/minimum.txt" in noxfile
    assert "nox" in (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")


def test_license_file_is_bsd_3_clause() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("BSD 3-Clause License")
    assert "scrapy-domainstate developers" in text
    assert "Neither the name of the copyright holder" in text


def test_changelog_is_out_of_the_readme() -> None:
    readme = (ROOT / "README.rst").read_text(encoding="utf-8")
    changes = (ROOT / "CHANGES.rst").read_text(encoding="utf-8")
    assert "0.1.0 (unreleased)" in changes
    assert "0.1.0 (unreleased)" not in readme
    assert "CHANGES.rst" in readme


def test_every_doc_the_code_cites_is_in_the_repository() -> None:
    cited: set[str] = set()
    for folder in ("scrapy_domainstate", "tests", "benchmarks", "example_project"):
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            cited.update(re.findall(r"docs/[\w.-]+\.(?:md|yaml)", text))
            # a bare name would point nowhere in the repository
            assert not re.search(r"(?<!docs/)\b(?:SPEC|ANTIBOT-MARKERS)\.md", text), path
            assert not re.search(r"\bSPEC section", text), path
    assert {"docs/SPEC.md", "docs/ANTIBOT-MARKERS.md"} <= cited
    for name in cited:
        assert (ROOT / name).is_file(), name


def test_the_wheel_carries_the_metadata(tmp_path: Path) -> None:
    pytest.importorskip("setuptools", minversion="77")
    src = tmp_path / "src"
    shutil.copytree(
        ROOT,
        src,
        ignore=shutil.ignore_patterns(
            ".git", "*cache*", "build", "*.egg-info", ".scrapy", "__pycache__", ".hypothesis"
        ),
    )
    out = tmp_path / "dist"
    out.mkdir()
    code = f"from setuptools import build_meta; print(build_meta.build_wheel({str(out)!r}))"
    done = subprocess.run(
        [sys.executable, "-c", code], check=False, cwd=src, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-3000:]
    wheel = out / done.stdout.strip().splitlines()[-1]
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        metadata = email.parser.Parser().parsestr(zf.read(f"{info}/METADATA").decode())
        entry_points = zf.read(f"{info}/entry_points.txt").decode()
    assert "scrapy_domainstate/py.typed" in names
    assert f"{info}/licenses/LICENSE" in names
    assert not any(n.startswith(("tests/", "benchmarks/", "example_project/")) for n in names)
    import scrapy_domainstate

    assert metadata["Name"] == "scrapy-domainstate"
    assert metadata["Version"] == scrapy_domainstate.__version__
    assert metadata["License-Expression"] == "BSD-3-Clause"
    assert set(metadata.get_all("Provides-Extra")) == {"browser", "redis", "chart", "test", "dev", "docs"}
    assert "scrapy>=2.14" in metadata.get_all("Requires-Dist")
    assert "domainstate = scrapy_domainstate.tools.commands.domainstate:Command" in entry_points
