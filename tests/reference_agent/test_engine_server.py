"""The simulated engine's HTTP server, live on 127.0.0.1, through the real ``openai`` client."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator

import httpx
import openai
import pytest
from agentwatch import semconv as sc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from prometheus_client.parser import text_string_to_metric_families

from agentwatch_platform.reference_agent.engine.server import EngineConfig, running_server
from tests.support import local_http
from tests.support.ports import free_port

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "search the corpus",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "fetch",
            "description": "read one document",
            "parameters": {"type": "object", "properties": {"doc_id": {"type": "string"}}, "required": ["doc_id"]},
        },
    },
]
QUESTION = "Question: How does continuous batching raise GPU throughput in LLM serving?"


class OtlpReceiver:
    """A tiny OTLP/HTTP receiver that decodes protobuf span exports."""

    def __init__(self) -> None:
        self.spans: list = []
        self.headers: list[dict[str, str]] = []
        self.received = threading.Event()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest.FromString(body)
                for resource_spans in request.resource_spans:
                    for scope_spans in resource_spans.scope_spans:
                        receiver.spans.extend(scope_spans.spans)
                receiver.headers.append({k.lower(): v for k, v in self.headers.items()})
                receiver.received.set()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    receiver = OtlpReceiver()
    yield receiver
    receiver.close()


@pytest.fixture(scope="module")
def engine_url(receiver: OtlpReceiver) -> Iterator[str]:
    config = EngineConfig(speed=20.0, slots=8, kv_tokens=16384, otlp_endpoint=receiver.url, api_key="aw-test-key")
    with running_server(config, port=free_port()) as url:
        yield url


@pytest.fixture
def client(engine_url: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{engine_url}/v1", api_key="none", max_retries=0) as client:
        yield client


def test_models_are_listed_and_marked_as_simulations(client: openai.OpenAI) -> None:
    models = client.models.list().data
    assert {m.id for m in models} == {"sim-small", "sim-large"}
    assert all(m.owned_by == "agentwatch-simulation" for m in models)


def test_tool_calls_stream_as_deltas_through_the_openai_client(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="sim-small",
        messages=[{"role": "user", "content": QUESTION}],
        tools=TOOLS,
        stream=True,
        stream_options={"include_usage": True},
    )
    name, arguments, finish, usage, deltas = "", "", None, None, 0
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            for call in choice.delta.tool_calls or ():
                deltas += 1
                name += call.function.name or ""
                arguments += call.function.arguments or ""
    assert name == "search" and finish == "tool_calls"
    assert json.loads(arguments)["query"].startswith("continuous batching")
    assert deltas > 3  # the arguments arrive a token at a time
    assert usage is not None and usage.completion_tokens == deltas
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_research_conversation_fetches_found_documents_then_reports(client: openai.OpenAI) -> None:
    messages = [{"role": "user", "content": QUESTION}]
    first = client.chat.completions.create(model="sim-small", messages=messages, tools=TOOLS)
    call = first.choices[0].message.tool_calls[0]
    messages += [
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps([{"id": "doc-0007", "title": "Batching"}])},
    ]
    second = client.chat.completions.create(model="sim-small", messages=messages, tools=TOOLS)
    fetch = second.choices[0].message.tool_calls[0]
    assert fetch.function.name == "fetch" and json.loads(fetch.function.arguments) == {"doc_id": "doc-0007"}
    # the second prompt extends the first, so its prefix comes from the prefix cache
    assert second.usage.prompt_tokens_details.cached_tokens >= 16
    assert second.usage.prompt_tokens_details.cached_tokens < second.usage.prompt_tokens


def test_streaming_text_with_include_usage_ends_with_a_usage_chunk(engine_url: str) -> None:
    body = {
        "model": "sim-large",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "What limits decode throughput on a GPU?"}],
    }
    with httpx.stream("POST", f"{engine_url}/v1/chat/completions", json=body, timeout=30) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [line.removeprefix("data: ") for line in response.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    final = chunks[-1]
    assert final["choices"] == [] and final["usage"]["completion_tokens"] > 0
    assert all(c["usage"] is None for c in chunks[:-1])
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks[:-1])
    assert text.startswith("(simulated engine)")
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"


def test_max_tokens_cuts_the_answer_with_finish_reason_length(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(
        model="sim-small",
        messages=[{"role": "user", "content": "Write a long report on caching."}],
        max_tokens=5,
    )
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage.completion_tokens == 5


@pytest.mark.parametrize(
    ("body", "status", "needle"),
    [
        ({"model": "sim-small", "messages": []}, 400, "'messages'"),
        ({"model": "gpt-9", "messages": [{"role": "user", "content": "hi"}]}, 404, "gpt-9"),
        ({"model": "sim-small", "messages": [{"role": "user", "content": "hi"}], "max_tokens": "x"}, 400, "max_tokens"),
        (
            {"model": "sim-small", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 10**7},
            400,
            "maximum context length",
        ),
        (
            {
                "model": "sim-small",
                "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 20000,
                "ignore_eos": True,
            },
            400,
            "KV cache",
        ),
    ],
)
def test_bad_requests_get_openai_style_errors(engine_url: str, body: dict, status: int, needle: str) -> None:
    response = local_http.post(f"{engine_url}/v1/chat/completions", json=body, timeout=10)
    assert response.status_code == status
    error = response.json()["error"]
    assert needle in error["message"] and error["code"] == status


def test_metrics_carry_the_names_a_vllm_scraper_expects(client: openai.OpenAI, engine_url: str) -> None:
    client.chat.completions.create(model="sim-small", messages=[{"role": "user", "content": "hello engine"}])
    text = local_http.get(f"{engine_url}/metrics", timeout=10).text
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.labels.get("model_name") == "sim-small":
                samples.setdefault(sample.name, 0.0)
                samples[sample.name] += sample.value
    for name in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:prefix_cache_queries_total",
        "vllm:prefix_cache_hits_total",
        "vllm:num_preemptions_total",
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:inter_token_latency_seconds_count",
        "vllm:e2e_request_latency_seconds_sum",
        "vllm:request_queue_time_seconds_count",
    ):
        assert name in samples, name
    assert samples["vllm:prompt_tokens_total"] > 0 and samples["vllm:generation_tokens_total"] > 0
    assert samples["vllm:e2e_request_latency_seconds_count"] >= 1
    assert "simulated engine" in text


@pytest.mark.slow  # an agent call through the live engine (make test runs it, make quick not)
def test_engine_span_joins_the_callers_trace(client: openai.OpenAI, receiver: OtlpReceiver) -> None:
    tracer = TracerProvider().get_tracer("test-agent")
    with tracer.start_as_current_span("agent-step") as parent:
        headers: dict[str, str] = {}
        TraceContextTextMapPropagator().inject(headers)
        reply = client.chat.completions.create(
            model="sim-small",
            messages=[{"role": "user", "content": "trace me"}],
            extra_headers=headers,
        )
    context = parent.get_span_context()
    span = _wait_for_span(receiver, reply.id)
    assert span.name == sc.VLLM_SPAN_NAME
    assert span.kind == Span.SpanKind.SPAN_KIND_SERVER
    assert span.trace_id == context.trace_id.to_bytes(16, "big")
    assert span.parent_span_id == context.span_id.to_bytes(8, "big")
    attributes = {a.key: a.value for a in span.attributes}
    assert attributes[sc.GEN_AI_USAGE_COMPLETION_TOKENS].int_value == reply.usage.completion_tokens
    assert attributes[sc.GEN_AI_USAGE_PROMPT_TOKENS].int_value == reply.usage.prompt_tokens
    assert attributes[sc.GEN_AI_RESPONSE_MODEL].string_value == "sim-small"
    e2e = attributes[sc.GEN_AI_LATENCY_E2E].double_value
    ttft = attributes[sc.GEN_AI_LATENCY_TIME_TO_FIRST_TOKEN].double_value
    assert 0 < ttft <= e2e
    assert any(h.get("authorization") == "Bearer aw-test-key" for h in receiver.headers)


def _wait_for_span(receiver: OtlpReceiver, request_id: str, timeout_s: float = 15.0) -> Span:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for span in receiver.spans:
            for attribute in span.attributes:
                if attribute.key == sc.GEN_AI_REQUEST_ID and attribute.value.string_value == request_id:
                    return span
        receiver.received.wait(0.2)
        receiver.received.clear()
    raise AssertionError(f"no llm_request span for {request_id} within {timeout_s} s")


def test_a_client_that_goes_away_frees_its_slot(engine_url: str) -> None:
    body = {
        "model": "sim-large",
        "stream": True,
        "ignore_eos": True,
        "max_tokens": 4000,
        "messages": [{"role": "user", "content": "a very long answer please"}],
    }
    with httpx.stream("POST", f"{engine_url}/v1/chat/completions", json=body, timeout=30) as response:
        lines = response.iter_lines()
        assert next(lines).startswith("data: ")
    deadline = time.monotonic() + 10
    while True:
        metrics = {
            (s.name, s.labels.get("finished_reason")): s.value
            for family in text_string_to_metric_families(local_http.get(f"{engine_url}/metrics", timeout=10).text)
            for s in family.samples
            if s.labels.get("model_name") == "sim-large"
        }
        aborted = metrics.get(("vllm:request_success_total", "abort"), 0)
        if aborted >= 1 and metrics[("vllm:num_requests_running", None)] == 0:
            break
        assert time.monotonic() < deadline, metrics
        time.sleep(0.1)


def test_tool_choice_none_answers_in_text_but_still_counts_the_tools(client: openai.OpenAI) -> None:
    messages = [{"role": "user", "content": QUESTION}]
    with_tools = client.chat.completions.create(model="sim-small", messages=messages, tools=TOOLS, tool_choice="none")
    without = client.chat.completions.create(model="sim-small", messages=messages)
    assert not with_tools.choices[0].message.tool_calls and with_tools.choices[0].message.content
    assert with_tools.usage.prompt_tokens > without.usage.prompt_tokens
