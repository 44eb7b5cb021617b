# ruff: noqa: RUF001  (the pages are in Russian, Chinese and Japanese, punctuation included)
"""Rules that generalise (issue 26): wording in the main languages, widgets by structure, vendor
naming by the most specific evidence.

Every page here is SYNTHETIC: written for these tests in the shape of the vendors' and sites'
pages (a challenge or deny page is short and says one thing; the negative pages quote the same
words inside an article or carry the widget in a login form). Both scan engines must agree.
"""

from __future__ import annotations

import pytest

from scrapy_domainstate.core.record import Outcome
from scrapy_domainstate.detect.classify import Classifier

CLASSIFIERS = [Classifier(engine="pure"), Classifier(engine="auto")]
URL = "https://www.example.com/page"


def _judge(classifier: Classifier, status: int, body: str, headers: dict[str, str] | None = None):
    hdrs = {"Content-Type": "text/html; charset=utf-8", **(headers or {})}
    return classifier.response(status, hdrs, body.encode("utf-8"), URL, False)


def _interstitial(title: str, text: str) -> str:
    return (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{title}</title></head>'
        f'<body><div class="box"><h1>{title}</h1><p>{text}</p></div></body></html>'
    )


def _article(quote: str) -> str:
    nav = "".join(f'<li><a href="/post/{i}">Post number {i}</a></li>' for i in range(30))
    para = "<p>" + "A long paragraph of an ordinary article about the weather and the town. " * 12 + "</p>"
    return (
        f'<html><head><meta charset="utf-8"><title>Blog</title></head><body><ul>{nav}</ul>'
        f"{para * 4}<blockquote>{quote}</blockquote>{para * 4}</body></html>"
    )


VERIFY_PAGES = [
    ("ru-not-a-robot", "Вы не робот?", "Подтвердите, что запросы отправляли вы, а не робот."),
    ("ru-one-moment", "Один момент\u2026", "Проверка браузера перед переходом на сайт."),
    ("zh-verify-human", "安全验证", "请完成安全验证后继续访问。"),
    ("zh-please-wait", "请稍候\u2026", "正在检查您的浏览器。"),
    ("ja-wait", "しばらくお待ちください\u2026", "人間であることを確認しています。"),
    ("es-moment", "Un momento\u2026", "Comprobando tu navegador antes de acceder."),
    ("pt-moment", "Um momento\u2026", "Verificando seu navegador antes de acessar."),
    ("de-moment", "Einen Moment\u2026", "Bitte bestätigen Sie, dass Sie ein Mensch sind."),
    ("fr-instant", "Un instant\u2026", "Vérification de votre navigateur avant d'accéder au site."),
]


@pytest.mark.parametrize("classifier", CLASSIFIERS, ids=["pure", "auto"])
@pytest.mark.parametrize(("name", "title", "text"), VERIFY_PAGES, ids=[p[0] for p in VERIFY_PAGES])
def test_verification_wording_in_other_languages_is_a_challenge(
    classifier: Classifier, name: str, title: str, text: str
) -> None:
    verdict = _judge(classifier, 200, _interstitial(title, text))
    assert verdict.outcome is Outcome.ANTIBOT, (name, verdict)
    assert not verdict.is_hard_block
    assert _judge(classifier, 200, _article(f"{title} {text}")).outcome is not Outcome.ANTIBOT


DENY_PAGES = [
    ("ru", "Доступ ограничен", "Ваш IP-адрес заблокирован системой защиты."),
    ("zh", "访问被拒绝", "您的IP已被封禁，请稍后再试。"),
    ("ja", "アクセス拒否", "お使いのIPアドレスはブロックされています。"),
    ("es", "Acceso denegado", "Su dirección IP ha sido bloqueada por motivos de seguridad."),
    ("pt", "Acesso negado", "Seu endereço IP foi bloqueado."),
    ("de", "Zugriff verweigert", "Ihre IP-Adresse wurde gesperrt."),
    ("fr", "Accès refusé", "Votre adresse IP a été bloquée."),
]


