"""The population: every host's kind and parameters, and what any request to it gets.

Every random draw comes from a hash of ``(seed, host, round, page, method)``, never from a
shared stream, so the world (which pages have contacts, which request times out, which
fetch is challenged) is identical for every policy. Nothing here depends on the policy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .mix import DEAD_TYPES, check_range, kinds_of, page_weights

__all__ = ["Page", "World"]

_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_FULL = 1 << 16  # draws are 16-bit fields: u = field / 65536

# Behaviours (how a host answers).
FRIENDLY, SHELL, SOFT, WALL, BLOCK, DEAD, PARKED_SITE = range(7)
BEHAVIOURS = {
    "friendly": FRIENDLY,
    "js-shell": SHELL,
    "soft": SOFT,
    "wall": WALL,
    "block": BLOCK,
    "dead": DEAD,
    "parked": PARKED_SITE,
}

# What one request gets (an index into evidence.VERDICTS).
(
    OK,
    TIMEOUT,
    SERVER_ERROR,
    CHALLENGE,
    BLOCKED,
    JS_SHELL,
    DNS_NXDOMAIN,
    DNS_TEMPORARY,
    URL_404,
    REFUSED,
    TLS_INVALID,
    ROOT_404,
    SERVER_ERROR_500,
    RATE_LIMITED,
    NO_VERDICT,
    BURST_LIMITED,
    PARKED,
    FALSE_WALL,
) = range(18)
_DEAD_RESULTS = {"dns": DNS_NXDOMAIN, "refused": REFUSED, "tls": TLS_INVALID, "root_404": ROOT_404}

#: One page of a visit: (GET result, render result, HEAD result, has contacts). "Has contacts" is
#: True, False or :data:`MISJUDGED` (it has them, truthy, but the plugin's classifier says it
#: has none: noise.classifier_false_empty).
Page = tuple[int, int, int, "bool | int"]
MISJUDGED = 2
#: BURST_LIMITED: a 429 with ``Retry-After`` to a request beyond a rate-limited host's burst
#: (:meth:`World.at_full_speed`); PARKED: a parking lander on the site root; FALSE_WALL: a real
#: page the classifier judges a challenge (noise.classifier_false_antibot).
#: GET failures that a share of renders meet too (noise.render_fails_with_get)
_PERSISTING = frozenset({TIMEOUT, SERVER_ERROR, SERVER_ERROR_500})


def mix64(x: int) -> int:
    """splitmix64's finaliser: a well-spread 64-bit hash of a 64-bit integer."""
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9 & _M64
    x = (x ^ (x >> 27)) * 0x94D049BB133111EB & _M64
    return x ^ (x >> 31)


def _thr(p: float) -> int:
    """A probability as a threshold on a 16-bit field (``field < thr`` has probability ``p``)."""
    return round(min(max(p, 0.0), 1.0) * _FULL)


def _in_range(lo: float, hi: float, field: int) -> float:
    return lo + (hi - lo) * field / (_FULL - 1)


def _cumulative(weights: list[float]) -> list[int]:
    cum, acc, total = [], 0.0, sum(weights)
    for w in weights:
        acc += w / total
        cum.append(_thr(acc))
    cum[-1] = _FULL
    return cum


def _pick(cum: list[int], u: int) -> int:
    i = 0
    while u >= cum[i]:
        i += 1
    return i


class _KindSpec:
    """A kind's parameters, resolved from the mix."""

    def __init__(self, mix: Mapping[str, Any], kind: Mapping[str, Any]) -> None:
        noise = mix["noise"]
        contacts = kind.get("contacts", "useful")
        self.contacts = check_range("", mix["contacts"][contacts] if isinstance(contacts, str) else contacts)
        self.contact_page = check_range("", kind["contact_page"]) if "contact_page" in kind else None
        self.errors = check_range("", kind.get("server_error", noise["server_error"]))
        self.challenge = check_range("", kind.get("challenge", noise["soft_challenge"]))
        self.before = BEHAVIOURS[kind["behaviour"]]
        self.after = BEHAVIOURS[kind.get("to", kind["behaviour"])]
        self.drifts = "to" in kind
        self.pages = _cumulative(page_weights("", kind.get("pages", mix["pages"])))
        #: leading pages of a site (its home, category and listing pages) that hold no item but
        #: lead on to the site's other pages: ``navigation`` under the items outcome
        self.navigation = int(kind.get("navigation", 0))
        #: a rate limit: ``burst`` requests at full speed pass, the next get 429 with
        #: ``Retry-After`` (seconds) until the slot waits that long between requests
        limit = kind.get("rate_limit")
        self.burst = tuple(limit["burst"]) if limit else (0, 0)
        self.retry_after = tuple(limit["retry_after"]) if limit else (0, 0)
        #: per round, the probability that the host is down for hours (every request times out)
        self.down = check_range("", kind.get("down", 0.0))


