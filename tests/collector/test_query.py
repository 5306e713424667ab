"""The query layer over a seeded set of runs whose every figure is known by hand."""

from __future__ import annotations

import time
from typing import Any

import pytest

from agentwatch_api.schemas import TIMESERIES_METRICS, FeedbackIn
from agentwatch_platform.collector.query import cost as cost_query
from agentwatch_platform.collector.query import engines as engine_query
from agentwatch_platform.collector.query import feedback as feedback_query
from agentwatch_platform.collector.query import metrics as metrics_query
from agentwatch_platform.collector.query import overview as overview_query
from agentwatch_platform.collector.query import ranges
from agentwatch_platform.collector.query import runs as runs_query
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.model import SpanRow
from tests.collector.factories import agent_run, new_span_id, new_trace_id, seed_known_runs

T = (int(time.time()) // 3600 - 3) * 3600  # an hour boundary three hours ago
W = (T, T + 3600)
P = "q1"


@pytest.fixture(scope="module")
def seeded(module_store: Store) -> dict[str, list[SpanRow]]:
    return seed_known_runs(module_store, P, T)


def trace(seeded: dict[str, list[SpanRow]], name: str) -> str:
    return seeded[name][0].trace_id


def test_runs_list_summarises_each_run(module_store: Store, seeded: dict) -> None:
    page = runs_query.list_runs(module_store, P, start=W[0], end=W[1], sort="start_time")
    assert page.total == 5
    by_id = {r.trace_id: r for r in page.items}
    a, b, c, d, f = (by_id[trace(seeded, k)] for k in "ABCDF")
    assert [r.trace_id for r in page.items] == [a.trace_id, b.trace_id, c.trace_id, d.trace_id, f.trace_id]
    assert (a.steps, a.llm_calls, a.tool_calls, a.tool_failures, a.status, a.outcome) == (3, 3, 3, 0, "ok", "success")
    assert (a.input_tokens, a.output_tokens, a.total_tokens, a.models, a.agent, a.name) == (
        300,
        60,
        360,
        ["sim-small"],
        "alpha",
        "alpha",
    )
    assert (
        a.cost_usd == pytest.approx(0.03)
        and a.duration_s == pytest.approx(4.0)
        and a.feedback_score == pytest.approx(0.75)
    )
    assert (b.status, b.tool_failures, b.cost_usd, b.models) == ("error", 1, pytest.approx(0.10), ["sim-large"])
    assert (c.status, d.status, d.budget_exceeded) == ("timeout", "budget", "cost")
    assert (f.steps, f.llm_calls, f.tool_calls) == (2, 2, 0)  # no step spans: steps are LLM calls


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"agent": "alpha"}, "AB"),
        ({"model": "sim-large"}, "B"),
        ({"status": "timeout"}, "C"),
        ({"outcome": "success"}, "ACF"),
        ({"min_cost": 0.035}, "BC"),
        ({"max_cost": 0.025}, "DF"),
        ({"min_steps": 3}, "AC"),
        ({"max_steps": 1, "agent": "beta"}, "D"),
    ],
)
def test_runs_list_filters(module_store: Store, seeded: dict, filters: dict, expected: str) -> None:
    page = runs_query.list_runs(module_store, P, start=W[0], end=W[1], sort="start_time", **filters)
    assert [r.trace_id for r in page.items] == [trace(seeded, k) for k in expected]
    assert page.total == len(expected)


def test_runs_list_sorts_and_paginates(module_store: Store, seeded: dict) -> None:
    first = runs_query.list_runs(module_store, P, start=W[0], end=W[1], sort="-cost_usd", limit=2)
    second = runs_query.list_runs(module_store, P, start=W[0], end=W[1], sort="-cost_usd", limit=2, offset=2)
    beyond = runs_query.list_runs(module_store, P, start=W[0], end=W[1], limit=2, offset=10)
    assert [r.trace_id for r in first.items] == [trace(seeded, "B"), trace(seeded, "C")]
    assert [r.cost_usd for r in second.items] == pytest.approx([0.03, 0.02])
    assert (first.total, second.total, beyond.total, beyond.items) == (5, 5, 5, [])
    steps = [r.steps for r in runs_query.list_runs(module_store, P, start=W[0], end=W[1], sort="steps").items]
    assert steps == sorted(steps)


