"""The user's own detection rules (issue 26, part 4): each rule kind, the exceptions, the
predicate, and the start-up validation of ``DOMAINSTATE_WALL_RULES`` / ``DOMAINSTATE_WALL_PREDICATE``.

The classifier is the real one; responses are real captured-shaped pages of the test sites.
"""

from __future__ import annotations

from typing import Any

import pytest

from scrapy_domainstate.core.config import Config, ConfigError
from scrapy_domainstate.core.record import Outcome
from scrapy_domainstate.core.wallrules import WallRules, rule_of_evidence
from scrapy_domainstate.detect.classify import Classifier
from scrapy_domainstate.detect.wallrules import Seen, spider_settings

CF_CHALLENGE = (
    b"<!DOCTYPE html><html><head><title>Just a moment...</title></head><body>"
    b"<script>window._cf_chl_opt={cvId:'3'};</script></body></html>"
)
CF_HEADERS = {"cf-mitigated": "challenge", "cf-ray": "8a1b2c3d4e5f-FRA", "server": "cloudflare"}
PLAIN = b"<html><head><title>Shop</title></head><body><p>" + b"Welcome to our shop. " * 20 + b"</p></body></html>"


def classifier(rules: Any = None, predicate: str | None = None) -> Classifier:
    settings: dict[str, Any] = {}
    if rules is not None:
        settings["DOMAINSTATE_WALL_RULES"] = rules
    if predicate is not None:
        settings["DOMAINSTATE_WALL_PREDICATE"] = predicate
    return Classifier(Config.from_settings(settings))


def walls(*rules: dict[str, Any]) -> dict[str, Any]:
    return {"walls": list(rules)}


# ------------------------------------------------------------------ wall rules, by kind


def test_without_rules_the_classifier_consults_none() -> None:
    assert classifier().rules is None
    assert Config().wall_rules == WallRules() and not Config().wall_rules
    assert classifier().response(200, {}, PLAIN, "https://shop.example/", True).outcome is Outcome.OK_EMPTY


def test_a_status_rule_makes_a_plain_answer_a_wall() -> None:
    c = classifier(walls({"name": "teapot", "status": [418, 999], "grade": "hard", "vendor": "acme"}))
    v = c.response(418, {}, PLAIN, "https://shop.example/", True)
    assert (v.outcome, v.status, v.error_class, v.browser_fixable) == (
        Outcome.ANTIBOT,
        418,
        "block:acme:rule:teapot",
        False,
    )
    assert v.is_hard_block
    assert c.response(200, {}, PLAIN, "https://shop.example/", True).outcome is Outcome.OK_EMPTY


def test_a_header_rule_by_name_or_by_value() -> None:
    c = classifier(
        walls(
            {"name": "by-value", "header": {"X-Acme-Edge": ["deny", "block"]}, "grade": "hard"},
            {"name": "by-name", "header": "x-acme-check", "grade": "soft", "vendor": "acme"},
        )
    )
    url = "https://shop.example/p"
    hit = c.response(200, {"X-Acme-Edge": "policy=Deny; id=7"}, PLAIN, url, False)
    assert hit.error_class == "block:custom:rule:by-value"  # case-insensitive, within the value
    assert c.response(200, {"x-acme-edge": "pass"}, PLAIN, url, False).outcome is Outcome.OK_EMPTY
    soft = c.response(200, {b"X-Acme-Check": [b"1"]}, PLAIN, url, False)  # Scrapy's bytes headers too
    assert (soft.error_class, soft.browser_fixable) == ("challenge:acme:rule:by-name", True)
    assert not soft.is_hard_block


def test_a_body_rule_reads_the_scanned_prefix_only() -> None:
    c = classifier(walls({"name": "puzzle", "body": "Solve The Puzzle", "grade": "soft", "vendor": "shop"}))
    page = PLAIN.replace(b"<p>", b"<p>Please solve the puzzle to continue. ")
    assert c.response(200, {}, page, "https://shop.example/", True).error_class == "challenge:shop:rule:puzzle"
    late = PLAIN + b" " * 70_000 + b"solve the puzzle"  # past DOMAINSTATE_BODY_SCAN_BYTES (64 KiB)
    assert c.response(200, {}, late, "https://shop.example/", True).outcome is Outcome.OK_EMPTY


