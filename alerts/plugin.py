"""The alerts inside the collector: ``/api/alerts`` and the in-process evaluator, as a ``collector.plugins.Plugin``.

``agentwatch collector`` loads ``PLUGIN`` (the ``agentwatch.collector_plugins`` entry point): its
routes with their scopes (``alerts.api``), its settings (``alerts.settings``, read from
``AGENTWATCH_ALERT_*`` when the collector starts), and the evaluator, which runs unless
``AGENTWATCH_ALERT_INTERVAL_S`` is 0 (then ``agentwatch alerts run`` may run it outside).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

from fastapi import FastAPI

from agentwatch_platform.alerts import api
from agentwatch_platform.alerts.evaluator import start_in_process
from agentwatch_platform.alerts.settings import AlertsSettings


class AlertsPlugin:
    """``settings``: the alerts' (default: read from the environment when first asked for);
    ``clock``: what the evaluator takes for now (default: the collector's clock). Tests hand
    their own to drive the evaluator."""

    name = "alerts"
    routers = (api.router,)
    scopes = api.ROUTE_SCOPES

    def __init__(self, *, settings: AlertsSettings | None = None, clock: Callable[[], float] | None = None) -> None:
        self._settings = settings
        self.clock = clock

    @property
    def settings(self) -> AlertsSettings:
        if self._settings is None:
            self._settings = AlertsSettings.from_env()
        return self._settings

    def lifespan(self, app: FastAPI) -> AbstractAsyncContextManager[object] | None:
        if self.settings.alert_interval_s <= 0:
            return None
        return start_in_process(app, self.settings, clock=self.clock)


PLUGIN = AlertsPlugin()
