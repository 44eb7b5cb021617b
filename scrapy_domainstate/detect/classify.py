"""Turn HTTP answers, download failures and TLS certificates into outcomes.

Pure: no Scrapy engine, no I/O, no clock (``now`` is passed in). The failure mapping
imports Scrapy's and Twisted's exception classes lazily, so importing this module stays
cheap. Every public method returns a :class:`Verdict` (or ``None``) and never raises.

The anti-bot check (:meth:`Classifier.antibot`) runs before any success is counted:
challenges also arrive as 2xx (AWS WAF answers a challenge with 202), and a challenge
counted as ``ok-empty`` would make a site ``cold`` for months. It looks at the status, a
few headers and the lowercased first ``DOMAINSTATE_BODY_SCAN_BYTES`` of the body (read
further, scripts and styles skipped, when that prefix shows no content), in three layers:
the vendor markers of :mod:`scrapy_domainstate.detect.markers` (hard blocks first), then the
structure of an interstitial (little text, few links, and a verification phrase, a captcha
widget or a lone challenge script), always soft. All literals come from one scan
(:class:`~scrapy_domainstate.detect.scan.LiteralScanner`: hyperscan when installed).

With hyperscan, :meth:`Classifier.response` first makes one case-insensitive pass over the raw
bytes (markers, cues, the longest word of each verification phrase, the first ``<title``,
``<script`` and ``<body``, and the contact scan's places): when it shows that no rule can fire,
the answer comes from it without a lowercase copy or a visible-text pass; otherwise the full
path runs (with the literals the pass found). Both engines give the same verdicts.

The body methods take the body as bytes or as a :class:`~scrapy_domainstate.detect.scan.BodyScan`
(made once per response by the runtime): the classifier reads its lowercased view, and leaves
in it the contact places its pass found, for the contact scan that follows.
"""

from __future__ import annotations

import errno
import ipaddress
import re
import socket
import ssl
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.keys import is_site_root
from scrapy_domainstate.core.record import FETCHED, HARD_BLOCK_PREFIX, Outcome
from scrapy_domainstate.core.wallrules import CLEAN
from scrapy_domainstate.detect import contacts
from scrapy_domainstate.detect.markers import (
    BLOCK_STATUSES,
    CAPTCHA_WIDGETS,
    CHALLENGE_SCRIPTS,
    HINT_VENDOR_ORDER,
    LANDER_MAX_BYTES,
    LANDER_MAX_TEXT,
    NAMING_ONLY,
    PARKED_MAX_BYTES,
    PARKING_HEADERS,
    PARKING_MARKUP,
    PARKING_PHRASES,
    PARKING_TITLES,
    SMALL_PAGE,
    VERIFY_PHRASES,
    Marker,
    merge_markers,
)
from scrapy_domainstate.detect.scan import (
    BodyScan,
    LiteralScanner,
    PatternScanner,
    Subset,
    extended_view,
    pcre_literal,
    title_of,
    visible_text,
)
from scrapy_domainstate.detect.wallrules import UserRules, user_rules

__all__ = [
    "EXTENDED_SCAN_CAP",
    "INTERSTITIAL_MAX_LINKS",
    "INTERSTITIAL_MAX_TEXT",
    "JS_SHELL_MAX_BYTES",
    "Classifier",
    "Verdict",
    "normalize_headers",
]

#: Bodies at least this long are never called a script-only shell.
JS_SHELL_MAX_BYTES = 50_000
#: A shell shows fewer visible characters than this outside ``<script>``/``<style>``.
JS_SHELL_MIN_TEXT = 50
#: An interstitial shows fewer visible characters than this, and fewer links than
#: :data:`INTERSTITIAL_MAX_LINKS` (real challenge pages: at most ~950 characters and 6 links).
INTERSTITIAL_MAX_TEXT = 1200
INTERSTITIAL_MAX_LINKS = 10
#: A long page with a challenge marker counts as interstitial-shaped up to this much text
#: (site-branded challenge pages explain themselves in several languages).
BRANDED_MAX_TEXT = 4000
#: A verification phrase in the text (not the title) counts on pages with less text than this.
PHRASE_MAX_TEXT = 700
#: "Empty but for a script": no title, fewer visible characters than this, at most 2 links and
#: 6 scripts (vendors inject their sensor scripts into every page, small ones included).
EMPTY_PAGE_MAX_TEXT = 40
#: A long page whose scanned prefix shows no content is read up to this many bytes.
EXTENDED_SCAN_CAP = 1 << 20
#: Grace for a certificate's ``notBefore`` against a slightly slow local clock.
CERT_NOT_BEFORE_GRACE = 3600.0

_SUCCESS = FETCHED
_CT_ONLY = {"content-type": ""}.keys()
#: status -> the plain ``ok-empty`` verdict (immutable, so shared).
_OK_EMPTY: dict[int, Verdict] = {}
#: Where the fast path looks for the first of each (title, js-shell check).
_FAST_PROBES = (b"<title", b"<script", b"<body")
#: Bytes at the end of a body checked for the fast path's probes (longer than any).
_PROBE_TAIL = 64
#: Markup lowercased for the fast js-shell check before the whole view is.
_SHELL_WINDOW = 4096


@dataclass(frozen=True, slots=True)
class _Facts:
    """What the fast path saw: offsets of the first ``<script`` and ``<body`` (``-1``: none)."""

    script: int
    body: int


@dataclass(frozen=True, slots=True)
class Verdict:
    """What one HEAD, GET, browser load or failure says about a domain.

    ``error_class`` is short evidence: ``'challenge:cloudflare:title'``,
    ``'block:cloudflare:1020'`` (the ``block:`` prefix marks a hard block), ``'dns'``,
    ``'dns-temporary'``, ``'refused'``, ``'timeout'``, ``'tls:expired'``, ``'http:404'``,
    ``'js-shell'``, or an exception class name. ``browser_fixable`` is true when re-issuing
    the request in a headless browser could plausibly get the page.
    """

    outcome: Outcome
    status: int | None = None
    error_class: str | None = None
    browser_fixable: bool = False

    @property
    def success(self) -> bool:
        """The page was fetched (``ok-contact``, ``ok-empty`` or ``navigation``)."""
        return self.outcome in _SUCCESS

    @property
    def is_hard_block(self) -> bool:
        """An anti-bot verdict that sends the domain straight to ``antibot-hard``."""
        return self.outcome is Outcome.ANTIBOT and bool(
            self.error_class and self.error_class.startswith(HARD_BLOCK_PREFIX)
        )


# ------------------------------------------------------------------ headers


def normalize_headers(
    headers: Any, names: frozenset[str] | None = None, prefixes: tuple[str, ...] = ()
) -> dict[str, str]:
    """Lowercased ``str`` name -> ``str`` value, from Scrapy ``Headers`` or a plain mapping.

    Scrapy ``Headers`` hold bytes names and lists of bytes values; repeated values are
    joined with ``", "`` (the HTTP list syntax). ``None`` gives ``{}``. With ``names``,
    only those headers (and names starting with one of ``prefixes``) are kept.
    """
    if not headers:
        return {}
    if isinstance(headers, dict):
        # Scrapy's Headers is a dict subclass whose items() normalises every key and
        # copies every value list: read the stored pairs directly.
        items: Iterable[tuple[Any, Any]] = dict.items(headers)
    else:
        items = headers.items() if hasattr(headers, "items") else headers
    out: dict[str, str] = {}
    for key, value in items:
        name = (key.decode("latin-1") if isinstance(key, (bytes, bytearray)) else str(key)).lower()
        if names is not None and name not in names and not (prefixes and name.startswith(prefixes)):
            continue
        if isinstance(value, (list, tuple)):
            text = ", ".join(v.decode("latin-1") if isinstance(v, (bytes, bytearray)) else str(v) for v in value)
        elif isinstance(value, (bytes, bytearray)):
            text = value.decode("latin-1")
        else:
            text = "" if value is None else str(value)
        out[name] = f"{out[name]}, {text}" if name in out else text
    return out


def _tokens(value: str) -> set[str]:
    return {t.strip() for t in value.lower().split(",")}


# ------------------------------------------------------------------ body helpers

