"""``explain`` for each state, from records built by the real policy (a memory store, a fixed
clock): the observations that moved a domain, with their evidence, and what would change it."""

from __future__ import annotations

from scrapy_domainstate.core.config import Config
from scrapy_domainstate.core.record import Method, Outcome, RecentEntry, State
from scrapy_domainstate.detect.classify import Classifier
from scrapy_domainstate.store.memory import MemoryStore
from scrapy_domainstate.tools.explain import evidence_text, explain_lines
from scrapy_domainstate.tools.showtext import look
from tests import T0

CONFIG = Config(flush_size=1, flush_interval=1e9)
CLASSIFIER = Classifier(CONFIG)


def store() -> MemoryStore:
    s = MemoryStore(CONFIG)
    s.open()
    return s


def text(s: MemoryStore, domain: str, now: float) -> str:
    return "\n".join(explain_lines(look(s, domain, domain, now), CONFIG, CLASSIFIER))


def observe(s: MemoryStore, domain: str, *entries: tuple[float, Method, Outcome, int | None, str | None]) -> None:
    for at, method, outcome, status, error in entries:
        s.record(domain, RecentEntry(at, method, outcome, status, error))


def test_antibot_soft_shows_the_answers_and_the_way_to_hard() -> None:
    s = store()
    observe(s, "shop.example", (T0, Method.FETCH, Outcome.ANTIBOT, 403, "challenge:cloudflare:cf-mitigated"))
    out = text(s, "shop.example", T0 + 60)
    assert "  decision now: fetch-then-browser" in out
    assert (
        "  state:        antibot-soft, since 2023-11-14 22:13:20 UTC; expires 2023-11-21 22:13:20 UTC (in 6d 23h)"
        in out
    )
    assert "why:  anti-bot answers; the observations that moved it" in out
    assert (
        "2023-11-14 22:13:20 UTC  plain GET 403 -> antibot [challenge:cloudflare:cf-mitigated]: challenge (soft),"
        " vendor cloudflare: built-in marker cloudflare 'cf-mitigated': header 'cf-mitigated' with 'challenge'"
    ) in out
    assert "    - 3 anti-bot answers of plain requests in a row (no plain pass) -> antibot-hard" in out
    assert "    - it expires in 6d 23h (2023-11-21 22:13:20 UTC) -> unknown (re-evaluated: probed again)" in out


def test_a_streak_to_antibot_hard_and_a_render_inside_it() -> None:
    s = store()
    wall = "challenge:datadome:captcha-delivery"
    observe(
        s,
        "dd.example",
        (T0, Method.FETCH, Outcome.ANTIBOT, 403, wall),
        (T0 + 10, Method.TAB, Outcome.ANTIBOT, 403, wall),  # a render neither breaks nor extends it
        (T0 + 20, Method.FETCH, Outcome.ANTIBOT, 403, wall),
        (T0 + 30, Method.FETCH, Outcome.ANTIBOT, 403, wall),
        (T0 + 40, Method.TAB, Outcome.OK_CONTACT, 200, None),
    )
    out = text(s, "dd.example", T0 + 100)
    assert "  state:        antibot-hard, since 2023-11-14 22:13:50 UTC" in out
    assert "why:  3 anti-bot answers of plain requests in a row, none passed" in out
    assert out.count("-> antibot [challenge:datadome:captcha-delivery]") == 4  # the streak, and the render
    assert "(then 1 more observation; the last:" in out and "browser render 200 -> ok-contact" in out
    assert "a plain fetch that passes returns it to antibot-soft" in out
    assert "-> antibot-soft" in out.split("what would change it:")[1]


