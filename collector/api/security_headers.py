"""Response headers that keep a browser from mis-using what the collector answers.

The query API returns captured prompts and completions; a browser or a proxy in between must
not keep them, guess a type for them or show them inside another site's page. Every response
gets ``X-Content-Type-Options: nosniff``, ``Referrer-Policy: no-referrer``,
``X-Frame-Options: DENY`` and a content security policy that loads nothing and frames nothing
(the interactive API docs at ``/docs`` and ``/redoc`` load FastAPI's scripts, so there only
framing is refused); responses under ``/api`` and ``/v1`` also get ``Cache-Control: no-store``.
A header a route set itself is left as it is.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

ALWAYS: tuple[tuple[bytes, bytes], ...] = (
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
)
CSP = (b"content-security-policy", b"default-src 'none'; frame-ancestors 'none'")
DOCS_CSP = (b"content-security-policy", b"frame-ancestors 'none'")
NO_STORE = (b"cache-control", b"no-store")
_DOCS = ("/docs", "/redoc")
_PRIVATE = ("/api/", "/v1/")


def headers_for(path: str) -> tuple[tuple[bytes, bytes], ...]:
    """The headers a response to ``path`` gets."""
    extra = [DOCS_CSP if path.startswith(_DOCS) else CSP]
    if path.startswith(_PRIVATE):
        extra.append(NO_STORE)
    return (*ALWAYS, *extra)


class SecurityHeaders:
    """Pure ASGI middleware: adds ``headers_for(path)`` to every HTTP response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        added = headers_for(scope.get("path", ""))

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                headers.extend(header for header in added if header[0] not in present)
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)
