"""All DDL of the store, as numbered migrations; the same SQL runs on chDB and on a server.

Design (why the tables look like this):

- ``spans`` is a wide, append-only table. Idempotency on (project, trace_id, span_id) is
  enforced when writing (``Store.insert_spans`` drops keys already stored, looking up only
  what ``recent.RecentKeys`` cannot vouch for, and a repeated ``insert_deduplication_token``
  is ignored by ``non_replicated_deduplication_window``), so every view below sees each span
  once and reads never need ``FINAL``. ReplacingMergeTree on the full key is only a second
  guard that reclaims disk should two writers ever race.
- Rows are ordered by (project, hour, trace_id, start_time, span_id): a per-project time
  range is a contiguous key range; within an hour one trace's spans are adjacent, so
  fetching a trace reads one or two granules, and trace ids, sessions and resources of
  neighbouring rows repeat, which is what makes a span cost a few dozen bytes on disk.
  A bloom filter on trace_id serves trace look-ups without a time range.
- ``runs_agg`` is filled by a materialized view: one partial row per (project, hour of the
  span, trace). Listing runs merges only the hours of the requested range, and keeps a run
  only if its root span is among them (so a run that started before the range never shows up
  with partial totals). The partial row holding a run's root span (its "head") has the run's
  start, end, status and outcome, so counting runs and picking a page sorted by time need no
  merge; only the page's runs (or figures that need whole-run totals) are merged.
- ``span_minutes`` is filled by another view: call-level figures per minute, agent and model,
  so an overview or a time series over a day reads thousands of rows, not millions.
- ``span_hours`` holds the same figures per hour, filled from ``span_minutes`` by a view on
  it (each block the minute view writes is folded into its hours), so a range of days reads
  hundreds of rows: merging tens of thousands of per-minute TDigest states was most of an
  overview's time. Queries read whole hours from it and the other minutes of the range from
  ``span_minutes``, so every figure is what the minutes alone would give.
- Retention is a TTL on the day partitions, dropped whole (``ttl_only_drop_parts``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from agentwatch_platform.collector.storage.sql.span_keys import (
    SPAN_KEY_HOURS,
    SPAN_KEY_HOURS_BACKFILL,
    SPAN_KEY_HOURS_MV,
    SPAN_KEY_MINUTES,
    SPAN_KEY_MINUTES_BACKFILL,
    SPAN_KEY_MINUTES_MV,
)

# Spans whose tokens and cost count: all but the run span, which may carry the SDK's own
# totals. An engine span (kind "engine": the engine's record of a call) keeps its own figures
# as attributes and counts only what it adds to the client's LLM span (collector.ingest.engine_join);
# an engine-only call is counted by the "llm" row engine_join writes for it. So an LLM call is
# never counted twice.
BILLABLE = "(kind != 'run')"
# A run's root: the run span, or a trace's parentless span unless it is an engine's record.
ROOT = "(kind = 'run' OR (parent_span_id = '' AND kind != 'engine'))"

SPAN_COLUMNS = """
    project LowCardinality(String),
    trace_id String CODEC(ZSTD(1)),
    span_id String CODEC(ZSTD(1)),
    parent_span_id String CODEC(ZSTD(1)),
    name LowCardinality(String),
    kind LowCardinality(String),
    start_time DateTime64(9) CODEC(Delta, ZSTD(1)),
    end_time DateTime64(9) CODEC(Delta, ZSTD(1)),
    service_name LowCardinality(String),
    status_code LowCardinality(String),
    status_message String CODEC(ZSTD(1)),
    error_type LowCardinality(String),
    is_timeout Bool,
    agent_name LowCardinality(String),
    session_id String CODEC(ZSTD(1)),
    user_id String CODEC(ZSTD(1)),
    model LowCardinality(String),
    provider LowCardinality(String),
    input_tokens UInt32 CODEC(T64, ZSTD(1)),
    output_tokens UInt32 CODEC(T64, ZSTD(1)),
    cached_tokens UInt32 CODEC(T64, ZSTD(1)),
    cost_usd Float64 CODEC(ZSTD(1)),
    price_version LowCardinality(String),
    ttft_s Nullable(Float32) CODEC(ZSTD(1)),
    tpot_s Nullable(Float32) CODEC(ZSTD(1)),
    queue_s Nullable(Float32) CODEC(ZSTD(1)),
    prefill_s Nullable(Float32) CODEC(ZSTD(1)),
    decode_s Nullable(Float32) CODEC(ZSTD(1)),
    tool_name LowCardinality(String),
    tool_cache_hit Bool,
    step_index Int32 CODEC(T64, ZSTD(1)),
    finish_reason LowCardinality(String),
    outcome LowCardinality(String),
    budget_exceeded LowCardinality(String),
    request_id String CODEC(ZSTD(1)),
    input_text String CODEC(ZSTD(3)),
    output_text String CODEC(ZSTD(3)),
    attributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    resource Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    events String CODEC(ZSTD(1))"""

SPANS_TEXT_REF = "ALTER TABLE spans ADD COLUMN IF NOT EXISTS text_ref UInt64 DEFAULT 0 AFTER output_text"

# Granules of at most 2 MiB (ClickHouse's default: 10 MiB): a merge reads a granule of every part it
# merges at once, and spans with captured text (~950 B a row uncompressed) fill 8192-row granules of
# ~8 MB, so the merges catching up after a burst held ~10 MB per part (+150 MB for 13 parts; +85
# with 2 MiB, +50 with 1 MiB; bench/results/scale.md). Spans without text (~240 B a row) still fill
# 8192 rows in 2 MiB, so their granules, and the queries' marks, are unchanged (1 MiB doubled them:
# +35-60 % query CPU). The setting cannot be altered: a store created before keeps 10 MiB granules.
SPANS = f"""
CREATE TABLE IF NOT EXISTS spans ({SPAN_COLUMNS},
    INDEX idx_trace trace_id TYPE bloom_filter(0.001) GRANULARITY 1
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMMDD(start_time)
ORDER BY (project, toStartOfHour(start_time), trace_id, start_time, span_id)
SETTINGS non_replicated_deduplication_window = 10000, ttl_only_drop_parts = 1, index_granularity_bytes = 2097152
"""

RUNS_AGG = """
CREATE TABLE IF NOT EXISTS runs_agg (
    project LowCardinality(String),
    hour DateTime,
    trace_id String,
    start_time SimpleAggregateFunction(min, DateTime64(9)),
    end_time SimpleAggregateFunction(max, DateTime64(9)),
    roots SimpleAggregateFunction(sum, UInt64),
    opened SimpleAggregateFunction(sum, UInt64) DEFAULT 0,
    name AggregateFunction(argMin, String, UInt8),
    agent SimpleAggregateFunction(max, LowCardinality(String)),
    service SimpleAggregateFunction(max, LowCardinality(String)),
    session_id SimpleAggregateFunction(max, String),
    user_id SimpleAggregateFunction(max, String),
    outcome SimpleAggregateFunction(max, LowCardinality(String)),
    budget_exceeded SimpleAggregateFunction(max, LowCardinality(String)),
    root_error SimpleAggregateFunction(max, UInt8),
    root_timeout SimpleAggregateFunction(max, UInt8),
    steps SimpleAggregateFunction(sum, UInt64),
    llm_calls SimpleAggregateFunction(sum, UInt64),
    tool_calls SimpleAggregateFunction(sum, UInt64),
    tool_failures SimpleAggregateFunction(sum, UInt64),
    input_tokens SimpleAggregateFunction(sum, UInt64),
    output_tokens SimpleAggregateFunction(sum, UInt64),
    cached_tokens SimpleAggregateFunction(sum, UInt64),
    cost_usd SimpleAggregateFunction(sum, Float64),
    models SimpleAggregateFunction(groupUniqArrayArray, Array(String))
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(hour)
ORDER BY (project, hour, trace_id)
SETTINGS ttl_only_drop_parts = 1
"""

# One expression per runs_agg column, over spans; shared by the view and by run detail.
# (RUN_PARTIALS_V1: as migrations 1 to 13 made the view, before the spans had a version.)
RUN_PARTIALS_V1 = f"""
    min(start_time) AS start_time,
    max(end_time) AS end_time,
    toUInt64(countIf({ROOT})) AS roots,
    toUInt64(0) AS opened,
    argMinState(toString(name), toUInt8(multiIf(kind = 'run', 0, parent_span_id = '', 1, 2))) AS name,
    max(agent_name) AS agent,
    max(service_name) AS service,
    max(session_id) AS session_id,
    max(user_id) AS user_id,
    max(outcome) AS outcome,
    max(budget_exceeded) AS budget_exceeded,
    toUInt8(max({ROOT} AND status_code = 'error')) AS root_error,
    toUInt8(max({ROOT} AND is_timeout)) AS root_timeout,
    toUInt64(countIf(kind = 'step')) AS steps,
    toUInt64(countIf(kind = 'llm')) AS llm_calls,
    toUInt64(countIf(kind = 'tool')) AS tool_calls,
    toUInt64(countIf(kind = 'tool' AND status_code = 'error')) AS tool_failures,
    sumIf(toUInt64(input_tokens), {BILLABLE}) AS input_tokens,
    sumIf(toUInt64(output_tokens), {BILLABLE}) AS output_tokens,
    sumIf(toUInt64(cached_tokens), {BILLABLE}) AS cached_tokens,
    sumIf(cost_usd, {BILLABLE}) AS cost_usd,
    groupUniqArrayIf(toString(model), model != '') AS models"""

# A run's version is its root's (``service.version``: the run's own, else its process's): the root
# names the release that ran the task, whatever versions third-party child spans carry.
RUN_PARTIALS = f"""{RUN_PARTIALS_V1},
    maxIf(toString(service_version), {ROOT}) AS version"""

# The runs_agg columns RUN_PARTIALS fills, in its order: an insert names them, so the columns it
# leaves out (``inserted``) take their defaults.
RUN_PARTIAL_COLUMNS = ", ".join(re.findall(r" AS (\w+),?$", RUN_PARTIALS, re.MULTILINE))


def _runs_mv(partials: str) -> str:
    return f"""
CREATE MATERIALIZED VIEW IF NOT EXISTS runs_mv TO runs_agg AS
SELECT project, hour, trace_id, {partials}
FROM (SELECT *, toStartOfHour(start_time) AS hour FROM spans)
GROUP BY project, hour, trace_id
"""


RUNS_MV_V1 = _runs_mv(RUN_PARTIALS_V1)
RUNS_MV = _runs_mv(RUN_PARTIALS)

# Call-level figures per (project, minute, agent, model): what overview, time series and cost
# read for every whole minute of a range (the edges come from spans, so totals stay exact).
# (name, column type, expression over spans), in column order.
SPAN_ROLLUP: tuple[tuple[str, str, str], ...] = (
    ("cost_usd", "SimpleAggregateFunction(sum, Float64)", f"sumIf(cost_usd, {BILLABLE})"),
    ("input_tokens", "SimpleAggregateFunction(sum, UInt64)", f"sumIf(toUInt64(input_tokens), {BILLABLE})"),
    ("output_tokens", "SimpleAggregateFunction(sum, UInt64)", f"sumIf(toUInt64(output_tokens), {BILLABLE})"),
    ("llm_calls", "SimpleAggregateFunction(sum, UInt64)", "toUInt64(countIf(kind = 'llm'))"),
    ("tool_calls", "SimpleAggregateFunction(sum, UInt64)", "toUInt64(countIf(kind = 'tool'))"),
    (
        "tool_failures",
        "SimpleAggregateFunction(sum, UInt64)",
        "toUInt64(countIf(kind = 'tool' AND status_code = 'error'))",
    ),
    ("calls", "SimpleAggregateFunction(sum, UInt64)", "toUInt64(countIf(kind IN ('llm', 'tool')))"),
    ("timeouts", "SimpleAggregateFunction(sum, UInt64)", "toUInt64(countIf(kind IN ('llm', 'tool') AND is_timeout))"),
    ("tool_cache_hits", "SimpleAggregateFunction(sum, UInt64)", "toUInt64(countIf(kind = 'tool' AND tool_cache_hit))"),
    (
        "tokens_saved",
        "SimpleAggregateFunction(sum, UInt64)",
        "sumIf(toUInt64OrZero(attributes['agentwatch.tool.tokens_saved']), kind = 'tool')",
    ),
    (
        "small_model_calls",
        "SimpleAggregateFunction(sum, UInt64)",
        "toUInt64(countIf(kind = 'llm' AND attributes['agentwatch.llm.model_tier'] = 'small'))",
    ),
    (
        "ttft",
        "AggregateFunction(quantilesTDigestIf(0.5, 0.95), Float32, UInt8)",
        "quantilesTDigestIfState(0.5, 0.95)(toFloat32(ifNull(ttft_s, 0)), toUInt8((kind = 'llm' OR (kind = 'engine' AND attributes['agentwatch.ttft.counted'] = 'true')) AND ttft_s IS NOT NULL))",
    ),
    (
        "tpot",
        "AggregateFunction(quantilesTDigestIf(0.5, 0.95), Float32, UInt8)",
        "quantilesTDigestIfState(0.5, 0.95)(toFloat32(ifNull(tpot_s, 0)), toUInt8(kind = 'llm' AND tpot_s IS NOT NULL))",
    ),
)
SPAN_PARTIALS = ",\n    ".join(f"{expr} AS {name}" for name, _, expr in SPAN_ROLLUP)
ROLLUP_COLUMNS = ", ".join(name for name, _, _ in SPAN_ROLLUP)


def _rollup_table(table: str, bucket: str) -> str:
    """DDL of a table of ``SPAN_ROLLUP`` states per project, time bucket, agent and model."""
    return f"""
CREATE TABLE IF NOT EXISTS {table} (
    project LowCardinality(String),
    {bucket} DateTime,
    agent LowCardinality(String),
    model LowCardinality(String),
    {", ".join(f"{name} {kind}" for name, kind, _ in SPAN_ROLLUP)}
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM({bucket})
ORDER BY (project, {bucket}, agent, model)
SETTINGS ttl_only_drop_parts = 1
"""


SPAN_MINUTES = _rollup_table("span_minutes", "minute")

_SPAN_MINUTES_SELECT = f"""
SELECT project, minute, agent, model, {SPAN_PARTIALS}
FROM (SELECT *, toDateTime(toStartOfMinute(start_time)) AS minute, agent_name AS agent FROM spans)
GROUP BY project, minute, agent, model"""
SPAN_MINUTES_MV = f"CREATE MATERIALIZED VIEW IF NOT EXISTS span_minutes_mv TO span_minutes AS {_SPAN_MINUTES_SELECT}"
SPAN_MINUTES_BACKFILL = f"INSERT INTO span_minutes {_SPAN_MINUTES_SELECT}"


def _merge_state(name: str, kind: str) -> str:
    """The expression that folds rollup column ``name`` (of type ``kind``) over rows into one state."""
    if kind.startswith("SimpleAggregateFunction(sum,"):
        return f"sum({name}) AS {name}"
    # AggregateFunction(quantilesTDigestIf(0.5, 0.95), Float32, UInt8) -> quantilesTDigestIfMergeState(0.5, 0.95)
    function, params = kind.removeprefix("AggregateFunction(").split(")", 1)[0].split("(")
    return f"{function}MergeState({params})({name}) AS {name}"


# A UTC hour by epoch arithmetic, whatever the server's time zone (toStartOfHour works in local
# time, whose hours need not be whole UTC hours, nor 60 minutes long at a DST change).
EPOCH_HOUR = "toDateTime(intDiv(toUInt32({}), 3600) * 3600)"

SPAN_HOURS = _rollup_table("span_hours", "hour")

_SPAN_HOURS_SELECT = f"""
SELECT project, {EPOCH_HOUR.format("minute")} AS hour, agent, model, {", ".join(_merge_state(name, kind) for name, kind, _ in SPAN_ROLLUP)}
FROM span_minutes
GROUP BY project, hour, agent, model"""
SPAN_HOURS_MV = f"CREATE MATERIALIZED VIEW IF NOT EXISTS span_hours_mv TO span_hours AS {_SPAN_HOURS_SELECT}"
SPAN_HOURS_BACKFILL = f"INSERT INTO span_hours {_SPAN_HOURS_SELECT}"

# Run heads per (project, minute of the run's start, agent): what the overview and time series
# count runs, failures, outcomes and run latency from for every whole minute of a range, so a
# day's overview merges thousands of rows, not a head per run (collector.query.metrics reads the
# minutes a bucket boundary or the range's ends cut, and runs without a root, from runs_agg).
# Filled by a view on runs_agg: a head is the partial row holding a run's root (``roots > 0``),
# as sql.metrics.run_heads reads it.
RUN_MINUTES = """
CREATE TABLE IF NOT EXISTS run_minutes (
    project LowCardinality(String),
    minute DateTime,
    agent LowCardinality(String),
    runs SimpleAggregateFunction(sum, UInt64),
    failed_runs SimpleAggregateFunction(sum, UInt64),
    successes SimpleAggregateFunction(sum, UInt64),
    with_outcome SimpleAggregateFunction(sum, UInt64),
    latency AggregateFunction(quantilesIf(0.5, 0.95), Float64, UInt8)
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(minute)
ORDER BY (project, minute, agent)
SETTINGS ttl_only_drop_parts = 1
"""

# A head's duration and minute (UTC arithmetic, whatever the server's time zone); shared with the
# queries that read heads straight from runs_agg, so both count a head the same way.
HEAD_DURATION_S = "greatest(toUnixTimestamp64Nano(end_time) - toUnixTimestamp64Nano(start_time), 0) / 1e9"
HEAD_MINUTE_S = "intDiv(toUnixTimestamp64Nano(start_time), 60000000000) * 60"
HEAD_FAILED = "(budget_exceeded != '' OR root_timeout = 1 OR root_error = 1)"

_RUN_MINUTES_SELECT = f"""
SELECT project, toDateTime({HEAD_MINUTE_S}) AS minute, agent,
    count() AS runs,
    countIf({HEAD_FAILED}) AS failed_runs,
    countIf(outcome = 'success') AS successes,
    countIf(outcome != '') AS with_outcome,
    quantilesIfState(0.5, 0.95)({HEAD_DURATION_S}, toUInt8(1)) AS latency
FROM runs_agg
WHERE roots > 0
GROUP BY project, minute, agent"""
RUN_MINUTES_MV = f"CREATE MATERIALIZED VIEW IF NOT EXISTS run_minutes_mv TO run_minutes AS {_RUN_MINUTES_SELECT}"
RUN_MINUTES_BACKFILL = f"INSERT INTO run_minutes {_RUN_MINUTES_SELECT}"

# A run that did work. A request refused before any work (outcome ``refused``: by a rate limit or a
# budget) is no run: it is counted on its own (``refused``) and kept out of run counts, latency,
# failure and success rates, per-run figures and the agent's median run cost (docs/runs.md "Outcomes").
COUNTED_RUN = "outcome != 'refused'"

# run_minutes from migration 13 on: the same figures over counted runs, and the refused beside them.
_RUN_MINUTES_COUNTED_SELECT = f"""
SELECT project, toDateTime({HEAD_MINUTE_S}) AS minute, agent,
    countIf({COUNTED_RUN}) AS runs,
    countIf({COUNTED_RUN} AND {HEAD_FAILED}) AS failed_runs,
    countIf(outcome = 'success') AS successes,
    countIf(outcome != '' AND {COUNTED_RUN}) AS with_outcome,
    quantilesIfState(0.5, 0.95)({HEAD_DURATION_S}, toUInt8({COUNTED_RUN})) AS latency,
    countIf(NOT {COUNTED_RUN}) AS refused
FROM runs_agg
WHERE roots > 0
GROUP BY project, minute, agent"""
RUN_MINUTES_REFUSED = (
    "ALTER TABLE run_minutes ADD COLUMN IF NOT EXISTS refused SimpleAggregateFunction(sum, UInt64) DEFAULT 0",
    "DROP VIEW IF EXISTS run_minutes_mv",
    f"CREATE MATERIALIZED VIEW IF NOT EXISTS run_minutes_mv TO run_minutes AS {_RUN_MINUTES_COUNTED_SELECT}",
)

# Totals of the runs that started in a minute (runs, steps per run, the largest run's steps and
# cost; and each run's cost under the agents of its root rows, for the agent's median run cost of
# a run's detail), one row per minute, as the run closer (``collector.storage.run_closes``) last
# computed them: the overview's per-run figures read a few rows per minute instead of merging every
# run of the range by trace (~1 s of CPU for a day at 100M spans, bench/results/scale_100m.md). A minute is
# rewritten whole (its agents in arrays), so a run that moves to another minute or agent leaves
# nothing behind; the latest ``closed_to`` wins (read with ``FINAL``).
# Runs whose ``runs_agg`` rows were inserted at or after the closer's mark (``run_close_marks``)
# may differ from their minute's row: queries read their minutes from ``runs_agg``, so every
# figure stays what merging the runs gives.
CLOSED_RUN_MINUTES = """
CREATE TABLE IF NOT EXISTS closed_run_minutes (
    project LowCardinality(String),
    minute DateTime,
    closed_to DateTime,
    agents Array(LowCardinality(String)),
    runs Array(UInt64),
    steps Array(UInt64),
    max_steps Array(UInt64),
    max_cost_usd Array(Float64),
    cost_agents Array(LowCardinality(String)),
    run_costs Array(Array(Float64))
)
ENGINE = ReplacingMergeTree(closed_to)
PARTITION BY toYYYYMM(minute)
ORDER BY (project, minute)
SETTINGS ttl_only_drop_parts = 1
"""

# One row per pass of the run closer: every ``runs_agg`` row inserted before ``closed_to`` is
# reflected in ``closed_run_minutes`` (the latest mark counts).
RUN_CLOSE_MARKS = """
CREATE TABLE IF NOT EXISTS run_close_marks (
    closed_to DateTime,
    at DateTime64(3) DEFAULT now64(3)
)
ENGINE = MergeTree
ORDER BY closed_to
"""

# What the closer needs of runs_agg: when each row was inserted (the server's clock; 0 for rows
# from before the migration, which the closer's first pass reads whole), indexed so that the rows
# inserted since a mark are found without reading the rest; and the trace id as a number, which
# finds a set of traces' rows reading 8 bytes a row instead of the 32-character id.
RUNS_AGG_CLOSE_COLUMNS = (
    "ALTER TABLE runs_agg ADD COLUMN IF NOT EXISTS inserted SimpleAggregateFunction(max, DateTime) DEFAULT toDateTime(0)",
    "ALTER TABLE runs_agg ADD COLUMN IF NOT EXISTS trace_hash UInt64 MATERIALIZED cityHash64(trace_id)",
    "ALTER TABLE runs_agg ADD INDEX IF NOT EXISTS idx_inserted inserted TYPE minmax GRANULARITY 1",
    "ALTER TABLE runs_agg MATERIALIZE COLUMN inserted SETTINGS mutations_sync = 2",
    "ALTER TABLE runs_agg MATERIALIZE COLUMN trace_hash SETTINGS mutations_sync = 2",
    "ALTER TABLE runs_agg MATERIALIZE INDEX idx_inserted SETTINGS mutations_sync = 2",
    # every later row, whoever writes it (the views, open run heads, rebuilds), carries its insert's time
    "ALTER TABLE runs_agg MODIFY COLUMN inserted SimpleAggregateFunction(max, DateTime) DEFAULT now()",
)

SERVICE_VERSION_COLUMNS = (
    "ALTER TABLE spans ADD COLUMN IF NOT EXISTS service_version LowCardinality(String) DEFAULT ''",
    "ALTER TABLE runs_agg ADD COLUMN IF NOT EXISTS version SimpleAggregateFunction(max, LowCardinality(String)) DEFAULT ''",
    "DROP VIEW IF EXISTS runs_mv",
    RUNS_MV,
)

API_KEYS = """
CREATE TABLE IF NOT EXISTS api_keys (
    project LowCardinality(String),
    key_id String,
    salt String,
    key_hash String,
    name String,
    created_at DateTime64(3),
    revoked_at Nullable(DateTime64(3))
)
ENGINE = ReplacingMergeTree(created_at)
ORDER BY key_id
"""

FEEDBACK = """
CREATE TABLE IF NOT EXISTS feedback (
    project LowCardinality(String),
    trace_id String,
    feedback_id String,
    score Nullable(Float64),
    label LowCardinality(String),
    comment String CODEC(ZSTD(3)),
    source LowCardinality(String),
    created_at DateTime64(3)
)
ENGINE = ReplacingMergeTree
ORDER BY (project, trace_id, feedback_id)
"""

ENGINE_METRICS = """
CREATE TABLE IF NOT EXISTS engine_metrics (
    project LowCardinality(String),
    engine LowCardinality(String),
    ts DateTime64(3) CODEC(Delta, ZSTD(1)),
    metric LowCardinality(String),
    labels Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    value Float64 CODEC(Gorilla, ZSTD(1))
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (project, engine, metric, ts)
SETTINGS ttl_only_drop_parts = 1
"""

ENGINES = """
CREATE TABLE IF NOT EXISTS engines (
    project LowCardinality(String),
    engine String,
    url String,
    updated_at DateTime64(3)
)
ENGINE = ReplacingMergeTree(updated_at)
ORDER BY (project, engine)
"""

ALERTS = """
CREATE TABLE IF NOT EXISTS alerts (
    project LowCardinality(String),
    alert_id String,
    fingerprint String,
    rule LowCardinality(String),
    severity LowCardinality(String),
    state LowCardinality(String),
    scope Map(String, String),
    metric LowCardinality(String),
    value Nullable(Float64),
    baseline Nullable(Float64),
    threshold Nullable(Float64),
    message String,
    started_at DateTime64(3),
    resolved_at Nullable(DateTime64(3)),
    last_notified_at Nullable(DateTime64(3)),
    updated_at DateTime64(3)
)
ENGINE = ReplacingMergeTree(updated_at)
ORDER BY (project, alert_id)
"""

ALERT_DELIVERIES = """
CREATE TABLE IF NOT EXISTS alert_deliveries (
    project LowCardinality(String),
    alert_id String,
    channel LowCardinality(String),
    attempt UInt16,
    ok Bool,
    error String,
    at DateTime64(3)
)
ENGINE = MergeTree
ORDER BY (project, alert_id, at)
"""

ALERT_INCIDENT_COLUMNS = (
    "ALTER TABLE alerts ADD COLUMN IF NOT EXISTS peak Nullable(Float64)",
    "ALTER TABLE alerts ADD COLUMN IF NOT EXISTS last_breach_at Nullable(DateTime64(3))",
    "ALTER TABLE alerts ADD COLUMN IF NOT EXISTS no_data_since Nullable(DateTime64(3))",
    "ALTER TABLE alert_deliveries ADD COLUMN IF NOT EXISTS event LowCardinality(String) DEFAULT ''",
)

PRICE_VERSIONS = """
CREATE TABLE IF NOT EXISTS price_versions (
    version String,
    model String,
    input_per_mtok Float64,
    output_per_mtok Float64,
    cached_input_per_mtok Float64,
    created_at DateTime64(3)
)
ENGINE = ReplacingMergeTree(created_at)
ORDER BY (version, model)
"""

AUDIT_LOG = """
CREATE TABLE IF NOT EXISTS audit_log (
    project LowCardinality(String),
    at DateTime64(3),
    actor String,
    action LowCardinality(String),
    target String,
    detail String
)
ENGINE = MergeTree
ORDER BY (project, at)
"""

# One row per term of a named lease; a term's row is unique by its insert_deduplication_token
# (sql.lease), which needs the deduplication window.
LEASES = """
CREATE TABLE IF NOT EXISTS leases (
    name LowCardinality(String),
    term UInt64,
    holder String,
    expires_at DateTime64(3),
    taken_at DateTime64(3)
)
ENGINE = MergeTree
ORDER BY (name, term)
SETTINGS non_replicated_deduplication_window = 10000
"""

COLLECTOR_COUNTERS = """
CREATE TABLE IF NOT EXISTS collector_counters (
    collector String,
    project LowCardinality(String),
    received UInt64,
    rejected UInt64,
    updated_at DateTime64(3)
)
ENGINE = ReplacingMergeTree(updated_at)
ORDER BY (collector, project)
"""

MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version UInt32,
    name String,
    applied_at DateTime64(3) DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree
ORDER BY version
"""


SPANS_VERTICAL_MERGES = (
    "ALTER TABLE spans MODIFY SETTING vertical_merge_algorithm_min_rows_to_activate = 1, "
    "vertical_merge_algorithm_min_columns_to_activate = 1"
)


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    statements: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "initial",
        (
            SPANS,
            RUNS_AGG,
            RUNS_MV_V1,
            API_KEYS,
            FEEDBACK,
            ENGINE_METRICS,
            ENGINES,
            ALERTS,
            ALERT_DELIVERIES,
            PRICE_VERSIONS,
        ),
    ),
    # The view first, then the backfill: a migration runs before the collector ingests.
    Migration(2, "span_minutes", (SPAN_MINUTES, SPAN_MINUTES_MV, SPAN_MINUTES_BACKFILL)),
    Migration(3, "span_hours", (SPAN_HOURS, SPAN_HOURS_MV, SPAN_HOURS_BACKFILL)),
    # Engine spans (kind "engine") are neither billed nor runs, and a run is listed from its first
    # span (runs_agg.opened, collector.ingest.live_runs): the views are recreated with today's BILLABLE,
    # ROOT and RUN_PARTIALS (rows already folded keep what they were folded with).
    Migration(
        4,
        "engine_kind_and_open_runs",
        (
            "ALTER TABLE runs_agg ADD COLUMN IF NOT EXISTS opened SimpleAggregateFunction(sum, UInt64) DEFAULT 0 AFTER roots",
            "DROP VIEW IF EXISTS runs_mv",
            RUNS_MV_V1,
            "DROP VIEW IF EXISTS span_minutes_mv",
            SPAN_MINUTES_MV,
        ),
    ),
    # Alerts are incidents: their peak, when the condition last held (the hold-down counts from
    # it), a "no data" stretch; each delivery names its event, so a restart re-sends only what
    # no attempt delivered.
    Migration(5, "alert_incidents", ALERT_INCIDENT_COLUMNS),
    # Keys carry scopes (collector.auth.scopes; empty = a key from before scopes, ingest and read), and
    # admin actions (key create/revoke, engine add/delete, reprice) leave an audit trail.
    Migration(
        6,
        "key_scopes_and_audit",
        (
            "ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS scopes String DEFAULT '' AFTER name",
            AUDIT_LOG,
        ),
    ),
    # Many collectors on one store: leases (collector.storage.lease) for the span writer and the
    # work done once per cluster (alerts, engine scraping, the engine-join billing pass).
    Migration(7, "leases", (LEASES,)),
    # Each collector's span counters, so any collector answers /api/ingest for all (collector.query.fleet).
    Migration(8, "collector_counters", (COLLECTOR_COUNTERS,)),
    # Spans merge column by column (the vertical algorithm, for every merge): a merge of parts with
    # captured text held a block of every column of every part at once, ~90 MB more at the peak
    # of a 200k-span burst (bench/results/scale.md), for the same CPU.
    Migration(9, "spans_vertical_merges", (SPANS_VERTICAL_MERGES,)),
    # Run heads per minute (run_minutes): the overview counted runs and their latency from a head
    # per run, ~240 ms of a day's overview at 100M spans (bench/results/scale_100m.md).
    Migration(10, "run_minutes", (RUN_MINUTES, RUN_MINUTES_MV, RUN_MINUTES_BACKFILL)),
    # Closed runs per minute (closed_run_minutes, filled by collector.storage.run_closes): the overview
    # merged every run of its range by trace for its per-run figures, ~1 s of CPU for a day at 100M
    # spans. The closer's first pass fills the table; until it has, queries merge runs as before.
    Migration(11, "closed_run_minutes", (*RUNS_AGG_CLOSE_COLUMNS, CLOSED_RUN_MINUTES, RUN_CLOSE_MARKS)),
    # Where a span's captured text is when not in its own columns: an embedded store keeps it in
    # files of its own (collector.storage.texts; 0: in the columns, as a ClickHouse server keeps it).
    Migration(12, "span_text_refs", (SPANS_TEXT_REF,)),
    # Requests refused before any work (outcome ``refused``) are not runs: run heads per minute count
    # them apart. Rows folded before hold no refused requests (the outcome did not exist; an older
    # SDK's refusals stored before it stay ``abandoned``, docs/runs.md "Outcomes").
    Migration(13, "refused_requests", RUN_MINUTES_REFUSED),
    # The agent's version (OpenTelemetry service.version) on every span and on the run (its root's),
    # so runs are filtered and compared per version. Rows stored before have '' (no version known).
    Migration(14, "service_version", SERVICE_VERSION_COLUMNS),
    # The span explorer's group-bys read whole minutes from span_key_minutes (its figures per minute
    # and key tuple) and only the cut edges from spans: a day's group-by read every span.
    Migration(15, "span_key_minutes", (SPAN_KEY_MINUTES, SPAN_KEY_MINUTES_MV, SPAN_KEY_MINUTES_BACKFILL)),
    # ... and its whole hours from span_key_hours: merging a day of per-minute TDigest states was most
    # of a group-by's time (10M spans, failures by tool: 235 of 318 ms of CPU).
    Migration(16, "span_key_hours", (SPAN_KEY_HOURS, SPAN_KEY_HOURS_MV, SPAN_KEY_HOURS_BACKFILL)),
)


def bootstrap_statements() -> list[str]:
    """What must exist before migrations are looked up: the table that records them, and leases."""
    return [MIGRATIONS_TABLE, LEASES]  # leases: one collector of many applies the migrations


APPLIED_VERSIONS = "SELECT version FROM schema_migrations"
RECORD_MIGRATION = "INSERT INTO schema_migrations (version, name) VALUES ({version:UInt32}, {name:String})"

# TTLs follow Settings.retention_days; set at start where a table's differs (metadata only).
TTL_TABLES = {
    "spans": "start_time",
    "runs_agg": "hour",
    "span_minutes": "minute",
    "span_hours": "hour",
    "span_key_minutes": "minute",
    "span_key_hours": "hour",
    "run_minutes": "minute",
    "closed_run_minutes": "minute",
    "engine_metrics": "ts",
}


# Each TTL table's TTL as the server keeps it ('' for none), so that a start alters only the tables
# whose TTL is not the retention's: the nine ALTERs were ~60 ms of CPU every time a store opened.
TABLE_TTLS = """
SELECT name, extract(engine_full, ' TTL (.+?)(?: SETTINGS |$)') AS ttl
FROM system.tables
WHERE database = currentDatabase() AND name IN {names:Array(String)}"""


def ttl_statements(retention_days: int, current: Mapping[str, str] | None = None) -> list[str]:
    """``ALTER ... MODIFY/REMOVE TTL`` for the retention; the day count is a validated int.
    ``current``: each table's TTL as ``TABLE_TTLS`` reads it; a table whose TTL is already the
    retention's is left out (``None``: every table, as a cluster's start and its DDL do)."""
    days = int(retention_days)
    if days < 0:
        raise ValueError(f"retention_days must be >= 0, got {retention_days}")
    statements = []
    for table, column in TTL_TABLES.items():
        if current is not None and current.get(table) == _stored_ttl(column, days):
            continue
        if days == 0:
            statements.append(f"ALTER TABLE {table} REMOVE TTL")
        else:
            statements.append(
                f"ALTER TABLE {table} MODIFY TTL toDateTime({column}) + INTERVAL {days} DAY SETTINGS materialize_ttl_after_modify = 0"
            )
    return statements


def _stored_ttl(column: str, days: int) -> str:
    """How the server writes back the TTL ``ttl_statements`` sets ('' for none)."""
    return f"toDateTime({column}) + toIntervalDay({days})" if days else ""
