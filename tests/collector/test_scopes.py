"""Key scopes: every endpoint of the app (enumerated from its routes and its OpenAPI schema)
refuses keys without its scope, over HTTP and gRPC, and none is left without a declared scope.
A real collector (uvicorn on 127.0.0.1, gRPC on), keys of each single scope."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from google.rpc import status_pb2

from agentwatch_api.handshake import read_admin_token
from agentwatch_platform.alerts.plugin import PLUGIN as ALERTS
from agentwatch_platform.collector.auth.keys import KeyRing
from agentwatch_platform.collector.auth.scopes import (
    PUBLIC,
    ROUTE_SCOPES,
    SCOPES,
    RouteScopes,
    ScopeError,
    app_routes,
    parse_scopes,
)
from tests.collector.ingest_helpers import Running, agent_trace, free_port, serve, settings_for
from tests.support import local_http

METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
PROJECT = "scoped"
PATH_VALUES = {"trace_id": "0" * 32, "key_id": "0" * 12, "name": "no-such-engine", "session_id": "no-such-session"}


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Running, dict[str, str]]]:
    settings = settings_for(
        tmp_path_factory.mktemp("scopes") / "data", grpc_port=free_port(), rate_limit_spans_per_s=0.0
    )
    with serve(settings) as running:
        ring: KeyRing = running.app.state.keyring
        keys = {scope: ring.create(PROJECT, name=f"only {scope}", scopes=(scope,)).key for scope in SCOPES}
        yield running, keys


def _routes(running: Running) -> list[tuple[str, str]]:
    routes = app_routes(running.app.routes)
    assert len(routes) >= 30, routes  # the enumeration reaches into included routers
    return routes


def _url(running: Running, path: str) -> str:
    return running.url + re.sub(r"\{(\w+)\}", lambda m: PATH_VALUES[m.group(1)], path)


def _call(running: Running, method: str, path: str, key: str | None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    body: dict[str, Any] = (
        {"content": b"", "headers": {**headers, "Content-Type": "application/x-protobuf"}}
        if path == "/v1/traces"
        else {"json": {}, "headers": headers}
    )
    if method in ("GET", "DELETE"):
        body = {"headers": headers}
    return local_http.request(method, _url(running, path), timeout=30, **body)


def test_every_route_declares_its_scope_and_the_openapi_lists_no_other(
    collector: tuple[Running, dict[str, str]],
) -> None:
    running, _ = collector
    table = running.app.state.route_scopes.table
    assert running.app.state.route_scopes.undeclared(running.app.routes) == []
    schema = local_http.get(running.url + "/openapi.json").json()
    documented = {(m.upper(), p) for p, ops in schema["paths"].items() for m in ops}
    assert documented <= set(_routes(running)), documented - set(_routes(running))
    assert documented <= set(table)
    assert set(table) == set(_routes(running)), "the scopes name routes the app does not have"


def test_a_plugin_brings_the_scopes_of_its_routes_and_cannot_redeclare_the_collectors() -> None:
    """The collector's own table names no alerts route: the alerts plugin declares them."""
    assert not any(path.startswith("/api/alerts") for _, path in ROUTE_SCOPES)
    joined = RouteScopes.joined([(ALERTS.name, ALERTS.scopes)])
    assert joined.scope("GET", "/api/alerts/rules") == ("/api/alerts/rules", "read")
    assert joined.scope("POST", "/api/alerts") == ("/api/alerts", "admin")
    with pytest.raises(ScopeError, match="already has one"):
        RouteScopes.joined([("greedy", {("GET", "/api/runs"): PUBLIC})])
    with pytest.raises(ScopeError, match="'everything'"):
        RouteScopes.joined([("odd", {("GET", "/api/odd"): "everything"})])


@pytest.mark.slow  # 43 s under load 13; make quick leaves it out, make test runs it
def test_each_endpoint_refuses_the_other_scopes_and_admits_its_own(collector: tuple[Running, dict[str, str]]) -> None:
    running, keys = collector
    wrong: list[str] = []
    for method, path in _routes(running):
        needed = running.app.state.route_scopes.table[(method, path)]
        if needed == PUBLIC:
            continue
        for scope, key in keys.items():
            status = _call(running, method, path, key).status_code
            if (scope == needed) == (status in (401, 403)):
                wrong.append(f"{method} {path} needs {needed}; a {scope} key got {status}")
        if _call(running, method, path, None).status_code != 401:
            wrong.append(f"{method} {path}: no key is not 401")
    assert not wrong, "\n".join(wrong)


def test_a_key_with_several_scopes_has_each(collector: tuple[Running, dict[str, str]]) -> None:
    running, _ = collector
    both = running.app.state.keyring.create(PROJECT, scopes="read,admin").key
    headers = {"Authorization": f"Bearer {both}"}
    assert local_http.get(running.url + "/api/runs", headers=headers).status_code == 200
    assert local_http.get(running.url + "/api/admin/keys", headers=headers).status_code == 200
    refused = local_http.post(
        running.url + "/v1/traces", content=b"", headers={**headers, "Content-Type": "application/x-protobuf"}
    )
    assert refused.status_code == 403 and "ingest" in status_pb2.Status.FromString(refused.content).message


def test_grpc_export_needs_the_ingest_scope(collector: tuple[Running, dict[str, str]]) -> None:
    running, keys = collector
    body = agent_trace(os.urandom(16)).SerializeToString()
    with grpc.insecure_channel(running.grpc) as channel:
        call = channel.unary_unary(METHOD)
        call(body, metadata=[("authorization", f"Bearer {keys['ingest']}")], timeout=30)
        for scope in ("read", "admin"):
            with pytest.raises(grpc.RpcError) as info:
                call(body, metadata=[("authorization", f"Bearer {keys[scope]}")], timeout=30)
            assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED
            assert "ingest" in (info.value.details() or "")


