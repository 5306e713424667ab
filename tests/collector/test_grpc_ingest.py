"""OTLP/gRPC ingestion with the real OTLP gRPC exporter, through the same pipeline as HTTP."""

from __future__ import annotations

import os

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from agentwatch_api.handshake import read_admin_token
from tests.collector.ingest_helpers import (
    Running,
    agent_trace,
    otlp_request,
    run_spans,
    serve,
    settings_for,
)
from tests.support.ports import free_port

METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Running:
    settings = settings_for(tmp_path_factory.mktemp("grpc") / "data", grpc_port=free_port())
    with serve(settings) as running:
        yield running


def _export(collector: Running, body: bytes, key: str | None) -> bytes:
    with grpc.insecure_channel(collector.grpc) as channel:
        call = channel.unary_unary(METHOD)
        metadata = [("authorization", f"Bearer {key}")] if key else []
        return call(body, metadata=metadata, timeout=30)


def test_real_grpc_exporter_lands_in_store(collector: Running) -> None:
    key = collector.key("grpc-project")
    provider = TracerProvider()
    exporter = OTLPSpanExporter(
        endpoint=collector.grpc,
        insecure=True,
        headers={"authorization": f"Bearer {key}"},
        compression=grpc.Compression.Gzip,
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("t").start_as_current_span(
        "chat", attributes={"gen_ai.request.model": "sim-small", "gen_ai.usage.input_tokens": 7}
    ) as span:
        pass
    provider.shutdown()
    [row] = run_spans(collector.url, key, f"{span.get_span_context().trace_id:032x}", expect=1)
    assert (row["model"], row["input_tokens"], row["kind"]) == ("sim-small", 7, "llm")


def test_grpc_without_key_is_unauthenticated(collector: Running) -> None:
    with pytest.raises(grpc.RpcError) as info:
        _export(collector, agent_trace(os.urandom(16)).SerializeToString(), None)
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_grpc_callers_are_those_of_http(collector: Running) -> None:
    """One ``authenticate`` for both transports: a bad key is 401, the admin token (no project) 403."""
    body = agent_trace(os.urandom(16)).SerializeToString()
    with pytest.raises(grpc.RpcError) as info:
        _export(collector, body, "aw_000000000000_wrong")
    assert (info.value.code(), info.value.details()) == (grpc.StatusCode.UNAUTHENTICATED, "invalid or revoked API key")
    with pytest.raises(grpc.RpcError) as info:
        _export(collector, body, read_admin_token(collector.settings.data_dir))
    assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED and "names no project" in info.value.details()


def test_grpc_bad_body_and_partial_success(collector: Running) -> None:
    key = collector.key("grpc-project")
    with pytest.raises(grpc.RpcError) as info:
        _export(collector, os.urandom(200), key)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "not a valid OTLP protobuf" in info.value.details()
    trace_id = os.urandom(16)
    body = otlp_request(trace_id, [{"span_id": os.urandom(8)}, {"span_id": b"\x00" * 8}]).SerializeToString()
    response = ExportTraceServiceResponse.FromString(_export(collector, body, key))
    assert response.partial_success.rejected_spans == 1
    assert len(run_spans(collector.url, key, trace_id.hex(), expect=1)) == 1


def test_grpc_applies_the_per_span_bounds_of_http(collector: Running) -> None:
    """A span with more events than AGENTWATCH_MAX_EVENTS_PER_SPAN is kept, cut, with a warning."""
    key = collector.key("grpc-project")
    request = otlp_request(os.urandom(16), [{"span_id": os.urandom(8), "name": "chatty"}])
    span = request.resource_spans[0].scope_spans[0].spans[0]
    limit = collector.settings.max_events_per_span
    for i in range(limit + 5):
        span.events.add(name=f"e{i}", time_unix_nano=span.start_time_unix_nano)
    response = ExportTraceServiceResponse.FromString(_export(collector, request.SerializeToString(), key))
    assert response.partial_success.rejected_spans == 0
    assert (
        f"{limit + 5} events; the first {limit} kept (AGENTWATCH_MAX_EVENTS_PER_SPAN)"
        in response.partial_success.error_message
    )
