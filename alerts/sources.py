"""Where the evaluator reads metrics and keeps alert history: in the collector, or over HTTP.

``MetricSource`` reads through the same query layer as the dashboard (``collector.query``),
so an alert and a chart never disagree about a figure. ``AlertHistory`` persists alert state
and delivery attempts in ClickHouse (``alerts``, ``alert_deliveries``).

- ``StoreBackend``: inside the collector process, on its store (chDB allows one process).
- ``HttpBackend``: ``agentwatch alerts run`` as its own process, through the collector's
  ``/api/...`` endpoints with ``agentwatch_api.CollectorClient``, one per project key.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from agentwatch_api.client import CollectorClient, CollectorError
from agentwatch_api.schemas import AlertIn, DeliveryIn, TimeSeries
from agentwatch_platform.alerts.budget import MonthCost
from agentwatch_platform.alerts.errors import SourceError
from agentwatch_platform.alerts.model import Alert, Delivery
from agentwatch_platform.alerts.run_scopes import RUN_SCOPE_KEYS, run_scope_series
from agentwatch_platform.alerts.run_states import run_state_values
from agentwatch_platform.alerts.version_rules import version_change
from agentwatch_platform.collector.query import cost as cost_query
from agentwatch_platform.collector.query import metrics as metrics_query
from agentwatch_platform.collector.query import ranges
from agentwatch_platform.collector.query import versions as version_query
from agentwatch_platform.collector.storage.base import Store, StoreError
from agentwatch_platform.collector.storage.sql import alerts as alerts_sql

if TYPE_CHECKING:
    import httpx

log = logging.getLogger("agentwatch.alerts")

PROJECT_LOOKBACK_S = 8 * 86_400  # longer than any default rule's history
MAX_LISTED = 1000  # the most alerts or deliveries one /api/alerts read returns
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class SeriesQuery:
    """One metric per time bucket of [``start``, ``end``), per group, as a rule asks for it: the one
    argument of ``MetricSource.timeseries``, so each source states the question once."""

    metric: str
    start: float
    end: float
    step_s: int
    group_by: str = "none"
    agent: str | None = None
    model: str | None = None


@dataclass(frozen=True, slots=True)
class FigureQuery:
    """A figure of now over the last ``window_s``: per group (``MetricSource.run_states``), or per
    version compared (``MetricSource.version_changes``; ``version``: that version only)."""

    metric: str
    now: float
    window_s: int
    group_by: str = "none"
    agent: str | None = None
    version: str | None = None
    min_runs: int = 0


class MetricSource(Protocol):
    """Metric reads; raise ``SourceError`` when the data cannot be read now."""

    def projects(self, now: float) -> list[str]: ...

    def timeseries(self, project: str, query: SeriesQuery) -> TimeSeries: ...

    def month_cost(
        self, project: str, now: float, window_s: int, agent: str | None = None, model: str | None = None
    ) -> MonthCost:
        """The month so far and the cost of the last ``window_s`` (``alerts.budget``)."""
        ...

    def run_states(self, project: str, query: FigureQuery) -> dict[str, float | None]:
        """A ``RUN_STATE_METRICS`` figure now, per group (``alerts.run_states``)."""
        ...

    def version_changes(self, project: str, query: FigureQuery) -> dict[str, float | None]:
        """A ``VERSION_METRICS`` figure now: {compared version: value} (``alerts.version_rules``)."""
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
    """An ``alerts`` row, in ``sql.alerts.ALERT_COLUMNS`` order."""
    return tuple(getattr(alert, column) for column in alerts_sql.ALERT_COLUMNS)


def delivery_row(delivery: Delivery) -> tuple[Any, ...]:
    """An ``alert_deliveries`` row, in ``sql.alerts.DELIVERY_COLUMNS`` order."""
    return tuple(getattr(delivery, column) for column in alerts_sql.DELIVERY_COLUMNS)


class StoreBackend:
    """In-process: ``collector.query`` over the collector's store, history in its tables."""

    def __init__(
        self,
        store: Store,
        *,
        idle_timeout_s: float = ranges.DEFAULT_RUN_IDLE_TIMEOUT_S,
        lag: Callable[[], float] | None = None,
    ) -> None:
        """``lag``: how far the collector's watermark trails now (``collector.ingest.freshness``):
        buckets ending within it of a series' end are flagged partial, as the query API flags them."""
        self.store, self.idle_timeout_s, self.lag = store, idle_timeout_s, lag

    def _guard(self, what: str, call: Callable[[], T]) -> T:
        try:
            return call()
        except StoreError as exc:
            raise SourceError(f"{what}: {exc}") from exc

    def projects(self, now: float) -> list[str]:
        rows = self._guard(
            "active projects",
            lambda: self.store.query(alerts_sql.ACTIVE_PROJECTS, {"since_ns": int((now - PROJECT_LOOKBACK_S) * 1e9)}),
        )
        return sorted(r["project"] for r in rows)

    def timeseries(self, project: str, query: SeriesQuery) -> TimeSeries:
        q = query
        until = q.end - self.lag() if self.lag is not None else None
        if q.group_by in RUN_SCOPE_KEYS:
            return self._guard(
                q.metric,
                lambda: run_scope_series(
                    self.store, project, q.metric, q.start, q.end, q.step_s, q.group_by, q.agent, complete_until=until
                ),
            )
        return self._guard(
            q.metric,
            lambda: metrics_query.timeseries(
                self.store,
                project,
                q.metric,
                q.start,
                q.end,
                q.step_s,
                group_by=q.group_by,
                agent=q.agent,
                model=q.model,
                complete_until=until,
            ),
        )

    def month_cost(
        self, project: str, now: float, window_s: int, agent: str | None = None, model: str | None = None
    ) -> MonthCost:
        cost = self._guard(
            "cost",
            lambda: cost_query.cost_breakdown(
                self.store, project, start=now - window_s, end=now, agent=agent, model=model, now=now
            ),
        )
        return MonthCost(now, cost.month_to_date_usd, cost.projected_month_usd, cost.total_usd, window_s)

    def run_states(self, project: str, query: FigureQuery) -> dict[str, float | None]:
        q = query
        return self._guard(
            q.metric,
            lambda: run_state_values(
                self.store,
                project,
                q.metric,
                now=q.now,
                window_s=q.window_s,
                idle_timeout_s=self.idle_timeout_s,
                group_by=q.group_by,
                agent=q.agent,
                min_runs=q.min_runs,
            ),
        )

    def version_changes(self, project: str, query: FigureQuery) -> dict[str, float | None]:
        q = query
        span = {"start": q.now - q.window_s, "end": q.now, "agent": q.agent, "idle_timeout_s": self.idle_timeout_s}
        return self._guard(
            q.metric,
            lambda: version_change(
                q.metric,
                lambda: version_query.versions(self.store, project, **span).items,  # type: ignore[arg-type]
                lambda a, b: version_query.compare(self.store, project, a, b, **span),  # type: ignore[arg-type]
                version=q.version,
                min_runs=q.min_runs,
            ),
        )

    def firing(self, project: str) -> list[Alert]:
        rows = self._guard("firing alerts", lambda: self.store.query(alerts_sql.FIRING_ALERTS, {"project": project}))
        return [Alert(**row) for row in rows]

    def save(self, alert: Alert) -> None:
        self._guard(
            "save alert", lambda: self.store.insert_rows("alerts", alerts_sql.ALERT_COLUMNS, [alert_row(alert)])
        )

    def record(self, delivery: Delivery) -> None:
        self._guard(
            "record delivery",
            lambda: self.store.insert_rows("alert_deliveries", alerts_sql.DELIVERY_COLUMNS, [delivery_row(delivery)]),
        )

    def owed(self, project: str, since: float) -> tuple[list[Alert], set[tuple[str, str, str]]]:
        params = {"project": project, "since_ms": int(since * 1000)}
        alerts = self._guard("recent alerts", lambda: self.store.query(alerts_sql.OWED_ALERTS, params))
        delivered = self._guard("deliveries", lambda: self.store.query(alerts_sql.DELIVERED, params))
        return [Alert(**row) for row in alerts], {(r["alert_id"], r["event"], r["channel"]) for r in delivered}


