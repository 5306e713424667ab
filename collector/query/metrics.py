"""Metrics: every figure of ``TIMESERIES_METRICS`` per time bucket (and per agent or model), from
as few queries as it takes, and the time series the API and the alert evaluator read.

A call counts in the bucket its span starts in, a run in the bucket its root starts in; where a
range's figures come from (rollups, the spans of cut minutes, closed runs) is ``query.ranges``'.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from agentwatch_api.schemas import TIMESERIES_METRICS, SeriesPoint, TimeSeries, finite_total
from agentwatch_platform.collector.query.ranges import (
    DEFAULT_RUN_IDLE_TIMEOUT_S,
    bucket_count,
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
    whole_hours,
)
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.sql import metrics as metrics_sql
from agentwatch_platform.collector.storage.sql import runs as runs_sql
from agentwatch_platform.collector.storage.sql import scope as scope_sql

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


Figures = dict[tuple[int, str], dict[str, float | None]]


def _span_figures(row: dict[str, Any], step_s: float) -> dict[str, float | None]:
    return (
        {
            "cost_usd": finite_total(float(row["cost_usd"])),
            "input_tokens": float(row["input_tokens"]),
            "output_tokens": float(row["output_tokens"]),
            "tokens_per_s": row["output_tokens"] / step_s,
            "tool_calls": float(row["tool_calls"]),
            "tool_failure_rate": ratio(row["tool_failures"], row["tool_calls"]),
            "timeout_rate": ratio(row["timeouts"], row["calls"]),
            "tool_cache_hit_rate": ratio(row["tool_cache_hits"], row["tool_calls"]),
            "small_model_share": ratio(row["small_model_calls"], row["llm_calls"]),
        }
        | _quantile_figures(row)
        | ({TAIL_COST: finite_total(float(row[TAIL_COST]))} if TAIL_COST in row else {})
    )


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
            group_by,
            *filters,
            source=source,
            quantiles=quantiles,
            edges=has_edges(params, source),
            tail="tail_s" in params,
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


def bucket_figures(
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
    *,
    tail_s: int | None = None,
) -> Figures:
    """Every figure ``metrics`` needs, per (bucket, group), from as few queries as it takes; with
    ``tail_s`` (a whole minute) also each bucket's cost from that minute on (``TAIL_COST``)."""
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
    if tail_s is not None:
        params |= _tail_params(params, tail_s)
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


TAIL_COST = "tail_cost_usd"
"""The figure of a bucket's cost from ``bucket_figures``' ``tail_s`` on: not a metric of its own."""


def _tail_params(params: dict[str, Any], tail_s: int) -> dict[str, Any]:
    """The minute ``tail_s`` for ``sql.metrics.span_metrics``' tail, its hour read from minutes
    (a span_hours row holding it could not be split there)."""
    cut_hours = sorted({*params["cut_hours"], tail_s // 3600 * 3600})
    return {"tail_s": tail_s, "tail_ns": tail_s * 10**9, "cut_hours": cut_hours} | whole_hours(
        params | {"cut_hours": cut_hours}
    )


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
    figures = bucket_figures(store, project, metrics, start, end, step_s, group_by, agent, model)
    series = [_series(metric, figures, start, step_s, count, group_by) for metric in metrics]
    return flag_partial(series, complete_until)


def flag_partial(series: list[TimeSeries], complete_until: float | None) -> list[TimeSeries]:
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
