"""The classifier: anti-bot markers, HEAD/GET rules, failures and certificates.

Pages are small realistic copies of what each vendor serves (docs/ANTIBOT-MARKERS.md); failures
are real Scrapy/Twisted/OpenSSL exception instances, wrapped the way Scrapy 2.19's download
handlers wrap them; certificates are generated here with ``cryptography`` and handed over
the way Scrapy delivers them (``twisted.internet.ssl.Certificate`` or DER bytes).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import re
import socket
import ssl
import time
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from OpenSSL import SSL, crypto
from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadCancelledError,
    DownloadConnectionRefusedError,
    DownloadFailedError,
    DownloadTimeoutError,
    ResponseDataLossError,
)
from scrapy.http import Headers, HtmlResponse, Request
from twisted.internet import error as txerror
from twisted.internet.ssl import Certificate
from twisted.names import error as dnserror
from twisted.python.failure import Failure
from twisted.web._newclient import ResponseFailed, ResponseNeverReceived

from scrapy_domainstate.core.clock import DAY
from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.record import Outcome
from scrapy_domainstate.detect.classify import Classifier
from scrapy_domainstate.detect.headers import normalize_headers
from scrapy_domainstate.detect.markers import BUILTIN_MARKERS, SMALL_PAGE, merge_markers
from scrapy_domainstate.detect.verdict import Verdict

ANTIBOT = Outcome.ANTIBOT
DEAD = Outcome.DEAD
HTTP_ERROR = Outcome.HTTP_ERROR
NET = Outcome.NETWORK_ERROR
OK_EMPTY = Outcome.OK_EMPTY
NO_VERDICT = Outcome.NO_VERDICT

CLASSIFIER = Classifier()
CF = {"Server": "cloudflare", "CF-RAY": "8f1c2d3e4a5b6c7d-FRA", "Content-Type": "text/html; charset=UTF-8"}


def filler(size: int) -> str:
    """Ordinary article markup of about ``size`` bytes."""
    para = (
        "<p>Our workshop in Leipzig restores mechanical watches and clocks. We publish notes on "
        "movements, escapements and the history of the trade, with photos of every step.</p>\n"
    )
    return para * (size // len(para) + 1)


def normal_page(
    extra_head: str = "", extra_body: str = "", size: int = 40_000, title: str = "Watch restoration notes"
) -> bytes:
    return (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{title}</title>"
        f"{extra_head}</head><body><header><nav><a href='/'>Home</a> <a href='/about'>About</a></nav></header>"
        f"<main><h1>Restoring a 1950s chronograph</h1>{filler(size)}{extra_body}</main></body></html>"
    ).encode()


# ---------------------------------------------------------------------------------------------
# Vendor pages

CF_MANAGED = """<!DOCTYPE html><html lang="en-US"><head><title>Just a moment...</title>
<meta http-equiv="Content-Type" content="text/html; charset=UTF-8"><meta name="robots" content="noindex,nofollow">
<style>*{box-sizing:border-box;margin:0;padding:0}html{line-height:1.15}</style></head><body>
<div class="main-wrapper" role="main"><div class="main-content"><h1 class="zone-name-title h1">www.example.com</h1>
<h2 class="h2" id="challenge-running">Verifying you are human. This may take a few seconds.</h2>
<noscript><div class="h2"><span id="challenge-error-text">Enable JavaScript and cookies to continue</span></div></noscript>
</div></div><script>(function(){window._cf_chl_opt={cvId: '3',cZone: "www.example.com",cType: 'managed',
cRay: '8f1c2d3e4a5b6c7d',cH: 'xyz',cUPMDTk: "\\/?__cf_chl_tk=abc-1700000000-0-gaNycGzNCyU",
cFPWv: 'g',cITimeS: '1700000000'};var cpo=document.createElement('script');
cpo.src='/cdn-cgi/challenge-platform/h/g/orchestrate/chl_page/v1?ray=8f1c2d3e4a5b6c7d';
document.getElementsByTagName('head')[0].appendChild(cpo);}());</script></body></html>"""

CF_IUAM_LEGACY = """<!DOCTYPE HTML><html lang="en-US"><head><meta charset="UTF-8" />
<meta name="robots" content="noindex, nofollow" /><title>Please wait</title></head><body>
<table width="100%" height="100%" cellpadding="20"><tr><td align="center" valign="middle">
<div class="cf-browser-verification cf-im-under-attack"><noscript><h1>Please turn JavaScript on.</h1></noscript>
<div id="cf-content"><h1><span data-translate="checking_browser">Checking your browser before accessing</span>
example.com.</h1></div>
<form class="challenge-form" id="challenge-form" action="/?__cf_chl_jschl_tk__=abc123" method="POST">
<input type="hidden" name="r" value="xyz"/></form></div></td></tr></table></body></html>"""

CF_BLOCK_1020 = """<!DOCTYPE html><!--[if lt IE 7]> <html class="no-js ie6 oldie" lang="en-US"> <![endif]-->
<head><title>Attention Required! | Cloudflare</title><meta charset="UTF-8" />
<link rel="stylesheet" id="cf_styles-css" href="/cdn-cgi/styles/cf.errors.css" /></head><body>
<div id="cf-wrapper"><div id="cf-error-details" class="cf-error-details-wrapper"><div class="cf-wrapper cf-header cf-error-overview">
<h1 data-translate="block_headline">Sorry, you have been blocked</h1>
<h2 class="cf-subheadline"><span data-translate="unable_to_access">You are unable to access</span> example.com</h2>
</div><div class="cf-section cf-wrapper"><div class="cf-columns two"><div class="cf-column">
<h2 data-translate="blocked_why_headline">Why have I been blocked?</h2>
<p>This website is using a security service to protect itself from online attacks.</p></div></div></div>
<div class="cf-error-footer cf-wrapper"><p><span class="cf-footer-item">Cloudflare Ray ID: <strong>8f1c2d3e4a5b6c7d</strong></span>
<span class="cf-error-code">1020</span></p></div></div></div></body></html>"""

CF_1015 = CF_BLOCK_1020.replace("1020</span>", "1015</span>").replace(
    "Sorry, you have been blocked", "You are being rate limited"
)

CF_1016 = """<!DOCTYPE html><html><head><title>Origin DNS error | example.com | Cloudflare</title></head><body>
<div id="cf-error-details"><h1><span class="cf-error-type">Error</span><span class="cf-error-code">1016</span></h1>
<h2 class="cf-subheadline">Origin DNS error</h2></div></body></html>"""

TURNSTILE_CHALLENGE = """<!doctype html><html><head><title>Security check</title>
<script src="https://challenges.cloudflare.com/turnstile/v0/api.js" async defer></script></head>
<body><form method="post" action="/verify"><div class="cf-turnstile" data-sitekey="0x4AAAAAAABkMYinukE8nzY"></div>
<button type="submit">Continue</button></form></body></html>"""

AWS_CHALLENGE = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title></title>
<script type="text/javascript" src="https://3b1e4f.d5a7c9.eu-west-1.token.awswaf.com/3b1e4f/8c2d/challenge.js"></script>
<script>window.awsWafCookieDomainList = [];window.gokuProps = {"key":"AQIDAHjcYu","iv":"A6we","context":"xyz"};</script>
</head><body><div id="challenge-container"></div><script>AwsWafIntegration.checkForceRefresh().then((forceRefresh) => {
if (forceRefresh) { AwsWafIntegration.forceRefreshToken().then(() => { window.location.reload(true); }); }
else { AwsWafIntegration.getToken().then(() => { window.location.reload(true); }); } });</script>
<noscript><h1>JavaScript is disabled</h1></noscript></body></html>"""

