"""Runs per user and per session (``runs_agg.user_id``, ``session_id``: the run's ``user.id`` and
``session.id``), and a session's runs with the spans that hold what was asked and answered.

Figures are over the finished runs that started in the range and did work (refused requests
are counted apart, ``COUNTED_RUN``), merged whole as the runs list merges them, so a user's cost
is the sum of its runs' costs in the runs list. ``{agent}`` ('' = every agent) narrows them.
"""

from __future__ import annotations

from agentwatch_platform.collector.storage.schema import COUNTED_RUN
from agentwatch_platform.collector.storage.sql.runs import RUNS_IN_RANGE

_AGENT = "({agent:String} = '' OR agent = {agent:String})"
_FINISHED = f"status NOT IN ('running', 'incomplete') AND {COUNTED_RUN} AND {_AGENT}"
_SCORES = """
    SELECT trace_id, avg(score) AS mean_score FROM feedback
    WHERE project = {project:String} AND score IS NOT NULL
    GROUP BY trace_id"""
# A run's cost budget, from its run span (agentwatch.budget.max_cost_usd; 0 = none).
_BUDGETS = """
    SELECT trace_id, max(toFloat64OrZero(attributes['agentwatch.budget.max_cost_usd'])) AS max_cost
    FROM spans
    WHERE project = {project:String} AND kind = 'run'
      AND start_time >= fromUnixTimestamp64Nano({start_ns:Int64}) AND start_time < fromUnixTimestamp64Nano({end_ns:Int64})
    GROUP BY trace_id"""
RUNS = f"""
    SELECT r.*, f.mean_score AS score, f.trace_id != '' AS rated, b.max_cost AS max_cost
    FROM ({RUNS_IN_RANGE}) AS r
    LEFT JOIN ({_SCORES}) AS f ON f.trace_id = r.trace_id
    LEFT JOIN ({_BUDGETS}) AS b ON b.trace_id = r.trace_id
    WHERE {_FINISHED}"""

# sort name -> expression over USER_FIGURES' columns
USER_SORTS = {
    "cost_usd": "total_cost_usd",
    "runs": "runs",
    "cost_per_run": "cost_per_run",
    "cost_per_success": "cost_per_success",
    "success_rate": "success_rate",
    "feedback_score": "feedback_score",
    "last_seen": "last_seen",
    "user_id": "user_id",
}


def user_figures(sort: str, descending: bool) -> str:
    """A page of users ('' = the runs without a user id); ``sort`` from ``USER_SORTS``; ``{user_id}``
    ('' = every user) narrows them to one (a user's page)."""
    direction = "DESC" if descending else "ASC"
    return f"""
SELECT user_id,
    count() AS runs,
    uniqExactIf(session_id, session_id != '') AS sessions,
    sum(cost_usd) AS total_cost_usd,
    avg(cost_usd) AS cost_per_run,
    countIf(outcome = 'success') AS successes,
    countIf(outcome != '') AS with_outcome,
    if(with_outcome > 0, successes / with_outcome, NULL) AS success_rate,
    if(successes > 0, total_cost_usd / successes, NULL) AS cost_per_success,
    countIf(status IN ('error', 'timeout', 'budget')) AS failed_runs,
    if(countIf(rated) > 0, avgIf(score, rated), NULL) AS feedback_score,
    countIf(rated) AS rated_runs,
    countIf(max_cost > 0) AS budget_runs,
    if(budget_runs > 0, avgIf(cost_usd / max_cost, max_cost > 0), NULL) AS budget_used,
    countIf(budget_exceeded != '') AS budget_stops,
    min(start_time) AS first_seen,
    max(start_time) AS last_seen,
    count() OVER () AS total
FROM ({RUNS})
WHERE {{user_id:String}} = '' OR user_id = {{user_id:String}}
GROUP BY user_id
ORDER BY {USER_SORTS[sort]} {direction} NULLS LAST, user_id
LIMIT {{limit:UInt32}} OFFSET {{offset:UInt32}}"""


# Each listed user's cost per bucket of the range (the trend).
USER_TREND = f"""
SELECT user_id, intDiv(start_ns - {{start_ns:Int64}}, {{step_ns:Int64}}) AS bucket, sum(cost_usd) AS cost
FROM ({RUNS})
WHERE user_id IN {{users:Array(String)}}
GROUP BY user_id, bucket"""

# Requests refused before any work, per listed user (no runs: in no figure above).
USER_REFUSED = f"""
SELECT user_id, count() AS refused FROM ({RUNS_IN_RANGE})
WHERE outcome = 'refused' AND user_id IN {{users:Array(String)}} AND {_AGENT}
GROUP BY user_id"""

SESSION_SORTS = {"cost_usd": "total_cost_usd", "runs": "runs", "last_seen": "last_seen", "session_id": "session_id"}


def session_figures(sort: str, descending: bool) -> str:
    """A page of sessions (runs with a session id), ``{user_id}`` ('' = every user) narrowing them."""
    direction = "DESC" if descending else "ASC"
    return f"""
SELECT session_id,
    max(user_id) AS session_user,
    count() AS runs,
    sum(cost_usd) AS total_cost_usd,
    countIf(outcome = 'success') AS successes,
    countIf(outcome != '') AS with_outcome,
    arraySort(groupUniqArray(agent)) AS agents,
    min(start_time) AS first_seen,
    max(start_time) AS last_seen,
    max(end_time) AS last_end,
    count() OVER () AS total
FROM ({RUNS})
WHERE session_id != '' AND ({{user_id:String}} = '' OR user_id = {{user_id:String}})
GROUP BY session_id
ORDER BY {SESSION_SORTS[sort]} {direction}, session_id
LIMIT {{limit:UInt32}} OFFSET {{offset:UInt32}}"""


# A session's runs in order (running ones too: a session is watched while it goes on; refused
# requests apart), at most ``{limit}``.
SESSION_RUNS = f"""
SELECT * FROM ({RUNS_IN_RANGE})
WHERE session_id = {{session_id:String}} AND {COUNTED_RUN}
ORDER BY start_time, trace_id
LIMIT {{limit:UInt32}}"""
SESSION_REFUSED = f"""
SELECT count() AS refused FROM ({RUNS_IN_RANGE}) WHERE session_id = {{session_id:String}} AND outcome = 'refused'"""

# The run and LLM spans of a session's runs, with their captured text: what was asked and answered.
SESSION_TEXTS = """
SELECT project, trace_id, span_id, parent_span_id, kind, toUnixTimestamp64Nano(spans.start_time) AS start_ns,
    input_text, output_text, text_ref
FROM spans
WHERE project = {project:String} AND trace_id IN {trace_ids:Array(String)} AND kind IN ('run', 'llm')
  AND spans.start_time >= fromUnixTimestamp64Nano({start_ns:Int64})
  AND spans.start_time < fromUnixTimestamp64Nano({end_ns:Int64}) + INTERVAL 1 DAY
ORDER BY spans.start_time, span_id"""
