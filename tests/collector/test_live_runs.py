"""A run is listed from its first span: running, incomplete, then finished when its root comes."""

from __future__ import annotations

import time

import pytest

from agentwatch_platform.collector.ingest.live_runs import LiveRuns
from agentwatch_platform.collector.query import overview as overview_query
from agentwatch_platform.collector.query import runs as runs_query
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.columns import spans_table
from agentwatch_platform.collector.storage.model import SpanRow
from tests.collector.factories import agent_run

P = "live"


def ingest(store: Store, live: LiveRuns, rows: list[SpanRow]) -> None:
    table = spans_table(rows)
    store.insert_spans(table)
    live.after_insert(store, table)


def runs(store: Store, t0: float, *, idle: float = 300.0, **filters: object) -> list:
    return runs_query.list_runs(store, P, start=t0 - 60, end=t0 + 3600, idle_timeout_s=idle, **filters).items


@pytest.fixture
def t0() -> float:
    return time.time() - 20  # the run started 20 s ago; its spans end at most a few seconds ago


def test_run_is_running_from_its_first_spans_and_finishes_with_its_root(store: Store, t0: float) -> None:
    live = LiveRuns()
    spans = agent_run(project=P, start_s=t0, steps=3)
    *children, root = spans
    first_step = [s for s in children if s.step_index == 0]
    ingest(store, live, first_step)
    (run,) = runs(store, t0)
    assert (run.status, run.steps, run.llm_calls, run.agent) == ("running", 1, 1, "researcher")
    assert run.cost_usd == pytest.approx(0.01)
    ingest(store, live, [s for s in children if s.step_index == 1])
    (run,) = runs(store, t0)
    assert (run.status, run.steps, run.llm_calls) == ("running", 2, 2)  # the step count rises while it runs
    assert [r.trace_id for r in runs(store, t0, status="running")] == [run.trace_id]
    ingest(store, live, [s for s in children if s.step_index in (2, -1)] + [root])  # step 2, the tool calls, the root
    (run,) = runs(store, t0)
    assert (run.status, run.steps, run.tool_calls, run.name) == ("ok", 3, 3, "researcher")
    assert run.cost_usd == pytest.approx(0.03)
    assert runs(store, t0, status="running") == []
    overview = overview_query.overview(store, P, start=t0 - 60, end=t0 + 3600)
    assert (overview.running_runs, overview.incomplete_runs, overview.figures["runs"].value) == (0, 0, 1)


def test_run_whose_root_never_comes_becomes_incomplete_and_keeps_its_cost(store: Store, t0: float) -> None:
    live = LiveRuns()
    crashed = [s for s in agent_run(project=P, start_s=t0, steps=2) if s.kind != "run"]
    done = agent_run(project=P, start_s=t0 + 1, steps=1)
    ingest(store, live, crashed + done)
    assert {r.status for r in runs(store, t0)} == {"running", "ok"}
    listed = runs(store, t0, idle=0.001)  # nothing arrived within the idle timeout: incomplete
    assert sorted(r.status for r in listed) == ["incomplete", "ok"]
    (incomplete,) = runs(store, t0, idle=0.001, status="incomplete")
    assert incomplete.cost_usd == pytest.approx(0.02) and incomplete.steps == 2
    overview = overview_query.overview(store, P, start=t0 - 60, end=t0 + 3600, idle_timeout_s=0.001)
    assert (overview.running_runs, overview.incomplete_runs, overview.figures["runs"].value) == (0, 1, 2)
    # the totals equal the sum over runs in every state
    assert overview.figures["cost_usd"].value == pytest.approx(sum(r.cost_usd for r in listed))
    detail = runs_query.get_run(store, P, incomplete.trace_id, idle_timeout_s=0.001)
    assert detail is not None and detail.run.status == "incomplete"


def test_late_spans_after_the_root_open_nothing(store: Store, t0: float) -> None:
    live = LiveRuns()
    spans = agent_run(project=P, start_s=t0, steps=2)
    ingest(store, live, spans[-1:])  # the root first
    ingest(store, LiveRuns(), spans[:-1])  # a new collector: the store says the root is there
    (run,) = runs(store, t0)
    assert (run.status, run.steps) == ("ok", 2)
    assert store.query("SELECT sum(opened) AS n FROM runs_agg WHERE project = {p:String}", {"p": P})[0]["n"] == 0


def test_spans_with_a_missing_parent_or_a_parent_cycle_are_counted_and_flagged(store: Store, t0: float) -> None:
    from dataclasses import replace

    live = LiveRuns()
    spans = agent_run(project=P, start_s=t0, steps=2)
    by_kind = {s.kind: s for s in spans}
    orphan = replace(by_kind["tool"], parent_span_id="ff" * 8)  # its parent never arrived
    a, b = by_kind["step"], by_kind["llm"]
    cycle = [replace(a, parent_span_id=b.span_id), replace(b, parent_span_id=a.span_id)]
    ids = {orphan.span_id, a.span_id, b.span_id}
    ingest(store, live, [s for s in spans if s.span_id not in ids] + [orphan, *cycle])
    (run,) = runs(store, t0)
    assert run.status == "ok" and run.tool_calls == 2 and run.llm_calls == 2  # all counted
    detail = runs_query.get_run(store, P, run.trace_id)
    assert detail is not None
    flags = {s.span_id: (s.parent_missing, s.in_cycle) for s in detail.spans}
    assert flags[orphan.span_id] == (True, False)
    assert flags[a.span_id] == flags[b.span_id] == (False, True)
    assert sum(1 for f in flags.values() if f != (False, False)) == 3
