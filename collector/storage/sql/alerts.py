"""SQL of the alerts package: alert history (``alerts``), delivery attempts, active projects.

Owned by ``alerts``; same rules as the rest of ``storage.sql``: values bound by ClickHouse, never formatted.
``alerts`` is a ReplacingMergeTree on (project, alert_id) versioned by ``updated_at``, so a
state change is a new row and ``FINAL`` reads the latest one. Times come back as epoch seconds.
"""

from __future__ import annotations

ALERT_COLUMNS = (
    "project",
    "alert_id",
    "fingerprint",
    "rule",
    "severity",
    "state",
    "scope",
    "metric",
    "value",
    "baseline",
    "threshold",
    "message",
    "started_at",
    "resolved_at",
    "last_notified_at",
    "updated_at",
    "peak",
    "last_breach_at",
    "no_data_since",
)
DELIVERY_COLUMNS = ("project", "alert_id", "channel", "attempt", "ok", "error", "at", "event")

# Projects worth evaluating: traffic in the lookback, or an alert still firing (so it can resolve).
ACTIVE_PROJECTS = """
SELECT DISTINCT project FROM spans WHERE start_time >= fromUnixTimestamp64Nano({since_ns:Int64})
UNION DISTINCT
SELECT DISTINCT project FROM alerts FINAL WHERE state = 'firing'
"""

_ALERT_FIELDS = """
    project, alert_id, fingerprint, rule, severity, state, scope, metric, value, baseline, threshold, message,
    toUnixTimestamp64Milli(started_at) / 1e3 AS started_at,
    toUnixTimestamp64Milli(resolved_at) / 1e3 AS resolved_at,
    toUnixTimestamp64Milli(last_notified_at) / 1e3 AS last_notified_at,
    toUnixTimestamp64Milli(updated_at) / 1e3 AS updated_at,
    peak,
    toUnixTimestamp64Milli(last_breach_at) / 1e3 AS last_breach_at,
    toUnixTimestamp64Milli(no_data_since) / 1e3 AS no_data_since"""

FIRING_ALERTS = f"""
SELECT {_ALERT_FIELDS}
FROM alerts FINAL
WHERE project = {{project:String}} AND state = 'firing'
"""

# Alerts whose episode overlaps [start, end), newest first; state '' = any.
LIST_ALERTS = f"""
SELECT {_ALERT_FIELDS}
FROM alerts FINAL
WHERE project = {{project:String}}
  AND ({{state:String}} = '' OR state = {{state:String}})
  AND ({{alert_id:String}} = '' OR alert_id = {{alert_id:String}})
  AND started_at < fromUnixTimestamp64Milli({{end_ms:Int64}})
  AND (resolved_at IS NULL OR resolved_at >= fromUnixTimestamp64Milli({{start_ms:Int64}}))
ORDER BY started_at DESC, alert_id
LIMIT {{limit:UInt32}}
"""

LIST_DELIVERIES = """
SELECT alert_id, channel, attempt, ok, error, toUnixTimestamp64Milli(at) / 1e3 AS at, event
FROM alert_deliveries
WHERE project = {project:String} AND ({alert_id:String} = '' OR alert_id = {alert_id:String})
ORDER BY at, channel, attempt
LIMIT {limit:UInt32}
"""

# Incidents a restarted evaluator may still owe a notification for: firing ones, and those
# resolved since ``since_ms``; with the (alert, event, channel) triples delivered so far.
OWED_ALERTS = f"""
SELECT {_ALERT_FIELDS}
FROM alerts FINAL
WHERE project = {{project:String}}
  AND (state = 'firing' OR resolved_at >= fromUnixTimestamp64Milli({{since_ms:Int64}}))
"""

DELIVERED = """
SELECT DISTINCT alert_id, event, channel
FROM alert_deliveries
WHERE project = {project:String} AND ok
  AND alert_id IN (
    SELECT alert_id FROM alerts FINAL
    WHERE project = {project:String} AND (state = 'firing' OR resolved_at >= fromUnixTimestamp64Milli({since_ms:Int64}))
  )
"""

