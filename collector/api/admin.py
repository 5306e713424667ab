"""Administration, under one prefix, ``/api/admin`` (``collector.auth.scopes.ADMIN_PREFIX``).

Behind one dependency (``AdminDep``): keys, engine scrape targets, re-pricing (``collector.query.reprice``),
deleting data (``collector.storage.deletion``) and the audit log. Callers are the operator's admin token, which the collector writes at
start into the data directory readable only by its user (whoever can read the data files
anyway; it lets ``agentwatch keys ...`` work while the collector owns the embedded data
directory), or a project key with the ``admin`` scope, which manages its own project only.
The old paths ``/admin/keys...`` stay as aliases for existing clients. Every change is
recorded in ``audit_log`` (``GET /api/admin/audit``).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import asdict
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request, Response
from pydantic import BaseModel, Field

from agentwatch_platform.collector.api.deps import SettingsDep, StoreDep
from agentwatch_platform.collector.auth.caller import Principal, principal
from agentwatch_platform.collector.auth.keys import KeyAdminError
from agentwatch_platform.collector.auth.scopes import ADMIN, ADMIN_PREFIX, ScopeError
from agentwatch_platform.collector.engines.registry import EngineLimit, TargetRefused, add_engine, audit, delete_engine
from agentwatch_platform.collector.query.reprice import price_table, reprice
from agentwatch_platform.collector.state import collector_state
from agentwatch_platform.collector.storage.deletion import DeletionError, Scope, delete_data, journal_for
from agentwatch_platform.collector.storage.sql import admin as admin_sql
from agentwatch_platform.collector.storage.sql import engines as engines_sql

log = logging.getLogger(__name__)

router = APIRouter(prefix=ADMIN_PREFIX, tags=["admin"])
legacy_router = APIRouter()  # /admin/keys...: the key routes' old paths, kept for existing clients
MAX_AUDIT = 1000


async def admin_caller(request: Request) -> Principal:
    """The one dependency of every admin route: the operator, or a key with the ``admin`` scope."""
    caller = await principal(request)
    if ADMIN not in caller.scopes:
        raise HTTPException(
            403, "admin endpoints need a key with the 'admin' scope or the token from <data dir>/admin.token"
        )
    return caller


def scoped_project(caller: Principal, requested: str | None, *, required: bool) -> str | None:
    """The project an admin action applies to: an admin key's own; the operator names one."""
    if caller.project is None:
        if required and not requested:
            raise HTTPException(422, "the admin token manages every project: name the project ('project')")
        return requested or None
    if requested and requested != caller.project:
        raise HTTPException(403, f"this key manages project {caller.project!r} only")
    return caller.project


AdminDep = Annotated[Principal, Depends(admin_caller)]
ProjectParam = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=64,
        description="the project (the admin token must name one; an admin key's own by default)",
    ),
]


class KeyCreate(BaseModel):
    project: str = Field(default="", max_length=64, description="an admin key's own project by default")
    name: str = Field(default="", max_length=200)
    scopes: list[Literal["ingest", "read", "admin"]] | None = Field(
        default=None,
        max_length=3,
        description="default ingest and read, the rights of a key from before scopes (the CLI defaults to ingest)",
    )


class KeyOut(BaseModel):
    key_id: str
    project: str
    name: str
    created_at: float
    revoked_at: float | None
    scopes: list[str]
    legacy: bool


class NewKeyOut(KeyOut):
    key: str = Field(description="the key itself, shown this once")


class EngineAdd(BaseModel):
    """An engine to scrape (``collector.engines.scrape_guard`` decides which URLs are accepted)."""

    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:-]+$")
    url: str = Field(min_length=1, max_length=2048, pattern=r"^https?://[^\x00-\x20\x7f]+$")
    project: str = Field(default="", max_length=64, description="an admin key's own project by default")


class EngineStatus(BaseModel):
    engine: str
    url: str
    ok: bool | None = Field(description="last scrape succeeded; null before the first")
    error: str = Field(description="why the last scrape failed or was refused")
    at: float | None


class AuditEntry(BaseModel):
    project: str
    at: float
    actor: str
    action: str
    target: str
    detail: str


# --- keys ----------------------------------------------------------------------------------------
def create_key(body: KeyCreate, caller: AdminDep, request: Request) -> dict[str, object]:
    """A new key of a project with ``scopes``; the key is in this answer only."""
    project = scoped_project(caller, body.project or None, required=True) or ""
    keys = collector_state(request.app).keyring
    try:
        new = keys.create(
            project, name=body.name, **({"scopes": tuple(body.scopes)} if body.scopes is not None else {})
        )
    except (KeyAdminError, ScopeError) as exc:
        raise HTTPException(400, str(exc)) from None
    audit(
        collector_state(request.app).store,
        project,
        caller.actor,
        "key.create",
        new.info.key_id,
        {"name": body.name, "scopes": list(new.info.scopes)},
    )
    return {**new.info.as_dict(), "key": new.key}


