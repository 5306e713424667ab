"""Runs: search, filters, sortable table; a click on a row opens the run.

Every filter, the search (part of a trace id, user, session, agent, run name, or of captured
prompt and completion text) and the sort (any column: the Sort by box or a click on a column's
header) go to the query API, which applies them in the store over all runs of the range, and
the table pages through the result (``limit``/``offset``). A full trace id typed into the search opens that run. Running runs are
pinned above the list with their figures so far, refreshed live; ``/runs?status=running``
opens the list filtered to a status.
"""

from __future__ import annotations

import re
import time
from typing import Any, get_args

import streamlit as st
from agentwatch import semconv as sc
from streamlit.delta_generator import DeltaGenerator

from agentwatch_api.client import CollectorClient as Api
from agentwatch_api.schemas import RunsPage, RunStatus, RunSummary
from agentwatch_platform.dashboard import run_table, tables, ui

SORTS = {  # label -> RunSummary column: the query API sorts on any of them
    "Start time": "start_time",
    "End time": "end_time",
    "Duration": "duration_s",
    "Cost": "cost_usd",
    "Steps": "steps",
    "Tokens": "total_tokens",
    "Input tokens": "input_tokens",
    "Output tokens": "output_tokens",
    "Cached tokens": "cached_tokens",
    "LLM calls": "llm_calls",
    "Tool calls": "tool_calls",
    "Tool failures": "tool_failures",
    "Agent": "agent",
    "Run name": "name",
    "Status": "status",
    "Outcome": "outcome",
    "Budget stop": "budget_exceeded",
    "User": "user_id",
    "Session": "session_id",
    "Models": "models",
    "Version": "version",
    "Trace id": "trace_id",
    "Feedback score": "feedback_score",
}
ANY = "any"
STATUSES = [ANY, *get_args(RunStatus)]
OUTCOMES = list(sc.OUTCOMES)  # refused: not runs, listed only when asked for
TRACE_ID = re.compile(r"^[0-9a-f]{32}$")
MAX_PINNED = 20
COLUMNS = [  # every column the chooser offers, in order; those in HIDDEN start hidden
    "time",
    "agent",
    "status",
    "outcome",
    "duration",
    "steps",
    "llm_calls",
    "tool_calls",
    "tool_failures",
    "tokens",
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "cost",
    "budget_stop",
    "feedback",
    "user",
    "session",
    "models",
    "version",
    "name",
    "trace_id",
]
HIDDEN = [
    "llm_calls",
    "tool_calls",
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "budget_stop",
    "feedback",
    "session",  # the trace id in view at 1600 px; the session is one click away (Columns) and a filter
    "version",
    "name",
]


def render() -> None:
    st.title("Runs")
    _status_from_link()
    _sort_from_header()
    _page_from_pager()
    running = st.container()  # the running runs, above the search; drawn while the list's query runs
    search = st.text_input(
        "Search",
        key="runs_search",
        placeholder="part of a trace id, user id, session id, agent, run name or captured text",
    ).strip()
    if TRACE_ID.match(search.lower()):
        st.switch_page("views/run_detail.py", query_params={"run": search.lower()})
    query = _filters() | {"search": search or None}
    win = ui.window()
    listed = ui.fetch_later(Api.runs, start=win.start, end=win.end, **ui.agent_model(), **query)
    with running:
        st.fragment(
            _running_now, run_every=ui.refresh_every("runs_live", "runs_live_s", on=True, label="Live: running runs")
        )()
    with ui.guarded("the runs"):
        _paged(win, listed.result())


def _status_from_link() -> None:
    """``/runs?status=incomplete`` or ``?outcome=refused`` (the Overview's cards link there) sets
    the Status or Outcome filter."""
    wanted = st.query_params.pop("status", None)
    if wanted in STATUSES:
        st.session_state["runs_status"] = wanted
    outcome = st.query_params.pop("outcome", None)
    if outcome in OUTCOMES:
        st.session_state["runs_outcome"] = outcome
    for param, key in LINKED.items():  # ?user_id=, ?session_id=, ?version= (Users, Sessions, Versions link here)
        if (value := st.query_params.pop(param, None)) is not None:
            st.session_state[key] = value


