"""The anti-bot marker list: what block and challenge responses look like, as data.

Each vendor maps to a tuple of :class:`Marker`. :class:`~scrapy_domainstate.detect.classify.Classifier`
compiles them once; nothing here runs at request time. The facts come from the vendors'
documentation and public detector projects (see ``docs/ANTIBOT-MARKERS.md``).

Rules the list follows:

- A marker that also appears on normal pages is never enough alone. Cookies (``__cf_bm``,
  ``cf_clearance``, ``datadome=``, ``_px3``, ``_abck``), ``server: cloudflare``, a ``cf-ray``
  on a 200, Akamai's ``bmak.`` sensor, a bare ``/cdn-cgi/challenge-platform/`` script and an
  embedded Turnstile or reCAPTCHA widget are therefore *not* listed, or listed with
  ``needs_block_status`` so that they count only on a 403/429/503-style answer.
- ``interstitial`` markers count only on a block status or a small page
  (:data:`SMALL_PAGE`): sentences a blog post could quote ("Checking your browser") and the
  markup of challenge interstitials, which are small pages with nothing else on them. The
  few markers that never appear outside a challenge (``_cf_chl_opt``,
  ``captcha-delivery.com``, ...) count at any size, up to the scanned prefix.
- ``hard`` markers are firewall blocks and IP bans, which a browser on the same address
  does not get through; everything else is a challenge a browser can plausibly pass.

Body patterns are matched case-insensitively against the lowercased first
``DOMAINSTATE_BODY_SCAN_BYTES`` of the body (and, for a long page whose prefix shows no
content, the markup after it with scripts and styles skipped); write them in lower case.
Hard markers that could also sit inside a challenge's inline script say
``outside_scripts``.

The structural cues at the end of this module (:data:`VERIFY_PHRASES`,
:data:`CAPTCHA_WIDGETS`, :data:`CHALLENGE_SCRIPTS`) are read only on interstitial-shaped
pages; see :mod:`scrapy_domainstate.detect.classify`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

__all__ = [
    "BLOCK_STATUSES",
    "BUILTIN_MARKERS",
    "CAPTCHA_WIDGETS",
    "CHALLENGE_SCRIPTS",
    "DENY_PHRASES",
    "HINT_VENDOR_ORDER",
    "LANDER_MAX_BYTES",
    "LANDER_MAX_TEXT",
    "NAMING_ONLY",
    "PARKED_MAX_BYTES",
    "PARKING_HEADERS",
    "PARKING_MARKUP",
    "PARKING_PHRASES",
    "PARKING_TITLES",
    "SMALL_PAGE",
    "VERIFY_PHRASES",
    "Marker",
    "MarkerKind",
    "merge_markers",
]

MarkerKind = Literal["status", "header", "title", "body", "regex"]

#: Statuses that a challenge or block page is served with. ``needs_block_status`` markers
#: count only on these (unless the marker lists its own ``statuses``).
BLOCK_STATUSES: frozenset[int] = frozenset({401, 403, 405, 429, 503})

#: Bodies up to this many bytes are "small pages": ``interstitial`` markers count on them
#: even with a 2xx status (challenge interstitials are small; articles quoting them are not).
SMALL_PAGE = 32 * 1024


@dataclass(frozen=True, slots=True)
class Marker:
    """One signal of one vendor.

    ``kind`` says where ``patterns`` are looked for:

    - ``status``: the status is in ``statuses`` (``patterns`` unused);
    - ``header``: a response header named by one of ``patterns`` (lower case; a trailing
      ``*`` makes it a prefix) is present, its value (comma-separated tokens, lowercased)
      contains one of ``values`` (any value when empty) and none of ``exclude``;
    - ``title``: the ``<title>`` text contains one of ``patterns``;
    - ``body``: the scanned body prefix contains one of ``patterns``;
    - ``regex``: ``patterns[0]`` (a bytes regex over the lowercased prefix) matches; it runs
      only when the literal ``anchor`` is present. A ``{}`` in ``name`` is replaced by the
      regex's first group (``'{}'`` -> ``'1020'`` for Cloudflare error codes).

    ``hard``: a firewall block or ban (evidence ``block:<vendor>:<name>``) rather than a
    challenge (``challenge:<vendor>:<name>``). ``needs_block_status``: the status must be in
    ``statuses`` or, when that is empty, in :data:`BLOCK_STATUSES`. ``interstitial`` (body, regex
    and title markers): only on a block status or a body of at most :data:`SMALL_PAGE` bytes.
    ``requires``: literals that must also be in the body prefix; ``unless``: literals that, when
    in the body, veto the marker (CloudFront's ``X-Cache: Error from cloudfront`` over S3's own
    XML error is the bucket's answer, not the edge's). ``outside_scripts`` (body and regex
    markers): the hit counts only outside ``<script>`` elements, so that a string inside a
    challenge's inline script (Cloudflare JS challenges carry a ``cf-error-code`` span in one)
    is not read as the page's own structure. ``short_page``: the page must also be
    interstitial-shaped (fewer than ``INTERSTITIAL_MAX_TEXT`` visible characters and
    ``INTERSTITIAL_MAX_LINKS`` links, see :mod:`scrapy_domainstate.detect.classify`): for wording a
    firewall's deny page shares with articles and forum posts that quote it. ``fallback``: the
    marker proves only the infrastructure in front of the site (a CDN's ray header on a block
    status), so a later marker of another vendor that fires on the same response names the
    vendor instead (PerimeterX's page served through Cloudflare is PerimeterX's).
    """

    kind: MarkerKind
    name: str
    patterns: tuple[str, ...] = ()
    hard: bool = False
    needs_block_status: bool = False
    interstitial: bool = False
    requires: tuple[str, ...] = ()
    anchor: str = ""
    values: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    statuses: frozenset[int] = frozenset()
    outside_scripts: bool = False
    unless: tuple[str, ...] = ()
    short_page: bool = False
    fallback: bool = False

    def allowed_statuses(self) -> frozenset[int] | None:
        """The statuses this marker is limited to, or ``None`` for any status."""
        if self.kind == "status":
            return self.statuses
        if self.needs_block_status:
            return self.statuses or BLOCK_STATUSES
        return None


def _header(name: str, *headers: str, values: tuple[str, ...] = (), **kw: Any) -> Marker:
    return Marker("header", name, tuple(headers), values=values, **kw)


def _status(name: str, *statuses: int) -> Marker:
    return Marker("status", name, statuses=frozenset(statuses))


def _title(name: str, *titles: str, **kw: Any) -> Marker:
    return Marker("title", name, tuple(titles), **kw)


def _body(name: str, *patterns: str, **kw: Any) -> Marker:
    return Marker("body", name, tuple(patterns), **kw)


def _regex(name: str, pattern: str, anchor: str, **kw: Any) -> Marker:
    return Marker("regex", name, (pattern,), anchor=anchor, **kw)


_CF_BLOCK_STATUSES = frozenset({403, 429, 503})
_AWS_STATUSES = frozenset({202, 403, 405})

#: "Your IP / your request has been blocked" in Russian, Chinese, Japanese, Spanish, Portuguese,
#: German and French, lower case (a Cyrillic word that may open a sentence without its first
#: letter: the scan lowercases ASCII only). Counted on short pages, outside scripts, as hard.
DENY_PHRASES: tuple[str, ...] = (
    "аш ip-адрес заблокирован",
    "аш ip адрес заблокирован",
    "аш ip заблокирован",
    "аш запрос заблокирован",
    "аш доступ заблокирован",
    "ip-адрес заблокирован",
    "您的ip已被封禁",
    "您的ip地址已被封禁",
    "您的ip已被限制",
    "您的请求已被拦截",
    "您的访问已被拦截",
    "您的访问被拦截",
    "お使いのipアドレスはブロックされています",
    "アクセスはブロックされました",
    "リクエストはブロックされました",
    "su dirección ip ha sido bloqueada",
    "tu dirección ip ha sido bloqueada",
    "su ip ha sido bloqueada",
    "tu ip ha sido bloqueada",
    "su solicitud ha sido bloqueada",
    "tu solicitud ha sido bloqueada",
    "seu endereço ip foi bloqueado",
    "seu ip foi bloqueado",
    "sua solicitação foi bloqueada",
    "seu acesso foi bloqueado",
    "ihre ip-adresse wurde gesperrt",
    "ihre ip-adresse wurde blockiert",
    "ihre anfrage wurde blockiert",
    "ihr zugriff wurde gesperrt",
    "votre adresse ip a été bloquée",
    "votre ip a été bloquée",
    "votre requête a été bloquée",
    "votre demande a été bloquée",
    "votre accès a été bloqué",
)

#: The built-in list. Order matters: within hard and within soft markers, the first match
#: names the evidence, so specific markers come before generic ones; ``generic`` is last.
BUILTIN_MARKERS: Mapping[str, tuple[Marker, ...]] = MappingProxyType(
    {
        "cloudflare": (
            # Not in Cloudflare's documentation, but widely assumed; the spec treats it as hard.
            _header("cf-mitigated", "cf-mitigated", values=("block",), hard=True),
            # Firewall-rule / ban error pages: 1005-1009 (ASN, IP, country bans), 1010 (browser
            # signature), 1012 (access denied), 1015 (rate limited), 1020 (firewall rule).
            # Other 10xx codes (1016 origin DNS error, ...) are not blocks. The code must sit in
            # the error page's own structure: JS challenges carry the same span in a script.
            _regex(
                "{}",
                r'cf-error-code["\']?>\s*(10(?:0[5-9]|1[025]|20))\s*<',
                "cf-error-code",
                hard=True,
                needs_block_status=True,
                requires=("cf-error-details",),
                outside_scripts=True,
            ),
            _body("blocked", "sorry, you have been blocked", hard=True, interstitial=True, outside_scripts=True),
            # The title of the 10xx access-denied pages ("Access denied | example.com used
            # Cloudflare to restrict access"), also in the layout whose code sits in a bare <span>.
            _title("access-denied", "used cloudflare to restrict access", hard=True),
            # "Attention Required!" is also the title of the captcha pages (hCaptcha/reCAPTCHA
            # "One more step"), which a browser passes: a challenge, not a ban.
            _title("attention-required", "attention required! | cloudflare"),
            _header("cf-mitigated", "cf-mitigated", values=("challenge",)),
            _title("title", "just a moment...", "just a moment\u2026"),
            _body("cf_chl_opt", "_cf_chl_opt"),
            _body("cf_chl_ctx", "_cf_chl_ctx"),
            _body("challenge-form", 'id="challenge-form"', "id='challenge-form'", interstitial=True),
            _body("cf_chl_tk", "__cf_chl_f_tk=", "__cf_chl_rt_tk=", "__cf_chl_tk=", "__cf_chl_jschl_tk__"),
            # The legacy "I'm Under Attack" form (2015-2019): its action and answer fields.
            _body("jschl", "/cdn-cgi/l/chk_jschl", 'name="jschl_vc"', 'name="jschl_answer"'),
            _regex(
                "orchestrate",
                r"/cdn-cgi/challenge-platform/[^\"'\s<>]{0,120}?/orchestrate/(?:jsch|captcha|managed|chl_page)/v\d",
                "challenge-platform/",
                interstitial=True,
            ),
            _body("verifying-human", "verifying you are human", interstitial=True),
            _body("browser-verification", "cf-browser-verification", "cf-im-under-attack", interstitial=True),
            # Turnstile is embedded in normal login forms: only on a challenge status.
            _body("turnstile", "cf-turnstile", "cf-chl-widget-", needs_block_status=True),
            # Cloudflare in front of a 403/429/503 with no page we recognise: still a challenge.
            _header("cf-ray", "cf-ray", needs_block_status=True, statuses=_CF_BLOCK_STATUSES, fallback=True),
        ),
        "aws": (
            _header("x-amzn-waf-action", "x-amzn-waf-action", values=("challenge", "captcha")),
            _header("x-blocked-by-waf", "x-blocked-by-waf"),
            # The WAF's JS SDK is also embedded in normal pages: only on the WAF's statuses.
            _body("awswaf", "awswaf.com", "/awswaf/", needs_block_status=True, statuses=_AWS_STATUSES),
            # The challenge document's own parameters (``window.gokuProps = {...}``), which the SDK
            # on a normal page does not carry: at any status, 200 included (Amazon's shells).
            _body("challenge", "window.gokuprops", interstitial=True),
            _body(
                "cloudfront",
                "the request could not be satisfied",
                needs_block_status=True,
                statuses=frozenset({403}),
            ),
            # CloudFront's own error page for a blocked request (WAF rule, geo restriction): the
            # page says so whatever status it is delivered with.
            _title(
                "cloudfront-blocked",
                "error: the request could not be satisfied",
                requires=("request blocked",),
            ),
            # A bare 403 from CloudFront itself (body "Forbidden"): the edge, not the site. The
            # header says only "the answer was an error": over S3's own XML error document
            # (``<Error><Code>AccessDenied</Code>``) it is the bucket's permission error.
            _header(
                "cloudfront-error",
                "x-cache",
                values=("error from cloudfront",),
                needs_block_status=True,
                statuses=frozenset({403}),
                unless=("<error><code>",),
            ),
        ),
        "datadome": (
            _regex(
                "t=bv",
                r"(?:[?&;]t=|\\u0026t=|['\"]t['\"]\s*:\s*['\"])bv\b",
                "captcha-delivery.com",
                hard=True,
            ),
            _header("x-dd-b", "x-dd-b", values=("1", "2")),
            _header("x-datadome", "x-datadome", exclude=("protected",)),
            _header("x-datadome-cid", "x-datadome-cid", needs_block_status=True),
            _regex(
                "t=fe",
                r"(?:[?&;]t=|\\u0026t=|['\"]t['\"]\s*:\s*['\"])fe\b",
                "captcha-delivery.com",
            ),
            # The challenge document: its ``var dd={...}`` object or the captcha host. A normal
            # page whose DataDome tag names a captcha-delivery.com endpoint is not one.
            _body("captcha-delivery", "geo.captcha-delivery.com"),
            _body("captcha-delivery", "var dd={", requires=("captcha-delivery.com",)),
        ),
        "perimeterx": (
            _body("px-captcha", "captcha.px-cdn.net"),
            _title("title", "access to this page has been blocked", "access to this page has been denied"),
            _body("blocked", "access to this page has been blocked", interstitial=True),
            _body("press-and-hold", "please verify you are a human", interstitial=True),
            # The PX sensor snippet sets window._pxAppId on normal pages too.
            _body("pxappid", "window._pxappid", "_pxaction", needs_block_status=True),
        ),
        # Distil's (now Imperva's) "Pardon Our Interruption" pages: the real captures are Distil's,
        # not Akamai's (issue 12), so the title and text are attributed to Distil.
        "distil": (
            _body("captcha-form", "distilcaptchaform", "distil_r_captcha", "distilcallbackguard"),
            _body("identify", "distil_identify_cookie", "distil_r_blocked", needs_block_status=True),
            _title("pardon-our-interruption", "pardon our interruption"),
            _body("pardon-our-interruption", "pardon our interruption", interstitial=True),
        ),
        "akamai": (
            _regex(
                "reference",
                # Raw pages write it with entities: "Reference&#32;&#35;18&#46;2d351ab8&#46;...";
                # some edges omit the '#' ("Reference 0.44fd733e.1623606286.2420bfcb"): then the
                # id must have Akamai's shape (hex, a ten-digit epoch, hex), not an IP address.
                r"reference(?:\s|&#32;)*(?:(?:#|&#35;)(?:\s|&#32;)*\d+(?:\.|&#46;)[0-9a-f]+(?:\.|&#46;)\d+(?:\.|&#46;)[0-9a-f]+"
                r"|\d{1,3}(?:\.|&#46;)[0-9a-f]{6,}(?:\.|&#46;)\d{10}(?:\.|&#46;)[0-9a-f]{6,})",
                "reference",
                hard=True,
                interstitial=True,
                requires=("access denied",),
            ),
        ),
        "imperva": (
            # Imperva injects a _Incapsula_Resource *script* into normal pages; the block and
            # challenge pages load it in an iframe.
            _regex("incapsula-iframe", r"<iframe[^>]{0,300}_incapsula_resource", "_incapsula_resource"),
            _body("incident-id", "incapsula incident id", interstitial=True),
        ),
        "sucuri": (
            _header("x-sucuri-block", "x-sucuri-block", hard=True),
            _body("firewall-block", "sucuri-firewall-block", hard=True, needs_block_status=True),
            _title("access-denied", "sucuri website firewall", hard=True, requires=("access denied",)),
            _body(
                "access-denied",
                "sucuri website firewall",
                hard=True,
                interstitial=True,
                requires=("access denied",),
            ),
            # The firewall's CAPTCHA and JavaScript challenge pages.
            _title("title", "sucuri website firewall", interstitial=True),
            _body("cloudproxy-js", "sucuri_cloudproxy_js", interstitial=True),
        ),
        "kasada": (
            _header("x-kpsdk", "x-kpsdk-*", "x-kasada", "x-kasada-challenge", needs_block_status=True),
            _body("kpsdk", "kpsdk.scriptstart", needs_block_status=True),
        ),
        "vercel": (
            _header("x-vercel-mitigated", "x-vercel-mitigated", values=("deny",), hard=True),
            _header("x-vercel-mitigated", "x-vercel-mitigated", values=("challenge",)),
            _title("title", "vercel security checkpoint"),
        ),
        "ddos-guard": (_title("title", "ddos-guard", interstitial=True),),
        "anubis": (
            _body("challenge", "anubis_challenge", interstitial=True),
            _title(
                "title",
                "making sure you're not a bot",
                "making sure you&#39;re not a bot",
                "making sure you\u2019re not a bot",
            ),
        ),
        # Before F5: RedShield's deny page also prints a "Support ID" number.
        "redshield": (_body("blocked", "red-shield.net", hard=True, interstitial=True, requires=("support id",)),),
        # BIG-IP ASM / Advanced WAF blocking page: a policy rejection, which a browser does not
        # pass, so a hard block whether or not the page names a ban (issue 26). The default page is titled "Request Rejected", says "The requested URL
        # was rejected. Please consult with your administrator.", prints "Your support ID is:
        # <number>" and links "javascript:history.back();"; sites reword the text and keep the
        # title and the Go Back link, or keep the sentence and call the id a "reference ID".
        "f5": (
            _body(
                "asm-rejected",
                "the requested url was rejected",
                hard=True,
                interstitial=True,
                requires=("support id",),
            ),
            _body("asm-rejected", "the requested url was rejected", hard=True, interstitial=True, short_page=True),
            _title("asm-rejected", "request rejected", hard=True, interstitial=True, requires=("support id",)),
            _title(
                "asm-rejected",
                "request rejected",
                hard=True,
                interstitial=True,
                short_page=True,
                requires=("history.back()",),
            ),
            # Translated pages keep the support ID, ASM's 17-20 digit request number.
            _regex(
                "asm-rejected",
                r"support id[^<0-9]{0,40}(?:<[^>]{0,40}>\s*){0,2}\d{17,20}\b",
                "support id",
                hard=True,
                interstitial=True,
                short_page=True,
            ),
        ),
        # ModSecurity's Apache error pages (406/501/403) say which module refused the request.
        "modsecurity": (
            _regex(
                "blocked",
                r"(?:generated|blocked) by mod_security|rules of the mod_security module|mod_security rules triggered",
                "mod_security",
                hard=True,
                interstitial=True,
                short_page=True,
            ),
            _regex(
                "blocked",
                r"(?:generated|blocked) by modsecurity",
                "modsecurity",
                hard=True,
                interstitial=True,
                short_page=True,
            ),
        ),
        # Indusface AppTrana (``Server: IF_WAF``, not used: it is on every page it passes).
        "indusface": (
            _body(
                "blocked",
                "secured against online attacks",
                hard=True,
                interstitial=True,
                requires=("your request was blocked",),
            ),
        ),
        # WTS-WAF (``Server: wts/<version>``): title and heading "WTS-WAF拦截提示/详情".
        "wts": (_title("blocked", "wts-waf", hard=True, interstitial=True, short_page=True),),
        # ConfigServer Security & Firewall (csf/lfd) deny page for a blocked IP address. Its newer
        # page lets a person unblock the address with a reCAPTCHA: then a challenge.
        "csf": (
            _body(
                "ip-blocked",
                "blocked in this server",
                "on this server is blocking",
                hard=True,
                interstitial=True,
                short_page=True,
                unless=("g-recaptcha",),
            ),
            _body(
                "ip-blocked-captcha",
                "blocked in this server",
                "on this server is blocking",
                interstitial=True,
                short_page=True,
            ),
        ),
        # HAProxy's built-in 403 for ``http-request deny`` (GitHub's API sends it too).
        "haproxy": (_body("deny", "forbidden by administrative rules", hard=True, interstitial=True, short_page=True),),
        # Wordfence (WordPress plugin): its block, lockout and rate-limit pages ("Your access to
        # this site has been limited by the site owner", "A potentially unsafe operation has been
        # detected in your request to this site") all end "Generated by Wordfence at <date>".
        "wordfence": (_body("blocked", "generated by wordfence at", hard=True, interstitial=True),),
        # Chinese cloud WAFs' deny pages (wafw00f's and WhatWaf's fingerprints). Knownsec's
        # Jiasule / Chuangyu edge writes its "Request denied" text from a script into
        # ``<span class="r-tip01">``.
        "jiasule": (_body("blocked", "document.write(error_403)", "notice-jiasule", hard=True, interstitial=True),),
        "chuangyu": (_body("blocked", "cyd-error-help", hard=True, interstitial=True),),
        "knownsec": (_body("blocked", "ks-waf-error.png", "ks_waf_error.png", hard=True, interstitial=True),),
        "yundun": (
            _body(
                "blocked",
                "yundun cloud waf",
                "yd-http-error",
                "yd_http_error",
                hard=True,
                interstitial=True,
            ),
        ),
        "safedog": (_body("blocked", "safedogsite/", hard=True, interstitial=True),),
        "anquanbao": (_body("blocked", "aqb_cc/error/", hard=True, interstitial=True),),
        # "Sorry, your request has been blocked as it may cause potential threats to the server's
        # security."
        "aliyun": (
            _body(
                "blocked",
                "may cause potential threats",
                hard=True,
                interstitial=True,
                requires=("your request has been blocked",),
            ),
        ),
        "zyte": (_header("crawlera-banned", "x-crawlera-error", values=("banned",)),),
        "amazon": (
            # The robot-check captcha form; Amazon's normal pages never post to it.
            _body("captcha", "/errors/validatecaptcha", "csm-captcha-instrumentation"),
            _title("robot-check", "robot check", interstitial=True),
        ),
        # Reddit's block pages, served as 403/429 without a vendor header.
        "reddit": (
            _body("blocked", "blocked by network security", hard=True, interstitial=True, short_page=True),
            _body("blocked", "whoa there, pardner", hard=True, interstitial=True, short_page=True),
        ),
        "google": (
            _body("sorry", 'action="/sorry/index"', "action='/sorry/index'"),
            # The /sorry/index page itself posts its captcha form to the relative "index".
            _body(
                "sorry",
                'id="captcha-form" action="index"',
                "id='captcha-form' action='index'",
                interstitial=True,
                requires=("unusual traffic",),
            ),
        ),
        "sina": (_title("visitor-system", "sina visitor system"),),
        "fastly": (_title("client-challenge", "client challenge", interstitial=True),),
        # CHEQ's script on its 403 "Access Denied" page (the sensor also runs on normal pages).
        "cheq": (_body("access-denied", "cheqzone.com", "cheqsdk", needs_block_status=True),),
        "linkedin": (_status("999", 999),),
        "captcha": (
            # Contact and login forms carry these on normal pages: only with a block status.
            _body("recaptcha", "g-recaptcha", "grecaptcha.render", "grecaptcha.execute", needs_block_status=True),
            _body("hcaptcha", "h-captcha", "hcaptcha.com", needs_block_status=True),
            _body("friendly-captcha", "frc-captcha", needs_block_status=True),
        ),
        "arkose": (_body("funcaptcha", "arkoselabs.com", "funcaptcha", needs_block_status=True),),
        "tencent": (
            # Tencent Cloud WAF's deny page (it redirects to, or loads, waf.tencent-cloud.com/403page).
            _body(
                "waf-blocked",
                "waf.tencent",
                "\u817e\u8baf\u4e91web\u5e94\u7528\u9632\u706b\u5899",  # "Tencent Cloud web application firewall"
                hard=True,
                interstitial=True,
            ),
            _body("captcha", "turing.captcha.qcloud.com", "tencentcaptcha", needs_block_status=True),
        ),
        "geetest": (_body("captcha", "geetest", needs_block_status=True),),
        # Last: anything more specific names the vendor first.
        "generic": (
            # A firewall's own words that the request or the address is refused, on a page that
            # shows nothing else (short_page): a ban, not a test a browser passes. Articles and
            # forum posts quoting the words are long or have many links; a login form's
            # "your account has been blocked" is not among them.
            _regex(
                "blocked",
                r"your request (?:has been |was |to this object is )?blocked",
                "your request",
                hard=True,
                interstitial=True,
                short_page=True,
                outside_scripts=True,
            ),
            _regex(
                "blocked",
                r"blocked (?:due to security rules|for security (?:reasons|purposes)|in view of security concerns)",
                "blocked ",
                hard=True,
                interstitial=True,
                short_page=True,
                outside_scripts=True,
            ),
            _regex(
                "blocked",
                # Not a question about it ("check if your IP is blocked").
                r"(?<!if )(?<!whether )your ip(?: address)? (?:has been|is) (?:banned|blocked)",
                "your ip",
                hard=True,
                interstitial=True,
                short_page=True,
                outside_scripts=True,
            ),
            _body(
                "blocked",
                "attack detected",
                hard=True,
                interstitial=True,
                short_page=True,
                outside_scripts=True,
                unless=("no attack detected",),
            ),
            # The same refusals in the main languages of the web (issue 26). Body scans lowercase
            # ASCII only, so a Cyrillic phrase that may open a sentence leaves out its first letter.
            _body(
                "blocked",
                *DENY_PHRASES,
                hard=True,
                interstitial=True,
                short_page=True,
                outside_scripts=True,
            ),
            _title("blocked", "application firewall error", hard=True, interstitial=True, short_page=True),
            _body(
                "blocked",
                "malicious activity",
                hard=True,
                interstitial=True,
                short_page=True,
                outside_scripts=True,
                requires=("blocked",),
            ),
            # Cloudflare's legacy interstitial, DDoS-Guard and others all say it.
            _body("checking-browser", "checking your browser", interstitial=True),
            _status("429", 429),
            # "I'm a teapot": some CDNs and bot managers answer bots with it (Douban's "cdn error").
            _status("418", 418),
        ),
    }
)


def _clean_name(pattern: str) -> str:
    name = "-".join(pattern.lower().split())
    return name[:40] or "marker"


def merge_markers(extra: Mapping[str, tuple[str, ...]] | None = None) -> dict[str, tuple[Marker, ...]]:
    """The built-in markers plus user strings (``DOMAINSTATE_CHALLENGE_MARKERS``).

    User strings are soft body markers, matched case-insensitively, named after the string
    itself; a vendor already in the list gets them after its own markers. ``generic`` stays
    last so that a user's vendor name wins over a bare 429.
    """
    merged = {vendor: tuple(markers) for vendor, markers in BUILTIN_MARKERS.items() if vendor != "generic"}
    for vendor, given in (extra or {}).items():
        strings = (given,) if isinstance(given, str) else given
        added = tuple(_body(_clean_name(s), s.lower()) for s in strings if isinstance(s, str) and s.strip())
        if added:
            merged[str(vendor)] = merged.get(str(vendor), ()) + added
    merged["generic"] = BUILTIN_MARKERS["generic"]
    return merged


# ------------------------------------------------------------------ structural cues
#
# Beyond the marker list, the classifier recognises an *interstitial*: a page with little
# visible text, few links and no form a person fills in, whose title or text asks the visitor
# to verify, wait or prove they are human, or that carries a captcha widget, or that is empty
# but for a vendor's challenge script. The cues below are only read on such pages: on a real
# page (an article, a shop, a login form) they are nothing.

#: Words of a page that asks the visitor to verify, wait or prove they are human (title or
#: visible text of an interstitial-shaped page), lower case.
VERIFY_PHRASES: tuple[str, ...] = (
    "verify you are human",
    "verify you are a human",
    "verify you're human",
    "verify you\u2019re human",
    "verify that you are human",
    "verifying you are human",
    "verify to continue",
    "confirm you are human",
    "confirm that you're human",
    "confirm that you\u2019re human",
    "confirm you are not a robot",
    "prove you are human",
    "prove you're human",
    "are you a robot",
    "are you a human",
    "robot or human",
    "not a robot",
    "human verification",
    "bot verification",
    "security check",
    "security verification",
    "checking your browser",
    "checking if the site connection is secure",
    "just a moment",
    "one more step",
    "please stand by",
    "please wait while we verify",
    "client challenge",
    "pardon our interruption",
    "unusual traffic",
    "automated queries",
    "using automation tools",
    "visitor system",
    "making sure you're not a bot",
    "making sure you&#39;re not a bot",
    "ddos protection by",
    "request unsuccessful",
    "request blocked",
    "please enable js and disable any ad blocker",
    "enable javascript and cookies to continue",
    "v\u00e9rification en cours",
    "sentimos la interrupci\u00f3n",
    "\u5b89\u5168\u9a8c\u8bc1",  # Chinese "security verification"
    "\u4eba\u673a\u9a8c\u8bc1",  # Chinese "human verification"
    "\u5f00\u59cb\u9a8c\u8bc1",  # Chinese "start verification"
    # Issue 26: the wording of challenge pages in the main languages of the web. Scans lowercase
    # ASCII only: a Cyrillic phrase that may open a sentence leaves out its first letter.
    "не робот",  # "I'm not a robot" / "are you not a robot?"
    "что запросы отправляли вы",  # Yandex: "confirm that the requests were sent by you"
    "роверка браузера",  # "browser check"
    "роверка безопасности",  # "security check"
    "дин момент\u2026",  # Cloudflare's "One moment..." title
    "请完成安全验证",
    "验证您是真人",
    "确认您是真人",
    "正在检查您的浏览器",
    "请稍候\u2026",  # Cloudflare's "please wait..." title
    "しばらくお待ちください\u2026",
    "人間であることを確認",
    "ロボットではありません",
    "un momento\u2026",
    "verifique que es humano",
    "verifica que eres humano",
    "comprobando tu navegador",
    "comprobando su navegador",
    "no soy un robot",
    "um momento\u2026",
    "verifique se você é humano",
    "confirme que você é humano",
    "verificando seu navegador",
    "não sou um robô",
    "einen moment\u2026",
    "bestätigen sie, dass sie ein mensch sind",
    "ihr browser wird überprüft",
    "sicherheitsüberprüfung",
    "ich bin kein roboter",
    "un instant\u2026",
    "vérifiez que vous êtes humain",
    "vérification de votre navigateur",
    "vérification de sécurité",
    "je ne suis pas un robot",
)

#: Captcha widgets: vendor -> (evidence name, literals). On an interstitial-shaped page
#: without a form field for a person, a widget makes the page a captcha wall.
CAPTCHA_WIDGETS: Mapping[str, tuple[str, tuple[str, ...]]] = MappingProxyType(
    {
        # The widget *elements*, not the vendors' API scripts: single-page apps load those
        # scripts in an empty shell and render their login form later.
        "perimeterx": ("px-captcha", ('id="px-captcha"',)),
        "datadome": ("captcha", ("geo.captcha-delivery.com",)),
        "cloudflare": ("turnstile", ("cf-turnstile",)),
        "tencent": ("captcha", ('id="tencentcaptcha"',)),
        # Yandex SmartCaptcha's container and Yandex's own captcha page (its checkbox widget
        # and the /checkcaptcha form).
        "yandex": ("smartcaptcha", ('class="smart-captcha"', "checkboxcaptcha", "/checkcaptcha")),
        "captcha": ("captcha-wall", ("g-recaptcha", "h-captcha", "frc-captcha")),
    }
)

#: Challenge scripts: vendor -> (evidence name, literals). A page that is empty but for one
#: of these (no visible text, no links, a handful of scripts) is that vendor's challenge.
CHALLENGE_SCRIPTS: Mapping[str, tuple[str, tuple[str, ...]]] = MappingProxyType(
    {
        # Not /cdn-cgi/challenge-platform/: Cloudflare injects that beacon into normal pages,
        # tiny ones included. Bot Fight Mode's interstitial loads /cdn-cgi/bm/cv/.
        "cloudflare": ("script-wall", ("/cdn-cgi/bm/cv/",)),
        "imperva": ("script-wall", ("_incapsula_resource",)),
        # Only what a vendor serves *instead of* a page: the sensors bot managers put on
        # every normal page (DataDome's js.datadome.co tag, PerimeterX's _pxAppId snippet and
        # client.perimeterx.net script, Akamai's /akam/ sensor) never make one a challenge.
        "perimeterx": ("script-wall", ("px-cdn.net",)),
        "datadome": ("script-wall", ("captcha-delivery.com",)),
        "akamai": ("script-wall", ("bmak.",)),
        "aws": ("script-wall", ("awswaf.com", "awswafintegration", "aws-waf-token")),
        "kasada": ("script-wall", ("kpsdk",)),
        "fastly": ("script-wall", ("/_fs-ch-",)),
        "sina": ("script-wall", ("/js/visitor/", "passport.sinaimg.cn")),
        "cheq": ("script-wall", ("cheqzone.com", "cheqsdk")),
        "anubis": ("script-wall", ("/.within.website/",)),
        "sucuri": ("script-wall", ("sucuri_cloudproxy",)),
        "distil": ("script-wall", ("distil_", "/dspf.js")),
        "vercel": ("script-wall", ("/vercel/security/",)),
        "ddos-guard": ("script-wall", ("ddos-guard",)),
        # Captcha providers' scripts only name the vendor of a page found by another cue.
        "arkose": ("script-wall", ("arkoselabs.com", "funcaptcha")),
        "tencent": ("script-wall", ("turing.captcha.qcloud.com", "tencentcaptcha", "captcha.qq.com")),
        "geetest": ("script-wall", ("geetest",)),
        "captcha": ("script-wall", ("recaptcha/api.js", "recaptcha/enterprise.js", "hcaptcha.com/1/api.js")),
    }
)

#: Vendors of :data:`CHALLENGE_SCRIPTS` whose script alone never makes an empty page a challenge.
NAMING_ONLY: frozenset[str] = frozenset({"arkose", "tencent", "geetest", "captcha"})

#: Which vendor a structural verdict names when several cues are present: bot managers (whose
#: pages embed third-party captchas) before captcha providers, ``generic`` when none.
HINT_VENDOR_ORDER: tuple[str, ...] = (
    "cloudflare",
    "imperva",
    "perimeterx",
    "datadome",
    "akamai",
    "aws",
    "kasada",
    "fastly",
    "sina",
    "cheq",
    "anubis",
    "sucuri",
    "distil",
    "vercel",
    "ddos-guard",
    "arkose",
    "tencent",
    "geetest",
    "yandex",
    "captcha",
)


# ------------------------------------------------------------------ parked and for-sale domains

#: Only home pages up to this size are checked for parking (landers are small: the largest
#: measured one is 42 KB).
PARKED_MAX_BYTES = 100_000
#: Markup and phrase cues count only on a lander-shaped page: less visible text than this
#: (the landers measured show at most ~1,000 characters; a for-sale page named by its title
#: may show more).
LANDER_MAX_TEXT = 2000
#: ... and at most this many bytes (the landers measured that no title names are at most 11 KB).
LANDER_MAX_BYTES = 32 * 1024

#: A title that names the page a parking or for-sale page: ``(service, regex)``, tried in
#: order on the lowercased ``<title>``: ``(label, key, regex)``. The literal the regex needs
#: (``key``) is what the body scan looks for first. The page is credited to the service the
#: title names (the regex's ``svc`` group), else to the service its markup names, else to
#: ``label``.
PARKING_TITLES: tuple[tuple[str, str, str], ...] = (
    ("for-sale", " is for sale", r"[a-z0-9-]+\.[a-z]{2,}\s+is for sale\b(?: on (?P<svc>[a-z0-9-]+))?"),
    ("registrar", "registered at ", r"^\S+\.[a-z]{2,}\s+-\s+registered at (?P<svc>[a-z0-9-]+)"),
    ("registrar", "parked at ", r"^parked at (?P<svc>[a-z0-9-]+)"),
    ("registrar", "domain parked by ", r"^domain parked by (?P<svc>[a-z0-9-]+)"),
    ("registrar", "future home of ", r"^future home of \S+\.[a-z]{2,}"),
    ("registrar", "registrado en ", r"^\S+\.[a-z]{2,}\s+\|\s+registrado en (?P<svc>[a-z0-9-]+)"),
    ("registry", "reserved from registration", r"^reserved from registration$"),
    ("markmonitor", "protected by markmonitor", r"^registered (?:&amp;|&|and) protected by markmonitor$"),
    # a web host's placeholder for a domain with no site yet
    ("host-default", "domain nicht aktiv", r"^domain nicht aktiv\b"),
    (
        "host-default",
        "hosting account is now ready",
        r"^default page - hosting account is now ready(?: \| powered by (?P<svc>[a-z0-9-]+))?",
    ),
)

#: Markup only parking services serve (their lander scripts, asset hosts, ad feeds), by the
#: service the page is credited to (first match in this order). Counted on a lander-shaped
#: page (:data:`LANDER_MAX_BYTES`, :data:`LANDER_MAX_TEXT`) when the literal is not part of
#: the visible text.
#: ``adsense/domains/caf.js`` is Google's AdSense for Domains, sold to parking services only;
#: ``data-adblockkey`` is the key parking landers show ad blockers (Sedo, ParkingCrew, Bodis).
PARKING_MARKUP: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "godaddy": ("window.lander_system", "img1.wsimg.com/parking-lander"),
        "sedo": ("sedoparking.com",),
        "parkingcrew": ("parkingcrew.net", "i.cdnpark.com"),
        "bodis": ("bodis.com/", "bodiscdn.com"),
        "hugedomains": ("static.hugedomains.com",),
        "dan": ("dan.com/buy-domain", "undeveloped.com"),
        "afternic": ("afternic.com/forsale",),
        "above": ("above.com/marketplace",),
        "101domain": ("park.101datacenter.net",),
        "dondominio": ("dondominio parking page",),
        "onlydomains": ("utm_medium=free_parking",),
        "match.it": ("www.match.it/piv.ashx",),
        "4.cn": ("www.4.cn/search/detail/",),
        "ename": (".shop.ename.com",),
        "wdcp": ("www.wdlinux.cn/wdcp",),
        "ru-center": ("www.nic.ru/hcp",),
        "acquia": ("acquia_default_html_installed",),
        "bravenet": ("bravenet error/expired pages",),
        "adsense-for-domains": ("adsense/domains/caf.js",),
        "lander": ("data-adblockkey",),
    }
)

#: Sentences of parking and for-sale pages, counted in the visible text of a lander-shaped page.
PARKING_PHRASES: tuple[str, ...] = (
    "this domain may be for sale",
    "this domain is for sale",
    "buy this domain",
    "this domain is parked",
    "this domain has been reserved from registration",
    "this domain is registered and protected by markmonitor",
    "parked free, courtesy of",
    "is parked free of charge",
    "bienvenido a la página de parking",
    # web hosts' placeholders (cPanel and others, wdcp, FireStorm, a suspended account)
    "into the public_html",
    "public_html目录",
    "diese website hat noch keinen inhalt",
    "this website has been suspended",
    "this account has been suspended",
    # Chinese marketplaces' listing pages ("the domain you visit is for sale at a fixed price")
    "您访问的域名正在一口价出售中",
)

#: Response headers parking services send with their landers (the key of ``data-adblockkey``).
PARKING_HEADERS: tuple[str, ...] = ("x-adblock-key",)
