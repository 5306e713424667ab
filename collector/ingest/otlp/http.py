"""``POST /v1/traces``: OTLP/HTTP as the specification says.

Protobuf or JSON bodies, optionally gzip; 200 with ``ExportTraceServiceResponse`` (and
``partial_success`` for rejected spans); 400 with a message for a malformed body, 413 over a
limit, 415 for another content type, 429/503 with ``Retry-After`` under back-pressure. Error
bodies are a ``google.rpc.Status`` encoded like the request, as the specification asks.
"""

from __future__ import annotations

import json
import logging
import math

from fastapi import APIRouter, Depends, Request, Response
from google.rpc import status_pb2

from agentwatch_platform.collector.api.deps import ProjectDep
from agentwatch_platform.collector.auth.caller import principal
from agentwatch_platform.collector.ingest.otlp.decode import JSON, PROTOBUF, response_body
from agentwatch_platform.collector.ingest.otlp.errors import (
    IngestError,
    PayloadTooLarge,
    UnsupportedMediaType,
)
from agentwatch_platform.collector.ingest.pipeline import Ingestor

log = logging.getLogger(__name__)

router = APIRouter(tags=["otlp"])

_MEDIA = {"application/x-protobuf": PROTOBUF, "application/protobuf": PROTOBUF, "application/json": JSON}
_CONTENT_TYPES = {PROTOBUF: "application/x-protobuf", JSON: "application/json"}


def _format(request: Request) -> str:
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    fmt = _MEDIA.get(media)
    if fmt is None:
        raise UnsupportedMediaType(
            f"Content-Type {media or '(none)'!r} is not supported; send application/x-protobuf or application/json"
        )
    return fmt


def _ingestor(request: Request) -> Ingestor:
    return request.app.state.ingestor


async def capacity(request: Request) -> None:
    """Back-pressure before anything is read: 503 + Retry-After when the spool cannot take more.
    (Async: a plain ``def`` dependency would cost every request a thread-pool hop.)"""
    _ingestor(request).check_capacity()


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(
            f"body of {declared} bytes exceeds the limit of {limit} bytes (AGENTWATCH_MAX_BODY_BYTES)"
        )
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"body exceeds the limit of {limit} bytes (AGENTWATCH_MAX_BODY_BYTES)")
        chunks.append(chunk)
    return b"".join(chunks)


def error_response(exc: IngestError, fmt: str) -> Response:
    """The spec's error body: ``google.rpc.Status`` in the request's encoding."""
    code = {400: 3, 401: 16, 413: 8, 415: 3, 429: 8, 503: 14}.get(exc.status, 2)
    if fmt == PROTOBUF:
        body = status_pb2.Status(code=code, message=exc.message).SerializeToString()
    else:
        body = json.dumps({"code": code, "message": exc.message}).encode()
    headers = {"Retry-After": str(max(1, math.ceil(exc.retry_after)))} if exc.retry_after else None
    return Response(body, status_code=exc.status, media_type=_CONTENT_TYPES[fmt], headers=headers)


@router.post("/v1/traces", dependencies=[Depends(capacity)])
async def export_traces(request: Request, project: ProjectDep) -> Response:
    ingestor = _ingestor(request)
    metrics = ingestor.metrics
    fmt = JSON
    try:
        fmt = _format(request)
        rate_key = (await principal(request)).rate_key
        request.app.state.rate_limiter.check(rate_key)
        body = await _read_body(request, ingestor.settings.max_body_bytes)
        converted = await ingestor.export(project, body, fmt, encoding=request.headers.get("content-encoding", ""))
    except IngestError as exc:
        metrics.on_request("http", exc.status, 0, 0)
        if exc.status >= 500:
            log.warning("export refused (%d): %s", exc.status, exc.message)
        return error_response(exc, fmt)
    spans = converted.spans + converted.rejected
    request.app.state.rate_limiter.spend(rate_key, spans)
    metrics.on_request("http", 200, spans, converted.rejected, project=project)
    return Response(response_body(converted, fmt), media_type=_CONTENT_TYPES[fmt])
