"""Compare two runs side by side (``?a=<trace id>&b=<trace id>``, from a run's detail page or two
trace ids typed here): outcome, steps, tokens, cost per step, context growth, tools called, and
the input tokens and cost of each step next to each other."""

from __future__ import annotations

import re

import streamlit as st

from agentwatch_api.client import CollectorClient as Api
from agentwatch_api.schemas import RunDetail
from agentwatch_platform.dashboard import run_compare, run_table, tables, ui

TRACE_ID = re.compile(r"^[0-9a-f]{32}$")
COLUMNS = [tables.Column("figure", "figure"), tables.Column("a", "run A"), tables.Column("b", "run B")]
STEP_COLUMNS = [
    tables.Column("step", "step", numeric=True),
    tables.Column("a_input", "A input tokens", numeric=True),
    tables.Column("b_input", "B input tokens", numeric=True),
    tables.Column("a_cost", "A cost", numeric=True),
    tables.Column("b_cost", "B cost", numeric=True),
]


def render() -> None:
    st.title("Compare two runs")
    c = st.columns(2)
    a = c[0].text_input("Run A (trace id)", value=st.query_params.get("a", ""), key="compare_a").strip().lower()
    b = c[1].text_input("Run B (trace id)", value=st.query_params.get("b", ""), key="compare_b").strip().lower()
    bad = [name for name, tid in (("A", a), ("B", b)) if tid and not TRACE_ID.match(tid)]
    if bad:
        st.error(f"Run {' and '.join(bad)}: a trace id is 32 hex digits.")
        return
    if not (a and b):
        st.info("Give two trace ids (a run's detail page links here with its own as A; copy B from the Runs page).")
        return
    with ui.guarded("the runs"):
        left: RunDetail = ui.fetch(Api.run, trace_id=a)
        right: RunDetail = ui.fetch(Api.run, trace_id=b)
        _side_by_side(left, right)


def _side_by_side(left: RunDetail, right: RunDetail) -> None:
    fa, fb = run_compare.figures(left), run_compare.figures(right)
    rows = [
        tables.Row(id=key, cells=[label, fa[key], fb[key]], marks={"b": "dim"} if fa[key] == fb[key] else {})
        for key, label in run_compare.FIGURES
    ]
    tables.table(COLUMNS, rows, key="compare_table")
    run_table.runs_table(
        [left.run, right.run], key="compare_runs", columns=["time", "agent", "status", "cost", "trace_id"]
    )
    sa, sb = dict(_steps(left)), dict(_steps(right))
    steps = sorted(set(sa) | set(sb))
    step_rows = [
        tables.Row(
            id=str(s),
            cells=[
                str(s),
                *(_cell(side.get(s), 0, "") for side in (sa, sb)),
                *(_cell(side.get(s), 1, "USD") for side in (sa, sb)),
            ],
        )
        for s in steps
    ]
    st.subheader("Per step")
    tables.table(STEP_COLUMNS, step_rows, key="compare_steps")
    st.caption("Input tokens per step show the context each step re-sent: growing with the step in a ReAct run.")


def _steps(detail: RunDetail) -> list[tuple[int, tuple[int, float]]]:
    return [(step, (tokens, cost)) for step, tokens, cost in run_compare.per_step(detail)]


def _cell(value: tuple[int, float] | None, i: int, unit: str) -> str:
    if value is None:
        return ui.BLANK
    return f"{value[0]:,}" if i == 0 else ui.fmt(value[1], unit)


render()
