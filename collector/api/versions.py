"""Agent versions: figures per version, and two versions compared with a stated test."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from agentwatch_api.schemas import VersionComparison, VersionsOut
from agentwatch_platform.collector.api.deps import ProjectDep, SettingsDep, StoreDep, run_query
from agentwatch_platform.collector.api.params import Agent, End, Start, time_window
from agentwatch_platform.collector.query import versions as query

router = APIRouter(prefix="/api", tags=["query"])

Version = Annotated[str, Query(max_length=256, description="a version ('' = the runs that recorded none)")]


@router.get("/versions", response_model=VersionsOut)
def list_versions(
    store: StoreDep,
    project: ProjectDep,
    settings: SettingsDep,
    start: Start = None,
    end: End = None,
    agent: Agent = None,
) -> VersionsOut:
    """Per agent version (the run's ``service.version``), over the finished runs that started in
    the range (refused requests are no runs): runs, cost (total and per run), tokens, steps and
    latency per run, success and error rates, tool failures, feedback; oldest version first."""
    lo, hi = time_window(start, end)
    idle = settings.run_idle_timeout_s
    return run_query(lambda: query.versions(store, project, start=lo, end=hi, agent=agent, idle_timeout_s=idle))


@router.get(
    "/versions/compare",
    response_model=VersionComparison,
    responses={422: {"description": "a bad parameter, a == b, or a version without a finished run in the range"}},
)
def compare_versions(
    store: StoreDep,
    project: ProjectDep,
    settings: SettingsDep,
    a: Version,
    b: Version,
    start: Start = None,
    end: End = None,
    agent: Agent = None,
) -> VersionComparison:
    """Version ``b`` against version ``a``: for each figure ``b - a``, its 95 % interval, p-value and
    whether it is beyond noise (``significant``: p < 0.05, the interval excludes 0).

    Tests: per-run means (cost, tokens, steps, latency; the feedback score per rated run) by
    **Welch's t-test** (unequal variances; interval ``diff ± t(0.975, df)·se``, Welch–Satterthwaite
    df); the success rate by the **two-proportion z-test** (pooled p for the p-value, Wald interval
    ``diff ± 1.96·√(pa(1-pa)/na + pb(1-pb)/nb)``). Each side's latest 20 000 runs are tested
    (``sampled``); a side with fewer than two values has no test (``test: none``)."""
    lo, hi = time_window(start, end)
    idle = settings.run_idle_timeout_s
    return run_query(lambda: query.compare(store, project, a, b, start=lo, end=hi, agent=agent, idle_timeout_s=idle))