def _sort_from_header() -> None:
    """A click on a column's header sorts every run by it (again: the other way round), as the
    Sort by box does, from the first page; applied before the widgets are drawn."""
    clicked = tables.clicked("runs_table", "sort")
    field = run_table.FIELDS[clicked].sort if clicked in run_table.FIELDS else None
    label = next((label for label, f in SORTS.items() if f == field), None)
    if label is None:
        return
    if st.session_state.get("runs_sort") == label:
        st.session_state["runs_desc"] = not st.session_state.get("runs_desc", True)
    else:
        st.session_state["runs_sort"], st.session_state["runs_desc"] = label, True
    st.session_state["runs_page"] = 1


def _page_from_pager() -> None:
    """The table's pager (first, previous, next, last) picks the page the query asks for."""
    if (wanted := tables.clicked("runs_table", "page")) and wanted.isdigit():
        st.session_state["runs_page"] = max(1, int(wanted))


def _running_now() -> None:
    """Running runs pinned above the list, oldest first, with their figures so far; refreshed
    on its own (the sidebar's Live switch), so the list below keeps its page and selection."""
    win = ui.window()
    with ui.guarded("the running runs"):
        page: RunsPage = ui.fetch(
            Api.runs,
            start=win.start,
            end=win.end,
            status="running",
            sort="start_time",
            limit=MAX_PINNED,
            **ui.agent_model(),
        )
        if not page.items:
            st.caption(f"No run is running now (runs started in the {win.label.lower()}).")
            return
        now = time.time()
        more = f", the {len(page.items)} oldest shown" if page.total > len(page.items) else ""
        st.subheader(f"Running now: {page.total:,}{more}")
        run_table.running_table(page.items, now, key="runs_running_table")
        st.caption(
            f"As of {ui.fmt_time(now)}: steps, calls, tokens and cost so far; elapsed since the run's first span. Click a run to watch it."
        )


def _filters() -> dict[str, Any]:
    """The query API's filters, sort and page (``RunFilters``) as the widgets set them."""
    c = st.columns([1, 1, 1, 1.3, 0.8, 1])
    status = c[0].selectbox(
        "Status",
        STATUSES,
        key="runs_status",
        help="running: its root span has not arrived yet; incomplete: it never did.",
    )
    outcome = c[1].selectbox(
        "Outcome",
        [ANY, *OUTCOMES],
        key="runs_outcome",
        help="refused: requests turned away before any work (a rate limit, a budget); not runs, so listed "
        "only when asked for here.",
    )
    failed_tools = c[2].toggle(
        "Tool failed",
        key="runs_tool_failed",
        help="Runs with at least one failed or timed-out tool call, whatever their status.",
    )
    sort = c[3].selectbox("Sort by", list(SORTS), key="runs_sort")
    descending = c[4].toggle("Descending", value=True, key="runs_desc")
    user, session, min_cost, max_cost, min_steps, max_steps, size = _more_filters(c[5])
    page = st.session_state.get("runs_page", 1)
    return {
        "status": None if status == ANY else status,
        "outcome": None if outcome == ANY else outcome,
        "tool_failed": True if failed_tools else None,
        "user_id": user or None,
        "session_id": session or None,
        "version": str(st.session_state.get("runs_version") or "").strip() or None,
        "min_cost": min_cost,
        "max_cost": max_cost,
        "min_steps": None if min_steps is None else int(min_steps),
        "max_steps": None if max_steps is None else int(max_steps),
        "sort": ("-" if descending else "") + SORTS[sort],
        "limit": size,
        "offset": (page - 1) * size,
    }


MORE = {  # key -> (label, what a typo is not, whole number): the bounds in the More filters popover
    "runs_min_cost": ("Min cost (USD)", "number", False),
    "runs_max_cost": ("Max cost (USD)", "number", False),
    "runs_min_steps": ("Min steps", "whole number", True),
    "runs_max_steps": ("Max steps", "whole number", True),
}
EXACT = {  # key -> (label, help): the exact-match filters in the popover
    "runs_user": ("User id", "Exactly this user id (the search finds parts of one)."),
    "runs_session": ("Session id", "Exactly this session id (the search finds parts of one)."),
    "runs_version": ("Version", "Exactly this agent version (the run's service.version)."),
}
LINKED = {"user_id": "runs_user", "session_id": "runs_session", "version": "runs_version"}
SIZES = [5, 25, 50, 100, 200]


