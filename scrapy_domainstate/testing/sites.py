"""A multi-host test web server on the running Twisted reactor.

One ``twisted.web`` site serves every test host, chosen by the ``Host`` header, on one
plain-HTTP port and four HTTPS ports (one per kind of certificate, see :data:`TLS_KINDS`),
all bound to ``127.0.0.1`` only. Chromium, a separate process, reaches it like Scrapy does.

Which behaviour a host gets (:meth:`SiteServer.kind_for`):

1. ``server.sites[host]`` (the table; :func:`default_sites` maps ``<kind>.test`` to each kind);
2. the same for its parent names (``www.friendly.test`` -> ``friendly.test``);
3. the first label names a kind: ``friendly-7.test`` and ``cf-soft-b.test`` are ``friendly``
   and ``cf-soft`` hosts (longest kind wins), so tests get any number of fresh domains;
4. otherwise 404 with an ``x-test-unknown-host: 1`` header.

Every kind answers ``/``, ``/page1``, ``/page2``, ``/contact`` (:data:`PAGES`; set
:attr:`SiteServer.pages` to serve more, e.g. :data:`EXTRA_PAGES`) and 404 for anything else
(``/missing`` included) -- except that an anti-bot kind answers its challenge or block
before looking at the path, as a WAF does. See :data:`KINDS` for each kind.

Every request is appended to a request log (:meth:`SiteServer.requests`) with its method,
host, path, headers and cookies, so tests can assert what each host was sent and whether a
browser sent it (:attr:`LoggedRequest.browser`).
"""

from __future__ import annotations

import datetime
import functools
import gzip
import hashlib
import ipaddress
import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from OpenSSL import SSL
from twisted.internet.interfaces import IOpenSSLServerConnectionCreator, IPullProducer
from twisted.web import http
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Request, Site
from zope.interface import implementer

# -- kinds ------------------------------------------------------------------------------------

FRIENDLY = "friendly"
COLD = "cold"
DEAD_ROOT = "dead-root"
GONE = "gone"
HEAD_404 = "head-404"
HEAD_405 = "head-405"
HEAD_500 = "head-500"
CF_SOFT = "cf-soft"
CF_SOMETIMES = "cf-sometimes"
CF_HARD = "cf-hard"
CF_BLOCK = "cf-block"
AWS_WAF = "aws-waf"
DATADOME = "datadome"
DATADOME_BAN = "datadome-ban"
RATE_LIMITED = "rate-limited"
BURST_LIMITED = "burst-limited"
FLAKY = "flaky"
SLOW = "slow"
JS_SHELL = "js-shell"
HUGE = "huge"
BINARY = "binary"
REDIRECT = "redirect"
CF_DELAYED = "cf-delayed"
CF_REDIRECT = "cf-redirect"
CF_INTERACTIVE = "cf-interactive"
SHOP = "shop"
SHOP_CF = "shop-cf"
SHOP_JS = "shop-js"
SHOP_SOMETIMES = "shop-sometimes"
PARKED = "parked"

#: kind -> what it does (also the documentation of the kinds)
KINDS: dict[str, str] = {
    FRIENDLY: "200 HTML; every page has mailto:info@<host> and a tel: link",
    COLD: "200 HTML with text, no e-mail, phone or social link",
    DEAD_ROOT: "404 on every path, / and HEAD included",
    GONE: "410 on every path",
    HEAD_404: "HEAD -> 404; GET as friendly",
    HEAD_405: "HEAD -> 405 (Allow: GET); GET as friendly",
    HEAD_500: "HEAD -> 500; GET as friendly",
    CF_SOFT: "Cloudflare managed challenge (403, cf-ray, server: cloudflare, cf-mitigated: challenge, "
    "'Just a moment...', _cf_chl_opt) whose JS sets the ds_clear cookie and reloads; "
    "with the right cookie: as friendly. Plain fetches never pass, a browser does",
    CF_SOMETIMES: "as friendly, but plain requests number 1, 1+every, 1+2*every... (option every=3, "
    "HEAD and GET counted together) get the cf-soft challenge",
    CF_HARD: "403 Cloudflare 'Sorry, you have been blocked' page, cf-error-code 1020, cf-ray; browser too",
    CF_BLOCK: "403 with cf-mitigated: block and cf-ray; browser too",
    AWS_WAF: "202 with x-amzn-waf-action: challenge and an awswaf.com challenge.js body; "
    "its JS passes like cf-soft's (ds_clear cookie)",
    DATADOME: "403 with x-dd-b: 1 and a captcha-delivery.com iframe with t=fe; browser too",
    DATADOME_BAN: "403 with x-dd-b: 1 and a captcha-delivery.com iframe with t=bv (ban); browser too",
    RATE_LIMITED: "429 with Retry-After: 60, always",
    BURST_LIMITED: "as friendly, but a request less than option window=2.0 seconds after the host's "
    "previous answered one gets 429 with Retry-After: <window> (a rate limit against bursts)",
    FLAKY: "503 on requests number 1, 1+every, ... (option every=2, per host), otherwise as friendly",
    SLOW: "as friendly after option delay=3.0 seconds (reactor.callLater, cancelled on disconnect)",
    JS_SHELL: "200 '<div id=app></div><script>' that writes the contacts with JS: plain fetch sees none",
    HUGE: "200 text/html of option size=20 MiB, streamed in 64 KiB chunks, contacts in the first chunk",
    BINARY: "200 application/octet-stream, 64 KiB of random bytes; /logo.png is a PNG",
    REDIRECT: "301 from every path to the same path on option target (default: the friendly host "
    "friendly-redirected.test, same port)",
    CF_DELAYED: "cf-soft's managed challenge, but its JS waits for the load event, then option delay=0.3 "
    "seconds more, before it sets the ds_clear cookie and reloads (as real challenges do, after load)",
    CF_REDIRECT: "cf-soft's managed challenge whose JS, option delay=0.3 seconds after load, POSTs its answer "
    "to /?__cf_chl_f_tk=...; the server answers 302 back to the page with Set-Cookie: ds_clear",
    CF_INTERACTIVE: "403 Cloudflare interactive challenge (cf-mitigated: challenge, 'Just a moment...', a "
    "Turnstile 'Verify you are human' widget) that waits for a human: no browser passes it",
    SHOP: "a shop without contacts: / links to option categories=5 category pages /c/<i>, each linking "
    "to option products=4 product pages /p/<i>-<j> holding one product (class 'product', data-sku)",
    SHOP_CF: "the shop behind cf-soft's managed challenge (plain fetches never pass, a browser does)",
    SHOP_JS: "the shop as a script-only shell: a script writes each page (links, product); a plain fetch sees neither",
    SHOP_SOMETIMES: "the shop, but the first option burst=0 plain requests, then every every-th one after them "
    "(option every=2; HEAD and GET counted together) get the cf-soft challenge",
    PARKED: "200 on every path: a real captured for-sale page (HugeDomains, with the broker's e-mail and phone; "
    "tests/unit/parked, id hugedomains-bb-amvintage-foxycart-com)",
}

