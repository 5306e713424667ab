"""The overview: every headline figure of a range beside the range of equal length before it,
with the runs still open and the requests refused, as the dashboard's first page shows them.

Rates are over the complete part of a range (before the collector's watermark), so its newest
seconds, whose spans are still arriving, never read as a drop.
"""

from __future__ import annotations

import math
import time

from agentwatch_api.schemas import TIMESERIES_METRICS, Headline, Overview
from agentwatch_platform.collector.query.metrics import ADDITIVE, TAIL_COST, UNITS, bucket_figures
from agentwatch_platform.collector.query.ranges import DEFAULT_RUN_IDLE_TIMEOUT_S, idle_cutoff_ns, range_ns
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.sql import runs as runs_sql


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
    until = math.floor((time.time() if complete_until is None else complete_until) / 60) * 60
    partial = start - length < until < start or start < until < end  # a range is complete only in part
    figures = bucket_figures(
        store,
        project,
        TIMESERIES_METRICS,
        start - length,
        end,
        length,
        "none",
        agent,
        model,
        idle_timeout_s,
        tail_s=until if partial else None,
    )
    before, now = figures.get((0, ""), {}), figures.get((1, ""), {})
    previous = _with_rates(before, length, _tail(before, start - length, start, until))
    current = _with_rates(now, length, _tail(now, start, end, until))
    params = {
        "project": project,
        "start_ns": start_ns,
        "end_ns": end_ns,
        "idle_cutoff_ns": idle_cutoff_ns(idle_timeout_s),
        "agent": agent or "",
    }
    states = store.query(runs_sql.OPEN_AND_REFUSED_RUNS, params)[0]
    return Overview(
        start=start,
        end=end,
        figures={name: _headline(name, current, previous) for name in UNITS},
        running_runs=int(states["running"]),
        incomplete_runs=int(states["incomplete"]),
        refused_runs=int(states["refused"]),
        complete_until=complete_until,
    )


# The part of a range after the watermark: (its cost, the range's complete seconds).
Tail = tuple[float, float]


def _tail(figures: dict[str, float | None], start: float, end: float, until: int) -> Tail:
    """What [start, end) holds from the minute ``until`` on, to take out of its rates (its cost
    from the figures' ``TAIL_COST``, read with the range's figures); nothing where the range is
    complete; the whole range where none of it is."""
    if until >= end:
        return 0.0, end - start
    if until <= start:
        return 0.0, end - start  # nothing complete yet: the rate over the whole range, as it stands
    return figures.get(TAIL_COST) or 0.0, until - start


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
