"""Settings as a user meets them in a real crawl's log: typos named, a disabled plugin quiet.

Each test runs Scrapy's engine against the loopback sites with the add-on and reads the
log records the crawl produced (``caplog``).
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import pytest
import pytest_twisted

from scrapy_domainstate.core.record import State

ADDON = {"scrapy_domainstate.Addon": 0}


def _with_addon(settings: dict[str, Any]) -> dict[str, Any]:
    return {**settings, "ADDONS": ADDON}


def _ours(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    """The plugin's messages at ``level``."""
    return [r.getMessage() for r in caplog.records if r.levelno == level and r.name.startswith("scrapy_domainstate")]


#: The components listed by hand, as the README's manual equivalent of the add-on line.
BY_HAND = {
    "DOWNLOADER_MIDDLEWARES": {
        "scrapy_domainstate.DomainStateMiddleware": 540,
        "scrapy_domainstate.DomainStateDownloadedMiddleware": 10_000,
    },
    "SPIDER_MIDDLEWARES": {
        "scrapy_domainstate.DomainStateSpiderMiddleware": 950,
        "scrapy_domainstate.DomainStateQueueFilter": 10,
    },
    "EXTENSIONS": {"scrapy_domainstate.DomainStateExtension": 500},
}
ENABLINGS = {
    "add-on": {"ADDONS": ADDON},
    "by hand": BY_HAND,
    "both": {"ADDONS": ADDON, **BY_HAND},
}


@pytest.mark.parametrize("enabled_by", ["add-on", "by hand", "both"])
@pytest_twisted.ensureDeferred
async def test_misspelt_setting_logs_one_warning_naming_the_valid_one(
    enabled_by: str, sites: Any, crawl_settings: dict[str, Any], run_crawl: Any, caplog: pytest.LogCaptureFixture
) -> None:
    settings = {**crawl_settings, **ENABLINGS[enabled_by], "DOMAINSTATE_COLD_TRESHOLD": 10, "DOMAINSTATE_FOO": 1}
    with caplog.at_level(logging.INFO):
        result = await run_crawl(settings, [sites.url("friendly.test")])
    warnings = _ours(caplog, logging.WARNING)
    typo = [m for m in warnings if "DOMAINSTATE_COLD_TRESHOLD" in m]
    assert len(typo) == 1, warnings
    assert "DOMAINSTATE_COLD_THRESHOLD" in typo[0]
    assert len([m for m in warnings if "DOMAINSTATE_FOO" in m]) == 1
    # the crawl itself runs with the plugin on
    assert result.response_for(sites.url("friendly.test")).domainstate is not None


@pytest_twisted.ensureDeferred
async def test_correct_settings_log_no_warning(
    sites: Any, crawl_settings: dict[str, Any], run_crawl: Any, caplog: pytest.LogCaptureFixture
) -> None:
    settings = {**_with_addon(crawl_settings), "DOMAINSTATE_COLD_THRESHOLD": 10}
    with caplog.at_level(logging.INFO):
        await run_crawl(settings, [sites.url("friendly.test")])
    # without a browser handler the spec asks for exactly one start-up WARNING about it; nothing else
    warnings = _ours(caplog, logging.WARNING)
    no_browser = [m for m in warnings if m.startswith("scrapy-domainstate: no browser")]
    assert len(no_browser) == 1, warnings
    assert [m for m in warnings if m not in no_browser] == []


class _Off:
    domainstate_enabled = False


@pytest.mark.parametrize("enabled_by", list(ENABLINGS))
@pytest.mark.parametrize("how", ["setting", "custom_settings", "spider attribute"])
@pytest_twisted.ensureDeferred
async def test_disabled_plugin_logs_one_info_line_and_no_warning(
    how: str,
    enabled_by: str,
    sites: Any,
    crawl_settings: dict[str, Any],
    run_crawl: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from scrapy_domainstate.testing.crawl import RecordingSpider

    settings = {**crawl_settings, **ENABLINGS[enabled_by]}
    spider_cls: type[RecordingSpider] = RecordingSpider
    if how == "setting":
        settings["DOMAINSTATE_ENABLED"] = False
    elif how == "custom_settings":

        class OffBySettings(RecordingSpider):
            name = "off-settings"
            custom_settings: ClassVar[dict[str, Any]] = {"DOMAINSTATE_ENABLED": False}

        spider_cls = OffBySettings
    else:

        class OffByAttribute(RecordingSpider):
            name = "off-attribute"
            domainstate_enabled = False

        spider_cls = OffByAttribute
    sites.reset_log()
    with caplog.at_level(logging.DEBUG):
        result = await run_crawl(settings, [sites.url("friendly.test")], spider_cls=spider_cls)
    assert result.response_for(sites.url("friendly.test")).domainstate is None
    assert sites.methods("friendly.test") == ["GET"]
    assert not any(k.startswith("domainstate/") for k in result.stats)
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    info = _ours(caplog, logging.INFO)
    assert len(info) == 1, info
    assert "disabled" in info[0]
    assert not any("using" in m for m in _ours(caplog, logging.INFO))


@pytest_twisted.ensureDeferred
async def test_ttl_duration_strings_in_a_crawl(sites: Any, crawl_settings: dict[str, Any], run_crawl: Any) -> None:
    import time

    from scrapy_domainstate.core.config import Config
    from scrapy_domainstate.store.lmdb import LmdbStore

    settings = {**_with_addon(crawl_settings), "DOMAINSTATE_TTL": {"unknown": "2h", "dead": "30d"}}
    before = time.time()
    await run_crawl(settings, [sites.url("friendly.test")])
    store = LmdbStore(Config.from_settings(settings))
    store.open()
    try:
        record = store.current("friendly.test", time.time())
    finally:
        store.close()
    assert record.state is State.UNKNOWN
    assert record.state_expires_at is not None
    assert before + 2 * 3600 - 5 <= record.state_expires_at <= time.time() + 2 * 3600 + 5


@pytest_twisted.ensureDeferred
async def test_components_by_hand_work_when_on(
    sites: Any, crawl_settings: dict[str, Any], run_crawl: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The control for the disabled cases above: the same listing, the plugin on."""
    with caplog.at_level(logging.INFO):
        result = await run_crawl({**crawl_settings, **BY_HAND}, [sites.url("friendly.test")])
    assert result.response_for(sites.url("friendly.test")).domainstate is not None
    assert any("using" in m for m in _ours(caplog, logging.INFO))
    assert not any("disabled" in m for m in _ours(caplog, logging.INFO))


@pytest_twisted.ensureDeferred
async def test_listed_by_hand_without_the_downloaded_middleware_warns_once_and_crawls(
    sites: Any, crawl_settings: dict[str, Any], run_crawl: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Scrapy's signals stand in for it (slower, and a failing first request opens its domain):
    one WARNING names it, and the crawl decides and records as ever."""
    settings = {
        **crawl_settings,
        **BY_HAND,
        "DOWNLOADER_MIDDLEWARES": {"scrapy_domainstate.DomainStateMiddleware": 540},
    }
    result = await run_crawl(settings, [sites.url("friendly.test", p) for p in ("/", "/contact")])
    named = [m for m in _ours(caplog, logging.WARNING) if "DomainStateDownloadedMiddleware" in m]
    assert len(named) == 1, _ours(caplog, logging.WARNING)
    assert len(result.responses) == 2 and result.stats.get("domainstate/method/fetch") == 2
