"""Response headers as the detect floor reads them: any header object (Scrapy ``Headers``,
a mapping, pairs) normalized to lowercase ``str`` names and values (:func:`normalize_headers`),
the few a classifier's markers read picked out cheaply (:class:`MarkerHeaders`), and the
vendor header rules (:func:`header_fires`: a marker header with its values and exclusions).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from scrapy_domainstate.detect.compiled import CompiledMarker

__all__ = ["MarkerHeaders", "header_fires", "normalize_headers"]


def normalize_headers(
    headers: Any, names: frozenset[str] | None = None, prefixes: tuple[str, ...] = ()
) -> dict[str, str]:
    """Lowercased ``str`` name -> ``str`` value, from Scrapy ``Headers`` or a plain mapping.

    Scrapy ``Headers`` hold bytes names and lists of bytes values; repeated values are
    joined with ``", "`` (the HTTP list syntax). ``None`` gives ``{}``. With ``names``,
    only those headers (and names starting with one of ``prefixes``) are kept.
    """
    if not headers:
        return {}
    if isinstance(headers, dict):
        # Scrapy's Headers is a dict subclass whose items() normalises every key and
        # copies every value list: read the stored pairs directly.
        items: Iterable[tuple[Any, Any]] = dict.items(headers)
    else:
        items = headers.items() if hasattr(headers, "items") else headers
    out: dict[str, str] = {}
    for key, value in items:
        name = (key.decode("latin-1") if isinstance(key, (bytes, bytearray)) else str(key)).lower()
        if names is not None and name not in names and not (prefixes and name.startswith(prefixes)):
            continue
        if isinstance(value, (list, tuple)):
            text = ", ".join(v.decode("latin-1") if isinstance(v, (bytes, bytearray)) else str(v) for v in value)
        elif isinstance(value, (bytes, bytearray)):
            text = value.decode("latin-1")
        else:
            text = "" if value is None else str(value)
        out[name] = f"{out[name]}, {text}" if name in out else text
    return out


def _tokens(value: str) -> set[str]:
    return {t.strip() for t in value.lower().split(",")}


#: The keys of headers that hold only a content type.
_CT_ONLY = {"content-type": ""}.keys()


def header_fires(c: CompiledMarker, hdrs: Mapping[str, str]) -> bool:
    """Whether header marker ``c`` fires on ``hdrs`` (picked, decoded headers): one of its
    headers is there with one of its values (any, when it lists none) and none it excludes."""
    values: list[str] = [hdrs[n] for n in c.header_names if n in hdrs]
    if c.header_prefixes:
        values += [v for k, v in hdrs.items() if k.startswith(c.header_prefixes)]
    if not values:
        return False
    for value in values:
        tokens = _tokens(value)
        if c.exclude and not tokens.isdisjoint(c.exclude):
            continue
        if not c.values or not tokens.isdisjoint(c.values):
            return True
    return False


class MarkerHeaders:
    """The response headers a classifier reads: the marker headers of its markers, the parking
    headers and ``content-type``, picked out of a response's headers and decoded (the others
    are never decoded). Thread-safe (a memo of stored names, whose racing writers store the
    same answer)."""

    __slots__ = ("_names_b", "_picks", "_prefixes_b", "_wanted", "clean_content_type", "names", "prefixes")

    def __init__(self, markers: Iterable[CompiledMarker], extra: Iterable[str]) -> None:
        markers = tuple(markers)
        self.names = frozenset({"content-type", *extra} | {n for c in markers for n in c.header_names})
        self.prefixes = tuple(sorted({p for c in markers for p in c.header_prefixes}))
        # The same as bytes, to pick the headers out of Scrapy ``Headers`` before decoding.
        self._names_b = frozenset(n.encode("latin-1") for n in self.names)
        self._prefixes_b = tuple(p.encode("latin-1") for p in self.prefixes)
        #: stored ``Headers`` name -> whether it is one of those (a memo: thread-safe enough,
        #: a racing writer stores the same answer).
        self._wanted: dict[bytes, bool] = {}
        #: the stored names of a response's headers -> those of them to keep (a memo, bounded)
        self._picks: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        # content-type is read for binary/HTML checks; unless a marker looks at it, its
        # presence alone says "no marker header".
        self.clean_content_type = not any(
            "content-type" in c.header_names or "content-type".startswith(c.header_prefixes)
            for c in markers
            if c.kind == "header"
        )

    def quiet(self, hdrs: Mapping[str, str]) -> bool:
        """Whether picked headers ``hdrs`` hold no marker header at all (none, or only a
        ``content-type`` no marker reads)."""
        return len(hdrs) == 0 or (self.clean_content_type and hdrs.keys() == _CT_ONLY)

    def _picked_names(self, names: tuple[Any, ...]) -> tuple[Any, ...]:
        """Those of a response's stored header names that :meth:`pick` keeps (memoised)."""
        wanted = self._wanted
        kept = []
        for key in names:
            keep = wanted.get(key) if type(key) is bytes else True
            if keep is None:
                low = key.lower()
                keep = low in self._names_b or low.startswith(self._prefixes_b)
                if len(wanted) < 4096:  # header names are few; stay bounded anyway
                    wanted[key] = keep
            if keep:
                kept.append(key)
        picked = tuple(kept)
        if len(self._picks) < 4096:
            self._picks[names] = picked
        return picked

    def pick(self, headers: Any) -> dict[str, str]:
        """The headers of :attr:`names` (and :attr:`prefixes`) in ``headers`` (Scrapy ``Headers``
        or a mapping), as :func:`normalize_headers` gives them."""
        if headers and isinstance(headers, dict):
            # Scrapy ``Headers``: keep only the bytes names that matter before decoding
            # anything (most responses carry none of the marker headers). A site answers
            # with the same header names page after page: which of them are kept is looked
            # up once per set of names.
            names = tuple(dict.keys(headers))
            keys = self._picks.get(names)
            if keys is None:
                keys = self._picked_names(names)
            if not keys:
                return {}
            out: dict[str, str] = {}
            for key in keys:
                value = dict.get(headers, key)
                # The usual shape (bytes name, one bytes value), decoded as normalize_headers does.
                if type(key) is not bytes or type(value) is not list or len(value) != 1 or type(value[0]) is not bytes:
                    return normalize_headers({k: dict.get(headers, k) for k in keys}, self.names, self.prefixes)
                name = key.decode("latin-1").lower()
                text = value[0].decode("latin-1")
                out[name] = f"{out[name]}, {text}" if name in out else text
            return out
        return normalize_headers(headers, self.names, self.prefixes)
