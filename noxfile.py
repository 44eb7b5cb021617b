"""The test matrix: the suite on the newest releases, a chosen part of it on the oldest declared.

``nox -s latest`` runs the whole suite in the environment nox runs in (scripts/test.sh's
virtualenv, installed with the newest releases setup.cfg allows); ``nox -s minimum`` makes its
own virtualenv with the floors pinned (constraints/minimum.txt) and runs the tests that cover
each floor: the pure core, the store contract and real crawls through Scrapy's engine. Both run
from scripts/test.sh, so from CI.
"""

from __future__ import annotations

import sys

import nox

nox.options.sessions = ["latest", "minimum"]
nox.options.reuse_existing_virtualenvs = True

#: What the minimum session runs: every floor's own tests (the package on Scrapy, Twisted,
#: tldextract and lmdb at their oldest), not the measurements (corpus, properties, benchmarks).
MINIMUM_TESTS = [
    "tests/unit/test_policy.py",
    "tests/unit/test_policy_rules.py",
    "tests/unit/test_policy_rules_r2.py",
    "tests/unit/test_config.py",
    "tests/unit/test_keys.py",
    "tests/unit/test_record.py",
    "tests/unit/test_evidence.py",
    "tests/unit/test_routing.py",
    "tests/unit/test_probes.py",
    "tests/unit/test_floors.py",
    "tests/stores/test_store_contract.py",
    "tests/scrapy/test_e2e.py",
    "tests/scrapy/test_rules_e2e.py",
    "tests/scrapy/test_items.py",
    "tests/scrapy/test_manners.py",
    "tests/scrapy/test_parked_crawl.py",
]


@nox.session(python=False)
def latest(session: nox.Session) -> None:
    """The whole suite on the newest releases (the environment nox runs in)."""
    session.run(sys.executable, "-m", "pytest", "--durations=25", *session.posargs)


@nox.session
def minimum(session: nox.Session) -> None:
    """The floors' tests on the oldest versions setup.cfg declares."""
    session.install("-c", "constraints/minimum.txt", "-e", ".[test]")
    session.run(
        "python", "-c", "import scrapy, twisted; print('scrapy', scrapy.__version__, 'twisted', twisted.__version__)"
    )
    # Old releases warn about newer dependencies (pyOpenSSL, cryptography): not errors here.
    session.run("python", "-m", "pytest", "-W", "ignore::DeprecationWarning", *(session.posargs or MINIMUM_TESTS))
