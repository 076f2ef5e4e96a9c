"""The previous tree's demo, served with its removed speed-ups switchable one at a time (``bench_removed.py``).

Not imported here: ``bench_removed.py`` copies this package into a git worktree of the last commit before the
restructure (``benchmarks/results/previous-tree``, git-ignored) as the top-level package ``previous_tree``, and
starts that tree's servers from there, so ``mcp_resources``, ``testproject`` and ``benchmarks`` are the previous
tree's own. ``MCP_BENCH_REMOVED_OFF=name`` switches one speed-up off (:data:`SWITCHES`); every server logs
``previous-tree: switched off <name>`` when it applies one.
"""

from __future__ import annotations

import os
import sys

ENV = "MCP_BENCH_REMOVED_OFF"
MARK = "previous-tree: switched off"

SWITCHES = {
    "token-lookup": "the narrow precompiled token query (tokenlookup.py); off: django-oauth-toolkit's "
    "validate_bearer_token, through a trivial OAUTH2_VALIDATOR_CLASS subclass",
    "prepared-statements": "PREPARE/EXECUTE of the app's fixed queries (prepared.py); off: "
    "MCP_RESOURCES['PREPARED_STATEMENTS'] = False",
    "precompiled-listing": "the owner-scoped listing query compiled once (ownership.OwnedListing, precompiled.py); "
    "off: a documents template subclass whose get_queryset() returns the same scope, through the ORM",
    "front": "the middleware-skipping fronts (MCPWSGIApplication, MCPApplication); off: Django's own WSGI or ASGI "
    "handler with the demo's middleware stack",
    "asgi-threads": "MCPApplication's own pool of ASGI_THREADS (2) threads; off: the event loop's default executor",
}


def switched_off() -> set[str]:
    names = {name.strip() for name in os.environ.get(ENV, "").split(",") if name.strip()}
    unknown = names - set(SWITCHES)
    if unknown:
        raise ValueError(f"{ENV}: unknown switch(es) {', '.join(sorted(unknown))}; known: {', '.join(SWITCHES)}")
    return names


def announce(name: str) -> None:
    print(f"{MARK} {name} (pid {os.getpid()})", file=sys.stderr, flush=True)
