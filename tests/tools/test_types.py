"""Type checkers see the public names as what they are (not ``object``), and the package is typed.

Runs mypy (as ``scripts/test.sh`` does over the package) on a few lines a user would write.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests import ROOT

mypy_api = pytest.importorskip("mypy.api")

USER_CODE = """
import scrapy_domainstate
from scrapy_domainstate import Addon, Config, DomainStateMiddleware, State

reveal_type(Addon)
reveal_type(DomainStateMiddleware)
reveal_type(scrapy_domainstate.DomainStateExtension)
reveal_type(scrapy_domainstate.DomainStateSpiderMiddleware)
reveal_type(Config().ttl)
Addon().update_settings(5)
"""


def test_public_names_have_their_real_types(tmp_path: Path) -> None:
    user = tmp_path / "user_code.py"
    user.write_text(USER_CODE, encoding="utf-8")
    out, err, _ = mypy_api.run(
        [str(user), "--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(ROOT / ".mypy_cache")]
    )
    revealed = re.findall(r'Revealed type is "(.*)"', out)
    assert len(revealed) == 5, out + err
    assert "-> scrapy_domainstate.addon.Addon" in revealed[0]
    assert "-> scrapy_domainstate.middleware.DomainStateMiddleware" in revealed[1]
    assert "-> scrapy_domainstate.extension.DomainStateExtension" in revealed[2]
    assert "-> scrapy_domainstate.spidermw.DomainStateSpiderMiddleware" in revealed[3]
    assert re.fullmatch(
        r"typing.Mapping\[scrapy_domainstate.core.record.State, (builtins.)?float \| None\]", revealed[4]
    )
    # a wrong call is caught: the add-on's signature is known
    assert 'incompatible type "int"; expected "BaseSettings"' in out


def test_the_package_ships_its_type_marker() -> None:
    assert (ROOT / "scrapy_domainstate" / "py.typed").exists()


def test_lazy_names_resolve_at_run_time() -> None:
    import scrapy_domainstate

    for name in ("Addon", "DomainStateMiddleware", "DomainStateExtension", "DomainStateSpiderMiddleware"):
        value = getattr(scrapy_domainstate, name)
        assert value.__name__ == name
        assert name in dir(scrapy_domainstate)
    with pytest.raises(AttributeError, match="no_such_name"):
        scrapy_domainstate.no_such_name  # noqa: B018
