"""Domain keys: which state record a URL belongs to (docs/SPEC.md section 4).

A URL or a bare host is reduced to its *domain key*:

* a hostname keys by its registrable domain (eTLD+1) under the Public Suffix List
  **including** its private section, so ``alice.github.io`` and ``bob.github.io`` are two
  sites and ``x.blogspot.com`` is keyed by itself;
* an IPv4/IPv6 literal keys by the normalised address (IPv6 compressed, no brackets, no
  zone id; an IPv4-mapped IPv6 address keys as the IPv4 address);
* a host whose suffix is not in the list (``.test``, ``.localhost``, ``.internal``,
  single-label intranet names) keys by its last two labels, or its single label;
* with ``per_hostname=True`` the key is the whole normalised hostname.

Normalisation: surrounding whitespace, userinfo, port and trailing dots are dropped, ASCII
is lowercased, and non-ASCII labels are converted to their ASCII ``xn--`` form, so an IDN
keys the same in Unicode and in punycode. Nothing here raises for a ``str`` input: a URL
without a host (``data:``, ``file:///x``, ``mailto:``) or a host holding characters no
hostname can hold yields ``''``. Keys are at most :data:`MAX_KEY_BYTES` bytes of UTF-8;
a longer one is cut and suffixed with ``#`` and a sha1 digest (``#`` never appears in a
normalised host, so such a key cannot collide with a real one).

The suffix list is the snapshot bundled with ``tldextract``: the extractor is built with
``suffix_list_urls=()`` and ``cache_dir=None``, so it never opens a socket and never reads
or writes a cache directory.
"""

from __future__ import annotations

import functools
import hashlib
import re
import threading
from ipaddress import IPv4Address, IPv6Address
from typing import TYPE_CHECKING

try:
    import idna as _idna
except ImportError:  # pragma: no cover - idna is a dependency of tldextract
    _idna = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from tldextract import TLDExtract

__all__ = [
    "MAX_DOMAIN_LENGTH",
    "MAX_KEY_BYTES",
    "domain_key",
    "host_fact_key",
    "host_of",
    "is_domain_key",
    "is_site_root",
    "names_contacts",
    "part_of",
    "purpose_key",
    "purpose_of_key",
    "request_keys",
]

#: Upper bound of a key's UTF-8 length (LMDB's own limit is 511 bytes).
MAX_KEY_BYTES = 200
#: Longest key :func:`is_domain_key` accepts (a DNS name's limit).
MAX_DOMAIN_LENGTH = 253
_DIGEST_CHARS = 16
_CACHE_SIZE = 65536

# A URL scheme (RFC 3986 section 3.1), matched on a slice of the input.
_SCHEME_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*")
# Where an authority ends. A backslash counts as a slash, as browsers do for http(s).
_AUTHORITY_END_RE = re.compile(r"[/?#\\]")
# WHATWG "forbidden domain code points" (C0 controls, space, DEL and URL delimiters).
_FORBIDDEN_HOST_RE = re.compile(r"[\x00-\x20\x7f#%/:<>?@\[\\\]^|]")
# ``http(s)://host[:port]`` followed by ``/`` or the end, with no userinfo, brackets,
# query or fragment in the authority: the host is group 1 (as _raw_host's long way reads it).
# (not at the end after whitespace: the general parser strips it, as from the whole text)
_PLAIN_AUTHORITY_RE = re.compile(r"https?://([^/?#\\@\[:]*)(?::[^/?#\\@\[:]*)?(?:/|(?<!\s)\Z)").match
# Full stops that IDNA (UTS #46) maps to '.'.
_DOT_TRANSLATION = str.maketrans({"\u3002": ".", "\uff0e": ".", "\uff61": "."})
# One label of a normalised hostname: lowercase LDH, 1-63 characters.
_LABEL_RE = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")

_extractor_lock = threading.Lock()
_extractor: TLDExtract | None = None


def _get_extractor() -> TLDExtract:
    """Build the suffix-list extractor once, from the bundled snapshot only."""
    global _extractor
    extractor = _extractor
    if extractor is None:
        with _extractor_lock:
            extractor = _extractor
            if extractor is None:
                extractor = _new_extractor()
                _extractor = extractor
    return extractor


