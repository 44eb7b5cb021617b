"""What a subcommand handler gets: the settings, its store opened as the subcommand table declares, the key of a target."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from scrapy.settings import BaseSettings

from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.keys import domain_key, purpose_key, purpose_of_key
from scrapy_domainstate.store import DomainStore
from scrapy_domainstate.tools.commands.domainstate._output import Failure
from scrapy_domainstate.tools.commands.domainstate._store import Access, opened_store


@dataclass
class Context:
    settings: BaseSettings
    #: how this subcommand uses the store (from the subcommand table)
    access: Access

    def config(self) -> Config:
        return Config.from_settings(self.settings)

    @contextlib.contextmanager
    def store(self) -> Iterator[DomainStore]:
        """The configured store, opened as :attr:`access` says, closed at the end of the block."""
        with opened_store(self.settings, self.access) as store:
            yield store

    def key(self, target: str) -> str:
        purposed = purpose_of_key(target.strip())
        if purposed is not None:  # ``shop.example|items``: the site's worth to one purpose
            site = domain_key(purposed[0], per_hostname=self.config().per_hostname)
            if site:
                return purpose_key(site, purposed[1])
        key = domain_key(target, per_hostname=self.config().per_hostname)
        if not key:
            raise Failure(2, f"{target!r} has no usable host name")
        return key
