"""OpenTelemetry spans and metrics after the MCP semantic conventions (docs/telemetry.md).

Each MCP request the endpoint answers is one ``SERVER`` span named after its method (``resources/read``; the
conventions keep resource URIs out of span names) with ``mcp.method.name``, ``mcp.protocol.version``,
``mcp.session.id`` (2025-11-25 sessions), ``mcp.resource.uri`` (reads and subscriptions), ``jsonrpc.request.id``
and, for an error, ``error.type`` and ``rpc.response.status_code``; its parent is the trace context a client sent
in ``params._meta`` (``traceparent``, ``tracestate``, ``baggage``), with a link to the ambient span (the HTTP
server's, when the project traces HTTP). Its duration goes to the ``mcp.server.operation.duration`` histogram.
The streams open in this process and its delivery counts are observed when a metric reader collects.

Only ``opentelemetry-api`` is needed (the ``otel`` extra). Without it every function here does nothing; with it and
no SDK configured, the API's no-op tracer and meter answer and nothing is recorded.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

try:
    from opentelemetry import context as otel_context
    from opentelemetry import metrics, propagate, trace
    from opentelemetry.metrics import CallbackOptions, Observation
except ImportError:  # pragma: no cover - the suite runs with the extra; tests/test_packaging.py without it
    trace = None  # type: ignore[assignment]

__all__ = ["DURATION_BUCKETS", "Operation", "configure", "observe", "operation"]

INSTRUMENTATION = "mcp_resources"
DURATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
"""The bucket boundaries (seconds) the conventions give ``mcp.server.operation.duration``."""
URI_METHODS = frozenset({"resources/read", "resources/subscribe", "resources/unsubscribe"})
"""The methods whose span carries ``mcp.resource.uri`` (and ``subscriptions/listen`` for one URI)."""
PROPAGATION_KEYS = ("traceparent", "tracestate", "baggage")
"""The keys of ``params._meta`` a client's trace context travels in (unprefixed, as SEP-414 defines them)."""

_open_streams: Callable[[], int] | None = None
_delivery_counts: Callable[[], Mapping[str, int]] | None = None


class Operation:
    """One MCP request being answered; :meth:`fail` records the error it is answered with."""

    __slots__ = ("attributes", "span")

    def __init__(self, span: Any, attributes: dict[str, Any]) -> None:
        self.span = span
        self.attributes = attributes

    def set(self, key: str, value: str) -> None:
        """Add an attribute to the span (one known only once the request is answered: a new session's id)."""
        if self.span.is_recording():
            self.span.set_attribute(key, value)

    def fail(self, code: int | str, message: str = "") -> None:
        """The request is answered with a JSON-RPC error (``code``) or failed with an exception (its type)."""
        error = {"error.type": str(code)}
        if isinstance(code, int):
            error["rpc.response.status_code"] = str(code)
        self.attributes.update(error)
        if self.span.is_recording():
            self.span.set_attributes(error)
            self.span.set_status(trace.StatusCode.ERROR, message or None)


class _Instruments:
    """The tracer and the instruments, from the given providers or (``None``) the global ones."""

    def __init__(self, tracer_provider: Any = None, meter_provider: Any = None) -> None:
        from mcp_resources import __version__

        self.tracer = trace.get_tracer(INSTRUMENTATION, __version__, tracer_provider)
        meter = metrics.get_meter(INSTRUMENTATION, __version__, meter_provider)
        self.duration = meter.create_histogram(
            "mcp.server.operation.duration",
            unit="s",
            description="MCP request duration as observed on the receiver from the time it was received until the "
            "result is sent.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        meter.create_observable_up_down_counter(
            "mcp_resources.streams.active",
            callbacks=[_observe_streams],
            unit="{stream}",
            description="Notification streams open in this process (subscriptions/listen, 2025-11-25 GET streams).",
        )
        meter.create_observable_counter(
            "mcp_resources.notifications",
            callbacks=[_observe_notifications],
            unit="{notification}",
            description="Notifications this process delivered to streams, withheld (the caller may no longer read "
            "the resource) or lost (publications the channel layer dropped), by mcp_resources.outcome.",
        )
        meter.create_observable_counter(
            "mcp_resources.streams.ended",
            callbacks=[_observe_ended],
            unit="{stream}",
            description="Streams this process ended, by mcp_resources.reason.",
        )


