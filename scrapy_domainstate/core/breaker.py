"""One circuit breaker for every backend that can fail: the Redis and LMDB stores and the
remote client. Pure state, the clock passed in: no I/O, no logging of its own."""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["CircuitBreaker"]


class CircuitBreaker:
    """Closed -> (``threshold`` consecutive failures, or one hard failure) -> open ->
    (cool-down) -> half-open.

    Half-open lets one trial call through when the caller announces it with
    :meth:`started` (callers that do not, let every call through): its success closes the
    breaker, its failure opens it again for twice the previous cool-down (at most
    ``max_cooldown``; equal to ``cooldown`` for a fixed wait).
    """

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half-open"

    def __init__(
        self,
        threshold: int = 3,
        cooldown: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        max_cooldown: float = 600.0,
    ) -> None:
        self.threshold = max(1, threshold)
        self.base_cooldown = cooldown
        self.max_cooldown = max(cooldown, max_cooldown)
        self.cooldown = cooldown
        self.clock = clock
        self.state = self.CLOSED
        self.failures = 0
        self.opened = 0
        self._opened_at = 0.0
        self._trial = False

    def allow(self) -> bool:
        """Whether a call may be made now (does not start a trial)."""
        if self.state == self.OPEN and self.clock() >= self._opened_at + self.cooldown:
            self.state = self.HALF_OPEN
            self._trial = False
        if self.state == self.CLOSED:
            return True
        return self.state == self.HALF_OPEN and not self._trial

    def started(self) -> None:
        """A call is being made (in half-open state: the trial)."""
        if self.state == self.HALF_OPEN:
            self._trial = True

    def success(self) -> bool:
        """Count a successful call; ``True`` when it closed an open or half-open breaker."""
        reopened = self.state != self.CLOSED
        self.state = self.CLOSED
        self.failures = 0
        self.cooldown = self.base_cooldown
        self._trial = False
        return reopened

    def failure(self, hard: bool = False) -> bool:
        """Count a failed call; ``True`` when this failure opened the breaker.

        A ``hard`` failure (say a timeout: a failure that costs the caller time) opens the
        breaker at once.
        """
        if self.state == self.OPEN:
            return False
        self.failures += 1
        if self.state == self.HALF_OPEN:
            self.cooldown = min(self.cooldown * 2, self.max_cooldown)
        elif self.failures < self.threshold and not hard:
            return False
        self.state = self.OPEN
        self._opened_at = self.clock()
        self._trial = False
        self.opened += 1
        return True

    def reset(self) -> None:
        """Closed, as new (an operator's or a test's "try again now")."""
        self.success()

    def remaining(self) -> float:
        """Seconds left in the cool-down (0 unless open)."""
        if self.state != self.OPEN:
            return 0.0
        return max(self._opened_at + self.cooldown - self.clock(), 0.0)

    def open_until(self) -> float:
        """When the cool-down ends, on the breaker's clock (0 unless open)."""
        return self._opened_at + self.cooldown if self.state == self.OPEN else 0.0
