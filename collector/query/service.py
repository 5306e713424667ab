"""The query layer: typed functions over the store that return the API's pydantic models.

Routes, the dashboard (through the routes) and the alert evaluator (in-process) all read
through here, so a figure means the same wherever it is shown. SQL lives in
``collector.storage.sql``; this module picks the query, binds values and shapes rows.
Times are epoch seconds; ranges and result sizes are bounded, and a bad parameter raises
``InvalidQuery`` with a message naming it.
"""

from __future__ import annotations

import math
import time
from calendar import monthrange
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from agentwatch_api.schemas import (
    TIMESERIES_METRICS,
    CostBreakdown,
    CostLevers,
    CostRow,
    Headline,
    Overview,
    SelfHostedCost,
    SeriesPoint,
    TimeSeries,
    WhatIf,
    finite_total,
)
from agentwatch_platform.collector.query.levers import lever_savings
from agentwatch_platform.collector.query.ranges import (
    DEFAULT_RUN_IDLE_TIMEOUT_S,
    InvalidQuery,
    bucket_count,
    call_filters,
    call_params,
    call_source,
    choice,
    closed_minute_params,
    float_or_none,
    has_edges,
    head_minute_params,
    idle_cutoff_ns,
    range_ns,
    ratio,
    rollup_params,
)
from agentwatch_platform.collector.query.runs import list_runs
from agentwatch_platform.collector.query.whatif import whatif as estimate_whatif
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.sql import cost as cost_sql
from agentwatch_platform.collector.storage.sql import metrics as metrics_sql
from agentwatch_platform.collector.storage.sql import runs as runs_sql
from agentwatch_platform.collector.storage.sql import scope as scope_sql

if TYPE_CHECKING:
    from agentwatch import PriceTable


UNITS = {
    "runs": "runs",
    "cost_usd": "usd",
    "input_tokens": "tokens",
    "output_tokens": "tokens",
    "tokens_per_s": "tokens/s",
    "run_latency_p50": "s",
    "run_latency_p95": "s",
    "ttft_p50": "s",
    "ttft_p95": "s",
    "tpot_p50": "s",
    "tpot_p95": "s",
    "steps_per_run": "steps",
    "tool_calls": "calls",
    "tool_failure_rate": "ratio",
    "error_rate": "ratio",
    "timeout_rate": "ratio",
    "max_run_cost_usd": "usd",
    "max_steps": "steps",
    "success_rate": "ratio",
    "feedback_score": "score",
    "cost_per_success_usd": "usd",
    "runs_per_min": "runs/min",
    "cost_per_hour_usd": "usd/h",
    "tool_cache_hit_rate": "ratio",
    "small_model_share": "ratio",
}
SPAN_METRICS = frozenset(
    {
        "cost_usd",
        "input_tokens",
        "output_tokens",
        "tokens_per_s",
        "ttft_p50",
        "ttft_p95",
        "tpot_p50",
        "tpot_p95",
        "tool_calls",
        "tool_failure_rate",
        "timeout_rate",
        "tool_cache_hit_rate",
        "small_model_share",
    }
)
QUANTILE_METRICS = frozenset({"ttft_p50", "ttft_p95", "tpot_p50", "tpot_p95"})
HEAD_METRICS = frozenset({"runs", "run_latency_p50", "run_latency_p95", "error_rate", "success_rate"})
TOTAL_METRICS = frozenset({"steps_per_run", "max_steps", "max_run_cost_usd", "feedback_score"})
ADDITIVE = frozenset({"runs", "cost_usd", "input_tokens", "output_tokens", "tokens_per_s", "tool_calls"})
GROUPS = ("none", "agent", "model")


# --- metrics ---------------------------------------------------------------------------------
Figures = dict[tuple[int, str], dict[str, float | None]]


def _span_figures(row: dict[str, Any], step_s: float) -> dict[str, float | None]:
    return {
        "cost_usd": finite_total(float(row["cost_usd"])),
        "input_tokens": float(row["input_tokens"]),
        "output_tokens": float(row["output_tokens"]),
        "tokens_per_s": row["output_tokens"] / step_s,
        "tool_calls": float(row["tool_calls"]),
        "tool_failure_rate": ratio(row["tool_failures"], row["tool_calls"]),
        "timeout_rate": ratio(row["timeouts"], row["calls"]),
        "tool_cache_hit_rate": ratio(row["tool_cache_hits"], row["tool_calls"]),
        "small_model_share": ratio(row["small_model_calls"], row["llm_calls"]),
    } | _quantile_figures(row)


