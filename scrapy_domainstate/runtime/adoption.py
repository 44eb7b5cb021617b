"""First sight of a domain with a shared-state service: adopt the fleet's verdict.

The service (:mod:`scrapy_domainstate.fleet.remote`) answers with the states other crawlers
reported; when its consensus is strong enough (``RemoteClient.adopt``), the state is set in
the local store for the TTL the verdict allows, and no HEAD probe is needed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from scrapy.utils.defer import maybe_deferred_to_future

from scrapy_domainstate.core.record import State
from scrapy_domainstate.store import DomainStore

__all__ = ["adopt"]


async def adopt(
    remote: Any, store: DomainStore, domain: str, clock: Callable[[], float], on_store_error: Callable[[str], None]
) -> tuple[State, Any] | None:
    """The adopted state and the service's verdict, or ``None`` (no answer, no consensus)."""
    from scrapy_domainstate.fleet.remote import adoption_ttl

    verdict = await maybe_deferred_to_future(remote.lookup(domain))
    if verdict is None:
        return None
    now = clock()
    try:
        state = remote.adopt(store.get(domain), verdict, now)
        if state is None or state is State.UNKNOWN:
            return None
        store.set_state(domain, state, now, ttl=adoption_ttl(verdict, now))
    except Exception:
        on_store_error("write")
        return None
    return state, verdict
