"""What the service says about a domain, and when a crawler adopts it. Pure: no I/O."""

from __future__ import annotations

from dataclasses import dataclass

from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.record import DomainStat, State

__all__ = ["RemoteVerdict", "adopt", "adoption_ttl"]


@dataclass(frozen=True, slots=True)
class RemoteVerdict:
    """What the service says about one domain."""

    domain: str
    state: State
    #: Share of the distinct reporters that agree with ``state`` (0..1).
    consensus: float
    #: Distinct reporters with a current vote on the domain.
    reporters: int
    #: The newest observation behind ``state`` (epoch seconds).
    last_seen: float
    #: When the verdict runs out (``None``: the state has no TTL).
    expires_at: float | None = None
    #: Reporters that voted for ``state`` (``None``: the service did not say).
    agreeing: int | None = None

    @property
    def supporters(self) -> int:
        """Reporters agreeing (without ``agreeing``: every reporter, the rule before it existed)."""
        return self.reporters if self.agreeing is None else self.agreeing

    @property
    def support(self) -> float:
        """The share agreeing once a single dissenter is set aside (see :func:`adopt`)."""
        dissenting = self.reporters - self.supporters
        if dissenting <= 0:
            return self.consensus
        if dissenting == 1:
            return 1.0
        return self.supporters / (self.reporters - 1)


def adopt(
    local: DomainStat | None, remote: RemoteVerdict | None, config: Config, now: float | None = None
) -> State | None:
    """The state to adopt from ``remote``, or ``None`` to keep the local one.

    A remote verdict counts only when at least ``config.remote_min_reporters`` distinct
    reporters agree on it and its support is strictly above ``config.remote_consensus``.
    The support is the share of the reporters agreeing once *one* dissenter is set aside
    (``agreeing / (reporters - 1)`` when anybody dissents): a single reporter, honest
    or not, cannot veto what enough others agree on (1 dissenter against 3, 4 or 5 agreeing
    reporters: adopted), while two or more dissenters still count (3 against 2: 0.75, not
    adopted). Votes for ``unknown`` are no verdict: the service leaves them out. It then
    replaces the local state when:

    * there is no local verdict (no record, or an ``unknown`` one): the remote state is
      adopted unless the local record holds evidence (a ``recent`` entry) newer than the
      remote ``last_seen``;
    * the local record has a verdict that disagrees: the newer ``last_seen`` wins, so the
      remote state is adopted only when ``remote.last_seen > local.last_seen``.

    With ``now``, a remote verdict that has already expired is never adopted. Pure: no I/O.
    """
    if remote is None:
        return None
    if not (remote.support > config.remote_consensus and remote.supporters >= config.remote_min_reporters):
        return None
    if now is not None and remote.expires_at is not None and remote.expires_at <= now:
        return None
    if local is None:
        return None if remote.state is State.UNKNOWN else remote.state
    if local.state is remote.state:
        return None
    if local.state is State.UNKNOWN:
        # "unknown" is no verdict; only fresh local evidence outweighs the fleet's.
        local_time = max((e.at for e in local.recent), default=0.0)
    else:
        local_time = local.last_seen
    return remote.state if remote.last_seen > local_time else None


def adoption_ttl(remote: RemoteVerdict, now: float) -> float | None:
    """The ``ttl`` to give ``DomainStore.set_state`` when adopting ``remote``.

    The remote verdict's remaining lifetime, so an adopted state runs out when the fleet's
    evidence does (``None``: the state has no TTL). At least one second.
    """
    if remote.expires_at is None:
        return None
    return max(remote.expires_at - now, 1.0)
