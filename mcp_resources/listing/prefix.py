"""The ``prefix`` filter pushed down into a template's query.

A prefix is split along the URI template: variables it completes become equality filters, a variable it ends
inside becomes a ``startswith`` filter, and a template no URI of which can start with the prefix is not queried at
all. The result is a superset filter: every listed URI is still checked against the prefix.
"""

from __future__ import annotations

import re
from urllib.parse import unquote, unquote_to_bytes

from mcp_resources.protocol.uris import SIMPLE_CLASS, Literal, URITemplate, Variable


def prefix_variables(template: URITemplate, prefix: str) -> tuple[dict[str, str], tuple[str, str] | None] | None:
    """Split ``prefix`` along ``template``.

    Returns ``(complete, partial)``: the values of variables the prefix completes, and ``(name, start)`` for a
    variable the prefix ends inside (or ``None``); returns ``None`` when no URI of the template can start with
    ``prefix``. The result is a superset filter: callers still check every URI against the prefix.
    """
    rest = prefix
    complete: dict[str, str] = {}
    parts = template.parts
    for index, part in enumerate(parts):
        if not rest:
            return complete, None
        if isinstance(part, Literal):
            if part.text.startswith(rest):
                return complete, None
            if not rest.startswith(part.text):
                return None
            rest = rest[len(part.text) :]
            continue
        assert isinstance(part, Variable)
        nxt = parts[index + 1] if index + 1 < len(parts) else None
        stop = None
        if not part.reserved and isinstance(nxt, Literal) and not re.fullmatch(SIMPLE_CLASS, nxt.text[0]):
            stop = rest.find(nxt.text[0])
        if stop is None or stop < 0:
            if isinstance(nxt, Literal) and nxt.text[0] in rest:
                # The variable's end cannot be told from the prefix: filter nothing here (a superset).
                return complete, None
            if part.reserved:
                return complete, (part.name, rest)
            value = re.sub(r"%[0-9A-Fa-f]?$", "", rest)
            if not re.fullmatch(f"{SIMPLE_CLASS}*", value):
                return None
            raw_value = unquote_to_bytes(value)
            try:
                start = raw_value.decode()
            except UnicodeDecodeError as exc:
                if exc.reason != "unexpected end of data":
                    return None  # not UTF-8: no expanded URI holds it
                # The prefix ends inside a percent-encoded character: filter on the characters before it.
                start = raw_value[: exc.start].decode()
            return complete, (part.name, start)
        raw = rest[:stop]
        if not raw or not re.fullmatch(f"{SIMPLE_CLASS}+", raw):
            return None
        complete[part.name] = raw if part.reserved else unquote(raw)
        rest = rest[stop:]
    return (complete, None) if not rest else None
