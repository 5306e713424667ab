"""Parts that run inside the collector process, handed to it by whoever assembles it.

The collector names no such part: ``create_app(settings, plugins=...)`` takes them, and the
command line's composition root (``agentwatch_cli``) passes the alerts' (``alerts.plugin``),
so the collector and the alerts do not import each other. A plugin brings API routers (each
route scoped in ``collector.scopes.ROUTE_SCOPES`` like any other) and may run a component for
the app's lifetime, started after the collector's own (store, writer, scrapers) and stopped before.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from fastapi import APIRouter, FastAPI


class Plugin(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def routers(self) -> Sequence[APIRouter]:
        """Included in the app like the collector's own (each route scoped in ``ROUTE_SCOPES``)."""
        ...

    def lifespan(self, app: FastAPI) -> AbstractAsyncContextManager[object] | None:
        """What runs while ``app`` runs (None: nothing); ``app.state`` holds the settings and store."""
        ...
