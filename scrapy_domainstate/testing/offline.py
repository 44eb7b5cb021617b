"""Keep a crawl on loopback: Chromium's resolver rules, and a guard on the process's own DNS.

:func:`chromium_launch_options` gives scrapy-playwright's ``PLAYWRIGHT_LAUNCH_OPTIONS`` for
Debian's Chromium with ``--host-resolver-rules`` built from the same table as
:class:`~scrapy_domainstate.testing.resolver.TableResolver`, and with the background
services that phone home switched off. :func:`loopback_only` is a safety net below Twisted:
while it is active, ``socket.getaddrinfo`` and friends answer only localhost and loopback
literals, and Scrapy's cookie middleware never downloads the Public Suffix List.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from scrapy_domainstate.testing.resolver import chromium_host_rules

__all__ = ["CHROMIUM", "HOST_RULES_ARG", "chromium_launch_options", "loopback_only"]

#: Debian's chromium package
CHROMIUM = "/usr/bin/chromium"
HOST_RULES_ARG = "--host-resolver-rules="


def chromium_launch_options(hosts: Mapping[str, str] | None = None, executable_path: str = CHROMIUM) -> dict[str, Any]:
    """``PLAYWRIGHT_LAUNCH_OPTIONS`` for a headless Chromium that resolves from the test table."""
    return {
        "executable_path": executable_path,
        "headless": True,
        "args": [
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-quic",
            "--no-first-run",
            "--no-proxy-server",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-domain-reliability",
            "--disable-features=MediaRouter,OptimizationHints,Translate,AutofillServerCommunication",
            HOST_RULES_ARG + chromium_host_rules(hosts),
        ],
    }


def _local_name(host: Any) -> bool:
    if host is None:
        return True
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    name = str(host).strip("[]").rstrip(".").lower()
    if name in ("", "localhost") or name.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(name.split("%")[0])
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


@contextmanager
def loopback_only() -> Iterator[None]:
    """While active, this process cannot resolve a real name (``EAI_NONAME`` at once).

    Also gives Scrapy's cookie middleware a ``TLDExtract`` that uses its bundled Public
    Suffix List snapshot (Scrapy's own one downloads the list the first time a response
    sets a cookie).
    """
    from scrapy.downloadermiddlewares import cookies
    from tldextract import TLDExtract

    getaddrinfo, gethostbyname, gethostbyname_ex = socket.getaddrinfo, socket.gethostbyname, socket.gethostbyname_ex
    split_domain = cookies._split_domain

    def blocked(host: Any) -> socket.gaierror:
        return socket.gaierror(socket.EAI_NONAME, f"name resolution of {host!r} blocked: loopback only")

    def guarded_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if not _local_name(host):
            raise blocked(host)
        return getaddrinfo(host, *args, **kwargs)

    def guarded_gethostbyname(host: str) -> str:
        if not _local_name(host):
            raise blocked(host)
        return gethostbyname(host)

    def guarded_gethostbyname_ex(host: str) -> Any:
        if not _local_name(host):
            raise blocked(host)
        return gethostbyname_ex(host)

    socket.getaddrinfo = guarded_getaddrinfo
    socket.gethostbyname = guarded_gethostbyname
    socket.gethostbyname_ex = guarded_gethostbyname_ex
    cookies._split_domain = TLDExtract(suffix_list_urls=(), include_psl_private_domains=True)
    try:
        yield
    finally:
        socket.getaddrinfo, socket.gethostbyname, socket.gethostbyname_ex = getaddrinfo, gethostbyname, gethostbyname_ex
        cookies._split_domain = split_domain
