"""SQL of the run closer (``collector.storage.run_closes``) and of the reads that trust what it closed.

A pass of the closer marks a time ``closed_to`` (the server's clock, less a margin) after which
every ``runs_agg`` row inserted earlier is reflected in ``closed_run_minutes``. A run with a row
inserted at or after the mark is *stale*: the closer may have counted it under another minute, or
with other totals. ``stale_runs`` names the minutes such runs may have been counted in, and
where they start now; those minutes are recomputed by the next pass and, until then, merged from
``runs_agg`` by the queries (``sql.metrics.run_totals_closed``).

Where a stale run was counted: a pass reads every row inserted before its mark and maybe some
inserted after it, so it counted the run at the earliest start among some of its rows: no earlier
than its start now, and no later than the earliest start among its rows inserted before the mark
(merges fold a row into later ones, so with none left, no later than its rows' latest end, which
ingest keeps at or after each span's start).
"""

from __future__ import annotations

from agentwatch_platform.collector.storage.schema import COUNTED_RUN

SERVER_NOW = "SELECT toUInt32(now()) AS now"
CLOSED_TO = "SELECT toUInt32(max(closed_to)) AS closed_to FROM run_close_marks"
RECORD_MARK = "INSERT INTO run_close_marks (closed_to) SELECT toDateTime({closed_to:UInt32})"

# A time's UTC minute in epoch seconds, whatever the server's time zone.
_MINUTE = "intDiv(toUnixTimestamp64Nano({}), 60000000000) * 60"
_AFTER_MARK = "inserted >= toDateTime({closed_to:UInt32})"
_BEFORE_MARK = "inserted < toDateTime({closed_to:UInt32})"

# The UTC days with a row inserted since the mark (read through the minmax index on inserted): a
# pass recomputes a day's stale runs at a time, so the backfill of a store of billions of spans
# groups one day of runs at once, not all of them.
DAYS_SINCE = f"""SELECT intDiv(toUInt32(hour), 86400) * 86400 AS day, toUInt32(min(hour)) AS first_hour
FROM runs_agg WHERE {_AFTER_MARK} GROUP BY day ORDER BY day"""
# A project's rows in the hours run totals read for [{start_ns}, {end_ns}) (the primary key's range),
# with the closer's mark (one statement: a range of few runs pays for no more)...
_RUN_ROWS_SCOPE = """project = {project:String}
    AND hour >= toStartOfHour(fromUnixTimestamp64Nano({start_ns:Int64}))
    AND hour < fromUnixTimestamp64Nano({end_ns:Int64}) + INTERVAL 1 DAY"""
RUN_ROWS = f"""SELECT count() AS n, (SELECT toUInt32(max(closed_to)) FROM run_close_marks) AS closed_to
FROM runs_agg WHERE {_RUN_ROWS_SCOPE}"""
# ... and those of them inserted since the mark.
ROWS_SINCE = f"SELECT count() AS n FROM runs_agg WHERE {_RUN_ROWS_SCOPE} AND {_AFTER_MARK}"


def stale_runs(scope: str, stale_in: str | None = None) -> str:
    """Per stale trace among the ``runs_agg`` rows of ``scope`` (a constant condition): the first and
    last minute (``lo_s``, ``hi_s``) it may have been counted in or starts in now. ``stale_in``
    (within ``scope``) narrows which rows inserted since the mark make a trace stale."""
    return f"""
SELECT project, trace_id, {_MINUTE.format("min(start_time)")} AS lo_s,
    greatest(lo_s, if(countIf({_BEFORE_MARK}) > 0, {_MINUTE.format(f"minIf(start_time, {_BEFORE_MARK})")},
        {_MINUTE.format("greatest(max(end_time), max(start_time))")})) AS hi_s
FROM runs_agg
PREWHERE trace_hash IN (SELECT trace_hash FROM runs_agg WHERE {stale_in or scope} AND {_AFTER_MARK})
WHERE {scope}
GROUP BY project, trace_id"""


