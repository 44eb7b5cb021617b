"""Does a page carry a way to contact its owner? E-mail, phone, social-profile links.

The default outcome source (``DOMAINSTATE_OUTCOME = 'contacts'``) calls :func:`has_contact`
on every fetched page, so it is bounded (the first ``limit`` bytes) and built on a few
``bytes.find`` passes with small anchored regexes at each hit, not on a regex run over the
whole page. It leans towards missing a contact rather than inventing one:

- e-mail: ``local@domain.tld`` with an alphabetic TLD that is not a file extension
  (``logo@2x.png``), outside URL credentials and version pins (``pkg@1.2.3``), and not a
  placeholder or error-tracker address (``you@example.com``, Sentry DSNs);
- phone: ``tel:`` links, ``+``-prefixed international numbers with separators, and North
  American ``(555) 234-5678`` / ``555-234-5678`` forms, 8 to 15 digits; bare digit runs,
  dates and prices never count;
- social: profile links on Facebook, X/Twitter, LinkedIn (company/in/school/showcase),
  Instagram, YouTube (@handle/channel/c/user), TikTok (@handle) and GitHub; share, intent,
  sharer, plugin, login and home links, and links to posts rather than profiles, do not.

With hyperscan installed, :func:`has_contact` reads a bytes body in one pass over its raw bytes
(no lowercase copy): the pass finds where a contact of each kind could be, and the same checks
run there only, on a small lowercased window. :func:`scan_has_contact` answers the same for a
:class:`~scrapy_domainstate.detect.scan.BodyScan` the classifier has read already: its pass
found those places (:attr:`BodyScan.places <scrapy_domainstate.detect.scan.BodyScan.places>`),
and the plain scans read its lowercased view. :func:`find_contacts` and bodies of other types
take the plain scans. Pure: bytes or str in, no I/O.
"""

from __future__ import annotations

import re

from scrapy_domainstate.detect.scan import HAVE_HYPERSCAN, BodyScan, PatternScanner, lowered, pcre_literal

__all__ = ["find_contacts", "has_contact", "scan_has_contact", "text_body"]

# ------------------------------------------------------------------ e-mail

_DOMAIN = re.compile(rb"((?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+([a-z]{2,24}))(?![a-z0-9-]|\.[a-z0-9])")
_FILE_TLDS = frozenset(
    b"png jpg jpeg gif svg webp avif bmp ico tif tiff heic css js mjs map json xml txt html htm php asp aspx "
    b"jsp woff woff2 ttf otf eot mp3 mp4 webm ogg wav mov avi pdf zip gz tgz tar rar exe dmg md yml yaml".split()
)
_PLACEHOLDER_DOMAINS = (
    b"example.com",
    b"example.org",
    b"example.net",
    b"domain.com",
    b"email.com",
    b"yourdomain.com",
    b"yoursite.com",
    b"yourcompany.com",
    b"company.com",
    b"sentry.io",
    b"sentry-next.wixpress.com",
    b"wixpress.com",
    b"localhost.localdomain",
)
_PLACEHOLDER_SET = frozenset(_PLACEHOLDER_DOMAINS)
_PLACEHOLDER_SUFFIXES = tuple(b"." + p for p in _PLACEHOLDER_DOMAINS)
_HEX_KEY = re.compile(rb"[0-9a-f]{16,}\Z")
# The characters of an e-mail local part become "a", every other byte " ": the local part
# before an "@" (at most 64 of these characters) then starts after the last space of the
# translated window (one C-level pass instead of a regex search from every start).
_LOCAL_CHARS = b"abcdefghijklmnopqrstuvwxyz0123456789._%+-"
_LOCAL_MAP = bytes(0x61 if i in _LOCAL_CHARS else 0x20 for i in range(256))


def _emails(low: bytes, out: list[str], seen: set[str], first: bool) -> bool:
    find = low.find
    pos = find(b"@")
    while pos >= 0:
        if pos > 0:
            found = _email_at(low, pos)
            if found is not None:
                key = "email:" + found
                if key not in seen:
                    seen.add(key)
                    out.append(key)
                    if first:
                        return True
        pos = find(b"@", pos + 1)
    return False


