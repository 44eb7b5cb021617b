"""Shim: the table resolver moved to :mod:`scrapy_domainstate.testing.resolver` (the demo uses it too)."""

from scrapy_domainstate.testing.resolver import *  # noqa: F403
from scrapy_domainstate.testing.resolver import (
    BEHAVIOURS,
    DEFAULT_TEST_HOSTS,
    DNS_TIMEOUT,
    HOSTS_SETTING,
    LOOPBACK,
    NXDOMAIN,
    REFUSED,
    REFUSED_ADDRESS,
    SERVFAIL,
    TableResolver,
    TemporaryDNSLookupError,
    chromium_host_rules,
    normalize,
    validate_hosts,
)

__all__ = [
    "BEHAVIOURS",
    "DEFAULT_TEST_HOSTS",
    "DNS_TIMEOUT",
    "HOSTS_SETTING",
    "LOOPBACK",
    "NXDOMAIN",
    "REFUSED",
    "REFUSED_ADDRESS",
    "SERVFAIL",
    "TableResolver",
    "TemporaryDNSLookupError",
    "chromium_host_rules",
    "normalize",
    "validate_hosts",
]