def _quantile_figures(row: dict[str, Any]) -> dict[str, float | None]:
    """TTFT/TPOT quantiles, where the query merged them (``QUANTILE_METRICS`` wanted)."""
    if "ttft_q" not in row:
        return {}
    ttft, tpot = row["ttft_q"], row["tpot_q"]
    return {
        "ttft_p50": float_or_none(ttft[0]),
        "ttft_p95": float_or_none(ttft[1]),
        "tpot_p50": float_or_none(tpot[0]),
        "tpot_p95": float_or_none(tpot[1]),
    }


def _head_figures(row: dict[str, Any], step_s: float) -> dict[str, float | None]:
    latency = row["latency_q"]
    return {
        "runs": float(row["runs"]),
        "run_latency_p50": float_or_none(latency[0]),
        "run_latency_p95": float_or_none(latency[1]),
        "error_rate": ratio(row["failed_runs"], row["runs"]),
        "success_rate": ratio(row["successes"], row["with_outcome"]),
        "successes": float(row["successes"]),
    }


def _total_figures(row: dict[str, Any], step_s: float) -> dict[str, float | None]:
    return {
        "steps_per_run": float_or_none(row["steps_per_run"]),
        "max_steps": float_or_none(row["max_steps"]),
        "max_run_cost_usd": float_or_none(row["max_run_cost_usd"]),
        "feedback_score": ratio(row["fb_sum"], row["fb_n"]),
    }


def _all_run_figures(row: dict[str, Any], step_s: float) -> dict[str, float | None]:
    return _head_figures(row, step_s) | _total_figures(row, step_s)


Shaper = Callable[[dict[str, Any], float], dict[str, float | None]]


def _plans(wanted: set[str], group_by: str, params: dict[str, Any]) -> list[tuple[str, Shaper]]:
    """The queries (and row shapers) that produce the wanted metrics."""
    plans: list[tuple[str, Shaper]] = []
    if wanted & SPAN_METRICS:
        filters = scope_sql.where(metrics_sql.ROLLUP_FILTERS, params), scope_sql.where(metrics_sql.SPAN_FILTERS, params)
        source = call_source(params)
        quantiles = bool(wanted & QUANTILE_METRICS)
        sql = metrics_sql.span_metrics(
            group_by, *filters, source=source, quantiles=quantiles, edges=has_edges(params, source)
        )
        plans.append((sql, _span_figures))
    if group_by == "model" and wanted & (HEAD_METRICS | TOTAL_METRICS):
        plans.append(
            (metrics_sql.run_metrics(group_by, scope_sql.where(runs_sql.RUN_FILTERS, params)), _all_run_figures)
        )
        return plans
    if wanted & HEAD_METRICS and "edge_minutes" in params and params.get("model") is None:
        plans.append(
            (
                metrics_sql.run_head_minutes(group_by, scope_sql.where(metrics_sql.RUN_MINUTE_FILTERS, params)),
                _head_figures,
            )
        )
    elif wanted & HEAD_METRICS:
        plans.append(
            (metrics_sql.run_heads(group_by, scope_sql.where(runs_sql.RUN_HEAD_FILTERS, params)), _head_figures)
        )
    if wanted & TOTAL_METRICS and "exact_minutes" in params:
        plans.append(
            (
                metrics_sql.run_totals_closed(group_by, scope_sql.where(metrics_sql.RUN_CLOSED_FILTERS, params)),
                _total_figures,
            )
        )
    elif wanted & TOTAL_METRICS:
        plans.append(
            (metrics_sql.run_totals(group_by, scope_sql.where(metrics_sql.RUN_TOTAL_FILTERS, params)), _total_figures)
        )
    return plans


