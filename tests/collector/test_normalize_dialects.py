"""Latency, names and step boundaries from every dialect (docs/dialects.md).

The attribute sets are what the real instrumentations emit for a chat call against an
OpenAI-compatible server: openlit 1.45 (``instrumentation/openai/utils.py``),
openinference-instrumentation-openai 0.1.66 (``_stream.py``), traceloop-sdk 0.45.6 with
opentelemetry-instrumentation-openai 0.45.6 (``decorators/base.py``, ``shared/chat_wrappers.py``),
opentelemetry-instrumentation-openai-v2 2.4b0 (``patch.py``).
"""

from __future__ import annotations

from typing import Any

import pytest

from agentwatch_platform.collector.ingest.normalize import Normalizer, normalize_span, sdk_pricer

PRICED = Normalizer(pricer=sdk_pricer())
PARENT = "a" * 16
START = 1_750_000_000_000_000_000
MS = 1_000_000
END = START + 900 * MS


def _llm(attributes: dict[str, Any], events: list[dict[str, Any]] | None = None, **kw: Any):
    return normalize_span(
        attributes,
        name=kw.pop("name", "chat gpt-4o-mini"),
        parent_span_id=PARENT,
        start_time_ns=START,
        end_time_ns=END,
        events=events,
        **kw,
    )


def _event(name: str, at_ms: float) -> dict[str, Any]:
    return {"name": name, "time_ns": START + int(at_ms * MS), "attributes": {}}


# --- TTFT and TPOT ----------------------------------------------------------------------------

OPENLIT_STREAM = {
    "telemetry.sdk.name": "openlit",
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "openai",
    "server.address": "127.0.0.1",
    "server.port": 8000,
    "gen_ai.request.model": "gpt-4o-mini",
    "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
    "deployment.environment": "default",
    "service.name": "default",
    "gen_ai.request.stream": True,
    "gen_ai.server.time_per_output_token": 0.0125,
    "gen_ai.server.time_to_first_token": 0.2146,
    "gen_ai.sdk.version": "1.45.0",
    "gen_ai.response.id": "chatcmpl-7",
    "gen_ai.response.finish_reasons": ["stop"],
    "gen_ai.usage.input_tokens": 412,
    "gen_ai.usage.output_tokens": 57,
    "gen_ai.client.token.usage": 469,
    "gen_ai.usage.cost": 0.000096,
    "gen_ai.usage.cache_read.input_tokens": 256,
    "gen_ai.output.type": "text",
}


def test_openlit_stream_gives_ttft_and_tpot_in_seconds() -> None:
    row = _llm(OPENLIT_STREAM)
    assert (row.kind, row.ttft_s, row.tpot_s) == ("llm", 0.2146, 0.0125)
    assert (row.input_tokens, row.output_tokens, row.cached_tokens) == (412, 57, 256)
    assert row.attributes["gen_ai.server.time_to_first_token"] == "0.2146"  # kept as sent, too


def test_openlit_call_not_streamed_has_no_ttft() -> None:
    """openlit records a non-streamed call's whole duration as TTFT and 0 as TPOT."""
    row = _llm(
        {
            **OPENLIT_STREAM,
            "gen_ai.request.stream": False,
            "gen_ai.server.time_to_first_token": 0.9,
            "gen_ai.server.time_per_output_token": 0,
        }
    )
    assert (row.ttft_s, row.tpot_s) == (None, None)


def test_openlit_negative_ttft_is_dropped() -> None:
    row = _llm({**OPENLIT_STREAM, "gen_ai.server.time_to_first_token": -3.0})
    assert (row.ttft_s, row.tpot_s) == (None, 0.0125)


OPENINFERENCE_LLM = {
    "openinference.span.kind": "LLM",
    "llm.model_name": "gpt-4o-mini-2024-07-18",
    "llm.provider": "openai",
    "llm.system": "openai",
    "llm.token_count.prompt": 412,
    "llm.token_count.completion": 57,
    "llm.token_count.total": 469,
    "llm.token_count.prompt_details.cache_read": 256,
    "input.mime_type": "application/json",
    "output.mime_type": "application/json",
    "llm.invocation_parameters": '{"model": "gpt-4o-mini", "stream": true, "stream_options": {"include_usage": true}}',
}


