"""The OpenAPI schema documents every answer the API gives, errors included.

FastAPI documents what a route declares; the answers that come from the app around the routes
are added here, once, from the same tables that produce them:

- 401 (no or unknown key) and 403 (the key lacks the scope) on every operation that is not
  public in ``app.state.route_scopes`` (``collector.auth.scopes``), 400 (not JSON) and 408 (``collector.api.body_timeout``)
  on every operation with a body, 503 when the store is down: ``{"detail": str}``;
- 422's ``detail`` is FastAPI's list of validation errors, or a sentence when a route checks a
  value itself (``trace_id must be 32 hex characters``);
- ``POST /v1/traces`` answers OTLP's ``google.rpc.Status`` (JSON or protobuf, as the request
  was) for every error: 400, 401, 403, 408, 413, 415, 429 and 503 here, with ``Retry-After`` on
  429 and 503 (``collector.api.errors``, ``collector.ingest.otlp.status``).

Schemathesis checks the live API against this schema (tests/reliability/test_api_schema.py).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from agentwatch_platform.collector.auth.scopes import PUBLIC, RouteScopes
from agentwatch_platform.collector.state import collector_state

_ERROR = {"type": "object", "required": ["detail"], "properties": {"detail": {"type": "string"}}, "title": "Error"}
_STATUS = {  # google.rpc.Status in the proto3 JSON mapping; every field is always present
    "type": "object",
    "required": ["code", "message", "details"],
    "properties": {
        "code": {"type": "integer", "description": "the google.rpc.Code of the HTTP status"},
        "message": {"type": "string", "description": "what was wrong, for the developer"},
        "details": {"type": "array", "items": {"type": "object"}, "description": "google.protobuf.Any messages"},
    },
    "title": "Status",
}
_RETRY_AFTER = {"Retry-After": {"description": "seconds to wait before retrying", "schema": {"type": "string"}}}
_WHY = {
    400: "the body is not valid JSON",
    401: "no API key, or one that is unknown or revoked",
    403: "the key lacks the scope this endpoint needs",
    408: "the request body stopped arriving (AGENTWATCH_BODY_READ_TIMEOUT_S)",
    503: "the store is unavailable; retry",
}
_OTLP_WHY = {
    400: "the body is not an OTLP export request",
    401: _WHY[401],
    403: _WHY[403],
    408: _WHY[408],
    413: "the body or its span count is over the limit",
    415: "send application/x-protobuf or application/json",
    429: "over the rate limit or the queue is full; retry after Retry-After",
    503: "the collector cannot accept spans now; retry",
}
_OTLP_PATH = "/v1/traces"


def install(app: FastAPI) -> None:
    """Make ``app.openapi()`` return the documented schema (built once, as FastAPI does)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, routes=app.routes, description=app.description)
            document_errors(schema, collector_state(app).route_scopes)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def document_errors(schema: dict[str, Any], scopes: RouteScopes) -> None:
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components["Error"] = _ERROR
    components["Status"] = _STATUS
    validation = components.get("HTTPValidationError")
    if validation is not None:
        listed = validation["properties"]["detail"]
        validation["properties"]["detail"] = {"anyOf": [listed, {"type": "string"}], "title": "Detail"}
    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            if path == _OTLP_PATH:
                _document_otlp(responses)
                continue
            statuses = [503]
            if scopes.table.get((method.upper(), path)) != PUBLIC:
                statuses += [401, 403]
            if "requestBody" in operation:
                statuses += [400, 408]
            for status in statuses:
                answer = {
                    "description": _WHY[status],
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
                }
                if status == 503:
                    answer["headers"] = _RETRY_AFTER
                responses.setdefault(str(status), answer)


def _document_otlp(responses: dict[str, Any]) -> None:
    content = {
        "application/json": {"schema": {"$ref": "#/components/schemas/Status"}},
        "application/x-protobuf": {"schema": {}},
    }
    ok = responses.setdefault("200", {"description": "ExportTraceServiceResponse"})
    ok["content"] = {"application/json": {"schema": {"type": "object"}}, "application/x-protobuf": {"schema": {}}}
    for status, why in _OTLP_WHY.items():
        answer: dict[str, Any] = {"description": why, "content": content}
        if status in (429, 503):
            answer["headers"] = _RETRY_AFTER
        responses.setdefault(str(status), answer)
