"""scrapy-domainstate's tests, by role (see docs/architecture.rst).

``unit/`` pure modules, ``scrapy/`` Scrapy's real engine, ``stores/`` store backends,
``fleet/`` the remote client and service, ``tools/`` the command, docs, packaging and
scripts. Shared helpers live in :mod:`scrapy_domainstate.testing` (the loopback sites, the
table resolver, ``crawl`` and ``redis_server``); the fixtures in ``tests/conftest.py``.
"""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.version import Version

#: The repository root (README.rst, pyproject.toml, example_project/, benchmarks/, ...).
ROOT = Path(__file__).resolve().parent.parent
#: The seed's literal readings as settings (the HEAD probe, cold after 5 empty pages in one visit,
#: a 1-day dead hold, friendly fetch-only): the end-to-end tests written for them drive the
#: mechanisms with these; the shipped defaults (docs/SPEC.md section 2, revised again) are tested
#: by tests/scrapy/test_items.py, tests/scrapy/test_defaults_e2e.py and the unit rule tables.
SEED_READINGS = {
    "DOMAINSTATE_HEAD_PROBE": True,
    "DOMAINSTATE_PROBE_ALONE": False,
    "DOMAINSTATE_COLD_THRESHOLD": 5,
    "DOMAINSTATE_COLD_CONFIRM_AFTER": 0,
    "DOMAINSTATE_DEAD_HOLD": "1d",
    "DOMAINSTATE_FRIENDLY_FALLBACK": False,
    "DOMAINSTATE_COLD_CONTACT_PAGES": False,
}
#: The fixed start of the clock in tests that pass ``now`` explicitly (2023-11-14 22:13:20 UTC).
T0 = 1_700_000_000.0

#: Scrapy 2.19 hands a bad certificate to the plugin (``response.certificate``, its own
#: download errors); on older Scrapy the loopback's bad-certificate sites reach it as a lost
#: connection (a network error, not a dead signal). Tests of that evidence need 2.19.
NEEDS_SCRAPY_2_19 = pytest.mark.skipif(
    Version(version("scrapy")) < Version("2.19"),
    reason="Scrapy < 2.19: a bad certificate arrives as a lost connection",
)
