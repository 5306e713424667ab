"""OpenAI client instrumentation against a real OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

from typing import Any

import agentwatch
import openai
import pytest
from agentwatch import semconv as sc
from agentwatch._export import suppressed_context
from opentelemetry import context as otel_context

from tests.sdk.servers import FakeOpenAI
from tests.sdk.spans import Spans, init_with_memory

MESSAGES = [{"role": "user", "content": "Summarise paged attention. my key is sk-abcdefghijklmnopqrstuvwx"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "search the corpus",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
        },
    }
]


def _client(server: FakeOpenAI) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="sk-test", max_retries=0)


def _async_client(server: FakeOpenAI) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="sk-test", max_retries=0)


def _llm_attrs(spans: Spans) -> dict[str, object]:
    (span,) = spans.kind(sc.KIND_LLM)
    return dict(span.attributes or {})


def _assert_streamed_timing(span: Any, fake: FakeOpenAI, tokens: int) -> None:
    """TTFT and TPOT against what holds however the threads are scheduled: the fake sends the first
    token after ``ttft_s`` and each next one ``token_s`` later, so no chunk arrives earlier; the
    last one arrives (TTFT + TPOT x (tokens - 1) after the call's start) before the span ends."""
    attrs = dict(span.attributes or {})
    ttft, tpot = float(attrs[sc.AW_TTFT]), float(attrs.get(sc.AW_TPOT, 0.0))
    last_token = ttft + tpot * (tokens - 1)
    assert fake.ttft_s <= ttft < (span.end_time - span.start_time) / 1e9
    assert fake.ttft_s + fake.token_s * (tokens - 1) <= last_token <= (span.end_time - span.start_time) / 1e9


@pytest.fixture
def traced() -> Spans:
    return init_with_memory(instrument_openai=True)


def test_non_streaming_call_records_model_tokens_cost_and_traceparent(traced: Spans, fake_openai: FakeOpenAI) -> None:
    with agentwatch.run("agent") as run:
        response = _client(fake_openai).chat.completions.create(
            model="sim-large", messages=MESSAGES, temperature=0.2, max_tokens=64
        )
    assert response.choices[0].message.content.startswith("word")
    attrs = _llm_attrs(traced)
    assert attrs[sc.GEN_AI_OPERATION_NAME] == sc.OP_CHAT
    assert attrs[sc.GEN_AI_REQUEST_MODEL] == "sim-large" and attrs[sc.GEN_AI_RESPONSE_MODEL] == "sim-large"
    assert attrs[sc.GEN_AI_USAGE_INPUT_TOKENS] == FakeOpenAI.PROMPT_TOKENS
    assert attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == fake_openai.tokens
    assert attrs[sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == FakeOpenAI.CACHED_TOKENS
    assert list(attrs[sc.GEN_AI_RESPONSE_FINISH_REASONS]) == ["stop"]  # type: ignore[call-overload]
    assert attrs[sc.GEN_AI_REQUEST_TEMPERATURE] == 0.2 and attrs[sc.GEN_AI_REQUEST_MAX_TOKENS] == 64
    assert attrs[sc.AW_STREAMING] is False
    expected = agentwatch.PriceTable().cost("sim-large", 42, fake_openai.tokens, 16)
    assert attrs[sc.AW_COST_USD] == pytest.approx(expected) and run.cost_usd == pytest.approx(expected)
    assert sc.GEN_AI_INPUT_MESSAGES not in attrs  # content capture is off by default
    (span,) = traced.kind(sc.KIND_LLM)
    traceparent = fake_openai.requests[0]["headers"]["traceparent"]
    version, trace_id, parent_id, flags = traceparent.split("-")
    assert (version, trace_id, parent_id) == ("00", f"{span.context.trace_id:032x}", f"{span.context.span_id:016x}")
    assert int(flags, 16) & 1  # sampled


def test_streaming_measures_ttft_and_tpot_and_hides_the_usage_chunk(traced: Spans, fake_openai: FakeOpenAI) -> None:
    stream = _client(fake_openai).chat.completions.create(model="sim-small", messages=MESSAGES, stream=True)
    chunks = list(stream)
    assert all(chunk.choices for chunk in chunks), "the usage-only chunk the SDK asked for leaked"
    assert "".join(c.choices[0].delta.content or "" for c in chunks).split() == ["word"] * fake_openai.tokens
    request = fake_openai.requests[0]["body"]
    assert request["stream_options"] == {"include_usage": True}
    attrs = _llm_attrs(traced)
    assert attrs[sc.AW_STREAMING] is True
    assert attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == fake_openai.tokens
    assert attrs[sc.GEN_AI_USAGE_INPUT_TOKENS] == FakeOpenAI.PROMPT_TOKENS
    _assert_streamed_timing(traced.kind(sc.KIND_LLM)[0], fake_openai, fake_openai.tokens)


def test_caller_stream_options_are_respected(traced: Spans, fake_openai: FakeOpenAI) -> None:
    chunks = list(
        _client(fake_openai).chat.completions.create(
            model="sim-small", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        )
    )
    assert chunks[-1].usage is not None and not chunks[-1].choices  # they asked: they get it
    chunks = list(
        _client(fake_openai).chat.completions.create(
            model="sim-small", messages=MESSAGES, stream=True, stream_options={"include_usage": False}
        )
    )
    assert fake_openai.requests[1]["body"]["stream_options"] == {"include_usage": False}
    no_usage = [s for s in traced.kind(sc.KIND_LLM)][1]
    # without usage the SDK counts content chunks (one token each on vLLM-like servers)
    assert no_usage.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == fake_openai.tokens


def test_streamed_tool_call_counts_first_tool_chunk_as_first_token(traced: Spans, fake_openai: FakeOpenAI) -> None:
    stream = _client(fake_openai).chat.completions.create(
        model="sim-small", messages=MESSAGES, tools=TOOLS, stream=True
    )
    names = [tc.function.name for c in stream for tc in (c.choices[0].delta.tool_calls or []) if tc.function.name]
    assert names == ["search"]
    attrs = _llm_attrs(traced)
    assert list(attrs[sc.GEN_AI_RESPONSE_FINISH_REASONS]) == ["tool_calls"]  # type: ignore[call-overload]
    (span,) = traced.kind(sc.KIND_LLM)
    assert fake_openai.ttft_s <= attrs[sc.AW_TTFT] < (span.end_time - span.start_time) / 1e9  # type: ignore[operator]


def test_non_streaming_tool_call(traced: Spans, fake_openai: FakeOpenAI) -> None:
    response = _client(fake_openai).chat.completions.create(model="sim-small", messages=MESSAGES, tools=TOOLS)
    assert response.choices[0].message.tool_calls[0].function.name == "search"
    assert list(_llm_attrs(traced)[sc.GEN_AI_RESPONSE_FINISH_REASONS]) == ["tool_calls"]  # type: ignore[call-overload]


async def test_async_streaming_and_non_streaming(traced: Spans, fake_openai: FakeOpenAI) -> None:
    client = _async_client(fake_openai)
    async with agentwatch.run("async-agent"):
        stream = await client.chat.completions.create(model="sim-small", messages=MESSAGES, stream=True)
        chunks = [chunk async for chunk in stream]
        await client.chat.completions.create(model="sim-small", messages=MESSAGES)
    assert chunks and all(chunk.choices for chunk in chunks)
    streamed, plain = traced.kind(sc.KIND_LLM)
    assert fake_openai.ttft_s <= streamed.attributes[sc.AW_TTFT] < (streamed.end_time - streamed.start_time) / 1e9
    assert streamed.attributes[sc.AW_STEP_INDEX] == 0 and plain.attributes[sc.AW_STEP_INDEX] == 1
    assert plain.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == fake_openai.tokens
    assert traced.one("invoke_agent async-agent").attributes[sc.AW_RUN_LLM_CALLS] == 2


def test_errors_are_recorded_and_reraised(traced: Spans) -> None:
    client = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="sk-test", max_retries=0, timeout=2)
    with pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(model="sim-small", messages=MESSAGES)
    attrs = _llm_attrs(traced)
    assert attrs[sc.ERROR_TYPE] == "openai.APIConnectionError"


def test_budget_is_checked_before_the_call(traced: Spans, fake_openai: FakeOpenAI) -> None:
    client = _client(fake_openai)
    with pytest.raises(agentwatch.BudgetExceeded, match="cost") as caught:
        with agentwatch.run("spender", budget=agentwatch.Budget(max_cost_usd=1e-6)):
            for _ in range(5):
                client.chat.completions.create(model="sim-large", messages=MESSAGES)
    assert len(fake_openai.requests) == 1  # the second call never left the process
    assert caught.value.limit == "cost" and caught.value.over_by > 0
    run_attrs = traced.one("invoke_agent spender").attributes
    assert run_attrs[sc.AW_BUDGET_EXCEEDED] == "cost" and run_attrs[sc.AW_RUN_OUTCOME] == "abandoned"


def test_content_capture_is_redacted(fake_openai: FakeOpenAI) -> None:
    spans = init_with_memory(
        instrument_openai=True, capture_content=True, redact=lambda text: text.replace("paged attention", "[topic]")
    )
    list(_client(fake_openai).chat.completions.create(model="sim-small", messages=MESSAGES, stream=True))
    attrs = _llm_attrs(spans)
    captured = str(attrs[sc.GEN_AI_INPUT_MESSAGES])
    assert "[topic]" in captured and "paged attention" not in captured
    assert "sk-abcdef" not in captured and "[REDACTED]" in captured
    assert "word word" in str(attrs[sc.GEN_AI_OUTPUT_MESSAGES])


def test_pass_through_when_not_initialised_or_suppressed(fake_openai: FakeOpenAI) -> None:
    assert agentwatch.instrument_openai() is True  # patched, but tracing is off
    response = _client(fake_openai).chat.completions.create(model="sim-small", messages=MESSAGES)
    assert response.choices[0].message.content
    assert "traceparent" not in fake_openai.requests[0]["headers"]
    spans = init_with_memory(instrument_openai=True)
    token = otel_context.attach(suppressed_context())
    try:
        _client(fake_openai).chat.completions.create(model="sim-small", messages=MESSAGES)
    finally:
        otel_context.detach(token)
    assert spans.kind(sc.KIND_LLM) == []
    assert "traceparent" not in fake_openai.requests[1]["headers"]