def _new_extractor() -> TLDExtract:
    """A fresh extractor that reads the bundled snapshot and never the network or disk cache."""
    from tldextract import TLDExtract

    extractor = TLDExtract(
        cache_dir=None,  # no disk cache: nothing is read from or written to $HOME
        suffix_list_urls=(),  # no download: go straight to the bundled snapshot
        fallback_to_snapshot=True,
        include_psl_private_domains=True,
        cache_fetch_timeout=None,  # ignore TLDEXTRACT_CACHE_TIMEOUT from the environment
    )
    extractor("example.com")  # load the snapshot now rather than on the first request
    return extractor


# --------------------------------------------------------------------- parsing


def _split_url(text: str) -> tuple[str, str] | None:
    """Split a URL or bare host into ``(authority, rest)``; ``None`` when it has no authority.

    ``scheme://authority/...`` and ``//authority/...`` are read as URLs; anything else is a
    bare ``host[:port][/...]``, except an opaque URI such as ``mailto:x@y`` or ``data:...``.
    """
    s = text.strip()
    i = s.find("//")
    if i == 0:
        s = s[2:]
    elif i > 1 and s[i - 1] == ":" and _SCHEME_RE.fullmatch(s, 0, i - 1):
        s = s[i + 2 :]
    else:
        end = _AUTHORITY_END_RE.search(s)
        authority = s if end is None else s[: end.start()]
        if ":" in authority and authority[0] != "[" and (authority.count(":") == 1 or "@" in authority):
            # "host:port" has digits after its colon; "scheme:opaque" does not.
            port = authority.partition(":")[2]
            if port and not port.isdigit():
                return None
        return authority, s[len(authority) :]
    end = _AUTHORITY_END_RE.search(s)
    if end is None:
        return s, ""
    return s[: end.start()], s[end.start() :]


def _host_from_authority(authority: str) -> str:
    """The raw host of an authority: no userinfo, port or brackets."""
    if "@" in authority:
        authority = authority.rpartition("@")[2]
    if authority[:1] == "[":
        return authority[1:].partition("]")[0]
    if authority.count(":") == 1:
        return authority.partition(":")[0]
    return authority  # no port, or an unbracketed IPv6 literal


def _raw_host(text: str) -> str:
    """The raw host of a URL or bare host (``''`` when there is none); not yet normalised."""
    # Fastest path: ``http(s)://host[:port]`` then ``/`` or the end, in one C-level match.
    match = _PLAIN_AUTHORITY_RE(text)
    if match is not None:
        return match[1]
    # Fast path for the other ``http(s)://...``; anything unusual goes the long way.
    if text.startswith("https://"):
        start = 8
    elif text.startswith("http://"):
        start = 7
    else:
        return _raw_host_slow(text)
    end = text.find("/", start)
    if end < 0 and text[-1:].isspace():
        return _raw_host_slow(text)  # (it strips the text's trailing whitespace)
    authority = text[start:] if end < 0 else text[start:end]
    if "?" in authority or "#" in authority or "\\" in authority or "@" in authority or "[" in authority:
        return _raw_host_slow(text)
    if ":" in authority:
        return _host_from_authority(authority)
    return authority


def _raw_host_slow(text: str) -> str:
    parts = _split_url(text)
    if parts is None:
        return ""
    return _host_from_authority(parts[0])


# --------------------------------------------------------------- normalisation


def _ip_literal(host: str) -> str:
    """The normalised address if ``host`` is an IP literal (zone id dropped), else ``''``."""
    address = host.partition("%")[0]
    try:
        if ":" in address:
            ip6 = IPv6Address(address)
            mapped = ip6.ipv4_mapped
            return str(mapped) if mapped is not None else ip6.compressed
        return str(IPv4Address(address))
    except ValueError:
        return ""