# Run states for the stuck-run and crash-rate rules (``alerts.run_states``): every run with
# spans in the last day (``since_ns``), merged per trace, per agent (``by_agent``) or for the
# project. A run is running while its root has not arrived and a span arrived after
# ``idle_cutoff_ns`` (now minus ``AGENTWATCH_RUN_IDLE_TIMEOUT_S``), incomplete after that; it
# *became* incomplete in the window when its last span is within ``window_ns`` before the cutoff.
# A request refused before any work is no run (``schema.COUNTED_RUN``), here and below.
RUN_STATES = """
SELECT if({by_agent:UInt8} = 1, agent, '') AS grp,
    max(if(n_roots = 0 AND last_ns >= {idle_cutoff_ns:Int64}, greatest({now_ns:Int64} - start_ns, 0), 0)) / 1e9 AS oldest_running_s,
    countIf(n_roots = 0 AND last_ns >= {idle_cutoff_ns:Int64}) AS running,
    countIf(n_roots = 0 AND last_ns < {idle_cutoff_ns:Int64} AND last_ns >= {idle_cutoff_ns:Int64} - {window_ns:Int64}) AS became_incomplete,
    countIf(n_roots > 0 AND last_ns >= {now_ns:Int64} - {window_ns:Int64} AND last_ns < {now_ns:Int64}) AS finished
FROM (
    SELECT trace_id, sum(roots) AS n_roots, sum(opened) AS n_opened, max(agent) AS agent,
        toUnixTimestamp64Nano(min(start_time)) AS start_ns, toUnixTimestamp64Nano(max(end_time)) AS last_ns
    FROM runs_agg
    WHERE project = {project:String} AND hour >= toStartOfHour(fromUnixTimestamp64Nano({since_ns:Int64}))
    GROUP BY trace_id
    HAVING (n_roots > 0 OR n_opened > 0) AND start_ns < {now_ns:Int64} AND countIf(roots > 0 AND outcome = 'refused') = 0
)
WHERE {agent:String} = '' OR agent = {agent:String}
GROUP BY grp
"""

# Per (bucket, user, session or version) figures of runs, for rules scoped per user id, session id
# or agent version (``alerts.run_scopes``): whole runs merged per trace (a run's user, session and
# version come with its root or opening head), in the bucket the run started in; runs without one
# are left out. ``key`` is 'user', 'session' or 'version'; ``agent`` '' = every agent.
RUN_SCOPE_SERIES = """
SELECT intDiv(start_ns - {start_ns:Int64}, {step_ns:Int64}) AS bucket, grp,
    count() AS runs, sum(run_cost) AS cost_usd, avg(run_cost) AS cost_per_run, avg(run_steps) AS steps_per_run,
    max(run_cost) AS max_run_cost_usd, max(run_steps) AS max_steps
FROM (
    SELECT trace_id, toUnixTimestamp64Nano(min(start_time)) AS start_ns, sum(roots) AS n_roots, sum(opened) AS n_opened,
        if(sum(steps) > 0, sum(steps), sum(llm_calls)) AS run_steps, sum(cost_usd) AS run_cost, max(agent) AS agent,
        multiIf({key:String} = 'user', max(user_id), {key:String} = 'session', max(session_id), max(version)) AS grp
    FROM runs_agg
    WHERE project = {project:String}
      AND hour >= toStartOfHour(fromUnixTimestamp64Nano({start_ns:Int64}))
      AND hour < fromUnixTimestamp64Nano({end_ns:Int64}) + INTERVAL 1 DAY
    GROUP BY trace_id
    HAVING (n_roots > 0 OR n_opened > 0) AND countIf(roots > 0 AND outcome = 'refused') = 0 AND start_ns >= {start_ns:Int64} AND start_ns < {end_ns:Int64}
)
WHERE grp != '' AND ({agent:String} = '' OR agent = {agent:String})
GROUP BY bucket, grp
"""
