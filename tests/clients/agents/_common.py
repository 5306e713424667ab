"""What every client agent script shares: the command line, the research loop against the
simulated engine, the tools (one of which fails), the usage the OpenAI client received, and a
dump of every span the client emitted.

A script runs in whichever virtual environment holds its instrumentation (see
``tests/clients/conftest.py``), so this module needs only ``openai`` and the OpenTelemetry
API and SDK: never ``agentwatch`` nor ``tests``. The script prints one JSON object (its
``Outcome``) as the last line of stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

MODEL = "sim-large"
AGENT_NAME = "researcher"
QUESTION = "Question: how does continuous batching change queue time"
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
            "description": "fetch one document",
            "parameters": {"type": "object", "properties": {"doc_id": {"type": "string"}}, "required": ["doc_id"]},
        },
    },
]
LLM_CALLS = 3  # search (plain), fetch (streamed, the tool then fails), answer (no tools)
STREAMED_CALL = 1


class FetchFailed(ConnectionError):
    """The failing tool's error."""


def search(query: str) -> str:
    """A tool that works: two documents the model then wants to fetch."""
    return json.dumps(
        [
            {"id": "batching-01", "title": f"Continuous batching ({query})"},
            {"id": "queues-02", "title": "Queue time under load"},
        ]
    )


def fetch(doc_id: str) -> str:
    """A tool that fails, as a flaky upstream does."""
    raise FetchFailed(f"fetch {doc_id}: upstream reset the connection")


TOOL_FUNCTIONS: dict[str, Callable[..., str]] = {"search": search, "fetch": fetch}


@dataclass
class Call:
    """One LLM call as the OpenAI client saw it."""

    response_id: str
    model: str
    stream: bool
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    finish_reason: str
    tool_calls: list[str]
    first_chunk_s: float | None = None  # streams: seconds from the request to the first content chunk


@dataclass
class Outcome:
    """What a script prints: the run's trace, its time window and what the client received."""

    client: str
    mode: str
    trace_id: str = ""
    start: float = 0.0
    end: float = 0.0
    calls: list[Call] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)  # name, ok
    spans: list[dict[str, Any]] = field(default_factory=list)  # every span the client emitted
    traceparents: list[str] = field(default_factory=list)  # what our request hook sent (see openai_client)


def begin(client: str, mode: str) -> Outcome:
    """Waits for the test's go (a line on stdin) once the set-up is done, then starts the clock."""
    sys.stdin.readline()
    return Outcome(client, mode, start=time.time())


def parse_args(client: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=f"a small agent run instrumented by {client}")
    parser.add_argument("--collector", required=True, help="collector base URL")
    parser.add_argument("--key", required=True, help="project API key")
    parser.add_argument("--engine", required=True, help="simulated engine base URL (…/v1)")
    parser.add_argument(
        "--mode",
        choices=("plain", "traceparent"),
        required=True,
        help="plain: traceparent does not reach the engine; traceparent: it does",
    )
    return parser.parse_args()


