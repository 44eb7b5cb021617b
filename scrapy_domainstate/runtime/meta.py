"""The request meta keys the runtime reads and writes, and the constants its flows share."""

from __future__ import annotations

from scrapy_domainstate.core.policy import Decision
from scrapy_domainstate.core.record import State
from scrapy_domainstate.runtime.probes import META_PROBE
from scrapy_domainstate.runtime.sources import META_OUTCOME

__all__ = [
    "META_AFTER_SHELL",
    "META_DECISION",
    "META_FORCE",
    "META_LEAD",
    "META_LEAD_DEAD",
    "META_NO_RETRY",
    "META_OUT",
    "META_OUTCOME",
    "META_PENDING",
    "META_PROBE",
    "META_REISSUE",
    "META_REPEAT",
    "META_SEEN",
]

#: Request meta key (in): fetch even when the plugin would skip.
META_FORCE = "domainstate_force"
#: Request/response meta key (out): ``{"domain", "state", "expires_at", "method"}``.
META_OUT = "domainstate"
#: Internal meta keys (``META_PROBE`` and ``META_OUTCOME`` are kept importable from here).
META_REISSUE = "domainstate_reissued"
META_DECISION = "_domainstate_decision"
META_PENDING = "_domainstate_pending"
#: ``(retry_times, redirects, url, host facts key)`` when the request was decided: a copy that
#: comes back with more is a retry or a redirect of it (``repeat/{retry,redirect}``), not a new
#: decision; the record of its outcome reads the host key (of that URL) from here.
META_SEEN = "_domainstate_seen"
META_REPEAT = "_domainstate_repeat"
#: The URL of a browser re-issue of a plain fetch that got a script-only shell (its render
#: is the evidence that teaches the domain it needs the browser).
META_AFTER_SHELL = "_domainstate_after_shell"
#: The URL of a request that leads its domain (its probe, or an antibot-hard domain's canary):
#: the domain's other requests wait for its outcome (:class:`._probes.LeadGate`).
META_LEAD = "_domainstate_lead"
#: Set on a lead whose outcome was a dead signal (the next request leads in turn).
META_LEAD_DEAD = "_domainstate_lead_dead"
#: Set with ``dont_retry`` on the response that paused its host: that ``dont_retry`` is the
#: plugin's, and is dropped from a request built with the response's meta.
META_NO_RETRY = "_domainstate_no_retry"
#: Meta this plugin writes for one download; dropped from a request before it is decided.
PER_REQUEST_KEYS = (META_OUT, META_DECISION, META_PENDING, META_REPEAT, META_LEAD, META_LEAD_DEAD, META_NO_RETRY)
UNDECIDED = ("skip", None)
REPORTED = (State.DEAD, State.ANTIBOT_HARD)
FTB = Decision.FETCH_THEN_BROWSER.value
DEAD_STATUSES = (404, 410)
#: States whose requests wait for room in their download slot before they are decided.
LEARNING = frozenset({State.UNKNOWN, State.ANTIBOT_SOFT})

#: ``(force, browser, browser_route)`` of a request (see :meth:`DomainStateManager._flags`).
Flags = tuple[bool, bool, bool]
