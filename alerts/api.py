"""``/api/alerts``: alert history and rules for the dashboard, and the write side of ``alerts run``.

Reads (dashboard): ``GET /api/alerts`` (state, start, end) -> ``list[AlertOut]``,
``GET /api/alerts/rules`` -> ``list[AlertRuleOut]``, ``GET /api/alerts/deliveries``.
Writes (an out-of-process evaluator, ``agentwatch alerts run``, which cannot open the store):
``POST /api/alerts`` and ``POST /api/alerts/deliveries``; ``GET /api/alerts/context`` tells
it which project its key belongs to, ``GET /api/alerts/run-states`` reads the stuck-run and
crash-rate figures (``alerts.run_states``), ``GET /api/alerts/scope-series`` the per-user,
per-session and per-version series (``alerts.run_scopes``). Every route is scoped to the caller's project.
"""

from __future__ import annotations

import functools
import math
import os
from pathlib import Path
from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Query, Request
from pydantic import Field

from agentwatch_api.schemas import (
    MAX_EPOCH_S,
    AlertContext,
    AlertIn,
    AlertOut,
    AlertRuleOut,
    DeliveryIn,
    DeliveryOut,
    RunStates,
    TimeSeries,
)
from agentwatch_platform.alerts.errors import RulesError
from agentwatch_platform.alerts.model import Alert, Delivery
from agentwatch_platform.alerts.rules import RulesConfig, load_rules
from agentwatch_platform.alerts.run_scopes import run_scope_series
from agentwatch_platform.alerts.run_states import run_state_values
from agentwatch_platform.alerts.settings import AlertsSettings
from agentwatch_platform.alerts.sources import alert_row, delivery_row
from agentwatch_platform.collector.api.deps import FreshnessDep, ProjectDep, SettingsDep, StoreDep
from agentwatch_platform.collector.api.params import End, Start, time_window
from agentwatch_platform.collector.auth.scopes import ADMIN, READ
from agentwatch_platform.collector.query.ranges import MAX_BUCKETS
from agentwatch_platform.collector.state import collector_state
from agentwatch_platform.collector.storage.sql import alerts as alerts_sql

router = APIRouter(prefix="/api/alerts", tags=["alerts"])
# Who may call each route (collector.auth.scopes): the plugin hands the table to the collector.
ROUTE_SCOPES = {
    ("GET", "/api/alerts"): READ,
    ("GET", "/api/alerts/rules"): READ,
    ("GET", "/api/alerts/context"): READ,
    ("GET", "/api/alerts/deliveries"): READ,
    ("GET", "/api/alerts/run-states"): READ,
    ("GET", "/api/alerts/scope-series"): READ,
    ("POST", "/api/alerts"): ADMIN,  # `agentwatch alerts run` writes the history it keeps
    ("POST", "/api/alerts/deliveries"): ADMIN,
}

MAX_ALERTS = 1000


@router.get("", response_model=list[AlertOut])
def list_alerts(
    store: StoreDep,
    project: ProjectDep,
    state: Literal["firing", "resolved"] | None = None,
    start: Start = None,
    end: End = None,
    limit: Annotated[int, Query(ge=1, le=MAX_ALERTS)] = 200,
    alert_id: Annotated[str, Query(max_length=64, description="this incident only, whenever it was")] = "",
) -> list[AlertOut]:
    """Alerts whose episode overlaps [start, end), newest first; with ``alert_id``, that incident
    over all time (a notification's link names an incident, not a range)."""
    lo, hi = (0.0, MAX_EPOCH_S) if alert_id else (min(max(t, 0.0), MAX_EPOCH_S) for t in time_window(start, end))
    params = {
        "project": project,
        "alert_id": alert_id,
        "state": state or "",
        "start_ms": int(lo * 1000),
        "end_ms": int(hi * 1000),
        "limit": limit,
    }
    return [Alert(**row).to_out() for row in store.query(alerts_sql.LIST_ALERTS, params)]


@router.get("/rules", response_model=list[AlertRuleOut])
def list_rules(request: Request, project: ProjectDep) -> list[AlertRuleOut]:
    """The rules in force: the running evaluator's, else the configured file's."""
    component = collector_state(request.app).plugin_components.get("alerts")  # alerts.evaluator.InProcessAlerts
    config = getattr(component, "config", None)
    if config is None:
        try:
            config = _rules_file(_settings(request).alert_rules)
        except RulesError as exc:
            raise HTTPException(500, f"alert rules file is invalid: {exc}") from exc
    return [rule.to_out() for rule in config.rules if rule.scope.get("project", project) == project]


