"""Users and sessions: who costs what, and a session's runs in order with what was asked and got.

A run's user and session are its ``user.id`` and ``session.id`` (``agentwatch.run(user_id=...,
session_id=...)``, or any instrumentation's). Per-user figures are over finished runs that did
work, so users' costs add up to the runs list's; refused requests are counted beside them.
"""

from __future__ import annotations

from typing import Any

from agentwatch_api.schemas import (
    RunSummary,
    SessionDetail,
    SessionsPage,
    SessionSummary,
    SessionTurn,
    UserFigures,
    UsersPage,
)
from agentwatch_platform.collector.query.ranges import (
    DEFAULT_RUN_IDLE_TIMEOUT_S,
    InvalidQuery,
    idle_cutoff_ns,
    range_ns,
)
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.sql import users as sql

TREND_BUCKETS = 12
MAX_SESSION_RUNS = 500
CAPTURED = "captured"


def _params(project: str, start: float, end: float, idle_timeout_s: float, **extra: Any) -> dict[str, Any]:
    start_ns, end_ns = range_ns(start, end)
    return {
        "project": project,
        "start_ns": start_ns,
        "end_ns": end_ns,
        "idle_cutoff_ns": idle_cutoff_ns(idle_timeout_s),
        **extra,
    }


def _sort(sort: str, allowed: dict[str, str]) -> tuple[str, bool]:
    field = sort.removeprefix("-")
    if field not in allowed:
        raise InvalidQuery(f"sort must be one of {', '.join(allowed)} ('-' first for descending), got {sort!r}")
    return field, sort.startswith("-")