#: the shop kinds (pages of :func:`shop_page`)
SHOP_KINDS = frozenset({SHOP, SHOP_CF, SHOP_JS, SHOP_SOMETIMES})

ANTIBOT_KINDS = frozenset(
    {
        CF_SOFT,
        CF_SOMETIMES,
        CF_HARD,
        CF_BLOCK,
        AWS_WAF,
        DATADOME,
        DATADOME_BAN,
        RATE_LIMITED,
        CF_DELAYED,
        CF_REDIRECT,
        CF_INTERACTIVE,
    }
)

#: option defaults per kind; override with ``server.set_kind(host, kind, **options)``
DEFAULT_OPTIONS: dict[str, dict[str, Any]] = {
    CF_SOMETIMES: {"every": 3},
    FLAKY: {"every": 2},
    BURST_LIMITED: {"window": 2.0},
    SLOW: {"delay": 3.0},
    HUGE: {"size": 20 * 1024 * 1024},
    REDIRECT: {"target": None},  # None: http://friendly-redirected.test:<port>
    CF_DELAYED: {"delay": 0.3},
    CF_REDIRECT: {"delay": 0.3},
    **{kind: {"categories": 5, "products": 4} for kind in (SHOP, SHOP_CF, SHOP_JS)},
    SHOP_SOMETIMES: {"categories": 5, "products": 4, "burst": 0, "every": 2},
}

PAGES = ("/", "/page1", "/page2", "/contact")
#: pages a site can also serve, for crawls that look for "about"/"impressum" pages
#: (``server.pages = (*PAGES, *EXTRA_PAGES)``; the demo does)
EXTRA_PAGES = ("/about", "/team", "/impressum")
#: the link text of each page in the navigation bar
PAGE_TITLES = {
    "/": "Home",
    "/page1": "Page one",
    "/page2": "Page two",
    "/contact": "Contact",
    "/about": "About us",
    "/team": "Our team",
    "/impressum": "Impressum",
}
CLEARANCE_COOKIE = "ds_clear"
CHALLENGE_ASSET_DELAY = 1.0
PHONE = "+1-555-0100"

# -- TLS ----------------------------------------------------------------------------------------

TLS_VALID = "valid"
TLS_EXPIRED = "expired"
TLS_SELF_SIGNED = "self-signed"
TLS_WRONG_HOST = "wrong-host"
#: certificate kinds, one HTTPS listener each; all but wrong-host follow the SNI name
TLS_KINDS = (TLS_VALID, TLS_EXPIRED, TLS_SELF_SIGNED, TLS_WRONG_HOST)
WRONG_HOST_NAME = "wrong-host.invalid"


def email_for(host: str) -> str:
    return f"info@{host}"


def default_sites() -> dict[str, str]:
    """``<kind>.test`` -> kind, for every kind."""
    return {f"{kind}.test": kind for kind in KINDS}


# -- the request log ----------------------------------------------------------------------------


@dataclass(frozen=True)
class LoggedRequest:
    seq: int
    at: float
    method: str
    scheme: str  # "http" or "https"
    listener: str  # "http" or one of TLS_KINDS
    host: str  # from the Host header, lowercased, without port
    port: int  # the port the request arrived on
    path: str  # path and query
    kind: str | None
    headers: dict[str, str] = field(repr=False)  # lowercased names
    cookies: dict[str, str] = field(repr=False)

    @property
    def user_agent(self) -> str:
        return self.headers.get("user-agent", "")

    @property
    def has_cookies(self) -> bool:
        return bool(self.cookies)

    @property
    def browser(self) -> bool:
        """Sent by Chromium: its user agent, or the sec-fetch-*/sec-ch-ua headers only browsers send.

        scrapy-playwright's default ``PLAYWRIGHT_PROCESS_REQUEST_HEADERS`` replaces the browser's
        User-Agent with Scrapy's, and Chromium sends ``sec-*`` headers to https origins only; the
        ``browser_settings`` fixture therefore lets the browser send its own headers."""
        ua = self.user_agent
        return (
            "HeadlessChrome" in ua
            or "Chrome/" in ua
            or any(name.startswith(("sec-fetch-", "sec-ch-ua")) for name in self.headers)
        )


# -- certificates -------------------------------------------------------------------------------


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _san(names: list[str]) -> x509.SubjectAlternativeName:
    general: list[x509.GeneralName] = []
    for name in names:
        try:
            general.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            general.append(x509.DNSName(name))
    return x509.SubjectAlternativeName(general)


