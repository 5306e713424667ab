"""``POST /v1/traces``: OTLP/HTTP as the specification says.

Protobuf or JSON bodies, optionally gzip; 200 with ``ExportTraceServiceResponse`` (and
``partial_success`` for rejected spans); 400 with a message for a malformed body, 413 over a
limit, 415 for another content type, 429/503 with ``Retry-After`` under back-pressure. Every
error body, those of the key and capacity checks around the route included, is a
``google.rpc.Status`` encoded like the request, as the specification asks
(``collector.ingest.otlp.status``; ``collector.api.errors`` for the errors raised outside).
"""

from __future__ import annotations

import logging

from fastapi import APIRouter, Depends, Request, Response
from starlette.exceptions import HTTPException

from agentwatch_platform.collector.api.deps import ProjectDep
from agentwatch_platform.collector.auth.caller import principal
from agentwatch_platform.collector.errors import CollectorError
from agentwatch_platform.collector.ingest.otlp.decode import response_body
from agentwatch_platform.collector.ingest.otlp.errors import PayloadTooLarge, UnsupportedMediaType
from agentwatch_platform.collector.ingest.otlp.status import CONTENT_TYPES, TRACES_PATH, error_response, media_format
from agentwatch_platform.collector.ingest.pipeline import Ingestor
from agentwatch_platform.collector.state import collector_state

log = logging.getLogger(__name__)

router = APIRouter(tags=["otlp"])


def _format(request: Request) -> str:
    content_type = request.headers.get("content-type", "")
    fmt = media_format(content_type)
    if fmt is None:
        media = content_type.split(";")[0].strip().lower()
        raise UnsupportedMediaType(
            f"Content-Type {media or '(none)'!r} is not supported; send application/x-protobuf or application/json"
        )
    return fmt


def _ingestor(request: Request) -> Ingestor:
    return collector_state(request.app).ingestor


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


@router.post(TRACES_PATH, dependencies=[Depends(capacity)])
async def export_traces(request: Request, project: ProjectDep) -> Response:
    ingestor = _ingestor(request)
    metrics = ingestor.metrics
    try:
        fmt = _format(request)
        rate_key = (await principal(request)).rate_key
        collector_state(request.app).rate_limiter.check(rate_key)
        body = await _read_body(request, ingestor.settings.max_body_bytes)
        converted = await ingestor.export(project, body, fmt, encoding=request.headers.get("content-encoding", ""))
    except CollectorError as exc:
        if exc.status == 500 or isinstance(exc, HTTPException):
            raise  # a bug (logged, 500) or a stalled body (408, connection closed): collector.api.errors answers
        metrics.on_request("http", exc.status, 0, 0)
        if exc.status >= 500:
            log.warning("export refused (%d): %s", exc.status, exc.answer)
        return error_response(
            exc.status, exc.answer, request.headers.get("content-type", ""), retry_after=exc.retry_after
        )
    spans = converted.spans + converted.rejected
    collector_state(request.app).rate_limiter.spend(rate_key, spans)
    metrics.on_request("http", 200, spans, converted.rejected, project=project)
    return Response(response_body(converted, fmt), media_type=CONTENT_TYPES[fmt])
