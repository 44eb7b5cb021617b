"""Mix files: the population and its noise, loaded over the documented default and validated.

A mix file gives only the sections it changes; the rest come from
``benchmarks/economy_mix.json``. A ``kinds`` section replaces the whole kind table. Keys
starting with ``why`` document and are ignored.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_MIX_PATH", "MIXES_DIR", "MixError", "kinds_of", "load_mix", "page_weights", "shipped_mixes"]

DEFAULT_MIX_PATH = Path(__file__).resolve().parent.parent / "economy_mix.json"
MIXES_DIR = Path(__file__).resolve().parent.parent / "mixes"

BEHAVIOURS = ("friendly", "js-shell", "soft", "wall", "block", "dead", "parked")
DEAD_TYPES = ("dns", "refused", "tls", "root_404")
NOISE_PROBABILITIES = (
    "timeout",
    "head_timeout",
    "render_timeout",
    "server_error",
    "server_error_503",
    "rate_limit",
    "render_passes_challenge",
    "render_passes_block",
    "head_404",
    "broken_url",
    "dns_outage",
    "dns_outage_nxdomain",
)


class MixError(ValueError):
    """The mix file is malformed; the message names the bad entry."""


def _documented(section: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in section.items() if not k.startswith("why")}


def kinds_of(mix: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return _documented(mix["kinds"])


def shipped_mixes() -> list[Path]:
    """The documented mix files of ``benchmarks/mixes/``, by name."""
    return sorted(MIXES_DIR.glob("*.json"))


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in over.items():
        if key in ("kinds", "pages") or not isinstance(value, Mapping) or not isinstance(out.get(key), dict):
            out[key] = copy.deepcopy(value)
        else:
            out[key].update(copy.deepcopy(dict(value)))
    return out


def _read(path: str | Path) -> Mapping[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        raise MixError(f"cannot read mix file {path}: {exc}") from exc
    if not isinstance(data, Mapping):
        raise MixError("a mix file must hold a JSON object")
    return data


def load_mix(mix: str | Path | Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The default mix, updated by a mix file or mapping, validated. Sections given replace
    the default's keys one by one; ``kinds`` and ``pages`` replace the whole section."""
    with open(DEFAULT_MIX_PATH, encoding="utf-8") as f:
        base = json.load(f)
    if mix is not None:
        base = _merge(base, mix if isinstance(mix, Mapping) else _read(mix))
    validate(base)
    return base


# ------------------------------------------------------------------ validation


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_range(name: str, value: Any) -> tuple[float, float]:
    """A probability or a ``[lo, hi]`` range within 0..1."""
    if _is_number(value):
        value = [value, value]
    if (
        not isinstance(value, (list, tuple))
        or len(value) != 2
        or not all(_is_number(v) for v in value)
        or not 0.0 <= value[0] <= value[1] <= 1.0
    ):
        raise MixError(f"{name} must be a probability or a range [lo, hi] within 0..1, got {value!r}")
    return float(value[0]), float(value[1])


def _prob(name: str, value: Any) -> float:
    if not _is_number(value) or not 0.0 <= value <= 1.0:
        raise MixError(f"{name} must be a probability within 0..1, got {value!r}")
    return float(value)


def _weights(name: str, value: Any) -> list[float]:
    if (
        not isinstance(value, Mapping)
        or not value
        or not all(_is_number(w) and w >= 0 for w in value.values())
        or sum(value.values()) <= 0
    ):
        raise MixError(f"{name} must map names to weights >= 0 (not all 0), got {value!r}")
    return [float(w) for w in value.values()]