def _figures(
    store: Store,
    project: str,
    metrics: Iterable[str],
    start: float,
    end: float,
    step_s: float,
    group_by: str,
    agent: str | None,
    model: str | None,
    idle_timeout_s: float = DEFAULT_RUN_IDLE_TIMEOUT_S,
) -> Figures:
    """Every figure ``metrics`` needs, per (bucket, group), from as few queries as it takes."""
    start_ns, end_ns = range_ns(start, end)
    params: dict[str, Any] = {
        "project": project,
        "start_ns": start_ns,
        "end_ns": end_ns,
        "agent": agent,
        "model": model,
        "idle_cutoff_ns": idle_cutoff_ns(idle_timeout_s),
    }
    params |= rollup_params(start, end, step_s)
    params |= head_minute_params(start_ns, end_ns, params["step_ns"])
    wanted = set(metrics) | ({"cost_usd", "runs"} if "cost_per_success_usd" in metrics else set())
    if wanted & TOTAL_METRICS and group_by != "model":
        params |= closed_minute_params(store, params)
    out: Figures = {}
    for sql, shape in _plans(wanted, group_by, params):
        for row in store.query(sql, params):
            out.setdefault((int(row["bucket"]), row["grp"]), {}).update(shape(row, step_s))
    for figures in out.values():
        if "cost_usd" in figures or "successes" in figures:  # not in rows of the other queries
            figures["cost_per_success_usd"] = ratio(figures.get("cost_usd") or 0.0, figures.get("successes") or 0.0)
    return out


def timeseries(
    store: Store,
    project: str,
    metric: str,
    start: float,
    end: float,
    step_s: int,
    group_by: str = "none",
    agent: str | None = None,
    model: str | None = None,
    *,
    complete_until: float | None = None,
) -> TimeSeries:
    """One metric per time bucket (and per agent or model); empty additive buckets are 0.

    A call counts in the bucket its span starts in, a run in the bucket its root starts in;
    buckets that end after ``complete_until`` (the collector's watermark; now where not given)
    are flagged partial.
    """
    return timeseries_set(
        store, project, [metric], start, end, step_s, group_by, agent, model, complete_until=complete_until
    )[0]


def timeseries_set(
    store: Store,
    project: str,
    metrics: Sequence[str],
    start: float,
    end: float,
    step_s: int,
    group_by: str = "none",
    agent: str | None = None,
    model: str | None = None,
    *,
    complete_until: float | None = None,
) -> list[TimeSeries]:
    """Several metrics over the same buckets, in the order asked, each as ``timeseries`` gives it,
    from one set of queries: metrics read from the same rows (the TTFT and TPOT quantiles, the
    runs' figures) cost one query together where asked one by one they cost one each."""
    for metric in metrics:
        choice("metric", metric, TIMESERIES_METRICS)
    choice("group_by", group_by, GROUPS)
    count = bucket_count(start, end, step_s)
    figures = _figures(store, project, metrics, start, end, step_s, group_by, agent, model)
    series = [_series(metric, figures, start, step_s, count, group_by) for metric in metrics]
    return _flag_partial(series, complete_until)


def _flag_partial(series: list[TimeSeries], complete_until: float | None) -> list[TimeSeries]:
    """Mark the buckets that end after the watermark (the clock where none is given): their
    figures may still grow."""
    until = time.time() if complete_until is None else complete_until
    for ts in series:
        ts.complete_until = complete_until
        for point in ts.points:
            point.partial = point.t + ts.step_s > until
    return series


def _series(metric: str, figures: Figures, start: float, step_s: int, count: int, group_by: str) -> TimeSeries:
    groups = sorted({g for (_, g), values in figures.items() if metric in values}) or (
        [""] if group_by == "none" else []
    )
    points = []
    for bucket in range(count):
        for group in groups:
            value = figures.get((bucket, group), {}).get(metric)
            if value is None and metric in ADDITIVE:
                value = 0.0
            points.append(SeriesPoint(t=start + bucket * step_s, group=group, value=value))
    return TimeSeries(metric=metric, unit=UNITS[metric], step_s=step_s, group_by=group_by, points=points)


