"""The fleet package's layout: the wire format written once, the old dotted paths kept.

``scrapy_domainstate/fleet/`` holds the client and the reference service, one role a
module; ``scrapy_domainstate.fleet.remote`` and ``scrapy_domainstate.service`` are their public
faces (settings, the README and ``python -m scrapy_domainstate.service`` name them).
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from scrapy_domainstate import service
from scrapy_domainstate.core import keys
from scrapy_domainstate.fleet import client, protocol, remote, validation
from scrapy_domainstate.fleet.limits import Limits
from scrapy_domainstate.fleet.validation import ApiError


@pytest.mark.parametrize("module", [remote, service])
def test_every_public_name_resolves(module: object) -> None:
    for name in module.__all__:  # type: ignore[attr-defined]
        assert getattr(module, name) is not None, name


def test_the_old_paths_are_the_new_objects() -> None:
    assert remote.RemoteClient is client.RemoteClient
    assert remote.parse_lookup_response is protocol.parse_lookup_response
    assert service.make_site is importlib.import_module("scrapy_domainstate.fleet.http").make_site
    # one logger per module, named after it: "scrapy_domainstate" filters them all
    assert client.logger.name == "scrapy_domainstate.fleet.client"
    assert importlib.import_module("scrapy_domainstate.fleet.service").logger.name == "scrapy_domainstate.fleet.service"


def test_the_domain_key_syntax_lives_in_keys_only() -> None:
    assert remote.is_domain_key is keys.is_domain_key
    assert protocol.is_domain_key is keys.is_domain_key
    assert protocol.MAX_DOMAIN_LENGTH == keys.MAX_DOMAIN_LENGTH == 253


@pytest.mark.parametrize(
    ("host", "shareable"),
    [
        ("https://Shop.Example.co.uk/a", True),
        ("www.bücher.de", True),
        ("http://[FE80::1%25eth0]:8080/", True),
        ("10.0.0.1", True),
        (".".join(["x" * 50] * 4) + ".test", False),  # 209 characters: shortened with a digest, never shared
    ],
)
def test_keys_of_domain_key_pass_unless_shortened(host: str, shareable: bool) -> None:
    key = keys.domain_key(host, per_hostname=True)
    assert key
    assert keys.is_domain_key(key) is shareable


@pytest.mark.parametrize(
    "text",
    ["", "Example.com", "a..b", "-a.com", "a-.com", "a_b.com", "a.com.", "FE80::1", "fe80:0::1", "x" * 254, None, 5],
)
def test_not_domain_keys(text: object) -> None:
    assert not keys.is_domain_key(text)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1, 1.0), (2.5, 2.5), (True, None), ("1", None), (float("nan"), None), (float("inf"), None), (10**400, None)],
)
def test_finite_number(value: object, expected: float | None) -> None:
    assert protocol.finite_number(value) == expected


def test_load_json_refuses_what_both_sides_refuse() -> None:
    assert protocol.load_json(b'{"a": 1, "a": 2}') == {"a": 2}
    for body, unique in [
        (b'{"a": NaN}', False),
        (b"[Infinity]", False),
        (b'{"a": 1, "a": 2}', True),
        (b"[" * 100_000, False),
        (b"\xff", False),
    ]:
        with pytest.raises(ValueError):
            protocol.load_json(body, unique_keys=unique)


def test_both_sides_read_the_same_body_the_same_way() -> None:
    """What the client refuses as a whole, the service refuses too (one JSON reader)."""
    for body in (b'{"domains": {"a.com": NaN}}', b"[" * 100_000, b"\xff"):
        with pytest.raises(remote.InvalidResponse):
            remote.parse_lookup_response(body, ["a.com"], now=1.0)
        with pytest.raises(ApiError) as info:
            validation.parse_reports(body, Limits(), now=1.0)
        assert info.value.status == 400


def test_python_m_service_still_runs() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "scrapy_domainstate.service", "--help"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: python -m scrapy_domainstate.service")
    assert "reference shared domain-state service" in out.stdout
