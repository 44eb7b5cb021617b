"""Settings of the example ``contacts`` project, to read top to bottom.

Three parts: the plugin (one line, plus the few settings worth knowing), the browser it
sends anti-bot sites to (scrapy-playwright on Debian's Chromium), and the usual settings of
a broad crawl over many sites. Everything else is Scrapy's default.
"""

BOT_NAME = "contacts"
SPIDER_MODULES = ["contacts.spiders"]
NEWSPIDER_MODULE = "contacts.spiders"

# -----------------------------------------------------------------------------------------
# scrapy-domainstate
# -----------------------------------------------------------------------------------------

# One line enables it: a downloader middleware decides before every request (skip, probe
# with one HEAD, fetch, fetch with browser fallback, browser only) and records what every
# download showed; a spider middleware and an extension keep the memory up to date.
ADDONS = {"scrapy_domainstate.Addon": 0}

# The memory: an LMDB database. A relative path lives in the project's data directory,
# here example_project/.scrapy/domainstate, like HTTPCACHE_DIR. Several `scrapy crawl`
# processes on this machine may share it. Inspect it with `scrapy domainstate stats`.
DOMAINSTATE_LMDB_PATH = "domainstate"

# What makes a page "useful": "contacts" (the default) means the page shows an e-mail
# address, a phone number or a social-profile link -- exactly what this project collects.
# Sites that never show any become "cold" after 5 empty pages in a row and are skipped for
# 90 days; sites that usually do become "friendly" and are fetched without any probing.
DOMAINSTATE_OUTCOME = "contacts"

# The request meta that sends a request to the browser (scrapy-playwright's, the default).
DOMAINSTATE_BROWSER_META = {"playwright": True}

# Every other DOMAINSTATE_* setting (TTLs, thresholds, Redis for a fleet ...) keeps its
# default; see the "Settings" section of the README.

# -----------------------------------------------------------------------------------------
# The browser: scrapy-playwright driving Debian's Chromium (apt-get install chromium)
# -----------------------------------------------------------------------------------------

# scrapy-playwright's handler downloads the requests whose meta says {"playwright": True}
# in Chromium, and hands every other request to Scrapy's own HTTP handler. It needs the
# asyncio reactor.
DOWNLOAD_HANDLERS = {
    "http": "scrapy_playwright.handler.ScrapyPlaywrightDownloadHandler",
    "https": "scrapy_playwright.handler.ScrapyPlaywrightDownloadHandler",
}
TWISTED_REACTOR = "twisted.internet.asyncioreactor.AsyncioSelectorReactor"

PLAYWRIGHT_BROWSER_TYPE = "chromium"
PLAYWRIGHT_LAUNCH_OPTIONS = {
    # Debian's Chromium instead of the browser `playwright install` would download.
    "executable_path": "/usr/bin/chromium",
    "headless": True,
    "args": [
        "--no-sandbox",  # needed when running as root (containers, CI)
        "--disable-gpu",
        "--disable-dev-shm-usage",  # small /dev/shm in containers
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ],
}
# Browser renders cost far more than plain fetches (CPU, memory): keep them few. The
# plugin only sends what needs a browser (anti-bot walls, script-only pages).
PLAYWRIGHT_MAX_CONTEXTS = 1
PLAYWRIGHT_MAX_PAGES_PER_CONTEXT = 4
PLAYWRIGHT_DEFAULT_NAVIGATION_TIMEOUT = 30_000  # milliseconds
# Let Chromium send its own headers (its User-Agent, Accept ...): a browser that announces
# itself as "Scrapy/2.x" meets more walls. (scrapy-playwright's default sends Scrapy's.)
PLAYWRIGHT_PROCESS_REQUEST_HEADERS = None


def should_abort_request(request):
    """Do not download images, media and fonts in the browser: contacts are in the HTML."""
    return request.resource_type in ("image", "media", "font")


PLAYWRIGHT_ABORT_REQUEST = should_abort_request

# -----------------------------------------------------------------------------------------
# A broad crawl: many sites, a few pages each
# -----------------------------------------------------------------------------------------

CONCURRENT_REQUESTS = 32
CONCURRENT_REQUESTS_PER_DOMAIN = 2
# Keep per-site queues apart so one slow site does not hold up the rest.
SCHEDULER_PRIORITY_QUEUE = "scrapy.pqueues.DownloaderAwarePriorityQueue"
DOWNLOAD_TIMEOUT = 20
DOWNLOAD_MAXSIZE = 10 * 1024 * 1024
# One retry for server errors. 429 ("too many requests") is not retried: it is an anti-bot
# signal for the plugin, and retrying it at once only asks to be blocked.
RETRY_TIMES = 1
RETRY_HTTP_CODES = [500, 502, 503, 504, 522, 524, 408]
# robots.txt, as Scrapy's project template has it. The plugin sends no robots.txt request to
# a site it skips (dead, cold, or antibot-hard without a browser), never counts a robots.txt
# answer as evidence about the site, and turns an unreachable robots.txt into a quiet
# IgnoreRequest instead of an ERROR with a traceback (the site's own requests say what is wrong).
ROBOTSTXT_OBEY = True
TELNETCONSOLE_ENABLED = False
LOG_LEVEL = "INFO"
FEED_EXPORT_ENCODING = "utf-8"
