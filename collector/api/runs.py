"""Runs: the list (filters and sort in the store, over every run of the range), one run in full,
its feedback, and the values the filters offer."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query

from agentwatch_api.schemas import (
    FeedbackIn,
    FeedbackOut,
    FilterValues,
    RunDetail,
    RunFilters,
    RunsPage,
)
from agentwatch_platform.collector.api.deps import ProjectDep, SettingsDep, StoreDep, run_query
from agentwatch_platform.collector.api.params import End, Start, time_window
from agentwatch_platform.collector.query import feedback as feedback_query
from agentwatch_platform.collector.query import runs as runs_query

router = APIRouter(prefix="/api", tags=["query"])

TraceId = Annotated[str, Path(max_length=64, description="the run's trace id (32 hex digits)")]


@router.get("/runs", response_model=RunsPage)
def list_runs(
    store: StoreDep,
    settings: SettingsDep,
    project: ProjectDep,
    filters: Annotated[RunFilters, Query()],
    start: Start = None,
    end: End = None,
) -> RunsPage:
    lo, hi = time_window(start, end)
    params = filters.model_dump(exclude={"sort", "limit", "offset"})
    idle = settings.run_idle_timeout_s
    return run_query(
        lambda: runs_query.list_runs(
            store,
            project,
            start=lo,
            end=hi,
            sort=filters.sort,
            limit=filters.limit,
            offset=filters.offset,
            idle_timeout_s=idle,
            **params,
        )
    )


@router.get(
    "/runs/{trace_id}", response_model=RunDetail, responses={404: {"description": "no such run in this project"}}
)
def get_run(store: StoreDep, project: ProjectDep, settings: SettingsDep, trace_id: TraceId) -> RunDetail:
    detail = run_query(lambda: runs_query.get_run(store, project, trace_id, idle_timeout_s=settings.run_idle_timeout_s))
    if detail is None:
        raise HTTPException(404, f"run {trace_id} not found in this project")
    return detail


@router.post(
    "/runs/{trace_id}/feedback",
    response_model=FeedbackOut,
    status_code=201,
    responses={404: {"description": "no such run in this project (yet: its spans may still be on their way)"}},
)
def add_feedback(store: StoreDep, project: ProjectDep, trace_id: TraceId, body: FeedbackIn) -> FeedbackOut:
    out = run_query(lambda: feedback_query.add_feedback(store, project, trace_id, body))
    if out is None:
        raise HTTPException(
            404,
            f"run {trace_id} not found in this project: feedback needs a stored run (retry once its spans are sent)",
        )
    return out


@router.get("/filters", response_model=FilterValues)
def filters(store: StoreDep, project: ProjectDep, start: Start = None, end: End = None) -> FilterValues:
    lo, hi = time_window(start, end)
    return run_query(lambda: runs_query.filters(store, project, start=lo, end=hi))
