"""``scrapy domainstate``: look into and manage the domain state store.

Registered through the ``scrapy.commands`` entry point
(``scrapy_domainstate.tools.commands.domainstate:Command``), so it works inside a
project (the store named by the project's settings) and outside one (``-s
DOMAINSTATE_LMDB_PATH=/path/to/db``). Commands that only read open the LMDB
store read-only, so they are safe to run while crawls write to it, and never
create a database that is not there.

The package, one role per module:

- ``_table``: the subcommands (name, arguments, options, store access, handler,
  help) and the options, declared once; help and usage checks derive from it;
- ``_command``: the Scrapy command (help, options, dispatch, exit codes);
- ``_handlers``: one function per subcommand;
- ``_context``: what a handler gets (settings, its store as a context manager);
- ``_store``: opening the configured store read-only / for writing / creating it;
- ``_output``: the progress counter and the formatting and parsing helpers.
"""

from __future__ import annotations

from scrapy_domainstate.tools.commands.domainstate._command import Command
from scrapy_domainstate.tools.commands.domainstate._output import Progress

# the names tests/tools/test_command.py imports from here
from scrapy_domainstate.tools.commands.domainstate._output import parse_ttl as _parse_ttl  # noqa: F401
from scrapy_domainstate.tools.showtext import span as _span  # noqa: F401

__all__ = ["Command", "Progress"]