def test_every_condition_of_a_rule_must_hold_and_the_first_rule_wins() -> None:
    c = classifier(
        walls(
            {"name": "scoped", "status": 403, "body": "access denied", "domain": "shop.example", "grade": "hard"},
            {"name": "any-403", "status": 403, "grade": "soft"},
        )
    )
    denied = b"<html><body>Access denied</body></html>"
    assert c.response(403, {}, denied, "https://www.shop.example/x", False).error_class == "block:custom:rule:scoped"
    # another domain, or the body missing: the next rule
    assert c.response(403, {}, denied, "https://other.example/", True).error_class == "challenge:custom:rule:any-403"
    assert c.response(403, {}, PLAIN, "https://shop.example/", True).error_class == "challenge:custom:rule:any-403"
    # "shop.example" is not a suffix match of "myshop.example"
    assert c.response(403, {}, denied, "https://myshop.example/", True).error_class == "challenge:custom:rule:any-403"


def test_a_wall_rule_wins_over_the_built_in_verdict() -> None:
    c = classifier(walls({"name": "cf-is-a-ban-here", "header": "cf-mitigated", "grade": "hard", "vendor": "cf"}))
    v = c.response(403, CF_HEADERS, CF_CHALLENGE, "https://shop.example/", True)
    assert v.error_class == "block:cf:rule:cf-is-a-ban-here"
    assert classifier().response(403, CF_HEADERS, CF_CHALLENGE, "https://a.example/", True).error_class == (
        "challenge:cloudflare:cf-mitigated"
    )


# ------------------------------------------------------------------ never-a-wall exceptions


def test_a_domain_exception_keeps_a_flagged_site_clean() -> None:
    c = classifier({"never": [{"domain": "partner.example"}]})
    v = c.response(403, CF_HEADERS, CF_CHALLENGE, "https://www.partner.example/", True)
    # not a wall: what a 403 is besides (an HTTP error a browser might fix)
    assert (v.outcome, v.error_class) == (Outcome.HTTP_ERROR, "http:403")
    aws = c.response(202, {"x-amzn-waf-action": "challenge"}, b"<html></html>", "https://partner.example/a", False)
    assert aws.outcome is Outcome.OK_EMPTY
    # elsewhere the built-in verdict stands, for the HEAD probe and the headers-only check too
    assert c.response(403, CF_HEADERS, CF_CHALLENGE, "https://other.example/", True).outcome is Outcome.ANTIBOT
    assert c.head(403, CF_HEADERS, "https://partner.example/", True).outcome is Outcome.NO_VERDICT
    assert c.head(404, CF_HEADERS, "https://partner.example/", True).outcome is Outcome.DEAD
    assert c.head(403, CF_HEADERS, "https://other.example/", True).outcome is Outcome.ANTIBOT
    assert c.antibot(403, CF_HEADERS, b"", "https://partner.example/") is None
    assert c.antibot(403, CF_HEADERS, b"", "https://other.example/") is not None


def test_a_marker_exception_drops_one_built_in_marker() -> None:
    aws = (202, {"x-amzn-waf-action": "challenge"}, b"<html><body>one moment</body></html>")
    assert classifier().response(*aws, "https://shop.example/", True).error_class == "challenge:aws:x-amzn-waf-action"
    for marker in ("challenge:aws:x-amzn-waf-action", "challenge:aws:*", "aws"):  # exact, a pattern, a vendor
        v = classifier({"never": [{"marker": marker}]}).response(*aws, "https://shop.example/", True)
        assert (v.outcome, v.status) == (Outcome.OK_EMPTY, 202), marker
    # a pattern that names another marker or vendor leaves the verdict alone
    for marker in ("challenge:aws:title", "cloudflare", "block:aws:*"):
        v = classifier({"never": [{"marker": marker}]}).response(*aws, "https://shop.example/", True)
        assert v.outcome is Outcome.ANTIBOT, marker
    # with a domain: only there
    scoped = classifier({"never": [{"marker": "aws", "domain": "shop.example"}]})
    assert scoped.response(*aws, "https://shop.example/", True).outcome is Outcome.OK_EMPTY
    assert scoped.response(*aws, "https://other.example/", True).outcome is Outcome.ANTIBOT


