"""Hypothesis strategies for OTLP export requests, valid and broken, and their two encodings.

A request is generated as plain data (``SpanSpec``s) so that the test knows, independently of
the collector, which spans are valid (right id lengths, timestamps the store can keep,
``collector.ingest.bounds``) and must be stored, and which must be reported in ``partial_success``.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Any

from agentwatch import semconv as sc
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from agentwatch_platform.collector.ingest.bounds import MAX_TIME_NS, latest_start_ns
from agentwatch_platform.collector.settings import Settings

MAX_NS = MAX_TIME_NS  # the latest time the store keeps (2106-02-07T06:28:15Z, where DateTime ends)
RETENTION_DAYS = Settings.__dataclass_fields__["retention_days"].default  # the collector's default
RETENTION_NS = RETENTION_DAYS * 86_400 * 10**9
SEMCONV_KEYS = sorted({v for k, v in vars(sc).items() if k.isupper() and isinstance(v, str) and "." in v})
_TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=40)


@dataclass
class SpanSpec:
    trace_id: bytes
    span_id: bytes
    parent: bytes
    name: str
    start: int
    end: int
    status: int
    attrs: list[tuple[str, Any]] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        """What OTLP and the store allow: the collector must store it, or else reject it."""
        ids = len(self.trace_id) == 16 and any(self.trace_id) and len(self.span_id) == 8 and any(self.span_id)
        parent = len(self.parent) in (0, 8)
        retained = self.start >= time.time_ns() - RETENTION_NS  # older: rejected, the TTL would drop it
        return (
            ids
            and parent
            and retained
            and 0 <= self.start <= latest_start_ns(RETENTION_DAYS)
            and 0 <= self.end <= MAX_NS
        )

    @property
    def recent(self) -> bool:
        """Inside the retention window, so it must be queryable (not expired by the TTL)."""
        now = time.time_ns()
        return now - 86_400 * 10**9 < self.start <= now + 3600 * 10**9


def _recent_ns() -> st.SearchStrategy[int]:
    return st.integers(0, 3600 * 10**9).map(lambda back: time.time_ns() - back)


def _bytes_of(lengths: list[int]) -> st.SearchStrategy[bytes]:
    return st.sampled_from(lengths).map(lambda n: os.urandom(n))


def attr_values() -> st.SearchStrategy[Any]:
    scalars = st.one_of(
        _TEXT,
        st.integers(-(2**63), 2**63 - 1),
        st.floats(allow_nan=True, allow_infinity=True),
        st.booleans(),
        st.binary(max_size=16),
    )
    return st.one_of(scalars, st.lists(scalars, max_size=4), st.dictionaries(_TEXT, scalars, max_size=3))


def spans(*, weird_times: bool = True) -> st.SearchStrategy[SpanSpec]:
    times = st.one_of(_recent_ns(), st.integers(0, 2**64 - 1)) if weird_times else _recent_ns()
    return st.builds(
        SpanSpec,
        trace_id=_bytes_of([16] * 30 + [0, 8, 15, 17, 32]),
        span_id=_bytes_of([8] * 30 + [0, 4, 9, 16]),
        parent=_bytes_of([0] * 10 + [8] * 10 + [3]),
        name=_TEXT,
        start=times,
        end=times,
        status=st.integers(0, 5),
        attrs=st.lists(st.tuples(st.one_of(st.sampled_from(SEMCONV_KEYS), _TEXT), attr_values()), max_size=12),
    )


# --- protobuf ------------------------------------------------------------------------------------


def _any(value: Any) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, bytes):
        return AnyValue(bytes_value=value)
    if isinstance(value, list):
        out = AnyValue()
        out.array_value.values.extend(_any(v) for v in value)
        return out
    if isinstance(value, dict):
        out = AnyValue()
        out.kvlist_value.values.extend(KeyValue(key=k, value=_any(v)) for k, v in value.items())
        return out
    return AnyValue(string_value=value)


def to_protobuf(specs: list[SpanSpec], service: str = "fuzz") -> bytes:
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    rs.resource.attributes.append(KeyValue(key="service.name", value=AnyValue(string_value=service)))
    scope = rs.scope_spans.add()
    for spec in specs:
        span = scope.spans.add()
        span.trace_id, span.span_id, span.parent_span_id = spec.trace_id, spec.span_id, spec.parent
        span.name = spec.name
        span.start_time_unix_nano, span.end_time_unix_nano = spec.start, spec.end
        span.status.code = spec.status % 3
        span.attributes.extend(KeyValue(key=k, value=_any(v)) for k, v in spec.attrs)
    return request.SerializeToString()


# --- OTLP JSON -----------------------------------------------------------------------------------


def _any_json(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, bytes):
        import base64

        return {"bytesValue": base64.b64encode(value).decode()}
    if isinstance(value, list):
        return {"arrayValue": {"values": [_any_json(v) for v in value]}}
    if isinstance(value, dict):
        return {"kvlistValue": {"values": [{"key": k, "value": _any_json(v)} for k, v in value.items()]}}
    return {"stringValue": value}


def json_doc(specs: list[SpanSpec], service: str = "fuzz") -> dict[str, Any]:
    spans_json = [
        {
            "traceId": s.trace_id.hex(),
            "spanId": s.span_id.hex(),
            "parentSpanId": s.parent.hex(),
            "name": s.name,
            "startTimeUnixNano": str(s.start),
            "endTimeUnixNano": str(s.end),
            "status": {"code": s.status % 3},
            "attributes": [{"key": k, "value": _any_json(v)} for k, v in s.attrs],
        }
        for s in specs
    ]
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"scope": {"name": "fuzz"}, "spans": spans_json}]}]}


def to_json(specs: list[SpanSpec], service: str = "fuzz") -> bytes:
    return json.dumps(json_doc(specs, service), allow_nan=True).encode()


def mutate(body: bytes, data: st.DataObject) -> bytes:
    """Truncate, flip, insert or splice bytes of a valid body."""
    if not body:
        return data.draw(st.binary(max_size=64))
    op = data.draw(st.sampled_from(["truncate", "flip", "insert", "splice"]))
    at = data.draw(st.integers(0, len(body) - 1))
    if op == "truncate":
        return body[:at]
    if op == "flip":
        return body[:at] + bytes([body[at] ^ data.draw(st.integers(1, 255))]) + body[at + 1 :]
    if op == "insert":
        return body[:at] + data.draw(st.binary(min_size=1, max_size=16)) + body[at:]
    return body[:at] + body[data.draw(st.integers(0, len(body) - 1)) :]