AWS_CAPTCHA = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Human Verification</title>
<script type="text/javascript" src="https://3b1e4f.d5a7c9.eu-west-1.captcha.awswaf.com/3b1e4f/8c2d/jsapi.js"></script>
</head><body><div id="captcha-container"></div></body></html>"""


def datadome_page(t: str) -> str:
    return (
        "<html><head><title>example.com</title><style>#cmsg{animation: A 1.5s;}</style></head>"
        '<body style="margin:0"><p id="cmsg">Please enable JS and disable any ad blocker</p>'
        "<script data-cfasync=\"false\">var dd={'rt':'c','cid':'AHrlqAAAAAMAo0KBw9ZZ4WIALp8YcA==',"
        f"'hsh':'2211F522B61E269B869FA6EAFFB5E1','t':'{t}','s':45105,'e':'1f0e8b','host':'geo.captcha-delivery.com'}}"
        '</script><script data-cfasync="false" src="https://ct.captcha-delivery.com/c.js"></script></body></html>'
    )


DATADOME_JSON_BAN = (
    '{"url":"https://geo.captcha-delivery.com/captcha/?initialCid=AHrlqAAAAAMA&hash=2211F522B6&cid=x7y'
    '&t=bv&referer=https%3A%2F%2Fwww.example.com%2F&s=45105&e=1f0e8b"}'
)

PX_BLOCK = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<title>Access to this page has been blocked</title>
<link rel="stylesheet" type="text/css" href="https://captcha.px-cdn.net/PXu6b0qd2S/captcha.css"></head><body>
<section class="page-title"><h1>Please verify you are a human</h1></section>
<section class="center-wrapper"><div id="px-captcha"></div><p>Press &amp; Hold to confirm you are a human (and not a bot).</p></section>
<script>window._pxAppId = 'PXu6b0qd2S';window._pxJsClientSrc = '/u6b0qd2S/init.js';window._pxFirstPartyEnabled = true;
window._pxHostUrl = '/u6b0qd2S/xhr';</script>
<script src="https://captcha.px-cdn.net/PXu6b0qd2S/captcha.js?a=c&u=9f1e&v=&m=0"></script>
<div class="page-footer-wrapper"><p>Reference ID 6b2a-11ee-8f1c</p></div></body></html>"""

AKAMAI_RAW = """<HTML><HEAD>
<TITLE>Access Denied</TITLE>
</HEAD><BODY>
<H1>Access Denied</H1>

You don't have permission to access "http&#58;&#47;&#47;www&#46;example&#46;com&#47;" on this server.<P>
Reference&#32;&#35;18&#46;2d351ab8&#46;1557333295&#46;a4e16ab
<P>https&#58;&#47;&#47;errors&#46;edgesuite&#46;net&#47;18&#46;2d351ab8&#46;1557333295&#46;a4e16ab</P>
</BODY>
</HTML>
"""

AKAMAI_RENDERED = AKAMAI_RAW.replace(
    "Reference&#32;&#35;18&#46;2d351ab8&#46;1557333295&#46;a4e16ab", "Reference #18.2d351ab8.1557333295.a4e16ab"
)

DISTIL_PARDON = """<!DOCTYPE html><html><head><title>Pardon Our Interruption</title></head><body>
<div class="container"><h1>Pardon Our Interruption</h1><p>As you were browsing something about your browser made
us think you were a bot. There are a few reasons this might happen:</p><ul><li>You're a power user moving through
this website with super-human speed.</li><li>You've disabled cookies in your web browser.</li></ul></div></body></html>"""

IMPERVA = """<html style="height:100%"><head><META NAME="ROBOTS" CONTENT="NOINDEX, NOFOLLOW">
<meta name="format-detection" content="telephone=no"><meta name="viewport" content="initial-scale=1.0">
<meta http-equiv="X-UA-Compatible" content="IE=edge,chrome=1">
<script type="text/javascript" src="/_Incapsula_Resource?SWJIYLWA=719d34d31c8e3a6e6fffd425f7e032f3"></script></head>
<body style="margin:0px;height:100%"><iframe id="main-iframe" src="/_Incapsula_Resource?CWUDNSAI=24&xinfo=6-12345-0%200NNN%20RT&incident_id=1234-5678&edet=12&cinfo=04000000&rpinfo=0&mth=GET"
frameborder=0 width="100%" height="100%" marginheight="0px" marginwidth="0px">Request unsuccessful. Incapsula incident ID: 1234-5678</iframe></body></html>"""

SUCURI_BLOCK = """<!DOCTYPE html><html lang="en"><head>
<title>Sucuri WebSite Firewall - Access Denied</title>
<link rel="stylesheet" href="https://cdn.sucuri.net/sucuri-firewall-block.css" /></head><body>
<div id="main-container"><h1>Access Denied - Sucuri Website Firewall</h1>
<p>If you are the site owner (or you manage this site), please whitelist your IP or if you think this block is an
error please <a href="https://support.sucuri.net/">open a support ticket</a>.</p>
<table><tr><td>Block ID:</td><td>BNP005</td></tr><tr><td>Block reason:</td><td>Bad bot access attempt.</td></tr></table>
</div></body></html>"""

KASADA = """<!DOCTYPE html><html><head></head><body>
<script>window.KPSDK={};KPSDK.now=typeof performance!=='undefined'&&performance.now?function(){return performance.now()}:Date.now;
KPSDK.start=KPSDK.now();KPSDK.scriptStart=KPSDK.now();</script>
<script src="/149e9513-01fa-4fb0-aad4-566afd725d1b/2d206a39-8ed7-437e-a3be-862e0f06eea3/ips.js?tkrm_alpekz_s1.3=0EOFt"></script>
</body></html>"""

