"""The alerts inside the collector: ``/api/alerts`` and the in-process evaluator, as a ``collector.plugins.Plugin``.

``agentwatch collector`` loads ``PLUGIN`` (the ``agentwatch.collector_plugins`` entry point); the evaluator runs unless
``AGENTWATCH_ALERT_INTERVAL_S`` is 0 (then ``agentwatch alerts run`` may run it outside).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

from fastapi import FastAPI

from agentwatch_platform.alerts import api
from agentwatch_platform.alerts.evaluator import start_in_process


class AlertsPlugin:
    """``clock``: what the evaluator takes for now (default: the collector's clock); a test
    hands its own to drive the evaluator through time."""

    name = "alerts"
    routers = (api.router,)
    scopes = api.ROUTE_SCOPES

    def __init__(self, *, clock: Callable[[], float] | None = None) -> None:
        self.clock = clock

    def lifespan(self, app: FastAPI) -> AbstractAsyncContextManager[object] | None:
        return start_in_process(app, clock=self.clock) if app.state.settings.alert_interval_s > 0 else None


PLUGIN = AlertsPlugin()