def test_openinference_first_token_event_gives_ttft_and_tpot() -> None:
    row = _llm(OPENINFERENCE_LLM, [_event("First Token Stream Event", 180)], name="ChatCompletion")
    assert (row.kind, row.model, row.cached_tokens) == ("llm", "gpt-4o-mini-2024-07-18", 256)
    assert row.ttft_s == pytest.approx(0.180)
    assert row.tpot_s == pytest.approx(0.720 / 56)  # first token to the span end, over the other tokens
    assert "First Token Stream Event" in row.events


def test_openinference_without_stream_has_no_ttft() -> None:
    row = _llm(OPENINFERENCE_LLM, name="ChatCompletion")
    assert (row.ttft_s, row.tpot_s) == (None, None)


TRACELOOP_LLM = {
    "llm.request.type": "chat",
    "gen_ai.system": "openai",
    "gen_ai.request.model": "gpt-4o-mini",
    "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
    "gen_ai.response.id": "chatcmpl-8",
    "llm.is_streaming": True,
    "llm.headers": "None",
    "gen_ai.openai.api_base": "http://127.0.0.1:8000/v1/",
    "gen_ai.usage.prompt_tokens": 412,
    "gen_ai.usage.completion_tokens": 57,
    "llm.usage.total_tokens": 469,
    "gen_ai.usage.cache_read_input_tokens": 256,
    "traceloop.workflow.name": "researcher",
    "traceloop.entity.path": "plan",
}


def test_traceloop_chunk_events_give_ttft_and_tpot() -> None:
    chunks = [_event("llm.content.completion.chunk", 150 + 10 * i) for i in range(58)]  # role chunk .. usage chunk
    row = _llm(TRACELOOP_LLM, chunks, name="openai.chat")
    assert (row.kind, row.input_tokens, row.output_tokens, row.cached_tokens) == ("llm", 412, 57, 256)
    assert row.ttft_s == pytest.approx(0.150)
    assert row.tpot_s == pytest.approx(0.570 / 56)  # first chunk to the last, over the other tokens
    assert row.agent_name == "researcher"


def test_stream_events_outside_the_span_are_ignored() -> None:
    row = _llm(
        TRACELOOP_LLM, [_event("llm.content.completion.chunk", -5), _event("llm.content.completion.chunk", 5000)]
    )
    assert (row.ttft_s, row.tpot_s) == (None, None)


def test_client_ttft_wins_over_events_and_openlit() -> None:
    sdk = {**OPENLIT_STREAM, "agentwatch.llm.ttft": 0.3, "agentwatch.llm.tpot": 0.02}
    row = _llm(sdk, [_event("First Token Stream Event", 180)])
    assert (row.ttft_s, row.tpot_s) == (0.3, 0.02)
    row = _llm(
        {**OPENLIT_STREAM, "gen_ai.response.time_to_first_chunk": 0.25}, [_event("First Token Stream Event", 180)]
    )
    assert row.ttft_s == 0.25


OPENAI_V2 = {
    "gen_ai.operation.name": "chat",
    "gen_ai.system": "openai",
    "gen_ai.request.model": "gpt-4o-mini",
    "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
    "gen_ai.response.id": "chatcmpl-9",
    "gen_ai.response.finish_reasons": ["stop"],
    "gen_ai.usage.input_tokens": 412,
    "gen_ai.usage.output_tokens": 57,
    "server.address": "127.0.0.1",
    "server.port": 8000,
}


def test_openai_v2_records_no_ttft_and_the_newer_first_chunk_name_is_read() -> None:
    """openai-v2 2.4b0 records no first-token time; its TTFT comes from a joined engine span."""
    assert _llm(OPENAI_V2).ttft_s is None
    assert _llm({**OPENAI_V2, "gen_ai.response.time_to_first_chunk": 0.21}).ttft_s == 0.21


# --- names and step boundaries ----------------------------------------------------------------


