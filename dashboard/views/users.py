"""Users: who costs what (``GET /api/users``), most expensive first; each user links to its runs and
sessions. Cost per successful run is what a task done costs for that user; refused requests are
counted apart (they are no runs)."""

from __future__ import annotations

from urllib.parse import quote

import streamlit as st

from agentwatch_api.schemas import UserFigures, UsersPage
from agentwatch_platform.dashboard import tables, ui

NONE = "(no user id)"
ROW_ID = "u:"  # a row's id: the user after it ("" is the runs without a user id)
SPARK = "▁▂▃▄▅▆▇█"
COLUMNS = [
    tables.Column("user", "user"),
    tables.Column("runs", "runs", numeric=True),
    tables.Column("sessions", "sessions", numeric=True),
    tables.Column("cost", "cost", numeric=True),
    tables.Column("cost_run", "cost / run", numeric=True),
    tables.Column("cost_success", "cost / successful run", numeric=True),
    tables.Column("success", "success rate", numeric=True),
    tables.Column("feedback", "feedback (rated)", numeric=True),
    tables.Column("budget", "budget used (runs, stops)", numeric=True),
    tables.Column("refused", "refused", numeric=True),
    tables.Column("trend", "cost trend"),
    tables.Column("sessions_link", "sessions"),
]


def sparkline(values: list[float]) -> str:
    top = max(values, default=0.0)
    if top <= 0:
        return SPARK[0] * len(values)
    return "".join(SPARK[min(len(SPARK) - 1, int(v / top * (len(SPARK) - 1)))] for v in values)


def render() -> None:
    st.title("Users")
    st.caption(
        "Per user (the run's user.id), over the finished runs that started in the range, most expensive first. "
        "Click a user to list its runs; refused requests are not runs and are counted apart."
    )
    win = ui.window()
    with ui.guarded("the users"):
        page: UsersPage = ui.fetch("users", start=win.start, end=win.end, agent=ui.chosen("aw_agent"), limit=200)
        if not page.items:
            ui.empty(f"No finished runs in the {win.label.lower()}.")
            return
        event = tables.table(COLUMNS, [_row(u) for u in page.items], key="users_table", clickable=True)
        if event.opened and event.opened.startswith(ROW_ID):
            st.switch_page("views/runs.py", query_params={"user_id": event.opened.removeprefix(ROW_ID)})
        more = f" (the {len(page.items)} costliest of {page.total:,})" if page.total > len(page.items) else ""
        st.caption(f"{page.total:,} users{more}; trend: cost per {ui.fmt(page.step_s, 's')} of the range.")


def _row(u: UserFigures) -> tables.Row:
    budget = (
        ui.BLANK if u.budget_used is None else f"{ui.fmt(u.budget_used, 'ratio')} ({u.budget_runs}, {u.budget_stops})"
    )
    return tables.Row(
        id=ROW_ID + u.user_id,
        cells=[
            u.user_id or NONE,
            f"{u.runs:,}",
            f"{u.sessions:,}",
            ui.fmt(u.cost_usd, "USD"),
            ui.fmt(u.cost_per_run, "USD"),
            ui.fmt(u.cost_per_success, "USD"),
            ui.fmt(u.success_rate, "ratio"),
            f"{ui.fmt(u.feedback_score, '')} ({u.rated_runs})",
            budget,
            f"{u.refused:,}",
            sparkline(u.trend),
            "sessions →",
        ],
        href=f"./runs?user_id={quote(u.user_id)}",
        marks={"budget": "bad"} if u.budget_stops else {},
    )


render()
