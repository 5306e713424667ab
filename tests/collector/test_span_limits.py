"""Per-span bounds (``collector.ingest.normalize.Normalizer``): attributes per span and per resource,
events per span, attributes per event, attribute-name length. Beyond a bound the first ones
are kept, the span is kept, and ``partial_success`` names the bound's setting; every decode
path (protobuf and JSON, native and Python) stores the same thing."""

from __future__ import annotations

import base64
import json
import os
from typing import Any

import pytest
from agentwatch import semconv as sc
from google.protobuf.json_format import MessageToDict
from hypothesis import HealthCheck, given, settings
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from agentwatch_platform.collector.ingest.normalize import Normalizer
from agentwatch_platform.collector.ingest.otlp import native
from agentwatch_platform.collector.ingest.otlp.decode import JSON, PROTOBUF, Converted, convert
from agentwatch_platform.collector.ingest.otlp.errors import PayloadTooLarge
from tests.collector.ingest_helpers import kv, otlp_request
from tests.collector.test_native_decode import _assert_same, _both, requests
from tests.support.examples import examples

PATHS = [
    pytest.param(fmt, use_native, id=f"{fmt}-{'native' if use_native else 'python'}")
    for fmt in (PROTOBUF, JSON)
    for use_native in (False, True)
]
SMALL = Normalizer(max_key_length=16, max_attributes=5, max_events=3, max_event_attributes=4)
TIGHT = Normalizer(max_key_length=24, max_attributes=3, max_events=1, max_event_attributes=1, max_attribute_length=24)


def _json(request: ExportTraceServiceRequest) -> bytes:
    """The request in the OTLP JSON mapping (hex ids, as exporters send it)."""
    doc = MessageToDict(request)
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for name in ("traceId", "spanId", "parentSpanId"):
                    if name in span:
                        span[name] = base64.b64decode(span[name]).hex()
    return json.dumps(doc).encode()


def _convert(request: ExportTraceServiceRequest, fmt: str, use_native: bool, nz: Normalizer = SMALL) -> Converted:
    body = request.SerializeToString() if fmt == PROTOBUF else _json(request)
    return convert(body, fmt, "p", nz, max_spans=100, native=use_native)


def _span(attrs: dict[str, Any], events: list[tuple[str, dict[str, Any]]] = ()) -> ExportTraceServiceRequest:  # type: ignore[assignment]
    request = otlp_request(os.urandom(16), [{"span_id": os.urandom(8), "name": "chat", "attrs": attrs}])
    span = request.resource_spans[0].scope_spans[0].spans[0]
    for i, (name, event_attrs) in enumerate(events):
        event = span.events.add()
        event.name, event.time_unix_nano = name, span.start_time_unix_nano + i
        event.attributes.extend(kv(k, v) for k, v in event_attrs.items())
    return request


def _row(out: Converted) -> dict[str, Any]:
    (row,) = out.table.to_pylist()
    return row


@pytest.mark.parametrize("fmt, use_native", PATHS)
def test_unmapped_attributes_beyond_the_bound_are_dropped_and_mapped_ones_kept(fmt: str, use_native: bool) -> None:
    attrs = {f"extra.{i}": str(i) for i in range(9)} | {
        sc.GEN_AI_REQUEST_MODEL: "sim-small",
        sc.GEN_AI_USAGE_INPUT_TOKENS: 120,
    }
    out = _convert(_span(attrs), fmt, use_native)
    row = _row(out)
    assert sorted(k for k, _ in row["attributes"]) == [f"extra.{i}" for i in range(5)]
    assert row["model"] == "sim-small" and row["input_tokens"] == 120  # mapped after the cut: still columns
    assert (
        out.rejected == 0
        and "4 of 11 attributes dropped" in out.error_message
        and "AGENTWATCH_MAX_ATTRIBUTES_PER_SPAN" in out.error_message
    )


@pytest.mark.parametrize("fmt, use_native", PATHS)
def test_events_beyond_the_bound_are_dropped_and_their_attributes_bounded(fmt: str, use_native: bool) -> None:
    events = [("exception", {"exception.type": "ValueError", **{f"a{j}": j for j in range(6)}})] + [
        (f"e{i}", {"k" * 40: "v"}) for i in range(4)
    ]
    out = _convert(_span({"x": "y"}, events), fmt, use_native)
    stored = json.loads(_row(out)["events"])
    assert [e["name"] for e in stored] == ["exception", "e0", "e1"]
    assert list(stored[0]["attributes"]) == ["exception.type", "a0", "a1", "a2"]
    assert list(stored[1]["attributes"]) == ["k" * 16 + "…[truncated 24 chars]"]
    assert _row(out)["error_type"] == "ValueError"
    assert out.rejected == 0 and out.warnings >= 3
    for setting in (
        "AGENTWATCH_MAX_EVENTS_PER_SPAN",
        "AGENTWATCH_MAX_ATTRIBUTES_PER_EVENT",
        "AGENTWATCH_MAX_ATTRIBUTE_KEY_LENGTH",
    ):
        assert setting in out.error_message


