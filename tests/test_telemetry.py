"""Telemetry: spans and metrics checked against the OpenTelemetry semantic conventions for MCP.

The SDK's ``InMemorySpanExporter`` and ``InMemoryMetricReader`` receive what the endpoint records, through providers
given to :func:`mcp_resources.telemetry.configure` (the global providers stay untouched). Requests go through the real
view and middleware (``MCPClient``), streams through the project's ASGI application.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mcp_resources import telemetry
from mcp_resources.exceptions import MCPError
from mcp_resources.protocol.versions import V2025_11_25, V2026_07_28
from mcp_resources.test import MCPClient
from mcp_resources.transport import fanout, streams
from testproject.library.models import Document
from tests.conftest import RESOURCE
from tests.stream_support import ACKNOWLEDGED, Exchange, application, in_thread, listen_body, listen_headers, scope

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{CLIENT_SPAN_ID}-01"
DURATION = "mcp.server.operation.duration"


class Recorded:
    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.metrics = InMemoryMetricReader()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.tracer_provider = tracer_provider
        self.meter_provider = MeterProvider(metric_readers=[self.metrics])

    def finished(self) -> list[Any]:
        return list(self.spans.get_finished_spans())

    def points(self, name: str) -> list[Any]:
        data = self.metrics.get_metrics_data()
        found: list[Any] = []
        for resource_metrics in data.resource_metrics if data else []:
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    if metric.name == name:
                        found.extend(metric.data.data_points)
        return found

    def metric(self, name: str) -> Any:
        data = self.metrics.get_metrics_data()
        for resource_metrics in data.resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    if metric.name == name:
                        return metric
        raise AssertionError(f"no metric {name}")


@pytest.fixture
def recorded(settings: Any) -> Iterator[Recorded]:
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "RESOURCE_URI": RESOURCE}
    recorded = Recorded()
    telemetry.configure(tracer_provider=recorded.tracer_provider, meter_provider=recorded.meter_provider)
    yield recorded
    telemetry.configure()  # the global providers again
    recorded.tracer_provider.shutdown()
    recorded.meter_provider.shutdown()


@pytest.fixture
def alice_client(alice: Any) -> MCPClient:
    client = MCPClient()
    client.force_authenticate(alice, scopes=["documents:read"])
    return client


@pytest.mark.django_db
def test_a_read_is_one_server_span_named_after_its_method(recorded: Recorded, alice: Any, alice_client: Any) -> None:
    document = Document.objects.create(owner=alice, title="Hello", body="World")
    uri = f"learn://documents/{document.pk}"
    alice_client.read_resource(uri)
    [span] = recorded.finished()
    assert span.name == "resources/read"  # the URI stays out of the name: it is not low-cardinality
    assert span.kind is trace.SpanKind.SERVER
    attributes = dict(span.attributes)
    assert attributes["mcp.method.name"] == "resources/read"
    assert attributes["mcp.resource.uri"] == uri
    assert attributes["mcp.protocol.version"] == V2026_07_28
    assert attributes["network.transport"] == "tcp"
    assert attributes["network.protocol.name"] == "http"
    assert attributes["jsonrpc.request.id"].isdigit()
    assert "error.type" not in attributes
    assert "mcp.session.id" not in attributes
    assert span.status.status_code is trace.StatusCode.UNSET


@pytest.mark.django_db
def test_the_operation_duration_histogram(recorded: Recorded, alice_client: Any) -> None:
    alice_client.list_resources()
    alice_client.list_templates()
    metric = recorded.metric(DURATION)
    assert metric.unit == "s"
    points = {point.attributes["mcp.method.name"]: point for point in metric.data.data_points}
    assert set(points) == {"resources/list", "resources/templates/list"}
    for point in points.values():
        assert point.count == 1
        assert tuple(point.explicit_bounds) == telemetry.DURATION_BUCKETS
        assert point.attributes["mcp.protocol.version"] == V2026_07_28
        assert "mcp.resource.uri" not in point.attributes  # opt-in only in the conventions: high cardinality
    assert [span.name for span in recorded.finished()] == ["resources/list", "resources/templates/list"]
    assert "mcp.resource.uri" not in recorded.finished()[0].attributes


@pytest.mark.django_db
def test_an_error_answer_sets_error_type_and_status(recorded: Recorded, alice_client: Any) -> None:
    with pytest.raises(MCPError):
        alice_client.read_resource("learn://documents/999999")
    [span] = recorded.finished()
    assert span.attributes["error.type"] == "-32602"
    assert span.attributes["rpc.response.status_code"] == "-32602"
    assert span.status.status_code is trace.StatusCode.ERROR
    assert span.status.description == "Resource not found"
    [point] = recorded.points(DURATION)
    assert point.attributes["error.type"] == "-32602"


@pytest.mark.django_db
def test_the_client_trace_context_in_meta_is_the_parent(recorded: Recorded, alice_client: Any) -> None:
    meta = {"traceparent": TRACEPARENT, "tracestate": "rojo=00f067aa0ba902b7"}
    alice_client.call("resources/list", {"_meta": meta})
    [span] = recorded.finished()
    assert format(span.context.trace_id, "032x") == TRACE_ID
    assert span.parent is not None
    assert span.parent.is_remote
    assert format(span.parent.span_id, "016x") == CLIENT_SPAN_ID
    assert span.parent.trace_state.get("rojo") == "00f067aa0ba902b7"


@pytest.mark.django_db
def test_the_ambient_span_is_linked_and_bad_trace_context_ignored(recorded: Recorded, alice_client: Any) -> None:
    tracer = recorded.tracer_provider.get_tracer("http-server")
    with tracer.start_as_current_span("POST /mcp") as http_span:
        alice_client.call("resources/list", {"_meta": {"traceparent": TRACEPARENT}})
        alice_client.call("resources/list", {"_meta": {"traceparent": {"not": "a string"}}})
        alice_client.call("resources/list", {"_meta": {"traceparent": "00-garbage"}})
    spans = [span for span in recorded.finished() if span.name == "resources/list"]
    assert [link.context.span_id for link in spans[0].links] == [http_span.get_span_context().span_id]
    for span in spans[1:]:  # no usable client context: the ambient span is the parent
        assert span.parent.span_id == http_span.get_span_context().span_id
        assert not span.links


@pytest.mark.django_db
def test_a_session_carries_its_id(recorded: Recorded, alice: Any) -> None:
    document = Document.objects.create(owner=alice, title="Hello", body="World")
    client = MCPClient(protocol_version=V2025_11_25)
    client.force_authenticate(alice, scopes=["documents:read"])
    client.read_resource(f"learn://documents/{document.pk}")
    initialize, read = recorded.finished()
    assert initialize.name == "initialize"
    assert initialize.attributes["mcp.session.id"] == client.session_id
    assert read.attributes["mcp.session.id"] == client.session_id
    assert read.attributes["mcp.protocol.version"] == V2025_11_25
    assert read.attributes["mcp.resource.uri"] == f"learn://documents/{document.pk}"


def test_without_an_sdk_nothing_records() -> None:
    # The global providers are the API's defaults here: the span does not record and costs no export.
    with telemetry.operation("resources/list", {}, request_id=1, protocol_version=V2026_07_28) as operation:
        assert operation is not None
        assert not operation.span.is_recording()


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_streams_and_delivery_counts_are_metrics(recorded: Recorded, alice: Any, make_token: Any) -> None:
    document = await in_thread(lambda: Document.objects.create(owner=alice, title="Hello", body="World"))
    uri = f"learn://documents/{document.pk}"
    token = await in_thread(make_token, alice)
    exchange = Exchange(application(), scope("POST", listen_headers(token)))
    await exchange.start(listen_body(7, {"resourceSubscriptions": [uri]}))
    assert exchange.status == 200
    assert (await exchange.event())["method"] == ACKNOWLEDGED
    [listen] = [span for span in recorded.finished() if span.name == "subscriptions/listen"]
    assert listen.attributes["mcp.resource.uri"] == uri
    assert listen.attributes["jsonrpc.request.id"] == "7"
    [active] = recorded.points("mcp_resources.streams.active")
    assert active.value == streams.open_stream_count() == 1

    def touch() -> None:
        document.body = "Changed"
        document.save()

    await in_thread(touch)
    assert (await exchange.event())["params"]["uri"] == uri
    outcomes = {
        point.attributes["mcp_resources.outcome"]: point.value
        for point in recorded.points("mcp_resources.notifications")
    }
    assert outcomes["delivered"] == fanout.delivery_counts()["delivered"] >= 1
    assert set(outcomes) == {"delivered", "withheld", "lost"}
    await exchange.disconnect()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "meta",
    [
        {"traceparent": "00-" + "f" * 5000},
        {"traceparent": TRACEPARENT, "tracestate": "=" * 600, "baggage": "%" * 9000},
        {"traceparent": TRACEPARENT, "tracestate": ["a=b"], "baggage": {"user": "alice"}},
        {"traceparent": "ff-" + TRACE_ID + "-" + CLIENT_SPAN_ID + "-01"},
        {"traceparent": "00-" + "0" * 32 + "-" + CLIENT_SPAN_ID + "-01"},
    ],
)
def test_a_hostile_trace_context_is_answered_as_usual(recorded: Recorded, alice_client: Any, meta: Any) -> None:
    assert "resources" in alice_client.call("resources/list", {"_meta": meta})
    [span] = recorded.finished()
    assert span.name == "resources/list"


GLOBAL_PROVIDERS = """
from mcp_resources import telemetry  # imported first: its instruments come from the API's proxies

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
telemetry.observe(open_streams=lambda: 3)
with telemetry.operation("resources/read", {"uri": "a://b"}, request_id=1, protocol_version="2026-07-28"):
    pass
[span] = exporter.get_finished_spans()
names = {m.name for rm in reader.get_metrics_data().resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
print(span.name, span.attributes["mcp.resource.uri"], sorted(names))
"""


def test_the_global_providers_a_project_sets_are_used(tmp_path: Any) -> None:
    # In a process of its own: the global providers can be set once per process.
    import subprocess
    import sys

    completed = subprocess.run(
        [sys.executable, "-c", GLOBAL_PROVIDERS], capture_output=True, text=True, timeout=120, check=False
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split() == [
        "resources/read",
        "a://b",
        "['mcp.server.operation.duration',",
        "'mcp_resources.notifications',",
        "'mcp_resources.streams.active']",
    ]