class MemoryExporter(SpanExporter):
    """Keeps every span, for the dump (``SimpleSpanProcessor(MemoryExporter())``)."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


def _value(value: Any) -> Any:
    if isinstance(value, str):
        return value if len(value) <= 160 else value[:160] + "…"
    if isinstance(value, tuple | list):
        return [_value(v) for v in value]
    return value


def dump(span: ReadableSpan) -> dict[str, Any]:
    """One span as plain data: names, kind, ids, status, attributes and events."""
    context = span.get_span_context()
    return {
        "name": span.name,
        "kind": span.kind.name,
        "scope": span.instrumentation_scope.name if span.instrumentation_scope else "",
        "trace_id": f"{context.trace_id:032x}",
        "span_id": f"{context.span_id:016x}",
        "parent_span_id": f"{span.parent.span_id:016x}" if span.parent else "",
        "status": span.status.status_code.name,
        "start": (span.start_time or 0) / 1e9,
        "end": (span.end_time or 0) / 1e9,
        "attributes": {k: _value(v) for k, v in (span.attributes or {}).items()},
        "events": [
            {
                "name": e.name,
                "offset_s": round((e.timestamp - (span.start_time or 0)) / 1e9, 6),
                "attributes": {k: _value(v) for k, v in (e.attributes or {}).items()},
            }
            for e in span.events
        ],
    }


def _usage_of(usage: Any) -> tuple[int, int, int]:
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", 0) or 0
    return usage.prompt_tokens, usage.completion_tokens, cached


def _plain_call(client: Any, kwargs: dict[str, Any]) -> tuple[Call, dict[str, Any]]:
    response = client.chat.completions.create(**kwargs)
    choice = response.choices[0]
    calls = list(choice.message.tool_calls or [])
    prompt, completion, cached = _usage_of(response.usage)
    message: dict[str, Any] = {"role": "assistant", "content": choice.message.content}
    if calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
            for c in calls
        ]
    call = Call(
        response.id,
        response.model,
        False,
        prompt,
        completion,
        cached,
        choice.finish_reason,
        [c.function.name for c in calls],
    )
    return call, message


def _streamed_call(client: Any, kwargs: dict[str, Any]) -> tuple[Call, dict[str, Any]]:
    started = time.monotonic()
    first: float | None = None
    stream = client.chat.completions.create(**kwargs, stream=True, stream_options={"include_usage": True})
    response_id, model, finish, usage, content = "", "", "", None, ""
    calls: dict[int, dict[str, Any]] = {}
    for chunk in stream:
        response_id, model = chunk.id, chunk.model
        usage = chunk.usage or usage
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            delta = choice.delta
            if first is None and (delta.content or delta.tool_calls):
                first = time.monotonic() - started
            content += delta.content or ""
            for piece in delta.tool_calls or ():
                entry = calls.setdefault(
                    piece.index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
                )
                entry["id"] = piece.id or entry["id"]
                if piece.function is not None:
                    entry["function"]["name"] += piece.function.name or ""
                    entry["function"]["arguments"] += piece.function.arguments or ""
    if usage is None:
        raise RuntimeError("the stream ended without usage although include_usage was asked for")
    prompt, completion, cached = _usage_of(usage)
    ordered = [calls[i] for i in sorted(calls)]
    message: dict[str, Any] = {"role": "assistant", "content": content or None}
    if ordered:
        message["tool_calls"] = ordered
    call = Call(
        response_id, model, True, prompt, completion, cached, finish, [c["function"]["name"] for c in ordered], first
    )
    return call, message


StepFunction = Callable[[int], None]
StepWrapper = Callable[[StepFunction], StepFunction]
ToolRunner = Callable[[str, dict[str, Any], str], str]


def plain_tool(name: str, arguments: dict[str, Any], call_id: str) -> str:
    """Runs a tool without a span of its own (for libraries whose decorators wrap the tool)."""
    return TOOL_FUNCTIONS[name](**arguments)


def no_step(function: StepFunction) -> StepFunction:
    return function


def research(outcome: Outcome, client: Any, *, step: StepWrapper = no_step, run_tool: ToolRunner = plain_tool) -> None:
    """The agent loop: search, a streamed call that asks to fetch (the fetch fails), an answer.

    ``step`` wraps the function of one iteration (a library's step span: a decorator);
    ``run_tool(name, arguments, call_id)`` runs one tool the library's way and raises what the
    tool raised."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a research agent. Use the tools, then answer briefly."},
        {"role": "user", "content": QUESTION},
    ]

    @step
    def one_step(index: int) -> None:
        kwargs: dict[str, Any] = {"model": MODEL, "messages": list(messages), "tools": TOOLS, "temperature": 0.0}
        if index == LLM_CALLS - 1:
            kwargs.update(tool_choice="none", max_tokens=24)
        call, message = (_streamed_call if index == STREAMED_CALL else _plain_call)(client, kwargs)
        outcome.calls.append(call)
        messages.append(message)
        for tool_call in message.get("tool_calls", []):
            messages.append(_tool_result(outcome, run_tool, tool_call))

    for index in range(LLM_CALLS):
        one_step(index)
    expected = [["search"], ["fetch"], []]
    got = [c.tool_calls for c in outcome.calls]
    if got != expected:
        raise RuntimeError(f"the simulated engine's policy changed: tool calls per LLM call {got}, expected {expected}")


def _tool_result(outcome: Outcome, run_tool: ToolRunner, tool_call: dict[str, Any]) -> dict[str, Any]:
    name = tool_call["function"]["name"]
    arguments = json.loads(tool_call["function"]["arguments"] or "{}")
    try:
        result = run_tool(name, arguments, tool_call["id"])
        outcome.tools.append({"name": name, "ok": True})
    except FetchFailed as exc:
        result = f"error: {exc}"
        outcome.tools.append({"name": name, "ok": False})
    return {"role": "tool", "tool_call_id": tool_call["id"], "content": result}


def finish(outcome: Outcome, memory: MemoryExporter) -> None:
    """Prints the outcome (with every span the client emitted) as the last line of stdout, and
    exits; call it after the tracer provider's shutdown."""
    outcome.spans = [dump(span) for span in sorted(memory.spans, key=lambda s: s.start_time or 0)]
    print(json.dumps(asdict(outcome)), flush=True)
    sys.stderr.flush()
    os._exit(0)  # the spans are exported: skip the interpreter's teardown (the next run waits for it)


def openai_client(engine: str, *, inject: list[str] | None = None) -> Any:
    """The OpenAI client of the engine; with ``inject`` (a list that collects what was sent), a
    request hook writes the W3C ``traceparent`` of the span current at send time (the
    instrumentation's LLM span) into each request, as a user does for a library that does not
    propagate it. openai 3 sends through ``httpx2``, which OpenTelemetry's httpx
    instrumentation does not patch, hence a hook."""
    import openai
    from opentelemetry.propagate import inject as otel_inject

    def add_traceparent(request: Any) -> None:
        carrier: dict[str, str] = {}
        otel_inject(carrier)
        if "traceparent" in carrier and inject is not None:
            request.headers["traceparent"] = carrier["traceparent"]
            inject.append(carrier["traceparent"])

    options: dict[str, Any] = {}
    if inject is not None:
        options["http_client"] = openai.DefaultHttpxClient(event_hooks={"request": [add_traceparent]})
    return openai.OpenAI(base_url=engine, api_key="sk-sim-not-a-real-key", max_retries=0, timeout=60, **options)


def otlp_exporter(collector: str, key: str) -> Any:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=collector.rstrip("/") + "/v1/traces", headers={"Authorization": f"Bearer {key}"})
