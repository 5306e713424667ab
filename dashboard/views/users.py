"""Users: who costs what (``GET /api/users``), most expensive first; each user links to its runs and
sessions. Cost per successful run is what a task done costs for that user; refused requests are
counted apart (they are no runs). ``?user=<id>`` is one user's page (a run's user links there): its
figures, cost trend, sessions and latest runs."""

from __future__ import annotations

from urllib.parse import quote

import streamlit as st

from agentwatch_api.client import CollectorClient as Api
from agentwatch_api.schemas import RunsPage, UserFigures, UsersPage
from agentwatch_platform.dashboard import cards, run_table, tables, ui

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
RUN_COLUMNS = ["time", "status", "outcome", "duration", "steps", "tokens", "cost", "feedback"]
LATEST_RUNS = 50


def user_href(user_id: str) -> str:
    return f"./users?user={quote(user_id)}"


def sparkline(values: list[float]) -> str:
    top = max(values, default=0.0)
    if top <= 0:
        return SPARK[0] * len(values)
    return "".join(SPARK[min(len(SPARK) - 1, int(v / top * (len(SPARK) - 1)))] for v in values)


def render() -> None:
    st.title("Users")
    win = ui.window()
    wanted = st.query_params.get("user")
    if wanted:
        with ui.guarded(f"user {wanted}"):
            _user(win, wanted)
        return
    st.caption(
        "Per user (the run's user.id), over the finished runs that started in the range, most expensive first. "
        "Click a user to open its page (figures, sessions, runs); refused requests are not runs and are counted apart."
    )
    with ui.guarded("the users"):
        page: UsersPage = ui.fetch(Api.users, start=win.start, end=win.end, agent=ui.chosen("aw_agent"), limit=200)
        if not page.items:
            ui.empty(f"No finished runs in the {win.label.lower()}.")
            return
        event = tables.table(COLUMNS, [_row(u) for u in page.items], key="users_table", clickable=True)
        if event.opened and event.opened.startswith(ROW_ID):
            opened = event.opened.removeprefix(ROW_ID)
            if opened:
                st.query_params["user"] = opened
                st.rerun()
            st.switch_page("views/runs.py")
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
        href=user_href(u.user_id) if u.user_id else "./runs",
        marks={"budget": "bad"} if u.budget_stops else {},
    )


def _user(win: ui.Window, user_id: str) -> None:
    """One user: the figures of its row in the list, its cost trend, and its latest runs."""
    st.subheader(f"User {user_id}")
    found: UsersPage = ui.fetch(Api.users, start=win.start, end=win.end, user_id=user_id, limit=1)
    runs: RunsPage = ui.fetch(Api.runs, start=win.start, end=win.end, user_id=user_id, limit=LATEST_RUNS)
    st.markdown(
        f"[Sessions of this user](./sessions?user_id={quote(user_id)}) · "
        f"[All runs of this user](./runs?user_id={quote(user_id)}) · [All users](./users)"
    )
    if not found.items:
        ui.empty(f"User {ui.plain(user_id)} has no finished run in the {win.label.lower()}.")
    else:
        st.html(cards.cards_html(_cards(found.items[0], found.step_s), columns=4))
    if runs.items:
        st.caption(f"The latest {min(len(runs.items), runs.total):,} of {ui.plural(runs.total, 'run')} of this user.")
        run_table.runs_table(runs.items, key="user_runs", columns=RUN_COLUMNS)


def _cards(u: UserFigures, step_s: float) -> list[cards.Card]:
    over = "over finished runs"
    return [
        cards.Card("Runs", f"{u.runs:,}", counts=over),
        cards.Card("Sessions", f"{u.sessions:,}"),
        cards.Card("Cost", ui.fmt(u.cost_usd, "USD"), points=u.trend, counts=f"trend per {ui.fmt(step_s, 's')}"),
        cards.Card("Cost per run", ui.fmt(u.cost_per_run, "USD")),
        cards.Card("Cost per successful run", ui.fmt(u.cost_per_success, "USD")),
        cards.Card("Success rate", ui.fmt(u.success_rate, "ratio"), counts=f"{u.successes} of {u.with_outcome}"),
        cards.Card("Feedback", ui.fmt(u.feedback_score, ""), counts=f"{ui.plural(u.rated_runs, 'rated run')}"),
        cards.Card("Refused requests", f"{u.refused:,}", counts="not runs"),
    ]


render()