def list_keys(caller: AdminDep, request: Request) -> list[dict[str, object]]:
    """Keys (ids, projects, scopes, state; never the keys): every project's for the operator."""
    return [k.as_dict() for k in collector_state(request.app).keyring.list(project=caller.project)]


def revoke_key(key_id: Annotated[str, Path(max_length=64)], caller: AdminDep, request: Request) -> dict[str, object]:
    state = collector_state(request.app)
    keys = state.keyring
    try:
        if caller.project is not None and keys.get(key_id).project != caller.project:
            raise KeyAdminError(f"no API key with id {key_id!r} in project {caller.project!r}")
        info = keys.revoke(key_id)
    except KeyAdminError as exc:
        raise HTTPException(404, str(exc)) from None
    state.authenticator.forget(key_id)
    audit(state.store, info.project, caller.actor, "key.revoke", key_id, {})
    return info.as_dict()


for _prefix, _router, _public in (
    ("", router, True),
    ("/admin", legacy_router, False),
):  # /admin/...: old paths, aliases
    _router.add_api_route(
        _prefix + "/keys",
        create_key,
        methods=["POST"],
        response_model=NewKeyOut,
        include_in_schema=_public,
        deprecated=not _public,
    )
    _router.add_api_route(
        _prefix + "/keys",
        list_keys,
        methods=["GET"],
        response_model=list[KeyOut],
        include_in_schema=_public,
        deprecated=not _public,
    )
    _router.add_api_route(
        _prefix + "/keys/{key_id}/revoke",
        revoke_key,
        methods=["POST"],
        response_model=KeyOut,
        include_in_schema=_public,
        deprecated=not _public,
        responses={404: {"description": "no such key (in this project)"}},
    )


# --- engines -------------------------------------------------------------------------------------
def register_engine_as(
    caller: Principal, body: EngineAdd, store: StoreDep, settings: SettingsDep, request: Request
) -> dict[str, str]:
    """Validate, cap and register an engine; 400 for a refused URL, 409 over the cap."""
    project = scoped_project(caller, body.project or None, required=True) or ""
    try:
        add_engine(
            store,
            settings,
            project,
            body.name,
            body.url,
            actor=caller.actor,
            policy=collector_state(request.app).scrape_policy,
        )
    except TargetRefused as exc:
        raise HTTPException(400, f"engine URL refused: {exc}") from None
    except EngineLimit as exc:
        raise HTTPException(409, str(exc)) from None
    return {"engine": body.name, "url": body.url, "project": project}


@router.post(
    "/engines",
    status_code=201,
    responses={400: {"description": "URL refused"}, 409: {"description": "too many engines"}},
)
def add_engine_route(
    body: EngineAdd, caller: AdminDep, store: StoreDep, settings: SettingsDep, request: Request
) -> dict[str, str]:
    """Scrape an engine's ``/metrics`` from the next cycle on."""
    return register_engine_as(caller, body, store, settings, request)


@router.get("/engines", response_model=list[EngineStatus])
def engine_status(
    caller: AdminDep, store: StoreDep, request: Request, project: ProjectParam = None
) -> list[EngineStatus]:
    """Registered engines with the outcome of their last scrape (why it failed or was refused)."""
    name = scoped_project(caller, project, required=True) or ""
    scraper = collector_state(request.app).scraper
    status = scraper.status if scraper is not None else {}
    rows = store.query(engines_sql.ENGINES_REGISTERED, {"project": name})
    return [
        EngineStatus(
            engine=r["engine"],
            url=r["url"],
            ok=status.get((name, r["engine"]), {}).get("ok"),
            error=status.get((name, r["engine"]), {}).get("error", ""),
            at=status.get((name, r["engine"]), {}).get("at"),
        )
        for r in rows
    ]


@router.delete("/engines/{name}", status_code=204, responses={404: {"description": "no such registered engine"}})
def remove_engine(
    name: Annotated[str, Path(max_length=128)], caller: AdminDep, store: StoreDep, project: ProjectParam = None
) -> Response:
    """Stop scraping a registered engine (one from ``AGENTWATCH_SCRAPE_TARGETS`` stays: it is configuration)."""
    target = scoped_project(caller, project, required=True) or ""
    if not delete_engine(store, target, name, actor=caller.actor):
        raise HTTPException(404, f"no registered engine {name!r} in project {target!r}")
    return Response(status_code=204)


