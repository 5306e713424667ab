"""The span explorer's rollups: ``span_key_minutes`` and ``span_key_hours``, the spans' figures per
minute (and hour) and per value of every key a span carries itself (kind, name, tool, model,
status, error type, agent, version).

A group-by over a day of spans read every span (10M spans: 1.3 to 2.1 s of CPU a question,
bench/results/span_explorer.md); a minute of an agent's spans holds a few dozen distinct key
tuples, so the rollups read hundreds of rows instead. As ``span_minutes`` and ``span_hours`` do for
metrics, a question reads the whole hours of its range from ``span_key_hours``, the other whole
minutes from ``span_key_minutes`` and the minutes its ends cut from the spans (``groups``), so every
count, token and cost figure is the spans' to the nanosecond. Runs are an exact distinct count
(``uniqExact`` states of the trace's 64-bit hash, as the spans' answer counts them); latency
percentiles merge TDigest states, as the other rollups' do, so they agree with the spans' own
TDigest within its error, not to the digit. (Merging a day of per-minute TDigest states was 235 ms
of CPU for failures by tool at 10M spans; of per-hour ones, 13 ms.)

Keys a span does not carry (its run's user and session, its parent step's name, attributes) and
filters the rollups cannot apply (duration and cost bounds, step, user, session, trace, attribute,
search) are answered from the spans (``collector.storage.sql.spans``).

The minutes are filled by a view on spans, the hours by a view on the minutes (each block written
to the minutes folds into its hours); deletion and re-pricing drop both and rebuild the minutes
from the spans left, which refills the hours, as they do ``span_minutes``
(``collector.storage.deletion``, ``collector.storage.maintenance``).
"""

from __future__ import annotations

from agentwatch_platform.collector.storage.sql.spans import DURATION_S, ERROR_BASE, ERROR_KEY, FAILED, STATUS

_KEY_COLUMNS = """kind LowCardinality(String),
    tool LowCardinality(String),
    model LowCardinality(String),
    status LowCardinality(String),
    error_key LowCardinality(String),
    error_base LowCardinality(String),
    agent LowCardinality(String),
    version LowCardinality(String),
    name LowCardinality(String)"""
_KEYS = "kind, tool, model, status, error_key, error_base, agent, version, name"


def _table(table: str, bucket: str) -> str:
    return f"""
CREATE TABLE IF NOT EXISTS {table} (
    project LowCardinality(String),
    {bucket} DateTime,
    {_KEY_COLUMNS},
    spans SimpleAggregateFunction(sum, UInt64),
    failures SimpleAggregateFunction(sum, UInt64),
    input_tokens SimpleAggregateFunction(sum, UInt64),
    output_tokens SimpleAggregateFunction(sum, UInt64),
    cost_usd SimpleAggregateFunction(sum, Float64),
    runs AggregateFunction(uniqExact, UInt64),
    duration AggregateFunction(quantilesTDigest(0.5, 0.95), Float64)
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM({bucket})
ORDER BY (project, {bucket}, {_KEYS})
SETTINGS ttl_only_drop_parts = 1
"""


SPAN_KEY_MINUTES = _table("span_key_minutes", "minute")
SPAN_KEY_HOURS = _table("span_key_hours", "hour")

# One row per minute and key tuple, over spans (``{where}``: the rebuilds' scope).
_SELECT = f"""
SELECT project, minute, {_KEYS},
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
GROUP BY project, minute, {_KEYS}"""

SPAN_KEY_MINUTES_MV = (
    f"CREATE MATERIALIZED VIEW IF NOT EXISTS span_key_minutes_mv TO span_key_minutes AS {_SELECT.format(where='')}"
)
SPAN_KEY_MINUTES_BACKFILL = f"INSERT INTO span_key_minutes {_SELECT.format(where='')}"

# A UTC hour by epoch arithmetic, as ``schema.EPOCH_HOUR`` (span_hours) takes it.
_HOUR_OF_MINUTE = "toDateTime(intDiv(toUInt32(minute), 3600) * 3600)"
_HOURS_SELECT = f"""
SELECT project, {_HOUR_OF_MINUTE} AS hour, {_KEYS},
    sum(spans) AS spans, sum(failures) AS failures, sum(input_tokens) AS input_tokens,
    sum(output_tokens) AS output_tokens, sum(cost_usd) AS cost_usd,
    uniqExactMergeState(runs) AS runs, quantilesTDigestMergeState(0.5, 0.95)(duration) AS duration
FROM span_key_minutes
GROUP BY project, hour, {_KEYS}"""
SPAN_KEY_HOURS_MV = f"CREATE MATERIALIZED VIEW IF NOT EXISTS span_key_hours_mv TO span_key_hours AS {_HOURS_SELECT}"
SPAN_KEY_HOURS_BACKFILL = f"INSERT INTO span_key_hours {_HOURS_SELECT}"

_SYNC = "SETTINGS mutations_sync = 2"

# --- deletion: the UTC hours the deleted traces had spans in (``{hours}``), rebuilt from what is
# left (the minutes' view refills exactly these hours) --------------------------------------------
_HOURS = "{hours:Array(UInt32)}"
DROP_HOURS = (
    f"ALTER TABLE span_key_hours DELETE WHERE project = {{project:String}} AND toUInt32(hour) IN {_HOURS} {_SYNC}",
    f"ALTER TABLE span_key_minutes DELETE WHERE project = {{project:String}} AND toUInt32({_HOUR_OF_MINUTE}) IN {_HOURS} {_SYNC}",
)
_HOURS_WHERE = f"""
    WHERE project = {{project:String}}
      AND start_time >= toDateTime(arrayMin({_HOURS})) AND start_time < toDateTime(arrayMax({_HOURS}) + 3600)
      AND intDiv(toUInt32(toDateTime(start_time)), 3600) * 3600 IN {_HOURS}"""
