"""Runs: a filterable, sortable table paged through the API (``limit``/``offset``); a click opens a run."""

from __future__ import annotations

import streamlit as st

from collector.api.schemas import RunsPage
from dashboard import ui

SORTS = {"Start time": "start_time", "Duration": "duration_s", "Cost": "cost_usd", "Steps": "steps", "Tokens": "total_tokens"}
ANY = "any"


def render() -> None:
    st.title("Runs")
    query = _filters()
    win = ui.window()
    with ui.guarded("the runs"):
        page: RunsPage = ui.fetch("runs", start=win.start, end=win.end, **ui.agent_model(), **query)
        if page.total == 0:
            ui.empty(f"No runs match in the {win.label.lower()}.")
            return
        if not page.items:  # filters changed under a later page: start again at the first
            st.session_state["runs_page"] = 1
            st.rerun()
        _table(page)


def _filters() -> dict[str, object]:
    c = st.columns([1, 1, 1, 1, 1.3, 0.8, 0.8])
    status = c[0].selectbox("Status", [ANY, "ok", "error", "timeout", "budget"], key="runs_status")
    outcome = c[1].selectbox("Outcome", [ANY, "success", "failure", "abandoned"], key="runs_outcome")
    min_cost = c[2].number_input("Min cost (USD)", min_value=0.0, value=0.0, step=0.01, format="%.4f", key="runs_min_cost")
    min_steps = c[3].number_input("Min steps", min_value=0, value=0, step=1, key="runs_min_steps")
    sort = c[4].selectbox("Sort by", list(SORTS), key="runs_sort")
    descending = c[5].toggle("Descending", value=True, key="runs_desc")
    size = c[6].selectbox("Rows", [5, 25, 50, 100, 200], index=2, key="runs_size")
    page = st.session_state.get("runs_page", 1)
    return {
        "status": None if status == ANY else status, "outcome": None if outcome == ANY else outcome,
        "min_cost": min_cost or None, "min_steps": min_steps or None,
        "sort": ("-" if descending else "") + SORTS[sort], "limit": size, "offset": (page - 1) * size,
    }


def _table(page: RunsPage) -> None:
    pages = max(1, -(-page.total // page.limit))
    first = page.offset + 1
    st.caption(f"Runs {first}–{page.offset + len(page.items)} of {page.total:,} · page {page.offset // page.limit + 1} of {pages}. Select a row to open the run.")
    frame = ui.runs_frame(page.items)
    event = st.dataframe(
        frame, hide_index=True, column_config=ui.RUN_COLUMNS, on_select="rerun", selection_mode="single-row", key="runs_table",
        column_order=[c for c in frame.columns if c != "trace_id"],
    )
    st.session_state["runs_page"] = min(st.session_state.get("runs_page", 1), pages)
    st.columns(6)[0].number_input("Page", min_value=1, max_value=pages, step=1, key="runs_page")
    rows = event.selection.rows if event is not None and hasattr(event, "selection") else []
    if rows:
        st.switch_page("views/run_detail.py", query_params={"trace_id": frame.iloc[rows[0]]["trace_id"]})


render()