VERCEL = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Vercel Security Checkpoint</title>
<meta name="viewport" content="width=device-width,initial-scale=1"><link rel="stylesheet" href="/.well-known/vercel/security/static/challenge.v2.min.css">
</head><body><div class="container"><div class="content"><p class="header">We're verifying your browser</p>
<noscript><p>Enable JavaScript to continue</p></noscript></div></div>
<script src="/.well-known/vercel/security/static/challenge.v2.min.js" defer></script></body></html>"""

DDOS_GUARD = """<!DOCTYPE html><html><head><title>DDoS-Guard</title><meta charset="utf-8">
<script src="/.well-known/ddos-guard/check?context=free_splash"></script></head><body>
<div id="ddg-l10n-title">Checking your browser before accessing example.com</div>
<a id="link-ddg" href="https://ddos-guard.net/" target="_blank">DDoS protection by DDoS-Guard</a></body></html>"""

ANUBIS = """<!doctype html><html lang="en"><head><title>Making sure you&#39;re not a bot!</title>
<link rel="stylesheet" href="/.within.website/x/xess/xess.min.css"></head><body id="top"><main>
<h1 id="title" class="centered-div">Making sure you&#39;re not a bot!</h1>
<script id="anubis_version" type="application/json">"v1.17.0"</script>
<script id="anubis_challenge" type="application/json">{"challenge":"8a2f0e","rules":{"algorithm":"fast","difficulty":4}}</script>
<script async type="module" src="/.within.website/x/cmd/anubis/static/js/main.mjs"></script>
<p>Protected by <a href="https://github.com/TecharoHQ/anubis">Anubis</a> From <a href="https://techaro.lol">Techaro</a>.</p>
</main></body></html>"""

RECAPTCHA_WALL = """<!doctype html><html><head><title>Are you a robot?</title>
<script src="https://www.google.com/recaptcha/api.js" async defer></script></head><body>
<p>Our systems have detected unusual traffic from your network.</p>
<form action="/captcha" method="post"><div class="g-recaptcha" data-sitekey="6LeIxAcTAAAAAJcZVRqyHh71UMIEGNQ_MXjiZKhI"></div>
<input type="submit" value="Continue"></form></body></html>"""

HCAPTCHA_WALL = """<!doctype html><html><head><title>One more step</title>
<script src="https://js.hcaptcha.com/1/api.js" async defer></script></head><body>
<form method="post"><div class="h-captcha" data-sitekey="10000000-ffff-ffff-ffff-000000000001"></div></form></body></html>"""

F5_ASM = """<html><head><title>Request Rejected</title></head><body>The requested URL was rejected. Please
consult with your administrator.<br><br>Your support ID is: 1234567890123456789<br><br>
<a href='javascript:history.back();'>[Go Back]</a></body></html>"""

# (id, status, headers, body, expected error_class, hard)
ANTIBOT_CASES: list[tuple[str, int, dict[str, str], str, str, bool]] = [
    (
        "cloudflare-managed-header",
        403,
        {**CF, "cf-mitigated": "challenge"},
        CF_MANAGED,
        "challenge:cloudflare:cf-mitigated",
        False,
    ),
    ("cloudflare-managed-title", 403, CF, CF_MANAGED, "challenge:cloudflare:title", False),
    ("cloudflare-challenge-on-200", 200, {}, CF_MANAGED, "challenge:cloudflare:title", False),
    (
        "cloudflare-managed-no-title",
        503,
        {},
        CF_MANAGED.replace("Just a moment...", "One moment"),
        "challenge:cloudflare:cf_chl_opt",
        False,
    ),
    ("cloudflare-iuam-legacy", 503, CF, CF_IUAM_LEGACY, "challenge:cloudflare:challenge-form", False),
    ("cloudflare-turnstile-page", 403, {}, TURNSTILE_CHALLENGE, "challenge:cloudflare:turnstile", False),
    ("cloudflare-cf-ray-403", 403, CF, "<html><body>Forbidden</body></html>", "challenge:cloudflare:cf-ray", False),
    ("cloudflare-cf-ray-503", 503, CF, "", "challenge:cloudflare:cf-ray", False),
    ("cloudflare-1020", 403, CF, CF_BLOCK_1020, "block:cloudflare:1020", True),
    ("cloudflare-1015", 429, CF, CF_1015, "block:cloudflare:1015", True),
    ("cloudflare-attention-title", 403, {}, CF_BLOCK_1020.replace("1020", ""), "block:cloudflare:blocked", True),
    ("cloudflare-mitigated-block", 403, {**CF, "cf-mitigated": "block"}, "", "block:cloudflare:cf-mitigated", True),
    (
        "aws-challenge-202",
        202,
        {"x-amzn-waf-action": "challenge"},
        AWS_CHALLENGE,
        "challenge:aws:x-amzn-waf-action",
        False,
    ),
    ("aws-challenge-202-body-only", 202, {}, AWS_CHALLENGE, "challenge:aws:awswaf", False),
    ("aws-captcha-405", 405, {"x-amzn-waf-action": "captcha"}, AWS_CAPTCHA, "challenge:aws:x-amzn-waf-action", False),
    (
        "datadome-header",
        403,
        {"x-dd-b": "1", "x-datadome": "protected"},
        datadome_page("fe"),
        "challenge:datadome:x-dd-b",
        False,
    ),
    ("datadome-fe", 403, {}, datadome_page("fe"), "challenge:datadome:t=fe", False),
    ("datadome-bv", 403, {"x-dd-b": "2"}, datadome_page("bv"), "block:datadome:t=bv", True),
    ("datadome-json-bv", 403, {"Content-Type": "application/json"}, DATADOME_JSON_BAN, "block:datadome:t=bv", True),
    ("datadome-x-datadome", 403, {"X-DataDome": "1"}, "", "challenge:datadome:x-datadome", False),
    ("perimeterx", 403, {}, PX_BLOCK, "challenge:perimeterx:px-captcha", False),
    ("perimeterx-200", 200, {}, PX_BLOCK, "challenge:perimeterx:px-captcha", False),
    ("akamai-raw", 403, {"Server": "AkamaiGHost"}, AKAMAI_RAW, "block:akamai:reference", True),
    ("akamai-rendered", 403, {"Server": "AkamaiGHost"}, AKAMAI_RENDERED, "block:akamai:reference", True),
    ("distil-pardon", 200, {}, DISTIL_PARDON, "challenge:distil:pardon-our-interruption", False),
    (
        "imperva",
        200,
        {"X-CDN": "Imperva", "X-Iinfo": "6-12345-0 0NNN RT"},
        IMPERVA,
        "challenge:imperva:incapsula-iframe",
        False,
    ),
    (
        "sucuri-page",
        403,
        {"Server": "Sucuri/Cloudproxy", "X-Sucuri-ID": "17002"},
        SUCURI_BLOCK,
        "block:sucuri:firewall-block",
        True,
    ),
    ("sucuri-header", 403, {"X-Sucuri-Block": "BNP005"}, "", "block:sucuri:x-sucuri-block", True),
    ("sucuri-page-200", 200, {}, SUCURI_BLOCK, "block:sucuri:access-denied", True),
    ("kasada", 429, {"x-kpsdk-ct": "0abc", "x-kpsdk-r": "1-Bg"}, KASADA, "challenge:kasada:x-kpsdk", False),
    ("kasada-body", 429, {}, KASADA, "challenge:kasada:kpsdk", False),
    (
        "vercel-challenge",
        429,
        {"x-vercel-mitigated": "challenge"},
        VERCEL,
        "challenge:vercel:x-vercel-mitigated",
        False,
    ),
    ("vercel-deny", 403, {"x-vercel-mitigated": "deny"}, "", "block:vercel:x-vercel-mitigated", True),
    ("vercel-title", 403, {}, VERCEL, "challenge:vercel:title", False),
    ("ddos-guard", 403, {"Server": "ddos-guard"}, DDOS_GUARD, "challenge:ddos-guard:title", False),
    ("anubis", 200, {}, ANUBIS, "challenge:anubis:challenge", False),
    ("recaptcha-wall", 403, {}, RECAPTCHA_WALL, "challenge:captcha:recaptcha", False),
    ("hcaptcha-wall", 429, {}, HCAPTCHA_WALL, "challenge:captcha:hcaptcha", False),
    ("f5-asm", 200, {}, F5_ASM, "block:f5:asm-rejected", True),
    ("zyte-banned", 503, {"X-Crawlera-Error": "banned"}, "", "challenge:zyte:crawlera-banned", False),
    (
        "linkedin-999",
        999,
        {},
        "<html><head><script>window.onload=function(){}</script></head></html>",
        "challenge:linkedin:999",
        False,
    ),
    ("plain-429", 429, {"Retry-After": "30"}, "Too Many Requests", "challenge:generic:429", False),
]


@pytest.mark.parametrize(
    ("status", "headers", "body", "expected", "hard"),
    [case[1:] for case in ANTIBOT_CASES],
    ids=[case[0] for case in ANTIBOT_CASES],
)
def test_vendor_pages_are_antibot(status: int, headers: dict[str, str], body: str, expected: str, hard: bool) -> None:
    verdict = CLASSIFIER.response(status, Headers(headers), body.encode(), "https://www.example.com/", True)
    assert verdict.outcome is ANTIBOT
    assert verdict.error_class == expected
    assert verdict.status == status
    assert verdict.is_hard_block is hard
    assert verdict.browser_fixable is (not hard)
    assert not verdict.success
    # antibot() alone says the same, with plain dict headers too
    assert CLASSIFIER.antibot(status, headers, body.encode()) == verdict


def test_every_documented_vendor_has_a_realistic_page() -> None:
    vendors = {case[4].split(":")[1] for case in ANTIBOT_CASES}
    documented = {
        "cloudflare",
        "aws",
        "datadome",
        "perimeterx",
        "akamai",
        "imperva",
        "sucuri",
        "kasada",
        "vercel",
        "ddos-guard",
        "anubis",
        "captcha",
        "linkedin",
        "zyte",
    }
    assert documented <= vendors
    assert documented <= set(BUILTIN_MARKERS)


# ---------------------------------------------------------------------------------------------
# Normal pages carrying markers that are never enough alone

CF_JSD = (
    "<script>(function(){function c(){var b=a.contentDocument||a.contentWindow.document;if(b){var d=b.createElement('script');"
    "d.innerHTML=\"window.__CF$cv$params={r:'8f1c2d3e4a5b6c7d',t:'MTcwMDAwMDAwMC4wMDAwMDA='};var a=document.createElement('script');"
    "a.nonce='';a.src='/cdn-cgi/challenge-platform/scripts/jsd/main.js';document.getElementsByTagName('head')[0].appendChild(a);\";"
    "b.getElementsByTagName('head')[0].appendChild(d)}}}());</script>"
)
CF_NORMAL_HEADERS = {
    **CF,
    "cf-cache-status": "DYNAMIC",
    "Set-Cookie": "__cf_bm=abc.def-1700000000-1.0.1.1-xyz; path=/; HttpOnly; Secure, cf_clearance=q1w2e3; path=/",
}
LOGIN_TURNSTILE = (
    "<form action='/login' method='post'><input name='email' type='email'><input name='password' type='password'>"
    "<div class='cf-turnstile' data-sitekey='0x4AAAAAAABkMYinukE8nzY'></div>"
    "<script src='https://challenges.cloudflare.com/turnstile/v0/api.js' async defer></script>"
    "<input type='hidden' name='cf-turnstile-response' id='cf-chl-widget-abc12_response'>"
    "<button>Sign in</button></form>"
)
CONTACT_RECAPTCHA = (
    "<form action='/contact' method='post'><textarea name='msg'></textarea>"
    "<script src='https://www.google.com/recaptcha/api.js'></script>"
    "<div class='g-recaptcha' data-sitekey='6LeIxAcTAAAAAJcZVRqyHh71UMIEGNQ_MXjiZKhI'></div>"
    "<div class='h-captcha' data-sitekey='10000000-ffff-ffff-ffff-000000000001'></div></form>"
)
QUOTING_ARTICLE = (
    "<h2>What does 'Checking your browser' mean?</h2><p>Cloudflare shows 'Just a moment...' while it is "
    "Verifying you are human; a firewall rule shows 'Sorry, you have been blocked' and an error 1020. "
    "Akamai says Access Denied with a Reference #18.2d351ab8.1557333295.a4e16ab. PerimeterX asks you to "
    "'Please verify you are a human'. Sucuri WebSite Firewall - Access Denied. Pardon Our Interruption.</p>"
)

NORMAL_CASES: list[tuple[str, int, dict[str, str], bytes]] = [
    ("cloudflare-jsd-200", 200, CF_NORMAL_HEADERS, normal_page(CF_JSD)),
    ("cloudflare-small-jsd-200", 200, CF_NORMAL_HEADERS, normal_page(CF_JSD, size=2_000)),
    ("turnstile-login-200", 200, CF, normal_page(extra_body=LOGIN_TURNSTILE, size=3_000)),
    ("captcha-contact-form-200", 200, {}, normal_page(extra_body=CONTACT_RECAPTCHA, size=3_000)),
    (
        "datadome-protected-200",
        200,
        {"X-DataDome": "protected", "Set-Cookie": "datadome=abc~def; Max-Age=31536000; Domain=.example.com"},
        normal_page("<script src='https://js.datadome.co/tags.js'></script>"),
    ),
    (
        "akamai-sensor-200",
        200,
        {"Server": "AkamaiGHost", "Set-Cookie": "_abck=ABC~-1~YAAQ; bm_sz=XYZ"},
        normal_page("<script>bmak.js_post=false;bmak.sensor_data='7a74G7m23Vrp0o5c9';</script>", size=3_000),
    ),
    (
        "perimeterx-sensor-200",
        200,
        {"Set-Cookie": "_px3=abc; _pxhd=def"},
        normal_page(
            "<script>(function(){window._pxAppId = 'PXu6b0qd2S';var p = document.getElementsByTagName('script')[0],"
            "s = document.createElement('script');s.async = 1;s.src = '/u6b0qd2S/init.js';}());</script>",
            size=3_000,
        ),
    ),
    (
        "imperva-injected-script-200",
        200,
        {"X-CDN": "Imperva", "Set-Cookie": "visid_incap_123=abc; incap_ses_45_123=def"},
        normal_page(
            "<script type='text/javascript' src='/_Incapsula_Resource?SWJIYLWA=719d34d31c8e3a6e6fffd425f7e032f3'></script>"
        ),
    ),
    (
        "aws-waf-sdk-200",
        200,
        {"Set-Cookie": "aws-waf-token=abc"},
        normal_page(
            "<script src='https://3b1e4f.d5a7c9.eu-west-1.sdk.awswaf.com/3b1e4f/8c2d/challenge.js' defer></script>"
        ),
    ),
    ("kasada-headers-200", 200, {"x-kpsdk-ct": "0abc", "x-kpsdk-cd": "{}"}, normal_page()),
    ("article-quoting-challenges", 200, {}, normal_page(extra_body=QUOTING_ARTICLE, size=SMALL_PAGE + 1_000)),
    (
        "cf-ray-on-200",
        200,
        CF,
        b"<html><body><h1>Welcome</h1><p>Hello there, this is an ordinary small page.</p></body></html>",
    ),
    (
        "anubis-mention",
        200,
        {},
        normal_page(extra_body="<p>We use anubis_challenge ids in our docs.</p>", size=SMALL_PAGE),
    ),
    ("vendor-homepage-title", 200, {}, normal_page(title="DDoS-Guard | DDoS protection, CDN", size=SMALL_PAGE)),
    ("sucuri-homepage-title", 200, {}, normal_page(title="Sucuri Website Firewall | Sucuri", size=SMALL_PAGE)),
]


@pytest.mark.parametrize(
    ("status", "headers", "body"), [case[1:] for case in NORMAL_CASES], ids=[case[0] for case in NORMAL_CASES]
)
def test_markers_that_appear_on_normal_pages_are_not_enough(status: int, headers: dict[str, str], body: bytes) -> None:
    assert CLASSIFIER.antibot(status, Headers(headers), body) is None
    verdict = CLASSIFIER.response(status, Headers(headers), body, "https://www.example.com/page", False)
    assert verdict == Verdict(OK_EMPTY, status)
    assert verdict.success


@pytest.mark.parametrize(
    ("status", "headers", "body", "expected"),
    [
        (530, CF, CF_1016, Verdict(HTTP_ERROR, 530, "http:530")),  # origin DNS error: not a block
        (404, CF, b"<html><body>Not found</body></html>", Verdict(HTTP_ERROR, 404, "http:404")),
        (500, CF, b"", Verdict(HTTP_ERROR, 500, "http:500")),
    ],
)
def test_cloudflare_errors_that_are_not_blocks(
    status: int, headers: dict[str, str], body: Any, expected: Verdict
) -> None:
    body = body.encode() if isinstance(body, str) else body
    assert CLASSIFIER.response(status, Headers(headers), body, "https://example.com/x", False) == expected


def test_aws_202_challenge_is_never_a_success() -> None:
    headers = Headers({"x-amzn-waf-action": "challenge", "Content-Type": "text/html"})
    for body in (AWS_CHALLENGE.encode(), b""):
        verdict = CLASSIFIER.response(202, headers, body, "https://shop.example/", True)
        assert verdict.outcome is ANTIBOT
        assert not verdict.success
    head = CLASSIFIER.head(202, headers, "https://shop.example/", True)
    assert head.outcome is ANTIBOT and head.error_class == "challenge:aws:x-amzn-waf-action"
    # without the header, the challenge script on a 202 still gives it away
    assert CLASSIFIER.response(202, {}, AWS_CHALLENGE.encode(), "https://shop.example/", True).outcome is ANTIBOT


def test_header_values_are_matched_exactly() -> None:
    assert CLASSIFIER.antibot(200, {"cf-mitigated": "challenge"}, b"") is not None
    assert CLASSIFIER.antibot(200, {"x-vercel-mitigated": "none"}, b"") is None
    assert CLASSIFIER.antibot(200, {"x-dd-b": "0"}, b"") is None
    assert CLASSIFIER.antibot(403, {"X-DataDome": "protected"}, b"") is None
    assert CLASSIFIER.antibot(503, {"X-Crawlera-Error": "timeout"}, b"") is None
    # Scrapy Headers with several values, and bytes in a plain dict
    assert CLASSIFIER.antibot(403, Headers({"cf-mitigated": ["none", "challenge"]}), b"") is not None
    assert CLASSIFIER.antibot(403, {b"X-Vercel-Mitigated": b"deny"}, b"").is_hard_block  # type: ignore[union-attr]


# ---------------------------------------------------------------------------------------------
# Bounded scan, huge and binary bodies, user markers


def test_marker_beyond_the_scan_window_is_not_seen() -> None:
    marker = b"<script>window._cf_chl_opt={cType:'managed'};</script>"
    pad = normal_page(size=70_000)
    default = 65536
    assert CLASSIFIER.antibot(200, {}, pad[: default - len(marker) - 10] + marker) is not None
    assert CLASSIFIER.antibot(200, {}, pad[:default] + marker) is None
    small = Classifier(Config(body_scan_bytes=1024))
    assert small.antibot(403, {}, pad[:2_000] + marker) is None
    assert small.antibot(403, {}, pad[:500] + marker) is not None


def test_huge_body_is_scanned_fast_and_only_its_prefix() -> None:
    body = normal_page(size=10_000_000)
    assert len(body) > 10_000_000
    body_with_late_marker = body + CF_MANAGED.encode()
    start = time.perf_counter()
    for _ in range(20):
        verdict = CLASSIFIER.response(200, CF, body_with_late_marker, "https://example.com/", True)
    per_call = (time.perf_counter() - start) / 20
    assert verdict == Verdict(OK_EMPTY, 200)
    assert per_call < 0.005, f"{per_call * 1e3:.2f} ms for a 10 MB body"


BINARY_BODIES = {
    "png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + b"captcha-delivery.com _cf_chl_opt" * 50,
    "pdf": b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj<<>>stream\n_cf_chl_opt captcha-delivery.com Just a moment...",
    "nul": b"GIF89a\x01\x00\x01\x00\x80\x00\x00<title>Just a moment...</title>",
    "random": bytes(range(256)) * 400 + b"<title>just a moment...</title>",
}


@pytest.mark.parametrize("kind", sorted(BINARY_BODIES))
def test_binary_bodies_never_antibot_by_body(kind: str) -> None:
    body = BINARY_BODIES[kind]
    assert CLASSIFIER.antibot(200, {}, body) is None
    assert CLASSIFIER.response(200, {}, body, "https://example.com/a.bin", False) == Verdict(OK_EMPTY, 200)
    # headers still count
    assert CLASSIFIER.antibot(403, CF, body) == Verdict(ANTIBOT, 403, "challenge:cloudflare:cf-ray", True)


def test_content_type_marks_binary() -> None:
    body = b"<title>Just a moment...</title><script>window._cf_chl_opt={}</script>"
    assert CLASSIFIER.antibot(200, {"Content-Type": "image/png"}, body) is None
    assert CLASSIFIER.antibot(200, {"Content-Type": "text/html"}, body) is not None


def test_odd_bodies_do_not_crash() -> None:
    for body in (None, b"", "", "<title>Just a moment...</title>", bytearray(b"<title>Just a moment...</title>")):
        verdict = CLASSIFIER.response(200, None, body, "https://example.com/", True)  # type: ignore[arg-type]
        assert verdict.outcome in (OK_EMPTY, ANTIBOT)
    assert CLASSIFIER.response(200, {}, "<title>Just a moment...</title>", "u", True).outcome is ANTIBOT  # type: ignore[arg-type]
    assert CLASSIFIER.response(200, {}, "\udcff\u00e9 caf\u00e9", "u", True).outcome is OK_EMPTY  # type: ignore[arg-type]


def test_user_markers() -> None:
    body = normal_page(extra_body="<div class='ACME-Wall'>Subscribers only</div>")
    custom = Classifier(Config(challenge_markers={"acme": ("acme-wall",), "cloudflare": ("my-cf-interstitial",)}))
    assert CLASSIFIER.antibot(200, {}, body) is None
    assert custom.antibot(200, {}, body) == Verdict(ANTIBOT, 200, "challenge:acme:acme-wall", True)
    assert custom.antibot(200, {}, b"<div id=my-cf-interstitial></div>") == Verdict(
        ANTIBOT, 200, "challenge:cloudflare:my-cf-interstitial", True
    )
    # built-in evidence still wins over a user marker for the same vendor, and a 429 names the user's vendor
    assert custom.antibot(403, {}, CF_BLOCK_1020.encode()).error_class == "block:cloudflare:1020"  # type: ignore[union-attr]
    assert custom.antibot(429, {}, b"acme-wall").error_class == "challenge:acme:acme-wall"  # type: ignore[union-attr]


def test_marker_list_is_well_formed() -> None:
    merged = merge_markers({"acme": ("Acme Wall",)})
    assert list(merged)[-1] == "generic"
    for vendor, markers in merged.items():
        for marker in markers:
            assert marker.name, vendor
            if marker.kind == "regex":
                re.compile(marker.patterns[0])
                assert marker.anchor == marker.anchor.lower()
            else:
                assert all(p == p.lower() for p in marker.patterns), (vendor, marker)
    names = [(v, m.name) for v, m in CLASSIFIER.markers]
    assert names.index(("cloudflare", "{}")) < names.index(("cloudflare", "title"))  # hard blocks first


# ---------------------------------------------------------------------------------------------
# HEAD and GET rules


@pytest.mark.parametrize(
    ("status", "headers", "is_root", "expected"),
    [
        (200, {}, True, Verdict(NO_VERDICT, 200)),
        (301, {"Location": "/en/"}, True, Verdict(NO_VERDICT, 301)),
        (404, {}, True, Verdict(DEAD, 404, "http:404")),
        (410, {}, True, Verdict(DEAD, 410, "http:410")),
        (404, {}, False, Verdict(NO_VERDICT, 404)),
        (405, {}, True, Verdict(NO_VERDICT, 405)),
        (501, {}, True, Verdict(NO_VERDICT, 501)),
        (500, {}, True, Verdict(NO_VERDICT, 500)),
        (403, {}, True, Verdict(NO_VERDICT, 403)),
        (200, CF, True, Verdict(NO_VERDICT, 200)),
        (403, CF, True, Verdict(ANTIBOT, 403, "challenge:cloudflare:cf-ray", True)),
        (
            403,
            {**CF, "cf-mitigated": "challenge"},
            True,
            Verdict(ANTIBOT, 403, "challenge:cloudflare:cf-mitigated", True),
        ),
        (403, {**CF, "cf-mitigated": "block"}, False, Verdict(ANTIBOT, 403, "block:cloudflare:cf-mitigated")),
        (429, {}, False, Verdict(ANTIBOT, 429, "challenge:generic:429", True)),
        (999, {}, True, Verdict(ANTIBOT, 999, "challenge:linkedin:999", True)),
        (
            404,
            {"x-vercel-mitigated": "challenge"},
            True,
            Verdict(ANTIBOT, 404, "challenge:vercel:x-vercel-mitigated", True),
        ),
    ],
)
def test_head_rules(status: int, headers: dict[str, str], is_root: bool, expected: Verdict) -> None:
    assert CLASSIFIER.head(status, Headers(headers), "https://example.com/", is_root) == expected


@pytest.mark.parametrize(
    ("status", "is_root", "expected"),
    [
        (404, True, Verdict(DEAD, 404, "http:404")),
        (410, True, Verdict(DEAD, 410, "http:410")),
        (404, False, Verdict(HTTP_ERROR, 404, "http:404")),
        (410, False, Verdict(HTTP_ERROR, 410, "http:410")),
        (403, True, Verdict(HTTP_ERROR, 403, "http:403", True)),
        (503, False, Verdict(HTTP_ERROR, 503, "http:503", True)),
        (401, False, Verdict(HTTP_ERROR, 401, "http:401")),
        (500, True, Verdict(HTTP_ERROR, 500, "http:500")),
        (502, True, Verdict(HTTP_ERROR, 502, "http:502")),
        (200, True, Verdict(OK_EMPTY, 200)),
        (204, False, Verdict(OK_EMPTY, 204)),
        (301, False, Verdict(OK_EMPTY, 301)),
    ],
)
def test_response_status_rules(status: int, is_root: bool, expected: Verdict) -> None:
    body = b"<html><body><h1>Some page</h1><p>" + b"text " * 40 + b"</p></body></html>"
    assert CLASSIFIER.response(status, {"Content-Type": "text/html"}, body, "https://example.com/", is_root) == expected


REACT_SHELL = b"""<!doctype html><html lang="en"><head><meta charset="utf-8"/><link rel="icon" href="/favicon.ico"/>
<meta name="viewport" content="width=device-width,initial-scale=1"/><title>Acme</title>
<script defer="defer" src="/static/js/main.8f1c2d3e.js"></script><link href="/static/css/main.4a5b6c7d.css" rel="stylesheet">
</head><body><noscript>You need to enable JavaScript to run this app.</noscript><div id="root"></div>
<script>window.__INITIAL_STATE__={"user":null,"flags":{"a":true,"b":false},"copy":"a long string of text inside a script that is not visible at all"}</script>
</body></html>"""


@pytest.mark.parametrize(
    ("body", "headers", "expected"),
    [
        (REACT_SHELL, {"Content-Type": "text/html"}, Verdict(OK_EMPTY, 200, "js-shell", True)),
        (REACT_SHELL, {}, Verdict(OK_EMPTY, 200, "js-shell", True)),
        (
            REACT_SHELL.replace(
                b'<div id="root"></div>',
                b"<main><h1>Acme tools</h1><p>We build tools for watchmakers and clock restorers.</p></main>",
            ),
            {},
            Verdict(OK_EMPTY, 200),
        ),
        (b"<html><body><p>Hi</p></body></html>", {}, Verdict(OK_EMPTY, 200)),  # tiny but no script
        (b'{"html": "<script>x</script>"}', {"Content-Type": "application/json"}, Verdict(OK_EMPTY, 200)),
        (
            REACT_SHELL.replace(b"</body>", b"<script>" + b"var x=1;" * 7_000 + b"</script></body>"),
            {},
            Verdict(OK_EMPTY, 200),
        ),
        (b"<html><body><script>document.write('x')", {}, Verdict(OK_EMPTY, 200, "js-shell", True)),  # unclosed script
    ],
    ids=["shell", "shell-no-content-type", "rendered", "tiny-no-script", "json", "too-big", "unclosed-script"],
)
def test_js_shell(body: bytes, headers: dict[str, str], expected: Verdict) -> None:
    assert CLASSIFIER.response(200, headers, body, "https://app.example/", True) == expected


def test_verdict_properties() -> None:
    assert Verdict(Outcome.OK_CONTACT).success and Verdict(OK_EMPTY, 200).success
    assert not Verdict(ANTIBOT, 403, "challenge:x:y", True).success
    assert Verdict(ANTIBOT, 403, "block:cloudflare:1020").is_hard_block
    assert not Verdict(DEAD, None, "block:looks-like-one").is_hard_block
    with pytest.raises(AttributeError):
        Verdict(OK_EMPTY).status = 3  # type: ignore[misc]


def test_normalize_headers() -> None:
    scrapy_headers = Headers({"CF-Ray": "abc", "Set-Cookie": ["a=1", "b=2"]})
    assert normalize_headers(scrapy_headers) == {"cf-ray": "abc", "set-cookie": "a=1, b=2"}
    assert normalize_headers({"X-DD-B": "1", b"Server": b"cloudflare"}) == {"x-dd-b": "1", "server": "cloudflare"}
    assert normalize_headers([("A", "1"), ("a", "2")]) == {"a": "1, 2"}
    assert normalize_headers(None) == {}
    assert normalize_headers(scrapy_headers, frozenset({"cf-ray"})) == {"cf-ray": "abc"}


def test_response_from_a_real_scrapy_response() -> None:
    request = Request("https://www.example.com/")
    response = HtmlResponse(
        "https://www.example.com/", status=403, headers=CF, body=CF_BLOCK_1020.encode(), request=request
    )
    verdict = CLASSIFIER.response(response.status, response.headers, response.body, response.url, True)
    assert verdict == Verdict(ANTIBOT, 403, "block:cloudflare:1020")


# The classifier's speed is measured by benchmarks/scan_bench.py and benchmarks/instructions.py
# (instruction counts), not asserted in a timed test: times on a shared machine swing 2x.


# ---------------------------------------------------------------------------------------------
# Failures: real exception instances, wrapped the way Scrapy 2.19 wraps them


def scrapy_wrapped(exc: BaseException) -> BaseException:
    """Raise ``exc`` through Scrapy's own Twisted-to-Scrapy exception mapping."""
    from scrapy.utils._download_handlers import wrap_twisted_exceptions

    try:
        with wrap_twisted_exceptions():
            raise exc
    except Exception as wrapped:
        return wrapped
    raise AssertionError("not raised")  # pragma: no cover


