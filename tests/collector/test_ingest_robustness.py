"""Transport robustness: multi-member gzip read whole, one unreadable protobuf span rejected alone
(HTTP and gRPC), framing that cannot be read still a 400; ``/health`` and ``/ready``."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import time
from pathlib import Path

import grpc
import httpx
import pytest
from fastapi.testclient import TestClient
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from agentwatch_platform.collector.api import health
from agentwatch_platform.collector.app import create_app
from agentwatch_platform.collector.ingest.normalize import Normalizer
from agentwatch_platform.collector.ingest.otlp import native
from agentwatch_platform.collector.ingest.otlp.decode import PROTOBUF, convert
from agentwatch_platform.collector.ingest.otlp.errors import BadRequest, PayloadTooLarge
from agentwatch_platform.collector.ingest.pipeline import gunzip
from tests.collector.ingest_helpers import Running, kv, otlp_request, serve, settings_for
from tests.support import local_http
from tests.support.poll import wait_until
from tests.support.ports import free_port

METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
NATIVE = [True, False] if native.AVAILABLE else [False]


# --- gzip ------------------------------------------------------------------------------------------


def test_gunzip_reads_every_member() -> None:
    assert gunzip(gzip.compress(b"abc") + gzip.compress(b"") + gzip.compress(b"def"), 100) == b"abcdef"
    assert gunzip(b"", 100) == b""


def test_gunzip_bounds_all_members_together() -> None:
    with pytest.raises(PayloadTooLarge, match="limit of 10 bytes"):
        gunzip(gzip.compress(b"x" * 6) + gzip.compress(b"y" * 6), 10)
    assert gunzip(gzip.compress(b"x" * 5) + gzip.compress(b"y" * 5), 10) == b"x" * 5 + b"y" * 5


@pytest.mark.parametrize(
    "tail", [b"garbage", gzip.compress(b"cut short")[:-6], b"\x1f"], ids=["not gzip", "truncated member", "one byte"]
)
def test_gunzip_refuses_what_follows_a_member_unless_it_is_one(tail: bytes) -> None:
    with pytest.raises(BadRequest, match="not valid gzip"):
        gunzip(gzip.compress(b"abc") + tail, 100)


def test_gunzip_refuses_a_body_of_countless_members() -> None:
    with pytest.raises(BadRequest, match="gzip members"):
        gunzip(gzip.compress(b"") * 2000, 100)


# --- one unreadable protobuf span --------------------------------------------------------------------


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field, by hand (a message upb would refuse to build)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _span(trace_id: bytes, name: str = "ok", *, extra: bytes = b"") -> bytes:
    now = time.time_ns()
    span = Span(
        trace_id=trace_id,
        span_id=os.urandom(8),
        name=name,
        start_time_unix_nano=now - 2_000_000_000,
        end_time_unix_nano=now - 10**9,
    )
    span.attributes.append(kv("gen_ai.request.model", "sim-small"))
    return span.SerializeToString() + extra


def _bad_utf8_span(trace_id: bytes) -> bytes:
    return _span(trace_id, "BADNAME!").replace(b"BADNAME!", b"BAD\xff\xfeME!")


def _deep_span(trace_id: bytes, levels: int = 150) -> bytes:
    value = _field(1, b"leaf")  # AnyValue{string_value}
    for _ in range(levels):  # AnyValue{kvlist_value{values: [KeyValue{key, value}]}}
        value = _field(6, _field(1, _field(1, b"k") + _field(2, value)))
    return _span(trace_id, extra=_field(9, _field(1, b"deep") + _field(2, value)))


def _request(*resources: tuple[bytes, list[bytes]]) -> bytes:
    """ExportTraceServiceRequest from (resource bytes, span bytes) pairs, one scope each."""
    body = b""
    for resource, spans in resources:
        scope = _field(1, _field(1, b"scope")) + b"".join(_field(2, s) for s in spans)
        body += _field(1, _field(1, resource) + _field(2, scope))
    return body


def _resource(service: str) -> bytes:
    return _field(1, kv("service.name", service).SerializeToString())


def _mixed(trace_id: bytes) -> bytes:
    return _request(
        (_resource("svc"), [_span(trace_id), _bad_utf8_span(trace_id), _deep_span(trace_id), _span(trace_id)])
    )


@pytest.mark.parametrize("use_native", NATIVE)
def test_bad_protobuf_spans_are_rejected_alone_with_index_and_reason(use_native: bool) -> None:
    converted = convert(_mixed(os.urandom(16)), PROTOBUF, "p", Normalizer(), max_spans=100, native=use_native)
    assert converted.spans == 2 and converted.rejected == 2
    assert converted.messages == [
        "span 1: a string field is not valid UTF-8",
        "span 2: attribute values are nested too deeply (more than 100 levels)",
    ]
    assert converted.table.column("name").to_pylist() == ["ok", "ok"]


@pytest.mark.parametrize("use_native", NATIVE)
def test_unreadable_resource_rejects_its_spans_only(use_native: bool) -> None:
    trace_id = os.urandom(16)
    bad_resource = _field(1, KeyValue(key="service.name").SerializeToString() + _field(2, _field(1, b"\xc3\x28")))
    body = _request((bad_resource, [_span(trace_id), _span(trace_id)]), (_resource("good"), [_span(trace_id)]))
    converted = convert(body, PROTOBUF, "p", Normalizer(), max_spans=100, native=use_native)
    assert (converted.spans, converted.rejected) == (1, 2)
    assert converted.messages[0] == "span 0: its resource cannot be read: a string field is not valid UTF-8"
    assert converted.table.column("service_name").to_pylist() == ["good"]


@pytest.mark.parametrize(
    "body",
    [_mixed(bytes(range(16)))[:-3], _field(1, b"\x12\x50abc"), b"\x0b\x01", b"\x02\x00"],
    ids=["truncated", "length past the end", "group wire type", "field number 0"],
)
def test_framing_that_cannot_be_read_is_still_a_bad_request(body: bytes) -> None:
    with pytest.raises(BadRequest, match="not a valid OTLP protobuf"):
        convert(body, PROTOBUF, "p", Normalizer(), max_spans=100, native=False)


def test_too_many_spans_counts_the_unreadable_ones() -> None:
    with pytest.raises(PayloadTooLarge):
        convert(_mixed(os.urandom(16)), PROTOBUF, "p", Normalizer(), max_spans=3)


# --- end to end: HTTP and gRPC -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Running:
    settings = settings_for(tmp_path_factory.mktemp("robust") / "data", grpc_port=free_port(), max_body_bytes=1_000_000)
    with serve(settings) as running:
        yield running


@pytest.fixture(scope="module")
def key(collector: Running) -> str:
    return collector.key("robust")


def _stored(collector: Running, trace_id: bytes, *, expect: int, timeout: float = 20.0) -> int:
    """Spans of the trace in the store once ``expect`` are there (or the timeout passed) and all
    that was acknowledged before is stored too: a span past the expected ones would be counted."""
    sql = "SELECT count() AS n FROM spans WHERE project = 'robust' AND trace_id = {t:String}"
    with contextlib.suppress(AssertionError):  # the caller's assertion says how many there were
        wait_until(lambda: collector.app.state.store.query(sql, {"t": trace_id.hex()})[0]["n"] >= expect, timeout, "")
    collector.stored_so_far()
    return int(collector.app.state.store.query(sql, {"t": trace_id.hex()})[0]["n"])


def _post(collector: Running, key: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
    return local_http.post(
        collector.url + "/v1/traces", content=body, headers={**headers, "Authorization": f"Bearer {key}"}, timeout=30
    )


def test_multi_member_gzip_protobuf_body_is_stored_whole(collector: Running, key: str) -> None:
    trace_id = os.urandom(16)
    body = otlp_request(trace_id, [{"span_id": os.urandom(8), "name": f"s{i}"} for i in range(6)]).SerializeToString()
    cut = len(body) // 2  # any cut: the members are one stream once inflated
    gz = gzip.compress(body[:cut]) + gzip.compress(body[cut:])
    response = _post(collector, key, gz, {"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"})
    assert response.status_code == 200, response.content
    assert _stored(collector, trace_id, expect=6) == 6


def test_multi_member_gzip_json_body_is_stored_whole(collector: Running, key: str) -> None:
    trace_id = os.urandom(16)
    now = time.time_ns()
    spans = [
        {
            "traceId": trace_id.hex(),
            "spanId": os.urandom(8).hex(),
            "name": f"s{i}",
            "startTimeUnixNano": str(now - 2 * 10**9),
            "endTimeUnixNano": str(now - 10**9),
        }
        for i in range(4)
    ]
    doc = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}).encode()
    gz = b"".join(gzip.compress(doc[i : i + 40]) for i in range(0, len(doc), 40))
    response = _post(collector, key, gz, {"Content-Type": "application/json", "Content-Encoding": "gzip"})
    assert response.status_code == 200, response.text
    assert _stored(collector, trace_id, expect=4) == 4


def test_gzip_with_trailing_garbage_is_400_not_a_silent_loss(collector: Running, key: str) -> None:
    body = otlp_request(os.urandom(16), [{"span_id": os.urandom(8)}]).SerializeToString()
    response = _post(
        collector,
        key,
        gzip.compress(body) + b"trailing",
        {"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"},
    )
    assert response.status_code == 400


def test_http_protobuf_keeps_the_good_spans_of_a_request_with_bad_ones(collector: Running, key: str) -> None:
    trace_id = os.urandom(16)
    response = _post(collector, key, _mixed(trace_id), {"Content-Type": "application/x-protobuf"})
    assert response.status_code == 200
    partial = ExportTraceServiceResponse.FromString(response.content).partial_success
    assert partial.rejected_spans == 2 and "span 1: a string field is not valid UTF-8" in partial.error_message
    assert _stored(collector, trace_id, expect=2) == 2


def test_grpc_keeps_the_good_spans_of_a_request_with_bad_ones(collector: Running, key: str) -> None:
    """The service takes raw bytes (no gRPC deserializer), so the same split applies."""
    trace_id = os.urandom(16)
    with grpc.insecure_channel(collector.grpc) as channel:
        raw = channel.unary_unary(METHOD)(_mixed(trace_id), metadata=[("authorization", f"Bearer {key}")], timeout=30)
    partial = ExportTraceServiceResponse.FromString(raw).partial_success
    assert partial.rejected_spans == 2 and "nested too deeply" in partial.error_message
    assert _stored(collector, trace_id, expect=2) == 2


# --- /health and /ready --------------------------------------------------------------------------------


def test_health_and_ready_answer_without_a_key(collector: Running) -> None:
    assert local_http.get(collector.url + "/health").json() == {"status": "ok"}
    response = local_http.get(collector.url + "/ready")
    assert (response.status_code, response.json()) == (200, {"status": "ready"})


def test_ready_trusts_the_writer_when_the_store_is_slow_to_answer(
    collector: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A busy embedded store (one statement at a time) is not an unreachable one; a failing one is."""
    monkeypatch.setattr(health, "READY_TIMEOUT_S", 0.1)

    def slow(*args: object, **kwargs: object) -> list[dict[str, int]]:
        time.sleep(1.0)  # a store slow to answer: the sleep is what is tested
        return [{"n": 1}]

    monkeypatch.setattr(collector.app.state.store, "query", slow)
    assert local_http.get(collector.url + "/ready", timeout=30).status_code == 200
    monkeypatch.setattr(collector.app.state.ingestor.writer, "store_available", False)
    response = local_http.get(collector.url + "/ready", timeout=30)
    assert (response.status_code, response.json()["reason"]) == (503, "store not answering")


def test_ready_is_503_while_the_writer_is_not_running(tmp_path: Path) -> None:
    app = create_app(settings_for(tmp_path / "data", require_auth=True))
    client = TestClient(app)  # no lifespan: the writer never started
    assert client.get("/health").status_code == 200
    response = client.get("/ready")
    assert response.status_code == 503 and response.headers["Retry-After"]
    assert response.json() == {"status": "not ready", "reason": "writer not running (collector starting or stopping)"}


def test_ready_is_503_without_the_store_and_names_no_address(tmp_path: Path) -> None:
    secret_url = f"http://user:hunter2@127.0.0.1:{free_port()}/db"  # nothing listens there
    with serve(settings_for(tmp_path / "data", clickhouse_url=secret_url)) as running:
        assert local_http.get(running.url + "/health").status_code == 200
        response = local_http.get(running.url + "/ready", timeout=30)
    assert response.status_code == 503
    assert response.json() == {"status": "not ready", "reason": "store unreachable"}
    assert "hunter2" not in response.text and "127.0.0.1" not in response.text
