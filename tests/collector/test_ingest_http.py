"""OTLP/HTTP ingestion end to end: real exporter -> real collector (uvicorn) -> chDB -> query API."""

from __future__ import annotations

import gzip
import json
import os
import time
from pathlib import Path

import httpx
import pytest
from google.rpc import status_pb2
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from agentwatch_platform.collector.ingest.normalize import TRUNCATION_MARKER
from tests.collector.ingest_helpers import (
    Running,
    agent_trace,
    otlp_request,
    run_spans,
    sdk_agent_run,
    serve,
    settings_for,
)
from tests.support import local_http
from tests.support.poll import wait_until

PROTOBUF = {"Content-Type": "application/x-protobuf"}


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Running:
    settings = settings_for(
        tmp_path_factory.mktemp("ingest") / "data",
        max_attribute_length=1000,
        max_body_bytes=2_000_000,
        max_spans_per_request=1000,
    )
    with serve(settings) as running:
        yield running


@pytest.fixture(scope="module")
def key(collector: Running) -> str:
    return collector.key("alpha")


def _post(collector: Running, key: str | None, body: bytes, headers: dict[str, str] | None = None) -> httpx.Response:
    h = dict(headers or PROTOBUF)
    if key:
        h["Authorization"] = f"Bearer {key}"
    return local_http.post(collector.url + "/v1/traces", content=body, headers=h, timeout=30)


def _status_message(response: httpx.Response) -> str:
    return status_pb2.Status.FromString(response.content).message


def test_real_exporter_spans_are_queryable(collector: Running, key: str) -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": "exporter-test"}))
    exporter = OTLPSpanExporter(endpoint=collector.url + "/v1/traces", headers={"Authorization": f"Bearer {key}"})
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span(
        "invoke_agent research", attributes={"agentwatch.span.kind": "run", "gen_ai.agent.name": "research"}
    ) as root:
        with tracer.start_as_current_span(
            "chat sim-large",
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "sim-large",
                "gen_ai.usage.input_tokens": 1000,
                "gen_ai.usage.output_tokens": 100,
                "custom.flag": "yes",
            },
        ):
            pass
    provider.shutdown()
    trace_id = f"{root.get_span_context().trace_id:032x}"
    spans = run_spans(collector.url, key, trace_id, expect=2)
    llm = next(s for s in spans if s["kind"] == "llm")
    assert llm["model"] == "sim-large"
    assert (llm["input_tokens"], llm["output_tokens"]) == (1000, 100)
    assert llm["cost_usd"] == pytest.approx((1000 * 2.5 + 100 * 10.0) / 1e6)
    assert llm["attributes"]["custom.flag"] == "yes"
    assert next(s for s in spans if s["kind"] == "run")["agent"] == "research"


def test_gzip_exporter(collector: Running, key: str) -> None:
    provider = TracerProvider()
    exporter = OTLPSpanExporter(
        endpoint=collector.url + "/v1/traces", headers={"Authorization": f"Bearer {key}"}, compression=Compression.Gzip
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("t").start_as_current_span("gz", attributes={"gen_ai.request.model": "sim-small"}) as span:
        pass
    provider.shutdown()
    assert len(run_spans(collector.url, key, f"{span.get_span_context().trace_id:032x}", expect=1)) == 1


def test_json_body_with_otlp_mapping(collector: Running, key: str) -> None:
    trace_id = os.urandom(16).hex()
    now = time.time_ns()
    body = {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "json-agent"}}]},
                "scopeSpans": [
                    {
                        "scope": {"name": "s"},
                        "spans": [
                            {
                                "traceId": trace_id,
                                "spanId": os.urandom(8).hex(),
                                "name": "chat",
                                "kind": 3,
                                "startTimeUnixNano": str(now - 10**9),
                                "endTimeUnixNano": str(now),
                                "status": {"code": "STATUS_CODE_ERROR", "message": "boom"},
                                "attributes": [
                                    {"key": "gen_ai.request.model", "value": {"stringValue": "sim-small"}},
                                    {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "42"}},
                                    {
                                        "key": "tags",
                                        "value": {"arrayValue": {"values": [{"stringValue": "a"}, {"intValue": "2"}]}},
                                    },
                                ],
                            }
                        ],
                    }
                ],
            }
        ]
    }
    response = _post(
        collector,
        key,
        gzip.compress(json.dumps(body).encode()),
        {"Content-Type": "application/json", "Content-Encoding": "gzip"},
    )
    assert response.status_code == 200, response.text
    assert response.json() == {}
    [span] = run_spans(collector.url, key, trace_id, expect=1)
    assert (span["model"], span["input_tokens"], span["status"], span["service"]) == (
        "sim-small",
        42,
        "error",
        "json-agent",
    )
    assert json.loads(span["attributes"]["tags"]) == ["a", 2]


