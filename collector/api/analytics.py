"""Figures over a range: the overview, time series (one metric or a set), the cost breakdown and
what-if estimates of a cost policy."""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Annotated, Literal

from fastapi import APIRouter, Query

from agentwatch_api.schemas import (
    TIMESERIES_METRICS,
    CostBreakdown,
    Freshness,
    Overview,
    TimeSeries,
    WhatIf,
)
from agentwatch_platform.collector.api.deps import FreshnessDep, ProjectDep, SettingsDep, StoreDep, run_query
from agentwatch_platform.collector.api.params import Agent, End, Model, Start, time_window
from agentwatch_platform.collector.query import cost as cost_query
from agentwatch_platform.collector.query import metrics as metrics_query
from agentwatch_platform.collector.query import overview as overview_query
from agentwatch_platform.collector.query.levers import price_table
from agentwatch_platform.collector.query.whatif import DEFAULT_BOUND

router = APIRouter(prefix="/api", tags=["query"])

DEFAULT_POINTS = 120


@router.get("/freshness", response_model=Freshness)
def freshness(freshness: FreshnessDep, project: ProjectDep) -> Freshness:
    """How far the figures are complete: the watermark before which no more spans are expected
    (collector-wide: it holds no project's data)."""
    return Freshness(**asdict(freshness.state()))


@router.get("/overview", response_model=Overview)
def overview(
    store: StoreDep,
    project: ProjectDep,
    settings: SettingsDep,
    freshness: FreshnessDep,
    start: Start = None,
    end: End = None,
    agent: Agent = None,
    model: Model = None,
) -> Overview:
    lo, hi = time_window(start, end)
    return run_query(
        lambda: overview_query.overview(
            store,
            project,
            start=lo,
            end=hi,
            agent=agent,
            model=model,
            idle_timeout_s=settings.run_idle_timeout_s,
            complete_until=freshness.state().complete_until,
        )
    )


@router.get("/timeseries", response_model=TimeSeries)
def timeseries(
    store: StoreDep,
    project: ProjectDep,
    freshness: FreshnessDep,
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
    until = freshness.state().complete_until
    return run_query(
        lambda: metrics_query.timeseries(
            store, project, metric, lo, hi, step, group_by, agent, model, complete_until=until
        )
    )


@router.get("/timeseries/set", response_model=list[TimeSeries])
def timeseries_set(
    store: StoreDep,
    project: ProjectDep,
    freshness: FreshnessDep,
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
    until = freshness.state().complete_until
    return run_query(
        lambda: metrics_query.timeseries_set(
            store, project, metrics, lo, hi, step, group_by, agent, model, complete_until=until
        )
    )


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
    return run_query(
        lambda: cost_query.cost_breakdown(
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
    return run_query(
        lambda: cost_query.whatif(
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
