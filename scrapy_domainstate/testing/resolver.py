"""A table-driven DNS resolver for tests: no query ever leaves the machine.

Use it as Scrapy's ``TWISTED_DNS_RESOLVER`` (the class object or its dotted path)::

    settings = {
        "TWISTED_DNS_RESOLVER": "scrapy_domainstate.testing.resolver.TableResolver",
        "DOMAINSTATE_TEST_HOSTS": {"gone.test": NXDOMAIN, "down.test": REFUSED},
    }

How a name is answered, first match wins:

1. an IP literal answers itself if it is a loopback address (``127.0.0.0/8``, ``::1``);
   any other address fails like a missing name, so a test can never reach the network
   through an address either;
2. the table: ``DOMAINSTATE_TEST_HOSTS`` from the settings over :data:`DEFAULT_TEST_HOSTS`.
   A value is a loopback address or one of :data:`NXDOMAIN`, :data:`SERVFAIL`,
   :data:`REFUSED`, :data:`DNS_TIMEOUT`;
3. ``localhost`` and names under :attr:`TableResolver.suffixes` (``.test``, ``.localhost``)
   answer ``127.0.0.1``;
4. anything else fails like :data:`NXDOMAIN`. The system resolver is never asked.

What the downloader sees (Scrapy's HTTP/1.1 handler, Twisted ``HostnameEndpoint``):

* :data:`NXDOMAIN`: the resolution completes with no address, Twisted raises
  ``DNSLookupError("no results for hostname lookup: NAME")`` and Scrapy wraps it in
  ``scrapy.exceptions.CannotResolveHostError`` -- exactly what Scrapy's default resolver
  produces for a missing name.
* :data:`SERVFAIL`: ``resolveHostName`` raises :class:`TemporaryDNSLookupError` (a
  ``DNSLookupError`` whose message contains ``SERVFAIL`` and the ``EAI_AGAIN`` text
  ``Temporary failure in name resolution``); Scrapy wraps it in ``CannotResolveHostError``
  with that message, the original error as ``__cause__``. The failure has to be raised
  synchronously: the endpoint's resolution receiver has no error channel, so an
  asynchronous failure is always flattened to the "no results" message above. (With
  Scrapy's default ``CachingThreadedResolver`` a temporary failure and a missing name are
  indistinguishable: both end as "no results for hostname lookup".)
* :data:`REFUSED`: the name resolves to ``127.0.0.2``, where nothing listens (the test
  server binds ``127.0.0.1`` only), so the connection gets ``ECONNREFUSED`` and Scrapy raises
  ``DownloadConnectionRefusedError``.
* :data:`DNS_TIMEOUT`: the resolution never completes; Scrapy's ``DOWNLOAD_TIMEOUT`` cancels
  the download and raises ``DownloadTimeoutError``.

Scrapy installs ``TWISTED_DNS_RESOLVER`` only in ``CrawlerProcess.start()`` (so ``scrapy
crawl`` and ``scrapy shell`` use it); a ``CrawlerRunner`` (what tests and the demo use) never
does. ``tests/conftest.py`` therefore installs this resolver itself, for the whole session and
again per crawl (see ``run_crawl`` in ``scrapy_domainstate/testing/crawl.py``), and ``example_project/demo.py`` installs
it before its crawls.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.error import DNSLookupError
from twisted.internet.interfaces import (
    IAddress,
    IHostnameResolver,
    IHostResolution,
    IResolutionReceiver,
    IResolverSimple,
)
from zope.interface import implementer

if TYPE_CHECKING:
    from typing_extensions import Self

HOSTS_SETTING = "DOMAINSTATE_TEST_HOSTS"

LOOPBACK = "127.0.0.1"
REFUSED_ADDRESS = "127.0.0.2"

NXDOMAIN = "nxdomain"
SERVFAIL = "servfail"
REFUSED = "refused"
DNS_TIMEOUT = "timeout"
BEHAVIOURS = frozenset({NXDOMAIN, SERVFAIL, REFUSED, DNS_TIMEOUT})

#: Names every test can use without configuring anything.
DEFAULT_TEST_HOSTS: dict[str, str] = {
    "nxdomain.test": NXDOMAIN,
    "servfail.test": SERVFAIL,
    "refused.test": REFUSED,
    "dns-timeout.test": DNS_TIMEOUT,
}


class TemporaryDNSLookupError(DNSLookupError):
    """A SERVFAIL-like temporary resolution failure."""


def _loopback_literal(name: str) -> str | None:
    """``name`` if it is a loopback IP literal, "" if another IP literal, None if no literal."""
    try:
        address = ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return None
    return str(address) if address.is_loopback else ""


def normalize(name: str | bytes) -> str:
    if isinstance(name, bytes):
        name = name.decode("ascii")
    return name.strip().rstrip(".").lower()


def validate_hosts(hosts: Mapping[str, str]) -> dict[str, str]:
    """Return a normalised copy of a host table; reject anything that could leave loopback."""
    table: dict[str, str] = {}
    for name, value in hosts.items():
        value_norm = normalize(value)
        if value_norm not in BEHAVIOURS and not _loopback_literal(value_norm):
            raise ValueError(
                f"{HOSTS_SETTING}[{name!r}] = {value!r}: expected a loopback address or one of {sorted(BEHAVIOURS)}"
            )
        table[normalize(name)] = value_norm
    return table


@implementer(IHostResolution)
class _Resolution:
    def __init__(self, name: str):
        self.name = name
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


@implementer(IHostnameResolver, IResolverSimple)
class TableResolver:
    """Answer names from a table; see the module docstring."""

    suffixes: tuple[str, ...] = (".test", ".localhost")

    def __init__(self, reactor: Any, hosts: Mapping[str, str] | None = None):
        self.reactor = reactor
        self.hosts: dict[str, str] = validate_hosts({**DEFAULT_TEST_HOSTS, **(hosts or {})})
        #: every name asked, in order (normalised), for assertions
        self.queries: list[str] = []
        self._previous: tuple[Any, Any] | None = None

    @classmethod
    def from_crawler(cls, crawler: Any, reactor: Any) -> Self:
        # Scrapy passes a CrawlerProcess here, not a Crawler: use nothing but .settings.
        return cls(reactor, crawler.settings.getdict(HOSTS_SETTING))

    # -- installation ----------------------------------------------------------------------

    def install_on_reactor(self) -> None:
        """Install on the reactor (what Scrapy calls); remember what to restore."""
        self._previous = (self.reactor.nameResolver, self.reactor.resolver)
        self.reactor.installNameResolver(self)
        # installNameResolver() wraps us for the simple interface and would flatten the
        # error messages of getHostByName(); we implement that interface ourselves.
        self.reactor.resolver = self

    def uninstall(self) -> None:
        if self._previous is None:
            return
        name_resolver, simple_resolver = self._previous
        self._previous = None
        if self.reactor.nameResolver is self:
            self.reactor.installNameResolver(name_resolver)
            self.reactor.resolver = simple_resolver

    # -- the table ---------------------------------------------------------------------------

    def lookup(self, name: str | bytes) -> str:
        """Return a loopback address or one of the behaviours for ``name``."""
        name = normalize(name)
        literal = _loopback_literal(name)
        if literal is not None:
            return literal or NXDOMAIN
        if name in self.hosts:
            return self.hosts[name]
        if name == "localhost" or name.endswith(self.suffixes):
            return LOOPBACK
        return NXDOMAIN

    # -- IHostnameResolver (what HostnameEndpoint, hence Scrapy's HTTP handlers, use) --------

    def resolveHostName(
        self,
        resolutionReceiver: IResolutionReceiver,
        hostName: str,
        portNumber: int = 0,
        addressTypes: Sequence[type[IAddress]] | None = None,
        transportSemantics: str = "TCP",
    ) -> IHostResolution:
        name = normalize(hostName)
        self.queries.append(name)
        answer = self.lookup(name)
        if answer == SERVFAIL:
            raise TemporaryDNSLookupError(f"SERVFAIL for {name}: Temporary failure in name resolution")
        resolution = _Resolution(name)
        resolutionReceiver.resolutionBegan(resolution)
        if answer == DNS_TIMEOUT:
            return resolution  # never completes; the download timeout ends it
        address = REFUSED_ADDRESS if answer == REFUSED else answer
        self.reactor.callLater(0, self._complete, resolution, resolutionReceiver, address, portNumber, addressTypes)
        return resolution

    @staticmethod
    def _complete(
        resolution: _Resolution,
        receiver: IResolutionReceiver,
        address: str,
        port: int,
        address_types: Sequence[type[IAddress]] | None,
    ) -> None:
        if resolution.cancelled:
            return
        if address != NXDOMAIN:
            cls = IPv6Address if ":" in address else IPv4Address
            if not address_types or cls in address_types:
                receiver.addressResolved(cls("TCP", address, port))
        receiver.resolutionComplete()

    # -- IResolverSimple (reactor.resolve(), connectTCP() with a name) ------------------------

    def getHostByName(self, name: str, timeout: Sequence[int] = ()) -> Deferred[str]:
        name = normalize(name)
        self.queries.append(name)
        answer = self.lookup(name)
        if answer == NXDOMAIN:
            return fail(DNSLookupError(f"address {name!r} not found: Name or service not known"))
        if answer == SERVFAIL:
            return fail(TemporaryDNSLookupError(f"SERVFAIL for {name}: Temporary failure in name resolution"))
        if answer == DNS_TIMEOUT:
            return Deferred()
        return succeed(REFUSED_ADDRESS if answer == REFUSED else answer)


def chromium_host_rules(hosts: Mapping[str, str] | None = None) -> str:
    """The value of Chromium's ``--host-resolver-rules`` matching :class:`TableResolver`.

    Rules are tried in order, first match wins, so exact names come before the wildcards and
    everything else maps to ``~NOTFOUND``: the browser cannot resolve a real name either.
    ``SERVFAIL`` and ``DNS_TIMEOUT`` names are ``~NOTFOUND`` too (Chromium has no other way
    to fail a lookup from the command line).
    """
    table = validate_hosts({**DEFAULT_TEST_HOSTS, **(hosts or {})})
    rules: list[str] = []
    for name, value in table.items():
        if value == REFUSED:
            target = REFUSED_ADDRESS
        elif value in BEHAVIOURS:
            target = "~NOTFOUND"
        else:
            target = f"[{value}]" if ":" in value else value
        rules.append(f"MAP {name} {target}")
    rules += [f"MAP *{suffix} {LOOPBACK}" for suffix in TableResolver.suffixes]
    rules += ["MAP * ~NOTFOUND", "EXCLUDE localhost", "EXCLUDE 127.0.0.1"]
    return ", ".join(rules)