class CertificateAuthority:
    """A throw-away CA and the leaf certificates the HTTPS listeners need (EC P-256: fast)."""

    def __init__(self, directory: Path):
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        now = datetime.datetime.now(datetime.timezone.utc)
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(_name("scrapy-domainstate test CA"))
            .issuer_name(_name("scrapy-domainstate test CA"))
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=365))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self.key, hashes.SHA256())
        )
        #: PEM of the CA, e.g. for ``SSL_CERT_FILE`` with ``DOWNLOAD_VERIFY_CERTIFICATES=True``
        self.path = directory / "test-ca.pem"
        self.path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, names: list[str], tls_kind: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
        now = datetime.datetime.now(datetime.timezone.utc)
        key = ec.generate_private_key(ec.SECP256R1())
        if tls_kind == TLS_EXPIRED:
            not_before, not_after = now - datetime.timedelta(days=60), now - datetime.timedelta(days=30)
        else:
            not_before, not_after = now - datetime.timedelta(days=1), now + datetime.timedelta(days=30)
        if tls_kind == TLS_WRONG_HOST:
            names = [WRONG_HOST_NAME]
        issuer_name, signing_key = (self.cert.subject, self.key)
        if tls_kind == TLS_SELF_SIGNED:
            issuer_name, signing_key = (_name(names[0]), key)
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(names[0]))
            .issuer_name(issuer_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before)
            .not_valid_after(not_after)
            .add_extension(_san(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(signing_key, hashes.SHA256())
        )
        return key, cert


@implementer(IOpenSSLServerConnectionCreator)
class _SNIServerTLS:
    """Server TLS whose certificate is made for the SNI name on first sight."""

    def __init__(self, ca: CertificateAuthority, tls_kind: str):
        self.ca = ca
        self.tls_kind = tls_kind
        self._contexts: dict[str, SSL.Context] = {}
        self._default = self._context_for("localhost")
        self._default.set_tlsext_servername_callback(self._on_servername)

    def _context_for(self, name: str) -> SSL.Context:
        ctx = self._contexts.get(name)
        if ctx is None:
            names = [name, "127.0.0.1"] if name == "localhost" else [name]
            key, cert = self.ca.issue(names, self.tls_kind)
            ctx = SSL.Context(SSL.TLS_SERVER_METHOD)
            ctx.set_min_proto_version(SSL.TLS1_2_VERSION)
            ctx.use_privatekey(key)
            ctx.use_certificate(cert)
            if self.tls_kind != TLS_SELF_SIGNED:
                ctx.add_extra_chain_cert(self.ca.cert)
            ctx.check_privatekey()
            self._contexts[name] = ctx
        return ctx

    def _on_servername(self, connection: SSL.Connection) -> None:
        raw = connection.get_servername()
        if raw:
            connection.set_context(self._context_for(raw.decode("ascii", "replace").lower()))

    def serverConnectionForTLS(self, tlsProtocol: Any) -> SSL.Connection:
        return SSL.Connection(self._default, None)


# -- response bodies ----------------------------------------------------------------------------

_TEXT = (
    "Our workshop repairs bicycles, prams and garden tools. We are open on weekdays and on "
    "Saturday mornings. Bring your tools along and we will have a look at them."
)


def _html(title: str, body: str) -> bytes:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{title}</title></head>\n<body>\n{body}\n</body></html>\n"
    ).encode()


def _nav(pages: tuple[str, ...] = PAGES) -> str:
    links = " ".join(f'<a href="{path}">{PAGE_TITLES.get(path, path)}</a>' for path in pages)
    return f"<nav>{links}</nav>"


def _contacts(host: str) -> str:
    email = email_for(host)
    return (
        f'<p class="contact">Write to <a href="mailto:{email}">{email}</a> or call '
        f'<a href="tel:{PHONE}">{PHONE}</a>.</p>'
    )


def friendly_page(host: str, path: str, pages: tuple[str, ...] = PAGES) -> bytes:
    return _html(f"{host} {path}", f"<h1>{host}</h1>\n{_nav(pages)}\n<p>{_TEXT}</p>\n{_contacts(host)}")


def cold_page(host: str, path: str, pages: tuple[str, ...] = PAGES) -> bytes:
    return _html(f"{host} {path}", f"<h1>{host}</h1>\n{_nav(pages)}\n<p>{_TEXT}</p>")


def shop_paths(categories: int = 5, products: int = 4) -> list[str]:
    """Every page of a shop: the home, its categories, their products."""
    cats = [f"/c/{i}" for i in range(1, categories + 1)]
    items = [f"/p/{i}-{j}" for i in range(1, categories + 1) for j in range(1, products + 1)]
    return ["/", *cats, *items]


def shop_body(host: str, path: str, categories: int = 5, products: int = 4) -> str | None:
    """The inner HTML of a shop page (no contacts anywhere), or ``None`` for a path it lacks."""
    if path == "/":
        links = "".join(f'<li><a href="/c/{i}">Category {i}</a></li>' for i in range(1, categories + 1))
        return f"<h1>{host}</h1><p>{_TEXT}</p><ul class=categories>{links}</ul>"
    if path.startswith("/c/") and path[3:].isdigit() and 1 <= int(path[3:]) <= categories:
        i = int(path[3:])
        links = "".join(f'<li><a href="/p/{i}-{j}">Product {i}-{j}</a></li>' for j in range(1, products + 1))
        return f'<h1>Category {i}</h1><a href="/">Home</a><p>{_TEXT}</p><ul class=products>{links}</ul>'
    if path.startswith("/p/"):
        cat, _, item = path[3:].partition("-")
        if cat.isdigit() and item.isdigit() and 1 <= int(cat) <= categories and 1 <= int(item) <= products:
            return (
                f'<h1>Product {cat}-{item}</h1><a href="/c/{cat}">Category {cat}</a>'
                f'<div class="product" data-sku="{cat}-{item}"><span class=price>{int(cat) * 10 + int(item)}.00</span>'
                f"<p>{_TEXT}</p></div>"
            )
    return None


