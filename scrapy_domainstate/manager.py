"""The per-crawler runtime shared by the middlewares and the extension.

One :class:`DomainStateManager` per crawler (``DomainStateManager.for_crawler``):
it owns the config, the policy, the classifier and the store, turns requests
into decisions and downloads into recorded outcomes, and keeps the stats, the
signals and the logs in one place. The Scrapy components stay thin.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from pydispatch.dispatcher import getAllReceivers
from scrapy.exceptions import CloseSpider, IgnoreRequest, NotConfigured
from scrapy.http import Request, Response, TextResponse
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.misc import load_object
from twisted.internet.defer import Deferred

from . import _evidence as evidence
from . import signals
from .classify import Classifier, Verdict
from .config import Config, ConfigError
from .contacts import has_contact
from .keys import domain_key, host_of, is_site_root
from .policy import Decision, Policy, Transition
from .record import DomainStat, Method, Outcome, RecentEntry, State
from .store import DomainStore, create_store

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

__all__ = ["META_FORCE", "META_OUT", "DomainStateManager"]

logger = logging.getLogger("scrapy_domainstate")

#: Request meta key (in): fetch even when the plugin would skip.
META_FORCE = "domainstate_force"
#: Request/response meta key (out): ``{"domain", "state", "expires_at", "method"}``.
META_OUT = "domainstate"
#: Request meta key (in, ``DOMAINSTATE_OUTCOME='items'``): set by a callback to override.
META_OUTCOME = "domainstate_outcome"
#: Internal meta keys.
META_PROBE = "domainstate_probe"
META_REISSUE = "domainstate_reissued"
META_DECISION = "_domainstate_decision"
META_PENDING = "_domainstate_pending"

#: Stats keys, formatted once (an f-string of an Enum per request adds up).
_DECISION_KEYS = {d: f"domainstate/decision/{d.value}" for d in Decision}
_OUTCOME_KEYS = {o: f"domainstate/outcome/{o.value}" for o in Outcome}
#: Key prefix, in the URL-dead table, of "this domain has dead URLs" marks
#: (request fingerprints are hex, so they never collide with it).
_DOMAIN_MARK = "domain:"
_HTTP_SCHEMES = frozenset({"http", "https"})
#: Request meta a HEAD probe keeps from its request.
_PROBE_TRANSPORT_META = (
    "proxy",
    "bindaddress",
    "download_slot",
    "cookiejar",
    "dont_merge_cookies",
    "impersonate",
)
#: Meta this plugin writes for one download; dropped from a request before it is decided.
_PER_REQUEST_KEYS = (META_OUT, META_DECISION, META_PENDING)


class DomainStateManager:
    def __init__(self, crawler: Crawler, config: Config) -> None:
        self.crawler = crawler
        self.config = config
        self.stats = crawler.stats
        self.policy = Policy(config)
        self.classifier = Classifier(config)
        self.store: DomainStore = create_store(config, self.policy)
        self.clock: Callable[[], float] = time.time
        self.opened = False
        self._open_failed: str | None = None
        self.remote: Any = None
        self._warned_store = False
        self._probes: dict[str, list[Deferred[None]]] = {}
        self._cert_verdicts: dict[str, Verdict | None] = {}
        self._seen: set[str] = set()
        #: domains this crawler asked the remote service about (first sight without a probe)
        self._asked: set[str] = set()
        self._browser_items = tuple(config.browser_meta.items())
        # Scrapy filters log levels in its handler, not the logger: a disabled
        # DEBUG line still costs a LogRecord. Decide once.
        level = crawler.settings.get("LOG_LEVEL", "DEBUG")
        self._debug = crawler.settings.getbool("LOG_ENABLED", True) and level in ("DEBUG", logging.DEBUG)
        self._domains_with_dead_urls: dict[str, bool] = {}
        self._outcome_fn: Callable[[Response], Any] | None = None
        if config.outcome not in ("contacts", "items"):
            try:
                self._outcome_fn = load_object(config.outcome)
            except (ImportError, NameError, ValueError, AttributeError) as exc:
                raise ConfigError(f"DOMAINSTATE_OUTCOME: cannot import {config.outcome!r}: {exc}") from exc
            if not callable(self._outcome_fn):
                raise ConfigError(f"DOMAINSTATE_OUTCOME: {config.outcome!r} is not callable")

    # ------------------------------------------------------------ lifecycle

    @classmethod
    def for_crawler(cls, crawler: Crawler) -> DomainStateManager:
        """The crawler's manager, built on first use. ``NotConfigured`` when off."""
        manager = getattr(crawler, "domainstate", None)
        if manager is None:
            try:
                config = Config.from_settings(crawler.settings)
            except ConfigError as exc:
                # A bad value must stop the crawl at start-up, not silently disable it.
                raise ConfigError(f"scrapy-domainstate: {exc}") from exc
            if not config.enabled:
                raise NotConfigured("scrapy-domainstate is disabled (DOMAINSTATE_ENABLED=False)")
            manager = cls(crawler, config)
            # Shared by the components, and public (``scrapy shell``, user code).
            crawler.domainstate = manager  # type: ignore[attr-defined]
        return manager

    def spider_enabled(self) -> bool:
        spider = self.crawler.spider
        return spider is None or getattr(spider, "domainstate_enabled", True)

    def open(self) -> None:
        """Open the store and the remote client (``spider_opened``).

        When either cannot start (store unreachable, bad ``DOMAINSTATE_REMOTE_URL``), log why and
        raise :class:`~scrapy.exceptions.CloseSpider` (reason ``domainstate_unavailable``):
        Scrapy then closes the spider before its first request instead of crawling on without
        the domains' memory.
        """
        if self.opened:
            return
        if self._open_failed is not None:  # the extension and the middleware both call open()
            raise CloseSpider(self._open_failed)
        domain_key("example.com")  # load the bundled suffix list now, not on the first request
        try:
            self.store.open()
        except Exception as exc:
            self._refuse(f"cannot open the store ({self.store.describe()})", "store", exc)
        if self.config.remote_url:
            from .remote import RemoteClient

            try:
                self.remote = RemoteClient.from_config(self.config)
            except Exception as exc:
                with contextlib.suppress(Exception):
                    self.store.close()
                self._refuse("cannot use the shared-state service", "remote", exc)
        self.opened = True
        from .shell import register

        register(self)
        logger.info("scrapy-domainstate: using %s", self.store.describe(), extra={"crawler": self.crawler})

    def _refuse(self, what: str, part: str, exc: Exception) -> NoReturn:
        self._open_failed = "domainstate_unavailable"
        self.stats.set_value(f"domainstate/open_error/{part}", 1)
        logger.error(
            "scrapy-domainstate: %s: %s. Closing the spider before its first request rather than crawling "
            "without the domains' memory; fix it, or set DOMAINSTATE_ENABLED=False to crawl without the plugin",
            what,
            str(exc).rstrip("."),
            extra={"crawler": self.crawler},
        )
        raise CloseSpider(self._open_failed) from exc

    def close(self) -> Deferred[None] | None:
        """Flush and close the store; returns a Deferred while the remote client drains."""
        if not self.opened:
            return None
        self.flush()
        self._state_stats()
        for name in ("corrupt_records", "evicted", "errors", "dropped", "short_circuits", "conflicts"):
            value = getattr(self.store, name, 0)
            if isinstance(value, int) and value:
                self.stats.set_value(f"domainstate/store/{name}", value)
        try:
            self.store.close()
        except Exception:
            self._store_failed("close")
        self.opened = False
        if self.remote is not None:
            remote, self.remote = self.remote, None

            def export(_: object) -> None:
                # after close(): its last round of reports is counted too
                for name, value in remote.counters().items():
                    if value:
                        self.stats.set_value(f"domainstate/remote/{name}", value)

            done: Deferred[None] = remote.close()
            done.addBoth(export)
            return done
        return None

    def flush(self) -> None:
        try:
            self.store.flush()
        except Exception:
            self._store_failed("flush")

    def _store_failed(self, what: str) -> None:
        self.stats.inc_value("domainstate/store_error")
        self.stats.inc_value(f"domainstate/store_error/{what}")
        if not self._warned_store:
            self._warned_store = True
            logger.warning(
                "scrapy-domainstate: the store failed (%s); decisions fall back to 'fetch' "
                "and outcomes stay buffered until it recovers",
                what,
                extra={"crawler": self.crawler},
            )

    def _state_stats(self) -> None:
        now = self.clock()
        for domain in self._seen:
            try:
                stat = self.store.current(domain, now)
            except Exception:
                self._store_failed("read")
                return
            self.stats.inc_value(f"domainstate/state_at_close/{stat.state}")

    # ------------------------------------------------------------ requests

    def key(self, url: str) -> str:
        return domain_key(host_of(url), self.config.per_hostname)

    def is_browser(self, request: Request) -> bool:
        meta = request.meta
        return all(meta.get(k) == v for k, v in self._browser_items)

    def _decide(self, domain: str, now: float) -> tuple[Decision, State, float | None]:
        try:
            return self.store.decide(domain, now)
        except Exception:
            self._store_failed("read")
            return Decision.FETCH, State.UNKNOWN, None

    def _mark(self, request: Request, domain: str, state: State, expires: float | None, method: str) -> None:
        request.meta[META_OUT] = {"domain": domain, "state": state.value, "expires_at": expires, "method": method}

    def _count(self, domain: str, method: str) -> None:
        """``method/{method}`` counts what was sent (or skipped, or served from the cache):
        a routed request is counted when its response or failure comes back."""
        self.stats.inc_value(f"domainstate/method/{method}")
        if self.config.stats_per_domain:
            self.stats.inc_value(f"domainstate/domain/{domain}/{method}")

    def before_request(self, request: Request) -> Any:
        """The middleware's ``process_request``: None, or a coroutine when a probe is awaited."""
        meta = request.meta
        if meta.get(META_PROBE):
            return None
        # Spiders often build requests with ``meta=response.meta``: what this plugin wrote
        # for the parent (its decision, its pending outcome) must not ride along.
        for key in _PER_REQUEST_KEYS:
            meta.pop(key, None)
        if request.url.endswith("/robots.txt") and meta.get("dont_obey_robotstxt"):
            return None  # RobotsTxtMiddleware's own download: neither decided nor evidence
        if urlparse_cached(request).scheme not in _HTTP_SCHEMES:
            return None  # file:, ftp:, s3:, data:...: no site to probe, no browser to fall back to
        domain = self.key(request.url)
        if not domain:
            return None
        self._seen.add(domain)
        now = self.clock()
        force = bool(meta.get(META_FORCE))
        if meta.get(META_REISSUE) == request.url:
            self._mark(request, domain, *self._decide(domain, now)[1:], method=Method.TAB.value)
            return None
        if not force and self._url_is_dead(request, domain, now):
            self._mark(request, domain, State.DEAD, None, "skip")
            self._count(domain, "skip")
            self.stats.inc_value("domainstate/url_dead/skipped")
            raise IgnoreRequest(f"domainstate: skipping {request.url}: this URL answered 404/410 (dead URL)")
        decision, state, expires = self._decide(domain, now)
        # First sight of a domain: ask the fleet, with or without a HEAD probe to follow.
        # (a request that arrives while the answer is awaited waits for it, as for a probe)
        ask = (
            self.remote is not None and state is State.UNKNOWN and (domain not in self._asked or domain in self._probes)
        )
        if decision is Decision.PROBE or ask:
            if self.crawler.engine is None or self.crawler.spider is None:
                if decision is Decision.PROBE:
                    decision = Decision.FETCH_THEN_BROWSER
            else:
                return self._probe_then_route(request, domain, probe=decision is Decision.PROBE)
        self._route(request, domain, decision, state, expires, force)
        return None

    def _route(
        self, request: Request, domain: str, decision: Decision, state: State, expires: float | None, force: bool
    ) -> None:
        self.stats.inc_value(_DECISION_KEYS[decision])
        if decision is Decision.SKIP:
            if not force:
                self._mark(request, domain, state, expires, "skip")
                self._count(domain, "skip")
                if self._debug:
                    logger.debug("Skipping %s: %s is %s", request.url, domain, state, extra={"crawler": self.crawler})
                raise IgnoreRequest(f"domainstate: skipping {request.url}: domain {domain} is {state}")
            self.stats.inc_value("domainstate/forced")
            decision = Decision.FETCH
        browser = self.is_browser(request)
        if decision is Decision.BROWSER and not browser:
            request.meta.update(self.config.browser_meta)
            browser = True
        request.meta[META_DECISION] = decision.value
        self._mark(request, domain, state, expires, Method.TAB.value if browser else Method.FETCH.value)
        if self._debug:
            logger.debug("%s %s: %s is %s", decision, request.url, domain, state, extra={"crawler": self.crawler})

    async def _probe_then_route(self, request: Request, domain: str, probe: bool = True) -> None:
        from scrapy.utils.defer import maybe_deferred_to_future

        waiters = self._probes.get(domain)
        if waiters is None:
            self._probes[domain] = []
            try:
                self._asked.add(domain)
                if not await self._ask_remote(domain) and probe:
                    await self._probe(request, domain)
            finally:
                for waiter in self._probes.pop(domain, []):
                    if not waiter.called:
                        waiter.callback(None)
        else:
            from twisted.internet import reactor

            waiter: Deferred[None] = Deferred()
            waiters.append(waiter)
            self.stats.inc_value("domainstate/probe/waited")
            waiter.addTimeout(self.config.probe_timeout, reactor, onTimeoutCancel=self._probe_wait_timeout)
            await maybe_deferred_to_future(waiter)
        decision, state, expires = self._decide(domain, self.clock())
        if decision is Decision.PROBE:
            # No verdict stamped (store failing, or the probe's record was lost): go on.
            decision = Decision.FETCH_THEN_BROWSER
        self._route(request, domain, decision, state, expires, bool(request.meta.get(META_FORCE)))

    def _probe_wait_timeout(self, result: Any, timeout: float) -> None:
        self.stats.inc_value("domainstate/probe/wait_timeout")

    async def _ask_remote(self, domain: str) -> bool:
        """First sight: adopt the fleet's verdict when its consensus is strong. True if adopted."""
        if self.remote is None:
            return False
        from scrapy.utils.defer import maybe_deferred_to_future

        from .remote import adoption_ttl

        verdict = await maybe_deferred_to_future(self.remote.lookup(domain))
        if verdict is None:
            return False
        now = self.clock()
        try:
            state = self.remote.adopt(self.store.get(domain), verdict, now)
            if state is None or state is State.UNKNOWN:
                return False
            self.store.set_state(domain, state, now, ttl=adoption_ttl(verdict, now))
        except Exception:
            self._store_failed("write")
            return False
        self.stats.inc_value(f"domainstate/remote/adopted/{state}")
        logger.info(
            "Domain %s: adopted %s from the shared-state service (consensus %.2f of %d reporters)",
            domain,
            state,
            verdict.consensus,
            verdict.reporters,
            extra={"crawler": self.crawler},
        )
        return True

    async def _probe(self, request: Request, domain: str) -> None:
        probe = request.replace(
            method="HEAD",
            body=b"",
            dont_filter=True,
            callback=None,
            errback=None,
            meta={
                # How the request reaches the site (its proxy, source address, slot, cookie
                # session) applies to its probe too: never probe from another address.
                **{k: request.meta[k] for k in _PROBE_TRANSPORT_META if k in request.meta},
                META_PROBE: True,
                "dont_retry": True,
                "dont_redirect": True,
                "handle_httpstatus_all": True,
                "download_timeout": self.config.probe_timeout,
                "dont_obey_robotstxt": True,
            },
        )
        self.stats.inc_value("domainstate/decision/probe")
        self._count(domain, Method.HEAD.value)
        assert self.crawler.engine is not None
        root = is_site_root(request.url)
        try:
            response = await self.crawler.engine.download_async(probe)
        except IgnoreRequest:
            return
        except Exception as exc:
            verdict = self.classifier.failure(exc)
        else:
            # From Scrapy's HTTP cache: not evidence, but stamped so the probe is not repeated.
            cached = "cached" in response.flags
            antibot = None if cached else self.classifier.antibot(response.status, response.headers, b"")
            verdict = evidence.probe_verdict(response.status, antibot, root, cached)
        self.record(domain, Method.HEAD, verdict, request)

    # ----------------------------------------------------------- outcomes

    def _url_is_dead(self, request: Request, domain: str, now: float) -> bool:
        if not self.config.url_dead_ttl:
            return False
        try:
            # Most domains have no dead URL: a per-domain mark, read once per crawl,
            # spares computing the request fingerprint for every request.
            has_dead = self._domains_with_dead_urls.get(domain)
            if has_dead is None:
                until = self.store.url_dead_until(_DOMAIN_MARK + domain)
                has_dead = self._domains_with_dead_urls[domain] = until is not None and until > now
            if not has_dead:
                return False
            until = self.store.url_dead_until(self._fingerprint(request))
        except Exception:
            self._store_failed("read")
            return False
        return until is not None and until > now

    def _fingerprint(self, request: Request) -> str:
        return self.crawler.request_fingerprinter.fingerprint(request).hex()

    def record(
        self, domain: str, method: Method, verdict: Verdict, request: Request | None = None
    ) -> tuple[DomainStat, Transition | None] | None:
        """Record one outcome; send the signals, count the stats, log a state change."""
        entry = RecentEntry(self.clock(), method, verdict.outcome, verdict.status, verdict.error_class)
        try:
            stat, transition = self.store.record(domain, entry)
        except Exception:
            self._store_failed("write")
            return None
        stats = self.stats
        stats.inc_value(_OUTCOME_KEYS[verdict.outcome])
        spider = self.crawler.spider
        if self._listened(signals.outcome_recorded):
            self.crawler.signals.send_catch_log(
                signals.outcome_recorded, domain=domain, entry=entry, stat=stat, request=request, spider=spider
            )
        if transition is not None:
            stats.inc_value(f"domainstate/transition/{transition.old}/{transition.new}")
            logger.info(
                "Domain %s: %s -> %s (%s)",
                domain,
                transition.old,
                transition.new,
                transition.reason,
                extra={"crawler": self.crawler},
            )
            self.crawler.signals.send_catch_log(
                signals.state_changed, transition=transition, stat=stat, request=request, spider=spider
            )
            if self.remote is not None and transition.new in (State.DEAD, State.ANTIBOT_HARD):
                self.remote.report(domain, transition.new, stat.last_seen, verdict.error_class)
        return stat, transition

    def _listened(self, signal: object) -> bool:
        # getAllReceivers is a generator: ask for a first receiver.
        return next(iter(getAllReceivers(self.crawler.signals.sender, signal)), None) is not None

    def _useful(self, response: Response) -> Outcome | None:
        """ok-contact / ok-empty from the outcome source; None: not evidence."""
        if self._outcome_fn is not None:
            result = self._outcome_fn(response)
            if result is None:
                return None
            if isinstance(result, bool):
                return Outcome.OK_CONTACT if result else Outcome.OK_EMPTY
            return Outcome(result)
        if not isinstance(response, TextResponse):
            return None
        found = has_contact(response.body, self.config.body_scan_bytes)
        return Outcome.OK_CONTACT if found else Outcome.OK_EMPTY

    def _facts(self, request: Request, response: Response | None = None) -> evidence.Facts:
        meta = request.meta
        return evidence.Facts(
            method=Method.TAB if self.is_browser(request) else Method.FETCH,
            status=None if response is None else response.status,
            is_root=response is not None and is_site_root(response.url),
            cached=response is not None and "cached" in response.flags,
            reissued=meta.get(META_REISSUE) == request.url,
            fallback=meta.get(META_DECISION) == Decision.FETCH_THEN_BROWSER.value,
        )

    def after_response(self, request: Request, response: Response) -> Request | Response:
        """The middleware's ``process_response``."""
        meta = request.meta
        if meta.get(META_PROBE):
            return response
        out = meta.get(META_OUT)
        if not out or out.get("method") in ("skip", None):
            return response
        domain = out["domain"]
        facts = self._facts(request, response)
        if facts.cached:
            # Not sent after all: served from Scrapy's HTTP cache, not evidence.
            meta[META_OUT] = dict(out, method="cache")
            self._count(domain, "cache")
            return response
        self._count(domain, out["method"])
        verdict, passed = evidence.response_verdict(
            self.classifier,
            facts.method,
            response.status,
            response.headers,
            response.body,
            response.url,
            facts.is_root,
        )
        if verdict.outcome is not Outcome.ANTIBOT and response.url.startswith("https:"):
            tls = self._certificate_verdict(response)
            if tls is not None:
                verdict = tls
        judged = evidence.judge_response(facts, verdict, passed)
        if judged.usefulness:
            if self.config.outcome == "items" and self._outcome_fn is None:
                meta[META_PENDING] = (domain, facts.method, verdict.status)
                return response
            judged = evidence.with_usefulness(judged, self._useful_or_none(response))
        return self._apply(request, response, domain, facts.method, judged)

    def _apply(
        self, request: Request, response: Response, domain: str, method: Method, judged: evidence.Evidence
    ) -> Request | Response:
        """Act on what a response means: record it, re-issue it, mark its URL dead."""
        if judged.record is None:
            self.stats.inc_value("domainstate/not_evidence")
            if judged.url_dead:
                self._mark_url_dead(request)
            return self._reissue(request, judged.reason) if judged.reissue else response
        self.record(domain, method, judged.record, request)
        if judged.reissue:
            return self._reissue(request, judged.record.outcome)
        if judged.passed:
            # The browser got past the wall: deliver the page it rendered as what it is.
            request.meta[META_OUT] = dict(request.meta[META_OUT], original_status=response.status)
            return response.replace(status=200)
        return response

    def _useful_or_none(self, response: Response) -> Outcome | None:
        try:
            return self._useful(response)
        except Exception:
            logger.exception("DOMAINSTATE_OUTCOME callable failed for %s", response.url)
            return None

    def after_exception(self, request: Request, exception: BaseException) -> Request | None:
        """The middleware's ``process_exception``."""
        meta = request.meta
        out = meta.get(META_OUT)
        if meta.get(META_PROBE) or not out or out.get("method") in ("skip", None):
            return None
        if isinstance(exception, IgnoreRequest):
            return None
        self._count(out["domain"], out["method"])
        facts = self._facts(request)
        judged = evidence.judge_failure(facts, self.classifier.failure(exception))
        assert judged.record is not None
        self.record(out["domain"], facts.method, judged.record, request)
        return self._reissue(request, judged.record.outcome) if judged.reissue else None

    def _reissue(self, request: Request, why: object) -> Request:
        self.stats.inc_value("domainstate/browser_reissue")
        meta = dict(request.meta)
        meta.update(self.config.browser_meta)
        # The URL, not True: a request built later from a copy of this meta is not a re-issue.
        meta[META_REISSUE] = request.url
        meta.pop(META_DECISION, None)
        logger.debug("Re-issuing %s in the browser (%s)", request.url, why, extra={"crawler": self.crawler})
        return request.replace(dont_filter=True, meta=meta)

    def _mark_url_dead(self, request: Request) -> None:
        if not self.config.url_dead_ttl:
            return
        until = self.clock() + self.config.url_dead_ttl
        domain = request.meta[META_OUT]["domain"]
        try:
            self.store.mark_url_dead(self._fingerprint(request), until)
            self.store.mark_url_dead(_DOMAIN_MARK + domain, until)
            self._domains_with_dead_urls[domain] = True
        except Exception:
            self._store_failed("write")
            return
        self.stats.inc_value("domainstate/url_dead/marked")

    def _certificate_verdict(self, response: Response) -> Verdict | None:
        host = host_of(response.url)
        if host in self._cert_verdicts:
            return self._cert_verdicts[host]
        verdict = self.classifier.certificate(response.certificate, host, self.clock())
        if len(self._cert_verdicts) > 10000:
            self._cert_verdicts.clear()
        self._cert_verdicts[host] = verdict
        return verdict

    def record_items(self, response: Response, n_items: int) -> None:
        """The spider middleware's hook (``DOMAINSTATE_OUTCOME='items'``)."""
        pending = response.meta.pop(META_PENDING, None)
        if pending is None:
            return
        domain, method, status = pending
        override = response.meta.get(META_OUTCOME)
        if override is not None:
            try:
                outcome = Outcome(override)
            except ValueError:
                logger.warning("Ignoring unknown %s=%r on %s", META_OUTCOME, override, response.url)
                outcome = Outcome.OK_CONTACT if n_items else Outcome.OK_EMPTY
        else:
            outcome = Outcome.OK_CONTACT if n_items else Outcome.OK_EMPTY
        self.record(domain, method, Verdict(outcome, status), response.request)

    # ------------------------------------------------------------ shell

    def inspect(self, url: str) -> dict[str, Any]:
        """The record and the decision for a URL (for ``scrapy shell`` and the command)."""
        domain = self.key(url)
        now = self.clock()
        stat = self.store.current(domain, now)
        decision = self.policy.decide(stat, now)
        return {"domain": domain, "state": stat.state.value, "decision": decision.value, "record": stat}
