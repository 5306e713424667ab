"""Probes and the collector's own figures: ``/health``, ``/ready``, ``/metrics``, ``/api/ingest``.

``/health`` (liveness: the process answers) and ``/ready`` (readiness: the store answers and
the writer runs, else 503 with a reason) need no key, for probes and load balancers; they
say nothing about any project, and a reason names a part, never a path, URL or error text.

``/api/ingest`` answers a project key with that project's own span counts and the collector's
health (queue, spool, lag, store), never another project's figures; the collector-wide span
counters are internals for the operator, who asks with the admin token.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from agentwatch_api.schemas import IngestStatus
from agentwatch_platform.collector.api.deps import get_project
from agentwatch_platform.collector.auth.caller import principal
from agentwatch_platform.collector.metrics import CONTENT_TYPE
from agentwatch_platform.collector.state import collector_state
from agentwatch_platform.collector.storage.base import StoreError
from agentwatch_platform.collector.storage.sql import admin as admin_sql

READY_TIMEOUT_S = (
    2.0  # a store slower than this to answer ``/ready`` is ready only if the writer's last insert succeeded
)

log = logging.getLogger(__name__)

router = APIRouter()


async def _ingest_scope(request: Request) -> str | None:
    """None for the operator (the admin token); otherwise the caller's project (401 without a key)."""
    return None if (await principal(request)).operator else await get_project(request)


@router.get("/health", tags=["health"])
def health() -> dict[str, str]:
    """Liveness: 200 while the process serves requests; no key needed, nothing about any data."""
    return {"status": "ok"}


@router.get("/ready", tags=["health"], responses={503: {"description": "not ready; `reason` says which part"}})
async def ready(request: Request) -> JSONResponse:
    """Readiness: 200 when spans can be accepted and stored (writer running, spool writable,
    store answering within ``READY_TIMEOUT_S``, or busy past it while the writer's last insert
    succeeded), else 503 with ``Retry-After`` and a reason."""
    reason = _not_ready(request) or await _store_not_ready(request)
    if reason:
        return JSONResponse({"status": "not ready", "reason": reason}, status_code=503, headers={"Retry-After": "5"})
    return JSONResponse({"status": "ready"})


def _not_ready(request: Request) -> str:
    ingestor = collector_state(request.app).ingestor
    writer = ingestor.writer
    if writer is None or not writer.running:
        return "writer not running (collector starting or stopping)"
    if ingestor.spool.error:
        return "spool not writable"
    return ""


async def _store_not_ready(request: Request) -> str:
    state = collector_state(request.app)
    try:
        rows = await asyncio.wait_for(asyncio.to_thread(state.store.query, admin_sql.STORE_READY), READY_TIMEOUT_S)
    except TimeoutError:  # busy (an embedded store runs one statement at a time) or hung: the writer knows which
        writer = state.ingestor.writer
        log.warning(
            "/ready: the store did not answer within %.1f s (writer's last insert %s)",
            READY_TIMEOUT_S,
            "succeeded" if writer and writer.store_available else "failed",
        )
        return "" if writer and writer.store_available else "store not answering"
    except StoreError as exc:
        log.warning("/ready: store unreachable: %s", exc)
        return "store unreachable"
    if not rows or not int(rows[0]["n"]):
        return "store not migrated (no spans table)"
    return ""


@router.get("/metrics", include_in_schema=False)
def metrics(request: Request) -> Response:
    return Response(collector_state(request.app).metrics.render(), media_type=CONTENT_TYPE)


@router.get("/api/ingest", response_model=IngestStatus, tags=["ingest"])
def ingest_status(request: Request, project: Annotated[str | None, Depends(_ingest_scope)]) -> IngestStatus:
    """Ingestion figures for the dashboard; what a caller sees depends on who asks.

    A project key: its own ``received_spans`` and ``rejected_spans`` (since this collector
    started; where collectors share a ClickHouse, summed over all of them, the others' as last
    published, ``collector.query.fleet``) and ``stored_spans``, the project's spans in the store (0 while the store is
    unreachable). ``queued_spans``, ``spool_bytes``, the lag quantiles and ``store_available``
    describe the collector's health: collector-wide, they hold no project's data or identity,
    only how busy the collector is. The admin token (``<data dir>/admin.token``) gets the
    collector-wide span counters.
    """
    state = collector_state(request.app)
    p50, p95 = state.metrics.lag_quantiles()
    writer = state.ingestor.writer
    health: dict[str, Any] = {  # IngestStatus's fields about the collector, checked by pydantic
        "queued_spans": writer.queued_spans if writer else 0,
        "spool_bytes": state.ingestor.spool.size_bytes,
        "lag_p50_s": p50,
        "lag_p95_s": p95,
        "store_available": bool(writer and writer.store_available),
    }
    fleet = state.fleet  # other collectors on the same store (collector.query.fleet)
    received, rejected = fleet.others(project or "") if fleet is not None else (0, 0)
    if project is None:
        totals = state.metrics.totals
        return IngestStatus(
            received_spans=totals["received"] + received,
            stored_spans=totals["stored"],
            rejected_spans=totals["rejected"] + rejected,
            scope="collector",
            **health,
        )
    mine = state.metrics.by_project.get(project, {})
    return IngestStatus(
        received_spans=mine.get("received", 0) + received,
        stored_spans=_stored_spans(request, project),
        rejected_spans=mine.get("rejected", 0) + rejected,
        scope="project",
        **health,
    )


def _stored_spans(request: Request, project: str) -> int:
    try:
        rows = collector_state(request.app).store.query(admin_sql.PROJECT_SPANS, {"project": project})
    except StoreError as exc:  # the health figures still answer; the count waits for the store
        log.warning("/api/ingest: cannot count the spans of project %r: %s", project, exc)
        return 0
    return int(rows[0]["n"]) if rows else 0
