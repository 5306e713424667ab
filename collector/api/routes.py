"""The query API under ``/api``: thin routes over ``collector.query.service``.

Each route validates its parameters, calls one query function in FastAPI's thread pool (the
store blocks) and answers the contract's model. Every route is scoped to the caller's
project; a bad parameter is a 422 naming it, a store that cannot be reached a 503 with
``Retry-After``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Annotated, Literal, TypeVar
from urllib.parse import urlsplit

from fastapi import APIRouter, HTTPException, Path, Query, Request
from pydantic import BaseModel, Field, field_validator

from agentwatch_api.schemas import (
    TIMESERIES_METRICS,
    CostBreakdown,
    EngineInfo,
    EngineSeries,
    FeedbackIn,
    FeedbackOut,
    FilterValues,
    Overview,
    RunDetail,
    RunFilters,
    RunsPage,
    TimeSeries,
    WhatIf,
)
from collector.api.admin import AdminDep, EngineAdd, register_engine_as
from collector.api.deps import ProjectDep, SettingsDep, StoreDep
from collector.api.params import Agent, End, Model, Start, time_window
from collector.engines.scraper import parse_targets
from collector.query import service as query
from collector.query.levers import price_table
from collector.query.whatif import DEFAULT_BOUND
from collector.storage.base import StoreUnavailable

router = APIRouter(prefix="/api", tags=["query"])

DEFAULT_POINTS = 120
TraceId = Annotated[str, Path(max_length=64, description="the run's trace id (32 hex digits)")]
T = TypeVar("T")


class EngineIn(BaseModel):
    """An engine to scrape, registered at runtime under the caller's project."""

    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:-]+$")
    url: str = Field(min_length=1, max_length=2048, pattern=r"^https?://[^\x00-\x20\x7f]+$")

    @field_validator("url")
    @classmethod
    def _parsable(cls, url: str) -> str:
        """A URL the scraper can request later (``http://[`` or a port of 99999 would fail only then)."""
        parts = urlsplit(url)
        if not parts.hostname or parts.port is None and ":" in parts.netloc.rsplit("]", 1)[-1]:
            raise ValueError("expected http(s)://host[:port][/path]")
        return url