def _ascii_label(label: str) -> str:
    """One label in ASCII (``xn--``) form; the lowercased label when IDNA rejects it."""
    if label.isascii():
        return label.lower()
    if _idna is not None:
        try:
            return _idna.encode(label, uts46=True).decode("ascii")
        except (UnicodeError, ValueError, IndexError):
            pass
    try:
        return label.encode("idna").decode("ascii").lower()
    except (UnicodeError, ValueError, IndexError):
        return label.lower()


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _normalise_host(raw: str) -> str:
    """Lowercase, strip the trailing dot, IP literals normalised, IDNs in ``xn--`` form."""
    host = raw.strip().rstrip(".")
    if not host:
        return ""
    if ":" in host or host[-1].isdigit():
        ip = _ip_literal(host)
        if ip:
            return ip
    if host.isascii():
        host = host.lower()
    else:
        host = host.translate(_DOT_TRANSLATION).rstrip(".")
        host = ".".join(_ascii_label(label) for label in host.split(".")).rstrip(".")
    if not host or _FORBIDDEN_HOST_RE.search(host):
        return ""
    try:
        host.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: not a host, and not storable
        return ""
    return host


def _registrable(host: str) -> str:
    """eTLD+1 of a normalised hostname; its last two labels when the suffix is unknown."""
    result = _get_extractor()(host)
    if result.suffix:
        if result.domain:
            return f"{result.domain}.{result.suffix}"
        return host  # the host is itself a public suffix (``github.io``, ``co.uk``)
    return ".".join(host.rsplit(".", 2)[-2:])


def _fit(key: str) -> str:
    """``key`` itself when it is short enough, else a prefix plus a sha1 digest."""
    data = key.encode("utf-8")
    if len(data) <= MAX_KEY_BYTES:
        return key
    digest = hashlib.sha1(data, usedforsecurity=False).hexdigest()[:_DIGEST_CHARS]
    prefix = data[: MAX_KEY_BYTES - _DIGEST_CHARS - 1].decode("utf-8", "ignore")
    return f"{prefix}#{digest}"


def _is_ipv4(host: str) -> bool:
    return host[-1].isdigit() and _ip_literal(host) == host


def _key(raw: str, per_hostname: bool) -> str:
    """The key of a raw host: its normalised hostname or IP, or its registrable domain."""
    host = _normalise_host(raw)
    if not host:
        return ""
    if per_hostname or ":" in host or _is_ipv4(host):
        return _fit(host)
    return _fit(_registrable(host))


# One single-argument cache per mode: a lookup keyed by the bare string is the fastest.
@functools.lru_cache(maxsize=_CACHE_SIZE)
def _site_key(raw: str) -> str:
    return _key(raw, False)


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _hostname_key(raw: str) -> str:
    return _key(raw, True)


# ------------------------------------------------------------------ public API


def domain_key(host_or_url: str, per_hostname: bool = False) -> str:
    """The state key of a URL or bare host; ``''`` when it has no usable host.

    >>> domain_key("https://User@Shop.Example.co.uk:8443/a?b=1")
    'example.co.uk'
    >>> domain_key("bob.github.io"), domain_key("xn--bcher-kva.de"), domain_key("www.bücher.de")
    ('bob.github.io', 'xn--bcher-kva.de', 'xn--bcher-kva.de')
    >>> domain_key("http://[FE80::1%25eth0]:8080/"), domain_key("a.b.intranet.test")
    ('fe80::1', 'intranet.test')
    >>> domain_key("https://shop.example.com/", per_hostname=True)
    'shop.example.com'
    """
    if not isinstance(host_or_url, str):
        return ""
    if per_hostname:
        return _hostname_key(_raw_host(host_or_url))
    return _site_key(_raw_host(host_or_url))


def host_fact_key(host_or_url: str, per_hostname: bool = False) -> str | None:
    """Where the host facts of a URL's host live (docs/SPEC.md section 2, "host facts"), or ``None``
    when they live in the domain's own record: with ``per_hostname``, and for the
    registrable domain itself and its ``www.``. Otherwise the hostname's own key.

    >>> host_fact_key("https://shop.example.co.uk/a"), host_fact_key("https://www.example.co.uk/")
    ('shop.example.co.uk', None)
    >>> host_fact_key("example.co.uk"), host_fact_key("shop.example.co.uk", per_hostname=True)
    (None, None)
    """
    if per_hostname or not isinstance(host_or_url, str):
        return None
    return _host_facts(_raw_host(host_or_url))[1]


