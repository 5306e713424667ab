"""The span explorer's rollup: ``span_key_minutes``, the spans' figures per minute and per value of
every key a span carries itself (kind, name, tool, model, status, error type, agent, version).

A group-by over a day of spans read every span (10M spans: 1.3 to 2.1 s of CPU a question,
bench/results/span_explorer.md); a minute of an agent's spans holds a few dozen distinct key
tuples, so the rollup reads thousands of rows instead. As ``span_minutes`` does for metrics, a
question reads the whole minutes of its range from the rollup and the minutes its ends cut from
the spans (``groups``), so every count, token and cost figure is the spans' to the nanosecond.
Runs are an exact distinct count (``uniqExact`` states of the trace's 64-bit hash, as the spans'
answer counts them); latency percentiles merge TDigest states, as the other rollups' do, so they
agree with the spans' own TDigest within its error, not to the digit.

Keys a span does not carry (its run's user and session, its parent step's name, attributes) and
filters the rollup cannot apply (duration and cost bounds, step, user, session, trace, attribute,
search) are answered from the spans (``collector.storage.sql.spans``).

Filled by a view on spans; deletion and re-pricing drop and rebuild its minutes from the spans
left, as they do ``span_minutes`` (``collector.storage.deletion``, ``collector.storage.maintenance``).
"""

from __future__ import annotations

from agentwatch_platform.collector.storage.sql.spans import DURATION_S, ERROR_BASE, ERROR_KEY, FAILED, STATUS

SPAN_KEY_MINUTES = """
CREATE TABLE IF NOT EXISTS span_key_minutes (
    project LowCardinality(String),
    minute DateTime,
    kind LowCardinality(String),
    tool LowCardinality(String),
    model LowCardinality(String),
    status LowCardinality(String),
    error_key LowCardinality(String),
    error_base LowCardinality(String),
    agent LowCardinality(String),
    version LowCardinality(String),
    name LowCardinality(String),
    spans SimpleAggregateFunction(sum, UInt64),
    failures SimpleAggregateFunction(sum, UInt64),
    input_tokens SimpleAggregateFunction(sum, UInt64),
    output_tokens SimpleAggregateFunction(sum, UInt64),
    cost_usd SimpleAggregateFunction(sum, Float64),
    runs AggregateFunction(uniqExact, UInt64),
    duration AggregateFunction(quantilesTDigest(0.5, 0.95), Float64)
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(minute)
ORDER BY (project, minute, kind, tool, model, status, error_key, error_base, agent, version, name)
SETTINGS ttl_only_drop_parts = 1
"""

_KEYS = "project, minute, kind, tool, model, status, error_key, error_base, agent, version, name"

# One row per minute and key tuple, over spans (``FROM spans`` and a ``WHERE`` make the rebuilds).
_SELECT = f"""
SELECT {_KEYS},
    count() AS spans,
    countIf({FAILED}) AS failures,
    sum(toUInt64(input_tokens)) AS input_tokens,
    sum(toUInt64(output_tokens)) AS output_tokens,
    sum(cost_usd) AS cost_usd,
    uniqExactState(cityHash64(trace_id)) AS runs,
    quantilesTDigestState(0.5, 0.95)({DURATION_S}) AS duration
FROM (SELECT *, toDateTime(toStartOfMinute(start_time)) AS minute, toString(tool_name) AS tool,
        {STATUS} AS status, {ERROR_KEY} AS error_key, {ERROR_BASE} AS error_base, toString(agent_name) AS agent,
        toString(service_version) AS version
    FROM spans{{where}})
GROUP BY {_KEYS}"""

SPAN_KEY_MINUTES_MV = (
    f"CREATE MATERIALIZED VIEW IF NOT EXISTS span_key_minutes_mv TO span_key_minutes AS {_SELECT.format(where='')}"
)
SPAN_KEY_MINUTES_BACKFILL = f"INSERT INTO span_key_minutes {_SELECT.format(where='')}"

# --- deletion: the UTC hours the deleted traces had spans in (``{hours}``), rebuilt from what is left --
_HOURS = "{hours:Array(UInt32)}"
_MINUTE_HOUR = "intDiv(toUInt32(minute), 3600) * 3600"
DROP_HOURS = f"ALTER TABLE span_key_minutes DELETE WHERE project = {{project:String}} AND {_MINUTE_HOUR} IN {_HOURS} SETTINGS mutations_sync = 2"
_HOURS_WHERE = f"""
    WHERE project = {{project:String}}
      AND start_time >= toDateTime(arrayMin({_HOURS})) AND start_time < toDateTime(arrayMax({_HOURS}) + 3600)
      AND intDiv(toUInt32(toDateTime(start_time)), 3600) * 3600 IN {_HOURS}"""