def page_weights(name: str, value: Any) -> list[float]:
    """Weights for 1, 2, ... pages: a list, or ``{"range": [lo, hi]}`` (uniform)."""
    if isinstance(value, Mapping) and "range" in value:
        lo, hi = value["range"] if isinstance(value["range"], list) and len(value["range"]) == 2 else (0, 0)
        if not (isinstance(lo, int) and isinstance(hi, int) and 1 <= lo <= hi <= 1000):
            raise MixError(f"{name}.range must be [min, max] pages with 1 <= min <= max, got {value['range']!r}")
        return [0.0] * (lo - 1) + [1.0] * (hi - lo + 1)
    if isinstance(value, Mapping):
        value = value.get("weights")
    if not isinstance(value, list) or not value or not all(_is_number(w) and w >= 0 for w in value) or sum(value) <= 0:
        raise MixError(f"{name} must be a list of weights >= 0 for 1, 2, ... pages, got {value!r}")
    return [float(w) for w in value]


def _validate_kind(mix: Mapping[str, Any], name: str, kind: Any) -> float:
    where = f"kinds.{name}"
    if not isinstance(kind, Mapping):
        raise MixError(f"{where} must be an object")
    share = kind.get("share")
    if not _is_number(share) or share < 0:
        raise MixError(f"{where}.share must be a number >= 0, got {share!r}")
    if "behaviour" not in kind:
        raise MixError(f"{where}.behaviour is missing")
    for key in ("behaviour", "to"):
        if key in kind and kind[key] not in BEHAVIOURS:
            raise MixError(f"{where}.{key} must be one of {', '.join(BEHAVIOURS)}, got {kind[key]!r}")
    contacts = kind.get("contacts", "useful")
    if isinstance(contacts, str):
        if contacts not in mix["contacts"] or contacts.startswith("why"):
            raise MixError(f"{where}.contacts names no range of section 'contacts': {contacts!r}")
    else:
        check_range(f"{where}.contacts", contacts)
    for key in ("server_error", "challenge", "contact_page"):
        if key in kind:
            check_range(f"{where}.{key}", kind[key])
    if "pages" in kind:
        page_weights(f"{where}.pages", kind["pages"])
    _validate_manners(where, kind)
    nav = kind.get("navigation", 0)
    if not (isinstance(nav, int) and not isinstance(nav, bool) and nav >= 0):
        raise MixError(f"{where}.navigation must be an integer >= 0 (leading pages that are navigation), got {nav!r}")
    return float(share)


def _int_range(name: str, value: Any, lo: int) -> None:
    if not (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        and lo <= value[0] <= value[1]
    ):
        raise MixError(f"{name} must be [min, max] integers with {lo} <= min <= max, got {value!r}")


def _validate_manners(where: str, kind: Mapping[str, Any]) -> None:
    if "down" in kind:
        check_range(f"{where}.down", kind["down"])
    if "rate_limit" in kind:
        _rate_limit(where, kind["rate_limit"])


def _rate_limit(where: str, limit: Any) -> None:
    if not isinstance(limit, Mapping):
        raise MixError(f"{where}.rate_limit must be an object with 'burst' and 'retry_after'")
    _int_range(f"{where}.rate_limit.burst", limit.get("burst"), 1)
    _int_range(f"{where}.rate_limit.retry_after", limit.get("retry_after"), 1)


def _validate_kinds(mix: Mapping[str, Any]) -> None:
    kinds = kinds_of(mix)
    if not kinds:
        raise MixError("the mix has no kinds")
    total = sum(_validate_kind(mix, name, kind) for name, kind in kinds.items())
    if not math.isclose(total, 1.0, abs_tol=1e-6):
        raise MixError(f"kind shares must add up to 1, they add up to {total:.6g}")
    noise = mix["noise"]
    # Failure reasons of one request are exclusive (timeout, then server error, then
    # challenge): their shares must fit in 1.
    for name, kind in kinds.items():
        err = check_range("", kind.get("server_error", noise["server_error"]))[1]
        soft = "soft" in (kind["behaviour"], kind.get("to"))
        challenge = check_range("", kind.get("challenge", noise["soft_challenge"]))[1] if soft else 0.0
        if noise["timeout"] + err + challenge > 1.0 + 1e-9:
            raise MixError(f"kinds.{name}: timeout + server errors + challenges exceed 1")


