"""The native OTLP decoder agrees with the Python path, span for span, on any request.

The Python path (upb + ``Normalizer.normalize``) is the reference; the C decoder must give
the same Arrow table, the same rejections and the same errors, whether it takes a span itself,
declines it to the Python path, or hands the whole request over.
"""

from __future__ import annotations

import time

import pytest
from agentwatch import semconv as sc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from agentwatch_platform.collector.ingest import spec as decoder_spec
from agentwatch_platform.collector.ingest.normalize import Normalizer, sdk_pricer
from agentwatch_platform.collector.ingest.otlp import native
from agentwatch_platform.collector.ingest.otlp.decode import JSON, PROTOBUF, convert
from agentwatch_platform.collector.ingest.otlp.errors import BadRequest, IngestError
from agentwatch_platform.collector.ingest.redact import Redactor
from agentwatch_platform.reference_agent.workload import Workload, otlp_json
from tests.reliability import otlp_gen as gen
from tests.support.examples import examples

NORMALIZERS = {
    "plain": Normalizer(),
    "priced-redacted-short": Normalizer(
        max_attribute_length=24, redactor=Redactor.from_setting("default"), pricer=sdk_pricer()
    ),
}
KEYS = sorted(set(decoder_spec.ATTRIBUTES) | set(gen.SEMCONV_KEYS) | set(decoder_spec.PYTHON_RULE_KEYS)) + [
    "input.mime_type",
    "gen_ai.prompt.0.content",
    "exception.type",
    "custom.key",
]
_EVENT_NAMES = ["exception", "log", "", *sorted(decoder_spec.STREAM_EVENTS)]
_TEXT = st.one_of(
    st.text(max_size=30),
    st.sampled_from(
        [
            "",
            "llm",
            "run",
            "step",
            "tool",
            "TOOL",
            "CHAIN",
            "chat",
            "workflow",
            "gpt-4o-mini",
            "openai",
            "TimeoutError",
            "a@b.example",
            "sk-" + "x" * 30,
            "é" * 30,
            "AGENT",
            "agent",
            "task",
            "false",
            "openai/gpt-4o-mini",
        ]
    ),
)
_SCALARS = st.one_of(
    _TEXT,
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.binary(max_size=9),
)
_VALUES = st.one_of(
    _SCALARS, st.none(), st.lists(_SCALARS, max_size=3), st.dictionaries(st.text(max_size=5), _SCALARS, max_size=2)
)


def _any(value: object) -> AnyValue:
    return AnyValue() if value is None else gen._any(value)


@st.composite
def requests(draw: st.DrawFn) -> bytes:
    request = ExportTraceServiceRequest()
    for _ in range(draw(st.integers(1, 2))):
        rs = request.resource_spans.add()
        for key, value in draw(
            st.lists(
                st.tuples(
                    st.sampled_from(["service.name", "service.version", "host.name", "process.command_args"]), _VALUES
                ),
                max_size=3,
            )
        ):
            rs.resource.attributes.append(KeyValue(key=key, value=_any(value)))
        for _ in range(draw(st.integers(1, 2))):
            scope = rs.scope_spans.add()
            scope.scope.name = draw(st.text(max_size=5))
            for spec in draw(st.lists(gen.spans(), max_size=5)):
                span = scope.spans.add()
                span.trace_id, span.span_id, span.parent_span_id = spec.trace_id, spec.span_id, spec.parent
                span.name = draw(st.one_of(st.just(spec.name), st.sampled_from([sc.VLLM_SPAN_NAME, "x" * 40])))
                span.start_time_unix_nano, span.end_time_unix_nano = spec.start, spec.end
                span.status.code = spec.status % 4
                span.status.message = draw(st.sampled_from(["", "boom", "m" * 40]))
                for key, value in draw(st.lists(st.tuples(st.sampled_from(KEYS), _VALUES), max_size=10)):
                    span.attributes.append(KeyValue(key=key, value=_any(value)))
                for _ in range(draw(st.integers(0, 2))):
                    event = span.events.add()
                    event.name = draw(st.sampled_from(_EVENT_NAMES))
                    after_start, ns = draw(
                        st.one_of(
                            st.tuples(st.just(False), st.integers(0, 2**64 - 1)),
                            st.tuples(st.just(True), st.integers(0, 10**10)),
                        )
                    )  # a stream event
                    event.time_unix_nano = min(spec.start + ns, 2**64 - 1) if after_start else ns
                    for key, value in draw(
                        st.lists(
                            st.tuples(st.sampled_from(["exception.type", "exception.message", "k"]), _VALUES),
                            max_size=3,
                        )
                    ):
                        event.attributes.append(KeyValue(key=key, value=_any(value)))
                if draw(st.integers(0, 9)) == 0:
                    span.links.add(trace_id=spec.trace_id, span_id=spec.span_id)
    return request.SerializeToString()