@pytest.mark.parametrize(
    "bad",
    [{"sort": "colour"}, {"limit": 0}, {"limit": 501}, {"offset": -1}, {"colour": "red"}, {"start": W[1], "end": W[0]}],
)
def test_runs_list_rejects_bad_parameters(module_store: Store, seeded: dict, bad: dict) -> None:
    params = {"start": W[0], "end": W[1]} | bad
    with pytest.raises(ranges.InvalidQuery):
        runs_query.list_runs(module_store, P, **params)


def test_projects_see_only_their_own_runs(module_store: Store, seeded: dict) -> None:
    assert runs_query.list_runs(module_store, "q2", start=W[0], end=W[1]).total == 1
    assert runs_query.list_runs(module_store, "nobody", start=W[0], end=W[1]).total == 0
    assert runs_query.get_run(module_store, "nobody", trace(seeded, "A")) is None


def test_run_detail_has_spans_feedback_and_context(module_store: Store, seeded: dict) -> None:
    detail = runs_query.get_run(module_store, P, trace(seeded, "A").upper())
    assert detail is not None
    assert len(detail.spans) == len(seeded["A"]) == 10
    assert detail.spans[0].kind == "run" and detail.spans[0].parent_span_id == ""
    llm = [s for s in detail.spans if s.kind == "llm"]
    assert [s.ttft_s for s in llm] == pytest.approx([0.10, 0.11, 0.12]) and {s.model for s in llm} == {"sim-small"}
    assert sorted(f.score for f in detail.feedback) == [0.5, 1.0]
    assert detail.run.cost_usd == pytest.approx(0.03) and detail.run.feedback_score == pytest.approx(0.75)
    assert detail.agent_median_cost_usd == pytest.approx(0.02)  # alpha in the week up to A: E (0.01) and A (0.03)
    with pytest.raises(ranges.InvalidQuery, match="32 hex"):
        runs_query.get_run(module_store, P, "not-a-trace")


def test_overview_figures_and_previous_period(module_store: Store, seeded: dict) -> None:
    figures = overview_query.overview(module_store, P, start=W[0], end=W[1]).figures
    assert set(figures) == set(TIMESERIES_METRICS) | {"runs_per_min", "cost_per_hour_usd"}
    value = {k: v.value for k, v in figures.items()}
    assert value["runs"] == 5 and figures["runs"].previous == 2 and figures["runs"].change == pytest.approx(1.5)
    assert value["cost_usd"] == pytest.approx(0.20) and value["cost_per_hour_usd"] == pytest.approx(0.20)
    assert value["success_rate"] == pytest.approx(0.75) and figures["success_rate"].previous == pytest.approx(0.5)
    assert value["cost_per_success_usd"] == pytest.approx(0.20 / 3)
    assert (
        value["error_rate"] == pytest.approx(0.6)
        and value["max_steps"] == 4
        and value["max_run_cost_usd"] == pytest.approx(0.10)
    )
    assert value["steps_per_run"] == pytest.approx(2.4) and value["tool_calls"] == 10
    assert value["tool_failure_rate"] == pytest.approx(0.2) and value["timeout_rate"] == pytest.approx(1 / 22)
    assert value["feedback_score"] == pytest.approx(0.5) and value["input_tokens"] == 1200
    assert value["ttft_p50"] == pytest.approx(0.10, abs=0.011) and value["run_latency_p95"] is not None
    assert figures["runs_per_min"].unit == "runs/min" and value["runs_per_min"] == pytest.approx(5 / 60)


def test_overview_filters_by_agent(module_store: Store, seeded: dict) -> None:
    figures = overview_query.overview(module_store, P, start=W[0], end=W[1], agent="alpha").figures
    assert figures["runs"].value == 2 and figures["cost_usd"].value == pytest.approx(0.13)
    assert figures["success_rate"].value == pytest.approx(0.5)