def test_a_body_exception_and_an_exception_with_several_conditions() -> None:
    c = classifier({"never": [{"body": "data-shop-template=404", "status": [403, 404], "name": "our-404"}]})
    page = CF_CHALLENGE.replace(b"<body>", b"<body data-shop-template=404>")
    assert c.response(403, CF_HEADERS, page, "https://a.example/", True).outcome is Outcome.HTTP_ERROR
    # the status is not one of the exception's: the built-in verdict stands
    assert c.response(503, CF_HEADERS, page, "https://a.example/", True).outcome is Outcome.ANTIBOT
    assert c.response(403, CF_HEADERS, CF_CHALLENGE, "https://a.example/", True).outcome is Outcome.ANTIBOT


def test_an_exception_does_not_excuse_a_wall_rule_of_the_user() -> None:
    c = classifier({"walls": [{"status": 403, "grade": "hard"}], "never": [{"domain": "partner.example"}]})
    assert c.response(403, {}, PLAIN, "https://partner.example/", True).error_class == "block:custom:rule:wall1"


# ------------------------------------------------------------------ the predicate

SEEN: list[Seen] = []


def predicate(response: Seen) -> Any:
    SEEN.append(response)
    if "ban" in response.url:
        return "hard:edgeco"
    if "tuple" in response.url:
        return ("soft", "edgeco")
    if "clean" in response.url:
        return "clean"
    if "bad" in response.url:
        return 42
    if "boom" in response.url:
        raise RuntimeError("boom")
    if response.status == 418 and "teapot" in response.text and response.headers.get("x-kind") == "pot":
        return "soft"
    return None


def test_the_predicate_is_consulted_first_and_its_verdicts() -> None:
    path = f"{__name__}.predicate"
    c = classifier(walls({"name": "any-403", "status": 403, "grade": "soft"}), predicate=path)
    assert c.response(403, {}, PLAIN, "https://ban.example/", True).error_class == "block:edgeco:predicate"
    assert c.response(200, {}, PLAIN, "https://tuple.example/", True).error_class == "challenge:edgeco:predicate"
    teapot = c.response(418, {"X-Kind": "pot"}, b"<p>a teapot</p>", "https://pot.example/", True)
    assert teapot.error_class == "challenge:custom:predicate"
    assert SEEN[-1].headers["x-kind"] == "pot" and SEEN[-1].host == "pot.example"
    # None: the rules below decide
    assert c.response(403, {}, PLAIN, "https://other.example/", True).error_class == "challenge:custom:rule:any-403"
    # "clean": no built-in anti-bot rule applies either
    v = c.response(403, CF_HEADERS, CF_CHALLENGE, "https://clean.example/", True)
    assert (v.outcome, v.error_class) == (Outcome.HTTP_ERROR, "http:403")


def test_a_predicate_that_fails_never_breaks_the_crawl(caplog: pytest.LogCaptureFixture) -> None:
    c = classifier(predicate=f"{__name__}.predicate")
    with caplog.at_level("WARNING"):
        for host in ("bad", "boom", "bad"):
            v = c.response(403, CF_HEADERS, CF_CHALLENGE, f"https://{host}.example/", True)
            assert v.error_class == "challenge:cloudflare:cf-mitigated"  # the built-in rules decide
    warnings = [r for r in caplog.records if "DOMAINSTATE_WALL_PREDICATE" in r.getMessage()]
    assert len(warnings) == 1 and "42" in warnings[0].getMessage()


def test_rule_of_evidence_tells_the_user_rules_from_the_built_in_ones() -> None:
    assert rule_of_evidence("block:acme:rule:acme-403") == "rule"
    assert rule_of_evidence("challenge:edgeco:predicate") == "predicate"
    assert rule_of_evidence("challenge:cloudflare:cf-mitigated") is None
    assert rule_of_evidence(None) is None


