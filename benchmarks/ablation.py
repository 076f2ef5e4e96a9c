"""The ablation's switches: each turns one speed-up of the package off, in a benchmark process only.

Production code has no knobs for them. A server started with ``MCP_BENCH_ABLATE=name[,name]`` (and
``DJANGO_SETTINGS_MODULE=benchmarks.settings``, whose ``benchmarks`` app calls :func:`apply_from_env` once the app
registry is ready) runs with those speed-ups replaced by the plain path they stand in for. ``bench_ablation.py``
starts one server per switch and compares each with the server that has every speed-up on.

To measure another speed-up, add a function here::

    @speed_up("name", "what the speed-up does", "what runs when it is off")
    def _name_off() -> None:
        ...  # replace the fast function by the plain one, e.g. with replace(module.fast, plain)

and it becomes a row of the ablation table (``bench_ablation.py --speed-ups`` selects some).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

ENV = "MCP_BENCH_ABLATE"
MARK = "mcp-bench-ablation: switched off"


@dataclass(frozen=True)
class SpeedUp:
    name: str
    what: str
    off: str
    switch_off: Callable[[], None]
    servers: tuple[str, ...] = ("gunicorn", "uvicorn")  # where it is on the request's path


SPEED_UPS: dict[str, SpeedUp] = {}


def speed_up(
    name: str, what: str, off: str, servers: tuple[str, ...] = ("gunicorn", "uvicorn")
) -> Callable[[Callable[[], None]], Callable[[], None]]:
    """Register the decorated function as the switch that turns speed-up ``name`` off (on ``servers`` only)."""

    def register(switch_off: Callable[[], None]) -> Callable[[], None]:
        if name in SPEED_UPS:
            raise ValueError(f"speed-up {name!r} is registered twice")
        SPEED_UPS[name] = SpeedUp(name, what, off, switch_off, servers)
        return switch_off

    return register


def replace(original: Any, replacement: Any) -> int:
    """Rebind every module-level name of the package that refers to ``original`` (its own module's and every
    ``from ... import`` of it) to ``replacement``; return how many names were rebound."""
    count = 0
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "mcp_resources" or name.startswith("mcp_resources.")):
            continue
        for attribute, value in list(vars(module).items()):
            if value is original:
                setattr(module, attribute, replacement)
                count += 1
    if not count:
        raise RuntimeError(f"nothing in mcp_resources refers to {original!r}: the switch would change nothing")
    return count


@speed_up(
    "values-plan",
    "a listing reads values_list() rows of the columns it needs (mcp_resources.listing.plan.list_plan)",
    "model instances, each turned into a resource by the template's get_resource()",
)
def _values_plan_off() -> None:
    from mcp_resources.listing import plan

    def no_plan(template: Any) -> None:
        return None

    replace(plan.list_plan, no_plan)


@speed_up(
    "timeout-in-message",
    "a listing query's statement timeout travels with it (SET LOCAL in its message, set_config in its pipeline)",
    "atomic() + SET LOCAL: BEGIN, the SET and COMMIT as round trips of their own around the query",
)
def _timeout_in_message_off() -> None:
    from mcp_resources import queries

    def server_side(connection: Any) -> bool:
        return False

    def no_pipeline() -> bool:
        return False

    replace(queries.client_side_binding, server_side)
    replace(queries.pipeline_supported, no_pipeline)


@speed_up(
    "native-timestamps",
    "timestamptz columns of a listing are read with psycopg's C loader (mcp_resources.queries.native_timestamps)",
    "Django's Python loader for every timestamp",
)
def _native_timestamps_off() -> None:
    from mcp_resources import queries

    @contextlib.contextmanager
    def unchanged(using: str) -> Iterator[None]:
        yield

    replace(queries.native_timestamps, unchanged)


@speed_up(
    "orjson",
    "list results and the byte accounting are encoded with orjson (protocol.jsonrpc.dumps_plain)",
    "the standard library's json encoder (jsonrpc.dumps), as every other result",
)
def _orjson_off() -> None:
    from mcp_resources.protocol import jsonrpc

    replace(jsonrpc.dumps_plain, jsonrpc.dumps)


@speed_up(
    "compiled-listing",
    "a template that declares its scope lists through its page query compiled once (listing.compiled)",
    "the queryset built and compiled by the ORM for every page",
)
def _compiled_listing_off() -> None:
    from mcp_resources.listing import compiled, completion

    def not_declared(template: Any, columns: Any) -> None:
        return None

    def not_compiled(self: Any, using: str, after: Any, limit: int) -> None:
        return None

    def completion_not_declared(template: Any) -> None:
        return None

    replace(compiled.declared_listing, not_declared)
    replace(completion.declared_completion, completion_not_declared)
    compiled.StaticListing.rows = not_compiled  # type: ignore[method-assign]


@speed_up(
    "token-loading",
    "the bearer token's row is loaded in one plain query in front of django-oauth-toolkit's validator",
    "django-oauth-toolkit's own loading (a select_related queryset compiled for every request)",
)
def _token_loading_off() -> None:
    from mcp_resources.auth import loading

    def configured(validator_class: type) -> type:
        return validator_class

    replace(loading.validator_class, configured)


@speed_up(
    "wsgi-handler",
    "under ASGI, MCPEndpoint runs Django's handler and the middleware synchronously in one worker thread",
    "MCPEndpoint.as_asgi(django_asgi_app): Django's ASGI handler, two thread hops per synchronous middleware",
    servers=("uvicorn",),
)
def _wsgi_handler_off() -> None:
    from django.core.asgi import get_asgi_application

    from mcp_resources.transport import asgi

    plain_init = asgi.MCPEndpoint.__init__

    def through_asgi(self: Any, django_app: Any = None, **kwargs: Any) -> None:
        plain_init(self, django_app or get_asgi_application(), **kwargs)

    asgi.MCPEndpoint.__init__ = through_asgi  # type: ignore[method-assign]


@speed_up(
    "static-index",
    "an open stream's decision knows the admin's StaticResource URIs from the index the log's reader keeps "
    "(mcp_resources.server.static_uris)",
    "a query of the StaticResource table for the URI of every update decided",
    servers=("delivery",),  # on the path of an update, not of a request: bench_delivery.py --ablate static-index
)
def _static_index_off() -> None:
    from mcp_resources.server.static_uris import StaticURIs

    def not_kept(self: Any) -> None:
        return None

    StaticURIs.get = not_kept  # type: ignore[method-assign,assignment]


@speed_up(
    "compiled-access",
    "an access check runs the record's query compiled once (mcp_resources.listing.compiled.declared_access)",
    "get_object(): the record's queryset built and compiled by the ORM for every check",
    servers=("delivery",),  # on the path of an update: bench_delivery.py --ablate compiled-access
)
def _compiled_access_off() -> None:
    from mcp_resources.listing import compiled

    def not_declared(template: Any) -> None:
        return None

    replace(compiled.declared_access, not_declared)


def requested(value: str | None = None) -> list[str]:
    """The speed-ups named in ``MCP_BENCH_ABLATE`` (or ``value``); raises on an unknown name."""
    raw = os.environ.get(ENV, "") if value is None else value
    names = [name.strip() for name in raw.split(",") if name.strip()]
    unknown = [name for name in names if name not in SPEED_UPS]
    if unknown:
        raise ValueError(f"{ENV}: unknown speed-up(s) {', '.join(unknown)}; known: {', '.join(SPEED_UPS)}")
    return names


def apply_from_env() -> list[str]:
    """Switch off the speed-ups named in ``MCP_BENCH_ABLATE``; each is announced on stderr (servers log it)."""
    names = requested()
    for name in names:
        SPEED_UPS[name].switch_off()
        print(f"{MARK} {name} (pid {os.getpid()})", file=sys.stderr, flush=True)
    return names


@speed_up(
    "keepalive-spread",
    "each stream's keep-alive comes after 3/4 to all of STREAM_KEEPALIVE_SECONDS, drawn once per stream, its timer "
    "on a 0.1 s grid (mcp_resources.transport.streams.KEEPALIVE_SPREAD)",
    "every keep-alive exactly STREAM_KEEPALIVE_SECONDS after the stream's last write: the streams of a URI all at once",
    servers=("delivery",),  # on the path of the streams, not of a request: bench_delivery.py --ablate keepalive-spread
)
def _keepalive_spread_off() -> None:
    from mcp_resources.transport import streams

    streams.KEEPALIVE_SPREAD = 0.0
