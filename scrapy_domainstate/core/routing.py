"""Where one request goes, pure: the domain's decision and the request's facts -> an action.

No I/O, no Scrapy objects: the manager reads the store (the decision, whether the URL is
dead) and acts on the :class:`Route` returned here (raise ``IgnoreRequest``, add the browser
meta, wait for a probe, mark the request).

API:

``RequestFacts(scheme="http", robots=False, domain="", reissued=False, force=False,
browser=False, browser_route=True)``
    (The plugin's own HEAD probes never get here.) ``robots``: the robots.txt download of
    ``RobotsTxtMiddleware``; ``domain``: the domain key (``""``: none); ``reissued``: the
    request is a browser re-issue; ``force``: ``meta["domainstate_force"]``; ``browser``: the
    request already carries the browser meta; ``browser_route``: a browser download handler
    would answer it (false in no-browser mode).

Each function of the facts has a twin of the facts it reads, for the per-request path
(``admit_of``, ``dead_url_of``, ``route_of``: no facts object built per request).

``admit(facts) -> Route | None``
    Before the store is read: a request the plugin leaves alone (``PASS``), a re-issue
    (``TAB``, undecided), or ``None``: ask the store.
``dead_url(facts) -> Route | None``
    The URL answered 404/410 earlier: ``SKIP`` unless forced.
``route(facts, decision, can_wait=False, ask_remote=False) -> Route``
    The decision's action: ``SKIP``, ``WAIT`` (for a probe or the shared-state service, then
    decide again with ``can_wait=False``), ``FETCH`` or ``TAB``. Without a browser route, a
    ``BROWSER`` decision is a ``SKIP`` (reason ``no-browser``): a plain fetch cannot pass it.
``robots_txt(facts, decision) -> Route``
    ``RobotsTxtMiddleware``'s download for a domain decided ``decision``: ``SKIP`` when that
    domain's own requests would be skipped (none is sent to a domain the plugin skips), else
    ``PASS`` (never decided, never evidence).

``Route(action, reason=None, decision=None, counted=None, forced=False, to_browser=False,
probe=False)``
    ``decision``: what the request was decided (written into its meta); ``counted``: the
    decision counted in the ``decision/*`` stats (a forced skip counts as ``skip`` and goes
    as ``fetch``); ``to_browser``: add the browser meta; ``probe``: with ``WAIT``, send the
    HEAD probe (else only ask the shared-state service).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from enum import Enum

from scrapy_domainstate.core.policy import Decision

__all__ = [
    "MAY_SKIP",
    "SKIP_URL_DEAD",
    "Action",
    "RequestFacts",
    "Route",
    "admit",
    "admit_of",
    "dead_url",
    "dead_url_of",
    "robots_txt",
    "route",
    "route_of",
]

_HTTP_SCHEMES = frozenset({"http", "https"})


class Action(str, Enum):
    PASS = "pass"  # not decided: not this plugin's business
    SKIP = "skip"
    WAIT = "wait"  # probe the domain and/or ask the shared-state service, then route again
    FETCH = "fetch"
    TAB = "tab"


#: ``Route.reason`` values.
ROBOTS, NOT_HTTP, NO_DOMAIN, REISSUE, URL_DEAD, DOMAIN, NO_BROWSER = (
    "robots",
    "not-http",
    "no-domain",
    "reissue",
    "url-dead",
    "domain",
    "no-browser",
)


@dataclass(frozen=True, slots=True)
class RequestFacts:
    scheme: str = "http"
    robots: bool = False
    domain: str = ""
    reissued: bool = False
    force: bool = False
    browser: bool = False
    browser_route: bool = True


@dataclass(frozen=True, slots=True)
class Route:
    action: Action
    reason: str | None = None
    decision: Decision | None = None
    counted: Decision | None = None
    forced: bool = False
    to_browser: bool = False
    probe: bool = False

    @property
    def method(self) -> str:
        """The ``method`` the request is marked with (``fetch``, ``tab`` or ``skip``)."""
        return self.action._value_  # not .value: the Enum property is a Python call


def admit(facts: RequestFacts) -> Route | None:
    """A request that needs no decision, or ``None`` when the store must be asked.

    Left alone: ``RobotsTxtMiddleware``'s robots.txt download
    (neither decided nor evidence); other schemes than http(s) (``file:``, ``data:``... no
    site to probe, no browser to fall back to); a URL without a domain. A browser re-issue
    goes as ``tab`` without a new decision.
    """
    return admit_of(facts.robots, facts.scheme, facts.domain, facts.reissued)


def admit_of(robots: bool, scheme: str, domain: str, reissued: bool) -> Route | None:
    """:func:`admit` from the facts it reads (the per-request path, no facts object built)."""
    if robots:
        return _PASS_ROBOTS
    if scheme not in _HTTP_SCHEMES:
        return _PASS_NOT_HTTP
    if not domain:
        return _PASS_NO_DOMAIN
    if reissued:
        return _TAB_REISSUE
    return None


def dead_url(facts: RequestFacts) -> Route | None:
    """A URL marked dead (404/410 off the root): skipped unless forced."""
    return dead_url_of(facts.force)


def dead_url_of(force: bool) -> Route | None:
    """:func:`dead_url` from ``force`` alone."""
    return None if force else SKIP_URL_DEAD


def route(facts: RequestFacts, decision: Decision, can_wait: bool = False, ask_remote: bool = False) -> Route:
    """The action for a request whose domain was decided ``decision``.

    ``PROBE`` (and the first sight of a domain when a shared-state service is configured,
    ``ask_remote``) waits when the engine can download a probe (``can_wait``); without an
    engine, a ``PROBE`` goes on as ``fetch-then-browser``. ``SKIP`` skips unless forced
    (then it is a ``fetch``). ``BROWSER`` adds the browser meta to a request that lacks it.
    """
    return route_of(decision, facts.force, facts.browser, facts.browser_route, can_wait, ask_remote)


def route_of(
    decision: Decision,
    force: bool,
    browser: bool,
    browser_route: bool,
    can_wait: bool = False,
    ask_remote: bool = False,
) -> Route:
    """:func:`route` from the facts it reads (the per-request path, no facts object built)."""
    # (no bool() of each: 1 and True are the same key, and _route reads them as truth values)
    key = (decision, force, browser, browser_route, can_wait, ask_remote)
    found = _ROUTES.get(key)
    if found is None:
        # Routes are immutable and depend on these six inputs only: one per combination.
        found = _ROUTES[key] = _route(decision, *(bool(flag) for flag in key[1:]))
    return found


#: (decision, force, browser, browser_route, can_wait, ask_remote) -> its route (at most 160).
_ROUTES: dict[tuple[Decision, bool, bool, bool, bool, bool], Route] = {}


def _route(
    decision: Decision, force: bool, browser: bool, browser_route: bool, can_wait: bool, ask_remote: bool
) -> Route:
    if can_wait and (decision is Decision.PROBE or ask_remote):
        return Route(Action.WAIT, probe=decision is Decision.PROBE)
    counted = decision
    if decision is Decision.PROBE:
        decision = Decision.FETCH_THEN_BROWSER
        counted = decision
    forced = False
    if decision is Decision.SKIP:
        if not force:
            return Route(Action.SKIP, DOMAIN, decision, counted)
        decision, forced = Decision.FETCH, True
    elif decision is Decision.BROWSER and not browser_route:
        if not force:
            return Route(Action.SKIP, NO_BROWSER, decision, counted)
        decision, forced = Decision.FETCH, True
    to_browser = decision is Decision.BROWSER and not browser
    action = Action.TAB if browser or to_browser else Action.FETCH
    return Route(action, None, decision, counted, forced, to_browser)


_PASS_ROBOTS = Route(Action.PASS, ROBOTS)
_PASS_NOT_HTTP = Route(Action.PASS, NOT_HTTP)
_PASS_NO_DOMAIN = Route(Action.PASS, NO_DOMAIN)
_TAB_REISSUE = Route(Action.TAB, REISSUE)
#: The route of a request for a URL marked dead, not forced (:func:`dead_url_of`).
SKIP_URL_DEAD = Route(Action.SKIP, URL_DEAD)


def robots_txt(facts: RequestFacts, decision: Decision) -> Route:
    """The robots.txt download for a domain: skipped with the domain's own requests."""
    if not facts.force and (decision is Decision.SKIP or (decision is Decision.BROWSER and not facts.browser_route)):
        return Route(Action.SKIP, ROBOTS, decision)
    return _PASS_ROBOTS


#: The decisions whose route can be a skip, derived from :func:`_route` over every combination of
#: its flags: a request decided any other way is sent.
MAY_SKIP: frozenset[Decision] = frozenset(
    decision
    for decision in Decision
    if any(_route(decision, *flags).action is Action.SKIP for flags in itertools.product((False, True), repeat=5))
)