@pytest.mark.parametrize(
    "body, needle",
    [
        (os.urandom(300), "not a valid OTLP protobuf"),
        (agent_trace(os.urandom(16)).SerializeToString()[:-7], "not a valid OTLP protobuf"),
    ],
)
def test_malformed_protobuf_is_400_with_message(collector: Running, key: str, body: bytes, needle: str) -> None:
    response = _post(collector, key, body)
    assert response.status_code == 400
    assert needle in _status_message(response)


def test_invalid_utf8_in_a_protobuf_span_rejects_that_span_only(collector: Running, key: str) -> None:
    """Not framing: the span is rejected in partial_success (as JSON does), the others kept (test_ingest_robustness)."""
    trace_id = os.urandom(16)
    spans = [{"span_id": os.urandom(8), "attrs": {"x": "\u00e9"}}, {"span_id": os.urandom(8), "name": "kept"}]
    body = otlp_request(trace_id, spans).SerializeToString().replace("\u00e9".encode(), b"\xff\xfe")
    response = _post(collector, key, body)
    assert response.status_code == 200
    partial = ExportTraceServiceResponse.FromString(response.content).partial_success
    assert partial.rejected_spans == 1 and partial.error_message == "span 0: a string field is not valid UTF-8"


def test_invalid_utf8_json_is_400(collector: Running, key: str) -> None:
    response = _post(collector, key, b'{"resourceSpans": [{"x": "\xff"}]}', {"Content-Type": "application/json"})
    assert response.status_code == 400
    assert "UTF-8" in response.json()["message"]


def test_wrong_id_lengths_partial_success_keeps_valid_spans(collector: Running, key: str) -> None:
    trace_id = os.urandom(16)
    good = os.urandom(8)
    request = otlp_request(trace_id, [{"span_id": good, "name": "good"}, {"span_id": b"\x01\x02\x03", "name": "bad"}])
    bad_trace = request.resource_spans[0].scope_spans[0].spans.add()
    bad_trace.trace_id, bad_trace.span_id = b"\x01" * 10, os.urandom(8)
    response = _post(collector, key, request.SerializeToString())
    assert response.status_code == 200
    partial = ExportTraceServiceResponse.FromString(response.content).partial_success
    assert partial.rejected_spans == 2
    assert "span_id must be 8 bytes" in partial.error_message and "trace_id must be 16 bytes" in partial.error_message
    spans = run_spans(collector.url, key, trace_id.hex(), expect=1)
    assert [s["span_id"] for s in spans] == [good.hex()]


def test_a_span_id_repeated_in_one_request_is_named_in_partial_success(collector: Running, key: str) -> None:
    """The store keeps one span per (trace, span): the repeat is rejected by name, the first kept;
    the same span id in another trace of the request is a span of its own."""
    trace_id, other, span_id = os.urandom(16), os.urandom(16), os.urandom(8)
    request = otlp_request(trace_id, [{"span_id": span_id, "name": "first"}, {"span_id": span_id, "name": "again"}])
    request.resource_spans.append(otlp_request(other, [{"span_id": span_id, "name": "other trace"}]).resource_spans[0])
    response = _post(collector, key, request.SerializeToString())
    assert response.status_code == 200
    partial = ExportTraceServiceResponse.FromString(response.content).partial_success
    assert partial.rejected_spans == 1
    assert f"trace {trace_id.hex()} span {span_id.hex()} appears again" in partial.error_message
    assert [s["name"] for s in run_spans(collector.url, key, trace_id.hex(), expect=1)] == ["first"]
    assert [s["name"] for s in run_spans(collector.url, key, other.hex(), expect=1)] == ["other trace"]


