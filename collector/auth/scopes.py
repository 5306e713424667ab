"""Who may call what: key scopes, and the one table that gives every endpoint its scope.

A project key carries one or more scopes, each a right in its own project:

- ``ingest``: write spans (OTLP over HTTP and gRPC) and feedback. What an agent ships with.
- ``read``: the query API (runs, overview, cost, engines; a plugin's reads: alerts history); what the
  dashboard uses.
- ``admin``: keys of its project, engine scrape targets, re-pricing, deleting data, the audit log; a
  plugin's writes (alert history from ``agentwatch alerts run``).

Scopes do not include each other: a key with ``admin`` alone cannot read runs; give a key
every scope its holder needs (``--scope read,admin``). The operator's admin token
(``<data dir>/admin.token``) holds every scope, over every project.

``ROUTE_SCOPES`` is the only place a collector endpoint's scope is written; a plugin brings the
scopes of its own routes (``collector.plugins.Plugin.scopes``), and ``create_app`` joins both in
one ``RouteScopes``, ``app.state.route_scopes``. ``authorize`` (``collector.auth.caller``), a
dependency of the whole app, looks the matched route up there before any route code runs. A
route missing from it is refused to everyone (403 naming this module), so a new endpoint is
closed until someone decides who may call it; ``tests/collector/test_scopes.py`` fails on it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from fastapi.routing import APIRoute

from agentwatch_platform.collector.errors import CollectorError

INGEST: Final = "ingest"
READ: Final = "read"
ADMIN: Final = "admin"
PUBLIC: Final = "public"  # no key: liveness, readiness, the collector's own /metrics
SCOPES: tuple[str, ...] = (INGEST, READ, ADMIN)
LEGACY_SCOPES: tuple[str, ...] = (INGEST, READ)  # a key created before scopes keeps these rights
CLI_DEFAULT_SCOPES: tuple[str, ...] = (INGEST,)  # ``agentwatch keys create`` without --scope
ADMIN_PREFIX = "/api/admin"

ROUTE_SCOPES: dict[tuple[str, str], str] = {
    # probes and the collector's own metrics
    ("GET", "/health"): PUBLIC,
    ("GET", "/ready"): PUBLIC,
    ("GET", "/metrics"): PUBLIC,
    # ingest
    ("POST", "/v1/traces"): INGEST,
    ("POST", "/api/runs/{trace_id}/feedback"): INGEST,
    # read
    ("GET", "/api/ingest"): READ,
    ("GET", "/api/runs"): READ,
    ("GET", "/api/runs/{trace_id}"): READ,
    ("GET", "/api/overview"): READ,
    ("GET", "/api/freshness"): READ,
    ("GET", "/api/timeseries"): READ,
    ("GET", "/api/timeseries/set"): READ,
    ("GET", "/api/cost"): READ,
    ("GET", "/api/whatif"): READ,
    ("GET", "/api/engines"): READ,
    ("GET", "/api/engine/metrics"): READ,
    ("GET", "/api/filters"): READ,
    ("GET", "/api/spans"): READ,
    ("GET", "/api/spans/groups"): READ,
    ("GET", "/api/versions"): READ,
    ("GET", "/api/versions/compare"): READ,
    ("GET", "/api/users"): READ,
    ("GET", "/api/sessions"): READ,
    ("GET", "/api/sessions/{session_id}"): READ,
    # admin, under ADMIN_PREFIX
    ("POST", "/api/admin/keys"): ADMIN,
    ("GET", "/api/admin/keys"): ADMIN,
    ("POST", "/api/admin/keys/{key_id}/revoke"): ADMIN,
    ("GET", "/api/admin/engines"): ADMIN,
    ("POST", "/api/admin/engines"): ADMIN,
    ("DELETE", "/api/admin/engines/{name}"): ADMIN,
    ("POST", "/api/admin/reprice"): ADMIN,
    ("POST", "/api/admin/delete"): ADMIN,
    ("GET", "/api/admin/audit"): ADMIN,
    # admin writes kept at their old paths for existing clients (aliases, see docs/keys.md)
    ("POST", "/admin/keys"): ADMIN,
    ("GET", "/admin/keys"): ADMIN,
    ("POST", "/admin/keys/{key_id}/revoke"): ADMIN,
    ("POST", "/api/engines"): ADMIN,
}


class ScopeError(CollectorError, ValueError):
    """A scope list names something that is not a scope."""


def parse_scopes(value: str | tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """``"ingest,read"`` (or a sequence) -> ``("ingest", "read")`` in canonical order; at least one."""
    names = [n.strip().lower() for n in (value.split(",") if isinstance(value, str) else value) if n.strip()]
    unknown = sorted(set(names) - set(SCOPES))
    if unknown or not names:
        raise ScopeError(f"invalid scopes {value!r}: use one or more of {', '.join(SCOPES)}, comma-separated")
    return tuple(s for s in SCOPES if s in names)


def format_scopes(scopes: tuple[str, ...]) -> str:
    return ",".join(scopes)


def _template(path: str) -> re.Pattern[str]:
    """``/api/runs/{trace_id}`` -> a regex matching what Starlette routes there (``{x}``: one segment)."""
    return re.compile("^" + re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(path)) + "$")


class RouteScopes:
    """The scope of every route of one app: the collector's ``ROUTE_SCOPES`` and its plugins' own."""

    def __init__(self, table: Mapping[tuple[str, str], str]) -> None:
        self.table = dict(table)
        self._patterns = [(method, _template(path), path) for method, path in self.table]

    @classmethod
    def joined(cls, plugins: Iterable[tuple[str, Mapping[tuple[str, str], str]]]) -> RouteScopes:
        """``ROUTE_SCOPES`` and each (plugin name, its scopes); a route declared twice, or a scope
        that is none, is refused: a plugin cannot widen who may call the collector's routes."""
        table = dict(ROUTE_SCOPES)
        for name, scopes in plugins:
            for route, scope in scopes.items():
                if route in table:
                    raise ScopeError(f"plugin {name!r} declares a scope for {route}, which already has one")
                if scope not in (*SCOPES, PUBLIC):
                    raise ScopeError(f"plugin {name!r} gives {route} the scope {scope!r}: use one of {SCOPES}")
                table[route] = scope
        return cls(table)

    def scope(self, method: str, path: str) -> tuple[str, str] | None:
        """(declared path, scope) of a request's method and concrete path; None when undeclared."""
        method = "GET" if method.upper() == "HEAD" else method.upper()
        if (scope := self.table.get((method, path))) is not None:  # a path without parameters: one look-up
            return path, scope
        for declared_method, pattern, declared in self._patterns:
            if declared_method == method and pattern.match(path):
                return declared, self.table[(declared_method, declared)]
        return None

    def undeclared(self, routes: Sequence[Any]) -> list[tuple[str, str]]:
        """(method, path) of every API route of ``routes`` with no scope here."""
        return [route for route in app_routes(routes) if route not in self.table]


def app_routes(routes: Sequence[Any]) -> list[tuple[str, str]]:
    """(method, full path) of every API route of an app, routers included at any depth."""
    try:
        from fastapi.routing import (
            iter_route_contexts,  # newer FastAPI keeps included routers nested
        )
    except ImportError:  # older FastAPI: routes are flattened into app.routes
        contexts = [(r, r.path) for r in routes]
    else:
        contexts = [(c.original_route, c.path) for c in iter_route_contexts(routes)]
    return sorted(
        {
            (m, str(path))
            for route, path in contexts
            if isinstance(route, APIRoute)
            for m in route.methods or ()
            if m != "HEAD"
        }
    )
