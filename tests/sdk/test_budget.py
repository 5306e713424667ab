"""Budget guard: the next LLM or tool call after a limit is passed raises BudgetExceeded."""

from __future__ import annotations

import time

import agentwatch
import pytest
from agentwatch import semconv as sc

from tests.sdk.spans import Spans


def _spend(call_count: int, model: str = "sim-large") -> None:
    for _ in range(call_count):
        with agentwatch.llm(model=model) as call:
            call.record_usage(input_tokens=10_000, output_tokens=1_000)  # $0.035 on sim-large


def test_cost_limit_stops_the_next_call_and_says_by_how_much(spans: Spans) -> None:
    with pytest.raises(agentwatch.BudgetExceeded) as caught:
        with agentwatch.run("spender", budget=agentwatch.Budget(max_cost_usd=0.05)) as run:
            _spend(10)
    exc = caught.value
    assert exc.limit == "cost" and exc.maximum == 0.05
    assert exc.value == pytest.approx(0.07) and exc.over_by == pytest.approx(0.02)
    assert "max_cost_usd" in str(exc) and "over by" in str(exc)
    assert run.llm_calls == 2  # the third call was refused before it started
    attrs = spans.one("invoke_agent spender").attributes
    assert attrs[sc.AW_BUDGET_EXCEEDED] == "cost"
    assert attrs[sc.AW_RUN_OUTCOME] == "abandoned"
    assert attrs[sc.AW_BUDGET_MAX_COST_USD] == 0.05
    assert len(spans.kind(sc.KIND_LLM)) == 2


def test_step_limit_counts_explicit_steps(spans: Spans) -> None:
    budget = agentwatch.Budget(max_steps=3)
    with pytest.raises(agentwatch.BudgetExceeded, match="max_steps 3"):
        with agentwatch.run("looper", budget=budget):
            for _ in range(10):
                with agentwatch.step("iterate"), agentwatch.tool("search"):
                    pass
    assert len(spans.kind(sc.KIND_TOOL)) == 3


def test_time_limit(spans: Spans) -> None:
    with pytest.raises(agentwatch.BudgetExceeded, match="max_seconds") as caught:
        with agentwatch.run("slow", budget=agentwatch.Budget(max_seconds=0.05)):
            time.sleep(0.08)
            with agentwatch.tool("late"):
                pass
    assert caught.value.limit == "seconds" and caught.value.over_by > 0


def test_caught_budget_exception_still_marks_the_run_abandoned(spans: Spans) -> None:
    with agentwatch.run("graceful", budget=agentwatch.Budget(max_steps=1)):
        try:
            _spend(3, model="sim-small")
        except agentwatch.BudgetExceeded:
            pass  # the agent writes its partial report and returns normally
    attrs = spans.one("invoke_agent graceful").attributes
    assert attrs[sc.AW_RUN_OUTCOME] == "abandoned" and attrs[sc.AW_BUDGET_EXCEEDED] == "steps"


def test_budget_arguments_are_validated() -> None:
    with pytest.raises(ValueError, match="max_cost_usd"):
        agentwatch.Budget(max_cost_usd=-1)
    with pytest.raises(ValueError, match="max_steps"):
        agentwatch.Budget(max_steps="ten")  # type: ignore[arg-type]
    assert isinstance(agentwatch.BudgetExceeded("cost", 2, 1), agentwatch.AgentwatchError)


def test_costs_added_by_hand_count_against_the_budget(spans: Spans) -> None:
    with pytest.raises(agentwatch.BudgetExceeded, match="cost"):
        with agentwatch.run("paid-search", budget=agentwatch.Budget(max_cost_usd=0.01)) as run:
            with agentwatch.tool("search"):
                run.add_cost(0.02)  # a paid API the SDK cannot see
            with agentwatch.tool("search"):
                pass
    assert spans.one("invoke_agent paid-search").attributes[sc.AW_RUN_COST_USD] == pytest.approx(0.02)