def test_spans_older_than_the_retention_are_rejected_not_silently_dropped(collector: Running, key: str) -> None:
    """The TTL would drop such a span right after the 2xx: it is refused in partial_success instead."""
    trace_id, fresh, stale = os.urandom(16), os.urandom(8), os.urandom(8)
    days_ago = (collector.settings.retention_days + 1) * 86_400 * 10**9
    old = time.time_ns() - days_ago
    request = otlp_request(
        trace_id,
        [{"span_id": fresh, "name": "fresh"}, {"span_id": stale, "name": "stale", "start": old, "end": old + 10**9}],
    )
    response = _post(collector, key, request.SerializeToString())
    assert response.status_code == 200
    partial = ExportTraceServiceResponse.FromString(response.content).partial_success
    assert partial.rejected_spans == 1
    assert "retention" in partial.error_message and "AGENTWATCH_RETENTION_DAYS" in partial.error_message
    doc = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": trace_id.hex(),
                                "spanId": os.urandom(8).hex(),
                                "name": "stale-json",
                                "startTimeUnixNano": str(old),
                                "endTimeUnixNano": str(old + 1),
                            },
                        ]
                    }
                ]
            }
        ]
    }
    answer = _post(collector, key, json.dumps(doc).encode(), {"Content-Type": "application/json"}).json()
    assert answer["partialSuccess"]["rejectedSpans"] == "1" and "retention" in answer["partialSuccess"]["errorMessage"]
    assert [s["span_id"] for s in run_spans(collector.url, key, trace_id.hex(), expect=1)] == [fresh.hex()]


def test_empty_request_is_ok(collector: Running, key: str) -> None:
    assert _post(collector, key, b"").status_code == 200
    assert _post(collector, key, b"{}", {"Content-Type": "application/json"}).json() == {}


def test_limits_413_and_415(collector: Running, key: str) -> None:
    assert _post(collector, key, b"x" * 2_100_000).status_code == 413
    bomb = gzip.compress(b"\x00" * 5_000_000)
    response = _post(collector, key, bomb, {**PROTOBUF, "Content-Encoding": "gzip"})
    assert response.status_code == 413 and "decompressed" in _status_message(response)
    many = otlp_request(os.urandom(16), [{"span_id": os.urandom(8)} for _ in range(1001)])
    response = _post(collector, key, many.SerializeToString())
    assert response.status_code == 413 and "1001 spans" in _status_message(response)
    response = _post(collector, key, b"<xml/>", {"Content-Type": "text/xml"})
    assert response.status_code == 415 and "text/xml" in response.json()["message"]


def test_missing_or_bad_key_is_401_and_nothing_stored(collector: Running, key: str) -> None:
    trace_id = os.urandom(16)
    body = agent_trace(trace_id).SerializeToString()
    assert _post(collector, None, body).status_code == 401
    assert _post(collector, "aw_000000000000_" + "x" * 43, body).status_code == 401
    collector.stored_so_far()
    assert run_spans(collector.url, key, trace_id.hex(), expect=1, timeout=0.5) == []


def test_huge_attribute_is_truncated_with_marker(collector: Running, key: str) -> None:
    trace_id = os.urandom(16)
    body = otlp_request(
        trace_id, [{"span_id": os.urandom(8), "attrs": {"blob": "z" * 5000, "input.value": "q" * 3000}}]
    )
    assert _post(collector, key, body.SerializeToString()).status_code == 200
    [span] = run_spans(collector.url, key, trace_id.hex(), expect=1)
    assert span["attributes"]["blob"] == "z" * 1000 + TRUNCATION_MARKER.format(n=4000)
    assert span["input_text"].startswith("q" * 1000) and span["input_text"].endswith("[truncated 2000 chars]")


