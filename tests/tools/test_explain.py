"""``scrapy domainstate explain URL --response FILE`` on saved responses (issue 26, part 5), run
as a user runs it: a subprocess, outside a project. The store case (after a real crawl) is in
``tests/scrapy/test_wall_rules_crawl.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scrapy_domainstate.core.config import Config
from scrapy_domainstate.detect.classify import Classifier
from scrapy_domainstate.tools.explain import parse_saved_response, response_lines
from tests.tools.test_command import ok, scrapy

HERE = Path(__file__).parent / "explain"
#: A real Cloudflare "Access denied" (error 1006) page: see explain/README.rst.
CF_1006 = (HERE / "cf-cm-access-denied-1006.html").read_bytes()


def http_message(status: str, headers: list[str], body: bytes, newline: bytes = b"\r\n") -> bytes:
    head = newline.join([f"HTTP/1.1 {status}".encode(), *(h.encode() for h in headers)])
    return head + newline + newline + body


def test_a_saved_http_message_gets_the_verdict_and_the_marker_that_fired(tmp_path: Path) -> None:
    saved = tmp_path / "blocked.http"
    saved.write_bytes(http_message("403 Forbidden", ["Server: cloudflare", "Content-Type: text/html"], CF_1006))
    out = ok(scrapy("explain", "https://site.com/", "--response", str(saved), cwd=tmp_path)).stdout.splitlines()
    assert out[0] == "response 403 for https://site.com/ (3,130 bytes, 2 headers)"
    assert out[1] == "  verdict:  antibot [block:cloudflare:1006]"
    assert out[2].startswith("  fired:    hard block, vendor cloudflare: built-in marker cloudflare '1006': ")
    assert "'cf-error-code'" in out[2]
    assert out[3] == "  then:     the domain goes to antibot-hard at once (browser only, a plain canary per visit)"


def test_a_saved_body_with_status_and_headers_and_the_users_rules(tmp_path: Path) -> None:
    body = tmp_path / "page.html"
    body.write_bytes(b"<html><head><title>Shop</title></head><body>" + b"<p>Our products.</p>" * 40 + b"</body></html>")
    rules = {
        "walls": [
            {"name": "acme-deny", "status": 403, "header": {"x-acme": "deny"}, "grade": "hard", "vendor": "acme"}
        ],
        "never": [{"name": "partner", "domain": "partner.example"}],
    }
    setting = f"DOMAINSTATE_WALL_RULES={json.dumps(rules)}"
    # the built-in classifier: a fine page
    plain = ok(scrapy("explain", "shop.example", "--response", str(body), cwd=tmp_path)).stdout
    assert "  verdict:  ok-empty" in plain
    assert "  anti-bot: no rule fired (built-in, no rules of your own are set)" in plain
    assert "  useful:   ok-empty (no e-mail address" in plain  # what the contacts source makes of it
    assert "DOMAINSTATE_OUTCOME" in plain
    # the verdict is the classifier's; whether the page is useful, the outcome source's
    contact = tmp_path / "contact.html"
    contact.write_bytes("<html><body>Mail info@acme-shop.com, +49 30 1234567</body></html>".encode("utf-16"))
    useful = ok(scrapy("explain", "shop.example", "--response", str(contact), cwd=tmp_path)).stdout
    assert "  useful:   ok-contact (email:info@acme-shop.com, phone:+49301234567)" in useful, useful
    items = ok(
        scrapy("explain", "shop.example", "--response", str(contact), "-s", "DOMAINSTATE_OUTCOME=items", cwd=tmp_path)
    )
    assert "  useful:   the callback decides" in items.stdout
    # a rule of the user's turns it into a wall (the target's host, as https://HOST/)
    args = ("--response", str(body), "--status", "403", "--header", "X-Acme: Deny; id=7", "-s", setting)
    walled = ok(scrapy("explain", "shop.example", *args, cwd=tmp_path)).stdout.splitlines()
    assert walled[0].startswith("response 403 for https://shop.example/ (")
    assert walled[1] == "  verdict:  antibot [block:acme:rule:acme-deny]"
    assert walled[2] == (
        "  fired:    hard block, vendor acme: your wall rule 'acme-deny' (hard, vendor acme): status 403,"
        " header x-acme containing 'deny' (DOMAINSTATE_WALL_RULES)"
    )

    # a Cloudflare block on the partner's site: the exception drops the built-in verdict
    saved = tmp_path / "cf.http"
    saved.write_bytes(http_message("403 Forbidden", ["Server: cloudflare"], CF_1006, newline=b"\n"))
    excused = ok(
        scrapy("explain", "https://www.partner.example/a", "--response", str(saved), "-s", setting, cwd=tmp_path)
    )
    lines = excused.stdout.splitlines()
    assert lines[1] == "  verdict:  http-error [http:403]"
    assert lines[3].startswith(
        "  dropped:  the built-in verdict [block:cloudflare:1006] (hard block, vendor cloudflare"
    )
    assert (
        lines[4] == "            by your never-a-wall exception 'partner': on partner.example (DOMAINSTATE_WALL_RULES)"
    )


def test_bad_explain_arguments_are_clear_errors(tmp_path: Path) -> None:
    missing = scrapy("explain", "shop.example", "--response", str(tmp_path / "nope.html"), cwd=tmp_path)
    assert missing.returncode == 1 and "error: cannot read " in missing.stderr
    body = tmp_path / "p.html"
    body.write_bytes(b"<p>x</p>")
    header = scrapy("explain", "shop.example", "--response", str(body), "--header", "no colon", cwd=tmp_path)
    assert header.returncode == 2 and "--header must be 'Name: value', got 'no colon'" in header.stderr
    status = scrapy("explain", "shop.example", "--status", "403", cwd=tmp_path, db=tmp_path / "db")
    assert status.returncode == 2 and "--status and --header apply to 'explain --response FILE'" in status.stderr
    broken = tmp_path / "broken.http"
    broken.write_bytes(b"HTTP/1.1 teapot\r\n\r\n")
    bad = scrapy("explain", "shop.example", "--response", str(broken), cwd=tmp_path)
    assert bad.returncode == 1 and "not an HTTP status line" in bad.stderr
    rules = scrapy(
        "explain", "shop.example", "--response", str(body), "-s", 'DOMAINSTATE_WALL_RULES={"walls": [{}]}', cwd=tmp_path
    )
    assert rules.returncode == 2 and "DOMAINSTATE_WALL_RULES['walls'][0]: needs a grade" in rules.stderr
    nodb = scrapy("explain", "shop.example", cwd=tmp_path, db=tmp_path / "none")
    assert nodb.returncode == 1


def test_parse_saved_response_reads_curl_output() -> None:
    # curl -i -L: every hop's head, the last one is the response's
    data = http_message("301 Moved", ["Location: /b"], b"") + http_message(
        "403 Forbidden", ["Set-Cookie: a=1", "Set-Cookie: b=2"], b"<p>no</p>"
    )
    saved = parse_saved_response(data)
    assert (saved.status, saved.headers, saved.body) == (403, {"set-cookie": "a=1, b=2"}, b"<p>no</p>")
    # given status and headers win over the message's own
    assert parse_saved_response(data, 429, {"Retry-After": "5"}).status == 429
    assert parse_saved_response(data, None, {"Retry-After": "5"}).headers["retry-after"] == "5"
    # a body alone
    assert parse_saved_response(b"<html></html>") == parse_saved_response(b"<html></html>", 200, {})
    with pytest.raises(ValueError, match="not a header line"):
        parse_saved_response(b"HTTP/1.1 200 OK\nbroken header\n\nbody")


def test_response_lines_for_a_predicate_clean_verdict() -> None:
    config = Config.from_settings({"DOMAINSTATE_WALL_PREDICATE": f"{__name__}.always_clean"})
    lines = response_lines(Classifier(config), "https://site.com/", 403, {"server": "cloudflare"}, CF_1006)
    assert lines[1] == "  verdict:  http-error [http:403]"
    assert "by your predicate (DOMAINSTATE_WALL_PREDICATE) said 'clean'" in lines[4]


def always_clean(response: object) -> str:
    return "clean"
