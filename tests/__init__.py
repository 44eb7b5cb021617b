"""scrapy-domainstate's tests, by role (see the README's Architecture section).

``unit/`` pure modules, ``scrapy/`` Scrapy's real engine, ``stores/`` store backends,
``fleet/`` the remote client and service, ``tools/`` the command, docs, packaging and
scripts. Shared helpers live in :mod:`scrapy_domainstate.testing` (the loopback sites, the
table resolver, ``crawl`` and ``redis_server``); the fixtures in ``tests/conftest.py``.
"""

from __future__ import annotations

from pathlib import Path

#: The repository root (README.rst, pyproject.toml, example_project/, benchmarks/, ...).
ROOT = Path(__file__).resolve().parent.parent
#: The fixed start of the clock in tests that pass ``now`` explicitly (2023-11-14 22:13:20 UTC).
T0 = 1_700_000_000.0
