"""Cost-lever decisions on spans: ``agentwatch.record_lever`` and ``lever_attributes``.

An agent that spends less on purpose (routes a call to a cheaper model, degrades a run under
budget pressure, queues or refuses a request, serves a cached result) says so on the span where
the decision took effect, with what the collector needs to price the counterfactual::

    with agentwatch.llm_attributes(agentwatch.lever_attributes(
            "routing", reason="easy decision", change="sim-large -> sim-small", baseline_model="sim-large")):
        client.chat.completions.create(model="sim-small", ...)

    agentwatch.record_lever("degradation", reason="budget 85% spent", change="react -> iterative",
                            projected_cost_usd=0.40, cost_so_far_usd=0.31)

Arguments are checked (a bad one is a ``ValueError`` naming it); recording itself never raises.
Nothing here runs unless the agent decides something, so the SDK's hot path is unchanged.
"""

from __future__ import annotations

import math
from typing import Any

from opentelemetry import trace

from . import semconv as sc
from ._decorators import _RUN
from ._stats import internal_error


def lever_attributes(
    lever: str,
    *,
    reason: str,
    change: str,
    baseline_model: str | None = None,
    projected_cost_usd: float | None = None,
    cost_so_far_usd: float | None = None,
    delay_s: float | None = None,
    refused: bool | None = None,
) -> dict[str, Any]:
    """The ``agentwatch.lever.*`` attributes of one decision (for ``llm_attributes`` or a span)."""
    if lever not in sc.LEVERS:
        raise ValueError(f"lever {lever!r}: must be one of {', '.join(sc.LEVERS)}")
    for name, text in (("reason", reason), ("change", change)):
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"lever {lever!r}: {name} must be a non-empty string, got {text!r}")
    attributes: dict[str, Any] = {sc.AW_LEVER: lever, sc.AW_LEVER_REASON: reason, sc.AW_LEVER_CHANGE: change}
    if baseline_model is not None:
        if not isinstance(baseline_model, str) or not baseline_model:
            raise ValueError(f"lever {lever!r}: baseline_model must be a model name, got {baseline_model!r}")
        attributes[sc.AW_LEVER_BASELINE_MODEL] = baseline_model
    for key, name, value in (
        (sc.AW_LEVER_PROJECTED_COST_USD, "projected_cost_usd", projected_cost_usd),
        (sc.AW_LEVER_COST_SO_FAR_USD, "cost_so_far_usd", cost_so_far_usd),
        (sc.AW_LEVER_DELAY_S, "delay_s", delay_s),
    ):
        if value is not None:
            attributes[key] = _amount(lever, name, value)
    if refused is not None:
        attributes[sc.AW_LEVER_REFUSED] = bool(refused)
    return attributes


def record_lever(lever: str, *, reason: str, change: str, **figures: Any) -> bool:
    """Record a decision on the current span (and mark a degraded run, or a refused one: its
    outcome is then ``refused`` unless ``set_outcome`` says otherwise); False without a span.

    ``figures`` are ``lever_attributes``' keyword arguments (baseline_model, projected_cost_usd,
    cost_so_far_usd, delay_s, refused).
    """
    attributes = lever_attributes(lever, reason=reason, change=change, **figures)
    try:
        span = trace.get_current_span()
        if not span.is_recording():
            return False
        span.set_attributes(attributes)
        run = _RUN.get()
        if run is not None and lever == "degradation":
            run.degraded = True
        if run is not None and figures.get("refused"):
            run.refused = f"{lever}: {reason}"
        return True
    except Exception as bug:  # ours: the agent goes on without the record
        internal_error("recording a cost lever", bug)
        return False


def _amount(lever: str, name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ValueError(f"lever {lever!r}: {name} must be a finite non-negative number, got {value!r}")
    return float(value)