def _cost(seeded: dict[str, list[SpanRow]], lo: float, hi: float, model: str | None) -> float:
    """The cost of the calls of project P that start in [lo, hi), of ``model`` where given."""
    return sum(
        r.cost_usd
        for rows in seeded.values()
        for r in rows
        if r.kind != "run" and lo * 1e9 <= r.start_time_ns < hi * 1e9 and model in (None, r.model)
    )


def _hourly(seeded: dict[str, list[SpanRow]], lo: float, hi: float, until: float, model: str | None) -> float:
    """Cost per hour over the complete part of [lo, hi): its whole minutes before ``until``."""
    until = until // 60 * 60
    if until <= lo or until >= hi:
        return _cost(seeded, lo, hi, model) / ((hi - lo) / 3600)
    return _cost(seeded, lo, until, model) / ((until - lo) / 3600)


@pytest.mark.parametrize(
    ("start", "watermark", "model"),
    [
        (W[0], W[0] + 2505, None),  # F's calls at +2501 s and +2502 s: before it, but in its minute
        (W[0], W[0] - 1195, None),  # in the previous range: G's calls after its minute
        (W[0] + 7, W[0] + 2505, None),  # the ranges' ends cut minutes (read from spans)
        (W[0], W[0] + 1000, "sim-large"),  # a model filter reads every span
        (W[0], None, None),  # no watermark: the clock, after the range
    ],
)
def test_overview_rates_are_over_the_complete_minutes_of_each_range(
    module_store: Store, seeded: dict, start: float, watermark: float | None, model: str | None
) -> None:
    end = start + 3600
    overview = overview_query.overview(module_store, P, start=start, end=end, model=model, complete_until=watermark)
    until = time.time() if watermark is None else watermark
    rate = overview.figures["cost_per_hour_usd"]
    assert rate.value == pytest.approx(_hourly(seeded, start, end, until, model), rel=1e-9)
    assert rate.previous == pytest.approx(_hourly(seeded, start - 3600, start, until, model), rel=1e-9)
    assert overview.figures["cost_usd"].value == pytest.approx(_cost(seeded, start, end, model), rel=1e-9)


def test_a_watermark_inside_the_range_costs_the_overview_no_query(
    module_store: Store, seeded: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cost after the watermark comes with the range's figures, not from a query of its own."""
    real_query = module_store.query
    asked: list[str] = []

    def spy(sql: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        asked.append(sql)
        return real_query(sql, params)

    monkeypatch.setattr(module_store, "query", spy)
    overview_query.overview(module_store, P, start=W[0], end=W[1], complete_until=W[1] + 60)
    complete = len(asked)
    asked.clear()
    overview_query.overview(module_store, P, start=W[0], end=W[1], complete_until=W[0] + 2505)
    assert len(asked) == complete


def test_timeseries_buckets_sum_to_the_total(module_store: Store, seeded: dict) -> None:
    series = metrics_query.timeseries(module_store, P, "runs", W[0], W[1], 600)
    assert [p.value for p in series.points] == [1, 1, 1, 1, 1, 0]
    assert [p.t for p in series.points] == [W[0] + i * 600 for i in range(6)]
    cost = metrics_query.timeseries(module_store, P, "cost_usd", W[0], W[1], 600, "model")
    by_model: dict[str, float] = {}
    for p in cost.points:
        by_model[p.group] = by_model.get(p.group, 0) + (p.value or 0)
    assert by_model["sim-small"] == pytest.approx(0.10) and by_model["sim-large"] == pytest.approx(0.10)
    success = metrics_query.timeseries(module_store, P, "success_rate", W[0], W[1], 3600, "agent")
    assert {p.group: p.value for p in success.points} == {"alpha": 0.5, "beta": 1.0, "gamma": 1.0}
    assert success.unit == "ratio"


@pytest.mark.parametrize("group_by", ["none", "model"])
def test_timeseries_set_gives_each_series_as_asked_alone(module_store: Store, seeded: dict, group_by: str) -> None:
    metrics = list(reversed(TIMESERIES_METRICS))  # the order asked, not the catalogue's
    together = metrics_query.timeseries_set(module_store, P, metrics, W[0], W[1], 600, group_by)
    assert [s.metric for s in together] == metrics
    for series in together:
        assert series == metrics_query.timeseries(module_store, P, series.metric, W[0], W[1], 600, group_by), (
            series.metric
        )
    with pytest.raises(ranges.InvalidQuery, match="metric"):
        metrics_query.timeseries_set(module_store, P, ["runs", "bogus"], W[0], W[1], 600)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("bogus", W[0], W[1], 60), "metric"),
        (("runs", W[0], W[1], 0), "step_s"),
        (("runs", W[0], W[1] + 86_400 * 30, 1), "buckets"),
    ],
)
def test_timeseries_rejects_bad_parameters(module_store: Store, args: tuple, message: str) -> None:
    with pytest.raises(ranges.InvalidQuery, match=message):
        metrics_query.timeseries(module_store, P, *args)
    with pytest.raises(ranges.InvalidQuery, match="group_by"):
        metrics_query.timeseries(module_store, P, "runs", W[0], W[1], 60, "colour")