_BINARY_MAGIC = (b"%PDF", b"\x89PNG", b"GIF8", b"\xff\xd8\xff", b"PK\x03\x04", b"\x1f\x8b", b"RIFF", b"OggS", b"ID3")
_BINARY_TYPES = (
    "image/",
    "audio/",
    "video/",
    "font/",
    "application/pdf",
    "application/zip",
    "application/gzip",
    "application/x-gzip",
    "application/octet-stream",
    "application/wasm",
)


#: The same as they read in a lowercased view.
_BINARY_MAGIC_LOW = tuple(m.lower() for m in _BINARY_MAGIC)


def _is_binary(content_type: str, low: bytes) -> bool:
    """Binary by content type, by the magic bytes of a lowercased view, or by a NUL byte."""
    if content_type and content_type.lstrip().lower().startswith(_BINARY_TYPES):
        return True
    return low.startswith(_BINARY_MAGIC_LOW) or b"\x00" in low[:1024]


_WS = b" \t\r\n\f\v"
_HIDDEN_ELEMENTS = (b"script", b"style", b"noscript", b"template")


def _visible_text_below(low: bytes, threshold: int) -> bool:
    """True when ``low`` shows fewer than ``threshold`` non-space characters as text.

    Text inside ``<script>``, ``<style>``, ``<noscript>``, ``<template>`` and comments does
    not count; counting starts at ``<body`` when there is one and stops at ``threshold``.
    """
    n = len(low)
    i = low.find(b"<body")
    i = 0 if i < 0 else i
    visible = 0
    while i < n:
        lt = low.find(b"<", i)
        end = n if lt < 0 else lt
        if end > i:
            visible += len(low[i:end].translate(None, _WS))
            if visible >= threshold:
                return False
        if lt < 0:
            break
        if low.startswith(b"<!--", lt):
            close = low.find(b"-->", lt + 4)
            i = n if close < 0 else close + 3
            continue
        hidden = next((t for t in _HIDDEN_ELEMENTS if low.startswith(t, lt + 1)), None)
        if hidden is not None:
            close = low.find(b"</" + hidden, lt)
            if close < 0:
                break
            lt = close
        gt = low.find(b">", lt)
        i = n if gt < 0 else gt + 1
    return visible < threshold


# ------------------------------------------------------------------ marker compilation


@dataclass(frozen=True, slots=True)
class _Compiled:
    vendor: str
    marker: Marker
    kind: str
    prefix: str
    allowed: frozenset[int] | None
    literals: frozenset[bytes]
    requires: tuple[bytes, ...]
    regex: re.Pattern[bytes] | None
    anchor: bytes
    header_names: tuple[str, ...]
    header_prefixes: tuple[str, ...]
    values: frozenset[str]
    exclude: frozenset[str]
    title_patterns: tuple[bytes, ...]
    outside_scripts: bool
    unless: tuple[bytes, ...] = ()
    short_page: bool = False

    def evidence(self, detail: str | None = None) -> str:
        name = self.marker.name
        if detail is not None and "{}" in name:
            name = name.replace("{}", detail)
        return f"{self.prefix}:{self.vendor}:{name}"

    def scanned(self) -> set[bytes]:
        """The literals the body scan must report for this marker to be checked (title
        patterns are matched against the title, ``requires`` against the views, directly)."""
        out = set(self.literals)
        if self.anchor:
            out.add(self.anchor)
        return out


def _compile(vendor: str, marker: Marker) -> _Compiled:
    patterns = tuple(p.lower() for p in marker.patterns)
    encoded = tuple(p.encode("utf-8") for p in patterns)
    regex = None
    anchor = b""
    if marker.kind == "regex":
        regex = re.compile(marker.patterns[0].encode("utf-8"), re.S)
        anchor = marker.anchor.lower().encode("utf-8")
    return _Compiled(
        vendor=vendor,
        marker=marker,
        kind=marker.kind,
        prefix="block" if marker.hard else "challenge",
        allowed=marker.allowed_statuses(),
        literals=frozenset(encoded) if marker.kind == "body" else frozenset(),
        requires=tuple(r.lower().encode("utf-8") for r in marker.requires),
        regex=regex,
        anchor=anchor,
        header_names=tuple(p for p in patterns if not p.endswith("*")) if marker.kind == "header" else (),
        header_prefixes=tuple(p[:-1] for p in patterns if p.endswith("*")) if marker.kind == "header" else (),
        values=frozenset(v.lower() for v in marker.values),
        exclude=frozenset(v.lower() for v in marker.exclude),
        title_patterns=encoded if marker.kind == "title" else (),
        outside_scripts=marker.outside_scripts,
        unless=tuple(u.lower().encode("utf-8") for u in marker.unless),
        short_page=marker.short_page,
    )


@dataclass(frozen=True, slots=True)
class _Plan:
    """The markers eligible for one (status, page size, body?) situation."""

    markers: tuple[_Compiled, ...]
    headless: tuple[_Compiled, ...]  # the same without body/regex/title markers
    #: Markers that fire on the status alone (then there is no fast "clean" answer).
    has_status: bool
    #: The literals this plan's markers need from the body scan.
    literals: Subset
    #: Every title pattern of the plan's title markers (a quick "no title marker" check).
    title_patterns: tuple[bytes, ...]


def _in_script(low: bytes, pos: int) -> bool:
    """Whether offset ``pos`` of a lowercase view lies inside a ``<script>`` element."""
    return low.rfind(b"<script", 0, pos) > low.rfind(b"</script", 0, pos)


def _outside_scripts(low: bytes, literal: bytes) -> bool:
    """Whether ``literal`` occurs in ``low`` at least once outside ``<script>`` elements."""
    pos = low.find(literal)
    hits = 0
    while pos >= 0 and hits < 64:
        if not _in_script(low, pos):
            return True
        hits += 1
        pos = low.find(literal, pos + 1)
    return False


def _conditions_hold(c: _Compiled, low: bytes | None, ext: bytes) -> bool:
    """A marker's ``requires`` literals are in the body, none of its ``unless`` literals is, and
    a ``short_page`` marker's page is interstitial-shaped."""
    if c.requires and (low is None or not all(r in low or r in ext for r in c.requires)):
        return False
    if c.unless and low is not None and any(u in low or u in ext for u in c.unless):
        return False
    return not c.short_page or (low is not None and _Shape.of(low, ext).interstitial)


#: Inputs a person types into (a login or contact form), as opposed to a challenge's hidden fields.
_PERSON_FIELD = re.compile(
    rb"<textarea|<input(?![^>]*type=[\"']?(?:hidden|submit|button|image|checkbox)\b)[^>]*>", re.S
)


def _person_fields(view: bytes) -> bool:
    return _PERSON_FIELD.search(view) is not None


def _links_at_least(view: bytes, n: int) -> bool:
    """Whether ``view`` has at least ``n`` links (stops counting there)."""
    pos = view.find(b"<a ")
    while pos >= 0:
        n -= 1
        if n <= 0:
            return True
        pos = view.find(b"<a ", pos + 3)
    return False


@dataclass(frozen=True, slots=True)
class _Shape:
    """What a page looks like: its visible text (when short), and whether it is branded
    (little text for a long page), an interstitial (less text, few links) or empty (no text
    to speak of, a few scripts)."""

    view: bytes
    text: bytes
    branded: bool
    interstitial: bool
    empty: bool

    @classmethod
    def of(cls, low: bytes, ext: bytes) -> _Shape:
        view = low + ext if ext else low
        if _links_at_least(view, INTERSTITIAL_MAX_LINKS):
            return cls(view, b"", False, False, False)
        text = visible_text(view, BRANDED_MAX_TEXT)
        if text is None:
            return cls(view, b"", False, False, False)
        interstitial = len(text) < INTERSTITIAL_MAX_TEXT
        empty = interstitial and len(text) < EMPTY_PAGE_MAX_TEXT and not _links_at_least(view, 3)
        empty = empty and view.count(b"<script") <= 6
        return cls(view, text, True, interstitial, empty)


# ------------------------------------------------------------------ parked domains


