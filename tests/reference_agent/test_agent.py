"""The research agent against the live simulated engine, traced into the live collector.

Everything asserted here is read back from the collector's query API: the span tree, tokens
and costs, context growth per step, cache hits, tool failures and the budget stop.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from agentwatch import semconv as sc

from agentwatch_platform.reference_agent.agent import RunResult
from agentwatch_platform.reference_agent.tools import ToolCache, ToolConfig
from tests.reference_agent.agent_stack import LiveStack, live_stack
from tests.support.poll import wait_until

pytestmark = pytest.mark.slow  # agent runs against the live engine (make test runs it, make quick not)

# the simulated engine's policy wants 5 documents for this question: a long run
LONG_QUESTION = "How does OpenTelemetry affect the semantic conventions?"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveStack]:
    with live_stack(tmp_path_factory.mktemp("agent-stack")) as live:
        yield live


def _spans(detail: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return sorted((s for s in detail["spans"] if s["kind"] == kind), key=lambda s: s["start_time"])


def _decision_inputs(detail: dict[str, Any]) -> list[int]:
    """Input tokens of the calls that chose a tool (one per research step), in order."""
    return [s["input_tokens"] for s in _spans(detail, "llm") if s["finish_reason"] == "tool_calls"]


def test_run_records_span_tree_with_tokens_and_costs(stack: LiveStack) -> None:
    result = asyncio.run(stack.agent(mode="react").run(LONG_QUESTION, user_id="u1", session_id="s1"))
    assert result.outcome == "success" and "[doc-" in result.report
    detail = stack.run_detail(result)

    run = detail["run"]
    assert (run["outcome"], run["status"], run["agent"]) == ("success", "ok", "research-agent")
    assert run["steps"] == result.steps and run["llm_calls"] == result.llm_calls
    assert (run["input_tokens"], run["output_tokens"]) == (result.input_tokens, result.output_tokens)
    assert run["cost_usd"] == pytest.approx(result.cost_usd, rel=1e-6) and run["cost_usd"] > 0
    assert set(run["models"]) == {"sim-small", "sim-large"}

    [root] = [s for s in detail["spans"] if s["kind"] == "run"]
    steps = _spans(detail, "step")
    step_ids = {s["span_id"] for s in steps}
    assert [s["parent_span_id"] for s in steps] == [root["span_id"]] * len(steps)
    assert [s["step_index"] for s in steps] == list(range(len(steps)))
    assert steps[-1]["name"].endswith("synthesize")
    for span in _spans(detail, "llm") + _spans(detail, "tool"):
        assert span["parent_span_id"] in step_ids
    for call in _spans(detail, "llm"):
        assert call["input_tokens"] > 0 and call["output_tokens"] > 0 and call["cost_usd"] > 0
        assert call["ttft_s"] is not None
    synthesis = [c for c in _spans(detail, "llm") if c["model"] == "sim-large"]
    assert len(synthesis) == 1 and synthesis[0]["output_tokens"] > 50
    tiers = {c["model"]: c["attributes"].get(sc.AW_MODEL_TIER) for c in _spans(detail, "llm")}
    assert tiers == {"sim-small": "small", "sim-large": "large"}
    assert {s["tool_name"] for s in _spans(detail, "tool")} == {"search", "fetch", "report"}


def test_react_context_grows_faster_than_linearly_iterative_stays_bounded(stack: LiveStack) -> None:
    react = asyncio.run(stack.agent(mode="react").run(LONG_QUESTION))
    iterative = asyncio.run(stack.agent(mode="iterative").run(LONG_QUESTION))
    grows = _decision_inputs(stack.run_detail(react))
    bounded = _decision_inputs(stack.run_detail(iterative))
    assert len(grows) >= 5 and len(bounded) >= 5

    # ReAct: every step re-sends the history, so a step's input keeps growing and the run's
    # total (the sum over steps) grows with the square of the step count.
    assert all(later > earlier + 100 for earlier, later in zip(grows, grows[1:], strict=False))
    assert grows[-1] >= 4 * grows[0]
    assert sum(grows) > 2 * len(grows) * grows[0]
    # Evolving report: after the first step the context stays within a fixed band.
    assert max(bounded[1:]) <= 1.3 * min(bounded[1:])
    assert grows[-1] > 1.5 * bounded[-1]


def test_tool_cache_hits_are_recorded_with_tokens_saved(stack: LiveStack) -> None:
    question = "Which settings of circuit breakers matter most for the timeout?"
    started = time.time()

    async def twice() -> RunResult:
        agent = stack.agent(mode="iterative", cache=ToolCache())
        first = await agent.run(question)
        assert first.cache_hits == 0
        return await agent.run(question)

    again = asyncio.run(twice())
    assert again.cache_hits > 0 and again.tokens_saved > 0

    tools = _spans(stack.run_detail(again), "tool")
    hits = [t for t in tools if t["tool_cache_hit"]]
    assert len(hits) == again.cache_hits
    assert sum(int(t["attributes"][sc.AW_TOOL_TOKENS_SAVED]) for t in hits) == again.tokens_saved

    # the dashboard's cost levers: cache savings and calls the router sent to the small model
    levers = stack.get("/api/cost", start=started).json()["levers"]
    assert levers["tool_cache_hits"] == again.cache_hits and levers["tokens_saved"] == again.tokens_saved
    assert 0 < levers["small_model_calls"] < levers["llm_calls"]


def test_tool_failures_and_timeouts_are_retried_and_recorded(stack: LiveStack) -> None:
    tools = ToolConfig(latency_s=0.001, failure_rate=0.3, timeout_rate=0.15, hang_s=5.0, seed=4)
    result = asyncio.run(
        stack.agent(mode="iterative", tools=tools, tool_timeout_s=0.2, backoff_s=0.01).run(LONG_QUESTION)
    )
    assert result.tool_failures > 0 and result.tool_timeouts > 0

    detail = stack.run_detail(result)
    failed = [t for t in _spans(detail, "tool") if t["status"] == "error"]
    assert len(failed) == result.tool_failures == detail["run"]["tool_failures"]
    assert sum(t["is_timeout"] for t in failed) == result.tool_timeouts


def test_budget_stop_is_recorded_as_abandoned(stack: LiveStack) -> None:
    agent = stack.agent(mode="react", small_model=None, max_cost_usd=0.002)
    result = asyncio.run(agent.run(LONG_QUESTION))
    assert (result.outcome, result.budget_exceeded) == ("abandoned", "cost")
    assert "max_cost_usd" in result.reason

    run = stack.run_detail(result)["run"]
    assert (run["status"], run["outcome"], run["budget_exceeded"]) == ("budget", "abandoned", "cost")
    assert 0.002 < run["cost_usd"] < 0.01


def test_loadgen_command_traces_every_run_into_the_collector(stack: LiveStack) -> None:
    started = time.time()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentwatch",
            "loadgen",
            "--users",
            "3",
            "--runs",
            "6",
            "--mode",
            "iterative",
            "--base-url",
            stack.engine + "/v1",
            "--collector",
            stack.collector,
            "--collector-key",
            stack.key,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "runs            6 (6 success" in done.stdout
    wait_until(lambda: stack.get("/api/runs", start=started).json()["total"] >= 6, 60, "the 6 runs were not stored")
    assert stack.get("/api/runs", start=started).json()["total"] == 6
