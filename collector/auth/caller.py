"""Who calls: one ``authenticate(state, token) -> Principal`` for HTTP and gRPC, and the app-wide check.

A request's key comes from ``authorization: Bearer <key>`` (or ``x-agentwatch-key``; gRPC: the
same metadata) and is looked up once: the operator's admin token, else a project key through
the app's ``Authenticator`` (``collector.auth.authenticator``: a short cache in front of the key
ring). HTTP routes get the caller from ``principal`` (cached on the request); ``authorize``, a
dependency of the whole app, refuses a caller whose scopes lack the route's
(``app.state.route_scopes``: ``collector.auth.scopes``) before any route code runs.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass

from fastapi import HTTPException, Request

from agentwatch_platform.collector.auth.scopes import LEGACY_SCOPES, PUBLIC, SCOPES
from agentwatch_platform.collector.errors import CollectorError
from agentwatch_platform.collector.state import CollectorState, collector_state


@dataclass(frozen=True)
class Principal:
    """The caller: a project key's project and scopes, or the operator (``project`` None)."""

    project: str | None
    scopes: frozenset[str]
    actor: str  # "key:<key_id>", "operator" or "anonymous"; what the audit log records

    @property
    def operator(self) -> bool:
        return self.project is None

    @property
    def rate_key(self) -> str:
        """What the ingestion rate limit counts by: the key, or the project of a caller without one."""
        return self.actor.removeprefix("key:") if self.actor.startswith("key:") else self.project or self.actor


OPERATOR = Principal(None, frozenset(SCOPES), "operator")
ANONYMOUS = Principal("default", frozenset(LEGACY_SCOPES), "anonymous")  # no key while keys are optional: never admin


class NotAuthenticated(CollectorError):
    """No key where one is needed, or a key that does not verify; the message says which."""

    status = 401


def token_of(headers: Mapping[str, str]) -> str | None:
    """The key a request carries: ``authorization: Bearer <key>``, else ``x-agentwatch-key``.

    ``headers``: HTTP headers, or gRPC metadata with lower-case names.
    """
    scheme, _, token = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return headers.get("x-agentwatch-key") or None


async def authenticate(state: CollectorState, token: str | None) -> Principal:
    """Who calls, for HTTP and gRPC alike: anonymous (no key, when ``require_auth`` is off), the
    operator (the admin token) or a project key's grant; ``state`` is the app's ``app.state``."""
    if token is None:
        if state.settings.require_auth:
            raise NotAuthenticated("missing API key: send 'Authorization: Bearer <key>'")
        return ANONYMOUS
    if state.admin_token and hmac.compare_digest(token.encode(), state.admin_token.encode()):
        return OPERATOR
    grant = await state.authenticator.grant_async(token)
    if grant is None:
        raise NotAuthenticated("invalid or revoked API key")
    return Principal(grant.project, grant.scopes, f"key:{grant.key_id}")


async def principal(request: Request) -> Principal:
    """The caller of this request (cached on ``request.state``); 401 without a valid key."""
    found = getattr(request.state, "principal", None)
    if found is not None:
        return found
    try:
        found = await authenticate(collector_state(request.app), token_of(request.headers))
    except NotAuthenticated as exc:
        raise HTTPException(401, str(exc), headers={"WWW-Authenticate": "Bearer"}) from None
    request.state.principal = found
    return found


async def authorize(request: Request) -> None:
    """The app-wide dependency: the matched route's scope (``app.state.route_scopes``), held by the caller."""
    found = collector_state(request.app).route_scopes.scope(request.method, request.url.path)
    if found is None:
        raise HTTPException(
            403,
            f"{request.method} {request.url.path} declares no scope (agentwatch_platform.collector.auth.scopes.ROUTE_SCOPES, or its plugin's scopes): refused",
        )
    path, needed = found
    if needed == PUBLIC:
        return
    caller = await principal(request)
    if needed not in caller.scopes:
        have = ", ".join(s for s in SCOPES if s in caller.scopes) or "none"
        raise HTTPException(
            403,
            f"this key lacks the '{needed}' scope needed by {request.method} {path} (it has: {have}); "
            f"create one with 'agentwatch keys create --scope {needed}'",
        )