@dataclass(frozen=True, slots=True)
class _ParkingCues:
    """The parking cues of :mod:`~scrapy_domainstate.detect.markers`, compiled: title rules (a key
    literal and a regex), markup literals by service, phrases of the visible text."""

    titles: tuple[tuple[str, bytes, re.Pattern[bytes]], ...]
    markup: tuple[tuple[str, bytes], ...]
    phrases: tuple[bytes, ...]
    literals: frozenset[bytes]

    @classmethod
    def build(cls) -> _ParkingCues:
        titles = tuple((svc, key.encode(), re.compile(rx.encode())) for svc, key, rx in PARKING_TITLES)
        markup = tuple((svc, lit.encode("utf-8")) for svc, lits in PARKING_MARKUP.items() for lit in lits)
        phrases = tuple(p.encode("utf-8") for p in PARKING_PHRASES)
        literals = frozenset({key for _, key, _ in titles} | {lit for _, lit in markup} | set(phrases))
        return cls(titles, markup, phrases, literals)

    def may_fire(self, low: bytes, size: int) -> bool:
        """Whether any rule could fire on ``low`` (a page of ``size`` bytes): a title rule's key
        is in the title, or the page is small enough to be a lander."""
        if size <= LANDER_MAX_BYTES:
            return True
        title = title_of(low)
        return bool(title) and any(key in title for _, key, _ in self.titles)

    def service(self, low: bytes, hits: set[bytes], size: int) -> str | None:
        """The service ``low`` (a lowercased home page of ``size`` bytes holding ``hits``) is
        parked with, or ``None``.

        A parking title counts at any length; markup and phrases only on a lander-shaped page
        (at most :data:`LANDER_MAX_BYTES`, less visible text than :data:`LANDER_MAX_TEXT`),
        markup only where it is not part of the visible text (an article quoting it)."""
        vendor = next((svc for svc, lit in self.markup if lit in hits), None)
        title = title_of(low) if any(key in hits for _, key, _ in self.titles) else b""
        for svc, key, regex in self.titles:
            match = regex.search(title) if key in hits else None
            if match is not None:
                named = match.groupdict().get("svc")
                return (named.decode("ascii", "replace") if named else None) or vendor or svc
        text = visible_text(low, LANDER_MAX_TEXT) if size <= LANDER_MAX_BYTES else None
        if text is None:
            return None
        for svc, lit in self.markup:
            if lit in hits and lit not in text:
                return svc
        if any(p in hits and p in text for p in self.phrases):
            return vendor or "generic"
        return None


# ------------------------------------------------------------------ failures


@cache
def _failure_types() -> dict[str, tuple[type[BaseException], ...]]:
    from scrapy import exceptions as sx
    from twisted.internet import defer
    from twisted.internet import error as tx
    from twisted.names import error as nx
    from twisted.web import _newclient as nc

    tls: tuple[type[BaseException], ...] = (ssl.SSLError, ssl.CertificateError)
    try:
        from OpenSSL import SSL

        tls += (SSL.Error,)
    except ImportError:  # pragma: no cover - pyOpenSSL comes with Scrapy
        pass

    def scrapy_own(*names: str) -> tuple[type[BaseException], ...]:
        """Scrapy's own download errors of these names (2.19 added most; older ones raise Twisted's)."""
        return tuple(getattr(sx, name) for name in names if hasattr(sx, name))

    return {
        "tls": tls,
        "dns": (
            *scrapy_own("CannotResolveHostError"),
            tx.DNSLookupError,
            socket.gaierror,
            nx.DNSNameError,
            nx.DNSServerError,
        ),
        "dns_temporary": (nx.DNSServerError, nx.DNSQueryTimeoutError),
        "refused": (*scrapy_own("DownloadConnectionRefusedError"), tx.ConnectionRefusedError, ConnectionRefusedError),
        "timeout": (
            *scrapy_own("DownloadTimeoutError"),
            tx.TimeoutError,
            tx.TCPTimedOutError,
            TimeoutError,
            defer.TimeoutError,
        ),
        "unreachable": (tx.NoRouteError,),
        "cancelled": (*scrapy_own("DownloadCancelledError"), defer.CancelledError, tx.ConnectingCancelledError),
        "wrapper": (*scrapy_own("DownloadFailedError"), nc._WrapperException),
        "never_received": (nc.ResponseNeverReceived,),
        "response_failed": (nc.ResponseFailed,),
    }


def _causes(exc: BaseException, limit: int = 32) -> list[BaseException]:
    """``exc`` and what it wraps: ``__cause__``/``__context__``, Twisted ``reasons``
    (Failures), aiohttp's ``os_error``/``certificate_error``; breadth first, bounded."""
    seen: set[int] = set()
    out: list[BaseException] = []
    queue: list[Any] = [exc]
    while queue and len(out) < limit:
        item = _unwrap_failure(queue.pop(0))
        if not isinstance(item, BaseException) or id(item) in seen:
            continue
        seen.add(id(item))
        out.append(item)
        queue.extend(x for x in (item.__cause__, item.__context__) if x is not None)
        reasons = getattr(item, "reasons", None)
        if isinstance(reasons, (list, tuple)):
            queue.extend(reasons)
        for attr in ("os_error", "certificate_error"):
            inner = getattr(item, attr, None)
            if isinstance(inner, BaseException):
                queue.append(inner)
    return out


def _unwrap_failure(item: Any) -> Any:
    """The exception inside a Twisted ``Failure`` (itself a ``BaseException`` since Twisted 24)."""
    value = getattr(item, "value", None)
    if isinstance(value, BaseException) and type(item).__name__ == "Failure":
        return value
    return item


def _messages(nodes: Iterable[BaseException]) -> str:
    parts = []
    for node in nodes:
        try:
            parts.append(str(node))
        except Exception:
            continue
    return " ".join(parts).lower()


_TLS_VERIFY_CODES = {
    9: "tls:expired",
    10: "tls:expired",
    18: "tls:self-signed",
    19: "tls:self-signed",
    62: "tls:hostname",
}


def _tls_verdict(nodes: list[BaseException], types: dict[str, tuple[type[BaseException], ...]]) -> Verdict:
    """A TLS failure: a network error when the stream broke mid-response, else dead."""
    mid_stream = any(
        isinstance(n, types["response_failed"]) and not isinstance(n, types["never_received"]) for n in nodes
    ) or _named(nodes, "ReadError", "PayloadError")
    if mid_stream:
        return Verdict(Outcome.NETWORK_ERROR, None, "tls:stream", browser_fixable=True)
    return Verdict(Outcome.DEAD, None, _tls_detail(nodes))


def _dns_verdict(nodes: list[BaseException], types: dict[str, tuple[type[BaseException], ...]]) -> Verdict:
    """A DNS failure: temporary (a network error) or the name does not resolve (dead)."""
    text = _messages(nodes)
    temporary = (
        any(isinstance(n, types["dns_temporary"]) for n in nodes)
        or any(isinstance(n, socket.gaierror) and n.errno == socket.EAI_AGAIN for n in nodes)
        or any(word in text for word in ("temporary", "try again", "servfail", "timeout", "timed out"))
    )
    if temporary:
        return Verdict(Outcome.NETWORK_ERROR, None, "dns-temporary")
    return Verdict(Outcome.DEAD, None, "dns")


def _tls_detail(nodes: list[BaseException]) -> str:
    for node in nodes:
        code = getattr(node, "verify_code", None)
        if isinstance(code, int) and code in _TLS_VERIFY_CODES:
            return _TLS_VERIFY_CODES[code]
    text = _messages(nodes)
    if "certificate has expired" in text or "certificate is not yet valid" in text:
        return "tls:expired"
    if "self signed" in text or "self-signed" in text:
        return "tls:self-signed"
    if "hostname mismatch" in text or "doesn't match" in text or "does not match" in text:
        return "tls:hostname"
    return "tls:handshake"


def _class_name(exc: BaseException) -> str:
    return type(exc).__name__[:64] or "Exception"


def _named(nodes: Iterable[BaseException], *needles: str) -> bool:
    return any(needle in type(node).__name__ for node in nodes for needle in needles)


# ------------------------------------------------------------------ certificates


def _to_x509(cert: Any) -> Any:
    from cryptography import x509

    if isinstance(cert, x509.Certificate):
        return cert
    original = getattr(cert, "original", None)  # twisted.internet.ssl.Certificate
    if original is not None and hasattr(original, "to_cryptography"):
        return original.to_cryptography()
    if hasattr(cert, "to_cryptography"):  # OpenSSL.crypto.X509
        return cert.to_cryptography()
    if isinstance(cert, (bytes, bytearray, memoryview)):  # DER from the httpx/aiohttp handlers
        data = bytes(cert)
        if data.lstrip().startswith(b"-----BEGIN"):
            return x509.load_pem_x509_certificate(data)
        return x509.load_der_x509_certificate(data)
    return None


