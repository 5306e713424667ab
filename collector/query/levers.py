"""Measured savings of the cost levers over a range, each against its counterfactual.

- cache: the prompt cache's cached input tokens priced at the model's input price instead of its
  cached price; tool-cache hits are counted with the tokens they served (a tool call has no
  price of its own);
- routing: each call an agent routed (``agentwatch.lever.name = routing``) priced with the same
  tokens on the model it would have used (``agentwatch.lever.baseline_model``);
- degradation: each degraded run's projected cost at the switch (``projected_cost_usd``, recorded
  by the agent) against what the run cost in the end;
- rate limiting: runs delayed (and for how long) or refused; a refused request is estimated at
  the mean cost of the same user's runs of the same agent in the range that were not refused (the
  agent's, for a user without one), at most the cost budget its run recorded: a user whose runs
  may cost $0.002 each is never said to have saved the price of a spike run.

Each lever's saving is its counterfactual minus what the calls or runs it touched cost, and never
more than the counterfactual itself.

Counterfactuals are priced with the collector's ``agentwatch.PriceTable`` (the one that prices
every span at ingest, ``AGENTWATCH_PRICES_FILE``); its version is part of the answer.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from agentwatch_api.schemas import LeverQuality, LeverSaving, LeverSavings
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.sql import levers as levers_sql
from agentwatch_platform.collector.storage.sql import metrics as metrics_sql
from agentwatch_platform.collector.storage.sql import scope as scope_sql

if TYPE_CHECKING:
    from agentwatch import PriceTable

BASIS = {
    "cache": "cached input tokens at the model's input price instead of its cached price",
    "routing": "each routed call's tokens priced on the model it would have used",
    "degradation": "each degraded run's projected cost at the switch against its final cost",
    "rate_limit": "each refused request at the mean cost of its user's served runs of the agent in the range "
    "(else the agent's), capped at its run's cost budget",
}


@functools.lru_cache(maxsize=4)
def price_table(prices_file: str = "") -> PriceTable:
    """The collector's price table (the same overrides that price spans at ingest), built once."""
    from agentwatch import PriceTable

    return PriceTable.from_file(prices_file) if prices_file else PriceTable()


def price_params(
    store: Store, params: dict[str, Any], prices: PriceTable, *, also: list[str] | None = None
) -> dict[str, Any]:
    """``keys``/``input``/``output``/``cached`` for every model the range's LLM calls name (and ``also``)."""
    models = sorted({*store.query(levers_sql.LEVER_MODELS, params)[0]["models"], *(also or [])})
    found = [(m, p) for m in models if (p := prices.price(m)) is not None]
    return {
        "keys": [m for m, _ in found],
        "input": [p.input for _, p in found],
        "output": [p.output for _, p in found],
        "cached": [p.cached for _, p in found],
    }


def lever_savings(store: Store, params: dict[str, Any], *, prices: PriceTable) -> LeverSavings:
    """Every lever's saving in the range of ``params`` (those of ``sql.metrics.span_source``)."""
    bound = {**params, **price_params(store, params, prices)}
    calls = store.query(levers_sql.span_levers(scope_sql.where(metrics_sql.SPAN_FILTERS, params)), bound)[0]
    runs = store.query(levers_sql.run_levers(scope_sql.where({"agent": "agent = {agent:String}"}, params)), bound)
    levers = [_cache(calls), _routing(calls), _degradation(runs), _rate_limit(runs)]
    return LeverSavings(
        price_version=prices.version,
        total_saving_usd=sum(lv.saving_usd for lv in levers),
        levers=levers,
        quality=_quality(runs),
    )


def _saving(lever: str, events: int, actual: float, counterfactual: float, **detail: float) -> LeverSaving:
    return LeverSaving(
        lever=lever,
        events=events,
        actual_usd=actual,
        counterfactual_usd=counterfactual,
        saving_usd=min(counterfactual - actual, counterfactual),
        basis=BASIS[lever],
        detail=detail,
    )


def _cache(row: dict[str, Any]) -> LeverSaving:
    actual = float(row["cache_calls_usd"])
    return _saving(
        "cache",
        int(row["tool_cache_hits"]) + int(row["cache_calls"]),
        actual,
        actual + float(row["prompt_cache_saving_usd"]),
        tool_cache_hits=row["tool_cache_hits"],
        tool_tokens_avoided=row["tool_tokens_avoided"],
        cached_calls=row["cache_calls"],
        cached_tokens=row["cache_tokens"],
    )