def _more_filters(
    where: DeltaGenerator,
) -> tuple[str, str, float | None, float | None, float | None, float | None, int]:
    """User, session, cost and step bounds and the page size, in a popover whose widgets are drawn
    only while it is open: 7 more widgets on every load of the page cost ~0.1 s in headless
    Chromium (bench.dashboard_ab). Their values are kept in the session while it is closed, and
    those set are listed under the filters, so a closed popover still says that it filters."""
    ui.keep_state(dict.fromkeys((*EXACT, *MORE), "") | {"runs_size": 50})
    state = st.session_state
    bounds: dict[str, float | None] = {}
    typos = []
    for key, (label, what, whole) in MORE.items():
        try:
            bounds[key] = ui.read_number(state.get(key), whole=whole)
        except ValueError:
            bounds[key] = None
            typos.append(ui.number_typo(label, state.get(key), what))
    more = where.popover("More filters", key="runs_more", on_change="rerun", width="stretch")
    if more.open:
        with more:
            for key, (label, help_) in EXACT.items():
                st.text_input(label, key=key, help=help_)
            c = st.columns(2)
            for i, (key, (label, _, _)) in enumerate(MORE.items()):
                c[i % 2].text_input(label, key=key, placeholder="any")
            st.selectbox("Rows", SIZES, key="runs_size")
    for typo in typos:  # said outside the popover, where it shows while it is closed
        st.error(typo, icon=":material/error:")
    # Listed here, not counted in the popover's label: a label that changes re-creates the popover, closed.
    if set_ := [f"{label} {str(state[key]).strip()}" for key, (label, *_) in {**EXACT, **MORE}.items() if _typed(key)]:
        st.caption("More filters set: " + ui.plain(" · ".join(set_)))
    return (
        str(state.get("runs_user") or "").strip(),
        str(state.get("runs_session") or "").strip(),
        bounds["runs_min_cost"],
        bounds["runs_max_cost"],
        bounds["runs_min_steps"],
        bounds["runs_max_steps"],
        int(state["runs_size"]),
    )


def _typed(key: str) -> bool:
    return bool(str(st.session_state.get(key) or "").strip())


def _paged(win: ui.Window, page: RunsPage) -> None:
    for warning in page.warnings:  # the text search could not read a file, or stopped at its newest matches
        st.warning(warning)
    if page.total == 0:
        _no_match(win)
        return
    if not page.items:  # filters changed under a later page: start again at the first
        st.session_state["runs_page"] = 1
        st.rerun()
    _table(page.items, page.total, page.offset, page.limit)


def _no_match(win: ui.Window) -> None:
    """Nothing matched: said apart from "nothing stored" (the demo hint only then), with the
    number of runs the search and filters left out."""
    range_ = win.label.lower()
    with ui.guarded("the runs of the range"):
        every = ui.fetch(Api.runs, start=win.start, end=win.end, limit=1).total
        if every:
            st.info(
                f"No runs match the search and filters in the {range_}; without them there are "
                f"{ui.plural(every, 'run')}. Clear the search box or a filter, or widen the time range."
            )
        else:
            ui.empty(f"No runs in the {range_}.")


def _table(runs: list[RunSummary], total: int, offset: int, limit: int) -> None:
    pages = max(1, -(-total // limit))
    st.caption(
        f"Runs {offset + 1}–{offset + len(runs)} of {total:,} · page {offset // limit + 1} of {pages}. "
        "Click a run to open it; a column's header (or Sort by) orders every run of the range."
    )
    run_table.runs_table(
        runs,
        key="runs_table",
        columns=COLUMNS,
        hidden=HIDDEN,
        sort=(SORTS[st.session_state.get("runs_sort", "Start time")], st.session_state.get("runs_desc", True)),
        sortable=True,
        chooser=True,
        pager=(offset // limit + 1, pages),
    )


render()
