"""LLM engines as a project sees them: the engines it scrapes, their metric series, and the old path
of registering one (``POST /api/engines``; now ``POST /api/admin/engines``)."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlsplit

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field, field_validator

from agentwatch_api.schemas import (
    EngineInfo,
    EngineSeries,
)
from agentwatch_platform.collector.api.admin import AdminDep, EngineAdd, register_engine_as
from agentwatch_platform.collector.api.deps import ProjectDep, SettingsDep, StoreDep, run_query
from agentwatch_platform.collector.api.params import End, Start, time_window
from agentwatch_platform.collector.engines.scraper import parse_targets
from agentwatch_platform.collector.query import engines as engine_query

router = APIRouter(prefix="/api", tags=["query"])


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


@router.get("/engines", response_model=list[EngineInfo])
def engines(store: StoreDep, project: ProjectDep, settings: SettingsDep) -> list[EngineInfo]:
    configured = {t.name: t.url for t in parse_targets(settings.scrape_targets) if t.project == project}
    return run_query(lambda: engine_query.engines(store, project, configured=configured))


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
    run_query(lambda: register_engine_as(caller, EngineAdd(name=body.name, url=body.url), store, settings, request))
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
    return run_query(lambda: engine_query.engine_series(store, project, engine, start=lo, end=hi, step_s=step_s))
