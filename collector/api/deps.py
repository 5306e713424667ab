"""FastAPI dependencies shared by every router: settings, store, the caller's project; and
``run_query``, the one translation of the query layer's errors into HTTP answers.

``create_app`` puts the collaborators on ``app.state`` (``settings``, ``store``,
``authenticator``); routes never reach for globals.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, TypeVar

from fastapi import Depends, HTTPException, Request

from agentwatch_platform.collector.auth.caller import principal
from agentwatch_platform.collector.ingest.freshness import Freshness
from agentwatch_platform.collector.query.ranges import InvalidQuery
from agentwatch_platform.collector.settings import Settings
from agentwatch_platform.collector.state import collector_state
from agentwatch_platform.collector.storage.base import Store

T = TypeVar("T")


async def get_settings(request: Request) -> Settings:
    return collector_state(request.app).settings


async def get_store(request: Request) -> Store:
    return collector_state(request.app).store


async def get_freshness(request: Request) -> Freshness:
    return collector_state(request.app).freshness


async def get_project(request: Request) -> str:
    """The project of the caller's API key; 401 without a valid one.

    Who the caller is, and whether its scopes allow this route, is settled by
    ``collector.auth.caller`` (the app-wide ``authorize`` dependency and ``principal``, cached on
    the request). The operator's admin token names no project: 403 on a project's routes.
    """
    caller = await principal(request)
    if caller.project is None:
        raise HTTPException(
            status_code=403,
            detail="the admin token names no project: use a project key with the scope this endpoint needs",
        )
    return caller.project


SettingsDep = Annotated[Settings, Depends(get_settings)]
StoreDep = Annotated[Store, Depends(get_store)]
ProjectDep = Annotated[str, Depends(get_project)]
FreshnessDep = Annotated[Freshness, Depends(get_freshness)]


def run_query(call: Callable[[], T]) -> T:
    """Translate the query layer's errors into HTTP answers: 422 naming the parameter.

    ``StoreUnavailable`` goes on to ``collector.api.errors``: 503 with ``Retry-After`` and its
    ``answer``, which names no part of the store's address (the driver's error does).
    """
    try:
        return call()
    except InvalidQuery as exc:
        raise HTTPException(422, str(exc)) from exc
