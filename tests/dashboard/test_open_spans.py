"""``dashboard.live``: the stand-ins for spans that have not ended, and the pinned running runs."""

from __future__ import annotations

from agentwatch import semconv as sc

from agentwatch_api.schemas import RunSummary
from agentwatch_platform.dashboard import live, run_table, trace
from tests.dashboard.test_analysis import span


def running_run(**kw: object) -> RunSummary:
    fields = {
        "trace_id": "t" * 32,
        "agent": "researcher",
        "name": "researcher",
        "start_time": 100.0,
        "end_time": 130.0,
        "duration_s": 30.0,
        "status": "running",
        "steps": 2,
        "llm_calls": 2,
        "tool_calls": 1,
        "tool_failures": 0,
        "input_tokens": 900,
        "output_tokens": 100,
        "cached_tokens": 0,
        "total_tokens": 1000,
        "cost_usd": 0.02,
    }
    return RunSummary(**(fields | kw))


def stored_so_far() -> list:
    """What a running run has stored: its start marker, a finished step, the open step's LLM call."""
    marker = span(
        "m",
        "root",
        kind="other",
        start=100,
        dur=0,
        agent="researcher",
        attributes={sc.AW_RUN_START: "true", sc.AW_RUN_NAME: "researcher"},
    )
    return [
        marker,
        span("s0", "root", start=101, dur=9, step_index=0),
        span("l0", "s0", kind="llm", start=101, dur=2, step_index=0),
        span("l1", "s1", kind="llm", start=111, dur=2, step_index=1),
        span("e1", "l2", kind="engine", start=121, dur=1),
    ]


def test_open_parents_stand_in_from_their_first_child_to_now() -> None:
    opened = {s.span_id: s for s in live.open_spans(stored_so_far(), until=130.0)}
    assert set(opened) == {"root", "s1", "l2"}
    root, step, call = opened["root"], opened["s1"], opened["l2"]
    assert (root.kind, root.name, root.parent_span_id, root.start_time, root.end_time) == (
        "run",
        "researcher",
        "",
        100,
        130,
    )
    assert (step.kind, step.name, step.parent_span_id, step.step_index) == ("step", "step 1", "root", 1)
    assert call.kind == "llm"  # only engine spans under it: the client's LLM call under way
    assert all(s.status == live.OPEN for s in opened.values())


def test_open_spans_nest_the_tree_and_are_marked() -> None:
    run = running_run()
    spans = live.with_open_spans(run, stored_so_far(), now=135.0)
    order = [(s.span_id, depth) for s, depth in trace.analysis.tree_order(spans)]
    assert order[0] == ("root", 0) and ("s1", 1) in order and ("l1", 2) in order
    rows = {r["span_id"]: r for r in trace.tree_rows(trace.analysis.tree_order(spans), {})}
    assert rows["root"]["status"] == live.OPEN and trace.OPEN_MARK in rows["root"]["span"]
    assert rows["l0"]["status"] == "ok" and trace.OPEN_MARK not in rows["l0"]["span"]
    assert max(s.end_time for s in spans) == 135.0


def test_an_incomplete_run_ends_its_open_spans_at_its_last_activity_and_a_finished_one_has_none() -> None:
    incomplete = live.with_open_spans(running_run(status="incomplete"), stored_so_far(), now=999.0)
    assert max(s.end_time for s in incomplete if s.status == live.OPEN) == 130.0
    assert live.with_open_spans(running_run(status="ok"), stored_so_far(), now=999.0) == stored_so_far()
    assert live.open_spans([span("root", kind="run"), span("c", "root")], until=5.0) == []


def test_running_rows_list_oldest_first_with_elapsed_time_and_last_activity() -> None:
    rows = run_table.running_rows(
        [running_run(trace_id="b" * 32, start_time=120.0), running_run(trace_id="a" * 32)], now=160.0
    )
    assert [r.id for r in rows] == ["a" * 32, "b" * 32]
    cells = [dict(zip(run_table.RUNNING_COLUMNS, r.cells, strict=True)) for r in rows]
    assert [c["elapsed"] for c in cells] == ["60.00 s", "40.00 s"] and cells[0]["last"] == "30 s ago"
    assert rows[0].href == f"./run?run={'a' * 32}"
