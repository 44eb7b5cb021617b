"""The browser route: does it reach a browser, what did the browser render, and the challenge wait.

One :class:`BrowserRoute` per crawler (:meth:`BrowserRoute.from_crawler`), decided once at
start-up:

- **Is there a browser?** ``DOMAINSTATE_BROWSER_META`` must reach a browser download handler.
  With the default render check (scrapy-playwright's), the meta must hold ``"playwright": True``
  and ``DOWNLOAD_HANDLERS`` must map ``http``/``https`` to scrapy-playwright's handler (or a
  subclass). With a render check of your own (``DOMAINSTATE_BROWSER_RENDERED``), the route is
  trusted to reach your handler. Otherwise -- or with ``DOMAINSTATE_BROWSER_META = None`` --
  the route is off (:attr:`BrowserRoute.enabled` false, :attr:`BrowserRoute.reason` says why,
  logged once as a WARNING that names the fix).
- **What rendered?** :meth:`BrowserRoute.rendered` asks ``DOMAINSTATE_BROWSER_RENDERED``, a
  callable ``(response) -> bool``; the default, :func:`rendered_by_playwright`, is true for the
  responses scrapy-playwright's handler built (it flags them ``"playwright"``). Only those are
  recorded as ``tab``.
- **The meta of a render** (:meth:`BrowserRoute.meta_for`): ``DOMAINSTATE_BROWSER_META``, plus
  ``dont_cache`` (a render is never answered with the plain copy from Scrapy's HTTP cache, and
  is not written there either), plus, for scrapy-playwright, a page method that waits (at most
  ``DOMAINSTATE_BROWSER_CHALLENGE_WAIT`` seconds) until the page is no longer a challenge by the
  plugin's own classifier: real JavaScript challenges reload seconds after ``load``, when
  scrapy-playwright would already have taken the page.

:func:`wake_shell_engine` works around a race in ``scrapy shell`` (Scrapy 2.19): its first
``fetch()`` opens the spider before the engine has finished starting (scrapy-playwright's
handler starts the browser driver in ``engine_started``), and the request then waits in the
scheduler for ever. Once the engine runs, it asks the engine to look at the scheduler again.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scrapy_domainstate.core.config import ConfigError, import_object

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Request, Response

    from scrapy_domainstate.core.config import Config
    from scrapy_domainstate.detect.classify import Classifier

__all__ = [
    "DEFAULT_RENDERED",
    "PLAYWRIGHT_HANDLER",
    "BrowserRoute",
    "is_launch_failure",
    "playwright_launch",
    "rendered_by_playwright",
    "wait_out_challenge",
    "wake_shell_engine",
]

logger = logging.getLogger(__name__)

PLAYWRIGHT_HANDLER = "scrapy_playwright.handler.ScrapyPlaywrightDownloadHandler"
#: ``DOMAINSTATE_BROWSER_RENDERED``'s default
DEFAULT_RENDERED = "scrapy_domainstate.runtime.browser.rendered_by_playwright"
#: the key of the challenge wait in a ``playwright_page_methods`` dict
WAIT_KEY = "domainstate_challenge_wait"
#: seconds between two looks at a challenge page
POLL_INTERVAL = 0.25
_SCHEMES = ("http", "https")
#: the status of the document now shown (Chromium 109+), 0 when unknown
_STATUS_JS = "() => { const n = performance.getEntriesByType('navigation')[0]; return (n && n.responseStatus) || 0; }"
HOW_TO_ENABLE = (
    "to use a browser, `pip install scrapy-playwright` and set DOWNLOAD_HANDLERS = "
    f'{{"http": "{PLAYWRIGHT_HANDLER}", "https": "{PLAYWRIGHT_HANDLER}"}} and TWISTED_REACTOR = '
    '"twisted.internet.asyncioreactor.AsyncioSelectorReactor" (README: "The browser route"); '
    "DOMAINSTATE_BROWSER_META = None says you run without one"
)


def rendered_by_playwright(response: Response) -> bool:
    """True for a response scrapy-playwright's handler built (it flags them ``"playwright"``)."""
    return "playwright" in response.flags