def _email_at(low: bytes, at: int) -> str | None:
    lo = at - 64 if at > 64 else 0
    start = lo + low[lo:at].translate(_LOCAL_MAP).rfind(b" ") + 1
    if start >= at:
        return None
    local = low[start:at]
    # mailto:info@... is fine; https://user:pass@host and //user@host are URL credentials.
    if start > 0 and low[start - 1 : start] in (b":", b"/") and not low.endswith(b"mailto:", 0, start):
        return None
    local = local.lstrip(b".")
    if not local or local.endswith(b".") or b".." in local or _HEX_KEY.match(local):
        return None
    tail = _DOMAIN.match(low, at + 1, at + 256)
    if tail is None:
        return None
    domain, tld = tail.group(1), tail.group(2)
    if tld in _FILE_TLDS:
        return None
    if domain in _PLACEHOLDER_SET or domain.endswith(_PLACEHOLDER_SUFFIXES):
        return None
    return (local + b"@" + domain).decode("ascii", "replace")


# ------------------------------------------------------------------ phones

_TEL_VALUE = re.compile(rb"\s*(?://)?((?:%2b)?[+(]?[0-9][0-9().\- /]{5,30}[0-9])")
_INTL = re.compile(rb"\+\(?[1-9]\d{0,3}\)?(?:[ .\-]?\(?\d{1,5}\)?){1,6}")
#: Where _INTL matches: "+", "(" maybe, a digit 1-9, then another digit right away or after
#: ")", a separator and "(" (each optional).
_INTL_START = re.compile(rb"\+\(?[1-9](?:\d|\)?[ .\-]?\(?\d)")
_NANP = re.compile(rb"(?:\([2-9]\d{2}\) ?|[2-9]\d{2}([.\-]))[2-9]\d{2}[.\-]\d{4}")
# Phone shapes are found on a copy with every digit turned into "0", so a few plain
# ``bytes.find`` passes replace a digit-led regex over the whole page (slow in ``re``).
# (dots become dashes too, so one pass finds both 555-234-5678 and 555.234.5678).
_ZERO_DIGITS = bytes.maketrans(b"123456789.", b"000000000-")
_NANP_TAIL = b"000-0000"
_AT_ENTITY = re.compile(rb"&#64;")
_MAX_HITS = 256
_DIGIT = re.compile(rb"\d")
_BEFORE_OK = frozenset(b" \t\r\n>(:;,\"'\xa0")


def _digits(text: bytes) -> int:
    return len(_DIGIT.findall(text))


def _phone_key(text: bytes) -> str:
    text = text.strip().lstrip(b"/")
    international = text.startswith((b"+", b"%2b"))
    digits = b"".join(_DIGIT.findall(text[3:] if text.startswith(b"%2b") else text)).decode("ascii")
    return "phone:" + ("+" + digits if international else digits)


def _add(out: list[str], seen: set[str], key: str) -> None:
    if key not in seen:
        seen.add(key)
        out.append(key)


def _tel_links(low: bytes, out: list[str], seen: set[str], first: bool) -> bool:
    # bytes.find skips ahead on the whole literal; re's search stops at every "t" of a text.
    find = low.find
    pos = find(b"tel:")
    hits = 0
    while pos >= 0 and hits < _MAX_HITS:
        hits += 1
        key = _tel_at(low, pos)
        if key is not None:
            _add(out, seen, key)
            if first:
                return True
        pos = find(b"tel:", pos + 4)
    return False


def _tel_at(low: bytes, pos: int) -> str | None:
    """The phone of the ``tel:`` at ``pos`` (reads ``low[pos - 1 : pos + 64]``)."""
    # href="tel:..." but not "hotel:" or "intel:".
    if pos == 0 or not low[pos - 1 : pos].isalnum():
        match = _TEL_VALUE.match(low, pos + 4, pos + 64)
        if match is not None and 5 <= _digits(match.group(1)) <= 15:
            return _phone_key(match.group())
    return None


