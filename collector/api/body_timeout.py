"""A request body that stops arriving is answered 408 and its connection closed.

uvicorn bounds the time between requests on a kept-alive connection, not the time a body
takes to arrive: a client that sends headers and half a body, then nothing, would hold its
request (and the memory read so far) forever. ``BodyReadTimeout`` wraps every HTTP request's
``receive``: when no part of the body arrives for ``timeout_s``
(``AGENTWATCH_BODY_READ_TIMEOUT_S``), the route's read fails, the client gets
``408 Request Timeout`` with ``Connection: close``, and the server drops the connection (the
body was not read to its end, so it cannot be kept alive). Other requests never wait on it:
each connection is its own task on the event loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentwatch_platform.collector.errors import CollectorError

log = logging.getLogger(__name__)


class BodyStalled(HTTPException, CollectorError):
    """No part of the request body arrived within the timeout: an ``HTTPException`` (408), so a
    route that reads its body through FastAPI answers it as such; the middleware answers it
    when it escapes a route."""

    status = 408

    def __init__(self, reason: str) -> None:
        self.message = f"request body timed out: {reason} (AGENTWATCH_BODY_READ_TIMEOUT_S)"
        super().__init__(408, self.message, headers={"Connection": "close"})


class BodyReadTimeout:
    """Pure ASGI middleware; ``timeout_s`` <= 0 disables it."""

    def __init__(self, app: ASGIApp, *, timeout_s: float) -> None:
        self.app = app
        self.timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.timeout_s <= 0:
            await self.app(scope, receive, send)
            return
        state = {"started": False, "body_done": False}

        async def timed_receive() -> Message:
            if state["body_done"]:
                return await receive()  # after the body: waiting for a disconnect is the app's business
            try:
                async with asyncio.timeout(self.timeout_s):  # no task per receive, unlike wait_for
                    message = await receive()
            except TimeoutError:
                raise BodyStalled(f"no request body data for {self.timeout_s:g} s") from None
            if message["type"] != "http.request" or not message.get("more_body", False):
                state["body_done"] = True
            return message

        async def tracked_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        try:
            await self.app(scope, timed_receive, tracked_send)
        except BodyStalled as exc:
            log.info("%s %s: %s; answered 408", scope.get("method"), scope.get("path"), exc.detail)
            if not state["started"]:
                await _send_408(send, exc.detail)


async def _send_408(send: Send, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers: list[Any] = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": 408, "headers": headers})
    await send({"type": "http.response.body", "body": body})