def test_an_admin_key_manages_its_own_project_only(collector: tuple[Running, dict[str, str]]) -> None:
    running, keys = collector
    admin = {"Authorization": f"Bearer {keys['admin']}"}
    other = running.app.state.keyring.create("someone-else", scopes="ingest")
    created = local_http.post(running.url + "/api/admin/keys", json={"scopes": ["read"], "name": "dash"}, headers=admin)
    assert created.status_code == 200 and created.json()["project"] == PROJECT and created.json()["scopes"] == ["read"]
    assert (
        local_http.post(running.url + "/api/admin/keys", json={"project": "someone-else"}, headers=admin).status_code
        == 403
    )
    assert (
        local_http.post(running.url + f"/api/admin/keys/{other.info.key_id}/revoke", headers=admin).status_code == 404
    )
    listed = local_http.get(running.url + "/api/admin/keys", headers=admin).json()
    assert {k["project"] for k in listed} == {PROJECT}
    assert running.app.state.keyring.grant(other.key) is not None


def test_the_admin_token_manages_every_project_and_actions_are_audited(
    collector: tuple[Running, dict[str, str]],
) -> None:
    running, keys = collector
    token = read_admin_token(Path(running.settings.data_dir))
    operator = {"Authorization": f"Bearer {token}"}
    made = local_http.post(
        running.url + "/api/admin/keys", json={"project": "ops-made", "scopes": ["ingest"]}, headers=operator
    )
    assert made.status_code == 200
    assert (
        local_http.post(running.url + "/api/admin/keys", json={"scopes": ["ingest"]}, headers=operator).status_code
        == 422
    )  # names a project
    assert (
        local_http.post(running.url + f"/api/admin/keys/{made.json()['key_id']}/revoke", headers=operator).status_code
        == 200
    )
    audit = local_http.get(running.url + "/api/admin/audit", headers=operator).json()
    actions = [(a["action"], a["target"], a["actor"]) for a in audit if a["project"] == "ops-made"]
    assert ("key.create", made.json()["key_id"], "operator") in actions and (
        "key.revoke",
        made.json()["key_id"],
        "operator",
    ) in actions
    assert all(made.json()["key"] not in a["detail"] for a in audit)
    mine = local_http.get(running.url + "/api/admin/audit", headers={"Authorization": f"Bearer {keys['admin']}"}).json()
    assert all(a["project"] == PROJECT for a in mine)


def test_legacy_keys_keep_ingest_and_read_and_are_listed_as_such(collector: tuple[Running, dict[str, str]]) -> None:
    running, _ = collector
    store = running.app.state.store
    store.command(
        "INSERT INTO api_keys (project, key_id, salt, key_hash, name, created_at) VALUES "
        "({p:String}, 'abcdef012345', 's', 'h', 'pre-scopes', now64(3))",
        {"p": PROJECT},
    )
    [old] = [k for k in running.app.state.keyring.list() if k.key_id == "abcdef012345"]
    assert old.legacy and old.scopes == ("ingest", "read")
    default = running.app.state.keyring.create(PROJECT)  # the Python API's default: the pre-scope rights
    assert default.info.scopes == ("ingest", "read") and not default.info.legacy


def test_scope_lists_are_validated() -> None:
    assert parse_scopes("read, ingest") == ("ingest", "read")
    for bad in ("", "write", "ingest,root"):
        with pytest.raises(ValueError, match="ingest, read, admin"):
            parse_scopes(bad)


def test_the_dashboard_client_needs_only_read_and_the_sdk_only_ingest(
    collector: tuple[Running, dict[str, str]],
) -> None:
    """Every call the dashboard makes works with a read-only key; an ingest-only key exports spans."""
    from agentwatch_api.client import CollectorClient, NotFound

    running, keys = collector
    trace_id = os.urandom(16)
    exported = local_http.post(
        running.url + "/v1/traces",
        content=agent_trace(trace_id).SerializeToString(),
        headers={"Authorization": f"Bearer {keys['ingest']}", "Content-Type": "application/x-protobuf"},
    )
    assert exported.status_code == 200
    end = time.time() + 60
    start = end - 86_400
    with CollectorClient(running.url, keys["read"]) as client:
        client.runs(start=start, end=end), client.overview(start=start, end=end), client.cost(start=start, end=end)
        client.timeseries("cost_usd", start=start, end=end, step_s=3600), client.engines(), client.filters()
        client.engine_metrics("none", start=start, end=end), client.alerts(), client.alert_rules(), client.ingest()
        with pytest.raises(NotFound):
            client.run("f" * 32)


def test_the_client_tells_whether_a_key_may_ingest(collector: tuple[Running, dict[str, str]]) -> None:
    """How the demo checks a saved ingest key (an empty OTLP request); a range's end left out is the collector's now."""
    from agentwatch_api.client import AuthError, CollectorClient

    running, keys = collector
    with CollectorClient(running.url, keys["ingest"]) as client:
        client.check_ingest()
    with CollectorClient(running.url, keys["read"]) as client:
        with pytest.raises(AuthError, match="/v1/traces: HTTP 403: this key lacks the 'ingest' scope"):
            client.check_ingest()
        start = time.time() - 86_400
        assert client.runs(start=start).total == client.runs(start=start, end=time.time() + 1).total
