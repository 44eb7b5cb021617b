"""Verdicts explained: ``scrapy domainstate explain``, the shell's ``explain()`` and the report's
evidence line.

Two questions, both answered as lines of text (docs/explain.rst):

- :func:`explain_lines`: *why is this domain in its state, and what would change it?* From a
  :class:`~scrapy_domainstate.tools.showtext.Shown` (what ``show`` reads): the decision a request
  gets now, the state and its expiry, the observations of ``recent`` that moved it there with
  their evidence (vendor, marker, status, and what the marker looks at: a header, the title,
  the body, a rule of the user's own), and the rules that would move it next.
- :func:`response_lines`: *what does the classifier make of this response?* The verdict, the
  rule or marker that fired (a user rule, the predicate or a built-in marker), a built-in
  verdict a never-a-wall exception dropped, and what the plugin does with such a verdict.

The record keeps each observation's evidence as its ``error_class``
(``'challenge:cloudflare:cf-mitigated'``, ``'block:acme:rule:acme-403'``); what a marker looks
at comes from the marker list and the user's rules by that name, so nothing more is stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.policy import EXPIRES_TO, RATE_LIMIT_STATUS, Policy
from scrapy_domainstate.core.record import FETCHED, HARD_BLOCK_PREFIX, DomainStat, Method, Outcome, RecentEntry, State
from scrapy_domainstate.core.wallrules import GRADES, PREDICATE_SETTING, PREDICATE_TAG, RULE_TAG, RULES_SETTING
from scrapy_domainstate.detect.markers import CAPTCHA_WIDGETS, CHALLENGE_SCRIPTS, Marker
from scrapy_domainstate.detect.wallrules import Seen
from scrapy_domainstate.tools.showtext import Shown, decision_text, iso, relative, span

if TYPE_CHECKING:
    from scrapy_domainstate.detect.classify import Classifier
    from scrapy_domainstate.detect.verdict import Verdict

__all__ = ["evidence_text", "explain_lines", "parse_saved_response", "response_lines", "short_evidence"]

#: How many observations the "why" lists at most.
WHY_MAX = 6

_PLAIN_WORDS = {
    "dns": "the name does not resolve (DNS: no such name)",
    "dns-temporary": "a temporary DNS failure",
    "refused": "connection refused",
    "timeout": "timed out",
    "js-shell": "a script-only shell (a browser would render it)",
    "tls:expired": "TLS certificate expired (or not yet valid)",
    "tls:self-signed": "TLS certificate self-signed",
    "tls:hostname": "TLS certificate for another host name",
    "tls:handshake": "TLS handshake failed",
}


# ------------------------------------------------------------------ evidence


def _marker_text(marker: Marker) -> str:
    """What a built-in marker looks at, in a few words."""
    pats = ", ".join(repr(p) for p in marker.patterns[:3]) + (" ..." if len(marker.patterns) > 3 else "")
    if marker.kind == "status":
        text = "status " + "/".join(str(s) for s in sorted(marker.statuses))
    elif marker.kind == "header":
        text = f"header {pats}"
        if marker.values:
            text += " with " + " or ".join(repr(v) for v in marker.values[:3])
    elif marker.kind == "title":
        text = f"title containing {pats}"
    elif marker.kind == "regex":
        text = f"a pattern in the body at {marker.anchor!r}"
    else:
        text = f"body containing {pats}"
    allowed = marker.allowed_statuses()
    if marker.kind != "status" and allowed:
        text += " on status " + "/".join(str(s) for s in sorted(allowed))
    return text


def _builtin(vendor: str, name: str, hard: bool, status: int | None, classifier: Classifier | None) -> str:
    """A built-in marker or structural cue by its evidence name (its grade and, when several
    markers share the name, the status they count on)."""
    if classifier is not None:
        named = [
            marker
            for v, marker in classifier.markers
            if v == vendor
            and marker.hard is hard
            and (marker.name == name or ("{}" in marker.name and _fits(marker.name, name)))
        ]
        named.sort(key=lambda m: m.name != name)  # the marker of that very name first, then templates
        fits = [m for m in named if status is None or status in (m.allowed_statuses() or (status,))]
        for marker in fits[:1] or named[:1]:
            more = f" (or one of {len(fits or named) - 1} more of that name)" if len(fits or named) > 1 else ""
            return f"built-in marker {vendor} {name!r}: {_marker_text(marker)}{more}"
    if name == "interstitial":
        return "built-in structure: a short page whose title or text asks to verify, wait or prove you are human"
    for table, what in ((CAPTCHA_WIDGETS, "a captcha widget"), (CHALLENGE_SCRIPTS, "a challenge script")):
        for v, (cue, literals) in table.items():
            if cue == name and (v == vendor or vendor not in table):
                where = "on a short page without a form a person fills in" if table is CAPTCHA_WIDGETS else ""
                where = where or "on a page otherwise empty"
                return f"built-in structure: {what} ({', '.join(repr(x) for x in literals[:2])}) {where}"
    return f"built-in marker {vendor} {name!r}"


def _fits(template: str, name: str) -> bool:
    head, _, tail = template.partition("{}")
    return name.startswith(head) and name.endswith(tail) and len(name) > len(head) + len(tail)


def _user_rule(vendor: str, name: str, classifier: Classifier | None) -> str:
    rules = classifier.rules if classifier is not None else None
    if rules is not None:
        for rule in rules.rules.walls:
            if rule.name == name:
                return f"your {rule.describe()} ({RULES_SETTING})"
    return f"your wall rule {name!r} (vendor {vendor}; {RULES_SETTING}, not in the settings read now)"


def evidence_text(error_class: str | None, status: int | None = None, classifier: Classifier | None = None) -> str:
    """An observation's evidence in words: the grade, the vendor, and what fired."""
    evidence = error_class or ""
    prefix, _, rest = evidence.partition(":")
    if prefix in GRADES.values() and rest:
        vendor, _, name = rest.partition(":")
        hard = prefix + ":" == HARD_BLOCK_PREFIX
        grade = "hard block" if hard else "challenge (soft)"
        tag, _, rule_name = name.partition(":")
        if tag == RULE_TAG and rule_name:
            what = _user_rule(vendor, rule_name, classifier)
        elif tag == PREDICATE_TAG and not rule_name:
            what = f"your predicate ({PREDICATE_SETTING})"
        else:
            what = _builtin(vendor, name, hard, status, classifier)
        return f"{grade}, vendor {vendor}: {what}"
    if status == RATE_LIMIT_STATUS and not evidence:
        return "rate limit (429)"
    if evidence.startswith("parked:"):
        return f"a parking or for-sale page ({evidence.partition(':')[2]})"
    if evidence.startswith("http:"):
        return f"HTTP {evidence.partition(':')[2]}"
    if evidence.startswith("paused:"):
        return f"the host stopped answering for a visit ({evidence.partition(':')[2]})"
    return _PLAIN_WORDS.get(evidence, evidence or "no evidence recorded")