def _load_callable(name: str, value: Any) -> Callable[..., Any]:
    try:
        obj = import_object(value) if isinstance(value, str) else value
    except (ImportError, NameError, ValueError, AttributeError) as exc:
        raise ConfigError(f"{name}: cannot import {value!r}: {exc}") from exc
    if not callable(obj):
        raise ConfigError(f"{name}: {value!r} is not callable")
    return obj


def playwright_launch(settings: Any) -> tuple[str, str | None]:
    """What scrapy-playwright will launch, and why it cannot (``None``: nothing known against it).

    A browser reached over ``PLAYWRIGHT_CDP_URL`` or ``PLAYWRIGHT_CONNECT_URL`` is trusted; an
    ``executable_path`` in ``PLAYWRIGHT_LAUNCH_OPTIONS`` must be an executable file. Playwright's
    own browsers are found only when the first render launches one (a failure then turns the
    route off: :meth:`BrowserRoute.launch_failed`).
    """
    get = settings.get if hasattr(settings, "get") else (lambda name, default=None: default)
    kind = str(get("PLAYWRIGHT_BROWSER_TYPE") or "chromium")
    for name in ("PLAYWRIGHT_CDP_URL", "PLAYWRIGHT_CONNECT_URL"):
        if get(name):
            return f"{kind} at {name} {get(name)}", None
    options = get("PLAYWRIGHT_LAUNCH_OPTIONS") or {}
    path = options.get("executable_path") if isinstance(options, Mapping) else None
    if not path:
        return f"Playwright's own {kind}", None
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        return "", (
            f"PLAYWRIGHT_LAUNCH_OPTIONS executable_path {path!r} is not an executable file "
            f"(install the browser there, e.g. Debian's chromium package, or fix the path)"
        )
    return f"{kind} at {path}", None


def is_launch_failure(exc: BaseException) -> bool:
    """Playwright could not start or reach the browser (not a page that failed to load)."""
    if not type(exc).__module__.startswith("playwright"):
        return False
    text = str(exc)
    return any(mark in text for mark in _LAUNCH_MARKS)


#: how Playwright's errors say the browser itself is the problem
_LAUNCH_MARKS = (
    "BrowserType.launch",
    "BrowserType.connect",
    "Executable doesn't exist",
)


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip() and not set(line.strip()) <= {"=", "-"}]
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:300]


def _is_playwright_handler(path: Any) -> bool:
    if path is None:
        return False
    try:
        from scrapy_playwright.handler import ScrapyPlaywrightDownloadHandler
    except ImportError:
        return False
    try:
        cls = import_object(path) if isinstance(path, str) else path
    except (ImportError, NameError, ValueError, AttributeError):
        return False
    return isinstance(cls, type) and issubclass(cls, ScrapyPlaywrightDownloadHandler)


