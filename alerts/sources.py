"""Where the evaluator reads metrics and keeps alert history: in the collector, or over HTTP.

``MetricSource`` reads through the same query layer as the dashboard (``collector.query``),
so an alert and a chart never disagree about a figure. ``AlertHistory`` persists alert state
and delivery attempts in ClickHouse (``alerts``, ``alert_deliveries``).

- ``StoreBackend``: inside the collector process, on its store (chDB allows one process).
- ``HttpBackend``: ``agentwatch alerts run`` as its own process, through the collector's
  ``/api/...`` endpoints with a project key (one key per project to watch).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import httpx

from agentwatch_api.schemas import AlertOut, CostBreakdown, TimeSeries
from alerts.budget import MonthCost
from alerts.errors import SourceError
from alerts.model import Alert, Delivery, RunStates
from alerts.run_scopes import RUN_SCOPE_KEYS, run_scope_series
from alerts.run_states import run_state_values
from collector import query
from collector.storage import queries_alerts as qa
from collector.storage.base import Store, StoreError

log = logging.getLogger("agentwatch.alerts")

PROJECT_LOOKBACK_S = 8 * 86_400  # longer than any default rule's history
MAX_LISTED = 1000  # the most alerts or deliveries one /api/alerts read returns
T = TypeVar("T")


class MetricSource(Protocol):
    """Metric reads; raise ``SourceError`` when the data cannot be read now."""

    def projects(self, now: float) -> list[str]: ...

    def timeseries(
        self, project: str, metric: str, start: float, end: float, step_s: int, group_by: str = "none", agent: str | None = None, model: str | None = None
    ) -> TimeSeries: ...

    def month_cost(self, project: str, now: float, window_s: int, agent: str | None = None, model: str | None = None) -> MonthCost:
        """The month so far and the cost of the last ``window_s`` (``alerts.budget``)."""
        ...

    def run_states(
        self, project: str, metric: str, now: float, window_s: int, group_by: str = "none", agent: str | None = None, min_runs: int = 0
    ) -> dict[str, float | None]:
        """A ``RUN_STATE_METRICS`` figure now, per group (``alerts.run_states``)."""
        ...


class AlertHistory(Protocol):
    """Alert state and delivery records; raise ``SourceError`` when they cannot be written."""

    def firing(self, project: str) -> list[Alert]: ...

    def save(self, alert: Alert) -> None: ...

    def record(self, delivery: Delivery) -> None: ...

    def owed(self, project: str, since: float) -> tuple[list[Alert], set[tuple[str, str, str]]]:
        """Incidents firing or resolved since ``since``, and the (alert_id, event, channel)
        notifications delivered so far: what a restarted evaluator may still owe."""
        ...


def alert_row(alert: Alert) -> tuple[Any, ...]:
    """An ``alerts`` row, in ``queries_alerts.ALERT_COLUMNS`` order."""
    return tuple(getattr(alert, column) for column in qa.ALERT_COLUMNS)


def delivery_row(delivery: Delivery) -> tuple[Any, ...]:
    """An ``alert_deliveries`` row, in ``queries_alerts.DELIVERY_COLUMNS`` order."""
    return tuple(getattr(delivery, column) for column in qa.DELIVERY_COLUMNS)


class StoreBackend:
    """In-process: ``collector.query`` over the collector's store, history in its tables."""

    def __init__(self, store: Store, *, idle_timeout_s: float = query.DEFAULT_RUN_IDLE_TIMEOUT_S) -> None:
        self.store, self.idle_timeout_s = store, idle_timeout_s

    def _guard(self, what: str, call: Callable[[], T]) -> T:
        try:
            return call()
        except StoreError as exc:
            raise SourceError(f"{what}: {exc}") from exc

    def projects(self, now: float) -> list[str]:
        rows = self._guard("active projects", lambda: self.store.query(qa.ACTIVE_PROJECTS, {"since_ns": int((now - PROJECT_LOOKBACK_S) * 1e9)}))
        return sorted(r["project"] for r in rows)

    def timeseries(
        self, project: str, metric: str, start: float, end: float, step_s: int, group_by: str = "none", agent: str | None = None, model: str | None = None
    ) -> TimeSeries:
        if group_by in RUN_SCOPE_KEYS:
            return self._guard(metric, lambda: run_scope_series(self.store, project, metric, start, end, step_s, group_by, agent))
        return self._guard(metric, lambda: query.timeseries(self.store, project, metric, start, end, step_s, group_by=group_by, agent=agent, model=model))

    def month_cost(self, project: str, now: float, window_s: int, agent: str | None = None, model: str | None = None) -> MonthCost:
        cost = self._guard("cost", lambda: query.cost_breakdown(self.store, project, start=now - window_s, end=now, agent=agent, model=model, now=now))
        return MonthCost(now, cost.month_to_date_usd, cost.projected_month_usd, cost.total_usd, window_s)

    def run_states(
        self, project: str, metric: str, now: float, window_s: int, group_by: str = "none", agent: str | None = None, min_runs: int = 0
    ) -> dict[str, float | None]:
        return self._guard(metric, lambda: run_state_values(
            self.store, project, metric, now=now, window_s=window_s, idle_timeout_s=self.idle_timeout_s, group_by=group_by, agent=agent, min_runs=min_runs))

    def firing(self, project: str) -> list[Alert]:
        rows = self._guard("firing alerts", lambda: self.store.query(qa.FIRING_ALERTS, {"project": project}))
        return [Alert(**row) for row in rows]

    def save(self, alert: Alert) -> None:
        self._guard("save alert", lambda: self.store.insert_rows("alerts", qa.ALERT_COLUMNS, [alert_row(alert)]))

    def record(self, delivery: Delivery) -> None:
        self._guard("record delivery", lambda: self.store.insert_rows("alert_deliveries", qa.DELIVERY_COLUMNS, [delivery_row(delivery)]))

    def owed(self, project: str, since: float) -> tuple[list[Alert], set[tuple[str, str, str]]]:
        params = {"project": project, "since_ms": int(since * 1000)}
        alerts = self._guard("recent alerts", lambda: self.store.query(qa.OWED_ALERTS, params))
        delivered = self._guard("deliveries", lambda: self.store.query(qa.DELIVERED, params))
        return [Alert(**row) for row in alerts], {(r["alert_id"], r["event"], r["channel"]) for r in delivered}