def _boundary_ok(low: bytes, start: int, end: int) -> bool:
    """Not glued to letters, digits or number punctuation on either side."""
    before = low[start - 1] if start > 0 else 32
    after = low[end] if end < len(low) else 32
    if before not in _BEFORE_OK:
        return False
    if after < 128 and (chr(after).isalnum() or after in b"-+/_"):
        return False
    return not (after in b".," and low[end + 1 : end + 2].isdigit())


def _numbers(low: bytes, out: list[str], seen: set[str], first: bool) -> bool:
    return _intl_numbers(low, out, seen, first) or _nanp_numbers(low, out, seen, first)


def _intl_numbers(low: bytes, out: list[str], seen: set[str], first: bool) -> bool:
    # International: every match of _INTL starts at a "+" and holds no other "+", so its
    # matches are exactly the positions _INTL_START finds (in C). A "+" glued to a letter or
    # digit (minified code: "e+1") fails the boundary check anyway: it is counted against the
    # hit budget as before, without running the full pattern.
    for hits, start_match in enumerate(_INTL_START.finditer(low)):
        if hits >= _MAX_HITS:
            break
        key = _intl_at(low, start_match.start())
        if key is not None:
            _add(out, seen, key)
            if first:
                return True
    return False


def _intl_at(low: bytes, start: int) -> str | None:
    """The international number at ``start`` (an _INTL_START match; reads ``low[start - 1 :
    start + 57]``: _INTL matches at most 55 bytes)."""
    if start > 0 and low[start - 1] not in _BEFORE_OK:
        return None
    match = _INTL.match(low, start)
    if match is None:  # pragma: no cover - _INTL_START implies a match
        return None
    text = match.group().rstrip(b" .-(")
    if (
        8 <= _digits(text) <= 15
        and any(sep in text for sep in (b" ", b"-", b".", b"("))
        and _boundary_ok(low, start, start + len(text))
    ):
        return _phone_key(text)
    return None


def _nanp_numbers(low: bytes, out: list[str], seen: set[str], first: bool) -> bool:
    # North American: find the "000-0000" tail on the digits-to-zero copy, then look back.
    shape = low.translate(_ZERO_DIGITS)
    find = shape.find
    pos = find(_NANP_TAIL)
    hits = 0
    while pos >= 0 and hits < _MAX_HITS:
        if shape[pos + 8 : pos + 9] == b"0":  # a longer digit run (123.45678): not a phone
            pos = find(_NANP_TAIL, pos + 8)
            continue
        hits += 1
        key = _nanp_at(low, pos)
        if key is not None:
            _add(out, seen, key)
            if first:
                return True
        pos = find(_NANP_TAIL, pos + 8)
    return False


def _nanp_at(low: bytes, pos: int) -> str | None:
    """The North American number whose "000-0000" tail starts at ``pos`` (reads ``low[pos - 9 :
    pos + 10]``)."""
    for back in (4, 6, 5):  # 000-000-0000, (000) 000-0000, (000)000-0000
        start = pos - back
        match = _NANP.match(low, start, pos + 8) if start >= 0 else None
        if match is None or match.end() != pos + 8:
            continue
        if match.group(1) is not None and low[pos + 3] != match.group(1)[0]:
            return None  # 555-234.5678: mixed separators
        if low[start - 2 : start] in (b"1-", b"1 ", b"1."):  # 1-800-234-5678
            start -= 2
        if _boundary_ok(low, start, match.end()):
            return _phone_key(match.group())
        return None
    return None


# ------------------------------------------------------------------ social profiles

