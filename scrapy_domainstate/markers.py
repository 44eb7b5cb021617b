"""The anti-bot marker list: what block and challenge responses look like, as data.

Each vendor maps to a tuple of :class:`Marker`. :class:`~scrapy_domainstate.classify.Classifier`
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
``DOMAINSTATE_BODY_SCAN_BYTES`` of the body; write them in lower case.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

__all__ = [
    "BLOCK_STATUSES",
    "BUILTIN_MARKERS",
    "SMALL_PAGE",
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
    ``requires``: literals that must also be in the body prefix.
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

#: The built-in list. Order matters: within hard and within soft markers, the first match
#: names the evidence, so specific markers come before generic ones; ``generic`` is last.
BUILTIN_MARKERS: Mapping[str, tuple[Marker, ...]] = MappingProxyType(
    {
        "cloudflare": (
            # Not in Cloudflare's documentation, but widely assumed; the spec treats it as hard.
            _header("cf-mitigated", "cf-mitigated", values=("block",), hard=True),
            # Firewall-rule / ban error pages: 1005-1009 (ASN, IP, country bans), 1010 (browser
            # signature), 1012 (access denied), 1015 (rate limited), 1020 (firewall rule).
            # Other 10xx codes (1016 origin DNS error, ...) are not blocks.
            _regex(
                "{}",
                r'cf-error-code["\']?>\s*(10(?:0[5-9]|1[025]|20))\s*<',
                "cf-error-code",
                hard=True,
                needs_block_status=True,
            ),
            _body("blocked", "sorry, you have been blocked", hard=True, interstitial=True),
            _title("attention-required", "attention required! | cloudflare", hard=True),
            _header("cf-mitigated", "cf-mitigated", values=("challenge",)),
            _title("title", "just a moment...", "just a moment\u2026"),
            _body("cf_chl_opt", "_cf_chl_opt"),
            _body("cf_chl_ctx", "_cf_chl_ctx"),
            _body("challenge-form", 'id="challenge-form"', "id='challenge-form'", interstitial=True),
            _body("cf_chl_tk", "__cf_chl_f_tk=", "__cf_chl_rt_tk=", "__cf_chl_tk=", "__cf_chl_jschl_tk__"),
            _regex(
                "orchestrate",
                r"/cdn-cgi/challenge-platform/[^\"'\s<>]{0,120}?/orchestrate/(?:jsch|captcha|managed|chl_page)/v\d",
                "challenge-platform/",
                interstitial=True,
            ),
            _body("verifying-human", "verifying you are human", interstitial=True),
            # Turnstile is embedded in normal login forms: only on a challenge status.
            _body("turnstile", "cf-turnstile", "cf-chl-widget-", needs_block_status=True),
            # Cloudflare in front of a 403/429/503 with no page we recognise: still a challenge.
            _header("cf-ray", "cf-ray", needs_block_status=True, statuses=_CF_BLOCK_STATUSES),
        ),
        "aws": (
            _header("x-amzn-waf-action", "x-amzn-waf-action", values=("challenge", "captcha")),
            _header("x-blocked-by-waf", "x-blocked-by-waf"),
            # The WAF's JS SDK is also embedded in normal pages: only on the WAF's statuses.
            _body("awswaf", "awswaf.com", "/awswaf/", needs_block_status=True, statuses=_AWS_STATUSES),
            _body(
                "cloudfront",
                "the request could not be satisfied",
                needs_block_status=True,
                statuses=frozenset({403}),
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
            _body("captcha-delivery", "captcha-delivery.com"),
        ),
        "perimeterx": (
            _body("px-captcha", "captcha.px-cdn.net"),
            _title("title", "access to this page has been blocked"),
            _body("blocked", "access to this page has been blocked", interstitial=True),
            _body("press-and-hold", "please verify you are a human", interstitial=True),
            # The PX sensor snippet sets window._pxAppId on normal pages too.
            _body("pxappid", "window._pxappid", "_pxaction", needs_block_status=True),
        ),
        "akamai": (
            _regex(
                "reference",
                # Raw pages write it with entities: "Reference&#32;&#35;18&#46;2d351ab8&#46;...".
                r"reference(?:\s|&#32;)*(?:#|&#35;)(?:\s|&#32;)*\d+(?:\.|&#46;)[0-9a-f]+(?:\.|&#46;)\d+(?:\.|&#46;)[0-9a-f]+",
                "reference",
                hard=True,
                interstitial=True,
                requires=("access denied",),
            ),
            _title("pardon-our-interruption", "pardon our interruption"),
            _body("pardon-our-interruption", "pardon our interruption", interstitial=True),
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
        "distil": (_body("captcha-form", "distilcaptchaform"),),
        "f5": (
            _body(
                "asm-rejected",
                "the requested url was rejected",
                interstitial=True,
                requires=("support id",),
            ),
        ),
        "zyte": (_header("crawlera-banned", "x-crawlera-error", values=("banned",)),),
        "linkedin": (_status("999", 999),),
        "captcha": (
            # Contact and login forms carry these on normal pages: only with a block status.
            _body("recaptcha", "g-recaptcha", "grecaptcha.render", "grecaptcha.execute", needs_block_status=True),
            _body("hcaptcha", "h-captcha", "hcaptcha.com", needs_block_status=True),
            _body("arkose", "arkoselabs.com", "funcaptcha", needs_block_status=True),
            _body("geetest", "geetest", needs_block_status=True),
            _body("friendly-captcha", "frc-captcha", needs_block_status=True),
        ),
        # Last: anything more specific names the vendor first.
        "generic": (
            # Cloudflare's legacy interstitial, DDoS-Guard and others all say it.
            _body("checking-browser", "checking your browser", interstitial=True),
            _status("429", 429),
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
