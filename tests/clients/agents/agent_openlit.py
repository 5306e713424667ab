"""An agent run traced by OpenLIT (``openlit``) its own way: ``openlit.init`` with the collector
as OTLP endpoint, ``openlit.start_trace`` for the root and the tool spans (carrying the GenAI
``invoke_agent`` / ``execute_tool`` attributes through ``set_metadata``), ``openlit.agent_context``
for the agent name on its LLM spans.

openlit instruments httpx itself when ``opentelemetry-instrumentation-httpx`` is there (its own
dependency), which injects ``traceparent``: ``traceparent`` mode is its default; ``plain`` mode
disables that instrumentor (``disabled_instrumentors=["httpx"]``)."""

from __future__ import annotations

import time
from typing import Any

import openlit
from _common import (
    AGENT_NAME,
    TOOL_FUNCTIONS,
    MemoryExporter,
    begin,
    finish,
    openai_client,
    parse_args,
    research,
)
from opentelemetry import trace
from opentelemetry.sdk.trace.export import SimpleSpanProcessor


def run_tool(name: str, arguments: dict[str, Any], call_id: str) -> str:
    with openlit.start_trace(f"execute_tool {name}") as span:
        span.set_metadata(
            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.call.id": call_id}
        )
        result = TOOL_FUNCTIONS[name](**arguments)
        span.set_result(result)
        return result


def main() -> None:
    args = parse_args("openlit")
    openlit.init(
        application_name=f"clients-openlit-{args.mode}",
        otlp_endpoint=args.collector,
        otlp_headers=f"Authorization=Bearer%20{args.key}",
        disable_batch=True,
        disable_metrics=True,
        disable_events=True,
        disabled_instrumentors=[] if args.mode == "traceparent" else ["httpx"],
    )
    provider: Any = trace.get_tracer_provider()
    memory = MemoryExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    outcome = begin("openlit", args.mode)
    with openlit.start_trace(f"invoke_agent {AGENT_NAME}") as root, openlit.agent_context(AGENT_NAME):
        root.set_metadata({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": AGENT_NAME})
        outcome.trace_id = f"{trace.get_current_span().get_span_context().trace_id:032x}"
        research(outcome, openai_client(args.engine), run_tool=run_tool)
    provider.force_flush()
    provider.shutdown()
    outcome.end = time.time()
    finish(outcome, memory)


if __name__ == "__main__":
    main()