# --- re-pricing (``agentwatch reprice`` asks a running collector here) ----------------------------
class RepriceIn(BaseModel):
    since: float = Field(ge=0, le=1e10, description="epoch seconds")
    project: str = Field(default="", max_length=64, description="empty = every project")


@router.post("/reprice")
def reprice_endpoint(body: RepriceIn, store: StoreDep, settings: SettingsDep, caller: AdminDep) -> dict[str, Any]:
    """Re-price since ``since``: an admin key's own project; the admin token's choice (empty = all)."""
    project = scoped_project(caller, body.project or None, required=False) or ""
    result = asdict(reprice(store, price_table(settings), since=body.since, project=project))
    audit(
        store,
        project,
        caller.actor,
        "reprice",
        project or "*",
        {"since": body.since, "version": result["version"], "spans": result["spans"]},
    )
    return result


# --- deleting data (``agentwatch delete`` asks a running collector here) --------------------------
class DeleteIn(BaseModel):
    """What to delete: exactly one of a trace, a user, a session, a time range or the whole project."""

    project: str = Field(default="", max_length=64, description="an admin key's own project by default")
    trace_id: str | None = Field(default=None, min_length=1, max_length=256)
    user_id: str | None = Field(default=None, min_length=1, max_length=1024)
    session_id: str | None = Field(default=None, min_length=1, max_length=1024)
    start: float | None = Field(default=None, ge=0, le=1e10, description="epoch seconds; runs with a span from then on")
    end: float | None = Field(default=None, ge=0, le=1e10, description="epoch seconds, exclusive")
    everything: bool = Field(
        default=False, description="every span, run, rollup, text, feedback and alert of the project"
    )


class DeletionOut(BaseModel):
    id: str
    project: str
    target: str
    traces: int = Field(description="runs (traces) deleted; 0 for a whole project")
    spans: int
    cost_usd: float = Field(description="what the project's cost total dropped by")
    texts_removed: int = Field(description="captured texts removed from the text files")


def deletion_scope(body: DeleteIn, project: str) -> Scope:
    """The one thing ``body`` names; 422 for none or several."""
    named = [
        (kind, value)
        for kind, value in (("trace", body.trace_id), ("user", body.user_id), ("session", body.session_id))
        if value is not None
    ]
    if body.start is not None or body.end is not None:
        named.append(("range", ""))
    if body.everything:
        named.append(("project", ""))
    if len(named) != 1:
        raise HTTPException(
            422, "name exactly one of trace_id, user_id, session_id, start and end, or everything: true"
        )
    kind, value = named[0]
    try:
        return Scope(project, kind, value or "", body.start, body.end)
    except DeletionError as exc:
        raise HTTPException(422, str(exc)) from None


@router.post("/delete", response_model=DeletionOut)
async def delete_endpoint(body: DeleteIn, caller: AdminDep, settings: SettingsDep, request: Request) -> DeletionOut:
    """Delete runs and everything derived from them, crash-safe and audited (``collector.storage.deletion``)."""
    project = scoped_project(caller, body.project or None, required=True) or ""
    scope = deletion_scope(body, project)
    state = collector_state(request.app)
    store = state.store.get()  # the store itself: its inserts wait while it deletes
    journal = journal_for(settings.data_dir)
    result = await asyncio.to_thread(delete_data, store, scope, actor=caller.actor, journal=journal)
    ingestor = state.ingestor
    if ingestor.writer is not None:  # live-run heads and engine facts the collector remembers of those traces
        ingestor.writer.forget(project, None if scope.kind == "project" else result.trace_ids)
    ingestor.spool.retire_when_idle()  # request bodies holding the deleted data leave the disk once stored
    for listener in state.deletion_listeners:  # plugins' memory of it (the alerts')
        listener(project)
    log.info("deleted %s of project %s: %d spans, %.6f USD", scope.target, project, result.spans, result.cost_usd)
    return DeletionOut(**{k: v for k, v in asdict(result).items() if k != "trace_ids"})


# --- audit ---------------------------------------------------------------------------------------
@router.get("/audit", response_model=list[AuditEntry])
def audit_log(
    caller: AdminDep,
    store: StoreDep,
    project: ProjectParam = None,
    limit: Annotated[int, Query(ge=1, le=MAX_AUDIT)] = 200,
) -> list[AuditEntry]:
    """Admin actions, newest first: an admin key's project, or every project for the operator."""
    name = scoped_project(caller, project, required=False) or ""
    return [AuditEntry(**row) for row in store.query(admin_sql.LIST_AUDIT, {"project": name, "limit": limit})]


__all__ = ["AdminDep", "legacy_router", "router", "scoped_project"]