def short_evidence(entry: RecentEntry) -> str:
    """One observation in one short line: ``GET 403 challenge:cloudflare:cf-mitigated, 2026-...``."""
    status = f" {entry.status}" if entry.status else ""
    method = "GET" if entry.method is Method.FETCH else str(entry.method).upper()
    return f"{method}{status} {entry.error_class or entry.outcome}, {iso(entry.at)}"


def _entry_line(entry: RecentEntry, classifier: Classifier | None) -> str:
    method = {Method.FETCH: "plain GET", Method.HEAD: "HEAD probe", Method.TAB: "browser render"}.get(
        entry.method, str(entry.method)
    )
    status = f" {entry.status}" if entry.status else ""
    head = f"{iso(entry.at)}  {method}{status} -> {entry.outcome}"
    if entry.error_class or entry.outcome in (Outcome.ANTIBOT, Outcome.DEAD, Outcome.HTTP_ERROR):
        head += f" [{entry.error_class or '-'}]: {evidence_text(entry.error_class, entry.status, classifier)}"
    return head


# ------------------------------------------------------------------ why the state


def _step(e: RecentEntry, state: State) -> str:
    """``'take'``, ``'skip'`` (neither breaks nor extends the run) or ``'stop'``: how an
    observation reads, going back from a change to ``state``."""
    if state in (State.ANTIBOT_SOFT, State.ANTIBOT_HARD):
        if e.outcome is Outcome.ANTIBOT:
            return "last" if e.is_hard_block and state is State.ANTIBOT_HARD else "take"
        return "skip" if e.method is Method.TAB else "stop"  # a render neither breaks nor extends it
    if state is State.DEAD:
        return "take" if e.outcome in (Outcome.DEAD, Outcome.PARKED) else "stop"
    if state is State.COLD:
        if e.outcome is Outcome.NAVIGATION:
            return "skip"
        return "take" if e.outcome is Outcome.OK_EMPTY else "stop"
    if state is State.FRIENDLY:
        return "take" if e.method is Method.FETCH else "skip"
    return "stop"


