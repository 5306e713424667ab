"""The OTLP workload of the benchmarks: deterministic bytes, valid OTLP, and totals that match its spans."""

from __future__ import annotations

from collections import Counter

import pytest
from agentwatch import semconv as sc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from agentwatch_platform.reference_agent.workload import CONTENT_BYTES, MAX_CHILDREN, MIN_CHILDREN, Workload

END_NS = 1_767_225_600 * 10**9


def _decode(workload: Workload) -> tuple[list[Span], list[dict[str, object]]]:
    spans: list[Span] = []
    resources: list[dict[str, object]] = []
    for body in workload.batches():
        request = ExportTraceServiceRequest.FromString(body)
        for rs in request.resource_spans:
            resources.append({kv.key: kv.value.string_value for kv in rs.resource.attributes})
            for ss in rs.scope_spans:
                spans.extend(ss.spans)
    return spans, resources


def _attrs(span: Span) -> dict[str, object]:
    out: dict[str, object] = {}
    for kv in span.attributes:
        field = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, field)
    return out


def test_same_arguments_give_the_same_bytes() -> None:
    first = list(Workload(1500, seed=3, end_time_ns=END_NS, batch_spans=400).batches())
    second = list(Workload(1500, seed=3, end_time_ns=END_NS, batch_spans=400).batches())
    other_seed = list(Workload(1500, seed=4, end_time_ns=END_NS, batch_spans=400).batches())
    assert first == second
    assert first != other_seed
    assert len(first) > 1


def test_batches_decode_to_agent_traces_with_both_dialects() -> None:
    workload = Workload(3000, seed=11, end_time_ns=END_NS, batch_spans=500)
    spans, resources = _decode(workload)
    totals = workload.totals
    assert len(spans) == totals.spans == 3000
    assert all(r["service.name"] == "bench-agent" and r["openinference.project.name"] == "bench" for r in resources)
    children = Counter(s.trace_id for s in spans if s.parent_span_id)
    roots = [s for s in spans if not s.parent_span_id]
    assert len(roots) == len(children) == totals.traces
    sizes = sorted(children.values())
    assert MIN_CHILDREN <= sizes[1] and sizes[-1] <= MAX_CHILDREN  # only the last trace may be cut short
    assert len({(s.trace_id, s.span_id) for s in spans}) == len(spans)
    assert all(totals.start_ns <= s.start_time_unix_nano < s.end_time_unix_nano <= totals.end_ns for s in spans)
    assert roots[0].trace_id.hex() == workload.first_trace_id
    assert workload.first_trace_spans == sum(1 for s in spans if s.trace_id == roots[0].trace_id)

    by_kind = Counter(_attrs(s)[sc.OPENINFERENCE_SPAN_KIND] for s in spans)
    assert by_kind == {"AGENT": totals.traces, "LLM": totals.llm_spans, "TOOL": totals.tool_spans}


def test_llm_spans_carry_model_tokens_ttft_and_content() -> None:
    workload = Workload(2000, seed=5, end_time_ns=END_NS)
    spans, _ = _decode(workload)
    llm = [_attrs(s) for s in spans if _attrs(s)[sc.AGENTWATCH_SPAN_KIND] == sc.KIND_LLM]
    assert len(llm) == workload.totals.llm_spans > 0
    for a in llm:
        assert a[sc.LLM_MODEL_NAME] == a[sc.GEN_AI_REQUEST_MODEL] in ("sim-small", "sim-large")
        assert a[sc.LLM_TOKEN_COUNT_PROMPT] == a[sc.GEN_AI_USAGE_INPUT_TOKENS] > 0
        assert a[sc.LLM_TOKEN_COUNT_COMPLETION] == a[sc.GEN_AI_USAGE_OUTPUT_TOKENS] > 0
        assert a[sc.LLM_TOKEN_COUNT_TOTAL] == a[sc.LLM_TOKEN_COUNT_PROMPT] + a[sc.LLM_TOKEN_COUNT_COMPLETION]
        assert len(a[sc.INPUT_VALUE]) == len(a[sc.OUTPUT_VALUE]) == CONTENT_BYTES
        assert 0 < a[sc.AW_TTFT] < 2
    assert sum(a[sc.GEN_AI_USAGE_INPUT_TOKENS] for a in llm) == workload.totals.input_tokens
    assert sum(a[sc.GEN_AI_USAGE_OUTPUT_TOKENS] for a in llm) == workload.totals.output_tokens


def test_about_a_tenth_of_tool_calls_fail_with_error_status() -> None:
    workload = Workload(5000, seed=9, end_time_ns=END_NS)
    spans, _ = _decode(workload)
    failed = [s for s in spans if s.status.code == Status.STATUS_CODE_ERROR]
    assert len(failed) == workload.totals.error_spans
    assert 0.05 < len(failed) / workload.totals.tool_spans < 0.15
    for span in failed:
        assert _attrs(span)[sc.ERROR_TYPE] == "ToolError"
        assert span.status.message and span.events[0].name == "exception"


def test_passes_over_the_pool_get_new_trace_ids() -> None:
    workload = Workload(2500, seed=2, end_time_ns=END_NS, batch_spans=300, unique_spans=1000)
    spans, _ = _decode(workload)
    assert workload.passes == 3
    assert workload.request_bytes == sum(len(b) for b in workload.batches())
    assert len(spans) == workload.totals.spans == 3000
    assert len({(s.trace_id, s.span_id) for s in spans}) == 3000
    assert len({s.trace_id for s in spans}) == workload.totals.traces


def test_bad_sizes_are_rejected_by_name() -> None:
    with pytest.raises(ValueError, match="spans"):
        Workload(0, end_time_ns=END_NS)
    with pytest.raises(ValueError, match="batch_spans"):
        Workload(10, end_time_ns=END_NS, batch_spans=0)


def test_without_content_no_span_carries_captured_text() -> None:
    workload = Workload(2000, seed=5, end_time_ns=END_NS, content=False)
    spans, _ = _decode(workload)
    assert len(spans) == workload.totals.spans == 2000
    assert workload.totals.content_bytes == 0
    assert not [s for s in spans if {sc.INPUT_VALUE, sc.OUTPUT_VALUE} & set(_attrs(s))]
    assert sum(1 for s in spans if sc.GEN_AI_USAGE_INPUT_TOKENS in _attrs(s)) == workload.totals.llm_spans > 0