def caused(outer: BaseException, inner: BaseException) -> BaseException:
    try:
        raise outer from inner
    except BaseException as exc:
        return exc


def ssl_error(reason: str) -> SSL.Error:
    return SSL.Error([("SSL routines", "", reason)])


def cert_verify_error(code: int, message: str) -> ssl.SSLCertVerificationError:
    exc = ssl.SSLCertVerificationError(1, f"[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: {message}")
    exc.verify_code = code
    exc.verify_message = message
    return exc


def tunnel_error() -> BaseException:
    from scrapy.core.downloader.handlers.http11 import TunnelError

    return TunnelError("Could not open CONNECT tunnel with proxy 10.0.0.1:3128 [{'status': 502}]")


def http_error(status: int) -> BaseException:
    from scrapy.spidermiddlewares.httperror import HttpError

    response = HtmlResponse("https://example.com/x", status=status, body=b"", request=Request("https://example.com/x"))
    return HttpError(response, "Ignoring non-200 response")


FAILURE_CASES: list[tuple[str, Any, Verdict]] = [
    (
        "scrapy-dns",
        lambda: scrapy_wrapped(txerror.DNSLookupError("no results for hostname lookup: nx.example")),
        Verdict(DEAD, None, "dns"),
    ),
    (
        "scrapy-dns-temporary",
        lambda: scrapy_wrapped(
            txerror.DNSLookupError("address 'a.example' not found: [Errno -3] Temporary failure in name resolution.")
        ),
        Verdict(NET, None, "dns-temporary"),
    ),
    (
        "scrapy-dns-resolver-timeout",
        lambda: scrapy_wrapped(txerror.DNSLookupError("address 'a.example' not found: timeout error")),
        Verdict(NET, None, "dns-temporary"),
    ),
    ("cannot-resolve-bare", lambda: CannotResolveHostError("nx.example"), Verdict(DEAD, None, "dns")),
    ("twisted-dns", lambda: txerror.DNSLookupError("nx.example"), Verdict(DEAD, None, "dns")),
    (
        "gaierror-again",
        lambda: caused(CannotResolveHostError("a.example"), socket.gaierror(socket.EAI_AGAIN, "Temporary failure")),
        Verdict(NET, None, "dns-temporary"),
    ),
    (
        "gaierror-noname",
        lambda: caused(
            CannotResolveHostError("a.example"), socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        ),
        Verdict(DEAD, None, "dns"),
    ),
    ("names-servfail", lambda: dnserror.DNSServerError("SERVFAIL"), Verdict(NET, None, "dns-temporary")),
    ("names-nxdomain", lambda: dnserror.DNSNameError("a.example"), Verdict(DEAD, None, "dns")),
    (
        "scrapy-refused",
        lambda: scrapy_wrapped(txerror.ConnectionRefusedError("Connection was refused by other side: 111")),
        Verdict(DEAD, None, "refused"),
    ),
    ("twisted-refused", txerror.ConnectionRefusedError, Verdict(DEAD, None, "refused")),
    ("python-refused", lambda: ConnectionRefusedError(111, "Connection refused"), Verdict(DEAD, None, "refused")),
    (
        "scrapy-timeout",
        lambda: scrapy_wrapped(txerror.TimeoutError("User timeout caused connection failure.")),
        Verdict(NET, None, "timeout", True),
    ),
    (
        "download-timeout",
        lambda: DownloadTimeoutError("Getting https://a.example took longer than 180.0 seconds."),
        Verdict(NET, None, "timeout", True),
    ),
    ("tcp-timed-out", txerror.TCPTimedOutError, Verdict(NET, None, "timeout", True)),
    (
        "tls-handshake",
        lambda: scrapy_wrapped(ResponseNeverReceived([Failure(ssl_error("tlsv1 alert protocol version"))])),
        Verdict(DEAD, None, "tls:handshake"),
    ),
    (
        "tls-never-received",
        lambda: ResponseNeverReceived([Failure(ssl_error("sslv3 alert handshake failure"))]),
        Verdict(DEAD, None, "tls:handshake"),
    ),
    ("openssl-bare", lambda: ssl_error("wrong version number"), Verdict(DEAD, None, "tls:handshake")),
    (
        "tls-mid-stream",
        lambda: scrapy_wrapped(ResponseFailed([Failure(ssl_error("decryption failed or bad record mac"))])),
        Verdict(NET, None, "tls:stream", True),
    ),
    (
        "tls-verify-expired",
        lambda: caused(
            DownloadConnectionRefusedError("[SSL: CERTIFICATE_VERIFY_FAILED]"),
            cert_verify_error(10, "certificate has expired"),
        ),
        Verdict(DEAD, None, "tls:expired"),
    ),
    (
        "tls-verify-self-signed",
        lambda: cert_verify_error(18, "self-signed certificate"),
        Verdict(DEAD, None, "tls:self-signed"),
    ),
    (
        "tls-verify-hostname",
        lambda: cert_verify_error(62, "Hostname mismatch, certificate is not valid for 'a.example'."),
        Verdict(DEAD, None, "tls:hostname"),
    ),
    ("data-loss", ResponseDataLossError, Verdict(NET, None, "ResponseDataLossError", True)),
    (
        "connection-lost",
        lambda: scrapy_wrapped(
            ResponseFailed([Failure(txerror.ConnectionLost("Connection to the other side was lost"))])
        ),
        Verdict(NET, None, "ConnectionLost", True),
    ),
    ("connection-lost-bare", txerror.ConnectionLost, Verdict(NET, None, "ConnectionLost", True)),
    ("no-route", txerror.NoRouteError, Verdict(NET, None, "unreachable")),
    (
        "unreachable-errno",
        lambda: caused(DownloadConnectionRefusedError("x"), OSError(101, "Network is unreachable")),
        Verdict(NET, None, "unreachable"),
    ),
    ("cancelled", lambda: DownloadCancelledError("cancelled"), Verdict(NET, None, "cancelled")),
    ("proxy-tunnel", tunnel_error, Verdict(NET, None, "proxy")),
    ("http-error-404", lambda: http_error(404), Verdict(HTTP_ERROR, 404, "http:404")),
    ("http-error-503", lambda: http_error(503), Verdict(HTTP_ERROR, 503, "http:503", True)),
    ("failure-object", lambda: Failure(txerror.DNSLookupError("nx.example")), Verdict(DEAD, None, "dns")),
    ("download-failed-bare", lambda: DownloadFailedError("boom"), Verdict(NET, None, "DownloadFailedError", True)),
]


