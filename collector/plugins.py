"""Parts that run inside the collector process, declared by the parts themselves.

The collector names no such part: ``create_app(settings, plugins=...)`` takes them, and
``agentwatch collector`` passes those ``installed()`` under the ``agentwatch.collector_plugins``
entry-point group (the platform's pyproject.toml: the alerts' ``alerts.plugin:PLUGIN``), so
the collector and the alerts do not import each other. A plugin brings API routers, the
scope of each of their routes (``collector.auth.scopes``: the collector's own table names none
of them) and its own settings (``collector.settings.EnvSettings``, read when the app is made and
kept in ``collector_state(app).plugin_settings[name]``), and may run a component for the app's
lifetime, started after the collector's own (store, writer, scrapers) and stopped before, and
kept in ``collector_state(app).plugin_components[name]`` (``collector.state``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from importlib.metadata import entry_points
from typing import Protocol

from fastapi import APIRouter, FastAPI

from agentwatch_platform.collector.settings import EnvSettings

PLUGINS_GROUP = "agentwatch.collector_plugins"


class Plugin(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def routers(self) -> Sequence[APIRouter]:
        """Included in the app like the collector's own."""
        ...

    @property
    def scopes(self) -> Mapping[tuple[str, str], str]:
        """(method, path) -> scope (``collector.auth.scopes``) of every route of ``routers``; a
        route without one is refused to every caller, one the collector has already is an error."""
        ...

    @property
    def settings(self) -> EnvSettings | None:
        """Its own settings (``AGENTWATCH_*``, as the collector's are read), None without; read
        once by ``create_app``, so a bad value stops the start."""
        ...

    def lifespan(self, app: FastAPI) -> AbstractAsyncContextManager[object] | None:
        """What runs while ``app`` runs (None: nothing); ``collector_state(app)`` holds the settings and store."""
        ...


def installed() -> tuple[Plugin, ...]:
    """The installed plugins, in declaration order. One that fails to load stops the start: a
    collector without its alerts must not look like one with them."""
    found: list[Plugin] = []
    for entry in entry_points(group=PLUGINS_GROUP):
        try:
            found.append(entry.load())
        except Exception as exc:
            raise SystemExit(
                f"agentwatch collector: the plugin {entry.name!r} ({entry.value}) failed to load: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
    return tuple(found)