def test_dead_cold_friendly_unknown_and_by_hand() -> None:
    s = store()
    observe(
        s,
        "gone.example",
        (T0, Method.FETCH, Outcome.DEAD, None, "dns"),
        (T0 + 1, Method.FETCH, Outcome.DEAD, None, "dns"),
    )
    dead = text(s, "gone.example", T0 + 10)
    assert "  decision now: skip" in dead and "why:  dead signals" in dead
    assert dead.count("plain GET -> dead [dns]: the name does not resolve (DNS: no such name)") == 2
    assert "a fetch forced through (meta domainstate_force) that gets a page -> unknown" in dead
    assert "DOMAINSTATE_WALL_RULES" not in dead  # (the exception hint is for anti-bot domains)

    useful = [(T0 + i, Method.FETCH, Outcome.OK_CONTACT, 200, None) for i in range(5)]
    observe(s, "good.example", *useful)
    friendly = text(s, "good.example", T0 + 10)
    assert "  state:        friendly" in friendly and "expires never (no TTL)" in friendly
    assert "why:  5 of the last 5 plain fetches were useful (5 in all)" in friendly
    assert "    - an anti-bot answer -> antibot-soft at once" in friendly
    assert "    - it has no TTL: it stays while its fetches keep passing" in friendly

    observe(s, "new.example", (T0, Method.FETCH, Outcome.OK_EMPTY, 200, None))
    unknown = text(s, "new.example", T0 + 10)
    assert "why:  nothing has decided it yet; the last observation:" in unknown
    assert "plain GET 200 -> ok-empty" in unknown and "-> friendly" in unknown and "-> cold" in unknown

    s.set_state("hand.example", State.ANTIBOT_HARD, T0)
    by_hand = text(s, "hand.example", T0 + 10)
    assert "  why:  no observation in recent explains it: set by hand, or an expiry led here (antibot-hard)" in by_hand

    # expired: what it was, and what it is now; its next visit's first dead signal confirms it
    gone = text(s, "gone.example", T0 + 40 * 86400)
    assert "whose TTL ran out: it is unknown now" in gone
    assert "held dead on an earlier visit: one dead signal (not a HEAD alone) confirms it -> dead" in gone
    assert "dead signals in a row" not in gone.split("what would change it:")[1]
    assert "2 dead signals in a row (DNS, refused, 404 on the root) -> dead" in unknown  # no chain: two


def test_evidence_in_words() -> None:
    assert evidence_text("http:404", 404) == "HTTP 404"
    assert evidence_text("parked:sedo") == "a parking or for-sale page (sedo)"
    assert evidence_text(None, 429) == "rate limit (429)"
    assert evidence_text("block:acme:rule:x") == (
        "hard block, vendor acme: your wall rule 'x' (vendor acme; DOMAINSTATE_WALL_RULES, not in the settings read now)"
    )
    assert (
        evidence_text("challenge:edge:predicate")
        == "challenge (soft), vendor edge: your predicate (DOMAINSTATE_WALL_PREDICATE)"
    )
    assert evidence_text("challenge:generic:interstitial", 200, CLASSIFIER).endswith(
        "a short page whose title or text asks to verify, wait or prove you are human"
    )


def test_a_streak_an_expiry_cleared_is_carried_by_the_lifetime_counters() -> None:
    s = store()
    day = 86400
    empty = [(T0 + i, Method.FETCH, Outcome.OK_EMPTY, 200, None) for i in range(5)]
    later = [(T0 + 2 * day + i, Method.FETCH, Outcome.OK_EMPTY, 200, None) for i in range(5)]
    observe(s, "quiet.example", *empty, *later)  # cold: ten empty pages over two visits
    assert look(s, "quiet.example", "quiet.example", T0 + 3 * day).state is State.COLD
    expired = text(s, "quiet.example", T0 + 100 * day)  # cold ran out: unknown, recent cleared
    assert "one more empty page -> cold (never a useful page" in expired
    assert "10 empty pages in a row over two visits" not in expired

    wall = "challenge:cloudflare:cf-mitigated"
    observe(s, "wall.example", *[(T0 + i, Method.FETCH, Outcome.ANTIBOT, 403, wall) for i in range(3)])
    assert look(s, "wall.example", "wall.example", T0 + 10).state is State.ANTIBOT_HARD
    soft = text(s, "wall.example", T0 + 91 * day)  # hard ran out into antibot-soft
    assert "one more anti-bot answer of a plain request -> antibot-hard" in soft
    assert "3 anti-bot answers of plain requests in a row" not in soft
