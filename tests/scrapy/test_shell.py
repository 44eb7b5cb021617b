"""``scrapy shell`` with the plugin, in the example project, against the loopback sites.

The shell runs as a subprocess (``scrapy shell -c CODE URL``) in ``example_project/``, so it
uses the project's settings (the add-on) with a few ``-s`` overrides: the store in a temporary
directory, the table resolver (``scrapy shell`` runs a ``CrawlerProcess``, which installs
``TWISTED_DNS_RESOLVER``), and Scrapy's own download handlers instead of scrapy-playwright's:
``scrapy shell`` runs the reactor in a thread, and scrapy-playwright's handler never answers
there (Scrapy 2.19, scrapy-playwright 0.0.48; the same without this plugin). The plugin still
decides; a request it routes to the browser would be fetched plainly.

The test server runs in this process's reactor, so the subprocess is waited for in a thread
(``deferToThread``) while the reactor keeps serving.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest_twisted
from twisted.internet.threads import deferToThread

from tests import ROOT

PROJECT = ROOT / "example_project"

#: ``scrapy shell -c`` evaluates one expression and prints its value: fetch two more pages of
#: a dead site, then report what the plugin says, as JSON on one line.
CODE = """__import__("json").dumps({
    "meta": response.meta["domainstate"],
    "status": response.status,
    "friendly": {k: v for k, v in __import__("scrapy_domainstate.shell", fromlist=["x"]).domainstate(response.url).items()
                 if k != "record"},
    "dead": [fetch(DEAD), response.status, response.meta["domainstate"],
             {k: v for k, v in __import__("scrapy_domainstate.shell", fromlist=["x"]).domainstate(DEAD).items()
              if k != "record"}][1:],
    "record": str(__import__("scrapy_domainstate.shell", fromlist=["x"]).domainstate(DEAD)["record"].state),
    "shown": repr(__import__("scrapy_domainstate.shell", fromlist=["x"]).domainstate(DEAD)),
    "store": crawler.domainstate.store.describe(),
    "same_store": __import__("scrapy_domainstate.shell", fromlist=["x"]).store() is crawler.domainstate.store,
    "resolver": type(__import__("twisted.internet", fromlist=["reactor"]).reactor.resolver).__name__,
}, default=str)"""


def scrapy_shell(url: str, code: str, store: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    cmd = [
        sys.executable,
        "-m",
        "scrapy",
        "shell",
        "--nolog",
        "-s",
        f"DOMAINSTATE_LMDB_PATH={store}",
        "-s",
        "TWISTED_DNS_RESOLVER=scrapy_domainstate.testing.resolver.TableResolver",
        "-s",
        "HTTPPROXY_ENABLED=False",
        "-s",
        "ROBOTSTXT_OBEY=False",
        "-s",
        "TELNETCONSOLE_ENABLED=False",
        "-s",
        "DOWNLOAD_HANDLERS={}",
        # the seed's HEAD probe: one fetch() of a dead site is then two dead signals (HEAD and
        # GET), which these tests of the shell rely on; the default probe is the GET itself
        "-s",
        "DOMAINSTATE_HEAD_PROBE=True",
        "-c",
        code,
        url,
    ]
    return subprocess.run(cmd, cwd=PROJECT, env=env, capture_output=True, text=True, timeout=120, check=False)


def last_json(output: str) -> Any:
    for line in reversed(output.strip().splitlines()):
        if line.startswith(("{", "[")):
            return json.loads(line)
    raise AssertionError(f"no JSON line in the shell's output:\n{output}")


@pytest_twisted.ensureDeferred
async def test_scrapy_shell_shows_the_plugin(sites: Any, tmp_path: Path) -> None:
    friendly = sites.url("friendly-shell.test")
    dead = sites.url("dead-root-shell.test")
    store = tmp_path / "ds"
    code = CODE.replace("DEAD", repr(dead))
    proc = await deferToThread(scrapy_shell, friendly, code, store)
    assert proc.returncode == 0, proc.stderr
    out = last_json(proc.stdout)

    # fetch() went through the middleware: a first sight, so one HEAD probe, then the GET
    assert out["status"] == 200
    meta = out["meta"]
    assert (meta["domain"], meta["state"], meta["method"]) == ("friendly-shell.test", "unknown", "fetch")
    assert meta["expires_at"] > time.time() + 6 * 86400  # unknown: re-evaluated after 7 days
    assert sites.methods("friendly-shell.test") == ["HEAD", "GET"]
    # domainstate(url): probed already, so the next request is fetched with browser fallback
    assert out["friendly"] == {"domain": "friendly-shell.test", "state": "unknown", "decision": "fetch-then-browser"}

    # the dead site: HEAD 404 and GET 404 on the root are two dead signals
    status, meta, decision = out["dead"]
    assert status == 404
    assert meta["domain"] == "dead-root-shell.test"
    assert meta["method"] == "fetch"
    assert decision == {"domain": "dead-root-shell.test", "state": "dead", "decision": "skip"}
    assert out["record"] == "dead"
    # shown as `scrapy domainstate show` prints it: no raw DomainStat repr, no epoch floats
    shown = out["shown"].splitlines()
    assert shown[0].startswith("dead-root-shell.test")
    assert "  state:        dead, since " in out["shown"] and " UTC" in out["shown"]
    assert "  decision now: skip" in shown
    assert "DomainStat(" not in out["shown"]
    assert sites.methods("dead-root-shell.test") == ["HEAD", "GET"]

    # the store and the resolver of the shell session
    assert out["store"] == f"lmdb:{store}"
    assert out["same_store"] is True
    assert out["resolver"] == "TableResolver"
    assert store.is_dir()


async def dead_in_a_second_session(sites: Any, tmp_path: Path, host: str, flush: bool) -> None:
    store = tmp_path / "ds"
    dead = sites.url(host)
    code = '__import__("json").dumps([response.status, response.meta["domainstate"]["method"]])'
    if flush:
        # write what the session learned now, rather than at the next periodic flush
        code = f"[crawler.domainstate.flush(), {code}][1]"
    first = await deferToThread(scrapy_shell, dead, code, store)
    assert first.returncode == 0, first.stderr
    assert last_json(first.stdout) == [410, "fetch"]
    assert sites.methods(host) == ["HEAD", "GET"]
    # A new session on the same store: the domain is dead, so fetch() is skipped (the shell
    # swallows the IgnoreRequest: no response) and nothing is sent.
    code = (
        '__import__("json").dumps({"response": response, "meta": request.meta["domainstate"], "decision": '
        '{k: v for k, v in __import__("scrapy_domainstate.shell", fromlist=["x"]).domainstate(URL).items() '
        'if k != "record"}}, default=str)'
    ).replace("URL", repr(dead))
    second = await deferToThread(scrapy_shell, dead, code, store)
    assert second.returncode == 0, second.stderr
    out = last_json(second.stdout)
    assert out["response"] is None
    assert (out["meta"]["domain"], out["meta"]["state"], out["meta"]["method"]) == (host, "dead", "skip")
    assert out["decision"] == {"domain": host, "state": "dead", "decision": "skip"}
    assert sites.methods(host) == ["HEAD", "GET"]


@pytest_twisted.ensureDeferred
async def test_scrapy_shell_remembers_between_sessions(sites: Any, tmp_path: Path) -> None:
    await dead_in_a_second_session(sites, tmp_path, "gone-shell.test", flush=True)


@pytest_twisted.ensureDeferred
async def test_scrapy_shell_saves_the_session_at_exit(sites: Any, tmp_path: Path) -> None:
    await dead_in_a_second_session(sites, tmp_path, "gone-shell-exit.test", flush=False)