def test_cost_breakdown(module_store: Store, seeded: dict) -> None:
    cost = cost_query.cost_breakdown(module_store, P, start=W[0], end=W[1], gpu_hour_usd=3.6, now=W[1])
    assert cost.total_usd == pytest.approx(0.20)
    assert {r.key: r.cost_usd for r in cost.by_model} == pytest.approx({"sim-small": 0.10, "sim-large": 0.10})
    assert {r.key: r.cost_usd for r in cost.by_agent} == pytest.approx({"alpha": 0.13, "beta": 0.05, "gamma": 0.02})
    assert sum(r.calls for r in cost.by_model) == 12 and len(cost.by_day) in (1, 2)
    assert cost.top_runs[0].trace_id == trace(seeded, "B") and cost.cost_per_success_usd == pytest.approx(0.20 / 3)
    levers = cost.levers
    assert (levers.tool_calls, levers.tool_cache_hits, levers.tokens_saved, levers.small_model_calls) == (10, 3, 300, 2)
    assert levers.small_model_share == pytest.approx(2 / 12)
    assert cost.month_to_date_usd >= cost.total_usd - 1e-9 and cost.projected_month_usd >= cost.month_to_date_usd
    hosted = cost.self_hosted
    assert hosted is not None and hosted.gpu_seconds == pytest.approx(60) and hosted.tokens_served == 1440
    assert hosted.cost_per_1k_tokens_usd == pytest.approx(3.6 * 60 / 3600 / 1.44)
    assert hosted.by_load == [
        {"running_requests": 3.0, "cost_per_1k_tokens_usd": pytest.approx(3.6 * 60 / 3600 / 0.36)}
    ]
    assert cost_query.cost_breakdown(module_store, P, start=W[0], end=W[1]).self_hosted is None


def test_filters_and_engines(module_store: Store, seeded: dict) -> None:
    values = runs_query.filters(module_store, P, start=W[0], end=W[1])
    assert (values.agents, values.models, values.services) == (
        ["alpha", "beta", "gamma"],
        ["sim-large", "sim-small"],
        ["svc"],
    )
    engines = engine_query.engines(module_store, P, configured={"cfg": "http://127.0.0.1:9/metrics"}, now=W[0] + 600)
    assert [(e.engine, e.url, e.model_names) for e in engines] == [
        ("cfg", "http://127.0.0.1:9/metrics", []),
        ("e1", "", ["sim-small"]),
    ]
    assert engines[1].last_scrape == pytest.approx(T + 120)


def test_engine_series_averages_gauges_and_keeps_counters(module_store: Store, seeded: dict) -> None:
    series = engine_query.engine_series(module_store, P, "e1", start=W[0], end=W[0] + 600, step_s=60)
    points = {(p.t, p.metric): p.value for p in series.points}
    assert points[(T + 60, "vllm:num_requests_running")] == pytest.approx(3.0)
    assert points[(T + 60, "vllm:generation_tokens_total")] == 200.0
    assert points[(T + 120, "gpu:utilization")] == 70.0
    assert engine_query.engine_series(module_store, "q2", "e1", start=W[0], end=W[0] + 600).points == []


