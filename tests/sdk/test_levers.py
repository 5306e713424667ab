"""Cost levers: what a run has left to spend, and lever decisions recorded on spans."""

from __future__ import annotations

import agentwatch
import pytest
from agentwatch import semconv as sc

from tests.sdk.spans import Spans


def test_budget_left_and_used_follow_the_run(spans: Spans) -> None:
    with agentwatch.run("r", budget=agentwatch.Budget(max_cost_usd=0.10, max_steps=4)) as run:
        assert run.budget_left() == (0.10, 4, None) and run.budget_used() == 0.0
        with agentwatch.llm(model="sim-large") as call:
            call.record_usage(input_tokens=10_000, output_tokens=1_000)  # $0.035
        left = run.budget_left()
        assert left.cost_usd == pytest.approx(0.065) and left.steps == 3 and left.seconds is None
        assert run.budget_used() == pytest.approx(0.35)  # cost 35 % beats steps 25 %
    with agentwatch.run("free") as free:
        assert free.budget_left() == (None, None, None) and free.budget_used() is None


def test_record_lever_on_the_current_span_and_marks_a_degraded_run(spans: Spans) -> None:
    with agentwatch.run("r") as run:
        with agentwatch.step("plan"):
            assert agentwatch.record_lever(
                "degradation",
                reason="budget 80% spent",
                change="react -> iterative",
                projected_cost_usd=0.4,
                cost_so_far_usd=0.3,
            )
    assert run.degraded
    step = spans.one("step plan").attributes
    assert step[sc.AW_LEVER] == "degradation" and step[sc.AW_LEVER_CHANGE] == "react -> iterative"
    assert step[sc.AW_LEVER_PROJECTED_COST_USD] == 0.4 and step[sc.AW_LEVER_COST_SO_FAR_USD] == 0.3
    assert spans.one("invoke_agent r").attributes[sc.AW_RUN_DEGRADED] is True


def test_routing_lever_reaches_the_llm_span_through_llm_attributes(spans: Spans) -> None:
    attributes = agentwatch.lever_attributes(
        "routing", reason="easy", change="sim-large -> sim-small", baseline_model="sim-large"
    )
    with agentwatch.run("r"), agentwatch.llm_attributes(attributes), agentwatch.llm(model="sim-small"):
        pass
    llm = spans.kind(sc.KIND_LLM)[0].attributes
    assert llm[sc.AW_LEVER] == "routing" and llm[sc.AW_LEVER_BASELINE_MODEL] == "sim-large"
    assert sc.AW_RUN_DEGRADED not in spans.one("invoke_agent r").attributes


def test_without_a_span_nothing_is_recorded(spans: Spans) -> None:
    assert agentwatch.record_lever("rate_limit", reason="bucket empty", change="refused", refused=True) is False


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"lever": "discount"}, "must be one of"),
        ({"reason": ""}, "reason must be"),
        ({"projected_cost_usd": -1.0}, "projected_cost_usd"),
        ({"delay_s": float("nan")}, "delay_s"),
        ({"baseline_model": ""}, "baseline_model"),
    ],
)
def test_bad_arguments_name_what_was_wrong(kwargs: dict, message: str) -> None:
    arguments = {"lever": "routing", "reason": "why", "change": "what", **kwargs}
    with pytest.raises(ValueError, match=message):
        agentwatch.lever_attributes(arguments.pop("lever"), **arguments)


def test_a_refused_request_is_its_own_outcome_with_its_reason(spans: Spans) -> None:
    with agentwatch.run("r") as run:
        assert agentwatch.record_lever("rate_limit", reason="user u over 1 runs/s", change="run refused", refused=True)
    attrs = spans.one("invoke_agent r").attributes
    assert run.outcome == attrs[sc.AW_RUN_OUTCOME] == sc.OUTCOME_REFUSED == "refused"
    assert attrs[sc.AW_RUN_OUTCOME_REASON] == "rate_limit: user u over 1 runs/s" and attrs[sc.AW_LEVER_REFUSED] is True
    with agentwatch.run("budget") as other:
        other.set_outcome("refused", reason="budget spent for today")
    assert spans.one("invoke_agent budget").attributes[sc.AW_RUN_OUTCOME] == "refused"
