"""Measured lever savings in ``/api/cost``: every counterfactual computed by hand on a small
fixture of runs equals the API's figure (a real collector on 127.0.0.1, its store seeded)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from typing import Any

import pytest
from agentwatch.cli import main

from agentwatch_api.schemas import FeedbackIn
from agentwatch_platform.alerts.rules import parse_rules
from agentwatch_platform.collector.query import feedback as feedback_query
from agentwatch_platform.collector.storage.model import SpanRow
from tests.collector.factories import new_span_id, new_trace_id, with_project
from tests.collector.ingest_helpers import Running, serve, settings_for
from tests.collector.test_api import Api

T = (int(time.time()) // 3600 - 3) * 3600
P = "lv"
M = 1e6  # prices are USD per 1M tokens: sim-small 0.10 / 0.40 / 0.05 cached, sim-large 2.50 / 10.00 / 1.25


def _span(trace: str, kind: str, at: int, **fields: Any) -> SpanRow:
    t = (T + at) * 1_000_000_000
    return SpanRow(
        project=P,
        trace_id=trace,
        span_id=new_span_id(),
        parent_span_id=fields.pop("parent", "p"),
        name=kind,
        kind=kind,
        start_time_ns=t,
        end_time_ns=t + 1_000_000,
        agent_name=fields.pop("agent", "a"),
        **fields,
    )


def _run(
    at: int,
    *children: dict[str, Any],
    agent: str = "a",
    outcome: str = "success",
    attributes: dict[str, str] | None = None,
) -> list[SpanRow]:
    trace = new_trace_id()
    spans = [_span(trace, "run", at, parent="", agent=agent, outcome=outcome, attributes=attributes or {})]
    return spans + [
        _span(trace, child.pop("kind"), at + 1 + i, agent=agent, **child) for i, child in enumerate(children)
    ]


def _routed(baseline: str) -> dict[str, str]:
    return {"agentwatch.lever.name": "routing", "agentwatch.lever.baseline_model": baseline}


RUNS = {
    # routed calls, the prompt cache and tool-cache hits
    "R1": _run(
        10,
        {
            "kind": "llm",
            "model": "sim-small",
            "input_tokens": 1000,
            "output_tokens": 100,
            "cached_tokens": 400,
            "cost_usd": (600 * 0.10 + 400 * 0.05 + 100 * 0.40) / M,
            "attributes": _routed("sim-large"),
        },
        {
            "kind": "llm",
            "model": "sim-small",
            "input_tokens": 2000,
            "output_tokens": 50,
            "cost_usd": (2000 * 0.10 + 50 * 0.40) / M,
            "attributes": _routed("sim-large"),
        },
        {
            "kind": "llm",
            "model": "sim-large",
            "input_tokens": 3000,
            "output_tokens": 500,
            "cached_tokens": 1000,
            "cost_usd": (2000 * 2.50 + 1000 * 1.25 + 500 * 10.0) / M,
        },
        {
            "kind": "tool",
            "tool_name": "search",
            "tool_cache_hit": True,
            "attributes": {"agentwatch.tool.tokens_saved": "150"},
        },
        {
            "kind": "tool",
            "tool_name": "fetch",
            "tool_cache_hit": True,
            "attributes": {"agentwatch.tool.tokens_saved": "250"},
        },
        {"kind": "tool", "tool_name": "fetch"},
    ),
    # degraded at a projected $0.05, ended at $0.02, and failed
    "R2": _run(
        20,
        {
            "kind": "step",
            "attributes": {
                "agentwatch.lever.name": "degradation",
                "agentwatch.lever.projected_cost_usd": "0.05",
                "agentwatch.lever.cost_so_far_usd": "0.015",
            },
        },
        {"kind": "llm", "model": "sim-large", "input_tokens": 4000, "output_tokens": 1000, "cost_usd": 0.02},
        outcome="failure",
        attributes={"agentwatch.run.degraded": "true"},
    ),
    "R3": _run(
        30, outcome="abandoned", attributes={"agentwatch.lever.name": "rate_limit", "agentwatch.lever.refused": "true"}
    ),
    # queued 1.5 s; its one routed call names a model without a price
    "R4": _run(
        40,
        {
            "kind": "llm",
            "model": "sim-small",
            "input_tokens": 100,
            "output_tokens": 10,
            "cost_usd": 0.01,
            "attributes": _routed("mystery-model-without-price"),
        },
        attributes={"agentwatch.lever.name": "rate_limit", "agentwatch.lever.delay_s": "1.5"},
    ),
    "R5": _run(
        50,
        agent="b",
        outcome="abandoned",
        attributes={"agentwatch.lever.name": "rate_limit", "agentwatch.lever.refused": "true"},
    ),
    "R6": _run(
        60, {"kind": "llm", "model": "sim-large", "input_tokens": 100, "output_tokens": 10, "cost_usd": 0.04}, agent="b"
    ),
}
R1_COST = (600 * 0.10 + 400 * 0.05 + 100 * 0.40 + 2000 * 0.10 + 50 * 0.40 + 2000 * 2.50 + 1000 * 1.25 + 500 * 10.0) / M


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    with serve(settings_for(tmp_path_factory.mktemp("levers"))) as running:
        _seed(running)
        api = Api(running.url, running.key(P))
        api.running = running  # type: ignore[attr-defined]  # the what-if fixture seeds a project of its own
        yield api


def _seed(running: Running) -> None:
    store = running.app.state.store
    for rows in RUNS.values():
        store.insert_spans(rows)
    feedback_query.add_feedback(store, P, RUNS["R1"][0].trace_id, FeedbackIn(score=1.0))
    feedback_query.add_feedback(store, P, RUNS["R2"][0].trace_id, FeedbackIn(score=0.5))


@pytest.fixture(scope="module")
def savings(api: Api) -> dict[str, Any]:
    body = api.get("/api/cost", start=T, end=T + 3600).json()["savings"]
    body["by_lever"] = {lever["lever"]: lever for lever in body["levers"]}
    return body


def test_routing_prices_the_routed_tokens_on_the_model_they_would_have_used(savings: dict) -> None:
    routing = savings["by_lever"]["routing"]
    counterfactual = (
        600 * 2.50 + 400 * 1.25 + 100 * 10.0 + 2000 * 2.50 + 50 * 10.0
    ) / M  # the same tokens on sim-large
    actual = (600 * 0.10 + 400 * 0.05 + 100 * 0.40 + 2000 * 0.10 + 50 * 0.40) / M
    assert routing["events"] == 2 and routing["detail"]["unpriced_calls"] == 1  # R4's baseline has no price
    assert routing["counterfactual_usd"] == pytest.approx(counterfactual) and routing["actual_usd"] == pytest.approx(
        actual
    )
    assert routing["saving_usd"] == pytest.approx(counterfactual - actual)
    assert routing["detail"]["routed_tokens"] == 1000 + 100 + 2000 + 50


def test_cache_prices_cached_tokens_at_the_full_input_price_and_counts_tool_hits(savings: dict) -> None:
    cache = savings["by_lever"]["cache"]
    saving = (400 * (0.10 - 0.05) + 1000 * (2.50 - 1.25)) / M
    assert cache["saving_usd"] == pytest.approx(saving)
    assert cache["actual_usd"] == pytest.approx(
        (600 * 0.10 + 400 * 0.05 + 100 * 0.40 + 2000 * 2.50 + 1000 * 1.25 + 500 * 10.0) / M
    )
    assert cache["detail"] == {
        "tool_cache_hits": 2,
        "tool_tokens_avoided": 400,
        "cached_calls": 2,
        "cached_tokens": 1400,
    }


def test_degradation_is_the_projected_cost_at_the_switch_against_the_final_cost(savings: dict) -> None:
    degradation = savings["by_lever"]["degradation"]
    assert (degradation["events"], degradation["detail"]["degraded_runs"]) == (1, 1)
    assert degradation["counterfactual_usd"] == pytest.approx(0.05) and degradation["actual_usd"] == pytest.approx(0.02)
    assert degradation["saving_usd"] == pytest.approx(0.03)


def test_rate_limiting_estimates_refused_runs_at_the_agents_mean_served_run(savings: dict) -> None:
    rate = savings["by_lever"]["rate_limit"]
    mean_a = (R1_COST + 0.02 + 0.01) / 3  # R1, R2, R4 (R3 was refused)
    assert rate["detail"] == {
        "refused_runs": 2,
        "delayed_runs": 1,
        "delay_s": 1.5,
        "priced_at_user_mean": 2,  # R3 and R5 have no user: the runs without one are their "user"
        "priced_at_agent_mean": 0,
        "priced_at_unpriced": 0,
        "priced_at_budget_capped": 0,
    }
    assert rate["saving_usd"] == pytest.approx(mean_a + 0.04)  # one refused run of a, one of b (whose R6 cost 0.04)
    assert rate["events"] == 3


def test_quality_of_degraded_runs_beside_the_others(savings: dict) -> None:
    degraded, other = savings["quality"]
    assert (degraded["group"], degraded["runs"], degraded["success_rate"], degraded["feedback_score"]) == (
        "degraded",
        1,
        0.0,
        0.5,
    )
    assert degraded["mean_cost_usd"] == pytest.approx(0.02)
    assert (other["group"], other["runs"], other["success_rate"], other["feedback_score"], other["feedback_count"]) == (
        "not degraded",
        3,
        1.0,
        1.0,
        1,
    )
    assert other["mean_cost_usd"] == pytest.approx((R1_COST + 0.01 + 0.04) / 3)


def test_total_and_price_version(savings: dict) -> None:
    assert savings["total_saving_usd"] == pytest.approx(sum(lv["saving_usd"] for lv in savings["levers"]))
    assert len(savings["price_version"]) == 16


def test_no_saving_exceeds_its_counterfactual(savings: dict) -> None:
    for lever in savings["levers"]:
        assert lever["saving_usd"] <= lever["counterfactual_usd"], lever
        assert lever["saving_usd"] == pytest.approx(lever["counterfactual_usd"] - lever["actual_usd"]), lever
    assert savings["total_saving_usd"] < sum(lv["counterfactual_usd"] for lv in savings["levers"])


# --- refused requests priced per user, capped at their budget ----------------------------------
RL = "rl"  # a project of its own


def _user_run(at: int, user: str, cost: float | None, *, budget: str = "") -> list[SpanRow]:
    """A run of agent r by ``user`` with one LLM call of ``cost``; ``None``: refused before any work."""
    trace, attributes = new_trace_id(), {"agentwatch.budget.max_cost_usd": budget} if budget else {}
    if cost is None:
        attributes |= {"agentwatch.lever.name": "rate_limit", "agentwatch.lever.refused": "true"}
    outcome = "refused" if cost is None else "success"
    root = _span(trace, "run", at, parent="", agent="r", user_id=user, outcome=outcome, attributes=attributes)
    call = {"model": "sim-large", "input_tokens": 10, "output_tokens": 1, "cost_usd": cost}
    return with_project([root] + ([] if cost is None else [_span(trace, "llm", at + 1, agent="r", **call)]), RL)


RL_RUNS = [
    *_user_run(10, "big", 0.10),
    *_user_run(20, "big", 0.30),  # a spike run
    *_user_run(30, "big", None),  # priced at big's mean: 0.20
    *_user_run(40, "frugal", 0.001, budget="0.002"),
    *_user_run(50, "frugal", 0.005, budget="0.002"),  # over its budget by the last call
    *_user_run(60, "frugal", None, budget="0.002"),  # frugal's mean 0.003, capped at 0.002
    *_user_run(70, "frugal", None, budget="0.002"),
    *_user_run(80, "frugal", None, budget="0.002"),
    *_user_run(90, "new", None),  # no run of its own: the agent's mean
]


@pytest.fixture(scope="module")
def rl(api: Api) -> dict[str, Any]:
    running: Running = api.running  # type: ignore[attr-defined]
    running.app.state.store.insert_spans(RL_RUNS)
    body = Api(running.url, running.key(RL)).get("/api/cost", start=T, end=T + 3600).json()
    return {lever["lever"]: lever for lever in body["savings"]["levers"]} | {"total": body["total_usd"]}


def test_a_refused_request_is_priced_at_its_users_runs_capped_at_its_budget(rl: dict) -> None:
    rate = rl["rate_limit"]
    agent_mean = (0.10 + 0.30 + 0.001 + 0.005) / 4
    counterfactual = (0.10 + 0.30) / 2 + 3 * 0.002 + agent_mean
    assert rate["counterfactual_usd"] == pytest.approx(counterfactual) and rate["actual_usd"] == 0.0
    assert rate["saving_usd"] == pytest.approx(counterfactual)
    assert (rate["events"], rate["detail"]["refused_runs"]) == (5, 5)
    assert [rate["detail"][f"priced_at_{k}"] for k in ("user_mean", "budget_capped", "agent_mean", "unpriced")] == [
        1,
        3,
        1,
        0,
    ]
    assert rate["saving_usd"] < rl["total"]  # the spend it saved is less than the bill: 0.406


def test_agent_filter_keeps_one_agents_levers(api: Api) -> None:
    body = api.get("/api/cost", start=T, end=T + 3600, agent="b").json()["savings"]
    by_lever = {lever["lever"]: lever for lever in body["levers"]}
    assert by_lever["routing"]["events"] == 0 and by_lever["degradation"]["events"] == 0
    assert by_lever["rate_limit"]["saving_usd"] == pytest.approx(0.04)


# --- what-if -------------------------------------------------------------------------------
W = "wf"  # the what-if runs are a project of their own


def _stepped_run(at: int, *steps: tuple[str, int, int, int]) -> list[SpanRow]:
    """A run of agent c: one step span per (name, input, output, cached), each with one sim-large call."""
    trace = new_trace_id()
    root = _span(trace, "run", at, parent="", agent="c", outcome="success")
    rows = [root]
    for index, (name, inp, out, cached) in enumerate(steps):
        step = _span(
            trace,
            "step",
            at + 1 + index,
            parent=root.span_id,
            agent="c",
            step_index=index,
            attributes={"agentwatch.step.name": name},
        )
        cost = ((inp - cached) * 2.50 + cached * 1.25 + out * 10.0) / M
        rows += [
            step,
            _span(
                trace,
                "llm",
                at + 1 + index,
                parent=step.span_id,
                agent="c",
                step_index=index,
                model="sim-large",
                input_tokens=inp,
                output_tokens=out,
                cached_tokens=cached,
                cost_usd=cost,
            ),
        ]
    return with_project(rows, W)


W1 = _stepped_run(100, ("research", 1000, 100, 0), ("research", 2000, 100, 500), ("synthesize", 3000, 500, 0))
W2 = _stepped_run(200, ("research", 1000, 50, 0), ("synthesize", 1500, 300, 0))
W_ACTUAL = (3500 + 5375 + 12500 + 3000 + 6750) / M


@pytest.fixture(scope="module")
def wf(api: Api, tmp_path_factory: pytest.TempPathFactory) -> Api:
    running: Running = api.running  # type: ignore[attr-defined]
    running.app.state.store.insert_spans(W1 + W2)
    wf = Api(running.url, running.key(W))
    wf.running, wf.key = running, running.key(W)  # type: ignore[attr-defined]  # for the command's test
    return wf


def _whatif(wf: Api, **params: Any) -> dict[str, Any]:
    response = wf.get("/api/whatif", start=T, end=T + 3600, **params)
    assert response.status_code == 200, response.text
    return response.json()


def _interval(*changes: float) -> float:
    return 1.96 * (len(changes) * statistics.variance(changes)) ** 0.5


def test_whatif_route_prices_the_steps_calls_on_the_new_model(wf: Api) -> None:
    body = _whatif(wf, policy="route", step="research", model="sim-small")
    small = {
        "W1": (1000 * 0.10 + 100 * 0.40 + 1500 * 0.10 + 500 * 0.05 + 100 * 0.40) / M,
        "W2": (1000 * 0.10 + 50 * 0.40) / M,
    }
    changes = (small["W1"] - (3500 + 5375) / M, small["W2"] - 3000 / M)
    assert (body["runs"], body["runs_changed"], body["calls_changed"]) == (2, 2, 3)
    assert body["actual_usd"] == pytest.approx(W_ACTUAL) and body["change_usd"] == pytest.approx(sum(changes))
    assert body["uncertainty_usd"] == pytest.approx(_interval(*changes))
    assert (
        body["change_ratio"] == pytest.approx(sum(changes) / W_ACTUAL)
        and body["estimate_tokens"] == body["actual_tokens"]
    )


def test_whatif_cap_keeps_the_first_steps_of_longer_runs(wf: Api) -> None:
    body = _whatif(wf, policy="cap_steps", cap=1)
    assert (body["runs_changed"], body["calls_changed"]) == (1, 2)  # W2's one research step and its report fit
    assert body["estimate_usd"] == pytest.approx((3500 + 3000 + 6750) / M)
    assert body["estimate_tokens"] == 1100 + 1050 + 1800
    assert _whatif(wf, policy="cap_steps", cap=2)["change_usd"] == 0.0


def test_whatif_evolving_report_bounds_each_calls_context(wf: Api) -> None:
    body = _whatif(wf, policy="evolving_report", bound=600)  # at most 1000 + 600 input tokens a call
    # the second call keeps its cached share (500 of 2000 -> 400 of 1600)
    w1 = (1000 * 2.50 + 100 * 10.0 + 1200 * 2.50 + 400 * 1.25 + 100 * 10.0 + 1600 * 2.50 + 500 * 10.0) / M
    assert body["estimate_usd"] == pytest.approx(w1 + 9750 / M)
    assert (body["actual_tokens"], body["estimate_tokens"], body["calls_changed"]) == (9550, 7750, 2)


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"policy": "route", "step": "research"}, "needs step"),
        ({"policy": "route", "step": "research", "model": "no-such-model-anywhere"}, "has no price"),
        ({"policy": "cap_steps"}, "cap must be"),
    ],
)
def test_whatif_bad_policy_says_why(wf: Api, params: dict, says: str) -> None:
    response = wf.get("/api/whatif", start=T, end=T + 3600, **params)
    assert response.status_code == 422 and says in response.json()["detail"]


def test_whatif_command_prints_the_estimate(wf: Api, capsys: pytest.CaptureFixture[str]) -> None:
    running: Running = wf.running  # type: ignore[attr-defined]
    argv = [
        "whatif",
        "cap_steps",
        "--cap",
        "1",
        "--since",
        str(T),
        "--until",
        str(T + 3600),
        "--collector",
        running.url,
        "--key",
        wf.key,
    ]  # type: ignore[attr-defined]
    assert main(argv) == 0
    out = capsys.readouterr().out
    change = (3500 + 3000 + 6750) / M - W_ACTUAL
    assert "what if: cap runs at 1 steps" in out and f"change        ${change:+.6f}" in out, out
    with pytest.raises(SystemExit, match="cap must be"):
        main(["whatif", "cap_steps", "--since", str(T), "--collector", running.url, "--key", wf.key])  # type: ignore[attr-defined]


# --- lever metrics for alerts --------------------------------------------------------------
def test_cache_hit_rate_and_small_model_share_are_time_series(api: Api) -> None:
    for metric, expected in (("tool_cache_hit_rate", 2 / 3), ("small_model_share", 0.0)):  # R1: 2 hits of 3 tool calls
        body = api.get("/api/timeseries", metric=metric, start=T, end=T + 3600, step_s=3600).json()
        assert body["unit"] == "ratio" and [p["value"] for p in body["points"]] == [pytest.approx(expected)], body


def test_an_alert_rule_can_watch_the_cache_hit_rate_collapse() -> None:
    config = parse_rules("""
version: 1
rules:
  - name: cache-hit-rate-collapse
    metric: tool_cache_hit_rate
    window: 1h
    condition: {kind: anomaly, direction: below}
""")
    [rule] = config.rules
    assert rule.metric == "tool_cache_hit_rate" and rule.condition.direction == "below"