def _validate_noise(noise: Mapping[str, Any]) -> None:
    for key in NOISE_PROBABILITIES:
        _prob(f"noise.{key}", noise.get(key))
    check_range("noise.soft_challenge", noise["soft_challenge"])


def _validate_groups(mix: Mapping[str, Any]) -> None:
    sub = mix["subdomains"]
    _prob("subdomains.share", sub["share"])
    _prob("subdomains.same_kind", sub["same_kind"])
    lo, hi = sub["size"]
    if not (isinstance(lo, int) and isinstance(hi, int) and 2 <= lo <= hi):
        raise MixError(f"subdomains.size must be [min, max] hosts with min >= 2, got {sub['size']!r}")
    if "kinds" in sub:
        unknown = set(_documented(sub["kinds"])) - set(kinds_of(mix))
        if unknown:
            raise MixError(f"subdomains.kinds names kinds the mix does not have: {', '.join(sorted(unknown))}")
        _weights("subdomains.kinds", _documented(sub["kinds"]))


def _validate_cadence(mix: Mapping[str, Any]) -> None:
    cadence = mix["cadence"]
    rounds, days, sites = cadence.get("rounds"), cadence.get("days_between"), cadence.get("sites")
    if not isinstance(rounds, int) or isinstance(rounds, bool) or rounds < 1:
        raise MixError(f"cadence.rounds must be an integer >= 1, got {rounds!r}")
    if not _is_number(days) or days < 0:
        raise MixError(f"cadence.days_between must be a number >= 0, got {days!r}")
    if not isinstance(sites, int) or isinstance(sites, bool) or sites < 1:
        raise MixError(f"cadence.sites must be an integer >= 1, got {sites!r}")
    lo, hi = mix["drift"]["rounds"]
    if not (isinstance(lo, int) and isinstance(hi, int) and 1 <= lo <= hi):
        raise MixError(f"drift.rounds must be [first, last] round numbers, got {mix['drift']['rounds']!r}")


def _validate_crawl(crawl: Mapping[str, Any]) -> None:
    for key in ("hours", "page_seconds"):
        value = crawl[key]
        if not _is_number(value) or value < 0:
            raise MixError(f"crawl.{key} must be a number >= 0, got {value!r}")
    concurrency = crawl["concurrency"]
    if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
        raise MixError(f"crawl.concurrency must be an integer >= 1, got {concurrency!r}")
    if not isinstance(crawl["robotstxt_obey"], bool):
        raise MixError(f"crawl.robotstxt_obey must be true or false, got {crawl['robotstxt_obey']!r}")
    if crawl.get("discovery", "list") not in ("list", "root"):
        raise MixError(f"crawl.discovery must be 'list' or 'root', got {crawl['discovery']!r}")
    retries = crawl.get("retries", 2)
    if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
        raise MixError(f"crawl.retries must be an integer >= 0, got {retries!r}")


def validate(mix: dict[str, Any]) -> None:
    """Raise :class:`MixError` naming the first bad entry."""
    try:
        _validate_noise(mix["noise"])
        for name, value in _documented(mix["contacts"]).items():
            check_range(f"contacts.{name}", value)
        _validate_kinds(mix)
        page_weights("pages", mix["pages"])
        _weights("dead", _documented(mix["dead"]))
        unknown = set(_documented(mix["dead"])) - set(DEAD_TYPES)
        if unknown:
            raise MixError(f"dead names unknown dead types {sorted(unknown)}; known: {', '.join(DEAD_TYPES)}")
        _validate_groups(mix)
        _validate_cadence(mix)
        _validate_crawl(mix["crawl"])
        for key, value in _documented(mix.get("urls", {})).items():
            _prob(f"urls.{key}", value)
    except KeyError as exc:
        raise MixError(f"the mix lacks {exc}") from None
    except (TypeError, ValueError) as exc:
        if isinstance(exc, MixError):
            raise
        raise MixError(f"malformed mix: {exc}") from None