@pytest.mark.parametrize("fmt, use_native", PATHS)
def test_a_resource_beyond_the_bound_is_cut_with_a_warning(fmt: str, use_native: bool) -> None:
    request = _span({"x": "y"})
    request.resource_spans[0].resource.attributes.extend(
        [kv(f"host.tag.{i}", "t") for i in range(7)] + [kv("r" * 30, "long name")]
    )
    out = _convert(request, fmt, use_native)
    resource = dict(_row(out)["resource"])
    assert list(resource) == ["service.name"] + [f"host.tag.{i}" for i in range(4)]
    assert _row(out)["service_name"] == "test-agent"
    assert out.rejected == 0 and out.error_message.startswith("resource: resource has 9 attributes; the first 5 kept")


@pytest.mark.parametrize("fmt, use_native", PATHS)
def test_spans_within_the_bounds_carry_no_warning(fmt: str, use_native: bool) -> None:
    events = [(f"e{i}", {f"a{j}": j for j in range(4)}) for i in range(3)]
    out = _convert(
        _span({f"extra.{i}": "v" for i in range(5)} | {sc.GEN_AI_REQUEST_MODEL: "m"}, events), fmt, use_native
    )
    assert out.messages == [] and len(json.loads(_row(out)["events"])) == 3


@pytest.mark.skipif(not native.AVAILABLE, reason="native decoder not built")
def test_the_native_decoder_declines_exactly_the_spans_beyond_a_bound() -> None:
    """Declined spans take the Python path, which cuts them; the others stay native (the fast path)."""
    decoder = native.NativeDecoder(SMALL)
    cases = {
        "within": _span({"a": "b"}, [("e", {"k": 1})]),
        "attributes": _span({f"x{i}": i for i in range(6)}),
        "events": _span({}, [("e", {})] * 4),
        "event attributes": _span({}, [("e", {f"k{i}": i for i in range(5)})]),
        "event key": _span({}, [("e", {"k" * 17: 1})]),
        "key": _span({"k" * 17: 1}),
    }
    declined = {name: decoder.decode(request.SerializeToString(), "p").declined for name, request in cases.items()}
    assert declined == {
        "within": [],
        "attributes": [0],
        "events": [0],
        "event attributes": [0],
        "event key": [0],
        "key": [0],
    }


@settings(
    max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(payload=requests())
def test_generated_requests_under_tight_bounds_decode_the_same_natively(payload: bytes) -> None:
    """The parity property of test_native_decode with bounds most generated spans exceed."""
    _assert_same(*_both(payload, TIGHT))


def _many_spans_one_big_resource(spans: int, *, links_every: int = 0) -> ExportTraceServiceRequest:
    request = otlp_request(os.urandom(16), [{"span_id": os.urandom(8), "name": f"s{i}"} for i in range(spans)])
    request.resource_spans[0].resource.attributes.append(kv("process.command_line", "x" * 10_000))
    if links_every:
        for span in request.resource_spans[0].scope_spans[0].spans[::links_every]:
            span.links.add(trace_id=span.trace_id, span_id=span.span_id)  # declined by the native decoder
    return request


@pytest.mark.parametrize("fmt, use_native", PATHS)
def test_a_request_storing_too_much_resource_per_span_is_refused(fmt: str, use_native: bool) -> None:
    """A 10 kB resource over 50 spans stores 500 kB: refused under a 100 kB bound, kept under 1 MB."""
    body = _many_spans_one_big_resource(50)
    payload = body.SerializeToString() if fmt == PROTOBUF else _json(body)
    with pytest.raises(PayloadTooLarge, match="AGENTWATCH_MAX_RESOURCE_BYTES_PER_REQUEST"):
        convert(payload, fmt, "p", Normalizer(), max_spans=100, native=use_native, max_resource_bytes=100_000)
    assert (
        convert(payload, fmt, "p", Normalizer(), max_spans=100, native=use_native, max_resource_bytes=1_000_000).spans
        == 50
    )


def test_the_resource_bound_counts_native_and_declined_spans_together() -> None:
    """Half the spans decoded natively (under the bound alone), half declined to the Python path."""
    payload = _many_spans_one_big_resource(20, links_every=2).SerializeToString()
    with pytest.raises(PayloadTooLarge, match="AGENTWATCH_MAX_RESOURCE_BYTES_PER_REQUEST"):
        convert(payload, PROTOBUF, "p", Normalizer(), max_spans=100, max_resource_bytes=150_000)
    assert convert(payload, PROTOBUF, "p", Normalizer(), max_spans=100, max_resource_bytes=250_000).spans == 20


@pytest.mark.skipif(not native.AVAILABLE, reason="native decoder not built")
def test_the_native_decoder_stops_at_the_resource_bound() -> None:
    """It hands the request to the Python path as soon as the bound is passed, before building the rest."""
    decoder = native.NativeDecoder(Normalizer())
    payload = _many_spans_one_big_resource(50).SerializeToString()
    with pytest.raises(native.NativeFallback):
        decoder.decode(payload, "p", max_resource_bytes=100_000)
    assert decoder.decode(payload, "p", max_resource_bytes=1_000_000).resource_bytes == 50 * (
        len("process.command_line") + 10_000 + len("service.name") + len("test-agent")
    )
