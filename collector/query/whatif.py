"""What-if: a cost policy applied to the runs of a past range, estimated from their stored spans.

- ``route``: the LLM calls of the steps named ``step`` go to ``model`` (the same tokens, priced there);
- ``cap_steps``: runs stop after ``cap`` steps of work (a run that needed more keeps its first
  ``cap`` steps; one that fit keeps its closing step);
- ``evolving_report``: each LLM call sees a bounded context, the run's smallest prompt plus
  ``bound`` tokens of report, instead of the whole history (output tokens unchanged).

The interval is 1.96 standard errors of the total change, from the spread of the per-run changes:
how much the figure would move with another sample of the same workload. It does not cover
what the policy changes beyond tokens (a cheaper model's different answers, a capped run's
missing report); the ``bench/levers.py`` benchmark measures those against a real run.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from agentwatch_api.schemas import WHATIF_POLICIES, WhatIf
from agentwatch_platform.collector.query.levers import price_params
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.sql import levers as levers_sql
from agentwatch_platform.collector.storage.sql import scope as scope_sql

if TYPE_CHECKING:
    from agentwatch import PriceTable

DEFAULT_BOUND = (
    100  # tokens of report a call carries: what the reference agent's notes hold in a typical run (bench/levers.py)
)
Z95 = 1.96


def whatif(
    store: Store,
    params: dict[str, Any],
    *,
    policy: str,
    prices: PriceTable,
    step: str | None = None,
    model: str | None = None,
    cap: int | None = None,
    bound: int = DEFAULT_BOUND,
) -> WhatIf:
    """The policy's estimate over the range of ``params``; a bad policy is a ``ValueError`` saying why."""
    sql, extra, description, basis = _plan(policy, step=step, model=model, cap=cap, bound=bound)
    filters = scope_sql.where({"agent": "agent_name = {agent:String}"}, params)
    bound_params = {**params, **extra, **price_params(store, params, prices, also=[model] if model else [])}
    if model and model not in bound_params["keys"]:
        raise ValueError(f"what-if: model {model!r} has no price in the collector's price table")
    row = store.query(sql(filters), bound_params)[0]
    return _answer(row, params, policy, description, basis, prices.version)


def _plan(
    policy: str, *, step: str | None, model: str | None, cap: int | None, bound: int
) -> tuple[Any, dict[str, Any], str, str]:
    if policy == "route":
        if not step or not model:
            raise ValueError("what-if route: needs step (a step name, e.g. research) and model (e.g. sim-small)")
        return (
            levers_sql.whatif_route,
            {"step": step, "model": model},
            f"route '{step}' steps to {model}",
            "the same tokens of those steps' LLM calls priced on the new model",
        )
    if policy == "cap_steps":
        if cap is None or cap < 1:
            raise ValueError(f"what-if cap_steps: cap must be a step count >= 1, got {cap!r}")
        return (
            levers_sql.whatif_cap,
            {"cap": cap},
            f"cap runs at {cap} steps",
            "runs that needed more steps keep the cost of their first steps; the others are unchanged",
        )
    if policy == "evolving_report":
        if bound < 1:
            raise ValueError(f"what-if evolving_report: bound must be >= 1 token, got {bound}")
        return (
            levers_sql.whatif_bounded,
            {"bound": bound},
            f"evolving report (context bounded to {bound} tokens) instead of the whole history",
            "each LLM call's input cut to the run's smallest prompt plus the bound; output unchanged",
        )
    raise ValueError(f"what-if: policy must be one of {', '.join(WHATIF_POLICIES)}, got {policy!r}")


def _answer(
    row: dict[str, Any], params: dict[str, Any], policy: str, description: str, basis: str, version: str
) -> WhatIf:
    actual, estimate, runs = float(row["actual_usd"]), float(row["estimate_usd"]), int(row["runs"])
    change = estimate - actual
    variance = max(float(row["change_sq"]) / runs - (change / runs) ** 2, 0.0) if runs else 0.0
    standard_error = math.sqrt(variance * runs * runs / (runs - 1)) if runs > 1 else 0.0
    return WhatIf(
        policy=policy,
        description=description,
        basis=basis,
        start=params["start_ns"] / 1e9,
        end=params["end_ns"] / 1e9,
        runs=runs,
        runs_changed=int(row["runs_changed"]),
        calls_changed=int(row["calls_changed"]),
        actual_usd=actual,
        estimate_usd=estimate,
        change_usd=change,
        change_ratio=change / actual if actual else None,
        uncertainty_usd=Z95 * standard_error,
        actual_tokens=int(row["actual_tokens"]),
        estimate_tokens=int(row["estimate_tokens"]),
        price_version=version,
    )