def test_duplicate_delivery_keeps_totals(collector: Running, key: str) -> None:
    trace_id = os.urandom(16)
    body = agent_trace(trace_id, llm_calls=4).SerializeToString()
    for _ in range(3):  # each delivery once the one before is stored: in different batches
        assert _post(collector, key, body).status_code == 200
        assert len(run_spans(collector.url, key, trace_id.hex(), expect=5)) == 5
    collector.stored_so_far()
    spans = run_spans(collector.url, key, trace_id.hex(), expect=5)
    detail = local_http.get(
        f"{collector.url}/api/runs/{trace_id.hex()}", headers={"Authorization": f"Bearer {key}"}
    ).json()
    assert len(detail["spans"]) == len(spans) == 5
    assert detail["run"]["input_tokens"] == 400 and detail["run"]["llm_calls"] == 4
    assert detail["run"]["cost_usd"] == pytest.approx(4 * (100 * 0.10 + 20 * 0.40) / 1e6)


def test_project_isolation(collector: Running, key: str) -> None:
    other = collector.key("beta")
    trace_id = os.urandom(16)
    assert _post(collector, other, agent_trace(trace_id).SerializeToString()).status_code == 200
    assert len(run_spans(collector.url, other, trace_id.hex(), expect=4)) == 4
    assert (
        local_http.get(
            f"{collector.url}/api/runs/{trace_id.hex()}", headers={"Authorization": f"Bearer {key}"}
        ).status_code
        == 404
    )


def test_metrics_and_ingest_status(collector: Running, key: str) -> None:
    text = local_http.get(collector.url + "/metrics").text
    assert "agentwatch_collector_received_spans_total" in text and "agentwatch_collector_flush_seconds_bucket" in text
    status = local_http.get(collector.url + "/api/ingest", headers={"Authorization": f"Bearer {key}"}).json()
    assert status["store_available"] is True and status["stored_spans"] > 0 and status["lag_p95_s"] is not None


def test_spool_is_empty_after_flush(collector: Running, key: str) -> None:
    trace_id = os.urandom(16)
    assert _post(collector, key, agent_trace(trace_id).SerializeToString()).status_code == 200
    run_spans(collector.url, key, trace_id.hex(), expect=4)
    spool = Path(collector.settings.data_dir, "spool")
    wait_until(lambda: len(list(spool.glob("*.spool"))) == 1, 10.0, f"spool segments left: {list(spool.iterdir())}")


def test_one_span_that_cannot_be_stored_does_not_sink_its_request(collector: Running, key: str) -> None:
    """A lone surrogate (valid JSON escape, not encodable UTF-8) cannot become an Arrow string:
    that span is rejected at decode, in partial_success, and the rest is stored."""
    trace_id, now = os.urandom(16).hex(), time.time_ns()
    spans = [
        {
            "traceId": trace_id,
            "spanId": os.urandom(8).hex(),
            "name": name,
            "startTimeUnixNano": now - 10**9,
            "endTimeUnixNano": now,
        }
        for name in ("fine-1", "bad-\ud800", "fine-2")
    ]
    body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})
    response = _post(collector, key, body.encode(), {"Content-Type": "application/json"})
    assert response.status_code == 200
    partial = response.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "1" and "name is not valid Unicode" in partial["errorMessage"]
    stored = run_spans(collector.url, key, trace_id, expect=2)
    assert sorted(s["name"] for s in stored) == ["fine-1", "fine-2"]
    text = local_http.get(collector.url + "/metrics").text
    assert 'agentwatch_collector_rejected_spans_total{reason="store_rejected"}' not in text


def test_agentwatch_sdk_run_lands_normalised(collector: Running, key: str) -> None:
    summary = sdk_agent_run(collector.url, key, "sdk-agent")
    spans = run_spans(collector.url, key, summary["trace_id"], expect=4)
    by_kind = {s["kind"]: s for s in spans}
    assert set(by_kind) == {"run", "llm", "tool", "other"}
    assert by_kind["other"]["name"] == "agentwatch.run.start"  # the SDK's run-start marker
    llm, tool = by_kind["llm"], by_kind["tool"]
    assert (llm["model"], llm["input_tokens"], llm["ttft_s"]) == ("sim-large", 2000, 0.25)
    assert llm["cost_usd"] == pytest.approx((2000 * 2.5 + 100 * 10.0) / 1e6)
    assert "ann@example.com" not in llm["input_text"]
    assert (tool["tool_name"], tool["is_timeout"], tool["status"]) == ("fetch", True, "error")
    assert summary["tool_failures"] == 1 and summary["agent"] == "research"
