"""Inspection helpers for ``scrapy shell``.

With the plugin enabled, ``fetch(url)`` in ``scrapy shell`` goes through the
middleware and ``response.meta["domainstate"]`` shows the decision. The running
plugin is also reachable as ``crawler.domainstate`` (the manager: ``.store``,
``.inspect(url)``), and these helpers find it without arguments::

    >>> from scrapy_domainstate.shell import domainstate, store
    >>> domainstate("https://example.com/about")
    {'domain': 'example.com', 'state': 'friendly', 'decision': 'fetch', 'record': DomainStat(...)}
    >>> explain("https://example.com/about")   # why that state, and what would change it
    >>> explain(response)                      # the classifier's verdict on the fetched page
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from scrapy_domainstate.runtime import registry as _registry

if TYPE_CHECKING:
    from scrapy_domainstate.runtime.lifecycle import DomainStateManager
    from scrapy_domainstate.store import DomainStore

__all__ = ["domainstate", "explain", "store"]


def _latest() -> DomainStateManager:
    manager = _registry.latest()
    if manager is None:
        raise RuntimeError(
            "scrapy-domainstate is not running in this process: enable it "
            '(ADDONS = {"scrapy_domainstate.Addon": 0}) and fetch() something first'
        )
    return cast("DomainStateManager", manager)


def domainstate(url: str) -> dict[str, Any]:
    """The domain key, state, record and the decision a request to ``url`` would get now."""
    return _latest().inspect(url)


def explain(target: Any) -> dict[str, Any]:
    """Why the domain of a URL is in its state and what would change it; for a response
    (``fetch()``'s ``response``), the classifier's verdict on it and the rule that fired. Prints
    as ``scrapy domainstate explain`` does (docs/explain.rst)."""
    return _latest().explain(target)


def store() -> DomainStore:
    """The store of the running plugin."""
    return _latest().store


#: Kept for code that registered a manager itself; the runtime registers it when it opens.
register = _registry.register
