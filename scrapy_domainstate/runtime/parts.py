"""What every flow of the runtime reads: the parts the lifecycle builds, declared once.

:class:`Parts` holds no code: it names (and types) the attributes
:class:`~scrapy_domainstate.runtime.lifecycle.DomainStateManager` sets up, so each flow
(requests, outcomes, manners) can be read and type-checked in its own module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Request
    from twisted.internet import task

    from scrapy_domainstate.core.config import Config
    from scrapy_domainstate.core.policy import Policy, Transition
    from scrapy_domainstate.core.record import DomainStat, Method, State
    from scrapy_domainstate.detect.classify import Classifier
    from scrapy_domainstate.detect.verdict import Verdict
    from scrapy_domainstate.runtime.alarm import BlockedAlarm
    from scrapy_domainstate.runtime.browser import BrowserRoute
    from scrapy_domainstate.runtime.deadurls import DeadUrls
    from scrapy_domainstate.runtime.polite import HostPauses, Politeness
    from scrapy_domainstate.runtime.probes import LeadGate, ProbeGate
    from scrapy_domainstate.runtime.sendgate import SendGate
    from scrapy_domainstate.runtime.sources import OutcomeSource
    from scrapy_domainstate.runtime.telemetry import Telemetry
    from scrapy_domainstate.store import DomainStore


class Parts:
    """The runtime's parts (see the module's docstring); set by ``DomainStateManager.__init__``."""

    crawler: Crawler
    config: Config
    policy: Policy
    classifier: Classifier
    store: DomainStore
    outcomes: OutcomeSource
    purpose: str | None
    telemetry: Telemetry
    probes: ProbeGate
    leads: LeadGate
    browser: BrowserRoute
    polite: Politeness
    pauses: HostPauses
    alarm: BlockedAlarm
    dead_urls: DeadUrls
    gate: SendGate
    remote: Any
    #: the wall clock the records are stamped with (tests swap it)
    clock: Callable[[], float]
    opened: bool
    exit_status_on_failure: bool
    _prefetch: bool
    _open_failed: str | None
    _timer: task.LoopingCall | None
    _froze: bool
    _cert_verdicts: dict[str, Verdict | None]
    _seen: set[str]
    _seen_capped: bool
    _canaries: set[str]
    _asked: set[str]
    _left_connected: bool
    downloaded_middleware: bool
    deciding: bool
    _opened_at: float

    if TYPE_CHECKING:
        # What one flow calls on a flow above it in the chain (MannersFlow <- OutcomeFlow <-
        # RequestFlow <- DomainStateManager), declared for the type checker only: each is
        # defined once, in the module named.

        def _see(self, domain: str) -> None: ...  # lifecycle

        def _mark(
            self, request: Request, domain: str, state: State, expires: float | None, method: str
        ) -> None: ...  # requests

        def _engine_running(self) -> bool: ...  # requests

        def _release_lead(self, request: Request) -> None: ...  # requests

        def record(  # outcomes
            self, domain: str, method: Method, verdict: Verdict, request: Request | None = None
        ) -> tuple[DomainStat, Transition | None] | None: ...
