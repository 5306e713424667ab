"""Every HTTP router of the collector, one per resource, in the order the app includes them.

``create_app`` includes these, then each plugin's routers (the alerts'); every route's scope is
declared in ``collector.auth.scopes.ROUTE_SCOPES``.
"""

from __future__ import annotations

from fastapi import APIRouter

from agentwatch_platform.collector.api import admin, analytics, engines, health, runs, spans, users, versions
from agentwatch_platform.collector.ingest.otlp import http as otlp_http

ROUTERS: tuple[APIRouter, ...] = (
    otlp_http.router,  # POST /v1/traces
    health.router,  # /health, /ready, /metrics, /api/ingest
    admin.router,  # /api/admin/...: keys, engines, reprice, audit
    admin.legacy_router,  # /admin/keys...: old paths
    runs.router,  # /api/runs..., /api/filters
    analytics.router,  # /api/overview, /api/timeseries, /api/cost, /api/whatif
    engines.router,  # /api/engines, /api/engine/metrics
    spans.router,  # /api/spans, /api/spans/groups: the span explorer
    versions.router,  # /api/versions, /api/versions/compare
    users.router,  # /api/users, /api/sessions, /api/sessions/{session_id}
)