def _cert_times(cert: Any) -> tuple[float, float]:
    try:
        return cert.not_valid_before_utc.timestamp(), cert.not_valid_after_utc.timestamp()
    except AttributeError:  # cryptography < 42
        from datetime import timezone

        return (
            cert.not_valid_before.replace(tzinfo=timezone.utc).timestamp(),
            cert.not_valid_after.replace(tzinfo=timezone.utc).timestamp(),
        )


def _self_signed(cert: Any) -> bool:
    if cert.issuer != cert.subject:
        return False
    verify = getattr(cert, "verify_directly_issued_by", None)
    if verify is None:
        return True
    try:
        verify(cert)
    except (ValueError, TypeError) as exc:
        # ValueError/InvalidSignature: the name matches but its own key did not sign it
        # (a CA reusing its name); TypeError: a key type that cannot be checked here.
        return isinstance(exc, TypeError)
    except Exception:
        return False
    return True


def _ascii_host(host: str) -> str:
    host = host.strip().rstrip(".").lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if host.isascii():
        return host
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return host


def _dns_name_matches(pattern: str, host: str) -> bool:
    pattern = pattern.strip().rstrip(".").lower()
    if not pattern:
        return False
    if pattern == host:
        return True
    if pattern.startswith("*.") and pattern.count(".") >= 2:
        suffix = pattern[1:]
        label = host[: -len(suffix)]
        return host.endswith(suffix) and bool(label) and "." not in label
    return False


def _host_matches(cert: Any, hostname: str) -> bool:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    host = _ascii_host(hostname)
    try:
        ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
    except ValueError:
        ip = None
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        san = None
    if ip is not None:
        if san is not None and ip in san.get_values_for_type(x509.IPAddress):
            return True
        names = san.get_values_for_type(x509.DNSName) if san is not None else []
        return host in (n.lower() for n in names)
    if san is not None:
        names = san.get_values_for_type(x509.DNSName)
        if names:
            return any(_dns_name_matches(name, host) for name in names)
    common_names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return any(_dns_name_matches(str(cn.value), host) for cn in common_names)


# ------------------------------------------------------------------ the classifier