@pytest.mark.parametrize("classifier", CLASSIFIERS, ids=["pure", "auto"])
@pytest.mark.parametrize("status", [200, 403])
@pytest.mark.parametrize(("lang", "title", "text"), DENY_PAGES, ids=[p[0] for p in DENY_PAGES])
def test_deny_wording_in_other_languages_is_a_hard_block(
    classifier: Classifier, status: int, lang: str, title: str, text: str
) -> None:
    verdict = _judge(classifier, status, _interstitial(title, text))
    assert verdict.is_hard_block, (lang, verdict)
    assert verdict.error_class == "block:generic:blocked"
    assert _judge(classifier, 200, _article(text)).outcome is not Outcome.ANTIBOT


SMARTCAPTCHA_PAGE = (
    '<!DOCTYPE html><html lang="ru"><head><meta charset="utf-8"><title>Проверка</title>'
    '<script src="https://smartcaptcha.yandexcloud.net/captcha.js" defer></script></head><body>'
    '<form method="POST" action="/checkcaptcha"><div id="captcha-container" class="smart-captcha" '
    'data-sitekey="ysc1_0000"></div><button type="submit">Продолжить</button></form></body></html>'
)
SMARTCAPTCHA_LOGIN = (
    '<!DOCTYPE html><html lang="ru"><head><meta charset="utf-8"><title>Вход</title>'
    '<script src="https://smartcaptcha.yandexcloud.net/captcha.js" defer></script></head><body>'
    '<form method="POST" action="/login"><input name="login"><input type="password" name="password">'
    '<div id="captcha-container" class="smart-captcha" data-sitekey="ysc1_0000"></div>'
    "<button>Войти</button></form></body></html>"
)


@pytest.mark.parametrize("classifier", CLASSIFIERS, ids=["pure", "auto"])
def test_a_smartcaptcha_widget_without_a_form_to_fill_is_a_challenge(classifier: Classifier) -> None:
    verdict = _judge(classifier, 200, SMARTCAPTCHA_PAGE)
    assert verdict.outcome is Outcome.ANTIBOT and not verdict.is_hard_block
    assert verdict.error_class == "challenge:yandex:smartcaptcha"
    assert _judge(classifier, 200, SMARTCAPTCHA_LOGIN).outcome is not Outcome.ANTIBOT


PX_BLOCK = (
    '<!DOCTYPE html><html lang="en"><head><title>Access to this page has been denied</title>'
    '<script>window._pxAppId="PXabc123";</script>'
    '<script src="https://captcha.px-cdn.net/PXabc123/captcha.js?a=c&m=0"></script></head>'
    '<body><div id="px-captcha"></div><p>Press &amp; Hold to confirm you are a human.</p></body></html>'
)


@pytest.mark.parametrize("classifier", CLASSIFIERS, ids=["pure", "auto"])
def test_the_most_specific_evidence_names_the_vendor(classifier: Classifier) -> None:
    cf = {"Server": "cloudflare", "CF-RAY": "8a1b2c3d4e5f6a7b-AMS"}
    # PerimeterX's page served through Cloudflare: PerimeterX's, not the CDN's.
    verdict = _judge(classifier, 403, PX_BLOCK, cf)
    assert verdict.error_class is not None and verdict.error_class.split(":")[1] == "perimeterx", verdict
    # Cloudflare alone in front of a 403 or a 429 with no page we know: still named Cloudflare.
    bare = "<html><body>Forbidden</body></html>"
    assert _judge(classifier, 403, bare, cf).error_class == "challenge:cloudflare:cf-ray"
    assert _judge(classifier, 429, bare, cf).error_class == "challenge:cloudflare:cf-ray"
    # Deny wording behind Cloudflare: the page's words grade it hard (hard markers come first).
    verdict = _judge(classifier, 403, _interstitial("Blocked", "Your request has been blocked."), cf)
    assert verdict.is_hard_block and verdict.error_class == "block:generic:blocked"


