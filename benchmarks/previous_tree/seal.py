"""Seal a cursor with the previous tree's own codec and binding: ``python -m previous_tree.seal`` in its worktree.

Reads ``{"user": {...}, "depth": 0.5, "page_size": 100}`` (a user of the fixture, with its token) on stdin and
prints what the previous tree's ``benchmarks.pages.cursor_at`` returns (cursor, skip, first URI) as JSON.
"""

from __future__ import annotations

import json
import sys


def main() -> None:
    request = json.load(sys.stdin)
    from benchmarks.common import setup_django  # the previous tree's benchmarks package

    setup_django()
    from benchmarks.pages import context_for, core_objects, cursor_at

    server, template = core_objects()
    user = request["user"]
    where = cursor_at(server, template, context_for(user), user, request["depth"], request["page_size"])
    print(json.dumps(where))


if __name__ == "__main__":
    main()
