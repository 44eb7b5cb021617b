"""The blocked-crawl alarm: most responses of a crawl are walls, so the crawler is blocked.

When the share of anti-bot outcomes among the last ``DOMAINSTATE_BLOCKED_WINDOW`` plain
responses (from at least :data:`MIN_DOMAINS` domains) reaches ``DOMAINSTATE_BLOCKED_SHARE``,
the cause is the crawler (its IP banned, its fingerprint flagged), not the sites. The alarm
goes off once: one WARNING with the figures, the stat ``domainstate/blocked``, the signal
:data:`~scrapy_domainstate.signals.crawl_blocked`, and with ``DOMAINSTATE_BLOCKED_CLOSE`` the
spider closes with the reason ``domainstate_blocked``. While it is on, new anti-bot verdicts
are *suspect*: counted (``domainstate/antibot_suspect``) and not recorded, so no site is
moved to ``antibot-soft`` or ``antibot-hard`` for what the crawler's own ban did. It goes off
again when the share falls below half the threshold.

Pure: no Scrapy, no I/O; the manager feeds it outcomes and acts on what it returns.
"""

from __future__ import annotations

from collections import Counter, deque

__all__ = ["MIN_DOMAINS", "BlockedAlarm"]

#: Walls from fewer domains than this are those sites' walls, not a blocked crawler.
MIN_DOMAINS = 20


class BlockedAlarm:
    """A sliding window over the crawl's plain responses (see the module's docstring)."""

    def __init__(self, share: float, window: int) -> None:
        self.share = share
        self.window = window
        self._seen: deque[tuple[str, bool]] = deque()
        self._domains: Counter[str] = Counter()
        self._walls = 0
        #: the alarm is on
        self.on = False
        #: times the alarm went off in this crawl
        self.raised = 0

    @property
    def enabled(self) -> bool:
        return self.share > 0

    def figures(self) -> tuple[int, int, int]:
        """``(walls, responses, domains)`` in the window."""
        return self._walls, len(self._seen), len(self._domains)

    def observe(self, domain: str, wall: bool) -> bool:
        """One plain response's outcome; True when this one raises the alarm."""
        if self.share <= 0:  # (not the ``enabled`` property: once per response)
            return False
        seen, domains = self._seen, self._domains
        seen.append((domain, wall))
        domains[domain] += 1
        self._walls += wall
        n = len(seen)
        if n > self.window:
            old, old_wall = seen.popleft()
            n -= 1
            self._walls -= old_wall
            left = domains[old] - 1
            if left:
                domains[old] = left
            else:
                del domains[old]
        full = n >= self.window and len(domains) >= MIN_DOMAINS
        ratio = self._walls / n
        if not self.on and full and ratio >= self.share:
            self.on = True
            self.raised += 1
            return True
        if self.on and ratio < self.share / 2:
            self.on = False
        return False
