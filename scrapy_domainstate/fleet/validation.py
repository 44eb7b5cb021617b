"""The service's checks of a request: the lookup query, the reports of a POST body.

Every refusal is an :class:`ApiError` naming the HTTP status and the offending field.
Pure: no I/O.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

from scrapy_domainstate.fleet.limits import Limits
from scrapy_domainstate.fleet.protocol import STATES, finite_number, has_control, is_domain_key, is_text, load_json

__all__ = ["ApiError", "parse_domains", "parse_reports"]

_REPORT_FIELDS = frozenset({"domain", "state", "last_seen", "evidence"})


class ApiError(Exception):
    """A request the service refuses: HTTP status, message, offending field."""

    def __init__(self, status: int, message: str, field: str | None = None, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field
        #: Seconds for a ``Retry-After`` header (429).
        self.retry_after = retry_after


def parse_domains(query: bytes, limits: Limits) -> list[str]:
    """The domains of a lookup query string; raises :class:`ApiError`."""
    try:
        text = query.decode("ascii")
        params = parse_qsl(text, keep_blank_values=True, strict_parsing=bool(text), max_num_fields=8)
    except (UnicodeDecodeError, ValueError):
        raise ApiError(400, "malformed query string", "domains") from None
    names = [name for name, _ in params]
    for name in names:
        if name != "domains":
            raise ApiError(400, f"unknown query parameter {name!r}", name)
    if not names:
        raise ApiError(400, "missing query parameter 'domains'", "domains")
    if len(names) > 1:
        raise ApiError(400, "give 'domains' once, as a comma-separated list", "domains")
    domains = params[0][1].split(",")
    if len(domains) > limits.max_domains:
        raise ApiError(400, f"too many domains: at most {limits.max_domains} per request", "domains")
    for i, domain in enumerate(domains):
        if not is_domain_key(domain):
            raise ApiError(
                400,
                f"not a domain key: {domain[:80]!r} (lowercase LDH labels, xn-- for IDNs, or an IP address)",
                f"domains[{i}]",
            )
    return list(dict.fromkeys(domains))


def parse_reports(body: bytes, limits: Limits, now: float) -> list[dict[str, Any]]:
    """The validated reports of a POST body; raises :class:`ApiError`."""
    try:
        data = load_json(body, unique_keys=True)
    except ValueError as exc:
        raise ApiError(400, f"malformed JSON: {exc}"[:300]) from None
    if not isinstance(data, dict):
        raise ApiError(400, 'the body must be a JSON object {"reports": [...]}')
    for key in data:
        if key != "reports":
            raise ApiError(400, f"unknown field {key[:80]!r}", key[:80])
    reports = data.get("reports")
    if not isinstance(reports, list):
        raise ApiError(400, "'reports' must be an array", "reports")
    if not reports:
        raise ApiError(400, "'reports' must not be empty", "reports")
    if len(reports) > limits.max_reports:
        raise ApiError(400, f"too many reports: at most {limits.max_reports} per request", "reports")
    return [_parse_report(report, f"reports[{i}]", limits, now) for i, report in enumerate(reports)]


def _parse_report(report: object, where: str, limits: Limits, now: float) -> dict[str, Any]:
    """One validated report; ``where`` names it in errors (``reports[3]``)."""
    if not isinstance(report, dict):
        raise ApiError(400, "a report must be an object", where)
    for key in report:
        if key not in _REPORT_FIELDS:
            raise ApiError(400, f"unknown field {key[:80]!r} (the reporter comes from the token)", f"{where}.{key}")
    domain = report.get("domain")
    if not isinstance(domain, str):
        raise ApiError(400, "'domain' must be a string", f"{where}.domain")
    if not is_domain_key(domain):
        raise ApiError(400, f"not a domain key: {domain[:80]!r}", f"{where}.domain")
    state = report.get("state")
    if not isinstance(state, str):
        raise ApiError(400, "'state' must be a string", f"{where}.state")
    if state not in STATES:
        raise ApiError(400, f"unknown state {state[:40]!r}; one of {', '.join(STATES)}", f"{where}.state")
    last_seen = finite_number(report.get("last_seen"))
    if last_seen is None:
        raise ApiError(400, "'last_seen' must be a finite number (epoch seconds)", f"{where}.last_seen")
    if last_seen <= 0:
        raise ApiError(400, "'last_seen' must be positive (epoch seconds)", f"{where}.last_seen")
    if last_seen > now + limits.max_skew:
        raise ApiError(400, "'last_seen' is in the future", f"{where}.last_seen")
    evidence = report.get("evidence")
    if evidence is not None:
        _check_evidence(evidence, f"{where}.evidence", limits)
    return {"domain": domain, "state": state, "last_seen": last_seen, "evidence": evidence}


def _check_evidence(evidence: object, where: str, limits: Limits) -> None:
    if not isinstance(evidence, str):
        raise ApiError(400, "'evidence' must be a string", where)
    if not is_text(evidence):
        raise ApiError(400, "'evidence' is not valid Unicode text (a lone surrogate)", where)
    if len(evidence) > limits.max_evidence:
        raise ApiError(400, f"'evidence' is longer than {limits.max_evidence} characters", where)
    if has_control(evidence):
        raise ApiError(400, "'evidence' holds control characters", where)
