"""SQL of deletion (``collector.storage.deletion``) and of the retention pass (``collector.storage.maintenance``).

A deletion removes whole traces: the spans, their runs_agg rows and their feedback go by trace id;
the per-minute and per-hour rollups, which mix many traces in a row, are dropped and rebuilt from
the remaining spans for every hour the deleted traces had a span in (``{hours}``, UTC epoch
seconds). Every statement is a synchronous mutation (``mutations_sync = 2``): the parts are
rewritten without the rows before it returns, so no deleted row stays readable, and replaying a
statement after a crash changes nothing more.
"""

from __future__ import annotations

from agentwatch_platform.collector.storage.schema import (
    BILLABLE,
    COUNTED_RUN,
    HEAD_DURATION_S,
    HEAD_FAILED,
    HEAD_MINUTE_S,
    SPAN_PARTIALS,
)

SYNC = "SETTINGS mutations_sync = 2"

# --- which traces a deletion takes --------------------------------------------------------------
# Every trace with a span of the user, the session, the trace id, or starting in [start_ns, end_ns).
_TRACES_WHERE = {
    "trace": "trace_id = {value:String}",
    "user": "user_id = {value:String}",
    "session": "session_id = {value:String}",
    "range": "start_time >= fromUnixTimestamp64Nano({start_ns:Int64}) AND start_time < fromUnixTimestamp64Nano({end_ns:Int64})",
}


def traces_of(kind: str) -> str:
    """The trace ids a deletion of ``kind`` (a key of ``_TRACES_WHERE``, whitelisted) takes."""
    return f"SELECT DISTINCT trace_id FROM spans WHERE project = {{project:String}} AND {_TRACES_WHERE[kind]}"


DELETION_KINDS = tuple(_TRACES_WHERE)

# What those traces hold: spans, billed cost, the UTC hours and days they have spans in.
_HOUR = "intDiv(toUInt32(toDateTime(start_time)), 3600) * 3600"
TRACE_FIGURES = f"""
SELECT count() AS spans, sumIf(cost_usd, {BILLABLE}) AS cost_usd, uniqExact(trace_id) AS traces,
    groupUniqArray({_HOUR}) AS hours
FROM spans WHERE project = {{project:String}} AND trace_id IN {{traces:Array(String)}}"""

PROJECT_FIGURES = f"""
SELECT count() AS spans, sumIf(cost_usd, {BILLABLE}) AS cost_usd, uniqExact(trace_id) AS traces,
    groupUniqArray({_HOUR}) AS hours
FROM spans WHERE project = {{project:String}}"""

# --- removing traces ----------------------------------------------------------------------------
_OF_TRACES = "project = {project:String} AND trace_id IN {traces:Array(String)}"
DELETE_SPANS = f"ALTER TABLE spans DELETE WHERE {_OF_TRACES} {SYNC}"
DELETE_RUNS = f"ALTER TABLE runs_agg DELETE WHERE {_OF_TRACES} {SYNC}"
DELETE_FEEDBACK = f"ALTER TABLE feedback DELETE WHERE {_OF_TRACES} {SYNC}"

# Alerts whose scope is the deleted user or session (``scope: {user: "*"}`` rules open one per user),
# with their deliveries; the deliveries first, while the alerts still say which they are.
_SCOPED_ALERTS = "project = {project:String} AND scope[{scope_key:String}] = {value:String}"
DELETE_SCOPED_DELIVERIES = f"""ALTER TABLE alert_deliveries DELETE WHERE project = {{project:String}}
    AND alert_id IN (SELECT alert_id FROM alerts WHERE {_SCOPED_ALERTS}) {SYNC}"""
DELETE_SCOPED_ALERTS = f"ALTER TABLE alerts DELETE WHERE {_SCOPED_ALERTS} {SYNC}"

# --- the rollups of the hours those traces touched, rebuilt from what is left -------------------
_HOURS = "{hours:Array(UInt32)}"
_MINUTE_HOUR = "intDiv(toUInt32(minute), 3600) * 3600"
DROP_HOURS = f"ALTER TABLE span_hours DELETE WHERE project = {{project:String}} AND toUInt32(hour) IN {_HOURS} {SYNC}"
DROP_MINUTES = (
    f"ALTER TABLE span_minutes DELETE WHERE project = {{project:String}} AND {_MINUTE_HOUR} IN {_HOURS} {SYNC}"
)
# The minutes' view (span_hours_mv) refills span_hours for exactly these hours.
REBUILD_MINUTES = f"""
INSERT INTO span_minutes
SELECT project, minute, agent, model, {SPAN_PARTIALS}
FROM (SELECT *, toDateTime(toStartOfMinute(start_time)) AS minute, agent_name AS agent FROM spans)
WHERE project = {{project:String}}
  AND start_time >= toDateTime(arrayMin({_HOURS})) AND start_time < toDateTime(arrayMax({_HOURS}) + 3600)
  AND {_MINUTE_HOUR} IN {_HOURS}
GROUP BY project, minute, agent, model"""