def _both(payload: bytes, normalizer: Normalizer, not_before_ns: int = 0, fmt: str = PROTOBUF) -> tuple[object, object]:
    """What the Python path and the native decoder make of one body: results, or (error type, message)."""
    out = []
    for use_native in (False, True):
        try:
            out.append(
                convert(payload, fmt, "p", normalizer, max_spans=1000, not_before_ns=not_before_ns, native=use_native)
            )
        except IngestError as exc:
            out.append((type(exc), str(exc)))
    return out[0], out[1]


def _assert_same(python: object, fast: object) -> None:
    if isinstance(python, tuple) or isinstance(fast, tuple):
        assert python == fast
        return
    assert fast.rejected == python.rejected and fast.messages == python.messages
    assert fast.table.schema == python.table.schema
    for name in python.table.column_names:
        assert fast.table[name].to_pylist() == python.table[name].to_pylist(), name


def test_the_native_decoder_is_built() -> None:
    """CI builds it at install (gcc and the Python headers); without it ingestion is 3x slower."""
    assert native.AVAILABLE


@settings(
    max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(payload=requests(), which=st.sampled_from(sorted(NORMALIZERS)), retention=st.booleans())
def test_generated_requests_decode_the_same_natively(payload: bytes, which: str, retention: bool) -> None:
    not_before = time.time_ns() - 3600 * 10**9 if retention else 0
    _assert_same(*_both(payload, NORMALIZERS[which], not_before))


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), payload=requests())
def test_mutated_requests_decode_or_fail_the_same_natively(data: st.DataObject, payload: bytes) -> None:
    _assert_same(*_both(gen.mutate(payload, data), NORMALIZERS["plain"]))


def _every_kind_request() -> bytes:
    """A request the native decoder takes whole, with every kind of field it reads, ending in a string (a schema URL)."""
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add(schema_url="https://opentelemetry.io/schemas/1.9")
    rs.resource.attributes.append(KeyValue(key="service.name", value=_any("svc")))
    scope = rs.scope_spans.add(schema_url="https://opentelemetry.io/schemas/1.26.0")
    scope.scope.name, scope.scope.version = "lib", "1.0"
    start = time.time_ns() - 60 * 10**9
    span = scope.spans.add(
        name="chat gpt-4o-mini", trace_id=b"\x01" * 16, span_id=b"\x02" * 8, parent_span_id=b"\x03" * 8
    )
    span.start_time_unix_nano, span.end_time_unix_nano = start, start + 10**9
    span.status.code, span.status.message = 2, "boom"
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.usage.input_tokens": 12,
        "gen_ai.latency.time_to_first_token": 0.5,
        "agentwatch.tool.cache_hit": True,
        "gen_ai.response.finish_reasons": ["stop"],
        "custom.bytes": b"\x00\xff",
        "custom.map": {"k": "v"},
        "custom.empty": None,
    }
    for key, value in attributes.items():
        span.attributes.append(KeyValue(key=key, value=_any(value)))
    event = span.events.add(name="exception", time_unix_nano=start + 5)
    event.attributes.append(KeyValue(key="exception.type", value=_any("TimeoutError")))
    return request.SerializeToString()


def test_every_truncation_of_a_request_decodes_or_fails_the_same_natively() -> None:
    """Each cut ends the buffer inside another field: a read past the end shows here (under ``make sanitize``)."""
    normalizer = NORMALIZERS["priced-redacted-short"]
    workload = next(Workload(6, batch_spans=6, end_time_ns=time.time_ns(), content=True).batches())
    for body in (_every_kind_request(), workload):
        assert native.NativeDecoder(normalizer).decode(body, "p").declined == []
        for cut in range(len(body) + 1):
            _assert_same(*_both(body[:cut], normalizer))


