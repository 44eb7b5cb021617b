"""What one crawl did, in numbers: the close summary and the crawl log the report reads.

:class:`CrawlSummary` is built at ``spider_closed`` from the crawl's ``domainstate/...``
stats (pure: no I/O). It is logged as one INFO line and appended to the store's crawl
log (:func:`append_crawl`), so ``scrapy domainstate report`` can show what the plugin
saved crawl by crawl (:func:`read_crawls`).

**What it saved** is counted against *plain fetch with a browser fallback* (the usual
way without memory: a GET for every request, and a browser render after every GET that
failed or was blocked):

* a request skipped because its domain is ``dead``, ``antibot-hard`` (no browser
  route) or its URL answered 404/410 saves a GET and the render that would follow it;
* a request skipped because its domain is ``cold`` saves a GET (a GET of a page
  without contacts succeeds: no render would follow);
* a request sent straight to the browser (``antibot-hard``) saves the GET before it;
* every HEAD probe the plugin sent is a request fallback would not have sent.

So ``requests_saved`` and ``renders_saved`` are lower bounds: a ``friendly`` domain's
failed fetch that the plugin does not re-issue in the browser saves a render too, and
is not counted.

Where the log lives: LMDB keeps it as JSON lines in ``crawls.jsonl`` beside
``data.mdb`` (the last :data:`KEEP` crawls); Redis in the list ``<prefix>crawls``; the
memory store on the store object.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from scrapy_domainstate.core.record import State
from scrapy_domainstate.tools.showtext import plural

if TYPE_CHECKING:
    from scrapy_domainstate.store.base import DomainStore

__all__ = ["KEEP", "CrawlSummary", "append_crawl", "read_crawls"]

logger = logging.getLogger(__name__)

#: Crawls kept in a store's crawl log (the oldest are dropped).
KEEP = 200
_PREFIX = "domainstate/"
#: Skip reasons (``domainstate/skip/{reason}``) whose GET would have been followed by a render.
_FAILING_SKIPS = frozenset({State.DEAD.value, State.ANTIBOT_HARD.value, "dead-url"})


def _int(stats: Mapping[str, Any], key: str) -> int:
    value = stats.get(_PREFIX + key, 0)
    return int(value) if isinstance(value, (int, float)) else 0


def _family(stats: Mapping[str, Any], family: str) -> dict[str, int]:
    prefix = f"{_PREFIX}{family}/"
    out = {}
    for key, value in stats.items():
        if key.startswith(prefix) and isinstance(value, (int, float)) and value:
            name = key[len(prefix) :]
            if "/" not in name:
                out[name] = int(value)
    return dict(sorted(out.items()))


@dataclass(frozen=True)
class CrawlSummary:
    """The numbers of one crawl (one spider run) as the plugin saw them."""

    started: float
    finished: float
    spider: str = ""
    finish_reason: str = ""
    #: The store, as ``describe()`` names it.
    store: str = ""
    #: state -> domains this crawl touched, in that state at close.
    domains: dict[str, int] = field(default_factory=dict)
    #: ``old/new`` -> state changes.
    transitions: dict[str, int] = field(default_factory=dict)
    #: method -> requests decided and sent (``head``, ``fetch``, ``tab``): one per decision (retries: ``retries``).
    sent: dict[str, int] = field(default_factory=dict)
    #: reason (a state, or ``dead-url``) -> requests skipped.
    skipped: dict[str, int] = field(default_factory=dict)
    cached: int = 0
    reissued: int = 0
    browser_direct: int = 0
    forced: int = 0
    retries: int = 0
    #: Pages judged useful (contacts, items, or the callable's yes), fetched or rendered.
    useful: int = 0
    #: Item-less pages that led on to the same site (``navigation``: neither useful nor empty),
    #: and a friendly domain's fetched pages that were not scanned (counted in ``not_scanned``).
    navigation: int = 0
    #: A friendly domain's fetched pages recorded without a contact scan (``not-scanned``).
    not_scanned: int = 0
    #: Home pages that were a parking or for-sale page (``parked``: their domains are dead).
    parked: int = 0
    #: Canaries: the one plain fetch per crawl to an ``antibot-hard`` domain.
    canaries: int = 0
    #: Renders of ``antibot-hard`` domains that did not get a page.
    hard_renders_failed: int = 0
    #: Download slots slowed by a 429/503 (or started slow from a remembered delay).
    slowed: int = 0
    #: Hosts paused for the rest of the crawl (timeouts in a row, or a Retry-After past the cap).
    paused: int = 0
    #: Times the blocked-crawl alarm went off.
    blocked: int = 0

    # ----------------------------------------------------------- derived

    @property
    def probes(self) -> int:
        return self.sent.get("head", 0)

    @property
    def renders(self) -> int:
        return self.sent.get("tab", 0)

    @property
    def requests_sent(self) -> int:
        return sum(self.sent.values())

    @property
    def requests_skipped(self) -> int:
        return sum(self.skipped.values())

    @property
    def renders_saved(self) -> int:
        """Renders fetch-with-fallback would have made after the GETs the plugin skipped."""
        return sum(n for reason, n in self.skipped.items() if reason in _FAILING_SKIPS)

    @property
    def requests_saved(self) -> int:
        """Requests fetch-with-fallback would have sent, minus what this crawl sent more (probes)."""
        return self.requests_skipped + self.renders_saved + self.browser_direct - self.probes

    @property
    def fallback_requests(self) -> int:
        """What fetch-with-fallback would have sent for the same requests (estimate)."""
        return self.requests_sent + self.requests_saved

    # ---------------------------------------------------------- building

    @classmethod
    def from_stats(
        cls,
        stats: Mapping[str, Any],
        *,
        started: float,
        finished: float,
        spider: str = "",
        store: str = "",
    ) -> CrawlSummary:
        """From a crawl's stats (``crawler.stats.get_stats()``)."""
        sent = {m: n for m, n in _family(stats, "method").items() if m in ("head", "fetch", "tab")}
        return cls(
            started=started,
            finished=finished,
            spider=spider,
            finish_reason=str(stats.get("finish_reason", "") or ""),
            store=store,
            domains=_family(stats, "state_at_close"),
            transitions={
                k[len(_PREFIX + "transition/") :]: int(v)
                for k, v in sorted(stats.items())
                if k.startswith(_PREFIX + "transition/") and isinstance(v, (int, float)) and v
            },
            sent=sent,
            # (skip/before_queue counts again, by where, requests already in skip/{reason})
            skipped={k: n for k, n in _family(stats, "skip").items() if k != "before_queue"},
            cached=_int(stats, "method/cache"),
            reissued=_int(stats, "browser_reissue"),
            # (without a browser route, antibot-hard requests are decided "browser" and skipped)
            browser_direct=max(0, _int(stats, "decision/browser") - _int(stats, "skip/antibot-hard")),
            forced=_int(stats, "forced"),
            retries=_int(stats, "repeat/retry"),
            useful=_int(stats, "outcome/ok-contact"),
            navigation=_int(stats, "outcome/navigation"),
            not_scanned=_int(stats, "not_scanned"),
            parked=_int(stats, "outcome/parked"),
            canaries=_int(stats, "canary"),
            hard_renders_failed=_int(stats, "hard_render_failed"),
            slowed=_int(stats, "polite/slowed"),
            paused=_int(stats, "paused_hosts"),
            blocked=_int(stats, "blocked"),
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CrawlSummary:
        """Back from :meth:`to_json`; unknown keys are ignored, a bad value raises ``ValueError``."""
        try:
            return cls(
                started=float(data["started"]),
                finished=float(data["finished"]),
                spider=str(data.get("spider", "")),
                finish_reason=str(data.get("finish_reason", "")),
                store=str(data.get("store", "")),
                domains=_counts(data.get("domains")),
                transitions=_counts(data.get("transitions")),
                sent=_counts(data.get("sent")),
                skipped=_counts(data.get("skipped")),
                cached=int(data.get("cached", 0)),
                reissued=int(data.get("reissued", 0)),
                browser_direct=int(data.get("browser_direct", 0)),
                forced=int(data.get("forced", 0)),
                retries=int(data.get("retries", 0)),
                useful=int(data.get("useful", 0)),
                navigation=int(data.get("navigation", 0)),
                not_scanned=int(data.get("not_scanned", 0)),
                parked=int(data.get("parked", 0)),
                canaries=int(data.get("canaries", 0)),
                hard_renders_failed=int(data.get("hard_renders_failed", 0)),
                slowed=int(data.get("slowed", 0)),
                paused=int(data.get("paused", 0)),
                blocked=int(data.get("blocked", 0)),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"not a crawl summary: {exc}") from None

    # ------------------------------------------------------------ the log

    def log_message(self) -> tuple[str, tuple[Any, ...]]:
        """The close summary as a lazy ``%``-style message and its arguments."""

        def fmt(counts: Mapping[str, int]) -> str:
            return ", ".join(f"{k} {v:,}" for k, v in counts.items()) or "none"

        saved = self.requests_saved
        renders = f"{self.renders_saved:,} renders"
        if saved >= 0:
            verdict = f"saved at least {saved:,} requests and {renders}"
        else:  # a first crawl: the probes cost more than the skips saved
            verdict = f"cost {-saved:,} more requests (its {self.probes:,} HEAD probes) and saved {renders}"
        return (
            "scrapy-domainstate: %s domains touched (%s); %s state changes (%s); requests sent %s "
            "(%s HEAD probes, %s renders, %s browser re-issues, %s retries); %s skipped (%s); %s from the HTTP cache; "
            "%s useful pages, %s navigation pages%s, %s parked home pages; antibot-hard: %s canaries, "
            "%s failed renders; %s slowed down, %s paused%s; against plain fetch-with-fallback this %s",
            (
                f"{sum(self.domains.values()):,}",
                fmt(self.domains),
                f"{sum(self.transitions.values()):,}",
                fmt(self.transitions),
                f"{self.requests_sent:,}",
                f"{self.probes:,}",
                f"{self.renders:,}",
                f"{self.reissued:,}",
                f"{self.retries:,}",
                f"{self.requests_skipped:,}",
                fmt(self.skipped),
                f"{self.cached:,}",
                f"{self.useful:,}",
                f"{self.navigation - self.not_scanned:,}",
                f", {self.not_scanned:,} pages of friendly domains not scanned" if self.not_scanned else "",
                f"{self.parked:,}",
                f"{self.canaries:,}",
                f"{self.hard_renders_failed:,}",
                plural(self.slowed, "slot"),
                plural(self.paused, "host"),
                "; BLOCKED: most responses were walls (the alarm went off)" if self.blocked else "",
                verdict,
            ),
        )


def _counts(value: Any) -> dict[str, int]:
    if value is None:
        return {}
    return {str(k): int(v) for k, v in dict(value).items()}


# ------------------------------------------------------------- persistence


#: The log's name in the store (LMDB: ``crawls.jsonl`` beside the database; Redis:
#: ``<prefix>crawls``): see :meth:`~scrapy_domainstate.store.DomainStore.append_log`.
LOG = "crawls"


def append_crawl(store: DomainStore, summary: CrawlSummary) -> None:
    """Add ``summary`` to the store's crawl log, keeping the last :data:`KEEP`. May raise."""
    store.append_log(LOG, json.dumps(summary.to_json(), separators=(",", ":"), sort_keys=True), KEEP)


def read_crawls(store: DomainStore, limit: int = KEEP) -> list[CrawlSummary]:
    """The store's crawl log, oldest first (at most ``limit``). Unreadable lines are skipped."""
    out = []
    for text in store.read_log(LOG, KEEP):
        if not text.strip():
            continue
        try:
            out.append(CrawlSummary.from_json(json.loads(text)))
        except ValueError:
            logger.debug("Skipping an unreadable crawl-log line: %.80r", text)
    return out[-limit:] if limit > 0 else []
