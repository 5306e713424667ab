"""Regression after a release: the newest agent version against the one before it.

A rule on a ``version_*_change`` metric compares, over the runs that started in its last
``window`` (``GET /api/versions/compare``), the newest version (the one whose first run in the
window is the latest) with the version before it, or a named version (``scope: {version: "2.1"}``)
with the one before that. Its value is the relative change of the figure, ``(new - old) / old``
(+0.8 = 80 % more), **when the difference is beyond noise** (the comparison's test, 95 %), else
0: a rule ``{kind: threshold, threshold: 0.3}`` fires when the new version costs more than 30 %
more per run and that is no accident of the sample. One incident per version
(``scope: {version: "*"}``): it opens once for the release that regressed and resolves when a
later release compares clean. ``min_runs``: each side needs that many runs, else no data.
A figure of now, judged by its threshold alone.
"""

from __future__ import annotations

from collections.abc import Callable

from agentwatch_api.schemas import VersionComparison, VersionFigures

# metric -> the compared figure (VersionComparison.changes[].metric)
VERSION_METRICS: dict[str, str] = {
    "version_cost_per_run_change": "cost_per_run",
    "version_tokens_per_run_change": "tokens_per_run",
    "version_steps_per_run_change": "steps_per_run",
    "version_latency_change": "latency_mean_s",
    "version_success_rate_change": "success_rate",
    "version_feedback_change": "feedback_score",
}
EVERY_S = 300  # a version rule's long window (days) is still read this often

Versions = Callable[[], list[VersionFigures]]
Compare = Callable[[str, str], VersionComparison]


def newest_pair(items: list[VersionFigures], version: str | None = None) -> tuple[str, str] | None:
    """(previous, newest) among the named versions by first run, or (the one before ``version``, ``version``)."""
    named = [v.version for v in sorted(items, key=lambda v: (v.first_seen, v.version)) if v.version]
    if version is None:
        return (named[-2], named[-1]) if len(named) >= 2 else None
    if version not in named or named.index(version) == 0:
        return None
    return named[named.index(version) - 1], version


def version_change(
    metric: str, versions: Versions, compare: Compare, *, version: str | None = None, min_runs: int = 0
) -> dict[str, float | None]:
    """{compared version: value}: the relative change when beyond noise, 0 when not, None
    (no data) with fewer than ``max(min_runs, 2)`` runs a side or no figure; {} without two versions."""
    if metric not in VERSION_METRICS:
        raise ValueError(f"metric must be one of {', '.join(VERSION_METRICS)}, not {metric!r}")
    pair = newest_pair(versions(), version)
    if pair is None:
        return {}
    old, new = pair
    comparison = compare(old, new)
    if min(comparison.a.runs, comparison.b.runs) < max(min_runs, 2):
        return {new: None}
    change = next(c for c in comparison.changes if c.metric == VERSION_METRICS[metric])
    if change.relative is None:
        return {new: None}
    return {new: change.relative if change.significant else 0.0}
