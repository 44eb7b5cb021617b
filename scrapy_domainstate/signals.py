"""Signals sent by the plugin, for users who want to hook alerts.

Connect them like Scrapy's own signals::

    crawler.signals.connect(handler, signal=scrapy_domainstate.signals.state_changed)
"""

#: An outcome was recorded. Arguments: ``domain``, ``entry`` (a
#: :class:`~scrapy_domainstate.core.record.RecentEntry`), ``stat`` (the record after
#: it), ``request``, ``spider``.
outcome_recorded = object()

#: A domain changed state. Arguments: ``transition`` (a
#: :class:`~scrapy_domainstate.core.policy.Transition`: ``domain``, ``old``, ``new``,
#: ``at``, ``reason``), ``stat``, ``request``, ``spider``.
state_changed = object()

#: The blocked-crawl alarm went off: most responses of the crawl are walls (see
#: ``DOMAINSTATE_BLOCKED_SHARE``). Arguments: ``walls``, ``responses``, ``domains`` (the
#: figures of the window), ``spider``.
crawl_blocked = object()

__all__ = ["crawl_blocked", "outcome_recorded", "state_changed"]
