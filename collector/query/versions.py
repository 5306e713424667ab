"""Figures per agent version, and two versions compared with a stated test (``collector.query.stats``).

A run's version is its root span's ``service.version`` (the SDK's ``init(service_version=...)`` or
``run(version=...)``, or any OpenTelemetry resource's). ``versions`` gives every version's figures
over the finished runs of a range; ``compare`` tests version ``b`` against ``a`` on the latest
``MAX_TESTED_RUNS`` runs of each, so a comparison costs the same over a day or a month.
"""

from __future__ import annotations

import math
from typing import Any

from agentwatch_api.schemas import FigureChange, VersionComparison, VersionFigures, VersionsOut
from agentwatch_platform.collector.query import stats
from agentwatch_platform.collector.query.ranges import (
    DEFAULT_RUN_IDLE_TIMEOUT_S,
    InvalidQuery,
    idle_cutoff_ns,
    range_ns,
)
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.sql import versions as sql

MAX_TESTED_RUNS = 20_000  # per version: the latest runs a comparison tests
# (figure, per-run column) compared by their means with Welch's t-test
MEANS = (
    ("cost_per_run", "cost_usd"),
    ("tokens_per_run", "total_tokens"),
    ("steps_per_run", "steps"),
    ("latency_mean_s", "duration_s"),
)


def versions(
    store: Store,
    project: str,
    *,
    start: float,
    end: float,
    agent: str | None = None,
    idle_timeout_s: float = DEFAULT_RUN_IDLE_TIMEOUT_S,
) -> VersionsOut:
    """Every version with a finished run that started in [start, end), oldest first."""
    params = _params(project, start, end, agent, idle_timeout_s)
    items = [_figures(row) for row in store.query(sql.VERSION_FIGURES, params)]
    return VersionsOut(start=start, end=end, items=items)


def compare(
    store: Store,
    project: str,
    a: str,
    b: str,
    *,
    start: float,
    end: float,
    agent: str | None = None,
    idle_timeout_s: float = DEFAULT_RUN_IDLE_TIMEOUT_S,
) -> VersionComparison:
    """Version ``b`` against ``a``: each figure's difference, its 95 % interval and whether it is
    beyond noise. ``InvalidQuery`` when either version has no finished run in the range."""
    if a == b:
        raise InvalidQuery(f"a and b must be two versions, got {a!r} twice")
    params = _params(project, start, end, agent, idle_timeout_s)
    figures = {row["version"]: _figures(row) for row in store.query(sql.VERSION_FIGURES, params)}
    missing = [f"{name}={value!r}" for name, value in (("a", a), ("b", b)) if value not in figures]
    if missing:
        known = ", ".join(repr(v) for v in figures) or "none"
        raise InvalidQuery(
            f"{' and '.join(missing)}: no finished run of that version in the range (versions in it: {known})"
        )
    rows = store.query(sql.VERSION_RUNS, params | {"a": a, "b": b, "per_version": MAX_TESTED_RUNS})
    runs_a = [r for r in rows if r["version"] == a]
    runs_b = [r for r in rows if r["version"] == b]
    changes = [*_mean_changes(figures[a], figures[b], runs_a, runs_b), _success_change(figures[a], figures[b])]
    changes.append(_feedback_change(figures[a], figures[b], runs_a, runs_b))
    sampled = max(figures[a].runs, figures[b].runs) > MAX_TESTED_RUNS
    return VersionComparison(start=start, end=end, a=figures[a], b=figures[b], changes=changes, sampled=sampled)


def _params(project: str, start: float, end: float, agent: str | None, idle_timeout_s: float) -> dict[str, Any]:
    start_ns, end_ns = range_ns(start, end)
    return {
        "project": project,
        "start_ns": start_ns,
        "end_ns": end_ns,
        "agent": agent or "",
        "idle_cutoff_ns": idle_cutoff_ns(idle_timeout_s),
    }


def _figures(row: dict[str, Any]) -> VersionFigures:
    runs = int(row["runs"])
    return VersionFigures(
        version=row["version"],
        runs=runs,
        cost_usd=float(row["total_cost_usd"]),
        cost_per_run=float(row["cost_per_run"]),
        tokens_per_run=float(row["tokens_per_run"]),
        steps_per_run=float(row["steps_per_run"]),
        latency_mean_s=float(row["latency_mean_s"]),
        latency_p50_s=float(row["latency_p50_s"]),
        latency_p95_s=float(row["latency_p95_s"]),
        success_rate=row["successes"] / row["with_outcome"] if row["with_outcome"] else None,
        successes=int(row["successes"]),
        with_outcome=int(row["with_outcome"]),
        error_rate=row["failed_runs"] / runs if runs else 0.0,
        tool_failures=int(row["total_tool_failures"]),
        feedback_score=_finite(row["feedback_score"]) if row["rated_runs"] else None,
        rated_runs=int(row["rated_runs"]),
        first_seen=float(row["first_seen"]),
        last_seen=float(row["last_seen"]),
    )


def _finite(value: Any) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def _change(
    metric: str, a: float | None, b: float | None, diff: stats.Difference, test: str, n: tuple[int, int]
) -> FigureChange:
    tested = diff.p_value is not None
    return FigureChange(
        metric=metric,
        a=a,
        b=b,
        difference=None if a is None or b is None else b - a,
        relative=(b - a) / a if a and b is not None else None,
        low=diff.low,
        high=diff.high,
        p_value=diff.p_value,
        significant=diff.significant,
        test=test if tested else "none",
        n_a=n[0],
        n_b=n[1],
    )


def _mean_changes(
    fa: VersionFigures, fb: VersionFigures, runs_a: list[dict[str, Any]], runs_b: list[dict[str, Any]]
) -> list[FigureChange]:
    out = []
    for metric, column in MEANS:
        xa, xb = [float(r[column]) for r in runs_a], [float(r[column]) for r in runs_b]
        out.append(
            _change(
                metric, getattr(fa, metric), getattr(fb, metric), stats.welch(xa, xb), "welch_t", (len(xa), len(xb))
            )
        )
    return out


def _success_change(fa: VersionFigures, fb: VersionFigures) -> FigureChange:
    diff = stats.two_proportions(fa.successes, fa.with_outcome, fb.successes, fb.with_outcome)
    return _change(
        "success_rate", fa.success_rate, fb.success_rate, diff, "two_proportion_z", (fa.with_outcome, fb.with_outcome)
    )


def _feedback_change(
    fa: VersionFigures, fb: VersionFigures, runs_a: list[dict[str, Any]], runs_b: list[dict[str, Any]]
) -> FigureChange:
    xa = [float(r["score"]) for r in runs_a if r["rated"]]
    xb = [float(r["score"]) for r in runs_b if r["rated"]]
    return _change(
        "feedback_score", fa.feedback_score, fb.feedback_score, stats.welch(xa, xb), "welch_t", (len(xa), len(xb))
    )