DROP_RUN_MINUTES = (
    f"ALTER TABLE run_minutes DELETE WHERE project = {{project:String}} AND {_MINUTE_HOUR} IN {_HOURS} {SYNC}"
)
# Run heads per minute from runs_agg, as the view (``schema.RUN_MINUTES_REFUSED``, migration 13) counts
# them: one head per (trace, hour), as after a rebuild (``sql.reprice.REBUILD_RUNS``); runs_agg rows not
# merged yet are merged here first.
REBUILD_RUN_MINUTES = f"""
INSERT INTO run_minutes (project, minute, agent, runs, failed_runs, successes, with_outcome, latency, refused)
SELECT project, toDateTime({HEAD_MINUTE_S}) AS minute, agent,
    countIf({COUNTED_RUN}) AS runs,
    countIf({COUNTED_RUN} AND {HEAD_FAILED}) AS failed_runs,
    countIf(outcome = 'success') AS successes,
    countIf(outcome != '' AND {COUNTED_RUN}) AS with_outcome,
    quantilesIfState(0.5, 0.95)({HEAD_DURATION_S}, toUInt8({COUNTED_RUN})) AS latency,
    countIf(NOT {COUNTED_RUN}) AS refused
FROM (
    SELECT project, hour, trace_id, min(start_time) AS start_time, max(end_time) AS end_time, sum(roots) AS roots,
        max(agent) AS agent, max(budget_exceeded) AS budget_exceeded, max(root_timeout) AS root_timeout,
        max(root_error) AS root_error, max(outcome) AS outcome
    FROM runs_agg
    WHERE project = {{project:String}} AND toUInt32(hour) IN {_HOURS}
    GROUP BY project, hour, trace_id
)
WHERE roots > 0 AND intDiv({HEAD_MINUTE_S}, 3600) * 3600 IN {_HOURS}
GROUP BY project, minute, agent"""

# --- a whole project ----------------------------------------------------------------------------
# The tables holding a project's data (its keys, registered engines and the audit log stay).
PROJECT_TABLES = (
    "alert_deliveries",
    "alerts",
    "feedback",
    "engine_metrics",
    "closed_run_minutes",
    "run_minutes",
    "span_hours",
    "span_minutes",
    "span_key_hours",
    "span_key_minutes",
    "runs_agg",
    "spans",
)


def delete_project(table: str) -> str:
    """Every row of ``{project}`` in ``table`` (one of ``PROJECT_TABLES``)."""
    if table not in PROJECT_TABLES:
        raise ValueError(f"not a table of project data: {table!r}")
    return f"ALTER TABLE {table} DELETE WHERE project = {{project:String}} {SYNC}"


# --- the audit trail of a deletion (its id in the detail), so a replay writes it once ------------
AUDITED = """
SELECT count() AS n FROM audit_log
WHERE project = {project:String} AND action = {action:String} AND position(detail, {marker:String}) > 0"""

# --- retention: what is older than the first day kept, from every table at once -----------------
# (table, its time column); rows of a time before ``{cutoff_s}`` (a UTC midnight) go.
RETENTION_TABLES = (
    ("runs_agg", "hour"),
    ("closed_run_minutes", "minute"),
    ("run_minutes", "minute"),
    ("span_hours", "hour"),
    ("span_minutes", "minute"),
    ("span_key_hours", "hour"),
    ("span_key_minutes", "minute"),
    ("spans", "start_time"),
    ("engine_metrics", "ts"),
    ("feedback", "created_at"),
)


def expired_rows(table: str, column: str) -> str:
    """Whether ``table`` has rows before the cutoff (read from the partition key's min/max: cheap)."""
    _check_retention(table, column)
    return f"SELECT count() AS n FROM {table} WHERE {column} < toDateTime({{cutoff_s:UInt32}})"


def delete_expired(table: str, column: str) -> str:
    _check_retention(table, column)
    return f"ALTER TABLE {table} DELETE WHERE {column} < toDateTime({{cutoff_s:UInt32}}) {SYNC}"


def _check_retention(table: str, column: str) -> None:
    if (table, column) not in RETENTION_TABLES:
        raise ValueError(f"not a table under retention: {table}.{column}")