@pytest.mark.parametrize(
    ("make", "expected"), [case[1:] for case in FAILURE_CASES], ids=[case[0] for case in FAILURE_CASES]
)
def test_failure_mapping(make: Any, expected: Verdict) -> None:
    assert CLASSIFIER.failure(make()) == expected


def test_scrapy_wraps_what_we_expect() -> None:
    """Guard against Scrapy changing its mapping under us."""
    assert isinstance(scrapy_wrapped(txerror.DNSLookupError("x")), CannotResolveHostError)
    assert isinstance(scrapy_wrapped(txerror.ConnectionRefusedError()), DownloadConnectionRefusedError)
    assert isinstance(scrapy_wrapped(txerror.TimeoutError()), DownloadTimeoutError)
    assert isinstance(scrapy_wrapped(ResponseNeverReceived([])), DownloadFailedError)


def test_unknown_and_hostile_failures_never_raise() -> None:
    class Weird(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no str for you")

    class Cyclic(Exception):
        pass

    cyclic = Cyclic()
    cyclic.__context__ = cyclic
    assert CLASSIFIER.failure(Weird()) == Verdict(NET, None, "Weird", True)
    assert CLASSIFIER.failure(caused(CannotResolveHostError("x"), Weird())).outcome is DEAD
    assert CLASSIFIER.failure(cyclic) == Verdict(NET, None, "Cyclic", True)
    assert CLASSIFIER.failure(KeyboardInterrupt()).outcome is NET
    assert CLASSIFIER.failure("not an exception").outcome is NET  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Certificates, generated here and delivered the way Scrapy delivers them

NOW = time.time()


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_cert(
    cn: str,
    *,
    san: list[x509.GeneralName] | None = None,
    issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None = None,
    not_before: float = NOW - 30 * DAY,
    not_after: float = NOW + 60 * DAY,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    issuer_name, issuer_key = issuer if issuer is not None else (_name(cn), key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(dt.datetime.fromtimestamp(not_before, dt.timezone.utc))
        .not_valid_after(dt.datetime.fromtimestamp(not_after, dt.timezone.utc))
    )
    if san is not None:
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
    return builder.sign(issuer_key, hashes.SHA256()), key


CA_CERT, CA_KEY = make_cert("Test Root CA")
CA = (CA_CERT.subject, CA_KEY)


def leaf(cn: str = "example.com", san: list[str] | None = None, **kw: Any) -> x509.Certificate:
    names: list[x509.GeneralName] | None = None
    if san is not None:
        names = [x509.IPAddress(ipaddress.ip_address(n)) if n[0].isdigit() else x509.DNSName(n) for n in san]
    return make_cert(cn, san=names, issuer=CA, **kw)[0]


def as_twisted(cert: x509.Certificate) -> Certificate:
    """What Scrapy's HTTP/1.1 handler puts in ``response.certificate``."""
    return Certificate(crypto.X509.from_cryptography(cert))


def as_der(cert: x509.Certificate) -> bytes:
    """What the httpx/aiohttp handlers put there."""
    return cert.public_bytes(serialization.Encoding.DER)


WILDCARD = leaf("example.com", ["example.com", "*.example.com"])

CERT_CASES: list[tuple[str, x509.Certificate, str, str | None]] = [
    ("valid-apex", WILDCARD, "example.com", None),
    ("valid-wildcard", WILDCARD, "www.example.com", None),
    ("valid-upper-dot", WILDCARD, "WWW.Example.com.", None),
    ("wildcard-one-level-only", WILDCARD, "a.b.example.com", "tls:hostname"),
    ("wrong-host", WILDCARD, "example.org", "tls:hostname"),
    ("suffix-trick", WILDCARD, "badexample.com", "tls:hostname"),
    (
        "expired",
        leaf(san=["example.com"], not_before=NOW - 400 * DAY, not_after=NOW - DAY),
        "example.com",
        "tls:expired",
    ),
    ("not-yet-valid", leaf(san=["example.com"], not_before=NOW + 10 * DAY), "example.com", "tls:expired"),
    ("self-signed", make_cert("example.com", san=[x509.DNSName("example.com")])[0], "example.com", "tls:self-signed"),
    ("expired-and-self-signed", make_cert("example.com", not_after=NOW - DAY)[0], "example.com", "tls:expired"),
    ("cn-only-match", leaf("legacy.example"), "legacy.example", None),
    ("cn-only-mismatch", leaf("legacy.example"), "other.example", "tls:hostname"),
    ("san-wins-over-cn", leaf("cn.example", ["san.example"]), "cn.example", "tls:hostname"),
    ("ip-san", leaf("server", ["127.0.0.1", "::1"]), "127.0.0.1", None),
    ("ip-san-v6", leaf("server", ["127.0.0.1", "::1"]), "[::1]", None),
    ("ip-mismatch", leaf("server", ["127.0.0.1"]), "127.0.0.2", "tls:hostname"),
    ("idn-unicode", leaf("xn--bcher-kva.example", ["xn--bcher-kva.example"]), "b\u00fccher.example", None),
    ("idn-punycode", leaf("xn--bcher-kva.example", ["xn--bcher-kva.example"]), "xn--bcher-kva.example", None),
]


@pytest.mark.parametrize(
    ("cert", "hostname", "expected"), [case[1:] for case in CERT_CASES], ids=[case[0] for case in CERT_CASES]
)
def test_certificate(cert: x509.Certificate, hostname: str, expected: str | None) -> None:
    for delivered in (as_twisted(cert), as_der(cert), cert):
        verdict = CLASSIFIER.certificate(delivered, hostname, NOW)
        if expected is None:
            assert verdict is None
        else:
            assert verdict == Verdict(DEAD, None, expected)


def test_certificate_is_judged_at_the_given_time() -> None:
    cert = as_twisted(WILDCARD)
    assert CLASSIFIER.certificate(cert, "example.com", NOW + 61 * DAY) == Verdict(DEAD, None, "tls:expired")
    assert CLASSIFIER.certificate(cert, "example.com", NOW) is None


def test_certificate_from_pem_via_twisted() -> None:
    pem = WILDCARD.public_bytes(serialization.Encoding.PEM)
    assert CLASSIFIER.certificate(Certificate.loadPEM(pem), "www.example.com", NOW) is None
    assert CLASSIFIER.certificate(pem, "example.net", NOW) == Verdict(DEAD, None, "tls:hostname")


@pytest.mark.parametrize("garbage", [None, b"", b"not a certificate", b"\x30\x03\x02\x01\x00", 42, object(), "pem?"])
def test_certificate_garbage_is_none(garbage: Any) -> None:
    assert CLASSIFIER.certificate(garbage, "example.com", NOW) is None


def test_picked_headers_are_the_normalized_ones_page_after_page() -> None:
    """``MarkerHeaders.pick`` remembers which of a response's header names it keeps; what it
    returns is still :func:`normalize_headers` of the wanted names, for every shape of headers
    (repeated values, a marker header, none at all), the first time and the next."""
    from scrapy_domainstate.detect.headers import normalize_headers

    picker = Classifier().headers
    shapes = [
        {"Content-Type": "text/html", "Server": "nginx", "Date": "x"},
        {"Content-Type": "text/html", "Server": "cloudflare", "CF-RAY": "8a-AMS"},
        {"Server": "nginx"},
        {"Content-Type": ["text/html", "charset=utf-8"], "Set-Cookie": ["a=1", "__cf_bm=2"]},
        {"content-type": "text/html", "X-Datadome": "protected", "Server": "nginx"},
    ]
    for _ in range(2):  # (the second round answers from the memo)
        for shape in shapes:
            headers = Headers(shape)
            assert picker.pick(headers) == normalize_headers(headers, picker.names, picker.prefixes), shape
    assert picker.pick(Headers({"Server": "nginx"})) == {}