#: The real parking page the ``parked`` kind serves (a copy of a page of ``tests/unit/parked``).
PARKED_PAGE = Path(__file__).parent / "pages" / "parked-hugedomains.html.gz"


@functools.cache
def parked_page() -> bytes:
    """The body the ``parked`` kind serves on every path."""
    return gzip.decompress(PARKED_PAGE.read_bytes())


def not_found_page(host: str, path: str) -> bytes:
    return _html("404 Not Found", f"<h1>Not Found</h1><p>{path} is not on {host}.</p>")


_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000100e221bc330000000049454e44ae426082"
)


@implementer(IPullProducer)
class _StreamedBody:
    """Pull producer writing ``head``, filler chunks and ``tail`` without building the body."""

    def __init__(self, request: Request, head: bytes, filler: bytes, count: int, tail: bytes):
        self.request = request
        self.head, self.filler, self.count, self.tail = head, filler, count, tail
        self.sent = -1  # -1: head not sent yet
        self.stopped = False

    def resumeProducing(self) -> None:
        if self.stopped:
            return
        if self.sent < 0:
            self.request.write(self.head)
        elif self.sent < self.count:
            self.request.write(self.filler)
        else:
            self.request.write(self.tail)
            self.stopped = True
            self.request.unregisterProducer()
            self.request.finish()
            return
        self.sent += 1

    def stopProducing(self) -> None:
        self.stopped = True


# -- the server ---------------------------------------------------------------------------------


class _VHostResource(Resource):
    isLeaf = True

    def __init__(self, server: SiteServer):
        super().__init__()
        self.site_server = server  # not ``server``: Resource has an attribute of that name

    def render(self, request: Request) -> bytes | int:
        return self.site_server._handle(request)


class _QuietSite(Site):
    noisy = False

    def log(self, request: http.Request) -> None:  # no access log: the server keeps its own
        pass


