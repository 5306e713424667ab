"""How an error that escapes a route becomes an HTTP answer: one place, ``install(app)``.

- a ``CollectorError`` (``collector.errors``) answers its ``status`` with its ``answer`` and
  ``Retry-After`` from its ``retry_after``; one whose status is 500 has none of its own (a
  bug, not a refusal) and goes on as any other exception: logged, answered 500. An answer
  that says less than the message (``StoreUnavailable``'s names no address of the store)
  leaves the message to the log, at debug: the components log the store's state as they meet it;
- on ``POST /v1/traces`` every error, the framework's included (401 and 403 from ``authorize``,
  503 from the capacity check, 404, 405, 408, 422, 500), is an OTLP ``google.rpc.Status`` in
  the request's encoding (``collector.ingest.otlp.status``): OTLP exporters read that body;
- elsewhere ``{"detail": ...}`` as FastAPI answers, and 422's ``detail`` lists the bad fields
  without echoing the input (it may not be JSON-encodable).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from fastapi import FastAPI, Request, Response
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from starlette.exceptions import HTTPException

from agentwatch_platform.collector.errors import CollectorError
from agentwatch_platform.collector.ingest.otlp.status import error_response, is_otlp

log = logging.getLogger(__name__)


def install(app: FastAPI) -> None:
    app.add_exception_handler(CollectorError, _collector_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(Exception, _internal_error)  # after the log, in ServerErrorMiddleware


def _otlp(
    request: Request,
    status: int,
    message: str,
    *,
    retry_after: float | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    content_type = request.headers.get("content-type", "")
    return error_response(status, message, content_type, retry_after=retry_after, headers=headers)


async def _collector_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, CollectorError)
    if exc.status == 500:
        raise exc
    if exc.answer != exc.message:  # the client is told less (a store's address); the log keeps it
        log.debug("%s %s answered %d: %s", request.method, request.url.path, exc.status, exc.message)
    if is_otlp(request.url.path):
        return _otlp(request, exc.status, exc.answer, retry_after=exc.retry_after)
    headers = {"Retry-After": str(max(1, round(exc.retry_after)))} if exc.retry_after else None
    return JSONResponse({"detail": exc.answer}, status_code=exc.status, headers=headers)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if is_otlp(request.url.path):
        return _otlp(request, exc.status_code, str(exc.detail), headers=exc.headers)
    return await http_exception_handler(request, exc)


async def _validation_error(request: Request, exc: Exception) -> Response:
    """422 naming each bad field; the offending input is not echoed."""
    assert isinstance(exc, RequestValidationError)
    detail = [
        {"loc": list(err.get("loc", ())), "msg": err.get("msg", ""), "type": err.get("type", "")}
        for err in exc.errors()
    ]
    if is_otlp(request.url.path):
        return _otlp(request, 422, "; ".join(f"{'.'.join(map(str, d['loc']))}: {d['msg']}" for d in detail))
    return JSONResponse({"detail": detail}, status_code=422)


async def _internal_error(request: Request, exc: Exception) -> Response:
    """A bug: Starlette logs it after this answer; the client learns nothing of its insides."""
    if is_otlp(request.url.path):
        return _otlp(request, 500, "internal error in the collector; see its log")
    return PlainTextResponse("Internal Server Error", status_code=500)
