"""Figures about runs that have not finished, for the stuck-run and crash-rate rules.

A run is ``running`` from its first span until its root arrives, and ``incomplete`` once no span
arrived for ``AGENTWATCH_RUN_IDLE_TIMEOUT_S`` without a root (``collector/ingest/live_runs.py``). These
are figures *now*, not per bucket, judged with a threshold:

- ``oldest_running_run_s``: how long the oldest still-running run has been running (0 when
  none is): a runaway or hung agent that the SDK's budget guard cannot see (no budget set, a
  tool call that never returns, another SDK);
- ``incomplete_run_rate``: of the runs that ended in the last ``window`` (their root arrived)
  or became incomplete in it, the share that became incomplete: agents that crash mid-run.
  ``min_runs`` counts those ended runs.

Runs are read from their last day of spans: a run that has been running for more than a day
is judged on that day (its age is at least a day, which any sensible threshold is below).
"""

from __future__ import annotations

from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.sql import alerts as alerts_sql

RUN_STATE_METRICS = ("oldest_running_run_s", "incomplete_run_rate")
LOOKBACK_S = 86_400
GROUPS = ("none", "agent")


def run_state_values(
    store: Store,
    project: str,
    metric: str,
    *,
    now: float,
    window_s: float,
    idle_timeout_s: float,
    group_by: str = "none",
    agent: str | None = None,
    min_runs: int = 0,
) -> dict[str, float | None]:
    """``metric`` per group ("" for the project) among the agents with runs in the last day;
    ``None`` (no data) for a rate over fewer than ``max(min_runs, 1)`` ended runs."""
    if metric not in RUN_STATE_METRICS:
        raise ValueError(f"metric must be one of {', '.join(RUN_STATE_METRICS)}, not {metric!r}")
    if group_by not in GROUPS:
        raise ValueError(f"group_by must be one of {', '.join(GROUPS)} for {metric}, not {group_by!r}")
    now_ns = int(now * 1e9)
    params = {
        "project": project,
        "by_agent": int(group_by == "agent"),
        "agent": agent or "",
        "now_ns": now_ns,
        "since_ns": now_ns - int(LOOKBACK_S * 1e9),
        "idle_cutoff_ns": now_ns - int(idle_timeout_s * 1e9),
        "window_ns": int(window_s * 1e9),
    }
    return {row["grp"]: _value(metric, row, min_runs) for row in store.query(alerts_sql.RUN_STATES, params)}


def absent_value(metric: str) -> float | None:
    """The figure of a scope without a run in the last day: no run is running (0 s), and no run
    ended (no data: a rate of nothing)."""
    return 0.0 if metric == "oldest_running_run_s" else None


def _value(metric: str, row: dict, min_runs: int) -> float | None:
    if metric == "oldest_running_run_s":
        return float(row["oldest_running_s"])
    ended = int(row["became_incomplete"]) + int(row["finished"])
    return int(row["became_incomplete"]) / ended if ended >= max(min_runs, 1) else None
