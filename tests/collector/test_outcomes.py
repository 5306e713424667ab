"""Refused requests are no runs: every run figure of a small fixture equals a hand computation
over its runs that did work, and the refused requests are counted on their own (issue 33).

Both back ends; the overview read through run heads per minute, through the heads of cut minutes,
and the agent's median run cost merged and from the run closer's minutes."""

from __future__ import annotations

import statistics
import time
from dataclasses import replace

import pytest

from agentwatch_platform.collector.query import metrics as metrics_query
from agentwatch_platform.collector.query import overview as overview_query
from agentwatch_platform.collector.query import runs as runs_query
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.model import SpanRow
from agentwatch_platform.collector.storage.run_closes import close_runs
from tests.collector.factories import agent_run, new_span_id, new_trace_id

P = "outcomes"
T = (int(time.time()) // 3600 - 3) * 3600
# (start second, research steps, outcome, budget stop): a run lasts steps + 1 s and costs 0.01 a step
SERVED = [(65, 1, "success", ""), (250, 2, "success", ""), (430, 3, "failure", ""), (610, 4, "success", "")]
LAST = (1210, 5, "abandoned", "cost")  # the run whose detail shows the agent's median
REFUSED_AT = (70, 72, 400, 1000, 1100)  # requests refused before any work: 0.2 ms, $0


def _refused(at: int) -> list[SpanRow]:
    t = (T + at) * 10**9
    return [
        SpanRow(
            project=P,
            trace_id=new_trace_id(),
            span_id=new_span_id(),
            parent_span_id="",
            name="researcher",
            kind="run",
            start_time_ns=t,
            end_time_ns=t + 200_000,
            agent_name="researcher",
            user_id="frugal",
            outcome="refused",
            attributes={"agentwatch.lever.name": "rate_limit", "agentwatch.lever.refused": "true"},
        )
    ]


def _served(at: int, steps: int, outcome: str, budget: str) -> list[SpanRow]:
    status = "error" if outcome == "failure" else "ok"
    rows = agent_run(project=P, start_s=T + at, steps=steps, outcome=outcome, budget_exceeded=budget, status=status)
    return [replace(r, user_id="frugal") for r in rows]


@pytest.fixture(scope="module")
def seeded(module_store: Store) -> str:
    for at, steps, outcome, budget in [*SERVED, LAST]:
        module_store.insert_spans(_served(at, steps, outcome, budget))
    for at in REFUSED_AT:
        module_store.insert_spans(_refused(at))
    return _last_run(module_store)[0]


def _last_run(store: Store) -> list[str]:
    page = runs_query.list_runs(store, P, start=T + LAST[0], end=T + LAST[0] + 1)
    return [r.trace_id for r in page.items]


RUNS = [*SERVED, LAST]
DURATIONS = [steps + 1.0 for _, steps, _, _ in RUNS]  # 2, 3, 4, 5, 6 s
COSTS = [0.01 * steps for _, steps, _, _ in RUNS]


def _p95(values: list[float]) -> float:  # ClickHouse's quantile: linear between the order statistics
    return statistics.quantiles(values, n=20, method="inclusive")[18]


@pytest.mark.parametrize(
    ("start", "end"),
    [(T, T + 3600), (T + 7, T + 1800 - 13)],  # whole minutes (run_minutes), and cut minutes (heads)
)
def test_headline_run_figures_count_the_runs_that_did_work(
    module_store: Store, seeded: str, start: int, end: int
) -> None:
    overview = overview_query.overview(module_store, P, start=start, end=end)
    value = {name: h.value for name, h in overview.figures.items()}
    assert value["runs"] == len(RUNS) == 5
    assert value["run_latency_p50"] == pytest.approx(statistics.median(DURATIONS))  # not 0.2 ms
    assert value["run_latency_p95"] == pytest.approx(_p95(DURATIONS))
    assert value["success_rate"] == pytest.approx(3 / 5)  # success, success, failure, success, abandoned
    assert value["error_rate"] == pytest.approx(2 / 5)  # the failure and the budget stop
    assert value["steps_per_run"] == pytest.approx(statistics.mean(s for _, s, _, _ in RUNS))
    assert overview.refused_runs == len(REFUSED_AT) == 5
    assert overview.running_runs == overview.incomplete_runs == 0


def test_timeseries_runs_leave_refused_requests_out(module_store: Store, seeded: str) -> None:
    series = metrics_query.timeseries(module_store, P, "runs", start=T, end=T + 3600, step_s=600)
    assert sum(p.value or 0 for p in series.points) == 5


def test_agent_median_run_cost_is_over_runs_that_did_work(module_store: Store, seeded: str) -> None:
    expected = statistics.median(COSTS)  # 0.03; with the five $0 refusals it would be 0.01
    assert runs_query.get_run(module_store, P, seeded).agent_median_cost_usd == pytest.approx(expected)
    close_runs(module_store, margin_s=-1)  # whole minutes now come from the closer's rows
    assert runs_query.get_run(module_store, P, seeded).agent_median_cost_usd == pytest.approx(expected)
    overview = overview_query.overview(module_store, P, start=T, end=T + 3600)
    assert overview.figures["max_steps"].value == 5 and overview.figures["runs"].value == 5


def test_runs_list_shows_refused_requests_only_when_asked(module_store: Store, seeded: str) -> None:
    default = runs_query.list_runs(module_store, P, start=T, end=T + 3600)
    assert default.total == 5 and all(r.outcome != "refused" for r in default.items)
    by_cost = runs_query.list_runs(module_store, P, start=T, end=T + 3600, sort="cost_usd")  # the merged path
    assert by_cost.total == 5 and min(r.cost_usd for r in by_cost.items) == pytest.approx(0.01)
    refused = runs_query.list_runs(module_store, P, start=T, end=T + 3600, outcome="refused")
    assert refused.total == 5 and {r.cost_usd for r in refused.items} == {0.0}
    merged = runs_query.list_runs(module_store, P, start=T, end=T + 3600, outcome="refused", sort="cost_usd")
    assert merged.total == 5


def test_run_heads_per_minute_count_refused_requests_apart(module_store: Store, seeded: str) -> None:
    [row] = module_store.query(
        "SELECT sum(runs) AS runs, sum(refused) AS refused FROM run_minutes WHERE project = {project:String}",
        {"project": P},
    )
    assert (int(row["runs"]), int(row["refused"])) == (5, 5)
