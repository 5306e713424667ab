"""Sessions: the sessions of the range (``GET /api/sessions``, ``?user_id=`` narrows them to a user)
and one session (``?session=<id>``): its runs in order with cost and outcome, and a replay of what
the user asked and got where the text was captured."""

from __future__ import annotations

from urllib.parse import quote

import streamlit as st

from agentwatch_api.client import CollectorClient as Api
from agentwatch_api.schemas import SessionDetail, SessionsPage
from agentwatch_platform.dashboard import run_table, tables, ui

COLUMNS = [
    tables.Column("session", "session"),
    tables.Column("user", "user"),
    tables.Column("runs", "runs", numeric=True),
    tables.Column("cost", "cost", numeric=True),
    tables.Column("success", "successes", numeric=True),
    tables.Column("agents", "agents"),
    tables.Column("last", "last run (UTC)"),
]
RUN_COLUMNS = ["time", "status", "outcome", "duration", "steps", "tokens", "cost", "feedback"]
NOT_CAPTURED = "not captured (AGENTWATCH_CAPTURE_CONTENT is off for this agent)"


def session_href(session_id: str) -> str:
    return f"./sessions?session={quote(session_id)}"


def render() -> None:
    st.title("Sessions")
    win = ui.window()
    wanted = st.query_params.get("session")
    with ui.guarded("the sessions"):
        if wanted:
            _session(win, wanted)
        else:
            _list(win, st.query_params.get("user_id"))


def _list(win: ui.Window, user_id: str | None) -> None:
    page: SessionsPage = ui.fetch(
        Api.sessions, start=win.start, end=win.end, agent=ui.chosen("aw_agent"), user_id=user_id, limit=200
    )
    if user_id is not None:
        st.caption(f"Sessions of user {ui.plain(user_id) or '(none)'}.")
    if not page.items:
        ui.empty(f"No sessions with a finished run in the {win.label.lower()}.")
        return
    rows = [
        tables.Row(
            id=s.session_id,
            cells=[
                s.session_id,
                s.user_id,
                f"{s.runs:,}",
                ui.fmt(s.cost_usd, "USD"),
                f"{s.successes} / {s.with_outcome}",
                ", ".join(s.agents),
                ui.fmt_time(s.last_seen),
            ],
            href=session_href(s.session_id),
        )
        for s in page.items
    ]
    event = tables.table(COLUMNS, rows, key="sessions_table", clickable=True)
    if event.opened:
        st.query_params["session"] = event.opened
        st.rerun()
    st.caption(f"{page.total:,} sessions, the latest first. Click one to replay it.")


def _session(win: ui.Window, session_id: str) -> None:
    detail: SessionDetail = ui.fetch(Api.session, session_id=session_id, start=win.start, end=win.end)
    st.subheader(f"Session {session_id}")
    st.caption(
        f"User {detail.user_id or '(none)'} · {len(detail.turns)} runs · {ui.fmt(detail.cost_usd, 'USD')}"
        + (f" · {detail.refused} refused requests (not runs)" if detail.refused else "")
        + (" · the first runs only" if detail.truncated else "")
    )
    st.markdown(
        f"[All runs of this session](./runs?session_id={quote(session_id)}) · "
        f"[User {ui.plain(detail.user_id)}](./users?user={quote(detail.user_id)})"
    )
    run_table.runs_table([t.run for t in detail.turns], key="session_runs", columns=RUN_COLUMNS)
    st.subheader("Replay")
    for i, turn in enumerate(detail.turns, 1):
        st.caption(
            f"Run {i} · {ui.fmt_time(turn.run.start_time)} · {turn.run.outcome or turn.run.status} · {ui.fmt(turn.run.cost_usd, 'USD')}"
        )
        with st.chat_message("user"):
            st.text(turn.asked if turn.asked is not None else NOT_CAPTURED)
        with st.chat_message("assistant"):
            st.text(turn.answered if turn.answered is not None else NOT_CAPTURED)


render()
