"""Collect contact data (e-mail addresses, phone numbers, social profiles) from many websites.

::

    scrapy crawl contacts -a sites=sites.txt -O contacts.jsonl
    scrapy crawl contacts -a urls=https://example.com,example.org

For each site the spider fetches the home page, then the pages it links to that look like
contact pages (contact, about, team, impressum ...), up to ``max_pages`` pages per site,
home page included (``-a max_pages=5``). A home page without such links gets the usual
paths instead (``/contact``, ``/about``, ``/impressum``).

It yields one item per page that shows contacts::

    {"site": "https://example.com/", "url": "https://example.com/contact",
     "emails": ["info@example.com"], "phones": ["+15550100"], "social": ["x.com/example"],
     "via": "fetch"}

``via`` is how the page was downloaded: ``fetch`` (plain HTTP) or ``tab`` (rendered in the
browser). The spider knows nothing else about scrapy-domainstate: the plugin, enabled in
``settings.py``, decides for every request whether to skip it, probe the site first, fetch
it or send it to the browser, and remembers what each site did for the next crawl.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import scrapy
from scrapy.http import Response, TextResponse
from twisted.python.failure import Failure

from scrapy_domainstate.detect.contacts import find_contacts

#: Words in a link's URL or text that suggest a page with contact details.
CONTACT_WORDS = (
    "contact",
    "kontakt",
    "contacto",
    "contatti",
    "about",
    "ueber-uns",
    "uber-uns",
    "a-propos",
    "team",
    "impressum",
    "imprint",
    "legal",
)
#: Tried when the home page links to no contact-like page.
GUESSED_PATHS = ("/contact", "/about", "/impressum")
#: A browser that passed a JavaScript challenge (Cloudflare's "Just a moment...") reports
#: the status of the challenge, 403 or 503, with the real page as the body. These statuses
#: reach the callbacks (not the errback), which read such a page only when the browser
#: rendered it.
CHALLENGE_STATUSES = [403, 503]


def read_sites(sites: str | None = None, urls: str | None = None) -> list[str]:
    """Site URLs from a file (one per line, ``#`` comments) and/or a comma-separated list."""
    entries: list[str] = []
    if sites:
        for line in Path(sites).read_text(encoding="utf-8").splitlines():
            entry = line.split("#", 1)[0].strip()
            if entry:
                entries.append(entry)
    if urls:
        entries += [u.strip() for u in urls.split(",") if u.strip()]
    result: list[str] = []
    for entry in entries:
        url = entry if "://" in entry else f"https://{entry}"
        if not urlsplit(url).path:
            url += "/"
        if url not in result:
            result.append(url)
    return result


def same_site(url: str, other: str) -> bool:
    """Same host, ``www.`` or not."""
    a, b = urlsplit(url).hostname or "", urlsplit(other).hostname or ""
    return a.removeprefix("www.") == b.removeprefix("www.")


class ContactsSpider(scrapy.Spider):
    name = "contacts"
    max_pages = 5

    def __init__(
        self, sites: str | None = None, urls: str | None = None, max_pages: int | str | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.site_urls = read_sites(sites, urls)
        if not self.site_urls:
            raise ValueError("no sites: pass -a sites=FILE (one URL per line) or -a urls=URL,URL")
        if max_pages is not None:
            self.max_pages = int(max_pages)

    async def start(self) -> Any:
        for url in self.site_urls:
            yield self.request(url, self.parse_home, site=url)

    # -- callbacks ------------------------------------------------------------------------

    def request(self, url: str, callback: Any, site: str) -> scrapy.Request:
        return scrapy.Request(
            url,
            callback=callback,
            errback=self.failed,
            cb_kwargs={"site": site},
            meta={"handle_httpstatus_list": CHALLENGE_STATUSES},
        )

    def parse_home(self, response: Response, site: str) -> Iterator[Any]:
        if not self.readable(response):
            return
        yield from self.contacts_item(response, site)
        pages = self.contact_links(response)
        if not pages and response.status < 400:  # guess only on a real home page, not on a wall
            pages = [response.urljoin(path) for path in GUESSED_PATHS]
        for url in pages[: self.max_pages - 1]:
            yield self.request(url, self.parse_page, site=site)

    def parse_page(self, response: Response, site: str) -> Iterator[Any]:
        if self.readable(response):
            yield from self.contacts_item(response, site)

    def failed(self, failure: Failure) -> None:
        # Dead sites, blocks, timeouts, and requests the plugin skipped (IgnoreRequest,
        # whose message says why: "domain example.com is dead").
        request = failure.request  # type: ignore[attr-defined]
        self.logger.debug("%s: %s", request.url, failure.getErrorMessage())

    # -- helpers ---------------------------------------------------------------------------

    @staticmethod
    def via(response: Response) -> str:
        """How the plugin had the page downloaded: "fetch", or "tab" (the browser)."""
        return response.meta.get("domainstate", {}).get("method", "fetch")

    def readable(self, response: Response) -> bool:
        """An HTML page: a 2xx, or a challenge status from a page the browser rendered."""
        if not isinstance(response, TextResponse):
            return False
        return response.status < 400 or self.via(response) == "tab"

    def contact_links(self, response: TextResponse) -> list[str]:
        """Same-site links whose URL or text looks like a contact page, in page order."""
        found: list[str] = []
        for link in response.css("a[href]"):
            url = response.urljoin(link.attrib["href"])
            if not url.startswith(("http://", "https://")) or not same_site(url, response.url):
                continue
            text = " ".join(link.css("::text").getall()).lower()
            path = urlsplit(url).path.lower()
            if any(word in path or word in text for word in CONTACT_WORDS):
                url = url.split("#", 1)[0]
                if url not in found and url != response.url:
                    found.append(url)
        return found

    def contacts_item(self, response: TextResponse, site: str) -> Iterator[dict[str, Any]]:
        """One item with the page's contacts, if it shows any."""
        found = find_contacts(response.body)
        if not found:
            return
        kinds: dict[str, list[str]] = {"email": [], "phone": [], "social": []}
        for tagged in found:
            kind, _, value = tagged.partition(":")
            kinds.setdefault(kind, []).append(value)
        yield {
            "site": site,
            "url": response.url,
            "emails": kinds["email"],
            "phones": kinds["phone"],
            "social": kinds["social"],
            "via": self.via(response),
        }
