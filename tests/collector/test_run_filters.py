"""Runs found by the store, over every run of the range: user, session, tool failed, search
(run fields and captured text), sort on any column; and what a model filter keeps (the tool
calls of the runs that used the model, the levers over those runs' calls). Both back ends."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from agentwatch_api.schemas import FeedbackIn, RunSummary
from agentwatch_platform.collector.query import cost as cost_query
from agentwatch_platform.collector.query import feedback as feedback_query
from agentwatch_platform.collector.query import metrics as metrics_query
from agentwatch_platform.collector.query import overview as overview_query
from agentwatch_platform.collector.query import runs as runs_query
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.model import SpanRow
from agentwatch_platform.collector.storage.sql import runs as runs_sql
from tests.collector.factories import agent_run

T = (int(time.time()) // 3600 - 3) * 3600
W = {"start": T, "end": T + 3600}
P = "rf"
SMALL = {"agentwatch.llm.model_tier": "small"}


def _run(name: str, *, user: str, session: str, start: int, **kwargs: object) -> list[SpanRow]:
    rows = agent_run(project=P, agent=name, start_s=T + start, **kwargs)  # type: ignore[arg-type]
    return [replace(r, user_id=user, session_id=session) for r in rows]


def _runs() -> dict[str, list[SpanRow]]:
    r1 = _run("alpha", user="alice", session="s-1", start=60, steps=2, failing_tools=1, outcome="success")
    llm = [i for i, r in enumerate(r1) if r.kind == "llm"]
    r1[llm[0]] = replace(
        r1[llm[0]], input_text='[{"role": "user", "content": "What is the capital of France?"}]', attributes=SMALL
    )
    r1[llm[1]] = replace(r1[llm[1]], model="sim-large", cost_usd=0.05)  # routed back to the large model
    r2 = _run("beta", user="bob", session="s-2", start=600, steps=3, model="sim-large", cost_per_call=0.05)
    r2 = [replace(r, output_text="Paris is the answer.") if r.kind == "llm" else r for r in r2]
    r3 = _run(
        "gamma",
        user="alice",
        session="s-3",
        start=1200,
        steps=1,
        timed_out_tools=1,
        model="sim-large",
        status="timeout",
    )
    r4 = _run("alpha", user="carol", session="s-1", start=1800, steps=4, cost_per_call=0.005)
    r4 = [replace(r, attributes=SMALL) if r.kind == "llm" else r for r in r4]
    return {"R1": r1, "R2": r2, "R3": r3, "R4": r4}


FEEDBACK = {"R1": [0.9], "R2": [0.2], "R3": [1.0, 0.0]}  # R3's mean, 0.5, sorts between; R4 has none


@pytest.fixture(scope="module")
def runs(module_store: Store) -> dict[str, str]:
    """Run name -> trace id."""
    seeded = _runs()
    for rows in seeded.values():
        module_store.insert_spans(rows)
    for name, scores in FEEDBACK.items():
        for score in scores:
            feedback_query.add_feedback(module_store, P, seeded[name][0].trace_id, FeedbackIn(score=score))
    return {name: rows[0].trace_id for name, rows in seeded.items()}


def _found(store: Store, runs: dict[str, str], **filters: object) -> str:
    page = runs_query.list_runs(store, P, **W, sort="start_time", **filters)  # type: ignore[arg-type]
    names = {trace: name for name, trace in runs.items()}
    assert page.total == len(page.items)
    return " ".join(names[r.trace_id] for r in page.items)


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"user_id": "alice"}, "R1 R3"),
        ({"session_id": "s-1"}, "R1 R4"),
        ({"user_id": "ali"}, ""),  # a filter is exact; the search finds parts
        ({"tool_failed": True}, "R1 R3"),  # R3's tool timed out; R1 succeeded with a failed tool
        ({"tool_failed": False}, "R2 R4"),
        ({"user_id": "alice", "tool_failed": True, "status": "ok"}, "R1"),
        ({"search": "ALI"}, "R1 R3"),  # user id, any case
        ({"search": "bet"}, "R2"),  # agent and run name
        ({"search": "s-1"}, "R1 R4"),  # session id
        ({"search": "france"}, "R1"),  # captured prompt text
        ({"search": "Paris"}, "R2"),  # captured completion text
        ({"search": "paris", "agent": "alpha"}, ""),
        ({"search": ""}, "R1 R2 R3 R4"),
        ({"search": "nowhere"}, ""),
        ({"model": "sim-small", "min_steps": 3}, "R4"),
        ({"min_cost": 0.05, "max_cost": 0.1}, "R1"),
    ],
)
def test_runs_filters_apply_in_the_store(
    module_store: Store, runs: dict[str, str], filters: dict, expected: str
) -> None:
    assert _found(module_store, runs, **filters) == expected


def test_search_by_part_of_a_trace_id(module_store: Store, runs: dict[str, str]) -> None:
    found = runs_query.list_runs(module_store, P, **W, search=runs["R4"][:12].upper())
    assert [r.trace_id for r in found.items] == [runs["R4"]]


def _expected_order(items: list[RunSummary], column: str, descending: bool) -> list[str]:
    by_id = sorted(items, key=lambda r: r.trace_id)  # ties: by trace id, ascending in both directions
    valued = sorted(
        (r for r in by_id if getattr(r, column) is not None), key=lambda r: getattr(r, column), reverse=descending
    )
    return [
        r.trace_id for r in valued + [r for r in by_id if getattr(r, column) is None]
    ]  # no value (no feedback): last either way


@pytest.mark.parametrize("column", runs_sql.RUN_SORTS)
def test_runs_sort_on_every_column(module_store: Store, runs: dict[str, str], column: str) -> None:
    everything = runs_query.list_runs(module_store, P, **W).items
    for descending in (False, True):
        page = runs_query.list_runs(module_store, P, **W, sort=("-" if descending else "") + column, limit=3, offset=1)
        assert [r.trace_id for r in page.items] == _expected_order(everything, column, descending)[1:], (
            column,
            descending,
        )


def test_runs_sort_by_feedback_score_puts_runs_without_one_last(module_store: Store, runs: dict[str, str]) -> None:
    names = {trace: name for name, trace in runs.items()}
    for sort, expected in (("feedback_score", "R2 R3 R1 R4"), ("-feedback_score", "R1 R3 R2 R4")):
        page = runs_query.list_runs(module_store, P, **W, sort=sort)
        assert " ".join(names[r.trace_id] for r in page.items) == expected, sort
    assert [r.feedback_score for r in runs_query.list_runs(module_store, P, **W, sort="feedback_score").items] == [
        0.2,
        0.5,
        0.9,
        None,
    ]


def test_model_filter_keeps_the_tool_calls_of_runs_that_used_the_model(
    module_store: Store, runs: dict[str, str]
) -> None:
    # sim-small: runs R1 (2 tools, 1 failed) and R4 (4 tools); before, tool spans (no model) were dropped: rate "-"
    small = overview_query.overview(module_store, P, **W, model="sim-small").figures
    assert small["tool_calls"].value == 6 and small["tool_failure_rate"].value == pytest.approx(1 / 6)
    assert small["cost_usd"].value == pytest.approx(0.01 + 4 * 0.005)  # the model's own calls only
    series = metrics_query.timeseries(
        module_store, P, "tool_failure_rate", W["start"], W["end"], 3600, model="sim-large"
    )
    assert series.points[0].value == pytest.approx(2 / 6)  # R1, R2, R3: 6 tool calls, 2 failed or timed out


@pytest.mark.parametrize(("model", "calls", "small"), [(None, 10, 5), ("sim-large", 6, 1), ("sim-small", 6, 5)])
def test_cost_levers_under_a_model_filter_cover_the_runs_that_used_it(
    module_store: Store, runs: dict[str, str], model: str | None, calls: int, small: int
) -> None:
    """The small model's share among one model's own calls is 0 or 1 by definition (it read
    "0.0 %" filtered to the large model while half the calls were small)."""
    levers = cost_query.cost_breakdown(module_store, P, **W, model=model).levers
    assert (levers.llm_calls, levers.small_model_calls) == (calls, small)
    assert levers.small_model_share == pytest.approx(small / calls)
