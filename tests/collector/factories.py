"""Agent-like span trees for storage, query and API tests (plain data, no mocks)."""

from __future__ import annotations

import itertools
import random
from dataclasses import replace

from collector.model import SpanRow

_ids = itertools.count(1)


def new_trace_id(rng: random.Random | None = None) -> str:
    return f"{(rng or random).getrandbits(128):032x}"


def new_span_id() -> str:
    return f"{next(_ids):016x}"


def agent_run(
    *,
    project: str = "p1",
    agent: str = "researcher",
    start_s: float,
    steps: int = 3,
    model: str = "sim-small",
    cost_per_call: float = 0.01,
    tokens: tuple[int, int] = (100, 20),
    failing_tools: int = 0,
    timed_out_tools: int = 0,
    status: str = "ok",
    outcome: str = "",
    budget_exceeded: str = "",
    trace_id: str | None = None,
) -> list[SpanRow]:
    """A run span, ``steps`` step spans, each with one LLM call and one tool call."""
    trace_id = trace_id or new_trace_id()
    t0 = int(start_s * 1e9)
    run_id = new_span_id()
    common = {"project": project, "trace_id": trace_id, "agent_name": agent, "service_name": "svc"}
    spans: list[SpanRow] = []
    for i in range(steps):
        step_id = new_span_id()
        base = t0 + (i + 1) * 1_000_000_000
        spans.append(SpanRow(**common, span_id=step_id, parent_span_id=run_id, name=f"step {i}", kind="step", start_time_ns=base, end_time_ns=base + 900_000_000, step_index=i))
        spans.append(SpanRow(
            **common, span_id=new_span_id(), parent_span_id=step_id, name="chat", kind="llm", start_time_ns=base + 1000,
            end_time_ns=base + 500_000_000, model=model, input_tokens=tokens[0], output_tokens=tokens[1],
            cost_usd=cost_per_call, ttft_s=0.1 + 0.01 * i, tpot_s=0.02, step_index=i,
        ))
        failed = i < failing_tools + timed_out_tools
        spans.append(SpanRow(
            **common, span_id=new_span_id(), parent_span_id=step_id, name="search", kind="tool", start_time_ns=base + 600_000_000,
            end_time_ns=base + 800_000_000, tool_name="search", status_code="error" if failed else "ok",
            is_timeout=failing_tools <= i < failing_tools + timed_out_tools,
        ))
    end = t0 + (steps + 1) * 1_000_000_000
    spans.append(SpanRow(
        **common, span_id=run_id, parent_span_id="", name=agent, kind="run", start_time_ns=t0, end_time_ns=end,
        status_code=status, outcome=outcome, budget_exceeded=budget_exceeded, is_timeout=status == "timeout",
    ))
    return spans


def with_project(rows: list[SpanRow], project: str) -> list[SpanRow]:
    return [replace(r, project=project) for r in rows]