_IDENT = rb"[a-z0-9_.\-]{1,100}"
_END = rb"/?(?=[\"'<>\s?#)&\\,;]|\Z)"
_COMMON = b"login signup share search settings help privacy legal about explore home"
# label before ".com/" -> (profile pattern after the slash, first path segments that are not profiles)
_SOCIAL: dict[bytes, tuple[re.Pattern[bytes], frozenset[bytes]]] = {
    b"facebook": (
        re.compile(
            rb"(?:pages/[^/\"'<>\s]{1,100}/\d+|profile\.php\?id=\d+|(?!\d+" + _END + rb")" + _IDENT + rb")" + _END
        ),
        frozenset(
            (
                _COMMON + b" sharer sharer.php share.php dialog plugins login.php home.php tr watch photo.php "
                b"story.php permalink.php policies ads business fbml connect events groups hashtag marketplace "
                b"gaming recover r.php l.php v2.0"
            ).split()
        ),
    ),
    b"twitter": (
        re.compile(rb"[a-z0-9_]{1,15}" + _END),
        frozenset((_COMMON + b" intent hashtag i tos widgets widgets.js notifications messages compose").split()),
    ),
    b"x": (
        re.compile(rb"[a-z0-9_]{1,15}" + _END),
        frozenset((_COMMON + b" intent hashtag i tos widgets notifications messages compose").split()),
    ),
    b"linkedin": (
        re.compile(rb"(?:company|in|school|showcase|pub)/[^/\"'<>\s?#]{1,100}" + _END),
        frozenset(),
    ),
    b"instagram": (
        re.compile(rb"[a-z0-9_.]{1,30}" + _END),
        frozenset((_COMMON + b" p reel reels accounts developer tv stories direct").split()),
    ),
    b"youtube": (
        re.compile(rb"(?:@[a-z0-9_.\-]{1,100}|(?:channel|c|user)/[a-z0-9_.\-]{1,100})" + _END),
        frozenset(),
    ),
    b"tiktok": (re.compile(rb"@[a-z0-9_.]{1,24}" + _END), frozenset()),
    b"github": (
        re.compile(rb"[a-z0-9][a-z0-9\-]{0,38}" + _END),
        frozenset(
            (
                _COMMON + b" join features pricing sponsors marketplace topics orgs site security enterprise "
                b"contact notifications apps collections trending customer-stories team readme pulls issues "
                b"codespaces new"
            ).split()
        ),
    ),
}
_LABEL = re.compile(rb"[a-z0-9\-]{1,16}\Z")
#: The last letters of the labels in _SOCIAL: a ".com/" after anything else is no profile.
_LABEL_ENDS = frozenset(label[-1] for label in _SOCIAL)
_HOST_OK = frozenset(b"/.\"' =(>")


def _social(low: bytes, out: list[str], seen: set[str], first: bool) -> bool:
    find = low.find
    pos = find(b".com/")
    hits = 0
    while pos >= 0 and hits < _MAX_HITS:
        hits += 1
        if pos == 0 or low[pos - 1] not in _LABEL_ENDS:  # not "facebook.com/", "x.com/", ...
            pos = find(b".com/", pos + 5)
            continue
        key = _social_at(low, pos)
        if key is not None:
            _add(out, seen, key)
            if first:
                return True
        pos = find(b".com/", pos + 5)
    return False


def _social_at(low: bytes, pos: int) -> str | None:
    """The profile link whose ".com/" is at ``pos`` (reads ``low[pos - 17 : pos + 166]``)."""
    label = _LABEL.search(low, max(0, pos - 16), pos)
    entry = _SOCIAL.get(label.group()) if label is not None else None
    # A whole label: "x.com/" must not be the tail of "dropbox.com/".
    if entry is not None and label is not None and (label.start() == 0 or low[label.start() - 1] in _HOST_OK):
        pattern, excluded = entry
        path = pos + 5
        match = pattern.match(low, path, path + 160)
        if match is not None:
            ident = match.group().strip(b"/")
            if ident and ident.split(b"/", 1)[0] not in excluded:
                return "social:" + (label.group() + b".com/" + ident).decode("ascii", "replace")
    return None


# ------------------------------------------------------------------ API


def _prepare(low: bytes) -> bytes:
    """The lowercased view ``low`` as the plain scans read it (``b''`` when binary)."""
    if low.find(b"\x00", 0, 1024) >= 0:  # binary: nothing to read
        return b""
    if _AT_ENTITY.search(low) is not None:  # the usual obfuscation of "@" in e-mail addresses
        low = low.replace(b"&#64;", b"@")
    return low


