"""Metric names in words and units: what every reader of the collector's figures calls them.

The query API and the alert rules name a figure by an identifier (``run_latency_p50``,
``tool_failure_rate``); a person reads "median run latency" in seconds and "tool failure rate" in
percent. The dashboard (legends, columns, cards) and the alerts' notifications (Slack, e-mail, the
log, the webhook's message) both say a metric from here, so it is called the same wherever it is
shown, and a new metric gets its words once. Standard library only.

Units: ``USD``, ``s`` (seconds), ``ratio`` (a share, 0..1, shown as percent), ``tokens/s``,
``/min`` and ``""`` (a plain count or score). ``figure`` says a value in its unit as plain text, for
lines a person reads outside the dashboard (notifications, the demo's report); the dashboard's
cards and tables have their compact formatting of their own (``dashboard.formatting``).
"""

from __future__ import annotations

import math
from typing import NamedTuple

USD, SECONDS, RATIO, COUNT = "USD", "s", "ratio", ""


class Label(NamedTuple):
    """A metric as a person reads it: its words and its unit."""

    words: str
    unit: str


METRICS: dict[str, Label] = {
    # the query API's series and figures (agentwatch_api.schemas.TIMESERIES_METRICS and more)
    "runs": Label("runs", COUNT),
    "cost_usd": Label("cost", USD),
    "cost_per_success_usd": Label("cost per successful task", USD),
    "max_run_cost_usd": Label("costliest run", USD),
    "input_tokens": Label("input tokens", COUNT),
    "output_tokens": Label("output tokens", COUNT),
    "cached_tokens": Label("cached tokens", COUNT),
    "tokens_per_s": Label("output tokens per second", "tokens/s"),
    "run_latency_p50": Label("median run latency", SECONDS),
    "run_latency_p95": Label("p95 run latency", SECONDS),
    "ttft_p50": Label("median time to first token", SECONDS),
    "ttft_p95": Label("p95 time to first token", SECONDS),
    "tpot_p50": Label("median time per output token", SECONDS),
    "tpot_p95": Label("p95 time per output token", SECONDS),
    "steps_per_run": Label("steps per run", COUNT),
    "cost_per_run": Label("cost per run", USD),
    "max_steps": Label("most steps in a run", COUNT),
    "tool_calls": Label("tool calls", COUNT),
    "tool_failure_rate": Label("tool failure rate", RATIO),
    "error_rate": Label("error rate", RATIO),
    "timeout_rate": Label("timeout rate", RATIO),
    "success_rate": Label("task success rate", RATIO),
    "feedback_score": Label("mean feedback score", COUNT),
    "tool_cache_hit_rate": Label("tool cache hit rate", RATIO),
    "small_model_share": Label("share of LLM calls on the small model", RATIO),
    # the alert rules' own figures (alerts: budget, run states, versions)
    "month_end_cost_usd": Label("month-end cost at the recent pace", USD),
    "projected_month_cost_usd": Label("month-end cost at the month's pace", USD),
    "oldest_running_run_s": Label("age of the oldest running run", SECONDS),
    "incomplete_run_rate": Label("incomplete run rate", RATIO),
    "version_cost_per_run_change": Label("change in cost per run from the previous version", RATIO),
    "version_tokens_per_run_change": Label("change in tokens per run from the previous version", RATIO),
    "version_steps_per_run_change": Label("change in steps per run from the previous version", RATIO),
    "version_latency_change": Label("change in run latency from the previous version", RATIO),
    "version_success_rate_change": Label("change in task success rate from the previous version", RATIO),
    "version_feedback_change": Label("change in mean feedback score from the previous version", RATIO),
}
_SUFFIXES = (("_usd", ""), ("_s", ""), ("_p50", " (median)"), ("_p95", " (p95)"), ("_p99", " (p99)"))
_UNITS = {"usd": USD, "$": USD, "seconds": SECONDS, "sec": SECONDS, "ratio": RATIO, "fraction": RATIO, "%": RATIO}


def metric_label(metric: str) -> str:
    """A metric or column name in words: ``run_latency_p50`` -> "median run latency"; an unknown
    one loses its unit suffix and underscores (``mean_cost_usd`` -> "mean cost")."""
    if metric in METRICS:
        return METRICS[metric].words
    words = metric
    for suffix, said in _SUFFIXES:
        if words.endswith(suffix):
            words = words.removesuffix(suffix) + said
    return words.replace("_", " ").strip()


def unit_of(metric: str, api_unit: str = "") -> str:
    """The unit of a figure: known from its name, else what the API said it is in."""
    if metric in METRICS:
        return METRICS[metric].unit
    if metric.endswith("_usd") or metric.startswith("cost"):
        return USD
    if metric.endswith("_rate") and "token" not in metric:
        return RATIO
    if metric.startswith(("run_latency", "ttft", "tpot", "duration")):
        return SECONDS
    if metric == "runs_per_min":
        return "/min"
    return _UNITS.get(api_unit.lower(), api_unit)


def number(value: float | None) -> str:
    """Four significant digits, thousands separated, never in scientific notation ("1,755,020", not "1.755e+06")."""
    if value is None:
        return "no data"
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    decimals = max(0, 3 - math.floor(math.log10(abs(value))))
    return f"{value:.{decimals}f}".rstrip("0").rstrip(".")


def figure(metric: str, value: float | None) -> str:
    """A value of ``metric`` in its unit: "$41.2", "32.5 %", "1.24 s", "812 tokens/s", "7"."""
    if value is None or not math.isfinite(value):
        return number(value)
    unit = unit_of(metric)
    if unit == USD:
        return ("-" if value < 0 else "") + "$" + number(abs(value))
    if unit == RATIO:
        return f"{number(value * 100)} %"
    if unit == SECONDS:
        return f"{number(value)} s"
    if unit.startswith("/"):
        return f"{number(value)}{unit}"
    return f"{number(value)} {unit}".rstrip()
