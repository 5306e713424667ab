"""The agent's cost levers against the live simulated engine, read back from the collector:
routing, degradation (small model, step cap, ReAct -> evolving report), rate limiting, cache."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from agentwatch import semconv as sc

from agentwatch_platform.reference_agent.levers import DegradationPolicy, RateLimiter
from agentwatch_platform.reference_agent.tools import ToolCache
from tests.reference_agent.agent_stack import LiveStack, live_stack
from tests.reference_agent.test_agent import LONG_QUESTION

pytestmark = pytest.mark.slow  # agent runs against the live engine (make test runs it, make quick not)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveStack]:
    with live_stack(tmp_path_factory.mktemp("levers-stack")) as live:
        yield live


def _with_lever(detail: dict[str, Any], lever: str) -> list[dict[str, Any]]:
    return [s for s in detail["spans"] if s["attributes"].get(sc.AW_LEVER) == lever]


def _run_span(detail: dict[str, Any]) -> dict[str, Any]:
    return next(s for s in detail["spans"] if s["kind"] == "run")


def _degrading(action: str) -> DegradationPolicy:
    return DegradationPolicy(action=action, budget_share=1e-6, cap_steps=1)  # type: ignore[arg-type]  # any spend is pressure


def test_routed_calls_name_the_model_they_would_have_used(stack: LiveStack) -> None:
    result = asyncio.run(stack.agent(mode="iterative").run(LONG_QUESTION))
    detail = stack.run_detail(result)
    routed = _with_lever(detail, "routing")
    assert routed and all(s["model"] == "sim-small" for s in routed)
    assert {s["attributes"][sc.AW_LEVER_BASELINE_MODEL] for s in routed} == {"sim-large"}
    large = [s for s in detail["spans"] if s["kind"] == "llm" and s["model"] == "sim-large"]
    assert len(large) == 1 and sc.AW_LEVER not in large[0]["attributes"]  # the synthesis is not routed
    assert sc.AW_RUN_DEGRADED not in _run_span(detail)["attributes"]


def test_budget_pressure_moves_the_rest_of_the_run_to_the_small_model(stack: LiveStack) -> None:
    agent = stack.agent(mode="iterative", max_cost_usd=1.0, degradation=_degrading("small_model"))
    result = asyncio.run(agent.run(LONG_QUESTION))
    assert result.outcome == "success" and result.degraded == "small_model"
    detail = stack.run_detail(result)
    [step] = _with_lever(detail, "degradation")
    attributes = step["attributes"]
    assert step["kind"] == "step" and attributes[sc.AW_LEVER_CHANGE] == "model sim-large -> sim-small"
    assert "budget" in attributes[sc.AW_LEVER_REASON]
    assert float(attributes[sc.AW_LEVER_PROJECTED_COST_USD]) > float(attributes[sc.AW_LEVER_COST_SO_FAR_USD]) > 0
    assert {s["model"] for s in detail["spans"] if s["kind"] == "llm"} == {"sim-small"}
    assert _run_span(detail)["attributes"][sc.AW_RUN_DEGRADED] == "true"


def test_step_cap_writes_the_report_at_the_cap(stack: LiveStack) -> None:
    free = asyncio.run(stack.agent(mode="react").run(LONG_QUESTION))
    capped = asyncio.run(
        stack.agent(mode="react", max_cost_usd=1.0, degradation=_degrading("cap_steps")).run(LONG_QUESTION)
    )
    assert capped.outcome == "success" and capped.report and capped.degraded == "cap_steps"
    assert capped.steps == 3 < free.steps  # degraded at the second step, one more step, then the report
    assert capped.cost_usd < free.cost_usd
    [step] = _with_lever(stack.run_detail(capped), "degradation")
    assert step["attributes"][sc.AW_LEVER_CHANGE] == "max_steps 12 -> 2"


def test_react_run_switches_to_the_evolving_report(stack: LiveStack) -> None:
    react = asyncio.run(stack.agent(mode="react").run(LONG_QUESTION))
    switched = asyncio.run(
        stack.agent(mode="react", max_cost_usd=1.0, degradation=_degrading("iterative")).run(LONG_QUESTION)
    )
    assert switched.outcome == "success" and switched.degraded == "iterative"
    assert switched.input_tokens < react.input_tokens  # the history is no longer re-sent
    [step] = _with_lever(stack.run_detail(switched), "degradation")
    assert step["attributes"][sc.AW_LEVER_CHANGE] == "mode react -> iterative"


def test_rate_limiter_refuses_a_second_run_of_the_same_user(stack: LiveStack) -> None:
    agent = stack.agent(mode="iterative", rate_limiter=RateLimiter(user_rate=0.01, mode="reject"))
    first = asyncio.run(agent.run(LONG_QUESTION, user_id="u-rl"))
    refused = asyncio.run(agent.run(LONG_QUESTION, user_id="u-rl"))
    assert first.outcome == "success" and not first.rate_limited
    assert refused.rate_limited and refused.outcome == "refused" and refused.llm_calls == 0
    detail = stack.run_detail(refused)
    attributes = _run_span(detail)["attributes"]
    assert attributes[sc.AW_LEVER] == "rate_limit" and attributes[sc.AW_LEVER_REFUSED] == "true"
    assert detail["run"]["outcome"] == "refused" and attributes[sc.AW_RUN_OUTCOME_REASON].startswith("rate limited")


def test_cache_hits_record_the_cache_lever(stack: LiveStack) -> None:
    cache = ToolCache()
    asyncio.run(stack.agent(mode="iterative", cache=cache).run(LONG_QUESTION))
    again = asyncio.run(stack.agent(mode="iterative", cache=cache).run(LONG_QUESTION))
    hits = _with_lever(stack.run_detail(again), "cache")
    assert len(hits) == again.cache_hits > 0 and all(s["tool_cache_hit"] for s in hits)