class Classifier:
    """Classify responses, failures and certificates; markers compiled once per config.

    Thread-safe after construction (the only mutable state is a memo of scan plans).
    """

    def __init__(self, config: Config | None = None, engine: str = "auto") -> None:
        self.config = config if config is not None else Config()
        self.scan_bytes = int(self.config.body_scan_bytes)
        markers = merge_markers(self.config.challenge_markers)
        ordered = [(v, m) for v, ms in markers.items() for m in ms if m.hard]
        ordered += [(v, m) for v, ms in markers.items() for m in ms if not m.hard]
        self._markers = tuple(_compile(v, m) for v, m in ordered)
        statuses: set[int] = set()
        for c in self._markers:
            if c.allowed is not None:
                statuses.update(c.allowed)
        self._statuses = frozenset(statuses)
        self._header_names = frozenset(
            {"content-type", *PARKING_HEADERS} | {n for c in self._markers for n in c.header_names}
        )
        self._header_prefixes = tuple(sorted({p for c in self._markers for p in c.header_prefixes}))
        # The same as bytes, to pick the headers out of Scrapy ``Headers`` before decoding.
        self._header_names_b = frozenset(n.encode("latin-1") for n in self._header_names)
        self._header_prefixes_b = tuple(p.encode("latin-1") for p in self._header_prefixes)
        #: stored ``Headers`` name -> whether it is one of those (a memo: thread-safe enough,
        #: a racing writer stores the same answer).
        self._wanted_keys: dict[bytes, bool] = {}
        # content-type is read for binary/HTML checks; unless a marker looks at it, its
        # presence alone says "no marker header".
        self._clean_content_type = not any(
            "content-type" in c.header_names or "content-type".startswith(c.header_prefixes)
            for c in self._markers
            if c.kind == "header"
        )
        self._plans: dict[tuple[int, bool, bool], _Plan] = {}
        # Structural cues (markers.VERIFY_PHRASES, CAPTCHA_WIDGETS, CHALLENGE_SCRIPTS).
        self._phrases = tuple(p.lower().encode("utf-8") for p in VERIFY_PHRASES)
        #: The longest word of each phrase: a phrase is in the title or the visible text only
        #: if that word is in the view.
        self._phrase_words = tuple(sorted({max(p.split(b" "), key=len) for p in self._phrases}))
        self._phrase_end = re.compile(b"(?:" + b"|".join(re.escape(w) for w in self._phrase_words) + rb")\Z")
        self._title_phrase = re.compile(b"|".join(re.escape(p) for p in self._phrases))
        self._title_regexes: dict[tuple[int, ...], re.Pattern[bytes]] = {}
        rank = {v: i for i, v in enumerate(HINT_VENDOR_ORDER)}
        self._widgets = self._cues(CAPTCHA_WIDGETS, rank)
        self._scripts = self._cues(CHALLENGE_SCRIPTS, rank)
        self._rank = rank
        self._cue_literals = frozenset(
            lit for table in (self._widgets, self._scripts) for _, _, lits in table for lit in lits
        )
        literals = set(self._cue_literals)
        for c in self._markers:
            literals |= c.scanned()
        self._parking = _ParkingCues.build()
        literals |= self._parking.literals
        #: One scan over the body reports every literal any marker or cue needs.
        self.scanner = LiteralScanner(literals, engine)
        self._cue_subset = self.scanner.subset(self._cue_literals)
        self._parking_subset = self.scanner.subset(self._parking.literals)
        # With hyperscan, the usual page (no marker, no cue) is told from one case-insensitive
        # pass over its raw bytes (see _fast_facts); built at first use.
        self._fast: dict[bool, PatternScanner] | None = {} if self.scanner.engine == "hyperscan" else None
        self._links: PatternScanner | None = None
        #: The user's own rules (``DOMAINSTATE_WALL_RULES``, ``DOMAINSTATE_WALL_PREDICATE``), or
        #: ``None``: consulted by the public methods around the built-in rules (:meth:`_ruled`).
        self.rules: UserRules | None = user_rules(self.config)

        #: The pass carries the contact scan's patterns only where a contact scan follows it:
        #: the default outcome source (``contacts``); ``items`` and a callable never read them.
        self.contact_places = self.config.outcome == "contacts"

    def prepare(self) -> None:
        """Build (or fetch from the process's cache) the scan databases now, at start-up, rather
        than in the first responses' calls."""
        if self._fast is not None:
            page = b"<html><head><title>t</title></head><body><a href=/>a</a></body></html>"
            for small in (True, False):
                self._fast_scanner(small).scan(page)  # hyperscan's scratch space, allocated at the first scan
            self._many_links(page)

    @staticmethod
    def _cues(
        table: Mapping[str, tuple[str, tuple[str, ...]]], rank: Mapping[str, int]
    ) -> tuple[tuple[str, str, frozenset[bytes]], ...]:
        rows = [
            (vendor, name, frozenset(p.lower().encode("utf-8") for p in pats)) for vendor, (name, pats) in table.items()
        ]
        return tuple(sorted(rows, key=lambda r: rank.get(r[0], len(rank))))

    @property
    def engine(self) -> str:
        """The literal-scan engine in use: ``'hyperscan'`` or ``'pure'``."""
        return self.scanner.engine

    @property
    def markers(self) -> tuple[tuple[str, Marker], ...]:
        """``(vendor, marker)`` pairs in evaluation order (hard blocks first)."""
        return tuple((c.vendor, c.marker) for c in self._markers)

    # ---------------------------------------------------------- anti-bot

    def _plan(self, status: int, small: bool, body: bool) -> _Plan:
        key = (status if status in self._statuses else -1, small, body)
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        eligible = []
        for c in self._markers:
            if c.allowed is not None and status not in c.allowed:
                continue
            if c.kind in ("body", "regex", "title") and not body:
                continue
            if c.marker.interstitial and not small and status not in BLOCK_STATUSES:
                continue
            eligible.append(c)
        wanted: set[bytes] = set()
        for c in eligible:
            wanted |= c.scanned()
        plan = _Plan(
            markers=tuple(eligible),
            headless=tuple(c for c in eligible if c.kind not in ("body", "regex", "title")),
            has_status=any(c.kind == "status" for c in eligible),
            literals=self.scanner.subset(wanted),
            title_patterns=tuple(sorted({p for c in eligible for p in c.title_patterns})),
        )
        if len(self._plans) < 4096:
            self._plans[key] = plan
        return plan

    def _extend(self, low: bytes | None, size: int, body: Any) -> bytes:
        """The extended view past the scanned prefix, ``b''`` when not needed.

        A page longer than the prefix whose prefix shows no content (few links, little
        visible text: a head full of inline styles or scripts, as on site-branded challenge
        pages) is read further, scripts and styles skipped, up to :data:`EXTENDED_SCAN_CAP`
        bytes of body and twice ``body_scan_bytes`` bytes of markup.
        """
        if not low or size <= len(low) or len(low) < self.scan_bytes or not isinstance(body, (bytes, bytearray)):
            return b""
        if _links_at_least(low, INTERSTITIAL_MAX_LINKS) or visible_text(low, INTERSTITIAL_MAX_TEXT) is None:
            return b""
        raw = bytes(body) if isinstance(body, bytearray) else body
        return extended_view(raw, len(low), low, 2 * self.scan_bytes, EXTENDED_SCAN_CAP)

    def _antibot(
        self,
        status: int,
        hdrs: Mapping[str, str],
        low: bytes | None,
        size: int,
        body: Any = None,
        known: set[bytes] | None = None,
    ) -> Verdict | None:
        """``known``: every scanner literal in ``low`` (a pass over the whole body found them)."""
        ext = self._extend(low, size, body)
        small = size <= SMALL_PAGE
        shape: _Shape | None = None
        if not small and low and status not in BLOCK_STATUSES and not _links_at_least(low, INTERSTITIAL_MAX_LINKS):
            # A long page counts as small (interstitial markers apply) when it shows little.
            shape = _Shape.of(low, ext)
            small = shape.branded
        plan = self._plan(status, small, bool(low))
        if known is not None:
            found = known & plan.literals.literals
        else:
            found = self.scanner.scan(low, plan.literals) if low else set()
        if ext:
            found |= self.scanner.scan(ext, plan.literals)
        title: bytes | None = None
        markers: tuple[_Compiled, ...] = plan.markers if found else plan.headless
        if (
            not found
            and not plan.has_status
            and (len(hdrs) == 0 or (self._clean_content_type and hdrs.keys() == _CT_ONLY))
        ):
            # The usual page: no literal of any marker, no status marker, no marker header
            # (``hdrs`` holds only marker headers and content-type): only a title marker can
            # fire, and only when one of its patterns is in the title.
            markers = ()
            if low and plan.title_patterns:
                title = self._title(low, ext)
                if title and any(p in title for p in plan.title_patterns):
                    markers = plan.markers
            if not markers and (not low or (size > SMALL_PAGE and not ext and not self._asks_to_verify(low, shape))):
                return None  # and too long to be an interstitial, unless it shows little and asks
        elif low and plan.title_patterns:
            markers = plan.markers
        if markers:
            verdict = self._first_marker(markers, status, hdrs, low, ext, found, title)
            if verdict is not None:
                return verdict
        if not low or (size > SMALL_PAGE and not ext and shape is None):
            return None  # a long page with content in its prefix is no interstitial
        return self._structural(status, low, ext, shape, known)

    def _first_marker(
        self,
        markers: tuple[_Compiled, ...],
        status: int,
        hdrs: Mapping[str, str],
        low: bytes | None,
        ext: bytes,
        found: set[bytes],
        title: bytes | None,
    ) -> Verdict | None:
        """The verdict of the first of ``markers`` that fires, or ``None``.

        A ``fallback`` marker (it proves only the CDN in front of the site) that fires first
        gives way to a later marker of another vendor that also fires: the most specific
        evidence names the vendor (generic wording and statuses name none, so they do not).
        """
        fallback: _Compiled | None = None
        for c in markers:
            if fallback is not None and (c.vendor in (fallback.vendor, "generic") or c.marker.fallback):
                continue
            if c.kind == "title" and title is None:
                title = self._title(low, ext)
            fired, detail = self._fires(c, hdrs, low, ext, found, title)
            if not fired:
                continue
            if c.marker.fallback and fallback is None:
                fallback = c
                continue
            return Verdict(Outcome.ANTIBOT, status, c.evidence(detail), browser_fixable=not c.marker.hard)
        if fallback is not None:
            return Verdict(Outcome.ANTIBOT, status, fallback.evidence(), browser_fixable=not fallback.marker.hard)
        return None

    def _fires(
        self,
        c: _Compiled,
        hdrs: Mapping[str, str],
        low: bytes | None,
        ext: bytes,
        found: set[bytes],
        title: bytes | None,
    ) -> tuple[bool, str | None]:
        """Whether marker ``c`` fires on this response, and the detail its evidence names."""
        kind = c.kind
        detail: str | None = None
        if kind == "header":
            if not self._header_hit(c, hdrs):
                return False, None
        elif kind == "title":
            if not title or not any(p in title for p in c.title_patterns):
                return False, None
        elif kind == "body":
            hits = c.literals & found
            if not hits or (
                c.outside_scripts
                and low is not None
                and not any((ext and lit in ext) or _outside_scripts(low, lit) for lit in hits)
            ):
                return False, None
        elif kind == "regex":
            match = self._regex_hit(c, low, ext, found)
            if match is None:
                return False, None
            detail = (match.group(1) or b"").decode("ascii", "replace") if match.groups() else None
        if (c.requires or c.unless or c.short_page) and not _conditions_hold(c, low, ext):
            return False, None
        return True, detail

    @staticmethod
    def _title(low: bytes | None, ext: bytes) -> bytes:
        title = title_of(low) if low else b""
        if not title and ext and (not low or b"<title" not in low):
            title = title_of(ext)
        return title

    @staticmethod
    def _regex_hit(c: _Compiled, low: bytes | None, ext: bytes, found: set[bytes]) -> re.Match[bytes] | None:
        if c.anchor not in found or c.regex is None or low is None:
            return None
        for match in c.regex.finditer(low):
            if not c.outside_scripts or not _in_script(low, match.start()):
                return match
        return c.regex.search(ext) if ext else None

    def _structural(
        self, status: int, low: bytes, ext: bytes, shape: _Shape | None, known: set[bytes] | None = None
    ) -> Verdict | None:
        """An interstitial: little visible text, few links, and a cue (README, "Outcomes").

        A title or text that asks to verify, wait or prove one is human; a captcha widget on
        a page without a field a person fills in; or a vendor's challenge script on a page that
        is otherwise empty. Always a challenge (soft): structure alone never proves a ban.
        """
        shape = shape or _Shape.of(low, ext)
        if not shape.interstitial:
            return self._branded_verdict(status, low, ext, shape)
        if known is not None and not ext:
            cues = known & self._cue_subset.literals
        else:
            cues = self.scanner.scan(shape.view, self._cue_subset)
        vendor = self._vendor(cues)
        title = self._title(low, ext)
        text = shape.text
        view = shape.view
        phrases = [p for p in self._phrases if p in title or p in text]
        fields: bool | None = None
        if phrases:
            if any(p in title for p in phrases):
                return Verdict(Outcome.ANTIBOT, status, f"challenge:{vendor or 'generic'}:interstitial", True)
            # In the text only: a shorter page, and not a form a person fills in ("Are you a
            # robot?" next to a login form's password field is the form's own captcha).
            if len(text) < PHRASE_MAX_TEXT and any(p in text for p in phrases):
                fields = _person_fields(view)
                if not fields:
                    return Verdict(Outcome.ANTIBOT, status, f"challenge:{vendor or 'generic'}:interstitial", True)
        for widget_vendor, name, lits in self._widgets:
            if not cues.isdisjoint(lits):
                if fields is None:
                    fields = _person_fields(view)
                if not fields:
                    return Verdict(Outcome.ANTIBOT, status, f"challenge:{vendor or widget_vendor}:{name}", True)
                break
        if shape.empty and not title:
            return self._script_verdict(status, cues, vendor)
        return None

    def _asks_to_verify(self, low: bytes, shape: _Shape | None) -> bool:
        """A long page that shows little (few links, little text) and whose title asks to verify."""
        return shape is not None and shape.branded and self._title_phrase.search(title_of(low)) is not None

    def _branded_verdict(self, status: int, low: bytes, ext: bytes, shape: _Shape) -> Verdict | None:
        """A page longer than an interstitial (a branded page explains itself in several
        languages) that still shows few links and little text: a title that asks to verify is
        enough. No byte size decides it."""
        if not shape.branded or self._title_phrase.search(self._title(low, ext)) is None:
            return None
        vendor = self._vendor(self.scanner.scan(shape.view, self._cue_subset))
        return Verdict(Outcome.ANTIBOT, status, f"challenge:{vendor or 'generic'}:interstitial", True)

    def _script_verdict(self, status: int, cues: set[bytes], vendor: str | None) -> Verdict | None:
        """A vendor's challenge script on an otherwise empty page, or ``None``."""
        for script_vendor, name, lits in self._scripts:
            if script_vendor not in NAMING_ONLY and not cues.isdisjoint(lits):
                return Verdict(Outcome.ANTIBOT, status, f"challenge:{vendor or script_vendor}:{name}", True)
        return None

    def _vendor(self, cues: set[bytes]) -> str | None:
        """The vendor the cues point to first (bot managers before captcha providers)."""
        best: tuple[int, str] | None = None
        for table in (self._scripts, self._widgets):
            for vendor, _, lits in table:
                if not cues.isdisjoint(lits):
                    key = (self._rank.get(vendor, len(self._rank)), vendor)
                    if best is None or key < best:
                        best = key
        return best[1] if best else None

    @staticmethod
    def _header_hit(c: _Compiled, hdrs: Mapping[str, str]) -> bool:
        values: list[str] = [hdrs[n] for n in c.header_names if n in hdrs]
        if c.header_prefixes:
            values += [v for k, v in hdrs.items() if k.startswith(c.header_prefixes)]
        if not values:
            return False
        for value in values:
            tokens = _tokens(value)
            if c.exclude and not tokens.isdisjoint(c.exclude):
                continue
            if not c.values or not tokens.isdisjoint(c.values):
                return True
        return False

    def _headers(self, headers: Any) -> dict[str, str]:
        if headers and isinstance(headers, dict):
            # Scrapy ``Headers``: keep only the bytes names that matter before decoding
            # anything (most responses carry none of the marker headers).
            wanted = self._wanted_keys
            picked = {}
            for key, value in dict.items(headers):
                keep = wanted.get(key) if type(key) is bytes else True
                if keep is None:
                    low = key.lower()
                    keep = low in self._header_names_b or low.startswith(self._header_prefixes_b)
                    if len(wanted) < 4096:  # header names are few; stay bounded anyway
                        wanted[key] = keep
                if keep:
                    picked[key] = value
            if not picked:
                return {}
            out: dict[str, str] = {}
            for key, value in picked.items():
                # The usual shape (bytes name, one bytes value), decoded as normalize_headers does.
                if type(key) is not bytes or type(value) is not list or len(value) != 1 or type(value[0]) is not bytes:
                    return normalize_headers(picked, self._header_names, self._header_prefixes)
                name = key.decode("latin-1").lower()
                text = value[0].decode("latin-1")
                out[name] = f"{out[name]}, {text}" if name in out else text
            return out
        return normalize_headers(headers, self._header_names, self._header_prefixes)

    def _body_scan(self, body: Any) -> BodyScan:
        """``body`` as a :class:`BodyScan` of ``body_scan_bytes`` (``body`` itself when it is one
        of that limit)."""
        if type(body) is BodyScan:
            return body if body.limit == self.scan_bytes else BodyScan(body.body, self.scan_bytes)
        return BodyScan(body, self.scan_bytes)

    def _prepare(self, hdrs: Mapping[str, str], scan: BodyScan) -> tuple[bytes | None, int]:
        """The lowercased scan prefix (``None`` for binary bodies) and the body's length."""
        body = scan.body
        try:
            size = len(body) if body else 0
        except TypeError:
            size = 0
        low = scan.low
        if not low or _is_binary(hdrs.get("content-type", ""), low):
            return None, size
        return low, size

    def antibot(self, status: int, headers: Any, body: bytes | BodyScan, url: str = "") -> Verdict | None:
        """An ``antibot`` verdict, or ``None`` when nothing says challenge or block.

        Signals: status (429, LinkedIn's 999), vendor headers (``cf-mitigated``,
        ``x-amzn-waf-action``, ``x-vercel-mitigated``, DataDome's ``x-dd-b``, ...), the page
        title, and body markers in the first ``body_scan_bytes`` bytes. Hard blocks come
        first (``error_class`` ``'block:<vendor>:<detail>'``, not browser-fixable), then
        challenges (``'challenge:<vendor>:<marker>'``, browser-fixable). Binary bodies are
        never scanned. The user's rules apply (``url``, when known, for their domains).
        """
        scan = self._body_scan(body)
        if self.rules is not None:
            return self._ruled(status, headers, scan, url, lambda: self._builtin_antibot(status, headers, scan))
        return self._builtin_antibot(status, headers, scan)

    def _builtin_antibot(self, status: int, headers: Any, scan: BodyScan) -> Verdict | None:
        try:
            hdrs = self._headers(headers)
            low, size = self._prepare(hdrs, scan)
            return self._antibot(int(status), hdrs, low, size, scan.body)
        except Exception:  # a classifier never breaks a crawl
            return None

    # ---------------------------------------------------------- HEAD and GET

    def head(self, status: int, headers: Any, url: str, is_root: bool) -> Verdict:
        """Classify the answer to the HEAD probe (:meth:`_head`), the user's rules first."""
        if self.rules is None:
            return self._head(status, headers, url, is_root)
        verdict = self._ruled(
            status, headers, BodyScan(b"", self.scan_bytes), url, lambda: self._head(status, headers, url, is_root)
        )
        if verdict is None:  # an anti-bot verdict excused: what the HEAD says besides
            return self._head(status, {}, url, is_root)
        return verdict

    def _head(self, status: int, headers: Any, url: str, is_root: bool) -> Verdict:
        """Classify the answer to the HEAD probe.

        Only anti-bot headers/statuses and a 404/410 on the site root are conclusive
        (``antibot`` / ``dead``); everything else, including 405/501 "HEAD not supported",
        5xx and an off-root 404, is ``no-verdict`` and the GET decides.
        """
        try:
            status = int(status)
            hdrs = self._headers(headers)
            verdict = self._antibot(status, hdrs, None, 0)
        except Exception:
            return Verdict(Outcome.NO_VERDICT, None)
        if verdict is not None:
            return verdict
        if is_root and status in (404, 410):
            return Verdict(Outcome.DEAD, status, f"http:{status}")
        return Verdict(Outcome.NO_VERDICT, status)

    def response(self, status: int, headers: Any, body: bytes | BodyScan, url: str, is_root: bool) -> Verdict:
        """Classify a downloaded response (:meth:`builtin_response`), the user's rules first."""
        if self.rules is None:
            return self.builtin_response(status, headers, body, url, is_root)
        scan = self._body_scan(body)
        verdict = self._ruled(
            status, headers, scan, url, lambda: self.builtin_response(status, headers, scan, url, is_root)
        )
        if verdict is None:  # an anti-bot verdict excused: what the page is besides
            return self.builtin_response(status, headers, scan, url, is_root, antibot=False)
        return verdict

    # ---------------------------------------------------------- the user's rules

    def _ruled(
        self, status: int, headers: Any, scan: BodyScan, url: str, builtin: Callable[[], Verdict | None]
    ) -> Verdict | None:
        """The user's rules around ``builtin()`` (a built-in answer): the predicate and the wall
        rules first (their wall is the verdict), then ``builtin()``, whose anti-bot verdict a
        predicate's ``'clean'`` or a never-a-wall exception drops (``None``: excused)."""
        rules = self.rules
        assert rules is not None
        try:
            seen = rules.seen(url, status, normalize_headers(headers) if rules.wants_headers else {}, scan.body, scan)
            ruling = rules.first(seen)
        except Exception:  # a classifier never breaks a crawl: the built-in rules decide
            return builtin()
        if ruling is not None and ruling.wall:
            soft = ruling.grade == "soft"
            return Verdict(Outcome.ANTIBOT, int(status), ruling.evidence, browser_fixable=soft)
        verdict: Verdict | None = builtin()
        if verdict is None or verdict.outcome is not Outcome.ANTIBOT:
            return verdict
        if (ruling is not None and ruling.grade == CLEAN) or rules.excuse(seen, verdict.error_class) is not None:
            return None
        return verdict

    def builtin_response(
        self, status: int, headers: Any, body: bytes | BodyScan, url: str, is_root: bool, antibot: bool = True
    ) -> Verdict:
        """The built-in classifier's verdict on a downloaded response (plain fetch or browser),
        without the user's own rules (:meth:`response` consults them around it).

        Order: anti-bot first; then 404/410 (``dead`` on the site root, ``http-error`` with
        ``'http:404'`` elsewhere: the caller marks that URL dead); 403/503 without markers
        are browser-fixable ``http-error``; other statuses >= 400 are ``http-error``.

        A 2xx/3xx gives ``ok-empty``, which means "fetched fine; usefulness not decided
        here": the caller upgrades it to ``ok-contact`` from its outcome source (contacts,
        items or a callable). A small HTML page that is only a ``<script>`` shell (fewer than
        :data:`JS_SHELL_MIN_TEXT` visible characters) is ``ok-empty`` with ``'js-shell'`` and
        ``browser_fixable=True``: a browser would render it. A 2xx home page (``url`` is the
        site root, whatever ``is_root`` says) of at most :data:`~scrapy_domainstate.detect.markers.PARKED_MAX_BYTES` that is a parking or for-sale
        page is ``parked`` with ``'parked:<service>'`` (never useful, never sent to a browser).
        """
        scan = self._body_scan(body)
        try:
            status = int(status)
            hdrs = self._headers(headers)
            fast = self._fast is not None and antibot
            facts, found = self._try_fast(status, hdrs, scan) if fast else (None, None)
            if facts is not None:  # no marker and no cue: not an anti-bot answer
                low, size, verdict = None, len(scan.body), None
            else:
                low, size = self._prepare(hdrs, scan)
                verdict = self._antibot(status, hdrs, low, size, scan.body, found if low is not None else None)
                verdict = verdict if antibot else None  # (excused by the user's rules)
        except Exception:  # never expected; "no evidence" rather than a crash or a wrong state
            return Verdict(Outcome.NO_VERDICT, None, "classify-error")
        if verdict is not None:
            return verdict
        if 200 <= status < 300 and (low is not None or facts is not None) and size <= PARKED_MAX_BYTES:
            service = self._parked(hdrs, scan, url, low, found)
            if service is not None:
                return Verdict(Outcome.PARKED, status, f"parked:{service}")
        if status in (404, 410):
            return Verdict(Outcome.DEAD if is_root else Outcome.HTTP_ERROR, status, f"http:{status}")
        if status >= 400 or status < 100:
            return Verdict(Outcome.HTTP_ERROR, status, f"http:{status}", browser_fixable=status in (403, 503))
        if (
            200 <= status < 300
            and (low or facts is not None)
            and size < JS_SHELL_MAX_BYTES
            and "html" in (hdrs.get("content-type") or "html").lower()
            and (self._shell_fast(scan, facts) if facts is not None else self._shell(low))
        ):
            return Verdict(Outcome.OK_EMPTY, status, "js-shell", browser_fixable=True)
        verdict = _OK_EMPTY.get(status)
        if verdict is None:
            verdict = Verdict(Outcome.OK_EMPTY, status)
            if len(_OK_EMPTY) < 1024:
                _OK_EMPTY[status] = verdict
        return verdict

    def _parked(
        self, hdrs: Mapping[str, str], scan: BodyScan, url: str, low: bytes | None, found: set[bytes] | None
    ) -> str | None:
        """The parking service the home page ``url`` belongs to, or ``None`` (README, "Parked
        domains"). Pages off the site root are never called parked.

        ``found``: the scanner's literals in the view when a pass over it already ran. Only
        pages that hold a parking literal (or header) are read further: whether the URL is the
        site root, then one lowercase copy, the title, the visible text up to
        :data:`LANDER_MAX_TEXT`."""
        body = scan.body
        try:
            if "html" not in (hdrs.get("content-type") or "html").lower():
                return None
            if any(name in hdrs for name in PARKING_HEADERS):
                return "lander" if is_site_root(url) else None
            if found is not None:
                hits = found & self._parking_subset.literals
                if not hits or not is_site_root(url):
                    return None
            else:
                if not is_site_root(url):
                    return None
                low = scan.low if low is None else low
                if not self._parking.may_fire(low, len(body)):
                    return None  # (saves the pure engine's scan on most pages)
                hits = self.scanner.scan(low, self._parking_subset)
                if not hits:
                    return None
            low = scan.low if low is None else low
            return self._parking.service(low, hits, len(body))
        except Exception:  # a classifier never breaks a crawl
            return None

    @staticmethod
    def _shell(low: bytes | None) -> bool:
        """A script-only shell: a ``<script`` and (almost) no visible text."""
        return low is not None and b"<script" in low and _visible_text_below(low, JS_SHELL_MIN_TEXT)

    def _shell_fast(self, scan: BodyScan, facts: _Facts) -> bool:
        """:meth:`_shell` from the fast facts: ``_visible_text_below`` on a lowercased window
        from the first ``<body`` on, the whole view only when the window says "below"."""
        body = scan.body
        if facts.script < 0:
            return False
        start = max(facts.body, 0)
        n = min(len(body), self.scan_bytes)
        end = start + _SHELL_WINDOW
        if end < n:
            # "Not below" is final: the window's text is a prefix of the view's (its last word
            # or tag may be cut short, which never adds text).
            if not _visible_text_below(body[start:end].lower(), JS_SHELL_MIN_TEXT):
                return False
            return _visible_text_below(scan.low, JS_SHELL_MIN_TEXT)
        return _visible_text_below(body[start:n].lower(), JS_SHELL_MIN_TEXT)

    def _fast_scanner(self, small: bool) -> PatternScanner:
        scanner = self._fast[small] if self._fast is not None and small in self._fast else None
        if scanner is None:
            patterns: list[tuple[bytes, bool] | tuple[bytes, bool, bool]] = [
                (pcre_literal(lit), True) for lit in self.scanner.literals
            ]
            patterns += [(pcre_literal(probe), True, True) for probe in _FAST_PROBES]
            if self.contact_places:
                patterns += contacts.CONTACT_PATTERNS  # the contact scan of the same body reads these
            if small:  # a verification phrase can only be in the text when its longest word is
                patterns += [(pcre_literal(word), True, True) for word in self._phrase_words]
            scanner = PatternScanner(patterns)
            assert self._fast is not None
            self._fast[small] = scanner
        return scanner

    def _try_fast(
        self, status: int, hdrs: Mapping[str, str], scan: BodyScan
    ) -> tuple[_Facts | None, set[bytes] | None]:
        # Error statuses (where walls answer, and whose pages are never scanned for contacts)
        # go the full way at once: the fast pass would mostly find a marker and decline.
        body = scan.body
        if type(body) is not bytes or status >= 400:
            return None, None
        try:
            return self._fast_facts(status, hdrs, body, scan)
        except Exception:  # never expected (a pattern hyperscan refuses?): the full path, from now on
            self._fast = None
            return None, None

    def _title_hit(self, plans: tuple[_Plan, ...], title: bytes) -> bool:
        """Whether ``title`` holds a title pattern of one of ``plans`` (one regex search)."""
        key = tuple(id(plan) for plan in plans)
        regex = self._title_regexes.get(key)
        if regex is None:
            patterns = sorted({p for plan in plans for p in plan.title_patterns})
            regex = re.compile(b"|".join(re.escape(p) for p in patterns) if patterns else b"(?!)")
            if len(self._title_regexes) < 4096:
                self._title_regexes[key] = regex
        return regex.search(title) is not None

    def _many_links(self, body: bytes) -> bool:
        """``_links_at_least(low, INTERSTITIAL_MAX_LINKS)`` on the view, by a pass that stops there."""
        if self._links is None:
            self._links = PatternScanner([(b"<a ", True)], max_matches=INTERSTITIAL_MAX_LINKS - 1)
        return self._links.scan(memoryview(body)[: self.scan_bytes]) is None

    def _sort_matches(self, matches: list[tuple[int, int]], scan: BodyScan) -> tuple[set[bytes], list[int]]:
        """The literals found, the end of the first match of each probe (the last entry: of any
        phrase word; ``-1``: none); the contact places go to ``scan.places``."""
        literals = self.scanner.literals
        count = len(literals)
        found: set[bytes] = set()
        last = len(_FAST_PROBES)
        first = [-1] * (last + 1)
        places: list[tuple[int, int]] = []
        base = count + last
        words = base + (len(contacts.CONTACT_PATTERNS) if self.contact_places else 0)
        for ident, end in matches:
            if ident < count:
                found.add(literals[ident])
            elif ident < base:
                if first[ident - count] < 0:
                    first[ident - count] = end
            elif ident < words:
                places.append((ident - base, end))
            elif first[last] < 0:
                first[last] = end
        if self.contact_places:
            scan.places = places
        return found, first

    def _fast_plans(self, status: int, hdrs: Mapping[str, str], body: bytes) -> tuple[_Plan, ...] | None:
        """The plans ``_antibot`` may use for ``body`` when the fast path can answer for them."""
        size = len(body)
        if not size or _is_binary(hdrs.get("content-type", ""), body[:1024].lower()):
            return None
        longer = size > self.scan_bytes
        # A body longer than the view is read further (_extend) unless its view has 10 links.
        if longer and not self._many_links(body):
            return None
        small = size <= SMALL_PAGE
        # A long page is read with the small-page markers too when it shows little (_Shape):
        # answer only when neither set fires (not when its view has 10 links: never small).
        plans: tuple[_Plan, ...] = (self._plan(status, small, True),)
        if not small and not longer and status not in BLOCK_STATUSES:
            plans += (self._plan(status, True, True),)
        return None if any(plan.has_status for plan in plans) else plans

    def _headers_quiet(self, plans: tuple[_Plan, ...], hdrs: Mapping[str, str], body: bytes) -> bool:
        """Whether the marker headers (a CDN's on every page) leave the answer to the body: no
        header marker fires, and a long page (which then goes on to the structural check unless
        it has 10 links) has 10 links."""
        if len(hdrs) == 0 or (self._clean_content_type and hdrs.keys() == _CT_ONLY):
            return True
        for plan in plans:
            if any(c.kind == "header" and self._header_hit(c, hdrs) for c in plan.headless):
                return False
        return len(plans) == 1 or self._many_links(body)

    def _fast_facts(
        self, status: int, hdrs: Mapping[str, str], body: bytes, scan: BodyScan
    ) -> tuple[_Facts | None, set[bytes] | None]:
        """The facts the response checks need, when one pass over the raw bytes shows that no
        anti-bot rule can fire (``_antibot`` would answer ``None``); else ``None`` (the full path
        answers), with the literals the pass found in the whole body, if it ran (the full path
        then reads them rather than scanning again). Bodies up to ``body_scan_bytes`` only."""
        plans = self._fast_plans(status, hdrs, body)
        if plans is None:
            return None, None
        small = len(body) <= SMALL_PAGE
        n = min(len(body), self.scan_bytes)
        matches = self._fast_scanner(small).scan(body if n == len(body) else memoryview(body)[:n])
        if matches is None:
            return None, None
        found, first = self._sort_matches(matches, scan)
        last = len(_FAST_PROBES)
        # Hyperscan's single-match mode may miss a match that ends the buffer: check there.
        tail = body[max(0, n - _PROBE_TAIL) : n].lower()
        for k, probe in enumerate(_FAST_PROBES):
            if first[k] < 0 and tail.endswith(probe):
                first[k] = n
        if found and any(not found.isdisjoint(plan.literals.literals) for plan in plans):
            return None, found
        title_end = first[0]
        title = title_of(body[title_end - 6 : min(n, title_end + 1300)].lower()) if title_end >= 0 else b""
        if title and self._title_hit(plans, title):
            return None, found
        # _structural on a long page that shows little: a verification phrase in its title.
        if not small and title and self._title_phrase.search(title) is not None and not self._many_links(body):
            return None, found
        # _structural (small pages): no cue literal, no phrase that could be in the title or text.
        if small and (
            first[last] >= 0 or not found.isdisjoint(self._cue_literals) or self._phrase_end.search(tail) is not None
        ):
            return None, found
        if not self._headers_quiet(plans, hdrs, body):
            return None, found
        script, start = first[1], first[2]
        return _Facts(script - 7 if script >= 0 else -1, start - 5 if start >= 0 else -1), found

    # ---------------------------------------------------------- failures

    def failure(self, exc: BaseException) -> Verdict:
        """Classify a download exception (or a Twisted ``Failure`` wrapping one).

        ``dead``: DNS "no such name" (``'dns'``), connection refused (``'refused'``), TLS
        handshake or certificate failures (``'tls:handshake'``, ``'tls:expired'``, ...).
        ``network-error``: temporary DNS failures (``'dns-temporary'``), timeouts, proxy
        failures, lost connections and anything unknown (the exception class name).
        """
        try:
            return self._failure(exc)
        except Exception:
            return Verdict(Outcome.NETWORK_ERROR, None, _class_name(exc) if isinstance(exc, BaseException) else None)

    def _failure(self, exc: Any) -> Verdict:
        exc = _unwrap_failure(exc)
        if not isinstance(exc, BaseException):
            return Verdict(Outcome.NETWORK_ERROR, None, "unknown", browser_fixable=True)
        types = _failure_types()
        nodes = _causes(exc)

        def any_of(key: str) -> bool:
            return any(isinstance(n, types[key]) for n in nodes)

        def os_errno(*codes: int) -> bool:
            return any(isinstance(n, OSError) and n.errno in codes for n in nodes)

        response = getattr(exc, "response", None)
        if type(exc).__name__ == "HttpError" and isinstance(getattr(response, "status", None), int):
            status = response.status  # type: ignore[union-attr]
            return Verdict(Outcome.HTTP_ERROR, status, f"http:{status}", browser_fixable=status in (403, 503))
        if _named(nodes, "Proxy", "TunnelError"):
            return Verdict(Outcome.NETWORK_ERROR, None, "proxy")
        if any(isinstance(n, types["tls"]) for n in nodes) or _named(nodes, "SSL", "Certificate"):
            return _tls_verdict(nodes, types)
        if any_of("dns") or _named(nodes, "DNS", "Resolve"):
            return _dns_verdict(nodes, types)
        if any_of("timeout") or os_errno(errno.ETIMEDOUT):
            return Verdict(Outcome.NETWORK_ERROR, None, "timeout", browser_fixable=True)
        if any_of("unreachable") or os_errno(errno.ENETUNREACH, errno.EHOSTUNREACH):
            return Verdict(Outcome.NETWORK_ERROR, None, "unreachable")
        if any_of("refused") or os_errno(errno.ECONNREFUSED):
            return Verdict(Outcome.DEAD, None, "refused")
        if any_of("cancelled"):
            return Verdict(Outcome.NETWORK_ERROR, None, "cancelled")
        # The most specific cause under the wrappers names it: DownloadFailedError(
        # ResponseFailed([ConnectionLost])) -> 'ConnectionLost'.
        wrapper = types["wrapper"]
        named = next((n for n in nodes if not isinstance(n, wrapper)), exc)
        return Verdict(Outcome.NETWORK_ERROR, None, _class_name(named), browser_fixable=True)

    # ---------------------------------------------------------- certificates

    def certificate(self, cert: Any, hostname: str, now: float) -> Verdict | None:
        """A ``dead`` verdict for an invalid server certificate, else ``None``.

        ``cert`` is ``response.certificate``: a ``twisted.internet.ssl.Certificate`` (the
        Twisted handler), DER bytes (the httpx/aiohttp handlers), a pyOpenSSL ``X509`` or a
        ``cryptography`` certificate. Checks, in order: validity period (``'tls:expired'``,
        also for not-yet-valid beyond :data:`CERT_NOT_BEFORE_GRACE`), self-signed
        (``'tls:self-signed'``), and the host name against the SAN DNS names (one-label
        wildcards), the CN when there is no SAN DNS name, and SAN IP addresses for IP hosts
        (``'tls:hostname'``). ``None`` also for ``None`` or anything unreadable.
        """
        if cert is None:
            return None
        try:
            x509 = _to_x509(cert)
            if x509 is None:
                return None
            not_before, not_after = _cert_times(x509)
            if now > not_after or now + CERT_NOT_BEFORE_GRACE < not_before:
                return Verdict(Outcome.DEAD, None, "tls:expired")
            if _self_signed(x509):
                return Verdict(Outcome.DEAD, None, "tls:self-signed")
            if hostname and not _host_matches(x509, hostname):
                return Verdict(Outcome.DEAD, None, "tls:hostname")
        except Exception:
            return None
        return None