def find_contacts(body: bytes | str, limit: int = 65536, max_results: int = 100) -> list[str]:
    """Contacts in the first ``limit`` bytes of ``body``, deduplicated, in kind order.

    Each item is tagged: ``'email:info@acme.com'``, ``'phone:+4930123456'`` (digits, with
    ``+`` when written internationally), ``'social:facebook.com/acme'``. Addresses are
    lowercased. Bytes are read leniently (any encoding; ASCII matters here).
    """
    low = _prepare(lowered(body, limit))
    if not low:
        return []
    out: list[str] = []
    seen: set[str] = set()
    _emails(low, out, seen, False)
    _tel_links(low, out, seen, False)
    _numbers(low, out, seen, False)
    _social(low, out, seen, False)
    return out[:max_results]


def text_body(body: bytes) -> bytes:
    """The body of a *text* response as the scans should read it. They read a NUL in the first
    KiB as binary (nothing in it); UTF-16/32 text, or a stray NUL, would then be an empty page,
    and a useful site go cold. Contacts are ASCII: read without the NULs, they are found."""
    return body.replace(b"\x00", b"") if body.find(b"\x00", 0, 1024) >= 0 else body


def has_contact(body: bytes | str, limit: int = 65536) -> bool:
    """True when the first ``limit`` bytes of ``body`` show an e-mail, phone or profile link."""
    return scan_has_contact(BodyScan(body, limit))


def scan_has_contact(scan: BodyScan) -> bool:
    """:func:`has_contact` of ``scan.body`` and ``scan.limit``, reading what the classifier
    left in ``scan`` (the contact places its pass found, the lowercased view)."""
    body = scan.body
    if HAVE_HYPERSCAN and type(body) is bytes:
        found = _has_contact_fast(body, scan.limit, scan.places)
        if found is not None:
            return found
    return _plain(scan.low)


def _has_contact_plain(body: bytes | str, limit: int) -> bool:
    return _plain(lowered(body, limit))


def _plain(view: bytes) -> bool:
    low = _prepare(view)
    if not low:
        return False
    out: list[str] = []
    seen: set[str] = set()
    return (
        _emails(low, out, seen, True)
        or _tel_links(low, out, seen, True)
        or _social(low, out, seen, True)
        or _numbers(low, out, seen, True)
    )


# ------------------------------------------------------------------ one pass (hyperscan)

# has_contact with hyperscan: one pass over the raw bytes finds every place where a contact
# of each kind could start (the places the plain scans stop at), and the checks above run
# only there, on a small lowercased window. The answer is the plain scans' own, budgets
# included: the first _MAX_HITS "tel:", "+" number, ".com/" and "000-0000" places count.
_TEL, _ENTITY, _INTL_PLAIN, _INTL_PAREN, _NANP_SHAPE = range(5)
_PATTERNS: tuple[tuple[bytes, bool], ...] = (
    (b"tel:", True),
    (pcre_literal(b"&#64;"), False),
    # Where _INTL_START can match (it is checked there: the whole of it here costs twice).
    (rb"\+[1-9]", False),
    (rb"\+\([1-9]", False),
    (rb"\d{3}[.\-]\d{4}", False),  # _NANP_TAIL on the digits-to-zero copy
    # ".com/" after a label of _SOCIAL (the only ones _social looks further at)
    *((pcre_literal(label + b".com/"), True) for label in _SOCIAL),
)
_SOCIAL_FIRST = len(_PATTERNS) - len(_SOCIAL)
#: The patterns of the one pass, ``(expression, caseless)``: another pass over the same body
#: may include them and hand its matches over (in :attr:`.BodyScan.places`).
CONTACT_PATTERNS = _PATTERNS
_PATTERN_SCANNER: PatternScanner | None = None
#: Bytes an e-mail's local part may end with, and its domain start with (either case).
_LOCAL_LAST = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_%+-")
_DOMAIN_FIRST = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_DIGIT_BYTES = frozenset(b"0123456789")


def _pattern_scanner() -> PatternScanner:
    global _PATTERN_SCANNER
    if _PATTERN_SCANNER is None:
        _PATTERN_SCANNER = PatternScanner(_PATTERNS, max_matches=4 * _MAX_HITS)
    return _PATTERN_SCANNER


