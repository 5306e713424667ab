"""Metrics per user id and per session id, for rules with ``scope: {user: "*"}`` or
``{session: "*"}`` (runs carry ``user.id`` / ``session.id``), and the top-k cut of scopes.

Per user or session the figures are of whole runs in the bucket each run *started* in (a run's
user is on its root span, not on every LLM call): ``cost_usd`` (their cost), ``runs``,
``max_run_cost_usd``, ``max_steps``. Runs without a user (session) id are left out.

Top-k: a project can have thousands of users. A rule's ``top_k`` judges, each round, the k
scopes with the highest value now (the bucket being judged, its partial one included), plus
every scope with an open incident (so it can resolve): each user is an incident of its own, so
one noisy user cannot hide another, and the number judged stays bounded.
"""

from __future__ import annotations

import math
from collections.abc import Collection

from agentwatch_api.schemas import SeriesPoint, TimeSeries
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.sql import alerts as alerts_sql

RUN_SCOPE_KEYS = ("user", "session")
RUN_SCOPE_METRICS = ("cost_usd", "runs", "max_run_cost_usd", "max_steps")
UNITS = {"cost_usd": "USD", "runs": "runs", "max_run_cost_usd": "USD", "max_steps": "steps"}


def run_scope_series(
    store: Store, project: str, metric: str, start: float, end: float, step_s: int, key: str, agent: str | None = None
) -> TimeSeries:
    """``metric`` per bucket and per user (``key='user'``) or session; buckets without a run are absent."""
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
    return TimeSeries(
        metric=metric,
        unit=UNITS[metric],
        step_s=step_s,
        group_by=key,
        points=sorted(points, key=lambda p: (p.t, p.group)),
    )


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
