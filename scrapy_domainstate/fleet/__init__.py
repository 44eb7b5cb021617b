"""Many crawlers, one state: the shared domain-state service and its client (docs/SPEC.md section 7).

One role a module:

* :mod:`.protocol`: the wire format both sides validate (paths, limits, domain keys,
  numbers, JSON, the shape of a verdict);
* :mod:`.verdicts`: what a remote verdict is and when a crawler adopts it (pure);
* :mod:`.transport` and :mod:`.client`: the crawler side (capped, timed HTTP calls; the
  batched, fail-safe :class:`~.client.RemoteClient`);
* :mod:`.limits`, :mod:`.validation`, :mod:`.votes`, :mod:`.service`, :mod:`.connections`,
  :mod:`.http`, :mod:`.files`, :mod:`.cli`: the reference service (what a request may hold,
  request validation, the vote table and the consensus, the API's logic, bounded
  connections, the Twisted resource and site, private files and the token file, the command
  line).

Users import from :mod:`scrapy_domainstate.fleet.remote` (the client) and
:mod:`scrapy_domainstate.service` (the service, ``python -m scrapy_domainstate.service``).
"""

__all__: list[str] = []