class SiteServer:
    """The test web server. Start it with :meth:`start` while a reactor is installed."""

    def __init__(self, reactor: Any, cert_dir: Path):
        self.reactor = reactor
        self.ca = CertificateAuthority(cert_dir)
        self.sites: dict[str, str] = default_sites()
        self.options: dict[str, dict[str, Any]] = {}
        #: the paths every site serves (and links in its navigation bar); 404 for the rest
        self.pages: tuple[str, ...] = PAGES
        self.port = 0
        self.https_ports: dict[str, int] = {}
        self._listeners: list[Any] = []
        self._listener_names: dict[int, str] = {}
        self._lock = threading.Lock()
        self._log: list[LoggedRequest] = []
        self._counters: dict[tuple[str, str], int] = {}
        #: burst-limited: host -> when it last served a page (monotonic)
        self._last_served: dict[str, float] = {}
        self._binary = random.Random(1234).randbytes(64 * 1024)
        self._handlers: dict[str, Callable[[Request, str, str, dict[str, Any]], bytes | int]] = {
            FRIENDLY: self._friendly,
            COLD: self._cold,
            DEAD_ROOT: self._dead_root,
            GONE: self._gone,
            HEAD_404: self._head_status(404),
            HEAD_405: self._head_status(405),
            HEAD_500: self._head_status(500),
            CF_SOFT: self._cf_soft,
            CF_SOMETIMES: self._cf_sometimes,
            CF_HARD: self._cf_hard,
            CF_BLOCK: self._cf_block,
            AWS_WAF: self._aws_waf,
            DATADOME: self._datadome("fe"),
            DATADOME_BAN: self._datadome("bv"),
            RATE_LIMITED: self._rate_limited,
            BURST_LIMITED: self._burst_limited,
            FLAKY: self._flaky,
            SLOW: self._slow,
            JS_SHELL: self._js_shell,
            HUGE: self._huge,
            BINARY: self._binary_body,
            REDIRECT: self._redirect,
            CF_DELAYED: self._cf_delayed,
            CF_REDIRECT: self._cf_redirect,
            CF_INTERACTIVE: self._cf_interactive,
            SHOP: self._shop,
            SHOP_CF: self._shop_cf,
            SHOP_JS: self._shop_js,
            SHOP_SOMETIMES: self._shop_sometimes,
            PARKED: self._parked,
        }
        assert set(self._handlers) == set(KINDS)

    # -- lifecycle -----------------------------------------------------------------------------

    @classmethod
    def start(cls, cert_dir: Path, reactor: Any = None) -> SiteServer:
        if reactor is None:
            from twisted.internet import reactor
        server = cls(reactor, cert_dir)
        site = _QuietSite(_VHostResource(server))
        listener = reactor.listenTCP(0, site, interface="127.0.0.1")
        server._listeners.append(listener)
        server.port = listener.getHost().port
        for tls_kind in TLS_KINDS:
            listener = reactor.listenSSL(0, site, _SNIServerTLS(server.ca, tls_kind), interface="127.0.0.1")
            server._listeners.append(listener)
            server.https_ports[tls_kind] = listener.getHost().port
        server._listener_names = {server.port: "http", **{p: k for k, p in server.https_ports.items()}}
        return server

    def close(self) -> None:
        for listener in self._listeners:
            listener.stopListening()
        self._listeners.clear()

    def reset(self) -> None:
        """Back to the default site table and options; empty log and counters."""
        with self._lock:
            self._log.clear()
            self._counters.clear()
            self._last_served.clear()
        self.sites = default_sites()
        self.options = {}
        self.pages = PAGES

    def reset_log(self) -> None:
        with self._lock:
            self._log.clear()

    # -- configuration ---------------------------------------------------------------------------

    def set_kind(self, host: str, kind: str, **options: Any) -> None:
        """Serve ``host`` as ``kind``, with the kind's options overridden by ``options``."""
        if kind not in KINDS:
            raise ValueError(f"unknown site kind {kind!r}; known: {sorted(KINDS)}")
        host = host.lower().rstrip(".")
        self.sites[host] = kind
        self.options[host] = dict(options)

    def kind_for(self, host: str) -> str | None:
        host = host.lower().rstrip(".")
        labels = host.split(".")
        for i in range(len(labels) - 1):
            kind = self.sites.get(".".join(labels[i:]))
            if kind:
                return kind
        first = labels[0]
        matches = [k for k in KINDS if first == k or first.startswith(k + "-")]
        return max(matches, key=len) if matches else None

    def options_for(self, host: str, kind: str) -> dict[str, Any]:
        return {**DEFAULT_OPTIONS.get(kind, {}), **self.options.get(host, {})}

    def url(self, host: str, path: str = "/", tls: str | None = None) -> str:
        """``http://host:port/path``, or https on the listener with the ``tls`` certificate kind."""
        if tls is None:
            return f"http://{host}:{self.port}{path}"
        return f"https://{host}:{self.https_ports[tls]}{path}"

    def challenge_token(self, host: str) -> str:
        """The ``ds_clear`` cookie value that passes ``host``'s JS challenge."""
        a, b, c = self._challenge_numbers(host)
        return str(a * b + c)

    @staticmethod
    def _challenge_numbers(host: str) -> tuple[int, int, int]:
        digest = hashlib.sha256(host.encode()).digest()
        return 3 + digest[0] % 50, 7 + digest[1] % 20, digest[2]

    # -- the log ----------------------------------------------------------------------------------

    def requests(
        self, host: str | None = None, method: str | None = None, path: str | None = None
    ) -> list[LoggedRequest]:
        """Logged requests, oldest first, optionally only those for ``host``/``method``/``path``."""
        with self._lock:
            log = list(self._log)
        if host is not None:
            host = host.lower().rstrip(".")
            log = [r for r in log if r.host == host]
        if method is not None:
            log = [r for r in log if r.method == method.upper()]
        if path is not None:
            log = [r for r in log if r.path == path]
        return log

    def methods(self, host: str) -> list[str]:
        return [r.method for r in self.requests(host)]

    def _record(self, request: Request, host: str, kind: str | None) -> None:
        headers = {
            name.decode("latin-1").lower(): ", ".join(v.decode("latin-1") for v in values)
            for name, values in request.requestHeaders.getAllRawHeaders()
        }
        cookies = {k.decode("latin-1"): v.decode("latin-1") for k, v in _parse_cookies(request).items()}
        port = request.getHost().port
        with self._lock:
            self._log.append(
                LoggedRequest(
                    seq=len(self._log),
                    at=time.time(),
                    method=request.method.decode("ascii", "replace"),
                    scheme="https" if request.isSecure() else "http",
                    listener=self._listener_names.get(port, "?"),
                    host=host,
                    port=port,
                    path=request.uri.decode("latin-1"),
                    kind=kind,
                    headers=headers,
                    cookies=cookies,
                )
            )

    def _count(self, host: str, what: str) -> int:
        """How many times ``what`` happened on ``host`` before (0 the first time)."""
        with self._lock:
            n = self._counters.get((host, what), 0)
            self._counters[(host, what)] = n + 1
        return n

    # -- dispatch ---------------------------------------------------------------------------------

    def _handle(self, request: Request) -> bytes | int:
        host = (request.getRequestHostname() or b"").decode("ascii", "replace").lower().rstrip(".")
        kind = self.kind_for(host)
        self._record(request, host, kind)
        path = request.path.decode("latin-1")
        if kind is None:
            request.setHeader(b"x-test-unknown-host", b"1")
            return self._respond(request, 404, not_found_page(host, path))
        return self._handlers[kind](request, host, path, self.options_for(host, kind))

    @staticmethod
    def _respond(
        request: Request,
        status: int,
        body: bytes = b"",
        content_type: bytes = b"text/html; charset=utf-8",
        headers: dict[bytes, bytes] | None = None,
    ) -> bytes:
        request.setResponseCode(status)
        request.setHeader(b"content-type", content_type)
        for name, value in (headers or {}).items():
            request.setHeader(name, value)
        return b"" if request.method == b"HEAD" else body

    def _page(
        self, request: Request, host: str, path: str, page: Callable[[str, str, tuple[str, ...]], bytes]
    ) -> bytes:
        if path not in self.pages:
            return self._respond(request, 404, not_found_page(host, path))
        return self._respond(request, 200, page(host, path, self.pages))

    # -- content kinds ----------------------------------------------------------------------------

    def _friendly(self, request: Request, host: str, path: str, options: dict[str, Any]) -> bytes:
        return self._page(request, host, path, friendly_page)

    def _cold(self, request: Request, host: str, path: str, options: dict[str, Any]) -> bytes:
        return self._page(request, host, path, cold_page)

    def _parked(self, request: Request, host: str, path: str, options: dict[str, Any]) -> bytes:
        return self._respond(request, 200, parked_page())

    def _dead_root(self, request: Request, host: str, path: str, options: dict[str, Any]) -> bytes:
        return self._respond(request, 404, not_found_page(host, path))

    def _gone(self, request: Request, host: str, path: str, options: dict[str, Any]) -> bytes:
        return self._respond(request, 410, _html("410 Gone", "<h1>Gone</h1>"))

    def _head_status(self, status: int) -> Callable[[Request, str, str, dict[str, Any]], bytes]:
        def handler(request: Request, host: str, path: str, options: dict[str, Any]) -> bytes:
            if request.method == b"HEAD":
                headers = {b"allow": b"GET, POST"} if status == 405 else {}
                return self._respond(request, status, headers=headers)
            return self._page(request, host, path, friendly_page)

        return handler

    def _flaky(self, request: Request, host: str, path: str, options: dict[str, Any]) -> bytes:
        if self._count(host, "flaky") % int(options["every"]) == 0:
            return self._respond(
                request,
                503,
                _html("503 Service Unavailable", "<h1>Try again later</h1>"),
                headers={b"retry-after": b"1"},
            )
        return self._page(request, host, path, friendly_page)

    def _slow(self, request: Request, host: str, path: str, options: dict[str, Any]) -> int:
        return self._later(request, float(options["delay"]), lambda: self._page(request, host, path, friendly_page))

    def _later(self, request: Request, delay: float, body: Callable[[], bytes]) -> int:
        """Answer ``request`` with ``body()`` after ``delay`` seconds, unless the client left."""

        def answer() -> None:
            if not finished:
                data = body()
                if data:
                    request.write(data)
                request.finish()

        finished: list[bool] = []
        call = self.reactor.callLater(delay, answer)

        def gone(_: Any) -> None:
            finished.append(True)
            if call.active():
                call.cancel()

        request.notifyFinish().addBoth(gone)
        return NOT_DONE_YET

    def _js_shell(self, request: Request, host: str, path: str, options: dict[str, Any]) -> bytes:
        if path not in self.pages:
            return self._respond(request, 404, not_found_page(host, path))
        body = (
            b'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>App</title></head>'
            b"<body><div id=app></div><script>\n"
            b"(function(){var u=['in','fo'].join(''), d=location.hostname, e=u+String.fromCharCode(64)+d;\n"
            b"var t=['+1','555','0100'].join('-');\n"
            b"document.getElementById('app').innerHTML='<h1>'+d+'</h1><p>Write to <a href=\"mail'+'to:'+e+'\">'"
            b"+e+'</a> or call <a href=\"te'+'l:'+t+'\">'+t+'</a>.</p>';})();\n"
            b"</script></body></html>\n"
        )
        return self._respond(request, 200, body)

    def _shop(self, request: Request, host: str, path: str, options: dict[str, Any]) -> bytes:
        body = shop_body(host, path, int(options["categories"]), int(options["products"]))
        if body is None:
            return self._respond(request, 404, not_found_page(host, path))
        return self._respond(request, 200, _html(f"{host} {path}", body))

    def _shop_cf(self, request: Request, host: str, path: str, options: dict[str, Any]) -> bytes | int:
        asset = self._challenge_asset(request)
        if asset is not None:
            return asset
        if self._cleared(request, host):
            return self._shop(request, host, path, options)
        return self._cf_challenge(request, host)

    def _shop_sometimes(self, request: Request, host: str, path: str, options: dict[str, Any]) -> bytes | int:
        asset = self._challenge_asset(request)
        if asset is not None:
            return asset
        n, burst, every = self._count(host, "plain"), int(options["burst"]), int(options["every"])
        if not self._cleared(request, host) and (n < burst or (n - burst) % every == every - 1):
            return self._cf_challenge(request, host)
        return self._shop(request, host, path, options)

    def _shop_js(self, request: Request, host: str, path: str, options: dict[str, Any]) -> bytes:
        body = shop_body(host, path, int(options["categories"]), int(options["products"]))
        if body is None:
            return self._respond(request, 404, not_found_page(host, path))
        encoded = json.dumps(body).replace("<", "\\u003c")
        page = (
            '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>App</title></head>'
            f"<body><div id=app></div><script>\ndocument.getElementById('app').innerHTML={encoded};\n"
            "</script></body></html>\n"
        )
        return self._respond(request, 200, page.encode())

    def _huge(self, request: Request, host: str, path: str, options: dict[str, Any]) -> bytes | int:
        if path not in self.pages:
            return self._respond(request, 404, not_found_page(host, path))
        head = (
            f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{host} huge</title></head>\n'
            f"<body><h1>{host}</h1>\n{_contacts(host)}\n"
        ).encode()
        tail = b"</body></html>\n"
        line = b"<p>" + _TEXT.encode() + b"</p>\n"
        filler = line * (64 * 1024 // len(line))
        count = max(0, (int(options["size"]) - len(head) - len(tail)) // len(filler))
        request.setResponseCode(200)
        request.setHeader(b"content-type", b"text/html; charset=utf-8")
        request.setHeader(b"content-length", b"%d" % (len(head) + count * len(filler) + len(tail)))
        if request.method == b"HEAD":
            return b""
        producer = _StreamedBody(request, head, filler, count, tail)
        request.notifyFinish().addErrback(lambda _: producer.stopProducing())
        request.registerProducer(producer, False)
        return NOT_DONE_YET

    def _binary_body(self, request: Request, host: str, path: str, options: dict[str, Any]) -> bytes:
        if path == "/logo.png":
            return self._respond(request, 200, _PNG, content_type=b"image/png")
        if path not in self.pages:
            return self._respond(request, 404, not_found_page(host, path))
        return self._respond(request, 200, self._binary, content_type=b"application/octet-stream")

    def _redirect(self, request: Request, host: str, path: str, options: dict[str, Any]) -> bytes:
        target = options["target"] or f"http://{FRIENDLY}-redirected.test:{self.port}"
        location = target.rstrip("/") + request.uri.decode("latin-1")
        return self._respond(
            request,
            301,
            _html("301 Moved Permanently", f'<a href="{location}">moved</a>'),
            headers={b"location": location.encode()},
        )

    # -- anti-bot kinds ---------------------------------------------------------------------------

    def _cf_headers(self, host: str, extra: dict[bytes, bytes] | None = None) -> dict[bytes, bytes]:
        ray = hashlib.sha1(f"{host}{time.monotonic_ns()}".encode()).hexdigest()[:16]
        return {
            b"server": b"cloudflare",
            b"cf-ray": f"{ray}-AMS".encode(),
            b"cache-control": b"private, max-age=0, no-store, no-cache, must-revalidate",
            **(extra or {}),
        }

    def _cleared(self, request: Request, host: str) -> bool:
        return _parse_cookies(request).get(CLEARANCE_COOKIE.encode()) == self.challenge_token(host).encode()

    def _challenge_script(self, host: str) -> str:
        a, b, c = self._challenge_numbers(host)
        return (
            "<script>(function(){\n"
            f"  window._cf_chl_opt={{cvId:'3',cZone:'{host}',cType:'managed',cH:'{a}.{b}.{c}'}};\n"
            "  var p=window._cf_chl_opt.cH.split('.').map(Number);\n"
            f"  document.cookie='{CLEARANCE_COOKIE}='+(p[0]*p[1]+p[2])+'; path=/; SameSite=Lax';\n"
            "  location.reload();\n"
            "})();</script>"
        )

    def _cf_challenge(self, request: Request, host: str, script: str | None = None) -> bytes:
        """Cloudflare's managed challenge page; ``script`` replaces the default one (which passes
        before ``load``, held back by the slow async asset)."""
        if script is None:
            script = (
                f"{self._challenge_script(host)}\n"
                '<script src="/cdn-cgi/challenge-platform/h/g/orchestrate/chl_page/v1?ray=0" async></script>'
            )
        body = _html(
            "Just a moment...",
            '<div class="main-wrapper" role="main"><div class="main-content">'
            f'<h1 class="zone-name-title h1">{host}</h1>'
            '<h2 class="h2" id="challenge-running">Checking if the site connection is secure</h2>'
            '<noscript><div class="h2"><span id="challenge-error-text">Enable JavaScript and cookies to '
            "continue</span></div></noscript></div></div>\n"
            f"{script}",
        )
        headers = self._cf_headers(host, {b"cf-mitigated": b"challenge"})
        return self._respond(request, 403, body, headers=headers)

    def _after_load(self, host: str, delay: float, action: str) -> str:
        """A challenge script that runs ``action`` ``delay`` seconds after the page's ``load`` event."""
        a, b, c = self._challenge_numbers(host)
        return (
            "<script>(function(){\n"
            f"  window._cf_chl_opt={{cvId:'3',cZone:'{host}',cType:'managed',cH:'{a}.{b}.{c}'}};\n"
            "  window.addEventListener('load', function(){ setTimeout(function(){\n"
            "    var p=window._cf_chl_opt.cH.split('.').map(Number), answer=p[0]*p[1]+p[2];\n"
            f"    {action}\n"
            f"  }}, {int(delay * 1000)}); }});\n"
            "})();</script>"
        )

    def _cf_delayed(self, request: Request, host: str, path: str, options: dict[str, Any]) -> bytes:
        if self._cleared(request, host):
            return self._page(request, host, path, friendly_page)
        action = f"document.cookie='{CLEARANCE_COOKIE}='+answer+'; path=/; SameSite=Lax'; location.reload();"
        return self._cf_challenge(request, host, self._after_load(host, float(options["delay"]), action))

    def _cf_redirect(self, request: Request, host: str, path: str, options: dict[str, Any]) -> bytes:
        answer = (request.args.get(b"__cf_chl_f_tk") or [b""])[0].decode("ascii", "replace")
        if request.method == b"POST" and answer:
            back = (request.args.get(b"r") or [b"/"])[0].decode("latin-1")
            if answer != self.challenge_token(host) or not back.startswith("/"):
                return self._cf_challenge(request, host)
            return self._respond(
                request,
                302,
                headers={
                    b"location": back.encode("latin-1"),
                    b"set-cookie": f"{CLEARANCE_COOKIE}={answer}; Path=/; SameSite=Lax".encode(),
                    **self._cf_headers(host),
                },
            )
        if self._cleared(request, host):
            return self._page(request, host, path, friendly_page)
        action = (
            "var f=document.createElement('form'); f.method='POST';\n"
            "    f.action='/?__cf_chl_f_tk='+answer+'&r='+encodeURIComponent(location.pathname);\n"
            "    document.body.appendChild(f); f.submit();"
        )
        return self._cf_challenge(request, host, self._after_load(host, float(options["delay"]), action))

    def _cf_interactive(self, request: Request, host: str, path: str, options: dict[str, Any]) -> bytes:
        script = (
            f"<script>window._cf_chl_opt={{cvId:'3',cZone:'{host}',cType:'interactive'}};</script>\n"
            '<div class="cf-turnstile" data-sitekey="0x4AAAAAAADnPIDROrmt1Wwj"><label>'
            '<input type="checkbox"> Verify you are human</label></div>\n'
            "<script>document.querySelector('input').addEventListener('change', function(){});</script>"
        )
        return self._cf_challenge(request, host, script)

    def _challenge_asset(self, request: Request) -> bytes | int | None:
        """The challenge's async script; answered after CHALLENGE_ASSET_DELAY seconds so that the
        challenge page's ``load`` event comes after its own ``location.reload()``: a browser then
        settles on the reloaded page, deterministically."""
        if not request.path.startswith(b"/cdn-cgi/challenge-platform/"):
            return None
        self._respond(request, 200, content_type=b"application/javascript")
        return self._later(request, CHALLENGE_ASSET_DELAY, lambda: b"/* challenge platform */\n")

    def _cf_soft(self, request: Request, host: str, path: str, options: dict[str, Any]) -> bytes | int:
        asset = self._challenge_asset(request)
        if asset is not None:
            return asset
        if self._cleared(request, host):
            return self._page(request, host, path, friendly_page)
        return self._cf_challenge(request, host)

    def _cf_sometimes(self, request: Request, host: str, path: str, options: dict[str, Any]) -> bytes | int:
        asset = self._challenge_asset(request)
        if asset is not None:
            return asset
        if not self._cleared(request, host) and self._count(host, "plain") % int(options["every"]) == 0:
            return self._cf_challenge(request, host)
        return self._page(request, host, path, friendly_page)

    def _cf_hard(self, request: Request, host: str, path: str, options: dict[str, Any]) -> bytes:
        body = _html(
            f"Attention Required! | Cloudflare - {host}",
            '<div id="cf-wrapper"><div id="cf-error-details" class="cf-error-details-wrapper">'
            '<div class="cf-wrapper cf-header cf-error-overview"><h1 data-translate="block_headline">'
            'Sorry, you have been blocked</h1><h2 class="cf-subheadline"><span data-translate="unable_to_access">'
            f"You are unable to access</span> {host}</h2></div>"
            '<div class="cf-section cf-wrapper"><p>Error code <span class="cf-error-code">1020</span></p>'
            '<p data-translate="blocked_why_detail">This website is using a security service to protect '
            "itself from online attacks.</p></div></div></div>",
        )
        return self._respond(request, 403, body, headers=self._cf_headers(host))

    def _cf_block(self, request: Request, host: str, path: str, options: dict[str, Any]) -> bytes:
        headers = self._cf_headers(host, {b"cf-mitigated": b"block"})
        return self._respond(request, 403, _html("Access denied", "<h1>Access denied</h1>"), headers=headers)

    def _aws_waf(self, request: Request, host: str, path: str, options: dict[str, Any]) -> bytes:
        if self._cleared(request, host):
            return self._page(request, host, path, friendly_page)
        body = (
            '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title></title>\n'
            "<script>window.awsWafCookieDomainList = [];window.gokuProps = {key:'AQIDAHjcYu',iv:'CgAHQD',"
            "context:'abc'};</script>\n"
            '<script src="https://3a4f9c1d2b7e.edge.sdk.awswaf.com/3a4f9c1d2b7e/0f1e2d3c4b5a/challenge.js" '
            'async></script>\n</head><body><div id="challenge-container"></div>\n'
            "<script>window.addEventListener('load', function(){ if (typeof AwsWafIntegration === "
            "'undefined') {} });</script>\n"
            f"{self._challenge_script(host)}\n"
            "<noscript><h1>JavaScript is disabled</h1>In order to continue, you need to verify that you're "
            "not a robot by solving a CAPTCHA puzzle.</noscript></body></html>\n"
        ).encode()
        return self._respond(request, 202, body, headers={b"x-amzn-waf-action": b"challenge", b"server": b"awselb/2.0"})

    def _datadome(self, verdict: str) -> Callable[[Request, str, str, dict[str, Any]], bytes]:
        def handler(request: Request, host: str, path: str, options: dict[str, Any]) -> bytes:
            cid = hashlib.sha1(host.encode()).hexdigest()
            body = (
                f"<html><head><title>{host}</title><style>#cmsg{{animation: A 1.5s;}}</style></head>"
                '<body style="margin:0"><p id="cmsg">Please enable JS and disable any ad blocker</p>'
                f"<script data-cfasync=\"false\">var dd={{'rt':'c','cid':'{cid}','hsh':'AB12','t':'{verdict}',"
                "'s':12345,'e':'e1','host':'geo.captcha-delivery.com','cookie':'x'}</script>"
                '<script data-cfasync="false" src="https://ct.captcha-delivery.com/c.js"></script>'
                f'<iframe src="https://geo.captcha-delivery.com/captcha/?initialCid={cid}&hash=AB12&cid=x'
                f'&t={verdict}&referer=http%3A%2F%2F{host}%2F&s=12345" title="DataDome CAPTCHA" width="100%" '
                'height="100%" frameborder="0"></iframe></body></html>\n'
            ).encode()
            headers = {
                b"x-dd-b": b"1",
                b"x-datadome": b"protected",
                b"server": b"DataDome",
                b"set-cookie": b"datadome=abc123; Max-Age=31536000; Path=/; SameSite=Lax",
            }
            return self._respond(request, 403, body, headers=headers)

        return handler

    def _burst_limited(self, request: Request, host: str, path: str, options: dict[str, Any]) -> bytes:
        window = float(options["window"])
        now = time.monotonic()
        with self._lock:
            last = self._last_served.get(host)
            limited = last is not None and now - last < window
            if not limited:
                self._last_served[host] = now
        if limited:
            return self._respond(
                request,
                429,
                _html("429 Too Many Requests", "<h1>Slow down</h1>"),
                headers={b"retry-after": str(int(window) if window == int(window) else window).encode()},
            )
        return self._page(request, host, path, friendly_page)

    def _rate_limited(self, request: Request, host: str, path: str, options: dict[str, Any]) -> bytes:
        return self._respond(
            request, 429, _html("429 Too Many Requests", "<h1>Too Many Requests</h1>"), headers={b"retry-after": b"60"}
        )


def _parse_cookies(request: Request) -> dict[bytes, bytes]:
    cookies: dict[bytes, bytes] = {}
    for header in request.requestHeaders.getRawHeaders(b"cookie", []):
        for part in header.split(b";"):
            name, sep, value = part.strip().partition(b"=")
            if sep:
                cookies[name] = value
    return cookies