class HttpBackend:
    """Out of process: the collector's query API through one ``CollectorClient`` per project key."""

    def __init__(
        self, url: str, keys: list[str], *, timeout_s: float = 30.0, transport: httpx.BaseTransport | None = None
    ) -> None:
        self._clients = [CollectorClient(url, key, timeout_s=timeout_s, transport=transport) for key in keys]
        self._by_project: dict[str, CollectorClient] = {}

    def close(self) -> None:
        for client in self._clients:
            client.close()

    def _guard(self, what: str, call: Callable[[], T]) -> T:
        try:
            return call()
        except CollectorError as exc:
            raise SourceError(f"{what}: {exc}") from exc

    def _client(self, project: str) -> CollectorClient:
        if project not in self._by_project:
            self.projects(0.0)
        try:
            return self._by_project[project]
        except KeyError:
            raise SourceError(f"no API key for project {project!r}") from None

    def projects(self, now: float) -> list[str]:
        known = set(map(id, self._by_project.values()))
        for client in self._clients:
            if id(client) not in known:
                self._by_project[self._guard("project of a key", client.alert_context).project] = client
        return sorted(self._by_project)

    def timeseries(self, project: str, query: SeriesQuery) -> TimeSeries:
        client, q = self._client(project), query
        if q.group_by in RUN_SCOPE_KEYS:
            return self._guard(
                q.metric,
                lambda: client.alert_scope_series(
                    q.metric, start=q.start, end=q.end, step_s=q.step_s, group_by=q.group_by, agent=q.agent
                ),
            )
        return self._guard(
            q.metric,
            lambda: client.timeseries(
                q.metric, start=q.start, end=q.end, step_s=q.step_s, group_by=q.group_by, agent=q.agent, model=q.model
            ),
        )

    def month_cost(
        self, project: str, now: float, window_s: int, agent: str | None = None, model: str | None = None
    ) -> MonthCost:
        """``/api/cost`` over the last window (its ``now`` is the collector's clock, within a
        round trip of ``now`` here)."""
        client = self._client(project)
        cost = self._guard("cost", lambda: client.cost(start=now - window_s, end=now, agent=agent, model=model))
        return MonthCost(now, cost.month_to_date_usd, cost.projected_month_usd, cost.total_usd, window_s)

    def run_states(self, project: str, query: FigureQuery) -> dict[str, float | None]:
        client, q = self._client(project), query
        return self._guard(
            q.metric,
            lambda: client.alert_run_states(
                q.metric, now=q.now, window_s=q.window_s, group_by=q.group_by, agent=q.agent, min_runs=q.min_runs
            ),
        ).values

    def version_changes(self, project: str, query: FigureQuery) -> dict[str, float | None]:
        client, q = self._client(project), query
        span = {"start": q.now - q.window_s, "end": q.now, "agent": q.agent}
        return self._guard(
            q.metric,
            lambda: version_change(
                q.metric,
                lambda: client.versions(**span).items,  # type: ignore[arg-type]
                lambda a, b: client.compare_versions(a, b, **span),  # type: ignore[arg-type]
                version=q.version,
                min_runs=q.min_runs,
            ),
        )

    def firing(self, project: str) -> list[Alert]:
        client = self._client(project)
        rows = self._guard("firing alerts", lambda: client.alerts(state="firing", start=0, end=4e9, limit=MAX_LISTED))
        return [Alert(project=project, **row.model_dump()) for row in rows]

    def save(self, alert: Alert) -> None:
        body = AlertIn.model_construct(**alert.model_dump(exclude={"project"}))  # the collector validates it
        self._guard("save alert", lambda: self._client(alert.project).save_alerts([body]))

    def record(self, delivery: Delivery) -> None:
        body = DeliveryIn.model_construct(
            **{k: getattr(delivery, k) for k in alerts_sql.DELIVERY_COLUMNS if k != "project"}
        )
        self._guard("record delivery", lambda: self._client(delivery.project).save_deliveries([body]))

    def owed(self, project: str, since: float) -> tuple[list[Alert], set[tuple[str, str, str]]]:
        """Incidents firing or resolved since ``since`` (``GET /api/alerts``) and their successful
        deliveries (``GET /api/alerts/deliveries`` per incident): what the previous process of
        ``alerts run`` recorded but never delivered is sent once more, as in the collector."""
        client = self._client(project)
        rows = self._guard("recent alerts", lambda: client.alerts(start=since, end=4e9, limit=MAX_LISTED))
        alerts = [Alert(project=project, **row.model_dump()) for row in rows]

        def delivered() -> set[tuple[str, str, str]]:
            return {
                (alert.alert_id, row.event, row.channel)
                for alert in alerts
                for row in client.alert_deliveries(alert_id=alert.alert_id, limit=MAX_LISTED)
                if row.ok
            }

        return alerts, self._guard("deliveries", delivered)