# Per project, every minute a run with a row inserted since the mark in the hours of the UTC day
# ``{day}`` may be counted in (its rows read from a day before that day's ``{first_hour}`` with such
# rows on): what a pass recomputes.
_DAY = "toDateTime({day:UInt32})"
STALE_MINUTES_BY_PROJECT = f"""
SELECT toString(project) AS project, arraySort(groupUniqArrayArray(range(lo_s, hi_s + 60, 60))) AS minutes
FROM ({stale_runs("hour >= toDateTime({first_hour:UInt32}) - INTERVAL 1 DAY", f"hour >= {_DAY} AND hour < {_DAY} + INTERVAL 1 DAY")})
GROUP BY project"""

# The runs that start in the minutes ``{minutes}`` of a project: found from their earliest row (in
# its minute's hour), then merged whole from a day before the first of those hours on. A request
# refused before any work is no run (``schema.COUNTED_RUN``).
_RUNS_OF_MINUTES = f"""
    SELECT trace_id, {_MINUTE.format("min(start_time)")} AS m, max(agent) AS agent,
        groupUniqArrayIf(toString(runs_agg.agent), runs_agg.roots > 0) AS root_agents,
        if(sum(steps) > 0, sum(steps), sum(llm_calls)) AS run_steps, sum(cost_usd) AS run_cost
    FROM runs_agg
    PREWHERE trace_hash IN (
        SELECT trace_hash FROM runs_agg
        WHERE project = {{project:String}}
          AND hour IN (SELECT DISTINCT toStartOfHour(toDateTime(arrayJoin({{minutes:Array(Int64)}}))))
          AND {_MINUTE.format("start_time")} IN {{minutes:Array(Int64)}})
    WHERE project = {{project:String}}
      AND hour >= toStartOfHour(toDateTime(arrayMin({{minutes:Array(Int64)}}))) - INTERVAL 1 DAY
    GROUP BY trace_id
    HAVING (sum(roots) > 0 OR sum(opened) > 0) AND countIf(roots > 0 AND NOT {COUNTED_RUN}) = 0
        AND m IN {{minutes:Array(Int64)}}"""

# One row per minute of ``{minutes}``, every one of them (a minute whose runs all left it is
# written empty): the agents' totals in arrays, and the costs of the runs with a root under the
# agent of each root row (as ``sql.runs.AGENT_MEDIAN_COST`` picks an agent's runs).
CLOSE_MINUTES = f"""
INSERT INTO closed_run_minutes
    (project, minute, closed_to, agents, runs, steps, max_steps, max_cost_usd, cost_agents, run_costs)
SELECT {{project:String}}, toDateTime(m), toDateTime({{closed_to:UInt32}}),
    arrayMap(x -> x.1, totals), arrayMap(x -> x.2, totals), arrayMap(x -> x.3, totals),
    arrayMap(x -> x.4, totals), arrayMap(x -> x.5, totals), arrayMap(x -> x.1, costs), arrayMap(x -> x.2, costs)
FROM (SELECT arrayJoin({{minutes:Array(Int64)}}) AS m) AS wanted
LEFT JOIN (
    SELECT m, groupArray((agent, n, s, ms, mc)) AS totals FROM (
        SELECT m, toString(agent) AS agent, count() AS n, sum(run_steps) AS s, max(run_steps) AS ms, max(run_cost) AS mc
        FROM ({_RUNS_OF_MINUTES})
        GROUP BY m, agent)
    GROUP BY m
) AS t USING (m)
LEFT JOIN (
    SELECT m, groupArray((root_agent, agent_costs)) AS costs FROM (
        SELECT m, root_agent, groupArray(run_cost) AS agent_costs
        FROM ({_RUNS_OF_MINUTES}) ARRAY JOIN root_agents AS root_agent
        GROUP BY m, root_agent)
    GROUP BY m
) AS c USING (m)"""
