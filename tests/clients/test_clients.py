"""Real third-party instrumentations (OpenTelemetry's openai-v2, OpenInference, traceloop-sdk,
openlit) drive the real OpenAI client against the simulated engine, whose own ``llm_request``
spans go to the same project, with and without ``traceparent`` reaching the engine. Each agent
run (3 LLM calls, one of them streamed; a search that works and a fetch that fails) must show in
the query API as one run whose tokens, cached tokens and cost are the engine's usage counted
once, with its TTFT, steps, tools, tool failure and status."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from agentwatch import PriceTable

from tests.clients.stack import SCENARIO_IDS, SCENARIOS, Scenario, Stack

pytestmark = [  # clients: traceloop and openlit run in environments of their own (make clients-venvs)
    pytest.mark.parametrize("scenario", SCENARIOS, ids=SCENARIO_IDS, indirect=True),
    pytest.mark.clients,
]

LLM_CALLS, TOOL_CALLS, TOOL_FAILURES, STEPS = 3, 2, 1, 3
STREAMED_CALL = 1  # the second LLM call of the run


def _expected(outcome: dict[str, Any]) -> dict[str, float]:
    """Tokens and cost from the usage the OpenAI client received (the engine's own count)."""
    prices = PriceTable()
    calls = outcome["calls"]
    return {
        "input_tokens": sum(c["prompt_tokens"] for c in calls),
        "output_tokens": sum(c["completion_tokens"] for c in calls),
        "cached_tokens": sum(c["cached_tokens"] for c in calls),
        "cost_usd": sum(
            prices.cost(c["model"], c["prompt_tokens"], c["completion_tokens"], c["cached_tokens"]) for c in calls
        ),
    }


def _detail(stack: Stack, scenario: Scenario, *, timeout: float = 20.0) -> dict[str, Any]:
    """``/api/runs/{trace_id}`` once every span the client emitted is stored (asked once a scenario)."""
    outcome = scenario.require()
    if "detail" in scenario.answers:
        return scenario.answers["detail"]
    emitted = len(outcome["spans"])
    deadline = time.monotonic() + timeout
    while True:
        try:
            detail = stack.get(f"/api/runs/{outcome['trace_id']}")
        except httpx.HTTPStatusError:  # 404 until the first span is written
            detail = None
        if detail is not None and len([s for s in detail["spans"] if s["kind"] != "engine"]) >= emitted:
            scenario.answers["detail"] = detail
            return detail
        if time.monotonic() > deadline:
            pytest.fail(f"run {outcome['trace_id']} did not reach {emitted} client spans: {detail}", pytrace=False)
        time.sleep(0.2)


def _run(stack: Stack, scenario: Scenario) -> dict[str, Any]:
    return _detail(stack, scenario)["run"]


def _llm_spans(detail: dict[str, Any]) -> list[dict[str, Any]]:
    return sorted((s for s in detail["spans"] if s["kind"] == "llm"), key=lambda s: s["start_time"])


def _window(stack: Stack, scenario: Scenario, path: str) -> Any:
    """``path`` (``/api/runs`` or ``/api/overview``) over the scenario's time window, once its run is stored."""
    _detail(stack, scenario)
    if path not in scenario.answers:
        start, end = scenario.window
        params = {"start": start, "end": end} | ({"limit": 500} if path == "/api/runs" else {})
        scenario.answers[path] = stack.get(path, **params)
    return scenario.answers[path]


def test_agent_run_is_listed_once(stack: Stack, scenario: Scenario) -> None:
    runs = _window(stack, scenario, "/api/runs")
    listed = [(r["trace_id"], r["service"], r["name"]) for r in runs["items"]]
    assert runs["total"] == 1, f"one agent run listed as {runs['total']} runs: {listed}"
    assert runs["items"][0]["trace_id"] == scenario.outcome["trace_id"]


def test_engine_spans_are_engine_facts_of_the_llm_calls(stack: Stack, scenario: Scenario) -> None:
    detail = _detail(stack, scenario)
    engine = [s for s in detail["spans"] if s["name"] == "llm_request"]
    assert all(s["kind"] == "engine" for s in engine), [(s["name"], s["kind"]) for s in engine]
    if scenario.mode == "traceparent":  # the engine spans are in the run's trace
        assert len(engine) == LLM_CALLS, [s["name"] for s in detail["spans"]]
    else:  # no traceparent reached the engine: what is here the collector moved under its client span
        assert all("agentwatch.engine.trace_id" in s["attributes"] for s in engine), "plain mode sent traceparent"
        llm_ids = {s["span_id"] for s in _llm_spans(detail)}
        assert all(s["parent_span_id"] in llm_ids for s in engine)
    assert len(_llm_spans(detail)) == LLM_CALLS
    assert detail["run"]["llm_calls"] == LLM_CALLS


def test_tokens_and_cached_tokens_are_the_engine_usage_counted_once(stack: Stack, scenario: Scenario) -> None:
    run, expected = _run(stack, scenario), _expected(scenario.require())
    assert expected["cached_tokens"] > 0  # the engine's prefix cache served part of the later prompts
    got = {name: run[name] for name in ("input_tokens", "output_tokens", "cached_tokens")}
    assert got == {name: expected[name] for name in got}
    assert run["total_tokens"] == expected["input_tokens"] + expected["output_tokens"]


def test_cost_is_the_engine_usage_priced_once(stack: Stack, scenario: Scenario) -> None:
    run, expected = _run(stack, scenario), _expected(scenario.require())
    assert round(run["cost_usd"], 2) == round(expected["cost_usd"], 2)  # to the cent
    assert run["cost_usd"] == pytest.approx(expected["cost_usd"], rel=1e-6)  # and exactly: not twice, not zero


def test_window_totals_count_each_call_once(stack: Stack, scenario: Scenario) -> None:
    """The overview of the run's time window: engine-only calls would show here even when not listed."""
    figures = _window(stack, scenario, "/api/overview")["figures"]
    expected = _expected(scenario.require())
    assert figures["runs"]["value"] == 1
    assert figures["input_tokens"]["value"] == expected["input_tokens"]
    assert figures["output_tokens"]["value"] == expected["output_tokens"]
    assert figures["cost_usd"]["value"] == pytest.approx(expected["cost_usd"], rel=1e-6)


def test_streamed_call_has_ttft(stack: Stack, scenario: Scenario) -> None:
    detail = _detail(stack, scenario)
    streamed = _llm_spans(detail)[STREAMED_CALL]
    assert streamed["ttft_s"] is not None, f"no TTFT on the streamed call: {streamed}"
    assert 0 < streamed["ttft_s"] <= streamed["duration_s"]
    figures = _window(stack, scenario, "/api/overview")["figures"]
    assert figures["ttft_p50"]["value"] is not None


def test_every_llm_call_has_ttft_from_the_client_or_the_joined_engine_span(stack: Stack, scenario: Scenario) -> None:
    spans = _llm_spans(_detail(stack, scenario))
    assert [s["ttft_s"] is not None and s["ttft_s"] > 0 for s in spans] == [True] * LLM_CALLS, [
        (s["name"], s["ttft_s"]) for s in spans
    ]


def test_steps_tools_and_tool_failures(stack: Stack, scenario: Scenario) -> None:
    detail = _detail(stack, scenario)
    run = detail["run"]
    counts = {name: run[name] for name in ("steps", "llm_calls", "tool_calls", "tool_failures")}
    assert counts == {"steps": STEPS, "llm_calls": LLM_CALLS, "tool_calls": TOOL_CALLS, "tool_failures": TOOL_FAILURES}
    tools = sorted(((s["tool_name"], s["status"]) for s in detail["spans"] if s["kind"] == "tool"), key=lambda t: t[0])
    assert tools == [("fetch", "error"), ("search", "ok")] or tools == [("fetch", "error"), ("search", "unset")], tools


def test_run_status_agent_and_model(stack: Stack, scenario: Scenario) -> None:
    run = _run(stack, scenario)
    assert run["status"] == "ok"  # the agent handled its tool's failure
    assert run["agent"] == "researcher"
    assert run["models"] == ["sim-large"]


def test_per_call_figures_add_up_to_the_run(stack: Stack, scenario: Scenario) -> None:
    """The run detail's rows (the engine's cached-token discount on the call's row) sum to the run."""
    detail = _detail(stack, scenario)
    calls = [s for s in detail["spans"] if s["kind"] != "run"]
    assert all(s["cost_usd"] >= 0 for s in calls), [(s["name"], s["cost_usd"]) for s in calls]
    assert sum(s["cost_usd"] for s in calls) == detail["run"]["cost_usd"]
    for name in ("input_tokens", "output_tokens", "cached_tokens"):
        assert sum(s[name] for s in calls) == detail["run"][name], name