def configure(*, tracer_provider: Any = None, meter_provider: Any = None) -> None:
    """Record through these providers instead of the global ones (``None``: the global ones again).

    Projects normally configure the global providers (``opentelemetry-instrument``, or the SDK's
    ``trace.set_tracer_provider``) and call nothing here. Requires ``opentelemetry-api``.
    """
    global _instruments
    if trace is None:
        raise RuntimeError("configure() needs opentelemetry-api: pip install 'django-mcp-resources[otel]'")
    _instruments = _Instruments(tracer_provider, meter_provider)


def observe(
    *,
    open_streams: Callable[[], int] | None = None,
    delivery_counts: Callable[[], Mapping[str, int]] | None = None,
) -> None:
    """Where the stream metrics come from: the number of streams open in this process, and its delivery counters
    (``delivered``, ``withheld``, ``lost_messages`` and ``ended_<reason>``). Called once by the delivery code; read
    only when a metric reader collects."""
    global _open_streams, _delivery_counts
    if open_streams is not None:
        _open_streams = open_streams
    if delivery_counts is not None:
        _delivery_counts = delivery_counts


def _observe_streams(options: CallbackOptions) -> Iterable[Observation]:
    if _open_streams is not None:
        yield Observation(_open_streams())


def _observe_notifications(options: CallbackOptions) -> Iterable[Observation]:
    counts = _delivery_counts() if _delivery_counts is not None else {}
    for key, outcome in (("delivered", "delivered"), ("withheld", "withheld"), ("lost_messages", "lost")):
        yield Observation(counts.get(key, 0), {"mcp_resources.outcome": outcome})


def _observe_ended(options: CallbackOptions) -> Iterable[Observation]:
    counts = _delivery_counts() if _delivery_counts is not None else {}
    for key, value in counts.items():
        if key.startswith("ended_"):
            yield Observation(value, {"mcp_resources.reason": key.removeprefix("ended_")})


_instruments: _Instruments | None = _Instruments() if trace is not None else None


@contextmanager
def operation(
    method: str,
    params: Mapping[str, Any],
    *,
    request_id: str | int | None,
    protocol_version: str,
    session_id: str | None = None,
) -> Iterator[Operation | None]:
    """Trace and time one MCP request: a ``SERVER`` span current while it is answered, and its duration.

    Yields ``None`` without ``opentelemetry-api``. An exception escaping the block is recorded as the error
    (its type) and raised again.
    """
    instruments = _instruments
    if instruments is None:
        yield None
        return
    started = time.perf_counter()
    attributes: dict[str, Any] = {"mcp.method.name": method, "mcp.protocol.version": protocol_version}
    span_attributes = {**attributes, "network.transport": "tcp", "network.protocol.name": "http"}
    if request_id is not None:
        span_attributes["jsonrpc.request.id"] = str(request_id)
    if session_id is not None:
        span_attributes["mcp.session.id"] = session_id
    uri = _resource_uri(method, params)
    if uri is not None:
        span_attributes["mcp.resource.uri"] = uri
    parent, links = _parent(params.get("_meta"))
    span = instruments.tracer.start_span(
        method, context=parent, kind=trace.SpanKind.SERVER, attributes=span_attributes, links=links
    )
    token = otel_context.attach(trace.set_span_in_context(span, parent))
    op = Operation(span, attributes)
    try:
        yield op
    except BaseException as exc:
        if "error.type" not in attributes:
            op.fail(type(exc).__qualname__, str(exc))
        raise
    finally:
        otel_context.detach(token)
        span.end()
        instruments.duration.record(time.perf_counter() - started, attributes)


def _resource_uri(method: str, params: Mapping[str, Any]) -> str | None:
    """The URI a read or a subscription names: ``params.uri``, or the one URI a ``subscriptions/listen`` asks for."""
    if method in URI_METHODS:
        uri = params.get("uri")
        return uri if isinstance(uri, str) else None
    if method == "subscriptions/listen":
        notifications = params.get("notifications")
        uris = notifications.get("resourceSubscriptions") if isinstance(notifications, dict) else None
        if isinstance(uris, list) and len(uris) == 1 and isinstance(uris[0], str):
            return uris[0]
    return None


def _parent(meta: Any) -> tuple[Any, list[Any] | None]:
    """The context a client sent in ``params._meta`` as the span's parent, linked to the ambient span; else the
    ambient context."""
    current = otel_context.get_current()
    if not isinstance(meta, dict) or "traceparent" not in meta:
        return current, None
    carrier = {key: value for key in PROPAGATION_KEYS if isinstance(value := meta.get(key), str)}
    remote = propagate.extract(carrier)  # a context of its own: the client's span and baggage
    if not trace.get_current_span(remote).get_span_context().is_valid:
        return current, None
    ambient = trace.get_current_span(current).get_span_context()
    return remote, [trace.Link(ambient)] if ambient.is_valid else None
