"""The typed client of the collector's query API, returning the models of ``agentwatch_api.schemas``.

What reads the collector over HTTP reads through this client (the dashboard does): base URL,
key, timeouts and error translation live here once. Every failure becomes a ``CollectorError``
subclass with a message a person can act on, so a page shows it instead of a stack trace.
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import Sequence
from typing import Any, TypeVar, cast
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter, ValidationError

from agentwatch_api.schemas import (
    AlertContext,
    AlertIn,
    AlertOut,
    AlertRuleOut,
    CostBreakdown,
    DeliveryIn,
    DeliveryOut,
    EngineInfo,
    EngineSeries,
    FilterValues,
    Freshness,
    IngestStatus,
    Overview,
    RunDetail,
    RunsPage,
    RunStates,
    SessionDetail,
    SessionsPage,
    SpanGroups,
    SpansPage,
    TimeSeries,
    UsersPage,
    VersionComparison,
    VersionsOut,
    WhatIf,
)

T = TypeVar("T")


class CollectorError(Exception):
    """Base of every error of this client; its message is for the person who reads it."""


class CollectorUnavailable(CollectorError):
    """The collector could not be reached (down, wrong URL, timeout)."""


class ApiError(CollectorError):
    """The collector answered with an error status."""

    def __init__(self, status: int, detail: str, path: str) -> None:
        super().__init__(f"{path}: HTTP {status}: {detail}")
        self.status = status
        self.detail = detail
        self.path = path


class AuthError(ApiError):
    """401/403: the API key is missing, unknown or revoked."""


class NotFound(ApiError):
    """404: no such run in this project, or an endpoint this collector lacks."""


class CollectorClient:
    """Query API calls with a project key; thread-safe (one pooled ``httpx.Client``). A range's
    ``end`` left out is the collector's now."""

    def __init__(
        self, base_url: str, api_key: str = "", *, timeout_s: float = 10.0, transport: httpx.BaseTransport | None = None
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.base_url, headers=headers, timeout=timeout_s, transport=transport, verify=tls_context()
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> CollectorClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- endpoints -------------------------------------------------------------------

    def runs(
        self,
        *,
        start: float,
        end: float | None = None,
        limit: int = 50,
        offset: int = 0,
        sort: str = "-start_time",
        **filters: Any,
    ) -> RunsPage:
        return self._get("/api/runs", RunsPage, start=start, end=end, limit=limit, offset=offset, sort=sort, **filters)

    def run(self, trace_id: str) -> RunDetail:
        return self._get(f"/api/runs/{trace_id}", RunDetail)

    def spans(
        self,
        *,
        start: float,
        end: float | None = None,
        limit: int = 50,
        offset: int = 0,
        cursor: str | None = None,
        sort: str = "-start_time",
        **filters: Any,
    ) -> SpansPage:
        """Spans across runs (``SpanQuery`` filters; ``attribute`` a list of ``key=value``)."""
        return self._get(
            "/api/spans",
            SpansPage,
            start=start,
            end=end,
            limit=limit,
            offset=offset,
            cursor=cursor,
            sort=sort,
            **filters,
        )

    def span_groups(
        self,
        *,
        start: float,
        end: float | None = None,
        by: str = "tool",
        sort: str = "-spans",
        limit: int = 100,
        **filters: Any,
    ) -> SpanGroups:
        """Spans grouped by ``by`` (tool, error_type, user, ..., ``attribute:<key>``), with the same filters."""
        return self._get(
            "/api/spans/groups", SpanGroups, start=start, end=end, by=by, sort=sort, limit=limit, **filters
        )

    def versions(self, *, start: float, end: float | None = None, agent: str | None = None) -> VersionsOut:
        """Figures per agent version (``service.version``) over the range's finished runs."""
        return self._get("/api/versions", VersionsOut, start=start, end=end, agent=agent)

    def users(self, *, start: float, end: float | None = None, **params: Any) -> UsersPage:
        """Figures per user (agent, user_id, sort, limit, offset as ``GET /api/users`` takes them)."""
        return self._get("/api/users", UsersPage, start=start, end=end, **params)

    def sessions(self, *, start: float, end: float | None = None, **params: Any) -> SessionsPage:
        return self._get("/api/sessions", SessionsPage, start=start, end=end, **params)

    def session(self, session_id: str, *, start: float, end: float | None = None) -> SessionDetail:
        """One session's runs in order with what was asked and answered (404 -> ``NotFound``)."""
        return self._get(f"/api/sessions/{quote(session_id, safe='')}", SessionDetail, start=start, end=end)

    def compare_versions(
        self, a: str, b: str, *, start: float, end: float | None = None, agent: str | None = None
    ) -> VersionComparison:
        """Version ``b`` against ``a``: each figure's difference and whether it is beyond noise."""
        params = {k: v for k, v in {"start": start, "end": end, "agent": agent}.items() if v is not None}
        params.update(a=a, b=b)  # "" is a version: the runs that recorded none
        return self._send("GET", "/api/versions/compare", VersionComparison, params=params)

    def freshness(self) -> Freshness:
        """How far the collector's figures are complete (its watermark)."""
        return self._get("/api/freshness", Freshness)

    def overview(
        self, *, start: float, end: float | None = None, agent: str | None = None, model: str | None = None
    ) -> Overview:
        return self._get("/api/overview", Overview, start=start, end=end, agent=agent, model=model)

    def timeseries(
        self,
        metric: str,
        *,
        start: float,
        end: float,
        step_s: int,
        group_by: str = "none",
        agent: str | None = None,
        model: str | None = None,
    ) -> TimeSeries:
        return self._get(
            "/api/timeseries",
            TimeSeries,
            metric=metric,
            start=start,
            end=end,
            step_s=step_s,
            group_by=group_by,
            agent=agent,
            model=model,
        )

    def timeseries_set(
        self,
        metrics: Sequence[str],
        *,
        start: float,
        end: float,
        step_s: int,
        group_by: str = "none",
        agent: str | None = None,
        model: str | None = None,
    ) -> dict[str, TimeSeries]:
        """Several metrics over the same buckets in one request (and fewer queries than one by one): metric -> series."""
        found: list[TimeSeries] = self._get(
            "/api/timeseries/set",
            list[TimeSeries],
            metric=list(metrics),
            start=start,
            end=end,
            step_s=step_s,
            group_by=group_by,
            agent=agent,
            model=model,
        )
        return {series.metric: series for series in found}

    def cost(
        self,
        *,
        start: float,
        end: float | None = None,
        agent: str | None = None,
        model: str | None = None,
        gpu_hour_usd: float | None = None,
    ) -> CostBreakdown:
        return self._get(
            "/api/cost",
            CostBreakdown,
            start=start,
            end=end,
            agent=agent,
            model=model,
            gpu_hour_usd=gpu_hour_usd or None,
        )

    def whatif(
        self,
        policy: str,
        *,
        start: float,
        end: float,
        agent: str | None = None,
        step: str | None = None,
        model: str | None = None,
        cap: int | None = None,
        bound: int | None = None,
    ) -> WhatIf:
        """A cost policy's estimated effect on a past range (``/api/whatif``)."""
        return self._get(
            "/api/whatif",
            WhatIf,
            policy=policy,
            start=start,
            end=end,
            agent=agent,
            step=step,
            model=model,
            cap=cap,
            bound=bound,
        )

    def engines(self) -> list[EngineInfo]:
        return self._get("/api/engines", list[EngineInfo])

    def engine_metrics(self, engine: str, *, start: float, end: float, step_s: int | None = None) -> EngineSeries:
        return self._get("/api/engine/metrics", EngineSeries, engine=engine, start=start, end=end, step_s=step_s)

    def alerts(
        self,
        *,
        state: str | None = None,
        start: float | None = None,
        end: float | None = None,
        limit: int | None = None,
        alert_id: str | None = None,
    ) -> list[AlertOut]:
        """Incidents overlapping [start, end), newest first; ``alert_id``: that one, whenever it was."""
        return self._get(
            "/api/alerts", list[AlertOut], state=state, start=start, end=end, limit=limit, alert_id=alert_id
        )

    def alert_rules(self) -> list[AlertRuleOut]:
        return self._get("/api/alerts/rules", list[AlertRuleOut])

    def alert_scope_series(
        self, metric: str, *, start: float, end: float, step_s: int, group_by: str, agent: str | None = None
    ) -> TimeSeries:
        """A per-user, per-session or per-version series (``group_by`` user|session|version) of an alert rule's metric."""
        return self._get(
            "/api/alerts/scope-series",
            TimeSeries,
            metric=metric,
            start=start,
            end=end,
            step_s=step_s,
            group_by=group_by,
            agent=agent,
        )

    # --- the out-of-process evaluator (``agentwatch alerts run``) -----------------------

    def alert_context(self) -> AlertContext:
        """The project of this client's key."""
        return self._get("/api/alerts/context", AlertContext)

    def alert_run_states(
        self,
        metric: str,
        *,
        now: float,
        window_s: int,
        group_by: str = "none",
        agent: str | None = None,
        min_runs: int = 0,
    ) -> RunStates:
        return self._get(
            "/api/alerts/run-states",
            RunStates,
            metric=metric,
            now=now,
            window_s=window_s,
            group_by=group_by,
            agent=agent,
            min_runs=min_runs,
        )

    def alert_deliveries(self, *, alert_id: str = "", limit: int | None = None) -> list[DeliveryOut]:
        return self._get("/api/alerts/deliveries", list[DeliveryOut], alert_id=alert_id, limit=limit)

    def save_alerts(self, alerts: Sequence[AlertIn]) -> dict[str, int]:
        return self._send("POST", "/api/alerts", dict[str, int], json=[a.model_dump(mode="json") for a in alerts])

    def save_deliveries(self, deliveries: Sequence[DeliveryIn]) -> dict[str, int]:
        return self._send(
            "POST", "/api/alerts/deliveries", dict[str, int], json=[d.model_dump(mode="json") for d in deliveries]
        )

    def filters(self, *, start: float | None = None, end: float | None = None) -> FilterValues:
        return self._get("/api/filters", FilterValues, start=start, end=end)

    def ingest(self) -> IngestStatus:
        return self._get("/api/ingest", IngestStatus)

    def check_ingest(self) -> None:
        """Raises ``AuthError`` unless this client's key may send spans: an empty OTLP request, which
        stores nothing (in JSON, so that a refusal's ``google.rpc.Status`` reads as JSON too)."""
        self._request("POST", "/v1/traces", content=b"{}", headers={"Content-Type": "application/json"})

    # --- administration (the admin token, or a key with the admin scope) ------------

    def create_key(self, project: str, name: str, scopes: Sequence[str]) -> dict[str, Any]:
        """A new key; the answer holds the key itself, this once."""
        return self._send(
            "POST", "/api/admin/keys", dict[str, Any], json={"project": project, "name": name, "scopes": list(scopes)}
        )

    def revoke_key(self, key_id: str) -> dict[str, Any]:
        return self._send("POST", f"/api/admin/keys/{key_id}/revoke", dict[str, Any])

    def keys(self) -> list[dict[str, Any]]:
        return self._get("/api/admin/keys", list[dict[str, Any]])

    def register_engine(self, name: str, metrics_url: str) -> dict[str, Any]:
        """Scrape an engine's Prometheus ``metrics_url`` from the next cycle on (the key's project)."""
        return self._send("POST", "/api/admin/engines", dict[str, Any], json={"name": name, "url": metrics_url})

    def reprice(self, *, since: float, project: str = "") -> dict[str, Any]:
        """Re-price stored LLM spans since ``since`` (long: give the client a timeout to match)."""
        return self._send("POST", "/api/admin/reprice", dict[str, Any], json={"since": since, "project": project})

    def delete_data(
        self,
        *,
        project: str = "",
        trace_id: str | None = None,
        user_id: str | None = None,
        session_id: str | None = None,
        start: float | None = None,
        end: float | None = None,
        everything: bool = False,
    ) -> dict[str, Any]:
        """Delete one of: a trace, a user's or a session's runs, the runs of [start, end), the whole
        project; returns what went (spans, cost, texts). Long on large stores: give a timeout to match."""
        body: dict[str, Any] = {"project": project, "everything": everything}
        for name, value in (("trace_id", trace_id), ("user_id", user_id), ("session_id", session_id)):
            if value is not None:
                body[name] = value
        if start is not None or end is not None:
            body |= {"start": start, "end": end}
        return self._send("POST", "/api/admin/delete", dict[str, Any], json=body)

    # --- plumbing --------------------------------------------------------------------

    def _get(self, path: str, shape: type[T] | Any, /, **params: Any) -> T:
        query = {k: v for k, v in params.items() if v is not None and v != ""}
        return cast(T, self._send("GET", path, shape, params=query))

    def _send(self, method: str, path: str, shape: type[T] | Any, /, **request: Any) -> T:
        return cast(T, _parse(self._request(method, path, **request), path, shape))

    def _request(self, method: str, path: str, /, **request: Any) -> httpx.Response:
        try:
            response = self._transfer(method, path, request)
        except httpx.HTTPError as exc:
            raise CollectorUnavailable(
                f"cannot reach the collector at {self.base_url}: {exc or type(exc).__name__}"
            ) from exc
        if response.status_code >= 400:
            raise _api_error(response, path)
        return response

    def _transfer(self, method: str, path: str, request: dict[str, Any]) -> httpx.Response:
        """One request; a read (GET) once more on a new connection when its connection broke: the
        collector may close a pooled keep-alive connection just as it is reused (a reset, or a
        close without an answer), which a busy machine makes likely. Writes are never sent twice."""
        try:
            return self._http.request(method, path, **request)
        except (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError):
            if method != "GET":
                raise
            return self._http.request(method, path, **request)


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The TLS settings every client of the process shares, as httpx builds them by default
    (certifi's roots, or ``SSL_CERT_FILE``/``SSL_CERT_DIR`` as set when first asked). Built once:
    each ``httpx.Client`` built its own, about 25 ms of CPU that a dashboard page paid for every
    client it opened, though the collector is mostly plain HTTP."""
    return httpx.create_ssl_context()


def _parse(response: httpx.Response, path: str, model: type[T] | Any) -> T:
    try:
        if isinstance(model, type) and issubclass(model, BaseModel):
            return cast(T, model.model_validate_json(response.content))
        return cast(T, TypeAdapter(model).validate_json(response.content))
    except ValidationError as exc:
        raise ApiError(
            response.status_code,
            f"unexpected response shape: {exc.error_count()} errors, first: {exc.errors()[0]['msg']} at {exc.errors()[0]['loc']}",
            path,
        ) from exc


def _api_error(response: httpx.Response, path: str) -> ApiError:
    try:
        body = response.json()
    except ValueError:
        body = None
    # FastAPI's {"detail": ...}, or the google.rpc.Status {"code", "message"} of /v1/traces
    detail = (body.get("detail") or body.get("message")) if isinstance(body, dict) else None
    if detail is None:
        detail = response.text[:300]
    elif not isinstance(detail, str):
        detail = str(detail)[:300]
    status = response.status_code
    cls = AuthError if status in (401, 403) else NotFound if status == 404 else ApiError
    return cls(status, detail or response.reason_phrase, path)