def users(
    store: Store,
    project: str,
    *,
    start: float,
    end: float,
    agent: str | None = None,
    user_id: str | None = None,
    sort: str = "-cost_usd",
    limit: int = 50,
    offset: int = 0,
    idle_timeout_s: float = DEFAULT_RUN_IDLE_TIMEOUT_S,
) -> UsersPage:
    """A page of users by ``sort`` (or the one ``user_id``), each with its cost trend over
    ``TREND_BUCKETS`` buckets of the range."""
    field, descending = _sort(sort, sql.USER_SORTS)
    params = _params(
        project, start, end, idle_timeout_s, agent=agent or "", user_id=user_id or "", limit=limit, offset=offset
    )
    rows = store.query(sql.user_figures(field, descending), params)
    step_ns = max(1, -(-(params["end_ns"] - params["start_ns"]) // TREND_BUCKETS))
    ids = [r["user_id"] for r in rows]
    trends = {u: [0.0] * TREND_BUCKETS for u in ids}
    refused: dict[str, int] = {}
    if ids:
        for r in store.query(sql.USER_TREND, params | {"users": ids, "step_ns": step_ns}):
            trends[r["user_id"]][min(int(r["bucket"]), TREND_BUCKETS - 1)] += float(r["cost"])
        refused = {r["user_id"]: int(r["refused"]) for r in store.query(sql.USER_REFUSED, params | {"users": ids})}
    items = [_user(r, trends[r["user_id"]], refused.get(r["user_id"], 0)) for r in rows]
    total = int(rows[0]["total"]) if rows else 0
    return UsersPage(start=start, end=end, step_s=step_ns / 1e9, items=items, total=total, limit=limit, offset=offset)


def _user(row: dict[str, Any], trend: list[float], refused: int) -> UserFigures:
    runs = int(row["runs"])
    return UserFigures(
        user_id=row["user_id"],
        runs=runs,
        sessions=int(row["sessions"]),
        cost_usd=float(row["total_cost_usd"]),
        cost_per_run=float(row["cost_per_run"]),
        cost_per_success=row["cost_per_success"],
        successes=int(row["successes"]),
        with_outcome=int(row["with_outcome"]),
        success_rate=row["success_rate"],
        error_rate=row["failed_runs"] / runs if runs else 0.0,
        feedback_score=row["feedback_score"],
        rated_runs=int(row["rated_runs"]),
        budget_runs=int(row["budget_runs"]),
        budget_used=row["budget_used"],
        budget_stops=int(row["budget_stops"]),
        refused=refused,
        first_seen=float(row["first_seen"]),
        last_seen=float(row["last_seen"]),
        trend=trend,
    )


def sessions(
    store: Store,
    project: str,
    *,
    start: float,
    end: float,
    agent: str | None = None,
    user_id: str | None = None,
    sort: str = "-last_seen",
    limit: int = 50,
    offset: int = 0,
    idle_timeout_s: float = DEFAULT_RUN_IDLE_TIMEOUT_S,
) -> SessionsPage:
    """A page of sessions (their finished runs in the range), newest first by default."""
    field, descending = _sort(sort, sql.SESSION_SORTS)
    params = _params(
        project, start, end, idle_timeout_s, agent=agent or "", user_id=user_id or "", limit=limit, offset=offset
    )
    rows = store.query(sql.session_figures(field, descending), params)
    items = [
        SessionSummary(
            **{k: row[k] for k in SessionSummary.model_fields if k not in ("cost_usd", "user_id")},
            cost_usd=row["total_cost_usd"],
            user_id=row["session_user"],
        )
        for row in rows
    ]
    return SessionsPage(items=items, total=int(rows[0]["total"]) if rows else 0, limit=limit, offset=offset)


def session(
    store: Store,
    project: str,
    session_id: str,
    *,
    start: float,
    end: float,
    idle_timeout_s: float = DEFAULT_RUN_IDLE_TIMEOUT_S,
) -> SessionDetail | None:
    """The session's runs that started in the range, in order, each with what was asked and got
    where captured; None when it has none (nor refused requests) in this project."""
    params = _params(project, start, end, idle_timeout_s, session_id=session_id, limit=MAX_SESSION_RUNS + 1)
    rows = store.query(sql.SESSION_RUNS, params)
    refused = int(store.query(sql.SESSION_REFUSED, params)[0]["refused"])
    if not rows and not refused:
        return None
    runs = [RunSummary(**r) for r in rows[:MAX_SESSION_RUNS]]
    texts = _texts(store, project, [r.trace_id for r in runs], params)
    return SessionDetail(
        session_id=session_id,
        user_id=next((r.user_id for r in runs if r.user_id), ""),
        cost_usd=sum(r.cost_usd for r in runs),
        refused=refused,
        turns=[
            SessionTurn(
                run=r, asked=texts.get(r.trace_id, (None, None))[0], answered=texts.get(r.trace_id, (None, None))[1]
            )
            for r in runs
        ],
        truncated=len(rows) > MAX_SESSION_RUNS,
    )


def _texts(
    store: Store, project: str, trace_ids: list[str], params: dict[str, Any]
) -> dict[str, tuple[str | None, str | None]]:
    """(asked, answered) per run: its root span's captured input and output, else its first LLM
    call's input and its last LLM call's output; None where nothing was captured."""
    if not trace_ids:
        return {}
    spans = store.query(sql.SESSION_TEXTS, params | {"trace_ids": trace_ids})
    store.read_texts(spans, project=project)
    by_trace: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        by_trace.setdefault(span["trace_id"], []).append(span)
    return {trace: _turn(rows) for trace, rows in by_trace.items()}


def _turn(spans: list[dict[str, Any]]) -> tuple[str | None, str | None]:
    def text(span: dict[str, Any] | None, column: str) -> str | None:
        if span is None or span.get("text_state") != CAPTURED or not span[column]:
            return None
        return str(span[column])

    root = next((s for s in spans if s["kind"] == "run"), None)
    llm = [s for s in spans if s["kind"] == "llm"]
    asked = text(root, "input_text") or next((t for s in llm if (t := text(s, "input_text"))), None)
    answered = text(root, "output_text") or next((t for s in reversed(llm) if (t := text(s, "output_text"))), None)
    return asked, answered
