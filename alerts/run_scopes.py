"""Metrics per user id, per session id and per agent version, for rules with ``scope: {user: "*"}``,
``{session: "*"}`` or a version (``{version: "*"}`` or ``{version: "1.1"}``; runs carry ``user.id``,
``session.id`` and ``service.version``), and the top-k cut of scopes.

Per user, session or version the figures are of whole runs in the bucket each run *started* in (a
run's user and version are on its root span, not on every LLM call): ``cost_usd`` (their cost),
``runs``, ``cost_per_run`` and ``steps_per_run`` (means over the bucket's runs),
``max_run_cost_usd``, ``max_steps``. Runs without a user (session, version) are left out.

The rollups the other metrics read have no user, session or version column; ``runs_agg`` has all
three, which is why these scopes read whole runs and take only these metrics.

Top-k: a project can have thousands of users. A rule's ``top_k`` judges, each round, the k
scopes with the highest value now (the bucket being judged, its partial one included), plus
every scope with an open incident (so it can resolve): each user is an incident of its own, so
one noisy user cannot hide another, and the number judged stays bounded.
"""

from __future__ import annotations

import math
from collections.abc import Collection

from agentwatch_api.schemas import SeriesPoint, TimeSeries
from agentwatch_platform.collector.query.metrics import flag_partial
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.sql import alerts as alerts_sql

RUN_SCOPE_KEYS = ("user", "session", "version")
RUN_SCOPE_METRICS = ("cost_usd", "runs", "cost_per_run", "steps_per_run", "max_run_cost_usd", "max_steps")
# metrics read only per user, session or version (no rollup has them)
RUN_SCOPE_ONLY = ("cost_per_run",)
UNITS = {
    "cost_usd": "USD",
    "runs": "runs",
    "cost_per_run": "USD",
    "steps_per_run": "steps",
    "max_run_cost_usd": "USD",
    "max_steps": "steps",
}


def run_scope_series(
    store: Store,
    project: str,
    metric: str,
    start: float,
    end: float,
    step_s: int,
    key: str,
    agent: str | None = None,
    *,
    complete_until: float | None = None,
) -> TimeSeries:
    """``metric`` per bucket and per user (``key='user'``), session or version; buckets without a
    run are absent. Buckets that end after ``complete_until`` (the collector's watermark; now where
    not given) are flagged partial, as ``collector.query.metrics`` flags them."""
    if key not in RUN_SCOPE_KEYS:
        raise ValueError(f"key must be one of {', '.join(RUN_SCOPE_KEYS)}, not {key!r}")
    if metric not in RUN_SCOPE_METRICS:
        raise ValueError(f"per {key}, metric must be one of {', '.join(RUN_SCOPE_METRICS)}, not {metric!r}")
    params = {
        "project": project,
        "key": key,
        "agent": agent or "",
        "start_ns": int(start * 1e9),
        "end_ns": int(end * 1e9),
        "step_ns": int(step_s * 1e9),
    }
    points = [
        SeriesPoint(t=start + int(row["bucket"]) * step_s, group=row["grp"], value=float(row[metric]))
        for row in store.query(alerts_sql.RUN_SCOPE_SERIES, params)
    ]
    series = TimeSeries(
        metric=metric,
        unit=UNITS[metric],
        step_s=step_s,
        group_by=key,
        points=sorted(points, key=lambda p: (p.t, p.group)),
    )
    return flag_partial([series], complete_until)[0]


def top_k(
    groups: dict[str, list[float | None]], k: int, *, keep: Collection[str] = ()
) -> dict[str, list[float | None]]:
    """The ``k`` groups with the highest value now (the larger of the partial and the last
    complete bucket), plus those in ``keep``; ``k`` = 0 keeps all."""
    if not k or len(groups) <= k:
        return groups

    def now_value(values: list[float | None]) -> float:
        return max((v for v in values[-2:] if v is not None and math.isfinite(v)), default=-math.inf)

    ranked = sorted(groups, key=lambda g: (-now_value(groups[g]), g))[:k]
    chosen = set(ranked) | (set(keep) & set(groups))
    return {g: v for g, v in groups.items() if g in chosen}
