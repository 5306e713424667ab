"""Agent traffic for the alerts tests, exported with the real OpenTelemetry exporter."""

from __future__ import annotations

import random
import time

from agentwatch import semconv as sc
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from tests.support import local_http


def export_traffic(
    url: str, key: str, t0: int, *, minutes: int, spike_minutes: set[int], until: float | None = None
) -> int:
    """Three runs a minute for two agents from ``t0``; 'researcher' uses 20x the tokens in the
    spike minutes. Runs starting after ``until`` are not sent. Returns the number of runs sent."""
    provider = TracerProvider(resource=Resource.create({"service.name": "alerts-test-agent"}))
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{url}/v1/traces", headers={"Authorization": f"Bearer {key}"}))
    )
    tracer = provider.get_tracer("alerts-test")
    rng = random.Random(3)
    runs = 0
    for minute in range(minutes):
        for agent in ("researcher", "writer"):
            for k in range(3):
                start_s = t0 + minute * 60 + k * 15
                if until is not None and start_s + 3 > until:
                    continue
                factor = 20 if agent == "researcher" and minute in spike_minutes else 1
                _run(tracer, agent, start_s * 10**9, int(rng.uniform(3500, 4500) * factor), 200 * factor)
                runs += 1
    assert provider.force_flush(30_000)
    provider.shutdown()
    return runs


def _run(tracer: trace.Tracer, agent: str, start: int, input_tokens: int, output_tokens: int) -> None:
    run = tracer.start_span(
        agent,
        start_time=start,
        attributes={
            sc.AGENTWATCH_SPAN_KIND: sc.KIND_RUN,
            sc.GEN_AI_AGENT_NAME: agent,
            sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT,
        },
    )
    llm = tracer.start_span(
        "chat sim-large",
        context=trace.set_span_in_context(run),
        start_time=start + 10**8,
        attributes={
            sc.AGENTWATCH_SPAN_KIND: sc.KIND_LLM,
            sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT,
            sc.GEN_AI_AGENT_NAME: agent,
            sc.GEN_AI_REQUEST_MODEL: "sim-large",
            sc.GEN_AI_USAGE_INPUT_TOKENS: input_tokens,
            sc.GEN_AI_USAGE_OUTPUT_TOKENS: output_tokens,
        },
    )
    llm.end(end_time=start + 2 * 10**9)
    run.end(end_time=start + 3 * 10**9)


def wait_for_runs(url: str, key: str, start: float, end: float, expected: int) -> None:
    """Until the query API lists ``expected`` runs in [start, end) (ingestion is asynchronous)."""
    deadline = time.monotonic() + 30
    total = -1
    while time.monotonic() < deadline:
        page = local_http.get(
            f"{url}/api/runs",
            params={"start": start, "end": end, "limit": 1},
            headers={"Authorization": f"Bearer {key}"},
            timeout=10,
        ).json()
        total = page["total"]
        if total >= expected:
            return
        time.sleep(0.1)
    raise AssertionError(f"only {total} of {expected} runs stored")