def _traceloop(kind: str, entity: str, workflow: str, path: str | None = None, parent: str = PARENT):
    attributes = {
        "traceloop.span.kind": kind,
        "traceloop.entity.name": entity,
        "traceloop.workflow.name": workflow,
        "traceloop.entity.input": '{"args": [], "kwargs": {}}',
        "traceloop.entity.output": '"done"',
    }
    if path is not None:
        attributes["traceloop.entity.path"] = path
    return normalize_span(attributes, name=f"{entity}.{kind}", parent_span_id=parent)


def test_traceloop_workflow_agent_task_tool() -> None:
    """@workflow("research") > @agent("researcher") > @task("plan") > @tool("search"), as traceloop-sdk 0.45 records them."""
    workflow = _traceloop("workflow", "research", "research", parent="")
    agent = _traceloop("agent", "researcher", "researcher")
    task = _traceloop("task", "plan", "researcher")
    tool = _traceloop("tool", "search", "researcher", path="plan")
    assert (workflow.kind, workflow.agent_name) == ("run", "research")
    assert (agent.kind, agent.agent_name) == ("run", "researcher")  # the agent, not a step
    assert (task.kind, task.agent_name) == ("step", "researcher")
    assert (tool.kind, tool.tool_name, tool.agent_name) == ("tool", "search", "researcher")


def test_traceloop_root_agent_is_the_run_and_nested_task_is_not_another_step() -> None:
    assert _traceloop("agent", "researcher", "researcher", parent="").kind == "run"
    assert _traceloop("task", "fetch_page", "researcher", path="plan").kind == "other"
    assert _traceloop("task", "plan", "researcher", parent="").kind == "run"


def test_traceloop_tool_keeps_an_explicit_tool_name() -> None:
    row = normalize_span(
        {"traceloop.span.kind": "tool", "traceloop.entity.name": "search", "gen_ai.tool.name": "web_search"},
        parent_span_id=PARENT,
    )
    assert row.tool_name == "web_search"


def test_openinference_agent_chain_tool() -> None:
    agent = normalize_span({"openinference.span.kind": "AGENT", "input.value": "q"}, name="ResearchAgent.run")
    named = normalize_span(
        {"openinference.span.kind": "AGENT", "agent.name": "researcher"}, name="Agent.run", parent_span_id=PARENT
    )
    chain = normalize_span({"openinference.span.kind": "CHAIN"}, name="Step 1", parent_span_id=PARENT)
    tool = normalize_span(
        {"openinference.span.kind": "TOOL", "tool.name": "search", "tool.parameters": "{}"}, parent_span_id=PARENT
    )
    assert (agent.kind, agent.agent_name) == ("run", "ResearchAgent.run")
    assert (named.kind, named.agent_name) == ("run", "researcher")
    assert chain.kind == "step" and (tool.kind, tool.tool_name) == ("tool", "search")


def test_genai_invoke_agent_and_execute_tool() -> None:
    agent = normalize_span(
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "researcher",
            "gen_ai.agent.id": "a1",
            "gen_ai.provider.name": "openai",
        },
        name="invoke_agent researcher",
    )
    tool = normalize_span(
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "search",
            "gen_ai.tool.call.id": "call_1",
            "gen_ai.tool.type": "function",
        },
        name="execute_tool search",
        parent_span_id=PARENT,
    )
    assert (agent.kind, agent.agent_name) == ("run", "researcher")
    assert (tool.kind, tool.tool_name) == ("tool", "search")


# --- prices -------------------------------------------------------------------------------------


def test_provider_prefixed_model_is_priced() -> None:
    attributes = {
        **OPENAI_V2,
        "gen_ai.request.model": "openai/gpt-4o-mini",
        "gen_ai.response.model": "openai/gpt-4o-mini",
    }
    row = normalize_span(attributes, parent_span_id=PARENT, normalizer=PRICED)
    bare = normalize_span(
        {**OPENAI_V2, "gen_ai.response.model": "gpt-4o-mini"}, parent_span_id=PARENT, normalizer=PRICED
    )
    assert row.cost_usd == pytest.approx(bare.cost_usd) and row.cost_usd > 0