REBUILD_HOURS = f"INSERT INTO span_key_minutes {_SELECT.format(where=_HOURS_WHERE)}"

# --- re-pricing (``collector.storage.maintenance.rebuild_totals``): every minute from the first
# affected hour (``{since_ns}``) on, of one project or (``{project}`` empty) all ------------------
_SINCE = "intDiv(intDiv({since_ns:Int64}, 1000000000), 3600) * 3600"
_PROJECT = "({project:String} = '' OR project = {project:String})"
DROP_SINCE = (
    f"ALTER TABLE span_key_minutes DELETE WHERE toUInt32(minute) >= {_SINCE} AND {_PROJECT} SETTINGS mutations_sync = 2"
)
_SINCE_WHERE = f" WHERE start_time >= toDateTime({_SINCE}) AND {_PROJECT}"
REBUILD_SINCE = f"INSERT INTO span_key_minutes {_SELECT.format(where=_SINCE_WHERE)}"

# --- the explorer's group-by -------------------------------------------------------------------
# group name -> key over rollup rows; the same names as ``sql.spans.GROUP_KEYS``.
GROUP_KEYS: dict[str, str] = {
    "tool": "toString(tool)",
    "name": "toString(name)",
    "model": "toString(model)",
    "kind": "toString(kind)",
    "error_type": "toString(error_key)",
    "agent": "toString(agent)",
    "version": "toString(version)",
    "status": "toString(status)",
}

# filter name -> fragment over rollup rows, the same test as ``sql.spans.FILTERS``' fragment.
FILTERS: dict[str, str] = {
    "kind": "kind = {kind:String}",
    "name": "name = {name:String}",
    "tool": "tool = {tool:String}",
    "model": "model = {model:String}",
    "status": "status = {status:String}",
    "failed": "(status IN ('error', 'timeout')) = {failed:Bool}",
    "error_type": "(error_key = {error_type:String} OR error_base = {error_type:String})",
    "agent": "agent = {agent:String}",
    "version": "version = {version:String}",
}


def rollup_where(params: dict[str, object]) -> str:
    """The whole minutes ``[{lo_s}, {hi_s})`` and every filter with a value, ``AND``-joined."""
    parts = [
        "project = {project:String}",
        "minute >= toDateTime({lo_s:Int64}) AND minute < toDateTime({hi_s:Int64})",
        *(sql for name, sql in FILTERS.items() if params.get(name) is not None),
    ]
    return "\n      AND ".join(parts)


# The spans of [start, end) outside the whole minutes: the range's cut edges.
EDGES = """(start_time < toDateTime64({lo_s:Int64}, 9) OR start_time >= toDateTime64({hi_s:Int64}, 9))"""


def groups(by: str, key_spans: str, rollup_filters: str, span_filters: str, *, keyed: bool) -> str:
    """Per group of ``by`` (a ``GROUP_KEYS`` name): the same columns as ``sql.spans.groups``, from
    the rollup's whole minutes and the edges' spans, merged (unsorted: ``sql.spans.ranked`` sorts)."""
    key = GROUP_KEYS[by]
    only_keyed = f"\n      AND ({key}) != ''" if keyed else ""
    return f"""
SELECT key, sum(part_spans) AS n_spans, sum(part_failures) AS failures, uniqExactMerge(part_runs) AS runs,
    quantilesTDigestMerge(0.5, 0.95)(part_duration) AS duration_q,
    sum(part_in) AS in_tokens, sum(part_out) AS out_tokens, sum(part_cost) AS cost
FROM (
    SELECT {key} AS key, toUInt64(spans) AS part_spans, toUInt64(failures) AS part_failures, runs AS part_runs,
        duration AS part_duration, toUInt64(input_tokens) AS part_in, toUInt64(output_tokens) AS part_out,
        toFloat64(cost_usd) AS part_cost
    FROM span_key_minutes
    WHERE {rollup_filters}{only_keyed}
    UNION ALL
    SELECT {key_spans} AS key, count() AS part_spans, countIf({FAILED}) AS part_failures,
        uniqExactState(cityHash64(trace_id)) AS part_runs, quantilesTDigestState(0.5, 0.95)({DURATION_S}) AS part_duration,
        sum(toUInt64(input_tokens)) AS part_in, sum(toUInt64(output_tokens)) AS part_out, sum(cost_usd) AS part_cost
    FROM spans
    WHERE {span_filters} AND {EDGES}{f" AND ({key_spans}) != ''" if keyed else ""}
    GROUP BY key
)
GROUP BY key"""
