"""The package's floors import only downward.

``core`` (the record vocabulary, policy, keys, settings) is the bottom floor; ``detect``
(the classifier and its scans) and ``store`` (the stores) build on it; ``fleet`` on those;
``runtime`` (the per-crawl runtime behind the Scrapy components) on everything below; the
``tools`` (command, report, CSV, Python API) read stores and never import the runtime.
Each pure module is imported in a fresh interpreter, so what it loads is what it pulls in
by itself, not what an earlier test left in ``sys.modules``.
"""

from __future__ import annotations

import ast
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import scrapy_domainstate

PACKAGE = Path(scrapy_domainstate.__file__).parent

#: Floor -> the floors (of this package) it may import. Modules at the package's top level
#: (the add-on, the Scrapy components, signals, shell, service) are the public face and
#: may import any floor.
ALLOWED = {
    "core": {"core"},
    "detect": {"core", "detect"},
    "store": {"core", "store"},
    "fleet": {"core", "store", "fleet"},
    "runtime": {"core", "detect", "store", "fleet", "tools", "runtime"},
    "tools": {"core", "detect", "store", "fleet", "tools"},
}
#: Floors whose every module must import without Scrapy or Twisted.
PURE = ("core", "detect", "store")

_PROBE = """
import importlib, json, sys
importlib.import_module(sys.argv[1])
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules} & {"scrapy", "twisted"})))
"""


def _modules(floor: str) -> list[str]:
    folder = PACKAGE / floor
    names = [f"scrapy_domainstate.{floor}"]
    for info in pkgutil.walk_packages([str(folder)], prefix=f"scrapy_domainstate.{floor}."):
        names.append(info.name)
    return sorted(names)


def _source(module: str) -> Path:
    rel = Path(*module.split(".")[1:])
    path = PACKAGE / rel.with_suffix(".py")
    return path if path.exists() else PACKAGE / rel / "__init__.py"


def _imported_floors(module: str) -> set[str]:
    """Floors of this package that ``module`` imports anywhere (top level or in a function)."""
    tree = ast.parse(_source(module).read_text())
    floors = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "scrapy_domainstate" and len(parts) > 1 and parts[1] in ALLOWED:
                floors.add(parts[1])
    return floors


def _relative_imports(module: str) -> list[int]:
    tree = ast.parse(_source(module).read_text())
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level > 0]


def test_every_module_lives_on_a_floor_or_is_public() -> None:
    public = {p.stem for p in PACKAGE.glob("*.py")}
    assert public == {
        "__init__",
        "addon",
        "extension",
        "middleware",
        "pipeline",
        "spidermw",
        "signals",
        "shell",
        "service",
    }, "a module at the top level is public API; private ones belong on a floor"
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert folders == set(ALLOWED) | {"testing"}


def test_floors_import_only_downward(capsys: pytest.CaptureFixture[str]) -> None:
    lines, wrong = [], []
    for floor, allowed in ALLOWED.items():
        imported: set[str] = set()
        for module in _modules(floor):
            floors = _imported_floors(module)
            imported |= floors
            if floors - allowed:
                wrong.append(f"{module} imports {sorted(floors - allowed)}")
        lines.append(f"  {floor:<8} imports {', '.join(sorted(imported - {floor})) or '(nothing)'}")
    with capsys.disabled():
        print("\nfloors (what each imports from the package):\n" + "\n".join(lines))
    assert not wrong, wrong


def test_absolute_imports_only() -> None:
    """Each module names what it imports in full, so a move is one rename and a search."""
    offenders = {}
    for floor in ALLOWED:
        for module in _modules(floor):
            if lines := _relative_imports(module):
                offenders[module] = lines
    assert not offenders


@pytest.mark.parametrize("module", [m for f in PURE for m in _modules(f)])
def test_pure_floors_load_neither_scrapy_nor_twisted(module: str) -> None:
    out = subprocess.run([sys.executable, "-c", _PROBE, module], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == [], f"importing {module} loads {out.strip()}"


def test_one_logger_per_module_named_after_it() -> None:
    """``logging.getLogger(__name__)``: a user filters on ``scrapy_domainstate`` (or a floor)."""
    named = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "logger" for t in node.targets)
                and isinstance(node.value, ast.Call)
                and getattr(node.value.func, "attr", None) == "getLogger"
            ):
                arg = node.value.args[0] if node.value.args else None
                if not (isinstance(arg, ast.Name) and arg.id == "__name__"):
                    named[str(path.relative_to(PACKAGE))] = ast.unparse(node.value)
    assert not named, named