def _branded(title: str, links: int) -> str:
    """A site-branded challenge: 40 KB with its styles, its explanation in four languages."""
    style = "<style>" + ".c{color:#123456;margin:0 auto;padding:4px}" * 900 + "</style>"
    words = (
        "We need to make sure that you are a person and not an automated program. "
        "Nous devons vérifier que vous êtes une personne. Wir müssen prüfen, dass Sie ein Mensch sind. "
        "Necesitamos comprobar que usted es una persona. "
    )
    anchors = "".join(f'<a href="/help/{i}">Help {i}</a> ' for i in range(links))
    return (
        f'<html><head><meta charset="utf-8"><title>{title}</title>{style}</head><body>'
        f"<h1>{title}</h1><p>{words * 7}</p><p>{anchors}</p></body></html>"
    )


@pytest.mark.parametrize("classifier", CLASSIFIERS, ids=["pure", "auto"])
def test_a_long_branded_challenge_is_found_by_what_it_shows_not_its_size(classifier: Classifier) -> None:
    page = _branded("Проверка безопасности", links=4)
    assert len(page.encode()) > 32 * 1024 and len(page) > 1200
    verdict = _judge(classifier, 200, page)
    assert verdict.outcome is Outcome.ANTIBOT and not verdict.is_hard_block, verdict
    # The same words on a page with a site's navigation are a page, not a challenge.
    assert _judge(classifier, 200, _branded("Проверка безопасности", links=40)).outcome is not Outcome.ANTIBOT


GOOGLE_SORRY = (
    '<html><head><meta http-equiv="content-type" content="text/html; charset=utf-8">'
    "<title>https://www.google.com/search?q=example</title></head><body><div>"
    '<script src="https://www.google.com/recaptcha/api.js" async defer></script>'
    '<form id="captcha-form" action="index" method="post"><div id="recaptcha" class="g-recaptcha" '
    'data-sitekey="6LfwuyUTAAAAAOAmoS0fdqijC2PbbdH4kjq62Y1b"></div>'
    "<input type='hidden' name='q' value='EgQKAQIDGAE'></form><hr noshade size=\"1\">"
    "<div>About this page<br><br>Our systems have detected unusual traffic from your computer network. "
    "This page checks to see if it's really you sending the requests, and not a robot.</div></div></body></html>"
)


@pytest.mark.parametrize("classifier", CLASSIFIERS, ids=["pure", "auto"])
def test_googles_sorry_page_is_named_google(classifier: Classifier) -> None:
    for status in (200, 429):
        verdict = _judge(classifier, status, GOOGLE_SORRY)
        assert verdict.error_class == "challenge:google:sorry", verdict


AWS_SHELL = (
    '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Amazon.com</title>'
    '<script>window.gokuProps = {"key":"AQIDAHjcYu/GjX+QlghicBg","iv":"CgAHazsAAAA","context":"abc"};</script>'
    '<script src="https://a1b2c3.us-east-1.captcha.awswaf.com/a1b2c3/challenge.js"></script></head>'
    '<body><div id="captcha-container"></div><noscript>JavaScript is disabled</noscript></body></html>'
)
REDDIT_BLOCKS = [
    "<html><head><title>Blocked</title></head><body><h1>whoa there, pardner!</h1><p>Your request has been "
    "throttled; please try again later.</p></body></html>",
    "<html><head><title>reddit.com</title></head><body><p>You've been blocked by network security.</p><p>To "
    "continue, log in to your Reddit account or use your developer token.</p></body></html>",
]


@pytest.mark.parametrize("classifier", CLASSIFIERS, ids=["pure", "auto"])
def test_vendor_markers_hold_at_200(classifier: Classifier) -> None:
    verdict = _judge(classifier, 200, AWS_SHELL)
    assert verdict.error_class == "challenge:aws:challenge", verdict
    for page in REDDIT_BLOCKS:
        for status in (200, 403, 429):
            verdict = _judge(classifier, status, page)
            assert verdict.is_hard_block and verdict.error_class == "block:reddit:blocked", verdict
    # A Reddit thread quoting the notice is a page.
    assert _judge(classifier, 200, _article("You've been blocked by network security.")).outcome is not Outcome.ANTIBOT
