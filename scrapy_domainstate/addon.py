"""The Scrapy add-on: ``ADDONS = {"scrapy_domainstate.Addon": 0}``."""

from __future__ import annotations

from scrapy.settings import BaseSettings

from .config import Config
from .extension import DomainStateExtension
from .middleware import DomainStateMiddleware
from .spidermw import DomainStateSpiderMiddleware

__all__ = ["DOWNLOADER_MIDDLEWARE_PRIORITY", "EXTENSION_PRIORITY", "SPIDER_MIDDLEWARE_PRIORITY", "Addon"]

#: Below Retry (550), MetaRefresh (580), HttpCompression (590) and Redirect (600);
#: above HttpCache (900). See :mod:`scrapy_domainstate.middleware`.
DOWNLOADER_MIDDLEWARE_PRIORITY = 540
#: Close to the spider, so it counts exactly what the callback yields.
SPIDER_MIDDLEWARE_PRIORITY = 950
EXTENSION_PRIORITY = 500


class Addon:
    """Enables the downloader middleware, the spider middleware and the extension.

    Components a project already lists keep the priority it gave them. The
    settings are validated here, so a bad value fails at start-up naming it.
    """

    def update_settings(self, settings: BaseSettings) -> None:
        Config.from_settings(settings)
        settings.setdefault_in_component_priority_dict(
            "DOWNLOADER_MIDDLEWARES", DomainStateMiddleware, DOWNLOADER_MIDDLEWARE_PRIORITY
        )
        settings.setdefault_in_component_priority_dict(
            "SPIDER_MIDDLEWARES", DomainStateSpiderMiddleware, SPIDER_MIDDLEWARE_PRIORITY
        )
        settings.setdefault_in_component_priority_dict("EXTENSIONS", DomainStateExtension, EXTENSION_PRIORITY)
