"""An agent run traced by Traceloop's OpenLLMetry (``traceloop-sdk``) its own way:
``@workflow`` root, ``@agent``, a ``@task`` per step and ``@tool`` tools.

Traceloop's OpenAI instrumentation injects ``traceparent`` (parented on its LLM span) by
itself, so ``traceparent`` mode is its default; ``plain`` mode turns that off through the
instrumentation's own setting (``Config.enable_trace_context_propagation``), as a deployment
whose gateway drops the header would see it."""

from __future__ import annotations

import os
import time
from typing import Any

os.environ.setdefault("TRACELOOP_TELEMETRY", "false")

from _common import (  # noqa: E402
    AGENT_NAME,
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
from opentelemetry import trace  # noqa: E402
from opentelemetry.instrumentation.openai.shared.config import Config  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.trace import get_current_span  # noqa: E402
from traceloop.sdk import Traceloop  # noqa: E402
from traceloop.sdk.decorators import agent, task, tool, workflow  # noqa: E402
from traceloop.sdk.instruments import Instruments  # noqa: E402

TOOLS = {name: tool(name=name)(function) for name, function in TOOL_FUNCTIONS.items()}


def run_tool(name: str, arguments: dict[str, Any], call_id: str) -> str:
    return TOOLS[name](**arguments)


def step(function: StepFunction) -> StepFunction:
    return task(name="step")(function)


def main() -> None:
    args = parse_args("traceloop")
    memory = MemoryExporter()
    Traceloop.init(
        app_name=f"clients-traceloop-{args.mode}",
        disable_batch=True,
        telemetry_enabled=False,
        processor=[SimpleSpanProcessor(memory), SimpleSpanProcessor(otlp_exporter(args.collector, args.key))],
        instruments={Instruments.OPENAI},
    )
    Config.enable_trace_context_propagation = args.mode == "traceparent"
    outcome = begin("traceloop", args.mode)
    client = openai_client(args.engine)

    @agent(name=AGENT_NAME)
    def researcher() -> None:
        research(outcome, client, step=step, run_tool=run_tool)

    @workflow(name="research_run")
    def research_run() -> None:
        outcome.trace_id = f"{get_current_span().get_span_context().trace_id:032x}"
        researcher()

    research_run()
    provider: Any = trace.get_tracer_provider()
    provider.force_flush()
    provider.shutdown()
    outcome.end = time.time()
    finish(outcome, memory)


if __name__ == "__main__":
    main()