def _moved(stat: DomainStat, state: State) -> list[RecentEntry]:
    """The observations up to the last state change that led to ``state``, oldest first."""
    changed = stat.state_changed_at + 0.5  # (entries keep whole seconds)
    out: list[RecentEntry] = []
    for e in reversed([e for e in stat.recent if e.at <= changed]):
        step = _step(e, state)
        if step == "stop":
            break
        if step != "skip":
            out.append(e)
        if step == "last" or (state is State.FRIENDLY and len(out) >= 10):
            break
    out.reverse()
    return out[-WHY_MAX:]


def _why(shown: Shown, config: Config, classifier: Classifier | None) -> list[str]:
    stored, current = shown.stored, shown.current
    assert stored is not None
    state = shown.state
    if shown.expired:
        return [f"  why:  stored as {stored.state}, whose TTL ran out: it is {current.state} now"]
    moved = _moved(stored, stored.state) if stored.state is state else []
    out = []
    if state is State.UNKNOWN:
        last = stored.recent[-1] if stored.recent else None
        if last is None:
            out.append("  why:  no observation yet (first sight, a reset or an expiry)")
        else:
            out.append("  why:  nothing has decided it yet; the last observation:")
            out.append(f"        {_entry_line(last, classifier)}")
        return out
    if not moved:
        return [f"  why:  no observation in recent explains it: set by hand, or an expiry led here ({state})"]
    since = iso(stored.state_changed_at)
    if state is State.FRIENDLY:
        useful = sum(1 for e in moved if e.outcome is Outcome.OK_CONTACT)
        out.append(
            f"  why:  {useful} of the last {len(moved)} plain fetches were useful ({stored.fetch_total:,} in all)"
        )
        return out
    lead = {
        State.ANTIBOT_SOFT: "anti-bot answers",
        State.ANTIBOT_HARD: "anti-bot answers",
        State.DEAD: "dead signals",
        State.COLD: "empty pages in a row, never a useful page",
    }[state]
    hard = [e for e in moved if e.is_hard_block]
    if state is State.ANTIBOT_HARD and hard:
        lead = "a hard block (a ban a browser on this address does not pass)"
    elif state is State.ANTIBOT_HARD:
        lead = f"{config.antibot_hard_threshold} anti-bot answers of plain requests in a row, none passed"
    out.append(f"  why:  {lead}; the observations that moved it (up to {since}):")
    out.extend(f"        {_entry_line(e, classifier)}" for e in moved)
    after = [e for e in stored.recent if e.at > stored.state_changed_at + 0.5]
    if after:
        walls = sum(1 for e in after if e.outcome is Outcome.ANTIBOT)
        note = f", {walls} of them anti-bot" if walls and state is State.ANTIBOT_SOFT else ""
        out.append(f"        (then {len(after)} more observation{'s' if len(after) != 1 else ''}{note}; the last:")
        out.append(f"         {_entry_line(after[-1], classifier)})")
    return out