def overview(
    store: Store,
    project: str,
    *,
    start: float,
    end: float,
    agent: str | None = None,
    model: str | None = None,
    idle_timeout_s: float = DEFAULT_RUN_IDLE_TIMEOUT_S,
    complete_until: float | None = None,
) -> Overview:
    """Every headline figure for [start, end) and for the range of equal length before it,
    how many of the range's runs are still running or never finished, and how many requests
    were refused before any work (no runs: in none of the figures).

    Totals count everything stored; the cost per hour is over the complete part of each range,
    its whole minutes before ``complete_until`` (the collector's watermark; now where not given),
    so a range's newest seconds, whose spans are still arriving, never read as a drop. Runs per
    minute is over the whole range: a run counts where its root starts, and its root arrives
    when the run ends, whatever the watermark."""
    length = end - start
    start_ns, end_ns = range_ns(start, end)
    until = time.time() if complete_until is None else complete_until
    figures = _figures(
        store, project, TIMESERIES_METRICS, start - length, end, length, "none", agent, model, idle_timeout_s
    )
    previous = _with_rates(
        figures.get((0, ""), {}), length, _tail(store, project, start - length, start, until, agent, model)
    )
    current = _with_rates(figures.get((1, ""), {}), length, _tail(store, project, start, end, until, agent, model))
    params = {
        "project": project,
        "start_ns": start_ns,
        "end_ns": end_ns,
        "idle_cutoff_ns": idle_cutoff_ns(idle_timeout_s),
    }
    states = store.query(runs_sql.OPEN_RUN_STATES, params)[0]
    refused = store.query(runs_sql.REFUSED_RUNS, params | {"agent": agent or ""})[0]["refused"]
    return Overview(
        start=start,
        end=end,
        figures={name: _headline(name, current, previous) for name in UNITS},
        running_runs=int(states["running"]),
        incomplete_runs=int(states["incomplete"]),
        refused_runs=int(refused),
        complete_until=complete_until,
    )


# The part of a range after the watermark: (its cost, the range's complete seconds).
Tail = tuple[float, float]


def _tail(
    store: Store, project: str, start: float, end: float, until: float, agent: str | None, model: str | None
) -> Tail:
    """What [start, end) holds from the minute of ``until`` on, to take out of its rates (whole
    minutes: the rollups answer, no spans are read; nothing to read where the range is complete;
    the whole range where none of it is)."""
    until = math.floor(until / 60) * 60
    if until >= end:
        return 0.0, end - start
    if until <= start:
        return 0.0, end - start  # nothing complete yet: the rate over the whole range, as it stands
    tail = _figures(store, project, ["cost_usd"], until, end, end - until, "none", agent, model)
    return tail.get((0, ""), {}).get("cost_usd") or 0.0, until - start


def _with_rates(figures: dict[str, float | None], length_s: float, tail: Tail) -> dict[str, float | None]:
    out = {name: (0.0 if name in ADDITIVE else None) for name in TIMESERIES_METRICS} | figures
    cost, seconds = tail
    out["runs_per_min"] = (out["runs"] or 0.0) / (length_s / 60)  # additive: never None
    out["cost_per_hour_usd"] = ((out["cost_usd"] or 0.0) - cost) / (seconds / 3600)
    return out


def _headline(name: str, current: dict[str, float | None], previous: dict[str, float | None]) -> Headline:
    value, before = current[name], previous[name]
    change = (value - before) / before if value is not None and before else None
    return Headline(value=value, previous=before, change=change, unit=UNITS[name])