def test_run_begun_before_the_range_never_shows_partial_totals(module_store: Store) -> None:
    rows = agent_run(project="partial", start_s=T + 100, steps=5)
    module_store.insert_spans(rows)
    assert runs_query.list_runs(module_store, "partial", start=T + 102, end=T + 3600).total == 0
    page = runs_query.list_runs(module_store, "partial", start=T + 50, end=T + 101)
    assert page.total == 1 and page.items[0].steps == 5


def test_feedback_needs_a_stored_run_of_its_project(module_store: Store) -> None:
    trace_id = new_trace_id()
    assert (
        feedback_query.add_feedback(module_store, "early-feedback", trace_id, FeedbackIn(score=1.0)) is None
    )  # no run yet
    module_store.insert_spans(agent_run(project="early-feedback", start_s=T + 10, trace_id=trace_id, outcome="success"))
    assert feedback_query.add_feedback(module_store, "another-project", trace_id, FeedbackIn(score=1.0)) is None
    out = feedback_query.add_feedback(module_store, "early-feedback", trace_id, FeedbackIn(score=1.0, label="great"))
    assert out is not None and out.trace_id == trace_id and len(out.feedback_id) == 32
    detail = runs_query.get_run(module_store, "early-feedback", trace_id)
    assert detail is not None and [f.label for f in detail.feedback] == ["great"]
    with pytest.raises(ranges.InvalidQuery):
        feedback_query.add_feedback(module_store, "early-feedback", "xyz", FeedbackIn(score=1.0))


def test_trace_of_ten_thousand_spans_loads_whole(module_store: Store) -> None:
    trace_id, root = new_trace_id(), new_span_id()
    t0 = int(T * 1e9)
    rows = [
        SpanRow(
            project="big",
            trace_id=trace_id,
            span_id=root,
            parent_span_id="",
            name="run",
            kind="run",
            start_time_ns=t0,
            end_time_ns=t0 + 10**12,
        )
    ]
    rows += [
        SpanRow(
            project="big",
            trace_id=trace_id,
            span_id=new_span_id(),
            parent_span_id=root,
            name="llm",
            kind="llm",
            start_time_ns=t0 + i * 10**6,
            end_time_ns=t0 + i * 10**6 + 5 * 10**5,
            input_tokens=10,
            cost_usd=0.001,
        )
        for i in range(9_999)
    ]
    module_store.insert_spans(rows)
    detail = runs_query.get_run(module_store, "big", trace_id)
    assert detail is not None and len(detail.spans) == 10_000
    assert detail.run.llm_calls == 9_999 and detail.run.cost_usd == pytest.approx(9.999)


def test_runs_list_sorts_by_duration_and_filters_heads(module_store: Store, seeded: dict) -> None:
    page = runs_query.list_runs(module_store, P, start=W[0], end=W[1], sort="-duration_s")
    durations = [r.duration_s for r in page.items]
    assert durations == sorted(durations, reverse=True) and page.total == 5
    both = runs_query.list_runs(
        module_store, P, start=W[0], end=W[1], model="sim-large", outcome="failure", sort="duration_s"
    )
    assert [r.trace_id for r in both.items] == [trace(seeded, "B")]


def test_timeseries_with_unaligned_buckets_keeps_the_range_total(module_store: Store, seeded: dict) -> None:
    start, end = W[0] + 7.5, W[1] - 12.25  # boundaries inside minutes: whole minutes come from the rollup
    series = metrics_query.timeseries(module_store, P, "cost_usd", start, end, 300)
    assert sum(p.value or 0 for p in series.points) == pytest.approx(0.20)
    assert overview_query.overview(module_store, P, start=start, end=end).figures["cost_usd"].value == pytest.approx(
        0.20
    )