class World:
    """Hosts of one group share a registered domain (and so, by default, one domain state)."""

    def __init__(self, sites: int, seed: int, mix: Mapping[str, Any]) -> None:
        if sites < 1:
            raise ValueError("sites must be >= 1")
        self.sites, self.seed, self.mix = sites, seed, mix
        kinds = kinds_of(mix)
        self.kind_names = list(kinds)
        self._specs = [_KindSpec(mix, k) for k in kinds.values()]
        self._noise(mix["noise"])
        self.crawl_span = float(mix["crawl"]["hours"]) * 3600.0
        self.page_seconds = float(mix["crawl"]["page_seconds"])
        self.concurrency = int(mix["crawl"]["concurrency"])
        self.robots = bool(mix["crawl"]["robotstxt_obey"])
        #: pages are known only once the root was fetched (crawl.discovery = "root")
        self.discover = mix["crawl"].get("discovery", "list") == "root"
        #: Scrapy's RETRY_TIMES: how often a request answered 429 is sent again (at once,
        #: unless the slot was slowed)
        self.retries = int(mix["crawl"].get("retries", 2))
        urls = mix.get("urls", {})
        self.contact_url_thr = _thr(float(urls.get("contact_page", 0.0)))
        self.other_url_thr = _thr(float(urls.get("other", 0.0)))
        #: the host of the last :meth:`visit` is down for hours this round (the oracle knows it)
        self.down_now = False
        self._seed_key = mix64((seed * _GOLDEN + 0x5DEECE66D) & _M64)
        self._round_salts: list[int] = []
        self._groups(mix["subdomains"])
        self._hosts(mix)

    def _noise(self, noise: Mapping[str, Any]) -> None:
        self.timeout_thr = _thr(noise["timeout"])
        self.head_timeout_thr = _thr(noise["head_timeout"])
        self.render_timeout_thr = _thr(noise["render_timeout"])
        self.render_fail_challenge_thr = _thr(1.0 - noise["render_passes_challenge"])
        self.render_fail_block_thr = _thr(1.0 - noise["render_passes_block"])
        self.outage_thr = _thr(noise["dns_outage"])
        self.outage_nx_thr = _thr(noise["dns_outage_nxdomain"])
        self.err503_thr = _thr(noise["server_error_503"])
        self.rate_limit_thr = _thr(noise["rate_limit"])
        self.broken_thr = _thr(noise["broken_url"])
        self.head_404_thr = _thr(noise["head_404"])
        # the simulator's own choices, modelled (issue 20): 0 in the default mix; see its why_each
        self.stable_thr = _thr(noise.get("stable_contacts", 0.0))
        self.persist_thr = _thr(noise.get("render_fails_with_get", 0.0))
        self.false_empty_thr = _thr(noise.get("classifier_false_empty", 0.0))
        self.revive_thr = _thr(noise.get("dead_revive", 0.0))
        self.partial_outage_thr = _thr(noise.get("dns_outage_partial", 0.0))
        self.false_wall_thr = _thr(noise.get("classifier_false_antibot", 0.0))

    def _groups(self, sub: Mapping[str, Any]) -> None:
        n = self.sites
        lo, hi = sub["size"]
        share = sub["share"]
        start_thr = _thr(share / ((lo + hi) / 2 * (1 - share) + share)) if share < 1 else _FULL
        group_key = mix64(self._seed_key ^ 0xA0761D6478BD642F)
        self.leader = list(range(n))
        self.groups: list[tuple[int, ...]] = []
        i = 0
        while i < n:
            h = mix64((group_key + (i + 1) * _GOLDEN) & _M64)
            size = 1
            if (h & 0xFFFF) < start_thr:
                size = min(lo + ((h >> 16) & 0xFFFF) % (hi - lo + 1), n - i)
            self.groups.append(tuple(range(i, i + size)))
            for j in range(i, i + size):
                self.leader[j] = i
            i += size
        self.same_thr = _thr(sub["same_kind"])
        names = self.kind_names
        weights = {k: float(v) for k, v in sub.get("kinds", {}).items() if not k.startswith("why")}
        self._sub_cum = _cumulative([weights.get(k, 0.0) for k in names]) if weights else None

    def _hosts(self, mix: Mapping[str, Any]) -> None:
        n = self.sites
        self.kind = [0] * n
        self.before = [FRIENDLY] * n
        self.after = [FRIENDLY] * n
        self.change = [0] * n  # round (1-based) from which `after` applies; 0: never
        self.contact_thr = [0] * n
        self.contact_page_thr = [0] * n
        self.contact_page = [-1] * n  # index of the site's contact page (-1: none)
        self.error_thr = [0] * n
        self.challenge_thr = [0] * n
        self.head_404 = [False] * n
        self.dead_result = [DNS_NXDOMAIN] * n
        self.pages = [1] * n
        #: leading pages that are navigation (never useful; see _KindSpec.navigation)
        self.nav = [0] * n
        self.broken = [0] * n  # bitmask of broken (404) pages; the root never is
        #: hosts whose contacts stay on the same pages every round (noise.stable_contacts)
        self.stable = [False] * n
        #: rate limits: requests that pass at full speed (0: none) and the Retry-After (s)
        self.burst = [0] * n
        self.retry_after = [0] * n
        #: per round, threshold of the host being down for hours (every request times out)
        self.down_thr = [0] * n
        #: bitmask of pages whose URL names contacts (contact, about, impressum...)
        self.contact_urls = [0] * n
        self.hash = [0] * n
        kind_cum = _cumulative([k["share"] for k in kinds_of(mix).values()])
        dead = {k: v for k, v in mix["dead"].items() if not k.startswith("why")}
        self._dead_cum = _cumulative([float(dead.get(t, 0.0)) for t in DEAD_TYPES])
        self._drift = mix["drift"]["rounds"]
        self._useful_contacts = check_range("", mix["contacts"]["useful"])
        for i in range(n):
            self._host(i, kind_cum)

    def _kind_of(self, i: int, h1: int, kind_cum: list[int]) -> int:
        lead = self.leader[i]
        if lead != i:
            if ((h1 >> 48) & 0xFFFF) < self.same_thr:
                return self.kind[lead]
            if self._sub_cum is not None:
                return _pick(self._sub_cum, h1 & 0xFFFF)
        return _pick(kind_cum, h1 & 0xFFFF)

    def _host(self, i: int, kind_cum: list[int]) -> None:
        h1 = mix64((self._seed_key + (i + 1) * _GOLDEN) & _M64)
        self.hash[i] = h1
        kind = self.kind[i] = self._kind_of(i, h1, kind_cum)
        spec = self._specs[kind]
        self.before[i], self.after[i] = spec.before, spec.after
        self.contact_thr[i] = _thr(_in_range(*spec.contacts, (h1 >> 16) & 0xFFFF))
        self.error_thr[i] = _thr(_in_range(*spec.errors, (h1 >> 32) & 0xFFFF))
        h2 = mix64(h1 ^ 0xE7037ED1A0B428DB)
        self.challenge_thr[i] = _thr(_in_range(*spec.challenge, h2 & 0xFFFF))
        self.pages[i] = _pick(spec.pages, (h2 >> 16) & 0xFFFF) + 1
        self.nav[i] = min(spec.navigation, self.pages[i] - 1)
        self.head_404[i] = ((h2 >> 32) & 0xFFFF) < self.head_404_thr
        self.dead_result[i] = _DEAD_RESULTS[DEAD_TYPES[_pick(self._dead_cum, (h2 >> 48) & 0xFFFF)]]
        h3 = mix64(h2 ^ 0x8EBC6AF09C88C6E3)
        cp = spec.contact_page
        self.contact_page_thr[i] = self.contact_thr[i] if cp is None else _thr(_in_range(*cp, (h3 >> 16) & 0xFFFF))
        # the contact page: any URL but the root (a site of one page has none)
        self.contact_page[i] = 1 + (h3 >> 32) % (self.pages[i] - 1) if self.pages[i] > 1 else -1
        if spec.drifts:
            lo, hi = self._drift
            self.change[i] = lo + (h3 & 0xFFFF) % (hi - lo + 1)
        h4 = mix64(h3 ^ 0x2545F4914F6CDD1D)
        self.stable[i] = (h4 & 0xFFFF) < self.stable_thr
        if spec.before == DEAD and not spec.drifts and ((h4 >> 16) & 0xFFFF) < self.revive_thr:
            # a dead site that comes back (a new owner, a restored server) at a drift round
            lo, hi = self._drift
            self.after[i] = FRIENDLY
            self.change[i] = lo + ((h4 >> 32) & 0xFFFF) % (hi - lo + 1)
            self.contact_thr[i] = self.contact_page_thr[i] = _thr(
                _in_range(*self._useful_contacts, (h4 >> 48) & 0xFFFF)
            )
        mask = urls = 0
        for page in range(1, self.pages[i]):
            hp = mix64((h3 + page * _GOLDEN) & _M64)
            if (hp & 0xFFFF) < self.broken_thr:
                mask |= 1 << page
            thr = self.contact_url_thr if page == self.contact_page[i] else self.other_url_thr
            if ((hp >> 16) & 0xFFFF) < thr:
                urls |= 1 << page
        self.broken[i] = mask
        self.contact_urls[i] = urls
        h5 = mix64(h4 ^ 0x9FB21C651E98DF25)
        if spec.burst[1]:
            lo, hi = spec.burst
            self.burst[i] = lo + (h5 & 0xFFFF) % (hi - lo + 1)
            lo, hi = spec.retry_after
            self.retry_after[i] = lo + ((h5 >> 16) & 0xFFFF) % (hi - lo + 1)
        self.down_thr[i] = _thr(_in_range(*spec.down, (h5 >> 32) & 0xFFFF))

    # ------------------------------------------------------------ per round

    def round_salt(self, rnd: int) -> int:
        while len(self._round_salts) <= rnd:
            k = len(self._round_salts) + 1
            self._round_salts.append(mix64((self._seed_key ^ (k * 0xD1B54A32D192ED03)) & _M64))
        return self._round_salts[rnd]

    def behaviour(self, host: int, rnd: int) -> int:
        """How a host answers in round ``rnd`` (0-based)."""
        change = self.change[host]
        return self.after[host] if change and rnd + 1 >= change else self.before[host]

    def visit_start(self, lead: int, rnd: int, round_start: float) -> tuple[float, int | None, int]:
        """When a group's visit starts, its DNS outage (a result) if any, and the leader's round hash."""
        h = mix64(self.hash[lead] ^ self.round_salt(rnd))
        outage = None
        if ((h >> 32) & 0xFFFF) < self.outage_thr:
            outage = DNS_NXDOMAIN if ((h >> 48) & 0xFFFF) < self.outage_nx_thr else DNS_TEMPORARY
        return round_start + self.crawl_span * (h & 0xFFFF) / _FULL, outage, h

    def visit(self, host: int, rnd: int, outage: int | None, h_round: int) -> list[Page]:
        """What every page of a host gets this round."""
        beh = self.behaviour(host, rnd)
        n = self.pages[host]
        self.down_now = False
        if outage is not None and beh != DEAD and n > 1 and ((h_round >> 8) & 0xFFFF) < self.partial_outage_thr:
            # an outage shorter than the visit: its first pages fail, the rest get answers
            cut = 1 + (h_round >> 24) % (n - 1)
            return [
                self._dead_page(host, beh, outage, h_round, page)
                if page < cut
                else self._live_page(host, beh, h_round, page, n)
                for page in range(n)
            ]
        if outage is not None or beh == DEAD:
            return [self._dead_page(host, beh, outage, h_round, page) for page in range(n)]
        if beh == PARKED_SITE:
            # a parking lander: on the root the parked page, off it the same lander (no contacts
            # of a business; the classifier calls only a root parked)
            return [(PARKED, PARKED, NO_VERDICT, False)] + [(OK, OK, NO_VERDICT, False)] * (n - 1)
        if self.down_thr[host] and (mix64(h_round ^ 0x5851F42D4C957F2D) & 0xFFFF) < self.down_thr[host]:
            # down for hours, longer than the visit: every request times out, the browser's too
            self.down_now = True
            return [(TIMEOUT, TIMEOUT, TIMEOUT, False)] * n
        return [self._live_page(host, beh, h_round, page, n) for page in range(n)]

    def at_full_speed(self, host: int, pages: list[Page]) -> list[Page]:
        """What a policy that sends a visit's requests at full speed (Scrapy's defaults: no
        delay, 8 at once) gets: past a rate-limited host's burst, 429 with Retry-After."""
        burst = self.burst[host]
        if not burst or len(pages) <= burst:
            return pages
        return pages[:burst] + [(BURST_LIMITED, BURST_LIMITED, p[2], p[3]) for p in pages[burst:]]

    def _contact(self, host: int, page: int, n: int, hp: int) -> bool:
        if page < self.nav[host]:
            return False  # a navigation page: no item, only links on
        thr = self.contact_page_thr[host] if page == self.contact_page[host] else self.contact_thr[host]
        return (hp & 0xFFFF) < thr

    def _dead_page(self, host: int, beh: int, outage: int | None, h_round: int, page: int) -> Page:
        if outage is not None:
            result = outage
        else:
            result = self.dead_result[host]
            if result == ROOT_404 and page:
                result = URL_404  # the whole site answers 404: off the root, only the URL is dead
        return result, result, result, False

    def _live_page(self, host: int, beh: int, h_round: int, page: int, n: int) -> Page:
        hp = mix64((h_round + (page + 1) * _GOLDEN) & _M64)
        # a stable host's contacts are drawn once, not every round
        hc = mix64((self.hash[host] + (page + 1) * _GOLDEN) & _M64) if self.stable[host] else hp
        contact: bool | int = self._contact(host, page, n, hc)
        h2 = mix64(hp ^ 0xD1B54A32D192ED03)
        if contact and (h2 & 0xFFFF) < self.false_empty_thr:
            contact = MISJUDGED
        if self.broken[host] >> page & 1:
            return URL_404, URL_404, NO_VERDICT, contact
        get = self._get(host, beh, (hp >> 32) & 0xFFFF)
        if get == OK and self.false_wall_thr and ((h2 >> 32) & 0xFFFF) < self.false_wall_thr:
            get = FALSE_WALL  # the page came, the classifier calls it a challenge
        tab = RATE_LIMITED if get == RATE_LIMITED else self._tab(host, beh, hp >> 48)
        if get in _PERSISTING and ((h2 >> 16) & 0xFFFF) < self.persist_thr:
            tab = get  # the server's trouble meets the browser too
        return get, tab, self._head(host, beh, page, (hp >> 16) & 0xFFFF), contact

    def _server_error(self, g: int) -> int:
        return SERVER_ERROR if g & 0xFF < self.err503_thr >> 8 else SERVER_ERROR_500

    def _get(self, host: int, beh: int, g: int) -> int:
        ethr = self.error_thr[host]
        if g < self.timeout_thr:
            return TIMEOUT
        if g < self.timeout_thr + ethr:
            return self._server_error(g)
        if beh == FRIENDLY:
            return OK
        if beh == SOFT:
            if g >= self.timeout_thr + ethr + self.challenge_thr[host]:
                return OK
            return RATE_LIMITED if g & 0xFF < self.rate_limit_thr >> 8 else CHALLENGE
        return {WALL: CHALLENGE, BLOCK: BLOCKED}.get(beh, JS_SHELL)

    def _tab(self, host: int, beh: int, b: int) -> int:
        ethr = self.error_thr[host]
        if b < self.render_timeout_thr:
            return TIMEOUT
        if b < self.render_timeout_thr + ethr:
            return self._server_error(b)
        if beh in (SOFT, WALL):
            return CHALLENGE if b < self.render_timeout_thr + ethr + self.render_fail_challenge_thr else OK
        if beh == BLOCK:
            return BLOCKED if b < self.render_timeout_thr + ethr + self.render_fail_block_thr else OK
        return OK

    def _head(self, host: int, beh: int, page: int, hh: int) -> int:
        if hh < self.head_timeout_thr:
            return TIMEOUT
        if beh == WALL or (beh == SOFT and hh < self.head_timeout_thr + self.challenge_thr[host]):
            return CHALLENGE
        if beh == BLOCK:
            return BLOCKED  # seen through evidence.head_view: a HEAD cannot see a body's ban
        if page == 0 and self.head_404[host]:
            return ROOT_404  # a HEAD-shy server: 404 on the root while GET works
        return NO_VERDICT

    def domain_names(self, per_hostname: bool) -> tuple[list[str], list[str | None]]:
        """Each host's domain key, and its host-fact key (``None``: the registrable domain itself)."""
        names: list[str] = []
        hosts: list[str | None] = []
        for i in range(self.sites):
            lead = self.leader[i]
            own = f"site{lead}.example" if lead == i else f"h{i - lead}.site{lead}.example"
            names.append(own if per_hostname else f"site{lead}.example")
            hosts.append(None if per_hostname or lead == i else own)
        return names, hosts
