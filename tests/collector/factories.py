"""Agent-like span trees for storage, query and API tests (plain data, no mocks)."""

from __future__ import annotations

import itertools
import random
from dataclasses import replace

from agentwatch_api.schemas import FeedbackIn
from agentwatch_platform.collector.query import feedback as feedback_query
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.model import SpanRow

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
        spans.append(
            SpanRow(
                **common,
                span_id=step_id,
                parent_span_id=run_id,
                name=f"step {i}",
                kind="step",
                start_time_ns=base,
                end_time_ns=base + 900_000_000,
                step_index=i,
            )
        )
        spans.append(
            SpanRow(
                **common,
                span_id=new_span_id(),
                parent_span_id=step_id,
                name="chat",
                kind="llm",
                start_time_ns=base + 1000,
                end_time_ns=base + 500_000_000,
                model=model,
                input_tokens=tokens[0],
                output_tokens=tokens[1],
                cost_usd=cost_per_call,
                ttft_s=0.1 + 0.01 * i,
                tpot_s=0.02,
                step_index=i,
            )
        )
        failed = i < failing_tools + timed_out_tools
        spans.append(
            SpanRow(
                **common,
                span_id=new_span_id(),
                parent_span_id=step_id,
                name="search",
                kind="tool",
                start_time_ns=base + 600_000_000,
                end_time_ns=base + 800_000_000,
                tool_name="search",
                status_code="error" if failed else "ok",
                is_timeout=failing_tools <= i < failing_tools + timed_out_tools,
            )
        )
    end = t0 + (steps + 1) * 1_000_000_000
    spans.append(
        SpanRow(
            **common,
            span_id=run_id,
            parent_span_id="",
            name=agent,
            kind="run",
            start_time_ns=t0,
            end_time_ns=end,
            status_code=status,
            outcome=outcome,
            budget_exceeded=budget_exceeded,
            is_timeout=status == "timeout",
        )
    )
    return spans


def with_project(rows: list[SpanRow], project: str) -> list[SpanRow]:
    return [replace(r, project=project) for r in rows]


def _known_runs(P: str, T: int) -> dict[str, list[SpanRow]]:
    a = agent_run(project=P, agent="alpha", start_s=T + 60, steps=3, outcome="success")
    a = [
        replace(s, tool_cache_hit=True, attributes={"agentwatch.tool.tokens_saved": "100"}) if s.kind == "tool" else s
        for s in a
    ]
    f = [
        s
        for s in agent_run(project=P, agent="gamma", start_s=T + 2500, steps=2, outcome="success")
        if s.kind in ("run", "llm")
    ]
    f = [
        replace(s, parent_span_id=f[-1].span_id, attributes={"agentwatch.llm.model_tier": "small"})
        if s.kind == "llm"
        else s
        for s in f
    ]
    return {
        "A": a,
        "B": agent_run(
            project=P,
            agent="alpha",
            start_s=T + 700,
            steps=2,
            model="sim-large",
            cost_per_call=0.05,
            outcome="failure",
            failing_tools=1,
            status="error",
        ),
        "C": agent_run(
            project=P, agent="beta", start_s=T + 1300, steps=4, outcome="success", timed_out_tools=1, status="timeout"
        ),
        "D": agent_run(project=P, agent="beta", start_s=T + 1900, steps=1, budget_exceeded="cost", status="error"),
        "F": f,
        "E": agent_run(project=P, agent="alpha", start_s=T - 1800, steps=1, outcome="failure"),  # previous period
        "G": agent_run(project=P, agent="beta", start_s=T - 1200, steps=2, outcome="success"),
    }


def seed_known_runs(store: Store, P: str, T: int) -> dict[str, list[SpanRow]]:
    """Runs A-F in [T, T+3600) and E, G in the hour before, feedback and engine metrics of
    project P (and run A again in project q2); tests/collector/test_query.py derives the figures."""
    runs = _known_runs(P, T)
    for rows in runs.values():
        store.insert_spans(rows)
    store.insert_spans(with_project(runs["A"], "q2"))
    for score in (1.0, 0.5):
        feedback_query.add_feedback(store, P, runs["A"][0].trace_id, FeedbackIn(score=score, label="good"))
    feedback_query.add_feedback(
        store, P, runs["B"][0].trace_id, FeedbackIn(score=0.0, comment="wrong answer", source="eval")
    )
    metrics = [
        (P, "e1", T + 60, "vllm:num_requests_running", {"model_name": "sim-small"}, 2.0),
        (P, "e1", T + 70, "vllm:num_requests_running", {"model_name": "sim-small"}, 4.0),
        (P, "e1", T + 60, "vllm:generation_tokens_total", {"model_name": "sim-small"}, 100.0),
        (P, "e1", T + 70, "vllm:generation_tokens_total", {"model_name": "sim-small"}, 200.0),
        (P, "e1", T + 60, "gpu:utilization", {"gpu": "0"}, 50.0),
        (P, "e1", T + 120, "gpu:utilization", {"gpu": "0"}, 70.0),
        ("q2", "e2", T + 60, "vllm:num_requests_running", {}, 1.0),
    ]
    store.insert_rows("engine_metrics", ("project", "engine", "ts", "metric", "labels", "value"), metrics)
    return runs