def request_keys(url: str, per_hostname: bool = False) -> tuple[str, str | None]:
    """``(domain_key(url, per_hostname), host_fact_key(url, per_hostname))``, the URL read once.

    >>> request_keys("https://shop.example.co.uk/a"), request_keys("https://shop.example.co.uk/a", True)
    (('example.co.uk', 'shop.example.co.uk'), ('shop.example.co.uk', None))
    """
    if not isinstance(url, str):
        return "", None
    raw = _raw_host(url)
    if per_hostname:
        return _hostname_key(raw), None
    return _host_facts(raw)


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _host_facts(raw: str) -> tuple[str, str | None]:
    """The site key of a raw host, and its own key when its host facts live apart."""
    site = _site_key(raw)
    host = _hostname_key(raw)
    if not host or host == site or host == "www." + site:
        return site, None
    return site, host


def host_of(url: str) -> str:
    """The normalised hostname of a URL or bare host (as in :func:`domain_key`), or ``''``.

    Unlike a key it is not shortened, so it may exceed :data:`MAX_KEY_BYTES`.
    """
    if not isinstance(url, str):
        return ""
    return _normalise_host(_raw_host(url))


def is_site_root(url: str) -> bool:
    """Whether ``url`` has a host, a path of ``''`` or ``'/'`` and no (non-empty) query.

    The fragment is ignored; an empty query (``/?``) counts as no query.
    """
    if not isinstance(url, str):
        return False
    parts = _split_url(url)
    if parts is None or not _normalise_host(_host_from_authority(parts[0])):
        return False
    rest = parts[1].partition("#")[0]
    path, _, query = rest.partition("?")
    return path in ("", "/", "\\") and not query


#: Path words that say a page holds a site's contacts or who runs it, in the main languages of
#: the web (one word of a path segment, split on ``-``, ``_``, ``.``, ``+`` and spaces, or a
#: whole segment without its extension), lowercased and percent-decoded.
CONTACT_WORDS = frozenset(
    {
        # English
        "contact",
        "contacts",
        "contactus",
        "about",
        "aboutus",
        "imprint",
        "team",
        "legal",
        "impressum",
        "staff",
        # German, Dutch, Scandinavian, Polish, Czech
        "kontakt",
        "kontakte",
        "kontaktformular",
        "über",
        "überuns",
        "ueber",
        "ueberuns",
        "uns",
        "anfahrt",
        "contacteer",
        "overons",
        "ons",
        "omoss",
        "yhteystiedot",
        "onas",
        "kontakty",
        # French
        "qui",
        "sommes",
        "nous",
        "propos",
        "apropos",
        "mentions",
        "legales",
        "equipe",
        "coordonnees",
        "contactez",
        # Spanish, Portuguese, Italian
        "contacto",
        "contactanos",
        "contactenos",
        "nosotros",
        "quienes",
        "equipo",
        "aviso",
        "contato",
        "contatos",
        "fale",
        "sobre",
        "contatti",
        "contattaci",
        "chi",
        "siamo",
        "chisiamo",
        "note",
        "legali",
    }
)
#: Words of :data:`CONTACT_WORDS` too common to count alone: they say "contacts" only beside
#: another word of the set (``/a-propos``, ``/chi-siamo``, ``/qui-sommes-nous``, ``/uber-uns``).
_CONTACT_PAIRED = frozenset(
    {"qui", "sommes", "nous", "uns", "ons", "chi", "siamo", "note", "fale", "sobre", "aviso", "quienes", "propos"}
)
_PATH_WORD_RE = re.compile(r"[-_.+\s]+")