@dataclass
class BrowserRoute:
    """The browser route of one crawler. Build it with :meth:`from_crawler` (or :meth:`check`)."""

    #: the meta that sends a request to the browser; ``None``: the route is off
    meta: Mapping[str, Any] | None
    #: the schemes whose requests reach a browser handler (empty: the route is off)
    schemes: frozenset[str]
    #: why the route is off, or why it covers only some schemes (``None``: all is well)
    reason: str | None
    rendered_check: Callable[[Response], Any] = rendered_by_playwright
    #: what the handler will launch, for the start-up line ("chromium at /usr/bin/chromium")
    launches: str = ""
    #: seconds a scrapy-playwright render waits for a challenge to pass (0: no wait)
    challenge_wait: float = 0.0
    classifier: Classifier | None = None
    _items: tuple[tuple[str, Any], ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        self._items = tuple((self.meta or {}).items())
        #: the meta keys a render carries (kept when the route goes off, to strip them)
        self.render_keys = frozenset(k for k, _ in self._items) | {"playwright_page_methods"}

    @property
    def enabled(self) -> bool:
        return self.meta is not None and bool(self.schemes)

    # ------------------------------------------------------------ start-up

    @classmethod
    def check(cls, config: Config, settings: Any, classifier: Classifier | None = None) -> BrowserRoute:
        """Decide the route from the config and the crawler's settings (no logging)."""
        rendered = _load_callable("DOMAINSTATE_BROWSER_RENDERED", config.browser_rendered)
        meta = config.browser_meta
        wait = config.browser_challenge_wait

        def off(reason: str) -> BrowserRoute:
            return cls(None, frozenset(), reason, rendered, "", 0.0, classifier)

        if meta is None:
            return off("DOMAINSTATE_BROWSER_META is None")
        if config.browser_rendered != DEFAULT_RENDERED:
            # Your own render check: your handler is trusted to answer the meta.
            return cls(dict(meta), frozenset(_SCHEMES), None, rendered, "your browser handler", wait, classifier)
        if not meta.get("playwright"):
            return off(
                f"DOMAINSTATE_BROWSER_META = {dict(meta)!r} has no 'playwright': True, and "
                "DOMAINSTATE_BROWSER_RENDERED is scrapy-playwright's check (set it to a callable that "
                "recognises your browser handler's responses)"
            )
        try:
            import scrapy_playwright  # noqa: F401
        except ImportError:
            return off("scrapy-playwright is not installed")
        handlers = settings.getwithbase("DOWNLOAD_HANDLERS") if hasattr(settings, "getwithbase") else {}
        schemes = frozenset(s for s in _SCHEMES if _is_playwright_handler(handlers.get(s)))
        if not schemes:
            return off("DOWNLOAD_HANDLERS maps neither http nor https to scrapy-playwright's handler")
        reason = None
        launches, missing_browser = playwright_launch(settings)
        if missing_browser:
            return off(missing_browser)
        if schemes != frozenset(_SCHEMES):
            missing = ", ".join(s for s in _SCHEMES if s not in schemes)
            reason = f"DOWNLOAD_HANDLERS maps {missing} to no browser handler: those requests are never rendered"
        return cls(dict(meta), schemes, reason, rendered, launches, wait, classifier)

    @classmethod
    def from_crawler(cls, crawler: Crawler, config: Config, classifier: Classifier | None = None) -> BrowserRoute:
        """:meth:`check`, and the start-up WARNING when the route is off or partial."""
        route = cls.check(config, crawler.settings, classifier)
        if not route.enabled:
            crawler.stats.set_value("domainstate/browser/off", 1)
            logger.warning(
                "scrapy-domainstate: no browser (%s). The browser route is off: nothing is re-issued in "
                "a browser, nothing is recorded as a render, antibot-hard domains are skipped; %s",
                route.reason,
                HOW_TO_ENABLE,
                extra={"crawler": crawler},
            )
        elif route.reason:
            logger.warning("scrapy-domainstate: %s", route.reason, extra={"crawler": crawler})
        return route

    def launch_failed(self, crawler: Crawler, exc: BaseException) -> None:
        """The browser did not start (the first render's failure says so): the route is off
        for the rest of the crawl, with one WARNING, as if no browser had been configured."""
        self.reason = f"the browser did not launch: {_first_line(exc)}"
        self.meta, self.schemes, self._items = None, frozenset(), ()
        crawler.stats.set_value("domainstate/browser/off", 1)
        crawler.stats.set_value("domainstate/browser/launch_failed", 1)
        logger.warning(
            "scrapy-domainstate: %s. The browser route is off for the rest of this crawl: nothing more "
            "is rendered or recorded as a render; antibot-hard domains are skipped, the others are "
            "fetched plainly. Check PLAYWRIGHT_BROWSER_TYPE and PLAYWRIGHT_LAUNCH_OPTIONS "
            "(executable_path), or run `playwright install chromium`",
            self.reason,
            extra={"crawler": crawler},
        )

    # ------------------------------------------------------------ requests

    def reaches(self, request: Request) -> bool:
        """Would this request, given the browser meta, be downloaded by a browser?"""
        if self.meta is None or not self.schemes:
            return False
        # Scrapy keeps URLs with a lowercase scheme (``safe_url_string``): no parse needed.
        url = request.url
        return url[: url.find(":")] in self.schemes

    def has_meta(self, request: Request) -> bool:
        """The request carries the browser meta (sent to the browser by the plugin or the user)."""
        if not self._items:
            return False
        meta = request.meta
        for key, value in self._items:  # noqa: SIM110 - a loop, not all() over a generator: the hot path
            if meta.get(key) != value:
                return False
        return True

    def meta_for(self, meta: Mapping[str, Any]) -> dict[str, Any]:
        """What to merge into a request's ``meta`` to render it (only when :attr:`enabled`)."""
        out: dict[str, Any] = dict(self.meta or {})
        out["dont_cache"] = True
        if self.challenge_wait > 0 and out.get("playwright"):
            method = self._wait_method()
            if method is not None:
                given = meta.get("playwright_page_methods", out.get("playwright_page_methods")) or ()
                if isinstance(given, Mapping):
                    out["playwright_page_methods"] = {**given, WAIT_KEY: method}
                else:
                    out["playwright_page_methods"] = [*given, method]
        return out

    def _wait_method(self) -> Any:
        try:
            from scrapy_playwright.page import PageMethod
        except ImportError:
            return None
        # One PageMethod per request: scrapy-playwright stores each call's result on it.
        return PageMethod(wait_out_challenge, timeout=self.challenge_wait, is_challenge=self.is_challenge)

    # ------------------------------------------------------------ responses

    def rendered(self, response: Response) -> bool:
        """Did the browser handler produce this response? (``DOMAINSTATE_BROWSER_RENDERED``)"""
        if not self.enabled:
            return False
        try:
            return bool(self.rendered_check(response))
        except Exception:
            logger.exception("DOMAINSTATE_BROWSER_RENDERED failed for %s", response.url)
            return False

    def is_challenge(self, status: int, body: bytes) -> bool:
        """A challenge a browser may still pass (a hard block is final: no point in waiting)."""
        if self.classifier is None:
            return False
        verdict = self.classifier.antibot(status or 200, {}, body)
        return verdict is not None and not verdict.is_hard_block


async def wait_out_challenge(
    page: Any, timeout: float, is_challenge: Callable[[int, bytes], bool], poll: float = POLL_INTERVAL
) -> bool:
    """scrapy-playwright page coroutine: wait until ``page`` is no longer a challenge.

    Looks at the page every ``poll`` seconds, for at most ``timeout`` seconds; a page being
    navigated (a challenge reloading, or redirecting through its answer) is looked at again
    later. Returns True when the page is no longer a challenge, False when the time ran out
    (the render is then judged as it stands: still a challenge is ``antibot``).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout

    async def look() -> tuple[int, str]:
        return int(await page.evaluate(_STATUS_JS) or 0), await page.content()

    while True:
        try:
            # bounded too: a page stuck between two documents must not outlast the wait
            status, html = await asyncio.wait_for(look(), timeout=max(deadline - loop.time(), poll))
        except Exception:  # navigating: "Execution context was destroyed", "page is navigating"
            status, html = 0, None
        if html is not None and not is_challenge(status, html.encode("utf-8", "replace")):
            return True
        remaining = deadline - loop.time()
        if remaining <= 0:
            return False
        await asyncio.sleep(min(poll, remaining))


def wake_shell_engine(crawler: Crawler, interval: float = 0.1, patience: float = 120.0) -> None:
    """After ``spider_opened``: once the engine runs, make it look at its scheduler again.

    In ``scrapy shell`` the first ``fetch()`` opens the spider while the engine is still
    starting, and nothing wakes the engine for the request it queued. In a crawl the engine
    is already running or starts its own loop, and the extra look costs nothing.
    """
    from scrapy import signals
    from twisted.internet import task

    try:
        engine = crawler.engine
    except RuntimeError:  # Scrapy >= 2.14 without an engine (component tests): nothing to wake
        return
    if engine is None or getattr(engine, "running", True):
        return
    waited = [0.0]

    def look() -> None:
        waited[0] += interval
        if engine.running or waited[0] > patience:
            if loop.running:
                loop.stop()
            slot = getattr(engine, "_slot", None)
            nextcall = getattr(slot, "nextcall", None)
            if engine.running and nextcall is not None:
                nextcall.schedule()

    def stop(*args: Any, **kwargs: Any) -> None:
        if loop.running:
            loop.stop()

    loop = task.LoopingCall(look)
    loop.start(interval, now=False)
    crawler.signals.connect(stop, signal=signals.spider_closed, weak=False)
