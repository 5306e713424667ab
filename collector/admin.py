"""Operational endpoints of the collector: ``/health``, ``/ready``, ``/metrics``, ``/api/ingest``, key administration.

``/health`` (liveness: the process answers) and ``/ready`` (readiness: the store answers and
the writer runs, else 503 with a reason) need no key, for probes and load balancers; they
say nothing about any project, and a reason names a part, never a path, URL or error text.

``/api/ingest`` answers a project key with that project's own span counts and the collector's
health (queue, spool, lag, store), never another project's figures; the collector-wide span
counters are internals for the operator, who asks with the admin token.

Key administration (``/admin/keys``) lets ``agentwatch keys ...`` work while the collector
owns the embedded data directory. It is authenticated by the admin token the collector
writes, readable only by its user, into the data directory at start: whoever can read the
data files anyway can manage keys, nobody else.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import secrets
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from collector.api.schemas import IngestStatus
from collector.deps import bearer_token, get_project
from collector.keys import KeyAdminError, KeyRing
from collector.metrics import CONTENT_TYPE
from collector.storage import queries
from collector.storage.base import StoreError

ADMIN_TOKEN_FILE = "admin.token"
READY_TIMEOUT_S = 2.0  # a store slower than this to answer ``/ready`` counts as unreachable

log = logging.getLogger(__name__)

router = APIRouter()


def write_admin_token(data_dir: Path) -> str:
    """A fresh admin token for this run, in ``data_dir/admin.token`` with mode 0600."""
    token = secrets.token_urlsafe(32)
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / ADMIN_TOKEN_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token)
    return token


def read_admin_token(data_dir: Path) -> str | None:
    try:
        return (data_dir / ADMIN_TOKEN_FILE).read_text().strip() or None
    except OSError:
        return None


def _is_admin(request: Request) -> bool:
    expected = request.app.state.admin_token
    given = bearer_token(request) or ""
    return bool(expected) and hmac.compare_digest(given.encode(), expected.encode())


def _admin(request: Request) -> KeyRing:
    if not _is_admin(request):
        raise HTTPException(401, "admin endpoints need the token from <data dir>/admin.token", headers={"WWW-Authenticate": "Bearer"})
    return request.app.state.keyring


async def _ingest_scope(request: Request) -> str | None:
    """None for the operator (the admin token); otherwise the caller's project (401 without a key)."""
    return None if _is_admin(request) else await get_project(request)


AdminDep = Annotated[KeyRing, Depends(_admin)]


class KeyCreate(BaseModel):
    project: str = Field(min_length=1, max_length=64)
    name: str = Field(default="", max_length=200)


@router.get("/health", tags=["health"])
def health() -> dict[str, str]:
    """Liveness: 200 while the process serves requests; no key needed, nothing about any data."""
    return {"status": "ok"}


@router.get("/ready", tags=["health"], responses={503: {"description": "not ready; `reason` says which part"}})
async def ready(request: Request) -> JSONResponse:
    """Readiness: 200 when spans can be accepted and stored (writer running, spool writable,
    store answering within ``READY_TIMEOUT_S``), else 503 with ``Retry-After`` and a reason."""
    reason = _not_ready(request) or await _store_not_ready(request)
    if reason:
        return JSONResponse({"status": "not ready", "reason": reason}, status_code=503, headers={"Retry-After": "5"})
    return JSONResponse({"status": "ready"})


def _not_ready(request: Request) -> str:
    ingestor = request.app.state.ingestor
    writer = ingestor.writer
    if writer is None or not writer.running:
        return "writer not running (collector starting or stopping)"
    if ingestor.spool.error:
        return "spool not writable"
    return ""


async def _store_not_ready(request: Request) -> str:
    try:
        rows = await asyncio.wait_for(asyncio.to_thread(request.app.state.store.query, queries.STORE_READY), READY_TIMEOUT_S)
    except TimeoutError:
        log.warning("/ready: the store did not answer within %.1f s", READY_TIMEOUT_S)
        return "store not answering"
    except StoreError as exc:
        log.warning("/ready: store unreachable: %s", exc)
        return "store unreachable"
    if not rows or not int(rows[0]["n"]):
        return "store not migrated (no spans table)"
    return ""


@router.get("/metrics", include_in_schema=False)
def metrics(request: Request) -> Response:
    return Response(request.app.state.metrics.render(), media_type=CONTENT_TYPE)


@router.get("/api/ingest", response_model=IngestStatus, tags=["ingest"])
def ingest_status(request: Request, project: Annotated[str | None, Depends(_ingest_scope)]) -> IngestStatus:
    """Ingestion figures for the dashboard; what a caller sees depends on who asks.

    A project key: its own ``received_spans`` and ``rejected_spans`` (since this collector
    started) and ``stored_spans``, the project's spans in the store (0 while the store is
    unreachable). ``queued_spans``, ``spool_bytes``, the lag quantiles and ``store_available``
    describe the collector's health: collector-wide, they hold no project's data or identity,
    only how busy the collector is. The admin token (``<data dir>/admin.token``) gets the
    collector-wide span counters.
    """
    state = request.app.state
    p50, p95 = state.metrics.lag_quantiles()
    writer = state.ingestor.writer
    health = {"queued_spans": writer.queued_spans if writer else 0, "spool_bytes": state.ingestor.spool.bytes,
              "lag_p50_s": p50, "lag_p95_s": p95, "store_available": bool(writer and writer.store_available)}
    if project is None:
        totals = state.metrics.totals
        return IngestStatus(received_spans=totals["received"], stored_spans=totals["stored"],
                            rejected_spans=totals["rejected"], scope="collector", **health)
    mine = state.metrics.by_project.get(project, {})
    return IngestStatus(received_spans=mine.get("received", 0), stored_spans=_stored_spans(request, project),
                        rejected_spans=mine.get("rejected", 0), scope="project", **health)


def _stored_spans(request: Request, project: str) -> int:
    try:
        rows = request.app.state.store.query(queries.PROJECT_SPANS, {"project": project})
    except StoreError as exc:  # the health figures still answer; the count waits for the store
        log.warning("/api/ingest: cannot count the spans of project %r: %s", project, exc)
        return 0
    return int(rows[0]["n"]) if rows else 0


@router.post("/admin/keys", include_in_schema=False)
def create_key(body: KeyCreate, keys: AdminDep) -> dict[str, object]:
    try:
        new = keys.create(body.project, name=body.name)
    except KeyAdminError as exc:
        raise HTTPException(400, str(exc)) from None
    return {**new.info.as_dict(), "key": new.key}


@router.get("/admin/keys", include_in_schema=False)
def list_keys(keys: AdminDep) -> list[dict[str, object]]:
    return [k.as_dict() for k in keys.list()]


@router.post("/admin/keys/{key_id}/revoke", include_in_schema=False)
def revoke_key(key_id: str, keys: AdminDep, request: Request) -> dict[str, object]:
    try:
        info = keys.revoke(key_id)
    except KeyAdminError as exc:
        raise HTTPException(404, str(exc)) from None
    request.app.state.authenticator.forget(key_id)
    return info.as_dict()