class HttpBackend:
    """Out of process: the collector's query API with one project key per project."""

    def __init__(self, url: str, keys: list[str], *, timeout_s: float = 30.0, transport: httpx.BaseTransport | None = None) -> None:
        self._client = httpx.Client(base_url=url.rstrip("/"), timeout=timeout_s, transport=transport)
        self._keys = keys
        self._by_project: dict[str, str] = {}

    def close(self) -> None:
        self._client.close()

    def _call(self, method: str, path: str, key: str, **kwargs: Any) -> Any:
        try:
            response = self._client.request(method, path, headers={"Authorization": f"Bearer {key}"}, **kwargs)
        except httpx.HTTPError as exc:
            raise SourceError(f"{method} {path}: {type(exc).__name__}: {exc}") from exc
        if response.status_code >= 400:
            raise SourceError(f"{method} {path}: HTTP {response.status_code}: {response.text[:300]}")
        return response.json()

    def _key(self, project: str) -> str:
        if project not in self._by_project:
            self.projects(0.0)
        try:
            return self._by_project[project]
        except KeyError:
            raise SourceError(f"no API key for project {project!r}") from None

    def projects(self, now: float) -> list[str]:
        for key in self._keys:
            if key not in self._by_project.values():
                self._by_project[self._call("GET", "/api/alerts/context", key)["project"]] = key
        return sorted(self._by_project)

    def timeseries(
        self, project: str, metric: str, start: float, end: float, step_s: int, group_by: str = "none", agent: str | None = None, model: str | None = None
    ) -> TimeSeries:
        params = {"metric": metric, "start": start, "end": end, "step_s": step_s, "group_by": group_by}
        params.update({k: v for k, v in (("agent", agent), ("model", model)) if v is not None})
        path = "/api/alerts/scope-series" if group_by in RUN_SCOPE_KEYS else "/api/timeseries"
        return TimeSeries.model_validate(self._call("GET", path, self._key(project), params=params))

    def month_cost(self, project: str, now: float, window_s: int, agent: str | None = None, model: str | None = None) -> MonthCost:
        """``/api/cost`` over the last window (its ``now`` is the collector's clock, within a
        round trip of ``now`` here)."""
        params: dict[str, Any] = {"start": now - window_s, "end": now}
        params.update({k: v for k, v in (("agent", agent), ("model", model)) if v is not None})
        cost = CostBreakdown.model_validate(self._call("GET", "/api/cost", self._key(project), params=params))
        return MonthCost(now, cost.month_to_date_usd, cost.projected_month_usd, cost.total_usd, window_s)

    def run_states(
        self, project: str, metric: str, now: float, window_s: int, group_by: str = "none", agent: str | None = None, min_runs: int = 0
    ) -> dict[str, float | None]:
        params: dict[str, Any] = {"metric": metric, "now": now, "window_s": window_s, "group_by": group_by, "min_runs": min_runs}
        params.update({"agent": agent} if agent is not None else {})
        return RunStates.model_validate(self._call("GET", "/api/alerts/run-states", self._key(project), params=params)).values

    def firing(self, project: str) -> list[Alert]:
        rows = self._call("GET", "/api/alerts", self._key(project), params={"state": "firing", "start": 0, "end": 4e9, "limit": 1000})
        return [Alert(project=project, updated_at=0.0, **AlertOut.model_validate(row).model_dump()) for row in rows]

    def save(self, alert: Alert) -> None:
        self._call("POST", "/api/alerts", self._key(alert.project), json=[{**alert.to_out().model_dump(), "updated_at": alert.updated_at}])

    def record(self, delivery: Delivery) -> None:
        body = [{k: getattr(delivery, k) for k in qa.DELIVERY_COLUMNS if k != "project"}]
        self._call("POST", "/api/alerts/deliveries", self._key(delivery.project), json=body)

    def owed(self, project: str, since: float) -> tuple[list[Alert], set[tuple[str, str, str]]]:
        """Incidents firing or resolved since ``since`` (``GET /api/alerts``) and their successful
        deliveries (``GET /api/alerts/deliveries`` per incident): what the previous process of
        ``alerts run`` recorded but never delivered is sent once more, as in the collector."""
        key = self._key(project)
        rows = self._call("GET", "/api/alerts", key, params={"start": since, "end": 4e9, "limit": MAX_LISTED})
        alerts = [Alert(project=project, updated_at=0.0, **AlertOut.model_validate(row).model_dump()) for row in rows]
        delivered: set[tuple[str, str, str]] = set()
        for alert in alerts:
            for row in self._call("GET", "/api/alerts/deliveries", key, params={"alert_id": alert.alert_id, "limit": MAX_LISTED}):
                if row["ok"]:
                    delivered.add((alert.alert_id, row["event"], row["channel"]))
        return alerts, delivered