@pytest.mark.parametrize("content", [True, False], ids=["content", "no-content"])
def test_agent_workload_is_decoded_natively_without_declines(content: bool) -> None:
    """The common case never reaches the Python path: that is what the ingest rate rests on."""
    normalizer = Normalizer(redactor=Redactor.from_setting("default"), pricer=sdk_pricer())
    decoder = native.NativeDecoder(normalizer)
    for body in Workload(3000, batch_spans=500, end_time_ns=time.time_ns(), content=content).batches():
        decoded = decoder.decode(body, "p")
        assert decoded.declined == [] and decoded.table.num_rows == decoded.spans > 0
        _assert_same(*_both(body, normalizer))


def test_invalid_utf8_in_a_scope_name_loses_only_the_scope_the_same() -> None:
    """Not framing: the request is read part by part (``wire.split_request``) and the scope, which is not stored, dropped."""
    python, fast = _both(b"\n\x05\x12\x03\n\x01\xff", NORMALIZERS["plain"])
    assert python == fast
    assert not isinstance(python, tuple) and python.spans == python.rejected == 0


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"\n\x03\x08\x01\x02", id="wrong-wire-type"),
        pytest.param(b"\n\xff\xff\xff\xff\x0f", id="length-past-end"),
        pytest.param(b"\x0b", id="group"),
    ],
)
def test_malformed_bodies_are_refused_the_same(body: bytes) -> None:
    python, fast = _both(body, NORMALIZERS["plain"])
    assert python == fast
    assert isinstance(python, tuple) and python[0] is BadRequest


# --- JSON bodies: re-encoded as protobuf (native.json_wire) for the same decoder -------------------

_ODD_VALUES = st.sampled_from(
    [
        None,
        "",
        0,
        -1,
        1.5,
        True,
        False,
        [],
        {},
        "zz",
        "12",
        "-12",
        "+3",
        " 7",
        "1e3",
        "0" * 32,
        "AB" * 16,
        "ab" * 8,
        "ab",
        2**63,
        2**64,
        -(2**63) - 1,
        10**30,
        float("nan"),
        float("inf"),
        "NaN",
        "STATUS_CODE_OK",
        "STATUS_CODE_NOPE",
        "\ud800",
        {"stringValue": "s"},
        {"intValue": "5"},
        {"values": []},
        {"key": "k"},
        {"key": "k", "value": {"boolValue": True}},
        [{"key": "k", "value": {"doubleValue": 2}}],
        {"bytesValue": "AQ=="},
        {"weirdValue": 1},
        {"x": 1, "stringValue": "late"},
    ]
)


def _dialect(node: object, data: st.DataObject) -> object:
    """The forms exporters really send: snake_case names, 64-bit integers as numbers or strings,
    status codes as numbers, NaN and infinities as JSON literals."""
    import re

    if isinstance(node, list):
        return [_dialect(v, data) for v in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key in ("intValue", "startTimeUnixNano", "endTimeUnixNano", "timeUnixNano") and data.draw(st.booleans()):
            value = int(value)
        elif key == "doubleValue" and isinstance(value, str):
            value = float(value)
        elif key == "code" and data.draw(st.booleans()):
            value = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}.get(value, value)
        if data.draw(st.integers(0, 9)) == 0:
            key = re.sub(r"(?<!^)([A-Z])", r"_\1", key).lower()
        out[key] = _dialect(value, data)
    return out


def _paths(node: object, path: tuple = ()) -> list[tuple]:
    found = [path]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += _paths(value, (*path, i))
    return found


def _json_body(payload: bytes, data: st.DataObject, *, odd: int) -> bytes:
    import copy
    import json

    doc = _dialect(json.loads(otlp_json(payload)), data)
    if data.draw(st.booleans()):  # spans with bad ids send a request the Python way whole: leave them out
        for rs in doc.get("resourceSpans", ()):
            for ss in rs.get("scopeSpans", ()):
                ss["spans"] = [
                    s
                    for s in ss.get("spans", ())
                    if len(s.get("traceId", "")) == 32
                    and len(s.get("spanId", "")) == 16
                    and len(s.get("parentSpanId", "")) in (0, 16)
                    and s["traceId"] != "0" * 32
                    and s["spanId"] != "0" * 16
                ]
    for _ in range(odd):  # a value somewhere replaced by one of an odd type or form
        path = data.draw(st.sampled_from(_paths(doc)[1:] or [()]))
        if path:
            parent = doc
            for step in path[:-1]:
                parent = parent[step]
            parent[path[-1]] = copy.deepcopy(data.draw(_ODD_VALUES))  # never change the shared constant
    return json.dumps(doc).encode("utf-8", "surrogatepass")


