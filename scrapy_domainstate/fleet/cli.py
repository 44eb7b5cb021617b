"""Running the reference service: :func:`serve` (also behind ``scrapy domainstate serve``)
and the command line of ``python -m scrapy_domainstate.service`` (:func:`main`)."""

from __future__ import annotations

import argparse
import logging
import sqlite3
import sys
from collections.abc import Mapping
from typing import Any

from twisted.internet.error import CannotListenError

from scrapy_domainstate.core.config import Config, ConfigError
from scrapy_domainstate.fleet.files import load_tokens
from scrapy_domainstate.fleet.http import make_site
from scrapy_domainstate.fleet.limits import Limits
from scrapy_domainstate.fleet.service import DomainStateService
from scrapy_domainstate.store import DomainStore, StoreError

__all__ = ["main", "serve"]

logger = logging.getLogger(__name__)

_DESCRIPTION = "The reference shared domain-state service (docs/SPEC.md section 7), on Twisted."


def serve(
    port: int,
    host: str = "127.0.0.1",
    *,
    tokens: Mapping[str, str],
    db_path: str | None,
    store: DomainStore | None = None,
    config: Config | None = None,
    limits: Limits | None = None,
    reactor: Any = None,
    run: bool = True,
) -> Any:
    """Listen on ``host:port`` (0: any free port), print the URL, and run the reactor.

    Prints ``domainstate service listening on http://HOST:PORT`` on stdout once listening.
    Votes older than their TTL are pruned hourly; the stores are closed at shutdown.
    With ``run=False`` returns the listening port without running the reactor.
    """
    if reactor is None:
        from twisted.internet import reactor as default_reactor

        reactor = default_reactor
    from twisted.internet.task import LoopingCall

    site = make_site(tokens, db_path, store=store, config=config, limits=limits)
    service: DomainStateService = site.service  # type: ignore[attr-defined]
    listening = reactor.listenTCP(port, site, interface=host)
    address = listening.getHost()
    shown = f"[{address.host}]" if ":" in address.host else address.host
    print(f"domainstate service listening on http://{shown}:{address.port}", flush=True)
    pruner = LoopingCall(service.prune)
    pruner.clock = reactor
    pruner.start(3600, now=True).addErrback(lambda f: logger.error("pruning votes failed: %s", f.getErrorMessage()))

    def shutdown() -> None:
        if pruner.running:
            pruner.stop()
        service.close()

    reactor.addSystemEventTrigger("before", "shutdown", shutdown)
    if run:
        reactor.run()
    return listening


def main(argv: list[str] | None = None) -> int:
    """``python -m scrapy_domainstate.service --port 0 --token-file F --db DIR``."""
    parser = argparse.ArgumentParser(prog="python -m scrapy_domainstate.service", description=_DESCRIPTION)
    parser.add_argument("--port", type=int, default=8790, help="TCP port (0: any free port); default 8790")
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on; default 127.0.0.1")
    parser.add_argument("--token-file", required=True, help="file of 'REPORTER_ID TOKEN' lines")
    parser.add_argument("--db", default=None, help="directory of the votes and consensus stores (default: memory)")
    parser.add_argument(
        "-s",
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a DOMAINSTATE_* setting (DOMAINSTATE_TTL, DOMAINSTATE_SERVICE_RATE, DOMAINSTATE_SERVICE_QUOTA)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        settings = {}
        for item in args.set:
            name, sep, value = item.partition("=")
            if not sep or not name.startswith("DOMAINSTATE_"):
                raise ConfigError(f"-s {item!r}: expected DOMAINSTATE_NAME=VALUE")
            settings[name] = value
        config = Config.from_settings(settings)
        tokens = load_tokens(args.token_file)
        serve(args.port, args.host, tokens=tokens, db_path=args.db, config=config)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (OSError, CannotListenError, sqlite3.Error, StoreError) as exc:  # port in use, unwritable db
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0
