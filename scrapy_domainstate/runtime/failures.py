"""Start-up failures as one line.

A bad setting or a store that cannot open stops the crawl before its first request. Scrapy
then lets asyncio report the crawl's failed task ("Task exception was never retrieved") with
a full traceback, and CoreStats trips on the spider that never opened. To a user, the one
line that says what to fix is what matters, so, unless ``LOG_LEVEL = "DEBUG"`` is set (Scrapy's
own default is DEBUG, so only a value the project or the command line set counts):

- a :class:`~scrapy_domainstate.core.config.ConfigError` reaching asyncio's handler is logged as
  one ERROR of this plugin naming the setting and where to fix it;
- a :class:`~scrapy_domainstate.pipeline.DomainStateUnavailable` (whose cause the plugin
  already logged as one ERROR) is not logged again;
- CoreStats' assertion at the close of a crawl that never started is dropped.

With ``LOG_LEVEL = "DEBUG"`` set (``-L DEBUG``, ``-s LOG_LEVEL=DEBUG`` or settings.py) nothing is
filtered: every traceback is shown.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.settings import SETTINGS_PRIORITIES

from scrapy_domainstate.core.config import ConfigError

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = ["quiet_startup_failures", "store_unavailable"]

logger = logging.getLogger(__name__)

#: Where to fix a setting, said once after its own message.
FIX = "fix it in settings.py, with -s NAME=VALUE or in the spider's custom_settings; the crawl did not start"


class _OneLine(logging.Filter):
    """On the ``asyncio`` and ``scrapy.utils.signal`` loggers: the plugin's start-up failures
    become one line (see the module's docstring)."""

    def __init__(self) -> None:
        super().__init__("")
        #: Set once the plugin's store failed to open, so the close's consequences are quiet.
        self.unavailable = False

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is None:
            return True
        from scrapy_domainstate.pipeline import DomainStateUnavailable

        if isinstance(exc, ConfigError):
            text = str(exc).removeprefix("scrapy-domainstate: ")
            logger.error("scrapy-domainstate: %s; %s", text, FIX)
            return False
        if isinstance(exc, DomainStateUnavailable):
            return False
        consequence = isinstance(exc, AssertionError) and _raised_in(exc, "corestats.py")
        return not (self.unavailable and consequence)


def _raised_in(exc: BaseException, filename: str) -> bool:
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code.co_filename.endswith(filename)


_FILTER = _OneLine()
_LOGGERS = ("asyncio", "scrapy.utils.signal")


def quiet_startup_failures(settings: BaseSettings) -> None:
    """Install the one-line filter (once per process), unless ``LOG_LEVEL = "DEBUG"`` is set."""
    level = settings.get("LOG_LEVEL", "DEBUG")
    explicit = (settings.getpriority("LOG_LEVEL") or 0) > SETTINGS_PRIORITIES["default"]
    debug = explicit and str(level).upper() in ("DEBUG", "10")
    for name in _LOGGERS:
        target = logging.getLogger(name)
        if debug:
            target.removeFilter(_FILTER)
        elif _FILTER not in target.filters:
            target.addFilter(_FILTER)


def store_unavailable() -> None:
    """The store did not open: the close of the crawl that never started is quiet."""
    _FILTER.unavailable = True