# --- cost ------------------------------------------------------------------------------------
def cost_breakdown(
    store: Store,
    project: str,
    *,
    start: float,
    end: float,
    agent: str | None = None,
    model: str | None = None,
    gpu_hour_usd: float = 0.0,
    now: float | None = None,
    prices: PriceTable | None = None,
) -> CostBreakdown:
    """Where the money went in [start, end), what the levers saved (priced with ``prices``, when
    given), and the month's forecast."""
    params = call_params(project, start, end, agent, model)
    filters, source = call_filters(params)
    edges = has_edges(params, source)
    by = {
        key: [CostRow(**r) for r in store.query(cost_sql.cost_by(key, *filters, source, edges=edges), params)]
        for key in cost_sql.COST_KEYS
    }
    totals = store.query(cost_sql.cost_totals(*filters, source, edges=edges), params)[0]
    # under a model filter the levers count every call of the runs that used the model (``CostLevers``)
    lever_totals = (
        totals
        if model is None
        else store.query(
            cost_sql.cost_totals("1", scope_sql.where(metrics_sql.RUN_CALL_FILTERS, params), "spans"), params
        )[0]
    )
    mtd, projected = _month(store, project, agent, model, time.time() if now is None else now)
    runs = _figures(store, project, ["cost_per_success_usd"], start, end, end - start, "none", agent, model)
    tokens = int(totals["input_tokens"]) + int(totals["output_tokens"])
    return CostBreakdown(
        start=start,
        end=end,
        total_usd=float(totals["cost_usd"]),
        by_model=by["model"],
        by_agent=by["agent"],
        by_day=by["day"],
        month_to_date_usd=mtd,
        projected_month_usd=projected,
        top_runs=list_runs(
            store, project, start=start, end=end, sort="-cost_usd", limit=10, agent=agent, model=model
        ).items,
        levers=_levers(lever_totals),
        cost_per_success_usd=runs.get((0, ""), {}).get("cost_per_success_usd"),
        self_hosted=_self_hosted(store, project, start, end, gpu_hour_usd, tokens) if gpu_hour_usd > 0 else None,
        savings=lever_savings(store, params, prices=prices) if prices is not None else None,
    )


def whatif(
    store: Store,
    project: str,
    *,
    start: float,
    end: float,
    policy: str,
    prices: PriceTable,
    agent: str | None = None,
    **options: Any,
) -> WhatIf:
    """A cost policy's estimated effect on [start, end) (``collector.query.whatif``); a bad policy is ``InvalidQuery``."""
    try:
        return estimate_whatif(
            store, call_params(project, start, end, agent, None), policy=policy, prices=prices, **options
        )
    except ValueError as exc:
        raise InvalidQuery(str(exc)) from None


def _levers(row: dict[str, Any]) -> CostLevers:
    return CostLevers(
        tool_calls=row["tool_calls"],
        tool_cache_hits=row["tool_cache_hits"],
        tool_cache_hit_rate=ratio(row["tool_cache_hits"], row["tool_calls"]),
        tokens_saved=row["tokens_saved"],
        llm_calls=row["llm_calls"],
        small_model_calls=row["small_model_calls"],
        small_model_share=ratio(row["small_model_calls"], row["llm_calls"]),
    )


def _month(store: Store, project: str, agent: str | None, model: str | None, now: float) -> tuple[float, float]:
    """Month-to-date cost (UTC calendar month) and its linear projection to the month's end."""
    today = datetime.fromtimestamp(now, UTC)
    first = datetime(today.year, today.month, 1, tzinfo=UTC).timestamp()
    month_s = monthrange(today.year, today.month)[1] * 86_400
    params = call_params(project, first, max(now, first + 1), agent, model)
    filters, source = call_filters(params)
    mtd = float(
        store.query(cost_sql.cost_totals(*filters, source, edges=has_edges(params, source)), params)[0]["cost_usd"]
    )
    elapsed = max(now - first, 3600.0)  # a projection from the first minutes would be noise
    return mtd, mtd * month_s / elapsed


def _self_hosted(
    store: Store, project: str, start: float, end: float, gpu_hour_usd: float, tokens: int
) -> SelfHostedCost:
    """Cost per 1k tokens from measured GPU time; per load level from per-minute samples."""
    params = {"project": project, "start_ms": int(start * 1e3), "end_ms": int(end * 1e3)}
    gpu_seconds = float(store.query(cost_sql.GPU_SECONDS, params)[0]["gpu_seconds"] or 0.0)
    per_1k = ratio(gpu_hour_usd * gpu_seconds / 3600, tokens / 1000)
    by_load = [
        {
            "running_requests": float(r["running"]),
            "cost_per_1k_tokens_usd": gpu_hour_usd * r["gpu_seconds"] / 3600 / (r["tokens"] / 1000),
        }
        for r in store.query(cost_sql.COST_BY_LOAD, {**params, "start_ns": int(start * 1e9), "end_ns": int(end * 1e9)})
        if r["tokens"]
    ]
    return SelfHostedCost(
        gpu_hour_usd=gpu_hour_usd,
        gpu_seconds=gpu_seconds,
        tokens_served=tokens,
        cost_per_1k_tokens_usd=per_1k,
        by_load=by_load,
    )