def names_contacts(url: str) -> bool:
    """Whether a URL's path says its page holds contacts (``/contact``, ``/about-us``,
    ``/impressum.html``, ``/de/kontakt/``, ``/qui-sommes-nous``, ``/chi-siamo``...): a word of
    :data:`CONTACT_WORDS` in one of its path segments (the query is not read). The site root
    and a URL without a host do not."""
    if not isinstance(url, str):
        return False
    parts = _split_url(url)
    if parts is None:
        return False
    path = parts[1].partition("#")[0].partition("?")[0]
    if "%" in path:
        from urllib.parse import unquote

        path = unquote(path)
    for segment in path.lower().split("/"):
        if not segment:
            continue
        words = [w for w in _PATH_WORD_RE.split(segment) if w]
        whole = "".join(words[:-1]) if len(words) > 1 and words[-1] in _EXTENSIONS else "".join(words)
        if whole in CONTACT_WORDS and whole not in _CONTACT_PAIRED:
            return True
        hits = [w for w in words if w in CONTACT_WORDS]
        if any(w not in _CONTACT_PAIRED for w in hits) or len(hits) >= 2:
            return True
    return False


_EXTENSIONS = frozenset({"html", "htm", "php", "asp", "aspx", "jsp", "shtml", "cfm"})


def is_domain_key(text: object) -> bool:
    """Whether ``text`` has the syntax of a key :func:`domain_key` produces, in full.

    Lowercase LDH labels (IDNs in their ``xn--`` form) of 1-63 characters, at most
    :data:`MAX_DOMAIN_LENGTH` characters in all; or an IPv4 address; or an IPv6 address in
    its compressed form. The shortened ``...#digest`` keys of overlong hosts do not pass:
    they are never shared with other crawlers (the fleet's wire format accepts only these).
    """
    if not isinstance(text, str) or not text or len(text) > MAX_DOMAIN_LENGTH:
        return False
    if ":" in text:
        try:
            return IPv6Address(text).compressed == text
        except ValueError:
            return False
    return all(_LABEL_RE.fullmatch(label) for label in text.split("."))


#: Between a site key and the purpose of a worth record (never in a normalised host or key).
PURPOSE_SEP = "|"
_PURPOSE_MAX = 32


def purpose_key(key: str, purpose: str) -> str:
    """The key of the record that keeps what a site is *worth* to one purpose (docs/SPEC.md
    section 3): the usefulness behind ``cold`` and ``friendly`` of a spider whose outcome
    source is ``purpose`` (``"items"`` or a callable's dotted path), beside the site's shared
    record ``key``. A purpose longer than 32 characters is named by a digest.

    >>> purpose_key("example.com", "items")
    'example.com|items'
    >>> purpose_of_key("example.com|items"), purpose_of_key("example.com")
    (('example.com', 'items'), None)
    """
    if len(purpose) > _PURPOSE_MAX:
        purpose = "h" + hashlib.sha1(purpose.encode("utf-8")).hexdigest()[:_DIGEST_CHARS]
    return f"{key}{PURPOSE_SEP}{purpose}"


def purpose_of_key(key: str) -> tuple[str, str] | None:
    """``(site key, purpose)`` of a :func:`purpose_key`, or ``None`` for a site's own key."""
    site, sep, purpose = key.rpartition(PURPOSE_SEP)
    return (site, purpose) if sep and site and purpose else None


def part_of(key: str, per_hostname: bool = False) -> tuple[str, str] | None:
    """``(domain, relation)`` for a stored key that is part of a domain's memory rather than
    a domain of its own: a hostname's own facts (``"host"``, docs/SPEC.md section 2) or a
    purpose's worth record (``"items"``, a callable's path...). ``None`` for a domain's key.

    >>> part_of("blog.example.co.uk"), part_of("example.co.uk|items"), part_of("example.co.uk")
    (('example.co.uk', 'host'), ('example.co.uk', 'items'), None)
    >>> part_of("blog.example.co.uk", per_hostname=True) is None
    True
    """
    purpose = purpose_of_key(key)
    if purpose is not None:
        return purpose
    if per_hostname or not key:
        return None
    domain = domain_key(key)
    return (domain, "host") if domain and domain != key else None
