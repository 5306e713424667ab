"""An agent run traced by OpenTelemetry's ``opentelemetry-instrumentation-openai-v2``, with a
manual root span and tool spans in the GenAI conventions (``invoke_agent``, ``execute_tool``)."""

from __future__ import annotations

import time
from typing import Any

from _common import (
    AGENT_NAME,
    TOOL_FUNCTIONS,
    MemoryExporter,
    begin,
    finish,
    openai_client,
    otlp_exporter,
    parse_args,
    research,
)
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode


def main() -> None:
    args = parse_args("openai-v2")
    provider = TracerProvider(resource=Resource.create({"service.name": f"clients-openai-v2-{args.mode}"}))
    memory = MemoryExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    provider.add_span_processor(SimpleSpanProcessor(otlp_exporter(args.collector, args.key)))
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    tracer = provider.get_tracer("tests.clients.openai_v2")

    def run_tool(name: str, arguments: dict[str, Any], call_id: str) -> str:
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
        }
        with tracer.start_as_current_span(f"execute_tool {name}", attributes=attributes) as span:
            try:
                return TOOL_FUNCTIONS[name](**arguments)
            except Exception as exc:
                span.set_attribute("error.type", type(exc).__qualname__)
                span.set_status(Status(StatusCode.ERROR, str(exc)))
                raise

    outcome = begin("openai-v2", args.mode)
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": AGENT_NAME, "gen_ai.system": "openai"}
    with tracer.start_as_current_span(f"invoke_agent {AGENT_NAME}", attributes=attributes) as root:
        outcome.trace_id = f"{root.get_span_context().trace_id:032x}"
        research(
            outcome,
            openai_client(args.engine, inject=outcome.traceparents if args.mode == "traceparent" else None),
            run_tool=run_tool,
        )
    provider.shutdown()
    outcome.end = time.time()
    finish(outcome, memory)


if __name__ == "__main__":
    main()