# ------------------------------------------------------------------ what would change it


def _expiry_line(shown: Shown) -> str | None:
    if shown.expires is None:
        return None
    target = EXPIRES_TO[shown.state]
    left = shown.expires - shown.now
    when = f"in {span(left)}" if left > 0 else "now"
    again = " (re-evaluated: probed again)" if target is State.UNKNOWN else ""
    return f"it expires {when} ({iso(shown.expires)}) -> {target}{again}"


def _dead_line(shown: Shown, config: Config) -> str:
    """What makes an unknown domain dead: two signals, or one when an earlier visit's dead verdict
    stands unbroken (its confirmation visit)."""
    if shown.current.dead_visits:
        return "it was held dead on an earlier visit: one dead signal (not a HEAD alone) confirms it -> dead"
    return f"{config.dead_threshold} dead signals in a row (DNS, refused, 404 on the root) -> dead"


def _one_more(shown: Shown, config: Config, outcome: Outcome, status: int | None = None) -> State:
    """The state one more plain fetch with ``outcome`` would leave, by the policy's own rules
    (so streaks carried across an expiry by the lifetime counters are read as it reads them)."""
    entry = RecentEntry(shown.now, Method.FETCH, outcome, status, None)
    return Policy(config).observe(shown.current, shown.key, entry)[0].state


def _hard_line(shown: Shown, config: Config) -> str:
    """What makes an antibot-soft domain whose plain fetches have not passed antibot-hard."""
    if _one_more(shown, config, Outcome.ANTIBOT, 403) is State.ANTIBOT_HARD:
        return (
            "one more anti-bot answer of a plain request -> antibot-hard (no plain fetch of it ever passed:"
            " its earlier walls carry the streak)"
        )
    return (
        f"{config.antibot_hard_threshold} anti-bot answers of plain requests in a row (no plain pass)"
        " -> antibot-hard; a hard block -> antibot-hard at once"
    )


def _cold_line(shown: Shown, config: Config) -> str:
    """What makes an unknown domain cold."""
    if _one_more(shown, config, Outcome.OK_EMPTY, 200) is State.COLD:
        return "one more empty page -> cold (never a useful page: its empty pages so far carry the streak)"
    return f"{config.cold_threshold} empty pages in a row over two visits, never a useful page -> cold"


def _changes(shown: Shown, config: Config) -> list[str]:
    state, key = shown.state, shown.key
    stored = shown.stored
    recent = stored.recent if stored is not None else []
    lines: list[str] = []
    if state is State.ANTIBOT_HARD:
        lines.append(
            "a plain fetch that passes returns it to antibot-soft (the first request of each visit is a plain canary)"
        )
    elif state is State.ANTIBOT_SOFT:
        passed = any(e.method is Method.FETCH and e.outcome in FETCHED for e in recent)
        if passed:
            lines.append("a plain fetch passed in its recent history: a streak alone does not make it antibot-hard")
        else:
            lines.append(_hard_line(shown, config))
        lines.append("each new anti-bot answer restarts its TTL (a sliding expiry)")
    elif state is State.FRIENDLY:
        lines.append("an anti-bot answer -> antibot-soft at once")
        lines.append(f"{config.friendly_demote} failed plain fetches in a row -> unknown")
    elif state is State.UNKNOWN:
        lines.append(_dead_line(shown, config))
        lines.append("an anti-bot answer -> antibot-soft; a hard block -> antibot-hard")
        lines.append(
            f">= {round(config.friendly_ratio * 100)} % useful of the last {config.friendly_window} plain fetches"
            f" (>= {config.friendly_min_fetches} in all) -> friendly"
        )
        lines.append(_cold_line(shown, config))
    elif state is State.DEAD:
        lines.append("a fetch forced through (meta domainstate_force) that gets a page -> unknown")
    elif state is State.COLD:
        lines.append("a fetch forced through (meta domainstate_force) that gets a useful page -> unknown")
    expiry = _expiry_line(shown)
    if expiry:
        lines.append(expiry)
    elif state is State.FRIENDLY:
        lines.append("it has no TTL: it stays while its fetches keep passing")
    lines.append(f"by hand: scrapy domainstate reset {key}  (or: set {key} STATE)")
    if state in (State.ANTIBOT_SOFT, State.ANTIBOT_HARD):
        lines.append(
            f"if these pages are not walls: {RULES_SETTING} = {{'never': [{{'domain': '{key}'}}]}}"
            " (docs/detection-rules.rst)"
        )
    return [f"    - {line}" for line in lines]


