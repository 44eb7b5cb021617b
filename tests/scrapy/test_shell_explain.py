"""``explain()`` in ``scrapy shell`` (issue 26, part 5): the classifier's verdict on the page
``fetch()`` got, and why its domain is in its state. The shell runs as in
``tests/scrapy/test_shell.py`` (a subprocess in ``example_project/``, against the loopback sites).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest_twisted
from twisted.internet.threads import deferToThread

from tests.scrapy.test_shell import last_json, scrapy_shell

CODE = """__import__("json").dumps({
    "response": repr(__import__("scrapy_domainstate.shell", fromlist=["x"]).explain(response)),
    "verdict": dict(__import__("scrapy_domainstate.shell", fromlist=["x"]).explain(response)),
    "domain": repr(__import__("scrapy_domainstate.shell", fromlist=["x"]).explain(response.url)),
    "state": __import__("scrapy_domainstate.shell", fromlist=["x"]).explain(response.url)["state"],
})"""


@pytest_twisted.ensureDeferred
async def test_explain_in_scrapy_shell(sites: Any, tmp_path: Path) -> None:
    url = sites.url("aws-waf-shell.test")
    proc = await deferToThread(scrapy_shell, url, CODE, tmp_path / "ds")
    assert proc.returncode == 0, proc.stderr
    out = last_json(proc.stdout)
    lines = out["response"].splitlines()
    assert lines[0].startswith(f"response 202 for {url} (")
    assert lines[1].startswith("  verdict:  antibot [challenge:")
    assert lines[2].startswith("  fired:    challenge (soft), vendor ")
    assert out["verdict"]["outcome"] == "antibot" and out["verdict"]["url"] == url
    # the HEAD probe's and the GET's anti-bot answers: antibot-soft, and why
    assert out["state"] == "antibot-soft"
    domain = out["domain"]
    assert domain.startswith("aws-waf-shell.test")
    assert "  state:        antibot-soft, since " in domain
    assert "HEAD probe 202 -> antibot [challenge:aws:x-amzn-waf-action]: challenge (soft), vendor aws:" in domain
    assert "each new anti-bot answer restarts its TTL" in domain
