"""FastAPI dependencies shared by every router: settings, store, the caller's project.

``create_app`` puts the collaborators on ``app.state`` (``settings``, ``store``,
``authenticator``); routes never reach for globals.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request

from collector.settings import Settings
from collector.storage.base import Store


async def get_settings(request: Request) -> Settings:
    return request.app.state.settings


async def get_store(request: Request) -> Store:
    return request.app.state.store


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return request.headers.get("x-agentwatch-key") or None


async def get_project(request: Request) -> str:
    """The project of the caller's API key; 401 without a valid one.

    ``request.app.state.authenticator`` (``collector.auth.Authenticator``) answers with the
    project, or None when the key is unknown or revoked. Async, so that a key verified lately
    costs no trip to FastAPI's thread pool.
    """
    settings: Settings = request.app.state.settings
    token = bearer_token(request)
    if token is None and not settings.require_auth:
        return "default"
    if token is None:
        raise HTTPException(status_code=401, detail="missing API key: send 'Authorization: Bearer <key>'", headers={"WWW-Authenticate": "Bearer"})
    project = await request.app.state.authenticator.authenticate_async(token)
    if project is None:
        raise HTTPException(status_code=401, detail="invalid or revoked API key", headers={"WWW-Authenticate": "Bearer"})
    return project


SettingsDep = Annotated[Settings, Depends(get_settings)]
StoreDep = Annotated[Store, Depends(get_store)]
ProjectDep = Annotated[str, Depends(get_project)]
