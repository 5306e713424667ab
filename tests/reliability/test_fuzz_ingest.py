"""Property-based fuzzing of ``POST /v1/traces`` through the real app (in-process, chDB).

Whatever arrives: never a 5xx, never a crash, memory bounded; every valid span of an
acknowledged request is stored exactly once and every invalid one is counted in
``partial_success``; nothing acknowledged is dropped later by the store.
"""

from __future__ import annotations

import gzip
import json
import os
import time
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from tests.reliability import otlp_gen as gen
from tests.reliability.helpers import JSON, PROTOBUF, InProcess, in_process, rss_bytes
from tests.support.examples import examples

PROJECT = "fuzz"
MAX_BODY = 1_000_000
FUZZ = settings(max_examples=examples(80), deadline=None, suppress_health_check=list(HealthCheck), database=None)


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    with in_process(
        tmp_path_factory.mktemp("fuzz") / "data",
        max_body_bytes=MAX_BODY,
        max_spans_per_request=500,
        max_attribute_length=2000,
        rate_limit_spans_per_s=0.0,
    ) as running:
        running.key(PROJECT)
        yield running


def _rejected(response: object, fmt: str) -> int:
    body = response.content  # type: ignore[attr-defined]
    if fmt == "json":
        return int(json.loads(body or b"{}").get("partialSuccess", {}).get("rejectedSpans", 0))
    return ExportTraceServiceResponse.FromString(body).partial_success.rejected_spans


def _store_rejected(collector: InProcess) -> float:
    return collector.app.state.metrics.rejected.labels("store_rejected")._value.get()


def test_generated_requests_are_answered_exactly_and_stored_once(collector: InProcess) -> None:
    """Each generated request is answered with its invalid spans counted; then every valid span
    that was acknowledged is in the store, once, and the store dropped none (its own project:
    what the other tests send cannot change the counts)."""
    project = "fuzz-stored"
    expected: dict[str, int] = {}  # trace id -> spans that must be stored
    collector.key(project)

    @FUZZ
    @given(specs=st.lists(gen.spans(), max_size=8), fmt=st.sampled_from(["protobuf", "json"]), gzipped=st.booleans())
    def answered_exactly(specs: list[gen.SpanSpec], fmt: str, gzipped: bool) -> None:
        _post_generated(collector, project, specs, fmt, gzipped=gzipped)
        for spec in specs:
            if spec.valid and spec.recent:
                expected[spec.trace_id.hex()] = expected.get(spec.trace_id.hex(), 0) + 1

    answered_exactly()
    assert expected, "the fuzz produced no valid spans"
    collector.drain()
    assert _store_rejected(collector) == 0, "the store dropped spans that were acknowledged"
    assert collector.span_counts(project, expected) == expected


def _post_generated(collector: InProcess, project: str, specs: list[gen.SpanSpec], fmt: str, *, gzipped: bool) -> None:
    body = gen.to_protobuf(specs) if fmt == "protobuf" else gen.to_json(specs)
    headers = dict(PROTOBUF if fmt == "protobuf" else JSON)
    if gzipped:
        body, headers["Content-Encoding"] = gzip.compress(body), "gzip"
    response = collector.post_traces(body, project, headers)
    assert response.status_code == 200, response.content[:300]
    invalid = [s for s in specs if not s.valid]
    assert _rejected(response, fmt) == len(invalid), [(len(s.trace_id), len(s.span_id), s.start, s.end) for s in specs]


@FUZZ
@given(data=st.data(), specs=st.lists(gen.spans(), min_size=1, max_size=4), fmt=st.sampled_from(["protobuf", "json"]))
def test_mutated_bodies_never_5xx(
    collector: InProcess, data: st.DataObject, specs: list[gen.SpanSpec], fmt: str
) -> None:
    valid = gen.to_protobuf(specs) if fmt == "protobuf" else gen.to_json(specs)
    response = collector.post_traces(gen.mutate(valid, data), "mutants", PROTOBUF if fmt == "protobuf" else JSON)
    assert response.status_code in (200, 400), response.content[:300]


@FUZZ
@given(
    body=st.binary(max_size=2048),
    content_type=st.sampled_from(["application/x-protobuf", "application/json", "text/plain", ""]),
    encoding=st.sampled_from(["", "gzip", "br", "identity"]),
)
def test_random_bytes_never_5xx(collector: InProcess, body: bytes, content_type: str, encoding: str) -> None:
    headers = {"Content-Type": content_type, "Content-Encoding": encoding}
    response = collector.post_traces(body, "random", headers)
    assert response.status_code in (200, 400, 415), response.content[:300]
    if response.status_code != 200:
        assert response.content, "an error answer must say what was wrong"


