"""Signals sent by the plugin, for users who want to hook alerts.

Connect them like Scrapy's own signals::

    crawler.signals.connect(handler, signal=scrapy_domainstate.signals.state_changed)
"""

#: An outcome was recorded. Arguments: ``domain``, ``entry`` (a
#: :class:`~scrapy_domainstate.record.RecentEntry`), ``stat`` (the record after
#: it), ``request``, ``spider``.
outcome_recorded = object()

#: A domain changed state. Arguments: ``transition`` (a
#: :class:`~scrapy_domainstate.policy.Transition`: ``domain``, ``old``, ``new``,
#: ``at``, ``reason``), ``stat``, ``request``, ``spider``.
state_changed = object()

__all__ = ["outcome_recorded", "state_changed"]
