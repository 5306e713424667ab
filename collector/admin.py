"""Operational endpoints of the collector: ``/metrics``, ``/api/ingest`` and key administration.

Key administration (``/admin/keys``) lets ``agentwatch keys ...`` work while the collector
owns the embedded data directory. It is authenticated by the admin token the collector
writes, readable only by its user, into the data directory at start: whoever can read the
data files anyway can manage keys, nobody else.
"""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Request, Response
from pydantic import BaseModel, Field

from collector.api.schemas import IngestStatus
from collector.deps import ProjectDep, bearer_token
from collector.keys import KeyAdminError, KeyRing
from collector.metrics import CONTENT_TYPE

ADMIN_TOKEN_FILE = "admin.token"

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


def _admin(request: Request) -> KeyRing:
    expected = request.app.state.admin_token
    given = bearer_token(request) or ""
    if not expected or not hmac.compare_digest(given.encode(), expected.encode()):
        raise HTTPException(401, "admin endpoints need the token from <data dir>/admin.token", headers={"WWW-Authenticate": "Bearer"})
    return request.app.state.keyring


AdminDep = Annotated[KeyRing, Depends(_admin)]


class KeyCreate(BaseModel):
    project: str = Field(min_length=1, max_length=64)
    name: str = Field(default="", max_length=200)


@router.get("/metrics", include_in_schema=False)
def metrics(request: Request) -> Response:
    return Response(request.app.state.metrics.render(), media_type=CONTENT_TYPE)


@router.get("/api/ingest", response_model=IngestStatus, tags=["ingest"])
def ingest_status(request: Request, project: ProjectDep) -> IngestStatus:
    """Collector-wide ingestion figures (lag, queue, spool): shown on the dashboard."""
    state = request.app.state
    p50, p95 = state.metrics.lag_quantiles()
    totals = state.metrics.totals
    writer = state.ingestor.writer
    return IngestStatus(
        received_spans=totals["received"], stored_spans=totals["stored"], rejected_spans=totals["rejected"],
        queued_spans=writer.queued_spans if writer else 0, spool_bytes=state.ingestor.spool.bytes,
        lag_p50_s=p50, lag_p95_s=p95, store_available=bool(writer and writer.store_available),
    )


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
