"""How an error that escapes a route becomes an HTTP answer: one place, ``install(app)``.

- a ``CollectorError`` (``collector.errors``) answers its ``status`` with its ``answer`` and
  ``Retry-After`` from its ``retry_after``; one whose status is 500 has none of its own (a
  bug, not a refusal) and goes on as any other exception: logged, answered 500;
- 422's ``detail`` lists the bad fields without echoing the input (it may not be JSON-encodable).
"""

from __future__ import annotations

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from agentwatch_platform.collector.errors import CollectorError


def install(app: FastAPI) -> None:
    app.add_exception_handler(CollectorError, _collector_error)
    app.add_exception_handler(RequestValidationError, _validation_error)


async def _collector_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, CollectorError)
    if exc.status == 500:
        raise exc
    headers = {"Retry-After": str(max(1, round(exc.retry_after)))} if exc.retry_after else None
    return JSONResponse({"detail": exc.answer}, status_code=exc.status, headers=headers)


async def _validation_error(request: Request, exc: Exception) -> Response:
    """422 naming each bad field; the offending input is not echoed."""
    assert isinstance(exc, RequestValidationError)
    detail = [
        {"loc": list(err.get("loc", ())), "msg": err.get("msg", ""), "type": err.get("type", "")}
        for err in exc.errors()
    ]
    return JSONResponse({"detail": detail}, status_code=422)
