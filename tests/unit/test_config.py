"""``Config.from_settings``: one source of defaults, every setting overridable, bad values named.

Values arrive as Python objects from ``settings.py``/``custom_settings`` and as
strings from ``scrapy crawl -s NAME=VALUE`` (dicts as JSON); both are accepted.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from scrapy.settings import BaseSettings, Settings

from scrapy_domainstate.core.clock import DAY
from scrapy_domainstate.core.config import DEFAULT_TTL, SETTINGS, Config, ConfigError
from scrapy_domainstate.core.record import State
from scrapy_domainstate.core.wallrules import Conditions, NeverWall, WallRules

PREFIX = "DOMAINSTATE_"
BY_NAME = {s.name: s for s in SETTINGS}


def field_of(name: str) -> str:
    return name[len(PREFIX) :].lower()


def useful_outcome(response, request=None):  # a user's outcome callable, by object
    return True


class MyStore:  # a user's store class, by object
    pass


# ---------------------------------------------------------------- defaults


def test_settings_table_matches_config_fields():
    names = [s.name for s in SETTINGS]
    assert len(names) == len(set(names))
    assert all(n.startswith(PREFIX) for n in names)
    assert {field_of(n) for n in names} == {f.name for f in dataclasses.fields(Config)}


def test_every_setting_is_documented_with_a_type():
    for s in SETTINGS:
        assert s.type in {"bool", "int", "float", "duration", "str", "dict"}, s.name
        assert s.doc.strip(), s.name


@pytest.mark.parametrize("settings", [None, {}, Settings(), BaseSettings()], ids=["none", "dict", "Settings", "Base"])
def test_defaults_equal_the_settings_table(settings):
    config = Config.from_settings(settings)
    for s in SETTINGS:
        value = getattr(config, field_of(s.name))
        if s.name == "DOMAINSTATE_TTL":
            assert dict(value) == DEFAULT_TTL
        elif s.name == "DOMAINSTATE_CHALLENGE_MARKERS":
            assert dict(value) == s.default
        elif s.name == "DOMAINSTATE_WALL_RULES":  # parsed: no wall rule, no exception
            assert s.default == {} and value == WallRules() and not value
        else:
            assert value == s.default, s.name
    assert config == Config()


def test_default_values_are_the_spec():
    config = Config.from_settings({})
    assert config.enabled is True
    # docs/SPEC.md section 2 (revised again): the probe is the first request, sent alone; friendly falls
    # back to the browser; a one-visit dead hold ends before the next daily visit; cold needs
    # at least the seed's 5 empty pages (10, measured) across two visits.
    assert config.head_probe is False
    assert config.probe_alone is True
    assert config.friendly_fallback is True
    assert config.dead_hold == 12 * 3600
    assert config.cold_confirm_after == 3600
    assert config.per_hostname is False
    assert (config.dead_threshold, config.antibot_hard_threshold, config.cold_threshold) == (2, 3, 10)
    assert (config.friendly_window, config.friendly_ratio, config.friendly_min_fetches) == (10, 0.7, 5)
    assert config.friendly_demote == 5
    assert config.recent_size == 20
    assert config.url_dead_ttl == 30 * DAY
    assert dict(config.browser_meta) == {"playwright": True}
    assert config.outcome == "contacts"
    assert dict(config.ttl) == {
        State.UNKNOWN: 7 * DAY,
        State.DEAD: 30 * DAY,
        State.ANTIBOT_SOFT: 7 * DAY,
        State.ANTIBOT_HARD: 90 * DAY,
        State.FRIENDLY: None,
        State.COLD: 90 * DAY,
    }


def test_defaults_are_not_shared_between_configs():
    a = Config.from_settings({})
    b = Config.from_settings({})
    assert a.ttl is not b.ttl
    assert a.browser_meta is not b.browser_meta
    assert BY_NAME["DOMAINSTATE_BROWSER_META"].default == {"playwright": True}


def test_config_is_frozen():
    config = Config.from_settings({})
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.dead_threshold = 3  # type: ignore[misc]


def test_config_error_is_a_value_error():
    assert issubclass(ConfigError, ValueError)


# ---------------------------------------------------------------- valid overrides

TTL_MERGED = {**DEFAULT_TTL, State.DEAD: 60.0}

VALID = {
    "DOMAINSTATE_ENABLED": [
        (False, False),
        ("false", False),
        ("False", False),
        ("0", False),
        (0, False),
        ("no", False),
    ],
    "DOMAINSTATE_STORE": [
        ("scrapy_domainstate.store.memory.MemoryStore", "scrapy_domainstate.store.memory.MemoryStore"),
        (MyStore, f"{__name__}.MyStore"),
    ],
    "DOMAINSTATE_LMDB_PATH": [("/var/lib/crawl/state", "/var/lib/crawl/state"), ("state", "state")],
    "DOMAINSTATE_LMDB_MAP_SIZE": [("1048576", 1048576), (1 << 20, 1 << 20), (65536, 65536)],
    "DOMAINSTATE_REDIS_URL": [("redis://localhost:6379/1", "redis://localhost:6379/1")],
    "DOMAINSTATE_REDIS_PREFIX": [("crawl:", "crawl:")],
    "DOMAINSTATE_TTL": [
        ({"dead": 60}, TTL_MERGED),
        ('{"dead": 60}', TTL_MERGED),
        ({State.DEAD: "60"}, TTL_MERGED),
        ({"DEAD": 60.0}, TTL_MERGED),
        ({"friendly": 3600, "cold": None}, {**DEFAULT_TTL, State.FRIENDLY: 3600.0, State.COLD: None}),
        ('{"antibot-hard": null}', {**DEFAULT_TTL, State.ANTIBOT_HARD: None}),
        ({}, DEFAULT_TTL),
    ],
    "DOMAINSTATE_DEAD_THRESHOLD": [("3", 3), (1, 1), (20, 20), (4.0, 4)],
    "DOMAINSTATE_ANTIBOT_HARD_THRESHOLD": [("5", 5), (1, 1)],
    "DOMAINSTATE_COLD_THRESHOLD": [("10", 10), (20, 20)],
    "DOMAINSTATE_FRIENDLY_WINDOW": [("20", 20), (5, 5)],
    "DOMAINSTATE_FRIENDLY_RATIO": [("0.5", 0.5), (1, 1.0), (0, 0.0), ("1.0", 1.0)],
    "DOMAINSTATE_FRIENDLY_MIN_FETCHES": [("8", 8), (10, 10)],
    "DOMAINSTATE_FRIENDLY_DEMOTE": [("3", 3)],
    "DOMAINSTATE_RECENT_SIZE": [("30", 30), (255, 255), (10, 10)],
    "DOMAINSTATE_DEAD_HOLD": [("3600", 3600.0), (2 * DAY, 2 * DAY)],
    "DOMAINSTATE_DEAD_CONFIRM_AFTER": [("600", 600.0), (0, 0.0)],
    "DOMAINSTATE_COLD_CONFIRM_AFTER": [("6h", 21600.0), (0, 0.0)],
    "DOMAINSTATE_PROBE_ALONE": [("false", False), (False, False), ("on", True)],
    "DOMAINSTATE_DEAD_TTL_MAX": [("5184000", 5184000.0), (365 * DAY, 365 * DAY)],
    "DOMAINSTATE_FRIENDLY_MIN_WINDOW": [("5", 5), (1, 1)],
    "DOMAINSTATE_BROWSER_LEARN": [("3", 3), (1, 1)],
    "DOMAINSTATE_BROWSER_LEARN_TTL": [("86400", DAY), (7 * DAY, 7 * DAY)],
    "DOMAINSTATE_RENEWAL_CLEARS_RECENT": [("true", True), (False, False)],
    "DOMAINSTATE_FRIENDLY_FALLBACK": [("on", True), (False, False)],
    "DOMAINSTATE_COLD_CONTACT_PAGES": [("off", False), (True, True)],
    "DOMAINSTATE_SCAN_FRIENDLY": [("on", True), (False, False)],
    "DOMAINSTATE_URL_DEAD_TTL": [("3600", 3600.0), (0, 0.0)],
    "DOMAINSTATE_MAX_DOMAINS": [("1000", 1000), (1, 1)],
    "DOMAINSTATE_HEAD_PROBE": [("false", False), (False, False), ("off", False), ("true", True)],
    "DOMAINSTATE_BROWSER_META": [
        ({"impersonate": "chrome"}, {"impersonate": "chrome"}),
        (
            '{"playwright": true, "playwright_include_page": false}',
            {"playwright": True, "playwright_include_page": False},
        ),
    ],
    "DOMAINSTATE_BROWSER_RENDERED": [
        ("myproject.browser.rendered", "myproject.browser.rendered"),
        (useful_outcome, f"{__name__}.useful_outcome"),
    ],
    "DOMAINSTATE_BROWSER_CHALLENGE_WAIT": [("2.5", 2.5), (0, 0.0), (30, 30.0)],
    "DOMAINSTATE_PER_HOSTNAME": [("true", True), (True, True), ("1", True), ("yes", True)],
    "DOMAINSTATE_OUTCOME": [
        ("items", "items"),
        ("contacts", "contacts"),
        ("myproject.outcomes.useful", "myproject.outcomes.useful"),
        (useful_outcome, f"{__name__}.useful_outcome"),
    ],
    "DOMAINSTATE_CHALLENGE_MARKERS": [
        ({"acme": ["Checking your browser", "acme-shield"]}, {"acme": ("Checking your browser", "acme-shield")}),
        ('{"acme": "acme-shield"}', {"acme": ("acme-shield",)}),
    ],
    "DOMAINSTATE_WALL_RULES": [
        ({}, WallRules()),
        (
            '{"never": [{"domain": "partner.example"}]}',
            WallRules(never=(NeverWall("never1", Conditions(domains=("partner.example",))),)),
        ),
    ],
    "DOMAINSTATE_WALL_PREDICATE": [
        ("os.path.isfile", "os.path.isfile"),
        (useful_outcome, f"{__name__}.useful_outcome"),
        ("none", None),
    ],
    "DOMAINSTATE_BODY_SCAN_BYTES": [("4096", 4096), (256, 256)],
    "DOMAINSTATE_FLUSH_INTERVAL": [("0.5", 0.5), (0, 0.0)],
    "DOMAINSTATE_FLUSH_SIZE": [("10", 10), (1, 1)],
    "DOMAINSTATE_PROBE_TIMEOUT": [("3", 3.0), (0.5, 0.5)],
    "DOMAINSTATE_POLITENESS": [("false", False), (True, True)],
    "DOMAINSTATE_SKIP_BEFORE_QUEUE": [("false", False), (True, True)],
    "DOMAINSTATE_POLITE_MAX_DELAY": [("2m", 120.0), (5, 5.0)],
    "DOMAINSTATE_POLITE_TTL": [("3d", 3 * 86400.0), (3600, 3600.0)],
    "DOMAINSTATE_PAUSE_AFTER": [("3", 3), (0, 0)],
    "DOMAINSTATE_BLOCKED_SHARE": [("0.9", 0.9), (0, 0.0)],
    "DOMAINSTATE_BLOCKED_WINDOW": [("500", 500), (20, 20)],
    "DOMAINSTATE_BLOCKED_CLOSE": [("yes", True), (False, False)],
    "DOMAINSTATE_REMOTE_URL": [("https://state.example.org/", "https://state.example.org/")],
    "DOMAINSTATE_REMOTE_TOKEN": [("s3cret", "s3cret")],
    "DOMAINSTATE_REMOTE_TIMEOUT": [("0.25", 0.25), (5, 5.0)],
    "DOMAINSTATE_REMOTE_CONSENSUS": [("0.9", 0.9), (1, 1.0)],
    "DOMAINSTATE_REMOTE_MIN_REPORTERS": [("5", 5), (1, 1)],
    "DOMAINSTATE_STATS_PER_DOMAIN": [("true", True), (True, True)],
    "DOMAINSTATE_SERVICE_RATE": [("2.5", 2.5), (0, 0.0)],
    "DOMAINSTATE_SERVICE_QUOTA": [("1000", 1000), (0, 0)],
}

VALID_CASES = [(name, value, expected) for name, cases in VALID.items() for value, expected in cases]


def test_valid_cases_cover_every_setting():
    assert set(VALID) == set(BY_NAME)


def _normalise(value):
    if isinstance(value, dict):
        return dict(value)
    return value


@pytest.mark.parametrize(("name", "value", "expected"), VALID_CASES, ids=[f"{c[0]}={c[1]!r}" for c in VALID_CASES])
def test_every_setting_accepts_a_valid_override(name, value, expected):
    config = Config.from_settings({name: value})
    got = getattr(config, field_of(name))
    assert _normalise(got) == expected
    assert type(got) is type(expected) or isinstance(expected, dict)
    # the others keep their defaults
    default = Config.from_settings({})
    for f in dataclasses.fields(Config):
        if f.name != field_of(name):
            assert getattr(config, f.name) == getattr(default, f.name), f.name


@pytest.mark.parametrize(("name", "value", "expected"), VALID_CASES, ids=[f"{c[0]}={c[1]!r}" for c in VALID_CASES])
def test_every_setting_accepts_a_valid_override_through_scrapy_settings(name, value, expected):
    settings = Settings()
    settings.set(name, value, priority="cmdline")
    assert _normalise(getattr(Config.from_settings(settings), field_of(name))) == expected


def test_none_means_default():
    # DOMAINSTATE_BROWSER_META = None is a value of its own: no browser (below)
    config = Config.from_settings({name: None for name in BY_NAME if name != "DOMAINSTATE_BROWSER_META"})
    assert config == Config.from_settings({})


@pytest.mark.parametrize("value", [None, "None", "null", ""])
def test_browser_meta_none_turns_the_browser_off(value):
    assert Config.from_settings({"DOMAINSTATE_BROWSER_META": value}).browser_meta is None
    settings = Settings()
    settings.set("DOMAINSTATE_BROWSER_META", value, priority="cmdline")
    assert Config.from_settings(settings).browser_meta is None
    assert Config.from_settings(Settings()).browser_meta == {"playwright": True}


def test_redis_url_falls_back_to_redis_url():
    assert Config.from_settings({"REDIS_URL": "redis://h:6379/0"}).redis_url == "redis://h:6379/0"
    both = {"REDIS_URL": "redis://h:6379/0", "DOMAINSTATE_REDIS_URL": "redis://mine:6379/2"}
    assert Config.from_settings(both).redis_url == "redis://mine:6379/2"


def test_small_recent_size_with_thresholds_lowered():
    config = Config.from_settings(
        {
            "DOMAINSTATE_RECENT_SIZE": "4",
            "DOMAINSTATE_FRIENDLY_WINDOW": "4",
            "DOMAINSTATE_FRIENDLY_MIN_FETCHES": "3",
            "DOMAINSTATE_FRIENDLY_DEMOTE": "4",
            "DOMAINSTATE_COLD_THRESHOLD": "4",
        }
    )
    assert (config.recent_size, config.friendly_window, config.cold_threshold) == (4, 4, 4)


def test_ttl_input_is_not_mutated():
    ttl = {"dead": 60}
    Config.from_settings({"DOMAINSTATE_TTL": ttl})
    assert ttl == {"dead": 60}


# ---------------------------------------------------------------- bad values

BAD = {
    "DOMAINSTATE_ENABLED": ["maybe", 2, 1.5, [], "truee"],
    "DOMAINSTATE_STORE": ["", "LmdbStore", 5, ["a.b"]],
    "DOMAINSTATE_LMDB_PATH": ["", 5, ["state"]],
    # (64 TiB and more is what a damaged meta page looks like: such a store is refused at open)
    "DOMAINSTATE_LMDB_MAP_SIZE": [0, -1, 100, "big", 1.5, True, 1 << 46, (1 << 44) + 4096, float("inf")],
    "DOMAINSTATE_REDIS_URL": ["", "   ", 5],
    "DOMAINSTATE_TTL": [
        {"zombie": 60},
        {"antibot_soft": 60},
        {"dead": -1},
        {"dead": 0},
        {"dead": "soon"},
        {"dead": True},
        {"dead": float("nan")},
        {"dead": [60]},
        '{"dead": -5}',
        "dead=60",
        "[1, 2]",
        5,
        ["dead", 60],
    ],
    "DOMAINSTATE_DEAD_THRESHOLD": [0, -1, -2, 21, "two", 2.5, True, "2.5", []],
    "DOMAINSTATE_ANTIBOT_HARD_THRESHOLD": [0, -3, 21, "x"],
    "DOMAINSTATE_COLD_THRESHOLD": [0, -5, 21, 100, float("inf"), 1e309],
    "DOMAINSTATE_FRIENDLY_WINDOW": [0, -10, 21],
    "DOMAINSTATE_FRIENDLY_RATIO": [1.5, "1.01", -0.1, "most", float("nan"), True],
    "DOMAINSTATE_FRIENDLY_MIN_FETCHES": [0, -5, 21, 11],
    "DOMAINSTATE_FRIENDLY_DEMOTE": [0, -5, 21],
    "DOMAINSTATE_RECENT_SIZE": [0, -1, 256, "many", 1.5],
    "DOMAINSTATE_URL_DEAD_TTL": [-1, "a month"],
    "DOMAINSTATE_MAX_DOMAINS": [0, -1, "lots"],
    "DOMAINSTATE_HEAD_PROBE": ["sometimes", 3],
    "DOMAINSTATE_BROWSER_META": [{}, "{}", [], "[1]", "playwright", 5, ("playwright", True)],
    "DOMAINSTATE_BROWSER_RENDERED": ["", "rendered", 5, ["a.b"]],
    "DOMAINSTATE_BROWSER_CHALLENGE_WAIT": [-1, "a while", True],
    "DOMAINSTATE_PER_HOSTNAME": ["perhaps"],
    "DOMAINSTATE_OUTCOME": ["", "contact", "everything", 5, ["items"]],
    "DOMAINSTATE_CHALLENGE_MARKERS": [{"acme": 5}, {"acme": [""]}, {"acme": [1]}, "[]", 5, "not json"],
    "DOMAINSTATE_BODY_SCAN_BYTES": [0, 100, -1],
    "DOMAINSTATE_FLUSH_INTERVAL": [-1, "often"],
    "DOMAINSTATE_FLUSH_SIZE": [0, -1],
    "DOMAINSTATE_PROBE_TIMEOUT": [0, -1],
    "DOMAINSTATE_POLITENESS": ["maybe"],
    "DOMAINSTATE_SKIP_BEFORE_QUEUE": ["maybe"],
    "DOMAINSTATE_POLITE_MAX_DELAY": [0, "3x"],
    "DOMAINSTATE_POLITE_TTL": [0, "-1d"],
    "DOMAINSTATE_PAUSE_AFTER": [-1, "abc"],
    "DOMAINSTATE_BLOCKED_SHARE": [1.5, -0.1],
    "DOMAINSTATE_BLOCKED_WINDOW": [19, "x"],
    "DOMAINSTATE_BLOCKED_CLOSE": ["sometimes"],
    "DOMAINSTATE_REMOTE_URL": ["", 5],
    "DOMAINSTATE_REMOTE_TOKEN": ["", 5],
    "DOMAINSTATE_REMOTE_TIMEOUT": [0, -2],
    "DOMAINSTATE_REMOTE_CONSENSUS": [1.5, -0.1],
    "DOMAINSTATE_REMOTE_MIN_REPORTERS": [0, -1],
    "DOMAINSTATE_STATS_PER_DOMAIN": ["x"],
    "DOMAINSTATE_SERVICE_RATE": [-1, "fast"],
    "DOMAINSTATE_SERVICE_QUOTA": [-1, 1.5, "lots"],
    "DOMAINSTATE_DEAD_HOLD": [0, -1, "a day"],
    "DOMAINSTATE_DEAD_CONFIRM_AFTER": [-1, "soon"],
    "DOMAINSTATE_COLD_CONFIRM_AFTER": [-1, "later"],
    "DOMAINSTATE_PROBE_ALONE": ["maybe", 2],
    "DOMAINSTATE_DEAD_TTL_MAX": [0, "long"],
    "DOMAINSTATE_FRIENDLY_MIN_WINDOW": [0, -1, 2.5],
    "DOMAINSTATE_BROWSER_LEARN": [0, "twice"],
    "DOMAINSTATE_BROWSER_LEARN_TTL": [0, -5],
    "DOMAINSTATE_RENEWAL_CLEARS_RECENT": ["maybe"],
    "DOMAINSTATE_FRIENDLY_FALLBACK": ["sometimes"],
    "DOMAINSTATE_COLD_CONTACT_PAGES": ["contact"],
    "DOMAINSTATE_SCAN_FRIENDLY": ["always"],
}

BAD_CASES = [(name, value) for name, values in BAD.items() for value in values]


@pytest.mark.parametrize(("name", "value"), BAD_CASES, ids=[f"{n}={v!r}" for n, v in BAD_CASES])
def test_bad_value_raises_config_error_naming_the_setting(name, value):
    with pytest.raises(ConfigError) as excinfo:
        Config.from_settings({name: value})
    assert name in str(excinfo.value)


#: Written as text, these become valid strings (a path named "5", a token "5").
_FINE_AS_TEXT = {
    ("DOMAINSTATE_STORE", '["a.b"]'),
    ("DOMAINSTATE_BROWSER_RENDERED", '["a.b"]'),
    ("DOMAINSTATE_LMDB_PATH", "5"),
    ("DOMAINSTATE_LMDB_PATH", '["state"]'),
    ("DOMAINSTATE_REDIS_URL", "5"),
    ("DOMAINSTATE_REMOTE_URL", "5"),
    ("DOMAINSTATE_REMOTE_TOKEN", "5"),
}
CLI_CASES = [
    (name, text)
    for name, value in BAD_CASES
    for text in [value if isinstance(value, str) else json.dumps(value)]
    if (name, text) not in _FINE_AS_TEXT
]


@pytest.mark.parametrize(("name", "text"), CLI_CASES, ids=[f"{n}={t}" for n, t in CLI_CASES])
def test_bad_value_from_the_command_line_names_the_setting(name, text):
    settings = Settings()
    settings.set(name, text, priority="cmdline")  # scrapy crawl -s NAME=TEXT
    with pytest.raises(ConfigError) as excinfo:
        Config.from_settings(settings)
    assert name in str(excinfo.value)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DOMAINSTATE_DEAD_THRESHOLD", 6),
        ("DOMAINSTATE_ANTIBOT_HARD_THRESHOLD", 6),
        ("DOMAINSTATE_COLD_THRESHOLD", 6),
        ("DOMAINSTATE_FRIENDLY_MIN_FETCHES", 6),
        ("DOMAINSTATE_FRIENDLY_DEMOTE", 6),
    ],
)
def test_threshold_above_a_custom_recent_size(name, value):
    base = {"DOMAINSTATE_RECENT_SIZE": "5", "DOMAINSTATE_FRIENDLY_WINDOW": 5, "DOMAINSTATE_COLD_THRESHOLD": 5}
    Config.from_settings(base)
    with pytest.raises(ConfigError) as excinfo:
        Config.from_settings({**base, name: value})
    assert name in str(excinfo.value)
    assert "DOMAINSTATE_RECENT_SIZE" in str(excinfo.value)


def test_recent_size_below_a_default_threshold_names_the_threshold():
    with pytest.raises(ConfigError, match=r"DOMAINSTATE_(COLD_THRESHOLD|FRIENDLY_WINDOW)"):
        Config.from_settings({"DOMAINSTATE_RECENT_SIZE": 5})


def test_unknown_ttl_state_lists_the_valid_ones():
    with pytest.raises(ConfigError) as excinfo:
        Config.from_settings({"DOMAINSTATE_TTL": {"zombie": 60}})
    message = str(excinfo.value)
    assert "zombie" in message
    for state in State:
        assert state.value in message


# ---------------------------------------------------------------- real Scrapy settings


def test_scrapy_settings_with_priorities():
    settings = Settings()
    settings.set("DOMAINSTATE_COLD_THRESHOLD", 7, priority="project")
    settings.set("DOMAINSTATE_COLD_THRESHOLD", 9, priority="default")  # lower: ignored
    settings.set("DOMAINSTATE_TTL", {"dead": 60}, priority="project")
    settings.set("DOMAINSTATE_HEAD_PROBE", True, priority="addon")
    settings.set("DOMAINSTATE_HEAD_PROBE", False, priority="project")  # a user beats the add-on
    config = Config.from_settings(settings)
    assert config.cold_threshold == 7
    assert config.ttl[State.DEAD] == 60
    assert config.head_probe is False


def test_per_spider_custom_settings_override_the_project():
    settings = Settings()
    settings.setdict({"DOMAINSTATE_DEAD_THRESHOLD": 3, "DOMAINSTATE_TTL": {"dead": 60}}, priority="project")
    settings.setdict({"DOMAINSTATE_TTL": {"cold": 3600}}, priority="spider")  # custom_settings
    config = Config.from_settings(settings)
    assert config.dead_threshold == 3
    # a whole-dict override of the project's dict, merged with the defaults (not with the project's)
    assert config.ttl[State.COLD] == 3600
    assert config.ttl[State.DEAD] == DEFAULT_TTL[State.DEAD]


def test_command_line_strings_and_json_dicts():
    settings = Settings()
    settings.setdict({"DOMAINSTATE_BROWSER_META": {"playwright": True}}, priority="project")
    settings.setdict(
        {
            # as `scrapy crawl -s NAME=VALUE` gives them: all strings
            "DOMAINSTATE_ENABLED": "True",
            "DOMAINSTATE_HEAD_PROBE": "False",
            "DOMAINSTATE_COLD_THRESHOLD": "7",
            "DOMAINSTATE_FRIENDLY_RATIO": "0.8",
            "DOMAINSTATE_TTL": '{"dead": 3600, "friendly": 86400}',
            "DOMAINSTATE_BROWSER_META": '{"impersonate": "chrome124"}',
            "DOMAINSTATE_CHALLENGE_MARKERS": '{"acme": ["acme-shield"]}',
            "DOMAINSTATE_LMDB_PATH": "/tmp/state",
            "DOMAINSTATE_STORE": "scrapy_domainstate.store.memory.MemoryStore",
        },
        priority="cmdline",
    )
    config = Config.from_settings(settings)
    assert config.enabled is True
    assert config.head_probe is False
    assert config.cold_threshold == 7
    assert config.friendly_ratio == 0.8
    assert config.ttl == {**DEFAULT_TTL, State.DEAD: 3600.0, State.FRIENDLY: 86400.0}
    assert dict(config.browser_meta) == {"impersonate": "chrome124"}
    assert dict(config.challenge_markers) == {"acme": ("acme-shield",)}
    assert config.lmdb_path == "/tmp/state"
    assert config.store == "scrapy_domainstate.store.memory.MemoryStore"


def test_dicts_held_as_base_settings():
    settings = BaseSettings(
        {
            "DOMAINSTATE_BROWSER_META": BaseSettings({"playwright": True, "playwright_context": "ds"}),
            "DOMAINSTATE_TTL": BaseSettings({"dead": 120}),
        }
    )
    config = Config.from_settings(settings)
    assert dict(config.browser_meta) == {"playwright": True, "playwright_context": "ds"}
    assert config.ttl[State.DEAD] == 120


def test_bad_value_in_scrapy_settings_fails_naming_it():
    settings = Settings()
    settings.set("DOMAINSTATE_FRIENDLY_RATIO", "1.5", priority="cmdline")
    with pytest.raises(ConfigError, match="DOMAINSTATE_FRIENDLY_RATIO"):
        Config.from_settings(settings)
    settings = Settings({"DOMAINSTATE_BROWSER_META": "{}"})
    with pytest.raises(ConfigError, match="DOMAINSTATE_BROWSER_META"):
        Config.from_settings(settings)


def test_frozen_settings_are_read():
    settings = Settings({"DOMAINSTATE_MAX_DOMAINS": "42"})
    settings.freeze()
    assert Config.from_settings(settings).max_domains == 42


# ---------------------------------------------------------------- one declaration per setting


def test_config_defaults_are_from_settings_of_nothing():
    assert Config() == Config.from_settings({})
    assert Config() == Config.from_settings(None)
    assert Config() == Config.from_settings(Settings())


def test_each_field_default_is_its_rows_parsed_default():
    config = Config()
    for s in SETTINGS:
        assert getattr(config, s.field) == s.parse(s.name, s.default), s.name


def test_config_fields_follow_the_table_order():
    assert [f.name for f in dataclasses.fields(Config)] == [s.field for s in SETTINGS]


def test_field_annotations_agree_with_the_rows_types():
    expected = {
        "bool": {"bool"},
        "int": {"int"},
        "float": {"float"},
        "duration": {"float", "float | None"},
        "str": {"str", "str | None"},
        "dict": {
            "Mapping[State, float | None]",
            "Mapping[str, Any]",
            "Mapping[str, Any] | None",  # DOMAINSTATE_BROWSER_META (None: no browser)
            "Mapping[str, tuple[str, ...]]",
            "WallRules",  # DOMAINSTATE_WALL_RULES, parsed (scrapy_domainstate.detect.wallrules)
        },
    }
    for f in dataclasses.fields(Config):
        s = BY_NAME[PREFIX + f.name.upper()]
        assert f.type in expected[s.type], (s.name, f.type)
        assert (s.default is None) == ("None" in str(f.type)) or s.type == "dict", s.name


def test_a_field_without_a_row_fails_at_import():
    from scrapy_domainstate.core.config import FROM_TABLE, _defaults_from_table

    class Stray:
        __annotations__ = {"enabled": "bool", "not_a_setting": "int"}
        enabled = FROM_TABLE

    with pytest.raises(TypeError, match="not_a_setting"):
        _defaults_from_table(Stray)


def test_a_field_default_that_differs_from_its_row_fails_at_import():
    from scrapy_domainstate.core.config import FROM_TABLE, _defaults_from_table

    names = {s.field: "Any" for s in SETTINGS}
    body = dict.fromkeys(names, FROM_TABLE)
    body["__annotations__"] = names
    body["cold_threshold"] = 6
    with pytest.raises(TypeError, match="DOMAINSTATE_COLD_THRESHOLD"):
        _defaults_from_table(type("Drifted", (), body))
    body["cold_threshold"] = 10  # the same value written out is accepted
    assert _defaults_from_table(type("Same", (), body))


def test_a_row_without_a_parser_gets_one_from_its_type():
    from scrapy_domainstate.core.config import _s

    assert _s("DOMAINSTATE_X", 3, "int", "doc").value("7") == 7
    assert _s("DOMAINSTATE_X", 1.5, "float", "doc").value("0.5") == 0.5
    assert _s("DOMAINSTATE_X", True, "bool", "doc").value("off") is False
    assert _s("DOMAINSTATE_X", 60.0, "duration", "doc").value("2h") == 7200.0
    assert _s("DOMAINSTATE_X", "a", "str", "doc").value("b") == "b"
    assert _s("DOMAINSTATE_X", None, "str", "doc").value() is None
    assert _s("DOMAINSTATE_X", {}, "dict", "doc").value('{"a": 1}') == {"a": 1}
    with pytest.raises(ConfigError, match="DOMAINSTATE_X"):
        _s("DOMAINSTATE_X", 3, "int", "doc").value(-1)
    with pytest.raises(TypeError):
        _s("DOMAINSTATE_X", 3, "integer", "doc")


# ---------------------------------------------------------------- durations

DURATIONS = [("90", 90.0), ("90s", 90.0), ("90m", 5400.0), ("12h", 43200.0), ("7d", 7 * DAY), ("2w", 14 * DAY)]


@pytest.mark.parametrize(("text", "seconds"), DURATIONS)
def test_ttl_accepts_the_commands_duration_strings(text, seconds):
    config = Config.from_settings({"DOMAINSTATE_TTL": {"dead": text}})
    assert config.ttl[State.DEAD] == seconds
    settings = Settings()
    settings.set("DOMAINSTATE_TTL", json.dumps({"dead": text}), priority="cmdline")
    assert Config.from_settings(settings).ttl[State.DEAD] == seconds


@pytest.mark.parametrize("text", ["none", "None", "never", " NONE "])
def test_ttl_none_string_means_no_expiry(text):
    assert Config.from_settings({"DOMAINSTATE_TTL": {"cold": text}}).ttl[State.COLD] is None


@pytest.mark.parametrize(("text", "seconds"), DURATIONS)
def test_every_duration_setting_accepts_duration_strings(text, seconds):
    durations = [s for s in SETTINGS if s.type == "duration"]
    assert {s.name for s in durations} >= {"DOMAINSTATE_URL_DEAD_TTL", "DOMAINSTATE_FLUSH_INTERVAL"}
    for s in durations:
        assert getattr(Config.from_settings({s.name: text}), s.field) == seconds, s.name


@pytest.mark.parametrize("text", ["7x", "d", "-1d", "nan", "1e999", "soon", ""])
def test_bad_durations_name_the_setting(text):
    with pytest.raises(ConfigError, match=r"DOMAINSTATE_TTL\['dead'\]"):
        Config.from_settings({"DOMAINSTATE_TTL": {"dead": text}})
    with pytest.raises(ConfigError, match="DOMAINSTATE_URL_DEAD_TTL"):
        Config.from_settings({"DOMAINSTATE_URL_DEAD_TTL": text})


def test_none_is_refused_where_a_duration_must_be_finite():
    with pytest.raises(ConfigError, match="DOMAINSTATE_URL_DEAD_TTL"):
        Config.from_settings({"DOMAINSTATE_URL_DEAD_TTL": "none"})


def test_the_command_and_the_settings_share_one_duration_parser():
    from scrapy_domainstate.core import clock as _time
    from scrapy_domainstate.tools.commands import domainstate

    for text, seconds in DURATIONS:
        assert _time.parse_duration(text) == seconds
        assert domainstate._parse_ttl(text) == seconds
    assert _time.parse_duration("none") is None
    assert domainstate._parse_ttl("none") is None


# ---------------------------------------------------------------- misspelt names


def test_unknown_settings_suggest_the_closest_name():
    from scrapy_domainstate.core.config import unknown_settings

    found = unknown_settings(
        [
            "DOMAINSTATE_COLD_TRESHOLD",
            "DOMAINSTATE_ENABLE",
            "DOMAINSTATE_HEADPROBE",
            "DOMAINSTATE_ZZZ",
            "DOMAINSTATE_TTL",
            "DOMAINSTATE_TEST_HOSTS",
            "BOT_NAME",
            "COLD_THRESHOLD",
        ]
    )
    assert found == [
        ("DOMAINSTATE_COLD_TRESHOLD", "DOMAINSTATE_COLD_THRESHOLD"),
        ("DOMAINSTATE_ENABLE", "DOMAINSTATE_ENABLED"),
        ("DOMAINSTATE_HEADPROBE", "DOMAINSTATE_HEAD_PROBE"),
        ("DOMAINSTATE_ZZZ", None),
    ]


def test_unknown_settings_log_one_warning_each(caplog):
    from scrapy_domainstate.core.config import log_unknown_settings

    settings = Settings({"DOMAINSTATE_COLD_TRESHOLD": 10, "DOMAINSTATE_TTL": {}})
    with caplog.at_level("DEBUG", logger="scrapy_domainstate"):
        assert log_unknown_settings(settings) == 1
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        (
            "WARNING",
            "scrapy-domainstate: unknown setting DOMAINSTATE_COLD_TRESHOLD ignored; "
            "did you mean DOMAINSTATE_COLD_THRESHOLD?",
        )
    ]
    assert log_unknown_settings(Settings()) == 0


def test_every_setting_name_is_known():
    from scrapy_domainstate.core.config import unknown_settings

    assert unknown_settings(BY_NAME) == []


def test_a_nullable_row_gives_an_explicit_none_to_its_parser():
    from scrapy_domainstate.core.config import _raw, _s

    def off_or_dict(name, value):
        return None if value is None else dict(value)

    row = _s("DOMAINSTATE_X", {"a": 1}, "dict", "doc", parse=off_or_dict, nullable=True)
    assert row.value() == {"a": 1}
    assert row.value(None) is None
    assert row.value(_raw({"DOMAINSTATE_X": None}, row)) is None
    assert row.value(_raw({}, row)) == {"a": 1}
    settings = Settings()
    settings.set("DOMAINSTATE_X", None)
    assert row.value(_raw(settings, row)) is None
    plain = _s("DOMAINSTATE_X", {"a": 1}, "dict", "doc")
    assert plain.value(_raw({"DOMAINSTATE_X": None}, plain)) == {"a": 1}


def test_dotted_paths_from_objects():
    assert Config.from_settings({"DOMAINSTATE_STORE": MyStore}).store == f"{__name__}.MyStore"
    with pytest.raises(ConfigError, match="class path"):
        Config.from_settings({"DOMAINSTATE_STORE": "LmdbStore"})
