"""Loopback test utilities: a multi-host simulated web and a table-driven TWISTED_DNS_RESOLVER.

For tests and the demo, never for production.

- :mod:`scrapy_domainstate.testing.sites`: :class:`~scrapy_domainstate.testing.sites.SiteServer`,
  one ``twisted.web`` server on ``127.0.0.1`` that serves any number of ``*.test`` hosts, each
  behaving as one kind of website (friendly, cold, dead, Cloudflare challenge, DataDome,
  rate-limited, JavaScript shell, expired TLS certificate, ...), and logs every request;
- :mod:`scrapy_domainstate.testing.resolver`: :class:`~scrapy_domainstate.testing.resolver.TableResolver`,
  a ``TWISTED_DNS_RESOLVER`` that answers from a table (loopback addresses, NXDOMAIN, SERVFAIL,
  refused, timeout) and never asks the system resolver, and
  :func:`~scrapy_domainstate.testing.resolver.chromium_host_rules`, the matching
  ``--host-resolver-rules`` for Chromium;
- :mod:`scrapy_domainstate.testing.offline`: Chromium launch options that resolve from that
  table, and :func:`~scrapy_domainstate.testing.offline.loopback_only`, a guard that stops
  this process from resolving any real name.

Nothing here is imported by the plugin itself.
"""
