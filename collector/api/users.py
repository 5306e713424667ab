"""Users and sessions: per-user figures, sessions, and one session's runs replayed in order."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, HTTPException, Path, Query

from agentwatch_api.schemas import SessionDetail, SessionsPage, UsersPage
from agentwatch_platform.collector.api.deps import ProjectDep, SettingsDep, StoreDep, run_query
from agentwatch_platform.collector.api.params import Agent, End, Start, time_window
from agentwatch_platform.collector.query import users as query
from agentwatch_platform.collector.settings import Settings
from agentwatch_platform.collector.storage.base import Store

router = APIRouter(prefix="/api", tags=["query"])

Limit = Annotated[int, Query(ge=1, le=500)]
Offset = Annotated[int, Query(ge=0, le=10_000_000)]
Sort = Annotated[str, Query(max_length=64, description="a figure, '-' first for descending")]
T = TypeVar("T")
SessionId = Annotated[str, Path(max_length=256, description="the session id (the runs' session.id)")]


@router.get("/users", response_model=UsersPage)
def list_users(
    store: StoreDep,
    project: ProjectDep,
    settings: SettingsDep,
    start: Start = None,
    end: End = None,
    agent: Agent = None,
    user_id: Annotated[str | None, Query(max_length=256, description="one user's figures (a user's page)")] = None,
    sort: Sort = "-cost_usd",
    limit: Limit = 50,
    offset: Offset = 0,
) -> UsersPage:
    """Per user (the run's ``user.id``; ``""``: runs without one), over the finished runs that started
    in the range: runs, sessions, cost (total, per run, per successful run), success and error
    rates, feedback, cost budgets (runs with one, mean share spent, budget stops), refused requests
    (not runs) and the cost trend over 12 buckets of the range. Users' costs add up to the runs list's.
    ``user_id``: that user only. ``sort``: cost_usd, runs, cost_per_run, cost_per_success, success_rate,
    feedback_score, last_seen, user_id."""
    page = {"agent": agent, "user_id": user_id, "sort": sort, "limit": limit, "offset": offset}
    return _page(query.users, store, project, settings, start, end, page)


@router.get("/sessions", response_model=SessionsPage)
def list_sessions(
    store: StoreDep,
    project: ProjectDep,
    settings: SettingsDep,
    start: Start = None,
    end: End = None,
    agent: Agent = None,
    user_id: Annotated[str | None, Query(max_length=256)] = None,
    sort: Sort = "-last_seen",
    limit: Limit = 50,
    offset: Offset = 0,
) -> SessionsPage:
    """Sessions (runs sharing a ``session.id``) with a finished run in the range: their user, runs,
    cost, successes and agents. ``sort``: last_seen, cost_usd, runs, session_id."""
    page = {"agent": agent, "user_id": user_id, "sort": sort, "limit": limit, "offset": offset}
    return _page(query.sessions, store, project, settings, start, end, page)


def _page(
    read: Callable[..., T],
    store: Store,
    project: str,
    settings: Settings,
    start: str | None,
    end: str | None,
    page: dict[str, Any],
) -> T:
    """A page of users or of sessions: the two routes differ in their defaults and documentation only."""
    lo, hi = time_window(start, end)
    idle = settings.run_idle_timeout_s
    return run_query(lambda: read(store, project, start=lo, end=hi, idle_timeout_s=idle, **page))


@router.get(
    "/sessions/{session_id}",
    response_model=SessionDetail,
    responses={404: {"description": "no run of this session in the range, in this project"}},
)
def get_session(
    store: StoreDep,
    project: ProjectDep,
    settings: SettingsDep,
    session_id: SessionId,
    start: Start = None,
    end: End = None,
) -> SessionDetail:
    """The session's runs that started in the range, in order (refused requests counted apart), each
    with what the user asked and got: the run's captured input and output (its root span's, else its
    first LLM call's input and last LLM call's output); ``null`` where nothing was captured."""
    lo, hi = time_window(start, end)
    idle = settings.run_idle_timeout_s
    detail = run_query(lambda: query.session(store, project, session_id, start=lo, end=hi, idle_timeout_s=idle))
    if detail is None:
        raise HTTPException(404, f"session {session_id[:256]!r} has no run in this range and project")
    return detail