def _run(call: Callable[[], T]) -> T:
    """Translate the query layer's errors into HTTP answers."""
    try:
        return call()
    except query.InvalidQuery as exc:
        raise HTTPException(422, str(exc)) from exc
    except StoreUnavailable as exc:
        raise HTTPException(503, f"store unavailable: {exc}", headers={"Retry-After": "5"}) from exc


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
    return _run(
        lambda: query.list_runs(
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
    detail = _run(lambda: query.get_run(store, project, trace_id, idle_timeout_s=settings.run_idle_timeout_s))
    if detail is None:
        raise HTTPException(404, f"run {trace_id} not found in this project")
    return detail


@router.post("/runs/{trace_id}/feedback", response_model=FeedbackOut, status_code=201)
def add_feedback(store: StoreDep, project: ProjectDep, trace_id: TraceId, body: FeedbackIn) -> FeedbackOut:
    return _run(lambda: query.add_feedback(store, project, trace_id, body))


@router.get("/overview", response_model=Overview)
def overview(
    store: StoreDep,
    project: ProjectDep,
    settings: SettingsDep,
    start: Start = None,
    end: End = None,
    agent: Agent = None,
    model: Model = None,
) -> Overview:
    lo, hi = time_window(start, end)
    return _run(
        lambda: query.overview(
            store, project, start=lo, end=hi, agent=agent, model=model, idle_timeout_s=settings.run_idle_timeout_s
        )
    )


@router.get("/timeseries", response_model=TimeSeries)
def timeseries(
    store: StoreDep,
    project: ProjectDep,
    metric: Annotated[str, Query(max_length=64, description="one of TIMESERIES_METRICS")],
    start: Start = None,
    end: End = None,
    step_s: Annotated[int | None, Query(ge=1, le=366 * 86_400)] = None,
    group_by: Literal["none", "agent", "model"] = "none",
    agent: Agent = None,
    model: Model = None,
) -> TimeSeries:
    lo, hi = time_window(start, end)
    step = step_s or max(1, math.ceil((hi - lo) / DEFAULT_POINTS))
    return _run(lambda: query.timeseries(store, project, metric, lo, hi, step, group_by, agent, model))


@router.get("/timeseries/set", response_model=list[TimeSeries])
def timeseries_set(
    store: StoreDep,
    project: ProjectDep,
    metric: Annotated[
        list[str],
        Query(min_length=1, max_length=len(TIMESERIES_METRICS), description="repeated: metrics of TIMESERIES_METRICS"),
    ],
    start: Start = None,
    end: End = None,
    step_s: Annotated[int | None, Query(ge=1, le=366 * 86_400)] = None,
    group_by: Literal["none", "agent", "model"] = "none",
    agent: Agent = None,
    model: Model = None,
) -> list[TimeSeries]:
    lo, hi = time_window(start, end)
    step = step_s or max(1, math.ceil((hi - lo) / DEFAULT_POINTS))
    metrics = list(dict.fromkeys(metric))
    return _run(lambda: query.timeseries_set(store, project, metrics, lo, hi, step, group_by, agent, model))


@router.get("/cost", response_model=CostBreakdown)
def cost(
    store: StoreDep,
    project: ProjectDep,
    settings: SettingsDep,
    start: Start = None,
    end: End = None,
    agent: Agent = None,
    model: Model = None,
    gpu_hour_usd: Annotated[float | None, Query(ge=0, le=1e6)] = None,
) -> CostBreakdown:
    lo, hi = time_window(start, end)
    price = settings.gpu_hour_usd if gpu_hour_usd is None else gpu_hour_usd
    prices = price_table(settings.prices_file)
    return _run(
        lambda: query.cost_breakdown(
            store, project, start=lo, end=hi, agent=agent, model=model, gpu_hour_usd=price, prices=prices
        )
    )


@router.get("/whatif", response_model=WhatIf)
def whatif(
    store: StoreDep,
    project: ProjectDep,
    settings: SettingsDep,
    policy: Annotated[Literal["route", "cap_steps", "evolving_report"], Query(description="the policy to estimate")],
    start: Start = None,
    end: End = None,
    agent: Agent = None,
    step: Annotated[str | None, Query(max_length=256, description="route: the step name whose LLM calls move")] = None,
    model: Annotated[str | None, Query(max_length=256, description="route: the model they move to")] = None,
    cap: Annotated[int | None, Query(ge=1, le=100_000, description="cap_steps: steps of work per run")] = None,
    bound: Annotated[
        int, Query(ge=1, le=10_000_000, description="evolving_report: report tokens per call")
    ] = DEFAULT_BOUND,
) -> WhatIf:
    """A cost policy applied to the runs of a past range: the estimated cost change, with a 95 % interval."""
    lo, hi = time_window(start, end)
    prices = price_table(settings.prices_file)
    return _run(
        lambda: query.whatif(
            store,
            project,
            start=lo,
            end=hi,
            policy=policy,
            prices=prices,
            agent=agent,
            step=step,
            model=model,
            cap=cap,
            bound=bound,
        )
    )


@router.get("/engines", response_model=list[EngineInfo])
def engines(store: StoreDep, project: ProjectDep, settings: SettingsDep) -> list[EngineInfo]:
    configured = {t.name: t.url for t in parse_targets(settings.scrape_targets) if t.project == project}
    return _run(lambda: query.engines(store, project, configured=configured))


@router.post(
    "/engines",
    response_model=EngineInfo,
    status_code=201,
    deprecated=True,
    responses={400: {"description": "URL refused"}, 409: {"description": "too many engines"}},
)
def add_engine(
    store: StoreDep, settings: SettingsDep, caller: AdminDep, body: EngineIn, request: Request
) -> EngineInfo:
    """Old path of ``POST /api/admin/engines`` (``admin`` scope): scrape another engine of the caller's project."""
    _run(lambda: register_engine_as(caller, EngineAdd(name=body.name, url=body.url), store, settings, request))
    return EngineInfo(engine=body.name, url=body.url)


@router.get("/engine/metrics", response_model=EngineSeries)
def engine_metrics(
    store: StoreDep,
    project: ProjectDep,
    engine: Annotated[str, Query(min_length=1, max_length=128)],
    start: Start = None,
    end: End = None,
    step_s: Annotated[int | None, Query(ge=1, le=86_400)] = None,
) -> EngineSeries:
    lo, hi = time_window(start, end)
    return _run(lambda: query.engine_series(store, project, engine, start=lo, end=hi, step_s=step_s))


@router.get("/filters", response_model=FilterValues)
def filters(store: StoreDep, project: ProjectDep, start: Start = None, end: End = None) -> FilterValues:
    lo, hi = time_window(start, end)
    return _run(lambda: query.filters(store, project, start=lo, end=hi))