def explain_lines(shown: Shown, config: Config, classifier: Classifier | None = None) -> list[str]:
    """The lines of ``scrapy domainstate explain URL``."""
    key = shown.key
    head = key if shown.target.strip().lower() == key else f"{key}  (key of {shown.target!r})"
    out = [head, f"  decision now: {shown.decision_text}"]
    if shown.stored is None:
        why = "its record is corrupt and is treated as unknown" if shown.corrupt else "no record: never seen, or swept"
        out.append(f"  state:        {shown.state} ({why})")
        out.append("  what would change it: its first request, sent alone, is the probe")
        return out
    expires = (
        "never (no TTL)" if shown.expires is None else f"{iso(shown.expires)} ({relative(shown.expires, shown.now)})"
    )
    out.append(f"  state:        {shown.state}, since {iso(shown.current.state_changed_at)}; expires {expires}")
    out.extend(_why(shown, config, classifier))
    out.append("  what would change it:")
    out.extend(_changes(shown, config))
    if shown.host is not None:
        host, own, (decision, state, _) = shown.host
        whose = "by its own facts" if own else f"as {key}: no facts of its own yet"
        out.append(
            f"  host {host}: decided {whose}: {state}; decision now: {decision_text(decision, shown.browser, state)}"
        )
    return out


# ------------------------------------------------------------------ a saved response


@dataclass(frozen=True)
class SavedResponse:
    status: int
    headers: dict[str, str]
    body: bytes


def parse_saved_response(
    data: bytes, status: int | None = None, headers: Mapping[str, str] | None = None
) -> SavedResponse:
    """A saved response: a raw HTTP message (``HTTP/1.1 403 Forbidden``, header lines, a blank
    line, the body: what ``curl -i`` prints), or a body alone (status and headers given).
    Given ``status``/``headers`` override and extend the message's own. ``ValueError`` when a
    message's head cannot be read."""
    own_status, body = 200, data
    own_headers: dict[str, str] = {}
    if data[:5].upper() == b"HTTP/":
        # curl -i -L prints every hop's head: the last one is the response.
        while data[:5].upper() == b"HTTP/":
            cut = [i for i in (data.find(b"\r\n\r\n"), data.find(b"\n\n")) if i >= 0]
            if not cut:
                head, data = data, b""
            else:
                end = min(cut)
                sep = 4 if data[end : end + 4] == b"\r\n\r\n" else 2
                head, data = data[:end], data[end + sep :]
            lines = head.decode("latin-1").splitlines()
            parts = lines[0].split(None, 2)
            if len(parts) < 2 or not parts[1].isdigit():
                raise ValueError(f"not an HTTP status line: {lines[0]!r}")
            own_status = int(parts[1])
            own_headers = {}
            for line in lines[1:]:
                name, colon, value = line.partition(":")
                if not colon or not name.strip():
                    raise ValueError(f"not a header line: {line!r}")
                name = name.strip().lower()
                value = value.strip()
                own_headers[name] = f"{own_headers[name]}, {value}" if name in own_headers else value
        body = data
    merged = {**own_headers, **{k.strip().lower(): v for k, v in (headers or {}).items()}}
    return SavedResponse(own_status if status is None else status, merged, body)