def _deep_kvlist_json(depth: int) -> bytes:
    """A resource and a span attribute nested ``depth`` kvlists deep (built as text: too deep for json.dumps)."""
    value = '{"kvlistValue": {"values": [{"key": "k", "value": ' * depth + '{"stringValue": "leaf"}' + "}]}}" * depth
    attribute = '[{"key": "deep", "value": ' + value + "}]"
    span = (
        '{"traceId": "'
        + os.urandom(16).hex()
        + '", "spanId": "'
        + os.urandom(8).hex()
        + '", "name": "deep", "attributes": '
        + attribute
        + "}"
    )
    return (
        '{"resourceSpans": [{"resource": {"attributes": '
        + attribute
        + '}, "scopeSpans": [{"spans": ['
        + span
        + "]}]}]}"
    ).encode()


def _ld(field_number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field (built by hand: the library refuses to nest this deep)."""
    size, n = bytearray(), len(payload)
    while True:
        size.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            break
    return bytes([field_number << 3 | 2]) + bytes(size) + payload


def _deep_kvlist_protobuf(depth: int) -> bytes:
    value = _ld(1, b"leaf")  # AnyValue.string_value
    for _ in range(depth):  # AnyValue.kvlist_value -> KeyValueList.values -> KeyValue{key, value}
        value = _ld(6, _ld(1, _ld(1, b"k") + _ld(2, value)))
    span = _ld(1, os.urandom(16)) + _ld(2, os.urandom(8)) + _ld(5, b"deep") + _ld(9, _ld(1, b"deep") + _ld(2, value))
    return _ld(1, _ld(2, _ld(2, span)))  # request.resource_spans.scope_spans.spans


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        pytest.param(b"[" * 200_000 + b"]" * 200_000, JSON, id="json-array-nesting"),
        pytest.param(b'{"a":' * 100_000 + b"1" + b"}" * 100_000, JSON, id="json-object-nesting"),
        pytest.param(_deep_kvlist_json(240), JSON, id="json-kvlist-nesting"),
        pytest.param(_deep_kvlist_json(5000), JSON, id="json-kvlist-nesting-past-recursion-limit"),
        pytest.param(_deep_kvlist_protobuf(300), PROTOBUF, id="protobuf-kvlist-nesting"),
        pytest.param(
            b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "\xff\xfe"}]}]}]}', JSON, id="json-invalid-utf8"
        ),
        pytest.param(b"\n\x05\x12\x03\n\x01\xff", PROTOBUF, id="protobuf-invalid-utf8"),
    ],
)
def test_hostile_structures_are_4xx_or_accepted(collector: InProcess, body: bytes, headers: dict[str, str]) -> None:
    response = collector.post_traces(body, PROJECT, headers)
    assert response.status_code in (200, 400, 413), response.content[:300]


def test_huge_attribute_count_is_stored(collector: InProcess) -> None:
    spec = gen.SpanSpec(
        os.urandom(16),
        os.urandom(8),
        b"",
        "wide",
        *([time.time_ns()] * 2),
        0,
        [(f"attr.{i}", "v" * 8) for i in range(20_000)],
    )
    response = collector.post_traces(gen.to_protobuf([spec]), PROJECT, PROTOBUF)
    assert response.status_code == 200 and _rejected(response, "protobuf") == 0
    collector.drain()
    assert collector.span_counts(PROJECT, [spec.trace_id.hex()]) == {spec.trace_id.hex(): 1}


def test_gzip_bombs_are_refused_and_memory_stays_bounded(collector: InProcess) -> None:
    bomb = gzip.compress(bytes(128 * 1024 * 1024), compresslevel=9)  # 128 MiB of zeros in ~130 KB
    assert len(bomb) < MAX_BODY
    before = rss_bytes()
    for _ in range(5):
        response = collector.post_traces(bomb, PROJECT, {**PROTOBUF, "Content-Encoding": "gzip"})
        assert response.status_code == 413 and b"exceeds the limit" in response.content
    assert rss_bytes() - before < 64 * 1024 * 1024


def test_oversized_bodies_memory_stays_bounded(collector: InProcess) -> None:
    big = os.urandom(MAX_BODY + 1)
    rss = []
    for _ in range(12):
        assert collector.post_traces(big, PROJECT, PROTOBUF).status_code == 413
        rss.append(rss_bytes())
    assert rss[-1] - rss[2] < 32 * 1024 * 1024, rss
