"""Closed run minutes (``collector.storage.run_closes``) give the figures of the runs merged whole.

The per-run figures of an overview or a time series (steps per run, the largest run's steps and
cost, feedback) are read from closed minutes once the closer has run; every test compares them
with the same figures merged from runs_agg (``sql.metrics.run_totals``, itself checked against the
spans in test_rollup), after the changes that make a closed minute wrong: a late span that turns
a run's LLM-call count into a step count, a late costly call, a child that starts before its run
(moving it to another minute and bucket), a root that arrives after its run was listed.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import replace
from typing import Any

import pytest

from agentwatch_api.schemas import FeedbackIn
from agentwatch_platform.collector.ingest.live_runs import LiveRuns
from agentwatch_platform.collector.query import feedback as feedback_query
from agentwatch_platform.collector.query import metrics as metrics_query
from agentwatch_platform.collector.query import ranges
from agentwatch_platform.collector.query import runs as runs_query
from agentwatch_platform.collector.query.ranges import closed_minute_params
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.columns import spans_table
from agentwatch_platform.collector.storage.maintenance import rebuild_totals
from agentwatch_platform.collector.storage.model import SpanRow
from agentwatch_platform.collector.storage.run_closes import RunCloser, close_runs
from agentwatch_platform.collector.storage.sql import closes as closes_sql
from tests.collector.factories import agent_run, new_span_id

P = "closes"
T0 = (int(time.time()) // 3600 - 6) * 3600 + 1234.5  # off the hour and off the minute
TOTALS = ("steps_per_run", "max_steps", "max_run_cost_usd", "feedback_score")
RANGES = [  # (start, end, step): an overview's two buckets, hourly buckets, buckets off the minute
    (T0, T0 + 6 * 3600, 3 * 3600),
    (T0 + 600, T0 + 5 * 3600 + 600, 3600),
    (T0 + 30.5, T0 + 4 * 3600 + 30.5, 1250),
]


def _seed(store: Store) -> list[list[SpanRow]]:
    rng = random.Random(7)
    runs = []
    t = T0 - 300.0
    while t < T0 + 6 * 3600:
        rows = agent_run(
            project=P,
            agent=rng.choice(("alpha", "beta")),
            start_s=t,
            steps=rng.randint(1, 6),
            cost_per_call=rng.choice((0.01, 0.03)),
        )
        if rng.random() < 0.3:  # no step spans: its steps are its LLM calls
            rows = [r for r in rows if r.kind != "step"]
        runs.append(rows)
        t += rng.uniform(200, 700)
    for i in range(0, len(runs), 7):
        store.insert_spans([r for run in runs[i : i + 7] for r in run])
    for run in runs[::5]:
        feedback_query.add_feedback(store, P, run[0].trace_id, FeedbackIn(score=rng.choice((0.0, 1.0))))
    return runs


@pytest.fixture(autouse=True)
def _closed_path_for_few_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """These stores hold a few runs: the closed path is taken all the same, to be compared."""
    monkeypatch.setattr(ranges, "MIN_CLOSED_RUN_ROWS", 0)


def _close(store: Store) -> None:
    """A pass that closes every row inserted so far; later rows are inserted after its mark."""
    close_runs(store, margin_s=-1)
    time.sleep(1.05 - time.time() % 1)


def _figures(
    store: Store,
    *,
    closed: bool,
    monkeypatch: pytest.MonkeyPatch,
    group_by: str = "none",
    ranges: list[tuple[float, float, float]] = RANGES,
) -> list[Any]:
    with monkeypatch.context() as m:
        if not closed:
            m.setattr(metrics_query, "closed_minute_params", lambda store, params: {})
        return [
            [
                (p.group, p.value)
                for s in metrics_query.timeseries_set(store, P, TOTALS, a, b, step, group_by)
                for p in s.points
            ]
            for a, b, step in ranges
        ]


def _closed_path_used(store: Store) -> bool:
    a, b, step = RANGES[0]
    params = {"project": P, "start_ns": int(a * 1e9), "end_ns": int(b * 1e9), "step_ns": int(step * 1e9)}
    return "exact_minutes" in closed_minute_params(store, params)


def _same(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    for group_by in ("none", "agent"):
        closed = _figures(store, closed=True, monkeypatch=monkeypatch, group_by=group_by)
        merged = _figures(store, closed=False, monkeypatch=monkeypatch, group_by=group_by)
        assert _approx(closed, merged), (group_by, closed, merged)
    assert _medians(store, closed=True, monkeypatch=monkeypatch) == pytest.approx(
        _medians(store, closed=False, monkeypatch=monkeypatch), rel=1e-9
    )


def _medians(store: Store, *, closed: bool, monkeypatch: pytest.MonkeyPatch) -> list[float | None]:
    """The agent's median run cost in the week before runs across the seed (a run's detail)."""
    with monkeypatch.context() as m:
        if not closed:
            m.setattr(runs_query, "closed_minute_params", lambda store, params: {})
        runs = [
            runs_query.list_runs(store, P, start=T0 - 600, end=T0 + 7 * 3600, limit=500).items[i] for i in (0, 5, -1)
        ]
        return [runs_query._agent_median(store, P, r.model_dump()) for r in runs]


def _approx(a: list[Any], b: list[Any]) -> bool:
    flat_a = [x for rng in a for x in rng]
    flat_b = [x for rng in b for x in rng]
    return len(flat_a) == len(flat_b) and all(
        ga == gb and (va == vb or (va is not None and vb is not None and abs(va - vb) <= 1e-9 * max(1, abs(vb))))
        for (ga, va), (gb, vb) in zip(flat_a, flat_b, strict=True)
    )


def test_closed_minutes_give_the_figures_of_the_merged_runs(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    _seed(store)
    assert not _closed_path_used(store)  # never closed: runs are merged as before
    _close(store)
    assert _closed_path_used(store)
    _same(store, monkeypatch)
    assert _figures(store, closed=True, monkeypatch=monkeypatch)[0][0][1] is not None


def test_late_spans_change_the_figures_as_the_merged_runs(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    runs = _seed(store)
    _close(store)
    no_steps = next(run for run in runs if not any(r.kind == "step" for r in run))
    root = next(r for r in no_steps if r.kind == "run")
    late = [
        # a step span: the run's steps go from its LLM calls to 1
        replace(root, span_id=new_span_id(), parent_span_id=root.span_id, kind="step", name="late step"),
        # a costly call in another run: the largest run cost
        replace(next(r for r in runs[3] if r.kind == "llm"), span_id=new_span_id(), cost_usd=9.0, name="late call"),
        # a child an hour before its run: the run moves to an earlier minute, hour and bucket
        replace(
            next(r for r in runs[len(runs) // 2] if r.kind == "tool"),
            span_id=new_span_id(),
            start_time_ns=runs[len(runs) // 2][0].start_time_ns - 3_600_000_000_000,
        ),
    ]
    store.insert_spans(late)
    assert _closed_path_used(store)
    _same(store, monkeypatch)
    _close(store)  # the next pass rewrites the minutes those runs were and are in
    _same(store, monkeypatch)


def test_a_run_listed_before_its_root_is_closed_again_when_it_comes(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    _seed(store)
    *children, root = agent_run(project=P, agent="beta", start_s=T0 + 2 * 3600 + 17, steps=9, cost_per_call=0.5)
    live = LiveRuns()
    table = spans_table(children)
    store.insert_spans(table)
    live.after_insert(store, table)  # an opening head: the run counts from its first spans
    _close(store)
    _same(store, monkeypatch)
    store.insert_spans([root])
    _same(store, monkeypatch)
    _close(store)
    _same(store, monkeypatch)


def test_every_writer_of_run_rows_marks_when_it_inserted(store: Store) -> None:
    before = int(time.time()) - 1
    written = "SELECT min(inserted) AS first, countIf(opened > 0) AS heads FROM runs_agg"
    *children, _root = agent_run(project=P, start_s=time.time() - 600, steps=2)
    table = spans_table(children)
    store.insert_spans(table)  # the view
    LiveRuns().after_insert(store, table)  # an opening head
    rows = store.query(written)[0]
    assert rows["heads"] == 1 and int(rows["first"]) >= before
    rebuild_totals(store, since=time.time() - 7200, project=P)  # a rebuild
    assert int(store.query(written)[0]["first"]) >= before


def test_a_pass_recomputes_one_day_of_runs_at_a_time(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The backfill of a store of many days groups a day's runs per statement, not all of them; a
    run across midnight is closed in both days, and a late span of an old day reopens that day only."""
    midnight = (int(time.time()) // 86_400 - 1) * 86_400
    runs = [
        agent_run(project=P, agent=agent, start_s=midnight + day * 86_400 + offset, steps=steps, cost_per_call=0.02)
        for day in (-2, -1, 0)
        for agent, offset, steps in (("alpha", 3600.5, 2), ("beta", 7200.25, 5))
    ]
    runs.append(agent_run(project=P, start_s=midnight - 2.5, steps=4, cost_per_call=0.5))  # across midnight
    store.insert_spans([r for run in runs for r in run])
    stale_days: list[int] = []
    real_query = store.query

    def spy(sql: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        if sql == closes_sql.STALE_MINUTES_BY_PROJECT:
            assert params is not None
            stale_days.append(int(params["day"]) // 86_400 - midnight // 86_400)
        return real_query(sql, params)

    monkeypatch.setattr(store, "query", spy)
    _close(store)
    assert stale_days == [-2, -1, 0]
    ranges = [(midnight - 2 * 86_400, midnight + 86_400, 6 * 3600), (midnight - 600, midnight + 600, 60)]
    closed = _figures(store, closed=True, monkeypatch=monkeypatch, ranges=ranges)
    assert _approx(closed, _figures(store, closed=False, monkeypatch=monkeypatch, ranges=ranges))
    assert max(v for _, v in closed[1] if v is not None) == 4  # the run across midnight: 4 steps, $2
    a, b, step = ranges[0]
    params = {"project": P, "start_ns": int(a * 1e9), "end_ns": int(b * 1e9), "step_ns": int(step * 1e9)}
    assert "exact_minutes" in closed_minute_params(store, params)

    stale_days.clear()
    old = runs[0]
    store.insert_spans([replace(next(r for r in old if r.kind == "llm"), span_id=new_span_id(), cost_usd=3.0)])
    _close(store)
    assert stale_days == [-2]
    closed = _figures(store, closed=True, monkeypatch=monkeypatch, ranges=ranges)
    assert _approx(closed, _figures(store, closed=False, monkeypatch=monkeypatch, ranges=ranges))


def test_a_pass_with_nothing_new_writes_nothing(store: Store) -> None:
    _seed(store)
    assert close_runs(store, margin_s=-1) > 0  # the first pass closes every minute with runs
    time.sleep(1.05 - time.time() % 1)
    assert close_runs(store, margin_s=-1) == 0


def test_a_range_of_few_runs_merges_them_without_the_closed_minutes(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    _seed(store)
    _close(store)
    assert _closed_path_used(store)
    monkeypatch.setattr(ranges, "MIN_CLOSED_RUN_ROWS", 10**6)  # the default's side: fewer rows than that
    assert not _closed_path_used(store)


async def test_the_closer_passes_at_start_only_while_it_holds_its_role(store: Store) -> None:
    _seed(store)
    marks = "SELECT count() AS n FROM run_close_marks"
    async with RunCloser(lambda: store, may_close=lambda: False, every_s=3600):
        await asyncio.sleep(1)  # a while without the role: a pass it made would show as a mark
    assert store.query(marks)[0]["n"] == 0  # another collector closes runs
    async with RunCloser(lambda: store, may_close=lambda: True, every_s=3600):
        deadline = time.monotonic() + 60
        while not store.query(marks)[0]["n"] and time.monotonic() < deadline:  # the first pass, at start: the backfill
            await asyncio.sleep(0.1)  # polling, in the loop the closer runs on
    assert store.query(marks)[0]["n"] == 1
    assert store.query("SELECT count() AS n FROM closed_run_minutes")[0]["n"] > 0