def _has_contact_fast(body: bytes, limit: int, places: list[tuple[int, int]] | None = None) -> bool | None:
    """:func:`has_contact` from one hyperscan pass; ``None`` when the plain scans must answer
    (``&#64;`` in the view: they read it as ``@``; or a flood of places). ``places``: the
    matches of :data:`CONTACT_PATTERNS` in ``body[:limit]`` when another pass found them
    already (then no pass runs here)."""
    n = min(len(body), limit)
    if n <= 0:
        return False
    if body.find(b"\x00", 0, min(n, 1024)) >= 0:  # binary: nothing to read
        return False
    if places is None:
        places = _pattern_scanner().scan(memoryview(body)[:n] if n < len(body) else body)
    if places is None:
        return None
    tel: list[int] = []
    intl: list[int] = []
    nanp: list[int] = []
    social: list[int] = []
    for ident, end in places:
        if ident >= _SOCIAL_FIRST:
            social.append(end - 5)
        elif ident == _TEL:
            tel.append(end - 4)
        elif ident == _NANP_SHAPE:
            nanp.append(end - 8)
        elif ident == _ENTITY:
            return None
        else:
            intl.append(end - 2 if ident == _INTL_PLAIN else end - 3)
    return (
        _fast_email(body, n)
        or bool(tel and _fast_tel(body, n, tel))
        or bool(social and _fast_social(body, n, social))
        or bool(intl and _fast_intl(body, n, intl))
        or bool(nanp and _fast_nanp(body, n, nanp))
    )


def _fast_email(body: bytes, n: int) -> bool:
    find = body.find
    at = find(b"@", 1, n)
    while at >= 0:
        # _email_at needs a local part that does not end with "." before the "@" and a domain
        # label right after it: most "@" (CSS @media, JSON-LD "@type") fail this at once.
        if body[at - 1] in _LOCAL_LAST and at + 1 < n and body[at + 1] in _DOMAIN_FIRST:
            lo = at - 72 if at > 72 else 0
            if _email_at(body[lo : min(n, at + 257)].lower(), at - lo) is not None:
                return True
        at = find(b"@", at + 1, n)
    return False


def _fast_tel(body: bytes, n: int, places: list[int]) -> bool:
    for pos in sorted(places)[:_MAX_HITS]:
        lo = pos - 1 if pos > 0 else 0
        if _tel_at(body[lo : min(n, pos + 65)].lower(), pos - lo) is not None:
            return True
    return False


def _fast_social(body: bytes, n: int, places: list[int]) -> bool:
    for pos in sorted(set(places)):
        lo = pos - 17 if pos > 17 else 0
        if _social_at(body[lo : min(n, pos + 166)].lower(), pos - lo) is None:
            continue
        # _social reads the first _MAX_HITS ".com/" of the view, whatever comes before them.
        if pos < 5 * _MAX_HITS:
            return True
        return body[:pos].lower().count(b".com/") < _MAX_HITS
    return False


def _fast_intl(body: bytes, n: int, places: list[int]) -> bool:
    # _intl_numbers reads the first _MAX_HITS matches of _INTL_START (no two overlap: each
    # holds one "+"), whatever comes before them.
    match = _INTL_START.match
    starts = [start for start in sorted(places) if match(body, start, n) is not None]
    for start in starts[:_MAX_HITS]:
        lo = start - 1 if start > 0 else 0
        if _intl_at(body[lo : min(n, start + 60)].lower(), start - lo) is not None:
            return True
    return False


def _fast_nanp(body: bytes, n: int, places: list[int]) -> bool:
    # The chain of _nanp_numbers: the next tail is looked for 8 bytes on; a tail followed by a
    # digit is skipped without counting against the budget.
    resume = 0
    hits = 0
    for pos in sorted(places):
        if pos < resume:
            continue
        if hits >= _MAX_HITS:
            break
        resume = pos + 8
        if pos + 8 < n and body[pos + 8] in _DIGIT_BYTES:
            continue
        hits += 1
        lo = pos - 10 if pos > 10 else 0
        if _nanp_at(body[lo : min(n, pos + 12)].lower(), pos - lo) is not None:
            return True
    return False
