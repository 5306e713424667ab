"""OTLP/gRPC ``TraceService/Export`` on ``grpc_port``, through the same pipeline as HTTP.

Many exporters (vLLM's among them) default to gRPC. The server runs on the collector's
event loop (``grpc.aio``) and receives the raw request bytes, so the body is parsed once,
by the same code as an HTTP protobuf body, and spooled as it came. gRPC handles message
compression itself; the key comes in the ``authorization`` metadata and needs the ``ingest``
scope (``collector.auth.scopes``), as ``POST /v1/traces`` does.
"""

from __future__ import annotations

import logging
from typing import Any

import grpc
from fastapi import FastAPI

from agentwatch_platform.collector.auth.caller import Principal, authenticate, token_of
from agentwatch_platform.collector.auth.scopes import ROUTE_SCOPES
from agentwatch_platform.collector.errors import CollectorError
from agentwatch_platform.collector.ingest.otlp.decode import PROTOBUF, response_message
from agentwatch_platform.collector.ingest.otlp.errors import Forbidden
from agentwatch_platform.collector.state import collector_state

log = logging.getLogger(__name__)

SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
_CODES = {
    400: grpc.StatusCode.INVALID_ARGUMENT,
    401: grpc.StatusCode.UNAUTHENTICATED,
    403: grpc.StatusCode.PERMISSION_DENIED,
    413: grpc.StatusCode.INVALID_ARGUMENT,
    415: grpc.StatusCode.INVALID_ARGUMENT,
    429: grpc.StatusCode.UNAVAILABLE,  # retryable for OTLP exporters
    503: grpc.StatusCode.UNAVAILABLE,
}


EXPORT_SCOPE = ROUTE_SCOPES[("POST", "/v1/traces")]  # the same right as OTLP/HTTP: ingest


class GrpcServer:
    """Async context manager: serves while entered, stops with a short grace period."""

    def __init__(self, app: FastAPI, *, host: str, port: int) -> None:
        self.app = app
        self.address = f"{host}:{port}"
        max_bytes = collector_state(app).settings.max_body_bytes
        self._server = grpc.aio.server(
            options=[("grpc.max_receive_message_length", max_bytes), ("grpc.so_reuseport", 0)]
        )
        handler = grpc.unary_unary_rpc_method_handler(self._export, request_deserializer=None, response_serializer=None)
        self._server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, {"Export": handler}),))

    async def __aenter__(self) -> GrpcServer:
        try:
            self._server.add_insecure_port(self.address)
        except RuntimeError as exc:
            raise OSError(
                f"cannot listen for OTLP/gRPC on {self.address}: {exc}; set --grpc-port (0 disables)"
            ) from exc
        await self._server.start()
        log.info("OTLP/gRPC listening on %s", self.address)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._server.stop(grace=2.0)

    async def _export(self, body: bytes, context: grpc.aio.ServicerContext) -> bytes:
        state = collector_state(self.app)
        metrics = state.metrics
        try:
            caller = await self._caller(context)
            project, rate_key = caller.project or "", caller.rate_key
            state.rate_limiter.check(rate_key)
            state.ingestor.check_capacity()
            converted = await state.ingestor.export(project, body, PROTOBUF)
        except CollectorError as exc:  # the store away while a key is verified is a StoreUnavailable
            metrics.on_request("grpc", exc.status, 0, 0)
            await context.abort(_CODES.get(exc.status, grpc.StatusCode.INTERNAL), exc.answer)
            raise AssertionError("unreachable") from None  # context.abort raises
        spans = converted.spans + converted.rejected
        state.rate_limiter.spend(rate_key, spans)
        metrics.on_request("grpc", 200, spans, converted.rejected, project=project)
        return response_message(converted).SerializeToString()

    async def _caller(self, context: Any) -> Principal:
        """The caller named by the ``authorization`` metadata, as ``POST /v1/traces`` sees it."""
        metadata = {k.lower(): v for k, v in (context.invocation_metadata() or ())}
        caller = await authenticate(collector_state(self.app), token_of(metadata))  # NotAuthenticated: 401
        if caller.operator:
            raise Forbidden("the admin token names no project: export with a project key")
        if EXPORT_SCOPE not in caller.scopes:
            raise Forbidden(
                f"this key lacks the '{EXPORT_SCOPE}' scope needed to export spans; create one with 'agentwatch keys create --scope ingest'"
            )
        return caller