def _routing(row: dict[str, Any]) -> LeverSaving:
    return _saving(
        "routing",
        int(row["routed_calls"]),
        float(row["routed_usd"]),
        float(row["routed_counterfactual_usd"]),
        routed_tokens=row["routed_tokens"],
        unpriced_calls=row["routed_unpriced"],
    )


def _degradation(rows: list[dict[str, Any]]) -> LeverSaving:
    mine = [r for r in rows if r["degraded"] and not r["refused"]]
    return _saving(
        "degradation",
        sum(int(r["projected_runs"]) for r in mine),
        sum(float(r["projected_runs_usd"]) for r in mine),
        sum(float(r["projected_usd"]) for r in mine),
        degraded_runs=sum(int(r["runs"]) for r in mine),
    )


def _rate_limit(rows: list[dict[str, Any]]) -> LeverSaving:
    """Refused requests priced from what their user's (else their agent's) served runs cost, capped
    at their budget; the refused requests' own cost (none: no work) is the spend."""
    served = [r for r in rows if not r["refused"]]
    by_user, by_agent = _means(served, ("agent", "run_user")), _means(served, ("agent",))
    estimate, basis = 0.0, {"user_mean": 0, "agent_mean": 0, "unpriced": 0, "budget_capped": 0}
    refused = [r for r in rows if r["refused"]]
    for row in refused:
        price, how = _refusal_price(row, by_user, by_agent)
        estimate += int(row["runs"]) * price
        basis[how] += int(row["runs"])
    delayed = sum(int(r["delayed"]) for r in rows)
    return _saving(
        "rate_limit",
        sum(int(r["runs"]) for r in refused) + delayed,
        sum(float(r["cost_usd"]) for r in refused),
        estimate,
        refused_runs=sum(int(r["runs"]) for r in refused),
        delayed_runs=delayed,
        delay_s=sum(float(r["delay_s"]) for r in rows),
        **{f"priced_at_{k}": v for k, v in basis.items()},
    )


def _refusal_price(
    row: dict[str, Any], by_user: dict[tuple[str, ...], float], by_agent: dict[tuple[str, ...], float]
) -> tuple[float, str]:
    """What one refused request of ``row`` would have cost, and how it was priced."""
    mean, how = by_user.get((row["agent"], row["run_user"])), "user_mean"
    if mean is None:
        mean, how = by_agent.get((row["agent"],)), "agent_mean"
    if mean is None:
        return 0.0, "unpriced"  # nobody's run of the agent was served in the range
    budget = float(row["budget"])
    return (budget, "budget_capped") if 0 < budget < mean else (mean, how)


def _means(rows: list[dict[str, Any]], key: tuple[str, ...]) -> dict[tuple[str, ...], float]:
    """Mean run cost per ``key`` (columns of ``rows``, which are run groups with runs and cost)."""
    runs: dict[tuple[str, ...], int] = {}
    cost: dict[tuple[str, ...], float] = {}
    for row in rows:
        k = tuple(row[c] for c in key)
        runs[k] = runs.get(k, 0) + int(row["runs"])
        cost[k] = cost.get(k, 0.0) + float(row["cost_usd"])
    return {k: cost[k] / n for k, n in runs.items() if n}


def _quality(rows: list[dict[str, Any]]) -> list[LeverQuality]:
    """Success rate, feedback and mean cost of degraded runs beside the others (refused runs in neither)."""
    out = []
    for name, degraded in (("degraded", 1), ("not degraded", 0)):
        mine = [r for r in rows if r["degraded"] == degraded and not r["refused"]]
        runs = sum(int(r["runs"]) for r in mine)
        fb_n = sum(int(r["fb_n"]) for r in mine)
        out.append(
            LeverQuality(
                group=name,
                runs=runs,
                feedback_count=fb_n,
                success_rate=sum(int(r["successes"]) for r in mine) / runs if runs else None,
                feedback_score=sum(float(r["fb_sum"]) for r in mine) / fb_n if fb_n else None,
                mean_cost_usd=sum(float(r["cost_usd"]) for r in mine) / runs if runs else None,
            )
        )
    return out
