"""The response headers the collector sends (``collector.api.security_headers``), on the
dashboard's server too: its pages show prompts, costs and users, so a browser must not guess a
type for what it serves, send its URLs (a run's trace id, a user's id in the filters) to another
site, or show it framed inside another site's page.

Streamlit's page is a script that builds itself over a WebSocket and frames its own components
(same origin, ``srcdoc``), so framing is allowed for its own origin only and no script policy is
set: every response gets ``X-Content-Type-Options: nosniff``, ``Referrer-Policy: no-referrer``,
``X-Frame-Options: SAMEORIGIN`` and ``Content-Security-Policy: frame-ancestors 'self';
object-src 'none'; base-uri 'self'``. A header Streamlit set itself is left as it is.
"""

from __future__ import annotations

from typing import Any

HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"SAMEORIGIN"),
    (b"content-security-policy", b"frame-ancestors 'self'; object-src 'none'; base-uri 'self'"),
)


class SecurityHeaders:
    """Pure ASGI middleware: adds ``HEADERS`` to every HTTP response (a WebSocket passes as it is)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                headers.extend(header for header in HEADERS if header[0] not in present)
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def install() -> None:
    """Add ``SecurityHeaders`` to the middleware of the Starlette app Streamlit builds for
    ``streamlit run`` (Streamlit has no option for response headers): its factory of the stack is
    wrapped before the server starts. tests/dashboard/test_security_headers.py reads the headers a
    real ``agentwatch dashboard`` sends, so a Streamlit that builds its app otherwise is noticed."""
    from starlette.middleware import Middleware
    from streamlit.web.server.starlette import starlette_app

    original = starlette_app.create_streamlit_middleware
    if getattr(original, "agentwatch_headers", False):
        return

    def with_headers() -> list[Middleware]:
        return [Middleware(SecurityHeaders), *original()]

    with_headers.agentwatch_headers = True  # type: ignore[attr-defined]
    starlette_app.create_streamlit_middleware = with_headers