def _what_then(verdict: Verdict) -> str:
    if verdict.outcome is Outcome.ANTIBOT and verdict.is_hard_block:
        return "the domain goes to antibot-hard at once (browser only, a plain canary per visit)"
    if verdict.outcome is Outcome.ANTIBOT:
        if verdict.status == RATE_LIMIT_STATUS:
            return "a rate limit: the domain's slot slows down; never re-issued in the browser"
        return "the domain goes to antibot-soft (or stays); the request is re-issued once in the browser"
    if verdict.outcome is Outcome.DEAD:
        return "a dead signal (two in a row make an unknown domain dead)"
    if verdict.outcome is Outcome.PARKED:
        return "the domain is treated as dead (parked)"
    if verdict.outcome is Outcome.OK_EMPTY and verdict.error_class == "js-shell":
        return "a fetched page, but a script-only shell: re-issued once in the browser"
    if verdict.success:
        return "a fetched page: whether it is useful comes from DOMAINSTATE_OUTCOME (contacts by default)"
    if verdict.browser_fixable:
        return "a failure a browser may fix: re-issued once in the browser"
    return "a failure that counts towards its state's rules"


def response_lines(classifier: Classifier, url: str, status: int, headers: Any, body: bytes) -> list[str]:
    """The lines of ``scrapy domainstate explain URL --response FILE`` (and of ``explain(response)``)."""
    from scrapy_domainstate.core.keys import is_site_root
    from scrapy_domainstate.detect.headers import normalize_headers

    is_root = is_site_root(url)
    hdrs = normalize_headers(headers)
    verdict = classifier.response(status, headers, body, url, is_root)
    out = [
        f"response {status} for {url} ({len(body):,} bytes, {len(hdrs)} header{'s' if len(hdrs) != 1 else ''})",
        f"  verdict:  {verdict.outcome}" + (f" [{verdict.error_class}]" if verdict.error_class else ""),
    ]
    if verdict.outcome is Outcome.ANTIBOT or verdict.error_class:
        out.append(f"  fired:    {evidence_text(verdict.error_class, verdict.status, classifier)}")
    rules = classifier.rules
    dropped = False
    if rules is not None and verdict.outcome is not Outcome.ANTIBOT:
        # What the built-in rules alone would say, and which of the user's rules dropped it.
        builtin = classifier.builtin_response(status, headers, body, url, is_root)
        if builtin.outcome is Outcome.ANTIBOT:
            seen = Seen(url, int(status), hdrs, bytes(body), rules.scan_bytes)
            ruling = rules.first(seen)
            never = rules.excuse(seen, builtin.error_class)
            if ruling is not None and ruling.grade == "clean":
                by = f"your predicate ({PREDICATE_SETTING}) said 'clean'"
            elif never is not None:
                by = f"your {never.describe()} ({RULES_SETTING})"
            else:  # pragma: no cover - the only ways a built-in verdict is dropped
                by = "your rules"
            out.append(
                f"  dropped:  the built-in verdict [{builtin.error_class}] ({evidence_text(builtin.error_class, status, classifier)})"
            )
            out.append(f"            by {by}")
            dropped = True
    if verdict.outcome is not Outcome.ANTIBOT and not dropped:
        yours = "no rules of your own are set" if rules is None else "nor any of your own"
        out.append(f"  anti-bot: no rule fired (built-in, {yours})")
    if verdict.success and verdict.error_class != "js-shell":
        out.append(f"  useful:   {_useful_text(classifier.config, body)}")
    out.append(f"  then:     {_what_then(verdict)}")
    return out


def _useful_text(config: Config, body: bytes) -> str:
    """What the outcome source makes of a fetched page (the verdict above is the classifier's)."""
    from scrapy_domainstate.detect.contacts import find_contacts, text_body

    if config.outcome == "items":
        return "the callback decides (DOMAINSTATE_OUTCOME = 'items': a page that yields an item is useful)"
    if config.outcome != "contacts":
        return f"your DOMAINSTATE_OUTCOME callable decides ({config.outcome})"
    found = find_contacts(text_body(body), config.body_scan_bytes, max_results=3)
    if found:
        return f"ok-contact ({', '.join(found)})"
    return "ok-empty (no e-mail address, phone number or social-profile link)"