# ------------------------------------------------------------------ validation at start-up


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("not json", "DOMAINSTATE_WALL_RULES must be a dict (or its JSON)"),
        ([{"status": 403}], "DOMAINSTATE_WALL_RULES must be a dict with the keys 'walls' and/or 'never'"),
        ({"wall": []}, "DOMAINSTATE_WALL_RULES has an unknown key 'wall'; valid keys: walls, never"),
        ({"walls": {"status": 403}}, "DOMAINSTATE_WALL_RULES['walls'] must be a list of dicts"),
        ({"walls": [{"status": 403}]}, "DOMAINSTATE_WALL_RULES['walls'][0]: needs a grade"),
        ({"walls": [{"status": 403, "grade": "medium"}]}, "grade must be 'soft' or 'hard', got 'medium'"),
        ({"walls": [{"domain": "a.example", "grade": "hard"}]}, "needs at least one of status, header, body"),
        ({"walls": [{"status": "4O3", "grade": "hard"}]}, "status must be a status code or a list of them"),
        ({"walls": [{"status": 42, "grade": "hard"}]}, "status 42 is not an HTTP status"),
        ({"walls": [{"stauts": 403, "grade": "hard"}]}, "unknown key 'stauts'; valid keys: name, grade, vendor"),
        ({"walls": [{"header": {}, "grade": "hard"}]}, "header must be a header name"),
        ({"walls": [{"body": "", "grade": "soft"}]}, "body must be a non-empty string or a list of them"),
        ({"walls": [{"body": "x", "grade": "soft", "vendor": "a:b"}]}, "vendor must be at most 60 characters"),
        ({"walls": [{"body": "x", "grade": "soft", "domain": "https://a.example/"}]}, "domain must be a host name"),
        (
            {"walls": [{"name": "w", "body": "x", "grade": "soft"}, {"name": "w", "status": 403, "grade": "hard"}]},
            "two rules are named 'w'",
        ),
        ({"never": [{}]}, "DOMAINSTATE_WALL_RULES['never'][0]: needs at least one of domain, marker"),
        ({"never": [{"domian": "a.example"}]}, "['never'][0]: unknown key 'domian'"),
        ({"walls": [], "never": ["a.example"]}, "['never'][0]: must be a dict"),
    ],
)
def test_a_bad_rule_is_one_clear_error_naming_the_setting(value: Any, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        Config.from_settings({"DOMAINSTATE_WALL_RULES": value})
    assert message in str(raised.value)
    assert str(raised.value).startswith("DOMAINSTATE_WALL_RULES")


def test_rules_from_the_command_line_as_json() -> None:
    given = '{"walls": [{"status": 403, "header": "x-acme", "grade": "hard", "vendor": "acme"}]}'
    config = Config.from_settings({"DOMAINSTATE_WALL_RULES": given})
    assert [r.evidence for r in config.wall_rules.walls] == ["block:acme:rule:wall1"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("predicate", "must be a dotted path to a function"),
        ("no_such_module_xyz.f", "cannot import 'no_such_module_xyz'"),
        (f"{__name__}.no_such_function", "no attribute 'no_such_function'"),
        (f"{__name__}.SEEN", "is not callable"),
    ],
)
def test_a_bad_predicate_fails_at_start_up(value: str, message: str) -> None:
    with pytest.raises(ConfigError, match="DOMAINSTATE_WALL_PREDICATE") as raised:
        Config.from_settings({"DOMAINSTATE_WALL_PREDICATE": value})
    assert message in str(raised.value)


def test_a_predicate_given_as_a_function_and_none() -> None:
    assert Config.from_settings({"DOMAINSTATE_WALL_PREDICATE": predicate}).wall_predicate == f"{__name__}.predicate"
    assert Config.from_settings({"DOMAINSTATE_WALL_PREDICATE": "none"}).wall_predicate is None


def test_spider_attributes_override_the_settings() -> None:
    class Spider:
        domainstate_wall_rules = {"walls": [{"status": 418, "grade": "soft"}]}

    settings = {"DOMAINSTATE_WALL_RULES": {"walls": [{"status": 403, "grade": "hard"}]}, "DOMAINSTATE_ENABLED": True}
    config = Config.from_settings(spider_settings(settings, Spider()))
    assert [sorted(r.when.statuses) for r in config.wall_rules.walls] == [[418]]
    assert config.enabled
    assert spider_settings(settings, object()) is settings

    class Bad:
        domainstate_wall_rules = {"walls": [{"status": 403}]}

    with pytest.raises(ConfigError, match=r"DOMAINSTATE_WALL_RULES\['walls'\]\[0\]: needs a grade"):
        Config.from_settings(spider_settings(settings, Bad()))
