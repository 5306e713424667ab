"""The span explorer: spans across runs (``GET /api/spans``) and their groups
(``GET /api/spans/groups``), filtered, sorted and paged in the store; read scope, the caller's
project only."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from agentwatch_api.schemas import SpanGroupQuery, SpanGroups, SpanListQuery, SpansPage
from agentwatch_platform.collector.api.deps import ProjectDep, StoreDep, run_query
from agentwatch_platform.collector.api.params import End, Start, time_window
from agentwatch_platform.collector.query import spans as query

router = APIRouter(prefix="/api", tags=["spans"])


@router.get("/spans", response_model=SpansPage)
def list_spans(
    store: StoreDep,
    project: ProjectDep,
    params: Annotated[SpanListQuery, Query()],
    start: Start = None,
    end: End = None,
) -> SpansPage:
    lo, hi = time_window(start, end)
    return run_query(
        lambda: query.list_spans(
            store,
            project,
            start=lo,
            end=hi,
            sort=params.sort,
            limit=params.limit,
            offset=params.offset,
            cursor=params.cursor,
            rollups=True,
            **params.filters(),
        )
    )


@router.get("/spans/groups", response_model=SpanGroups)
def span_groups(
    store: StoreDep,
    project: ProjectDep,
    params: Annotated[SpanGroupQuery, Query()],
    start: Start = None,
    end: End = None,
) -> SpanGroups:
    lo, hi = time_window(start, end)
    return run_query(
        lambda: query.span_groups(
            store,
            project,
            start=lo,
            end=hi,
            by=params.by,
            sort=params.sort,
            limit=params.limit,
            rollups=True,
            **params.filters(),
        )
    )
