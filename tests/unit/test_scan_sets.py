"""The pattern set of the one pass follows the outcome source (issue 23, part 2).

Under ``DOMAINSTATE_OUTCOME = 'items'`` (or a callable) no contact scan follows the
classifier's pass, so its database leaves the contact patterns out; the verdicts are the
same as with them, on every page of the corpus and of ``benchmarks/overhead.py``. The same
holds for a page no contact scan reads under ``contacts`` (a friendly domain's:
``BodyScan(..., contacts=False)``).
"""

from __future__ import annotations

import pytest

from scrapy_domainstate.core.config import Config
from scrapy_domainstate.detect.classify import Classifier
from scrapy_domainstate.detect.scan import HAVE_HYPERSCAN, BodyScan
from tests.unit.test_corpus import load_corpus
from tests.unit.test_scan_equivalence import overhead_pages

needs_hyperscan = pytest.mark.skipif(not HAVE_HYPERSCAN, reason="hyperscan is not installed")


@needs_hyperscan
def test_items_scan_without_contact_patterns_and_classify_the_same() -> None:
    with_contacts = Classifier(Config(), engine="hyperscan")
    items = Classifier(Config(outcome="items"), engine="hyperscan")
    assert with_contacts.contact_places and not items.contact_places
    items.prepare()
    assert items._fast is not None and set(items._fast.scanners) == {(True, False), (False, False)}
    pages = [(kind, 200, {"content-type": "text/html"}, page) for kind, page in overhead_pages().items()]
    pages += [(page.id, page.status, page.headers, page.body) for page in load_corpus()]
    fast_answers = 0
    for name, status, headers, body in pages:
        for view in (body, body[:20_000], body.upper()):
            for code in (status, 200):
                assert items.response(code, headers, view, "/", False) == with_contacts.response(
                    code, headers, view, "/", False
                ), (name, code, len(view))
                scan = BodyScan(view, items.scan_bytes)
                fast_answers += items._try_fast(code, items.headers.pick(headers), scan)[0] is not None
    assert fast_answers  # the fast path answered for some pages (not only the full one)


@needs_hyperscan
def test_items_hand_no_contact_places_over() -> None:
    items = Classifier(Config(outcome="items"), engine="hyperscan")
    body = b"<html><title>x</title><body>" + b"word " * 400 + b"tel:+44 20 7946 0000</body></html>"
    scan = BodyScan(body, items.scan_bytes)
    items.response(200, {"content-type": "text/html"}, scan, "/", False)
    assert scan.places is None
    full = Classifier(Config(), engine="hyperscan")
    scan = BodyScan(body, full.scan_bytes)
    full.response(200, {"content-type": "text/html"}, scan, "/", False)
    assert scan.places is not None and any(end == body.index(b"tel:") + 4 for _, end in scan.places)


@needs_hyperscan
def test_a_page_no_contact_scan_reads_is_passed_without_contact_patterns() -> None:
    """A friendly domain's page (``BodyScan(contacts=False)``) goes through the database without
    the contact patterns, leaves no places, and gets the verdict it gets with them."""
    classifier = Classifier(Config(), engine="hyperscan")
    classifier.prepare()
    assert classifier._fast is not None
    assert set(classifier._fast.scanners) == {(small, c) for small in (True, False) for c in (True, False)}
    pages = [(kind, 200, {"content-type": "text/html"}, page) for kind, page in overhead_pages().items()]
    pages += [(page.id, page.status, page.headers, page.body) for page in load_corpus()]
    for name, status, headers, body in pages:
        for code in (status, 200):
            unscanned = BodyScan(body, classifier.scan_bytes, contacts=False)
            scanned = BodyScan(body, classifier.scan_bytes)
            assert classifier.response(code, headers, unscanned, "/", False) == classifier.response(
                code, headers, scanned, "/", False
            ), (name, code)
            assert unscanned.places is None
    body = b"<html><title>x</title><body>" + b"word " * 400 + b"tel:+44 20 7946 0000</body></html>"
    scan = BodyScan(body, classifier.scan_bytes)
    classifier.response(200, {"content-type": "text/html"}, scan, "/", False)
    assert scan.places  # (with contacts wanted, the same page leaves them)
