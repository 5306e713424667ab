"""An agent run traced by Arize's ``openinference-instrumentation-openai``, with manual spans in
the OpenInference conventions: an ``AGENT`` root, a ``CHAIN`` per step, a ``TOOL`` per tool call."""

from __future__ import annotations

import json
import time
from typing import Any

from _common import (
    AGENT_NAME,
    QUESTION,
    TOOL_FUNCTIONS,
    MemoryExporter,
    StepFunction,
    begin,
    finish,
    openai_client,
    otlp_exporter,
    parse_args,
    research,
)
from openinference.instrumentation.openai import OpenAIInstrumentor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode


def main() -> None:
    args = parse_args("openinference")
    provider = TracerProvider(resource=Resource.create({"service.name": f"clients-openinference-{args.mode}"}))
    memory = MemoryExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    provider.add_span_processor(SimpleSpanProcessor(otlp_exporter(args.collector, args.key)))
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    tracer = provider.get_tracer("tests.clients.openinference")

    def step(function: StepFunction) -> StepFunction:
        def traced(index: int) -> None:
            with tracer.start_as_current_span(f"step {index}", attributes={"openinference.span.kind": "CHAIN"}):
                function(index)

        return traced

    def run_tool(name: str, arguments: dict[str, Any], call_id: str) -> str:
        attributes = {
            "openinference.span.kind": "TOOL",
            "tool.name": name,
            "tool.parameters": json.dumps(arguments),
            "input.value": json.dumps(arguments),
            "input.mime_type": "application/json",
            "tool_call.id": call_id,
        }
        with tracer.start_as_current_span(name, attributes=attributes) as span:
            try:
                result = TOOL_FUNCTIONS[name](**arguments)
            except Exception as exc:
                span.record_exception(exc)
                span.set_status(Status(StatusCode.ERROR, str(exc)))
                raise
            span.set_attribute("output.value", result)
            return result

    outcome = begin("openinference", args.mode)
    attributes = {"openinference.span.kind": "AGENT", "agent.name": AGENT_NAME, "input.value": QUESTION}
    with tracer.start_as_current_span(AGENT_NAME, attributes=attributes) as root:
        outcome.trace_id = f"{root.get_span_context().trace_id:032x}"
        research(
            outcome,
            openai_client(args.engine, inject=outcome.traceparents if args.mode == "traceparent" else None),
            step=step,
            run_tool=run_tool,
        )
        root.set_status(Status(StatusCode.OK))
    provider.shutdown()
    outcome.end = time.time()
    finish(outcome, memory)


if __name__ == "__main__":
    main()