REBUILD_HOURS = f"INSERT INTO span_key_minutes {_SELECT.format(where=_HOURS_WHERE)}"

# --- re-pricing (``collector.storage.maintenance.rebuild_totals``): every hour from the first
# affected one (``{since_ns}``) on, of one project or (``{project}`` empty) all ---------------------
_SINCE = "intDiv(intDiv({since_ns:Int64}, 1000000000), 3600) * 3600"
_PROJECT = "({project:String} = '' OR project = {project:String})"
DROP_SINCE = (
    f"ALTER TABLE span_key_hours DELETE WHERE toUInt32(hour) >= {_SINCE} AND {_PROJECT} {_SYNC}",
    f"ALTER TABLE span_key_minutes DELETE WHERE toUInt32(minute) >= {_SINCE} AND {_PROJECT} {_SYNC}",
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


def rollup_filters(params: dict[str, object]) -> str:
    """Every filter with a value, ``AND``-joined (fragments are constants; "1" for none)."""
    return " AND ".join(sql for name, sql in FILTERS.items() if params.get(name) is not None) or "1"


# Where each part of [start, end) is read from (epoch seconds): the whole hours [{lo_h}, {hi_h}) from
# span_key_hours, the other whole minutes of [{lo_s}, {hi_s}) from span_key_minutes, the rest (the
# cut edges) from spans. An empty part is (0, 0).
_WHOLE_HOURS = "hour >= toDateTime({lo_h:Int64}) AND hour < toDateTime({hi_h:Int64})"
_OTHER_MINUTES = """minute >= toDateTime({lo_s:Int64}) AND minute < toDateTime({hi_s:Int64})
      AND (minute < toDateTime({lo_h:Int64}) OR minute >= toDateTime({hi_h:Int64}))"""
EDGES = "(start_time < toDateTime64({lo_s:Int64}, 9) OR start_time >= toDateTime64({hi_s:Int64}, 9))"

_ROLLUP_PART = """toUInt64(spans) AS part_spans, toUInt64(failures) AS part_failures, runs AS part_runs,
        duration AS part_duration, toUInt64(input_tokens) AS part_in, toUInt64(output_tokens) AS part_out,
        toFloat64(cost_usd) AS part_cost"""
_SPANS_PART = f"""count() AS part_spans, countIf({FAILED}) AS part_failures,
        uniqExactState(cityHash64(trace_id)) AS part_runs, quantilesTDigestState(0.5, 0.95)({DURATION_S}) AS part_duration,
        sum(toUInt64(input_tokens)) AS part_in, sum(toUInt64(output_tokens)) AS part_out, sum(cost_usd) AS part_cost"""


def groups(by: str, key_spans: str, filters: str, span_filters: str, *, keyed: bool) -> str:
    """Per group of ``by`` (a ``GROUP_KEYS`` name): the same columns as ``sql.spans.groups`` before
    its ranking (``sql.spans.ranked``), from the hours, the minutes and the edges' spans, merged.
    ``filters`` from ``rollup_filters``; ``span_filters``: the range and the same filters over spans."""
    key = GROUP_KEYS[by]
    only_keyed, spans_keyed = (f" AND ({key}) != ''", f" AND ({key_spans}) != ''") if keyed else ("", "")
    rollup = "\n    SELECT {key} AS key, {part}\n    FROM {table}\n    WHERE project = {{project:String}} AND {when}\n      AND {filters}{keyed}"
    hours = rollup.format(
        key=key, part=_ROLLUP_PART, table="span_key_hours", when=_WHOLE_HOURS, filters=filters, keyed=only_keyed
    )
    minutes = rollup.format(
        key=key, part=_ROLLUP_PART, table="span_key_minutes", when=_OTHER_MINUTES, filters=filters, keyed=only_keyed
    )
    return f"""
SELECT key, sum(part_spans) AS n_spans, sum(part_failures) AS failures, uniqExactMerge(part_runs) AS runs,
    quantilesTDigestMerge(0.5, 0.95)(part_duration) AS duration_q,
    sum(part_in) AS in_tokens, sum(part_out) AS out_tokens, sum(part_cost) AS cost
FROM ({hours}
    UNION ALL{minutes}
    UNION ALL
    SELECT {key_spans} AS key, {_SPANS_PART}
    FROM spans
    WHERE {span_filters} AND {EDGES}{spans_keyed}
    GROUP BY key
)
GROUP BY key"""


def count(filters: str, span_filters: str) -> str:
    """The number of spans a list's filters pass (``sql.spans.count``), from the rollups and the edges."""
    rollup = "SELECT toUInt64(spans) AS n FROM {table} WHERE project = {{project:String}} AND {when} AND {filters}"
    return f"""
SELECT sum(n) AS total FROM (
    {rollup.format(table="span_key_hours", when=_WHOLE_HOURS, filters=filters)}
    UNION ALL {rollup.format(table="span_key_minutes", when=_OTHER_MINUTES, filters=filters)}
    UNION ALL SELECT count() AS n FROM spans WHERE {span_filters} AND {EDGES}
)"""
