"""Decoding of export requests: protobuf and the OTLP JSON mapping, bad bodies, limits, gzip."""

from __future__ import annotations

import base64
import gzip
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentwatch_platform.collector.ingest.normalize import Normalizer
from agentwatch_platform.collector.ingest.otlp.decode import JSON, PROTOBUF, convert, response_body
from agentwatch_platform.collector.ingest.otlp.errors import BadRequest, IngestError, PayloadTooLarge
from agentwatch_platform.collector.ingest.pipeline import gunzip
from agentwatch_platform.collector.storage.columns import SPANS_SCHEMA, table_rows
from tests.collector.ingest_helpers import agent_trace, otlp_request
from tests.support.examples import examples

NZ = Normalizer()


def _json_span(**fields: object) -> bytes:
    span = {
        "traceId": "ab" * 16,
        "spanId": "cd" * 8,
        "name": "s",
        "startTimeUnixNano": "1",
        "endTimeUnixNano": "2",
        **fields,
    }
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()


def test_protobuf_round_trip() -> None:
    trace_id = os.urandom(16)
    out = convert(agent_trace(trace_id, llm_calls=2).SerializeToString(), PROTOBUF, "p", NZ, max_spans=100)
    rows = table_rows(out.table)
    assert out.rejected == 0 and out.spans == 3 and out.table.schema.equals(SPANS_SCHEMA)
    assert {r.trace_id for r in rows} == {trace_id.hex()}
    assert sorted(r.kind for r in rows) == ["llm", "llm", "run"]
    assert rows[0].service_name == "test-agent"


def test_json_mapping_ids_ints_enums_and_snake_case() -> None:
    body = _json_span(
        parentSpanId="ef" * 8,
        status={"code": 2},
        attributes=[
            {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "9007199254740993"}},
            {"key": "n", "value": {"intValue": "9007199254740993"}},
            {"key": "b", "value": {"bytesValue": base64.b64encode(b"\x01").decode()}},
            {"key": "d", "value": {"doubleValue": 1.5}},
            {"key": "kv", "value": {"kvlistValue": {"values": [{"key": "x", "value": {"boolValue": True}}]}}},
        ],
    )
    out = convert(body, JSON, "p", NZ, max_spans=10)
    [row] = table_rows(out.table)
    assert (row.trace_id, row.parent_span_id, row.status_code) == ("ab" * 16, "ef" * 8, "error")
    assert (
        row.input_tokens == 0 and "gen_ai.usage.input_tokens" in out.error_message
    )  # beyond collector.ingest.bounds: dropped, warned
    assert row.attributes == {"n": "9007199254740993", "b": "01", "d": "1.5", "kv": '{"x":true}'}
    snake = json.dumps(
        {
            "resource_spans": [
                {"scope_spans": [{"spans": [{"trace_id": "ab" * 16, "span_id": "cd" * 8, "start_time_unix_nano": 5}]}]}
            ]
        }
    )
    assert table_rows(convert(snake.encode(), JSON, "p", NZ, max_spans=10).table)[0].start_time_ns == 5


@pytest.mark.parametrize(
    "fields, why",
    [
        ({"traceId": "ab" * 15}, "traceId must be 32 hex characters"),
        ({"spanId": "zz" * 8}, "spanId is not hex"),
        ({"spanId": "00" * 8}, "spanId must not be all zero"),
        ({"parentSpanId": "ab"}, "parentSpanId must be 16 hex"),
        ({"startTimeUnixNano": "soon"}, "invalid literal"),
        ({"attributes": [{"key": "k", "value": {"weirdValue": 1}}]}, "unknown AnyValue"),
        ({"name": "lone \ud800"}, "name is not valid Unicode"),
        ({"attributes": [{"key": "k\udfff", "value": {"stringValue": "v"}}]}, "attributes is not valid Unicode"),
        (
            {"attributes": [{"key": "k", "value": {"intValue": float("inf")}}]},
            "cannot convert float infinity",
        ),  # JSON 1e400
    ],
)
def test_bad_json_span_is_rejected_alone(fields: dict[str, object], why: str) -> None:
    doc = json.loads(_json_span(**fields))
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"].append({"traceId": "12" * 16, "spanId": "34" * 8})
    out = convert(json.dumps(doc).encode(), JSON, "p", NZ, max_spans=10)
    assert out.rejected == 1 and out.spans == 1 and why in out.error_message
    assert json.loads(response_body(out, JSON))["partialSuccess"]["rejectedSpans"] == "1"


def test_json_number_too_large_for_a_float_is_not_a_timing() -> None:
    body = _json_span(attributes=[{"key": "gen_ai.latency.time_to_first_token", "value": {"intValue": str(10**400)}}])
    out = convert(body, JSON, "p", NZ, max_spans=10)
    [row] = table_rows(out.table)
    assert out.rejected == 0 and row.ttft_s is None


def test_request_with_every_span_rejected_gives_an_empty_table() -> None:
    out = convert(_json_span(traceId="00" * 16), JSON, "p", NZ, max_spans=10)
    assert (out.rejected, out.spans) == (1, 0) and out.table.schema.equals(SPANS_SCHEMA)
    assert json.loads(response_body(out, JSON))["partialSuccess"]["rejectedSpans"] == "1"


@pytest.mark.parametrize(
    "body", [b"[]", b'{"resourceSpans": 5}', b'{"resourceSpans": [{"scopeSpans": [3]}]}', b"{not json", b"[" * 100_000]
)
def test_bad_json_structure_is_bad_request(body: bytes) -> None:
    with pytest.raises(BadRequest):
        convert(body, JSON, "p", NZ, max_spans=10)


def test_span_limit() -> None:
    body = otlp_request(os.urandom(16), [{"span_id": os.urandom(8)} for _ in range(11)]).SerializeToString()
    with pytest.raises(PayloadTooLarge, match="11 spans"):
        convert(body, PROTOBUF, "p", NZ, max_spans=10)


def test_gzip_limits() -> None:
    assert gunzip(gzip.compress(b"abc"), 10) == b"abc"
    with pytest.raises(PayloadTooLarge):
        gunzip(gzip.compress(b"a" * 11), 10)
    with pytest.raises(BadRequest, match="gzip"):
        gunzip(b"not gzip", 10)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.binary(max_size=2000),
    cut=st.integers(min_value=0, max_value=400),
    flip=st.integers(min_value=0, max_value=399),
)
def test_fuzzed_protobuf_never_raises_anything_but_ingest_errors(data: bytes, cut: int, flip: int) -> None:
    valid = bytearray(agent_trace(b"\x11" * 16).SerializeToString())
    valid[flip % len(valid)] ^= 0xFF
    for body in (data, bytes(valid[:cut]), bytes(valid)):
        try:
            out = convert(body, PROTOBUF, "p", NZ, max_spans=1000)
        except IngestError as exc:
            assert exc.status in (400, 413) and exc.message
        else:
            assert out.table.schema.equals(SPANS_SCHEMA) and out.rejected + out.spans >= 0