@settings(
    max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(data=st.data(), payload=requests(), which=st.sampled_from(sorted(NORMALIZERS)), retention=st.booleans())
def test_generated_json_requests_decode_the_same_natively(
    data: st.DataObject, payload: bytes, which: str, retention: bool
) -> None:
    not_before = time.time_ns() - 3600 * 10**9 if retention else 0
    _assert_same(*_both(_json_body(payload, data, odd=0), NORMALIZERS[which], not_before, JSON))


@settings(
    max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(data=st.data(), payload=requests(), odd=st.integers(1, 3))
def test_json_requests_with_odd_values_decode_or_fail_the_same_natively(
    data: st.DataObject, payload: bytes, odd: int
) -> None:
    _assert_same(*_both(_json_body(payload, data, odd=odd), NORMALIZERS["plain"], fmt=JSON))


@pytest.mark.parametrize("content", [True, False], ids=["content", "no-content"])
def test_agent_workload_as_json_is_decoded_natively(content: bool) -> None:
    """JSON from a real exporter takes the native decoder whole: no fallback, no declines."""
    import json

    normalizer = Normalizer(redactor=Redactor.from_setting("default"), pricer=sdk_pricer())
    decoder = native.NativeDecoder(normalizer)
    for body in Workload(2000, batch_spans=500, end_time_ns=time.time_ns(), content=content).batches():
        json_body = otlp_json(body)
        wire, count = native.json_wire(json.loads(json_body))
        decoded = decoder.decode(wire, "p")
        assert decoded.declined == [] and decoded.table.num_rows == decoded.spans == count > 0
        _assert_same(*_both(json_body, normalizer, fmt=JSON))


# --- dialect rules that live in Python only: the native decoder declines those spans ---------------


def _dialect_request(spans: list[tuple[str, str, dict, list[tuple[str, int]]]]) -> bytes:
    """(name, parent span id hex, attributes, [(event name, ms after start)]) -> one request."""
    request = ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    start = time.time_ns() - 60 * 10**9
    for i, (name, parent, attributes, events) in enumerate(spans):
        span = scope.spans.add(
            name=name,
            trace_id=bytes.fromhex("ab" * 16),
            span_id=(i + 1).to_bytes(8, "big"),
            parent_span_id=bytes.fromhex(parent),
            start_time_unix_nano=start,
            end_time_unix_nano=start + 900 * 10**6,
        )
        for key, value in attributes.items():
            span.attributes.append(KeyValue(key=key, value=_any(value)))
        for event_name, ms in events:
            span.events.add(name=event_name, time_unix_nano=start + ms * 10**6)
    return request.SerializeToString()


def test_dialect_spans_decode_the_same_natively_and_only_rule_spans_are_declined() -> None:
    from tests.collector import test_normalize_dialects as real

    parent = "0a" * 8
    chunks = [(sc.TRACELOOP_CHUNK_EVENT, 150 + 10 * i) for i in range(20)]
    spans = [  # (name, parent, attributes, events), declined by the native decoder?
        (
            (
                "research.workflow",
                "",
                {
                    "traceloop.span.kind": "workflow",
                    "traceloop.entity.name": "research",
                    "traceloop.workflow.name": "research",
                },
                [],
            ),
            False,
        ),
        (
            (
                "researcher.agent",
                parent,
                {
                    "traceloop.span.kind": "agent",
                    "traceloop.entity.name": "researcher",
                    "traceloop.workflow.name": "researcher",
                },
                [],
            ),
            False,
        ),
        (("plan.task", parent, {"traceloop.span.kind": "task", "traceloop.entity.name": "plan"}, []), True),
        (
            (
                "search.tool",
                parent,
                {"traceloop.span.kind": "tool", "traceloop.entity.name": "search", "traceloop.entity.path": "plan"},
                [],
            ),
            True,
        ),
        (("openai.chat", parent, real.TRACELOOP_LLM, []), False),
        (("openai.chat", parent, real.TRACELOOP_LLM, chunks), True),
        (("ChatCompletion", parent, real.OPENINFERENCE_LLM, [(sc.OI_FIRST_TOKEN_EVENT, 180)]), True),
        (("ChatCompletion", parent, real.OPENINFERENCE_LLM, [("exception", 5)]), False),
        (("Agent.run", "", {"openinference.span.kind": "AGENT"}, []), False),  # named by its span name natively too
        (("Agent.run", "", {"openinference.span.kind": "AGENT", "agent.name": "researcher"}, []), False),
        (("Step 1", parent, {"openinference.span.kind": "CHAIN"}, []), False),
        (("chat gpt-4o-mini", parent, real.OPENLIT_STREAM, []), True),
        (("chat gpt-4o-mini", parent, {**real.OPENAI_V2, "gen_ai.response.model": "openai/gpt-4o-mini"}, []), False),
        (
            (
                "execute_tool search",
                parent,
                {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"},
                [],
            ),
            False,
        ),
        # an older SDK's refused request (abandoned, the rate limiter's refusal on it), a budget stop
        (("invoke_agent r", "", {**_SDK_RUN, sc.AW_LEVER: "rate_limit", sc.AW_LEVER_REFUSED: True}, []), True),
        (("invoke_agent r", "", {**_SDK_RUN, sc.AW_BUDGET_EXCEEDED: "cost"}, []), True),
        (("invoke_agent r", "", {**_SDK_RUN, sc.AW_RUN_OUTCOME: "refused"}, []), False),
    ]
    body = _dialect_request([span for span, _ in spans])
    for normalizer in NORMALIZERS.values():
        decoded = native.NativeDecoder(normalizer).decode(body, "p")
        assert decoded.declined == [i for i, (_, declined) in enumerate(spans) if declined]
        python, fast = _both(body, normalizer)
        _assert_same(python, fast)
    rows = python.table.to_pylist()
    assert [r["kind"] for r in rows[:4]] == ["run", "run", "step", "tool"] and rows[3]["tool_name"] == "search"
    assert rows[5]["ttft_s"] == pytest.approx(0.15) and rows[6]["ttft_s"] == pytest.approx(0.18)
    assert (rows[8]["agent_name"], rows[9]["agent_name"]) == ("Agent.run", "researcher")
    assert rows[11]["ttft_s"] == pytest.approx(0.2146)
    assert rows[12]["cost_usd"] > 0  # priced-redacted-short was the last normaliser
    assert [r["outcome"] for r in rows[14:]] == ["refused", "abandoned", "refused"]


_SDK_RUN = {sc.AGENTWATCH_SPAN_KIND: "run", sc.GEN_AI_AGENT_NAME: "r", sc.AW_RUN_OUTCOME: "abandoned"}


def _versioned_request() -> bytes:
    """Two resources, one with a service.version; spans with and without a version of their own."""
    request = ExportTraceServiceRequest()
    start = time.time_ns() - 60 * 10**9
    for n, resource_version in enumerate(("1.4.0", None)):
        rs = request.resource_spans.add()
        rs.resource.attributes.append(KeyValue(key="service.name", value=_any("svc")))
        if resource_version is not None:
            rs.resource.attributes.append(KeyValue(key="service.version", value=_any(resource_version)))
        scope = rs.scope_spans.add()
        for i, own in enumerate((None, "2.0.0-rc1")):
            span = scope.spans.add(name="tool", trace_id=bytes([n + 1]) * 16, span_id=bytes([n + 1, i + 1]) * 4)
            span.start_time_unix_nano, span.end_time_unix_nano = start, start + 10**9
            if own is not None:
                span.attributes.append(KeyValue(key="service.version", value=_any(own)))
    return request.SerializeToString()


def test_service_version_is_the_spans_own_else_its_resources_on_both_paths() -> None:
    python, fast = _both(_versioned_request(), NORMALIZERS["plain"])
    _assert_same(python, fast)
    assert fast.table["service_version"].to_pylist() == ["1.4.0", "2.0.0-rc1", "", "2.0.0-rc1"]
    assert native.NativeDecoder(NORMALIZERS["plain"]).decode(_versioned_request(), "p").declined == []
