"""Runs per agent version (``runs_agg.version``: the root span's ``service.version``).

Figures are over the finished runs that started in the range (their root arrived: a run still
running has partial totals) and that did work (refused requests are no runs, ``COUNTED_RUN``),
merged whole from ``runs_agg`` as the runs list merges them, so a version's cost is the sum of
its runs' costs in the runs list. ``{agent}`` ('' = every agent) narrows them.
"""

from __future__ import annotations

from agentwatch_platform.collector.storage.schema import COUNTED_RUN
from agentwatch_platform.collector.storage.sql.runs import RUNS_IN_RANGE

_FINISHED = f"""status NOT IN ('running', 'incomplete') AND {COUNTED_RUN}
    AND ({{agent:String}} = '' OR agent = {{agent:String}})"""

# Each run's mean feedback score (runs without a score: not in it).
_SCORES = """
    SELECT trace_id, avg(score) AS mean_score FROM feedback
    WHERE project = {project:String} AND score IS NOT NULL
    GROUP BY trace_id"""

_RUNS = f"""
    SELECT r.*, f.mean_score AS score, f.trace_id != '' AS rated
    FROM ({RUNS_IN_RANGE}) AS r
    LEFT JOIN ({_SCORES}) AS f ON f.trace_id = r.trace_id
    WHERE {_FINISHED}"""

# One row per version: the figures of GET /api/versions.
VERSION_FIGURES = f"""
SELECT version,
    count() AS runs,
    sum(cost_usd) AS total_cost_usd,
    avg(cost_usd) AS cost_per_run,
    avg(total_tokens) AS tokens_per_run,
    avg(steps) AS steps_per_run,
    avg(duration_s) AS latency_mean_s,
    quantileExact(0.5)(duration_s) AS latency_p50_s,
    quantileExact(0.95)(duration_s) AS latency_p95_s,
    countIf(outcome = 'success') AS successes,
    countIf(outcome != '') AS with_outcome,
    countIf(status IN ('error', 'timeout', 'budget')) AS failed_runs,
    sum(tool_failures) AS total_tool_failures,
    avgIf(score, rated) AS feedback_score,
    countIf(rated) AS rated_runs,
    min(start_time) AS first_seen,
    max(start_time) AS last_seen
FROM ({_RUNS})
GROUP BY version
ORDER BY first_seen, version"""

# The per-run values of two versions that the comparison tests, the latest ``{per_version}`` runs of each.
VERSION_RUNS = f"""
SELECT version, cost_usd, total_tokens, steps, duration_s, outcome, score, rated
FROM ({_RUNS})
WHERE version IN ({{a:String}}, {{b:String}})
ORDER BY start_time DESC, trace_id
LIMIT {{per_version:UInt32}} BY version"""
