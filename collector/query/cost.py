"""Cost: where the money of a range went (by model, agent and day, the top runs), what the
levers saved, the month's forecast, the self-hosted cost per token, and what-if estimates of a
cost policy (``query.whatif``).

Totals read the same call-level sources as the metrics (``query.ranges.call_params``), so the
cost card and the cost time series agree.
"""

from __future__ import annotations

import time
from calendar import monthrange
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from agentwatch_api.schemas import (
    CostBreakdown,
    CostLevers,
    CostRow,
    SelfHostedCost,
    WhatIf,
)
from agentwatch_platform.collector.query.levers import lever_savings
from agentwatch_platform.collector.query.metrics import bucket_figures
from agentwatch_platform.collector.query.ranges import (
    InvalidQuery,
    call_filters,
    call_params,
    has_edges,
    ratio,
)
from agentwatch_platform.collector.query.runs import list_runs
from agentwatch_platform.collector.query.whatif import whatif as estimate_whatif
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.sql import cost as cost_sql
from agentwatch_platform.collector.storage.sql import metrics as metrics_sql
from agentwatch_platform.collector.storage.sql import scope as scope_sql

if TYPE_CHECKING:
    from agentwatch import PriceTable


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
    runs = bucket_figures(store, project, ["cost_per_success_usd"], start, end, end - start, "none", agent, model)
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