@router.get("/context", response_model=AlertContext)
def context(project: ProjectDep) -> AlertContext:
    return AlertContext(project=project)


@router.get("/run-states", response_model=RunStates)
def run_states(
    store: StoreDep,
    project: ProjectDep,
    settings: SettingsDep,
    metric: Literal["oldest_running_run_s", "incomplete_run_rate"],
    now: Annotated[float, Query(ge=0, le=MAX_EPOCH_S)],
    window_s: Annotated[int, Query(ge=1, le=31 * 86_400)],
    group_by: Literal["none", "agent"] = "none",
    agent: Annotated[str | None, Query(max_length=256)] = None,
    min_runs: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> RunStates:
    """Runs still running or become incomplete, for ``agentwatch alerts run`` (``alerts.run_states``)."""
    values = run_state_values(
        store,
        project,
        metric,
        now=now,
        window_s=window_s,
        idle_timeout_s=settings.run_idle_timeout_s,
        group_by=group_by,
        agent=agent,
        min_runs=min_runs,
    )
    return RunStates(metric=metric, values=values)


@router.get("/scope-series", response_model=TimeSeries)
def scope_series(
    store: StoreDep,
    project: ProjectDep,
    freshness: FreshnessDep,
    metric: Literal["cost_usd", "runs", "cost_per_run", "steps_per_run", "max_run_cost_usd", "max_steps"],
    start: Annotated[float, Query(ge=0, le=MAX_EPOCH_S)],
    end: Annotated[float, Query(ge=0, le=MAX_EPOCH_S)],
    step_s: Annotated[int, Query(ge=1, le=31 * 86_400)],
    group_by: Literal["user", "session", "version"],
    agent: Annotated[str | None, Query(max_length=256)] = None,
) -> TimeSeries:
    """Per-user, per-session or per-version series, for ``agentwatch alerts run`` (``alerts.run_scopes``)."""
    if (end - start) / step_s > MAX_BUCKETS:
        raise HTTPException(422, f"at most {MAX_BUCKETS} buckets of step_s from start to end")
    until = freshness.state().complete_until
    return run_scope_series(
        store, project, metric, start, max(start, end), step_s, group_by, agent, complete_until=until
    )


@router.get("/deliveries", response_model=list[DeliveryOut])
def list_deliveries(
    store: StoreDep,
    project: ProjectDep,
    alert_id: Annotated[str, Query(max_length=64)] = "",
    limit: Annotated[int, Query(ge=1, le=MAX_ALERTS)] = 200,
) -> list[DeliveryOut]:
    rows = store.query(alerts_sql.LIST_DELIVERIES, {"project": project, "alert_id": alert_id, "limit": limit})
    return [DeliveryOut(**row) for row in rows]


@router.post("", status_code=201)
def save_alerts(
    store: StoreDep, project: ProjectDep, body: Annotated[list[AlertIn], Field(max_length=MAX_ALERTS)]
) -> dict[str, int]:
    for i, item in enumerate(body):
        for name in ("value", "baseline", "threshold", "peak"):
            figure = getattr(item, name)
            if figure is not None and not math.isfinite(figure):
                raise HTTPException(422, f"body[{i}].{name}: must be a finite number or null")
    rows = [alert_row(Alert(project=project, **item.model_dump())) for item in body]
    store.insert_rows("alerts", alerts_sql.ALERT_COLUMNS, rows)
    return {"stored": len(rows)}


@router.post("/deliveries", status_code=201)
def save_deliveries(
    store: StoreDep, project: ProjectDep, body: Annotated[list[DeliveryIn], Field(max_length=MAX_ALERTS)]
) -> dict[str, int]:
    rows = [delivery_row(Delivery(project=project, **d.model_dump())) for d in body]
    store.insert_rows("alert_deliveries", alerts_sql.DELIVERY_COLUMNS, rows)
    return {"stored": len(rows)}


def _settings(request: Request) -> AlertsSettings:
    """The alerts' settings, as the plugin brought them into the app (``collector.plugins``)."""
    found = collector_state(request.app).plugin_settings["alerts"]
    assert isinstance(found, AlertsSettings)
    return found


def _rules_file(path: str) -> RulesConfig:
    file = Path(path) if path else None
    stamp = os.stat(file).st_mtime_ns if file is not None and file.exists() else 0
    return _cached_rules(path, stamp)


@functools.lru_cache(maxsize=8)
def _cached_rules(path: str, stamp: int) -> RulesConfig:
    """Parsed once per file version (the mtime is part of the key)."""
    return load_rules(path or None)
