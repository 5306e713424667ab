-- agentwatch schema for ClickHouse cluster 'agentwatch': written by python -m agentwatch_platform.collector.storage.cluster_ddl
-- The collector applies it itself (AGENTWATCH_CLICKHOUSE_CLUSTER); this file is for review and manual setup.

CREATE TABLE IF NOT EXISTS schema_migrations ON CLUSTER agentwatch (
    version UInt32,
    name String,
    applied_at DateTime64(3) DEFAULT now64(3)
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/all/{database}/{table}', '{replica}')
ORDER BY version;

CREATE TABLE IF NOT EXISTS leases ON CLUSTER agentwatch (
    name LowCardinality(String),
    term UInt64,
    holder String,
    expires_at DateTime64(3),
    taken_at DateTime64(3)
)
ENGINE = ReplicatedMergeTree('/clickhouse/tables/all/{database}/{table}', '{replica}')
ORDER BY (name, term)
SETTINGS replicated_deduplication_window = 10000;

-- migration 1: initial

CREATE TABLE IF NOT EXISTS spans_local ON CLUSTER agentwatch (
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
    events String CODEC(ZSTD(1)),
    INDEX idx_trace trace_id TYPE bloom_filter(0.001) GRANULARITY 1
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}')
PARTITION BY toYYYYMMDD(start_time)
ORDER BY (project, toStartOfHour(start_time), trace_id, start_time, span_id)
SETTINGS replicated_deduplication_window = 10000, ttl_only_drop_parts = 1, index_granularity_bytes = 2097152;

CREATE TABLE IF NOT EXISTS spans ON CLUSTER agentwatch AS spans_local
ENGINE = Distributed(agentwatch, currentDatabase(), spans_local, cityHash64(project, trace_id));

CREATE TABLE IF NOT EXISTS runs_agg_local ON CLUSTER agentwatch (
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
ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}')
PARTITION BY toYYYYMM(hour)
ORDER BY (project, hour, trace_id)
SETTINGS ttl_only_drop_parts = 1;

CREATE TABLE IF NOT EXISTS runs_agg ON CLUSTER agentwatch AS runs_agg_local
ENGINE = Distributed(agentwatch, currentDatabase(), runs_agg_local, cityHash64(project, trace_id));

CREATE MATERIALIZED VIEW IF NOT EXISTS runs_mv ON CLUSTER agentwatch TO runs_agg_local AS
SELECT project, hour, trace_id, 
    min(start_time) AS start_time,
    max(end_time) AS end_time,
    toUInt64(countIf((kind = 'run' OR (parent_span_id = '' AND kind != 'engine')))) AS roots,
    toUInt64(0) AS opened,
    argMinState(toString(name), toUInt8(multiIf(kind = 'run', 0, parent_span_id = '', 1, 2))) AS name,
    max(agent_name) AS agent,
    max(service_name) AS service,
    max(session_id) AS session_id,
    max(user_id) AS user_id,
    max(outcome) AS outcome,
    max(budget_exceeded) AS budget_exceeded,
    toUInt8(max((kind = 'run' OR (parent_span_id = '' AND kind != 'engine')) AND status_code = 'error')) AS root_error,
    toUInt8(max((kind = 'run' OR (parent_span_id = '' AND kind != 'engine')) AND is_timeout)) AS root_timeout,
    toUInt64(countIf(kind = 'step')) AS steps,
    toUInt64(countIf(kind = 'llm')) AS llm_calls,
    toUInt64(countIf(kind = 'tool')) AS tool_calls,
    toUInt64(countIf(kind = 'tool' AND status_code = 'error')) AS tool_failures,
    sumIf(toUInt64(input_tokens), (kind != 'run')) AS input_tokens,
    sumIf(toUInt64(output_tokens), (kind != 'run')) AS output_tokens,
    sumIf(toUInt64(cached_tokens), (kind != 'run')) AS cached_tokens,
    sumIf(cost_usd, (kind != 'run')) AS cost_usd,
    groupUniqArrayIf(toString(model), model != '') AS models
FROM (SELECT *, toStartOfHour(start_time) AS hour FROM spans_local)
GROUP BY project, hour, trace_id;

CREATE TABLE IF NOT EXISTS api_keys ON CLUSTER agentwatch (
    project LowCardinality(String),
    key_id String,
    salt String,
    key_hash String,
    name String,
    created_at DateTime64(3),
    revoked_at Nullable(DateTime64(3))
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/all/{database}/{table}', '{replica}', created_at)
ORDER BY key_id;

CREATE TABLE IF NOT EXISTS feedback ON CLUSTER agentwatch (
    project LowCardinality(String),
    trace_id String,
    feedback_id String,
    score Nullable(Float64),
    label LowCardinality(String),
    comment String CODEC(ZSTD(3)),
    source LowCardinality(String),
    created_at DateTime64(3)
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/all/{database}/{table}', '{replica}')
ORDER BY (project, trace_id, feedback_id);

CREATE TABLE IF NOT EXISTS engine_metrics_local ON CLUSTER agentwatch (
    project LowCardinality(String),
    engine LowCardinality(String),
    ts DateTime64(3) CODEC(Delta, ZSTD(1)),
    metric LowCardinality(String),
    labels Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    value Float64 CODEC(Gorilla, ZSTD(1))
)
ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}')
PARTITION BY toYYYYMMDD(ts)
ORDER BY (project, engine, metric, ts)
SETTINGS ttl_only_drop_parts = 1;

CREATE TABLE IF NOT EXISTS engine_metrics ON CLUSTER agentwatch AS engine_metrics_local
ENGINE = Distributed(agentwatch, currentDatabase(), engine_metrics_local, cityHash64(project, engine));

CREATE TABLE IF NOT EXISTS engines ON CLUSTER agentwatch (
    project LowCardinality(String),
    engine String,
    url String,
    updated_at DateTime64(3)
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/all/{database}/{table}', '{replica}', updated_at)
ORDER BY (project, engine);

CREATE TABLE IF NOT EXISTS alerts ON CLUSTER agentwatch (
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
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/all/{database}/{table}', '{replica}', updated_at)
ORDER BY (project, alert_id);

CREATE TABLE IF NOT EXISTS alert_deliveries ON CLUSTER agentwatch (
    project LowCardinality(String),
    alert_id String,
    channel LowCardinality(String),
    attempt UInt16,
    ok Bool,
    error String,
    at DateTime64(3)
)
ENGINE = ReplicatedMergeTree('/clickhouse/tables/all/{database}/{table}', '{replica}')
ORDER BY (project, alert_id, at);

CREATE TABLE IF NOT EXISTS price_versions ON CLUSTER agentwatch (
    version String,
    model String,
    input_per_mtok Float64,
    output_per_mtok Float64,
    cached_input_per_mtok Float64,
    created_at DateTime64(3)
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/all/{database}/{table}', '{replica}', created_at)
ORDER BY (version, model);

-- migration 2: span_minutes

CREATE TABLE IF NOT EXISTS span_minutes_local ON CLUSTER agentwatch (
    project LowCardinality(String),
    minute DateTime,
    agent LowCardinality(String),
    model LowCardinality(String),
    cost_usd SimpleAggregateFunction(sum, Float64), input_tokens SimpleAggregateFunction(sum, UInt64), output_tokens SimpleAggregateFunction(sum, UInt64), llm_calls SimpleAggregateFunction(sum, UInt64), tool_calls SimpleAggregateFunction(sum, UInt64), tool_failures SimpleAggregateFunction(sum, UInt64), calls SimpleAggregateFunction(sum, UInt64), timeouts SimpleAggregateFunction(sum, UInt64), tool_cache_hits SimpleAggregateFunction(sum, UInt64), tokens_saved SimpleAggregateFunction(sum, UInt64), small_model_calls SimpleAggregateFunction(sum, UInt64), ttft AggregateFunction(quantilesTDigestIf(0.5, 0.95), Float32, UInt8), tpot AggregateFunction(quantilesTDigestIf(0.5, 0.95), Float32, UInt8)
)
ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}')
PARTITION BY toYYYYMM(minute)
ORDER BY (project, minute, agent, model)
SETTINGS ttl_only_drop_parts = 1;

CREATE TABLE IF NOT EXISTS span_minutes ON CLUSTER agentwatch AS span_minutes_local
ENGINE = Distributed(agentwatch, currentDatabase(), span_minutes_local, cityHash64(project, agent, model));

CREATE MATERIALIZED VIEW IF NOT EXISTS span_minutes_mv ON CLUSTER agentwatch TO span_minutes_local AS 
SELECT project, minute, agent, model, sumIf(cost_usd, (kind != 'run')) AS cost_usd,
    sumIf(toUInt64(input_tokens), (kind != 'run')) AS input_tokens,
    sumIf(toUInt64(output_tokens), (kind != 'run')) AS output_tokens,
    toUInt64(countIf(kind = 'llm')) AS llm_calls,
    toUInt64(countIf(kind = 'tool')) AS tool_calls,
    toUInt64(countIf(kind = 'tool' AND status_code = 'error')) AS tool_failures,
    toUInt64(countIf(kind IN ('llm', 'tool'))) AS calls,
    toUInt64(countIf(kind IN ('llm', 'tool') AND is_timeout)) AS timeouts,
    toUInt64(countIf(kind = 'tool' AND tool_cache_hit)) AS tool_cache_hits,
    sumIf(toUInt64OrZero(attributes['agentwatch.tool.tokens_saved']), kind = 'tool') AS tokens_saved,
    toUInt64(countIf(kind = 'llm' AND attributes['agentwatch.llm.model_tier'] = 'small')) AS small_model_calls,
    quantilesTDigestIfState(0.5, 0.95)(toFloat32(ifNull(ttft_s, 0)), toUInt8((kind = 'llm' OR (kind = 'engine' AND attributes['agentwatch.ttft.counted'] = 'true')) AND ttft_s IS NOT NULL)) AS ttft,
    quantilesTDigestIfState(0.5, 0.95)(toFloat32(ifNull(tpot_s, 0)), toUInt8(kind = 'llm' AND tpot_s IS NOT NULL)) AS tpot
FROM (SELECT *, toDateTime(toStartOfMinute(start_time)) AS minute, agent_name AS agent FROM spans_local)
GROUP BY project, minute, agent, model;

INSERT INTO span_minutes 
SELECT project, minute, agent, model, sumIf(cost_usd, (kind != 'run')) AS cost_usd,
    sumIf(toUInt64(input_tokens), (kind != 'run')) AS input_tokens,
    sumIf(toUInt64(output_tokens), (kind != 'run')) AS output_tokens,
    toUInt64(countIf(kind = 'llm')) AS llm_calls,
    toUInt64(countIf(kind = 'tool')) AS tool_calls,
    toUInt64(countIf(kind = 'tool' AND status_code = 'error')) AS tool_failures,
    toUInt64(countIf(kind IN ('llm', 'tool'))) AS calls,
    toUInt64(countIf(kind IN ('llm', 'tool') AND is_timeout)) AS timeouts,
    toUInt64(countIf(kind = 'tool' AND tool_cache_hit)) AS tool_cache_hits,
    sumIf(toUInt64OrZero(attributes['agentwatch.tool.tokens_saved']), kind = 'tool') AS tokens_saved,
    toUInt64(countIf(kind = 'llm' AND attributes['agentwatch.llm.model_tier'] = 'small')) AS small_model_calls,
    quantilesTDigestIfState(0.5, 0.95)(toFloat32(ifNull(ttft_s, 0)), toUInt8((kind = 'llm' OR (kind = 'engine' AND attributes['agentwatch.ttft.counted'] = 'true')) AND ttft_s IS NOT NULL)) AS ttft,
    quantilesTDigestIfState(0.5, 0.95)(toFloat32(ifNull(tpot_s, 0)), toUInt8(kind = 'llm' AND tpot_s IS NOT NULL)) AS tpot
FROM (SELECT *, toDateTime(toStartOfMinute(start_time)) AS minute, agent_name AS agent FROM spans)
GROUP BY project, minute, agent, model;

-- migration 3: span_hours

CREATE TABLE IF NOT EXISTS span_hours_local ON CLUSTER agentwatch (
    project LowCardinality(String),
    hour DateTime,
    agent LowCardinality(String),
    model LowCardinality(String),
    cost_usd SimpleAggregateFunction(sum, Float64), input_tokens SimpleAggregateFunction(sum, UInt64), output_tokens SimpleAggregateFunction(sum, UInt64), llm_calls SimpleAggregateFunction(sum, UInt64), tool_calls SimpleAggregateFunction(sum, UInt64), tool_failures SimpleAggregateFunction(sum, UInt64), calls SimpleAggregateFunction(sum, UInt64), timeouts SimpleAggregateFunction(sum, UInt64), tool_cache_hits SimpleAggregateFunction(sum, UInt64), tokens_saved SimpleAggregateFunction(sum, UInt64), small_model_calls SimpleAggregateFunction(sum, UInt64), ttft AggregateFunction(quantilesTDigestIf(0.5, 0.95), Float32, UInt8), tpot AggregateFunction(quantilesTDigestIf(0.5, 0.95), Float32, UInt8)
)
ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}')
PARTITION BY toYYYYMM(hour)
ORDER BY (project, hour, agent, model)
SETTINGS ttl_only_drop_parts = 1;

CREATE TABLE IF NOT EXISTS span_hours ON CLUSTER agentwatch AS span_hours_local
ENGINE = Distributed(agentwatch, currentDatabase(), span_hours_local, cityHash64(project, agent, model));

CREATE MATERIALIZED VIEW IF NOT EXISTS span_hours_mv ON CLUSTER agentwatch TO span_hours_local AS 
SELECT project, toDateTime(intDiv(toUInt32(minute), 3600) * 3600) AS hour, agent, model, sum(cost_usd) AS cost_usd, sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens, sum(llm_calls) AS llm_calls, sum(tool_calls) AS tool_calls, sum(tool_failures) AS tool_failures, sum(calls) AS calls, sum(timeouts) AS timeouts, sum(tool_cache_hits) AS tool_cache_hits, sum(tokens_saved) AS tokens_saved, sum(small_model_calls) AS small_model_calls, quantilesTDigestIfMergeState(0.5, 0.95)(ttft) AS ttft, quantilesTDigestIfMergeState(0.5, 0.95)(tpot) AS tpot
FROM span_minutes_local
GROUP BY project, hour, agent, model;

INSERT INTO span_hours 
SELECT project, toDateTime(intDiv(toUInt32(minute), 3600) * 3600) AS hour, agent, model, sum(cost_usd) AS cost_usd, sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens, sum(llm_calls) AS llm_calls, sum(tool_calls) AS tool_calls, sum(tool_failures) AS tool_failures, sum(calls) AS calls, sum(timeouts) AS timeouts, sum(tool_cache_hits) AS tool_cache_hits, sum(tokens_saved) AS tokens_saved, sum(small_model_calls) AS small_model_calls, quantilesTDigestIfMergeState(0.5, 0.95)(ttft) AS ttft, quantilesTDigestIfMergeState(0.5, 0.95)(tpot) AS tpot
FROM span_minutes
GROUP BY project, hour, agent, model;

-- migration 4: engine_kind_and_open_runs

ALTER TABLE runs_agg_local ON CLUSTER agentwatch ADD COLUMN IF NOT EXISTS opened SimpleAggregateFunction(sum, UInt64) DEFAULT 0 AFTER roots;

ALTER TABLE runs_agg ON CLUSTER agentwatch ADD COLUMN IF NOT EXISTS opened SimpleAggregateFunction(sum, UInt64) DEFAULT 0;

DROP VIEW IF EXISTS runs_mv ON CLUSTER agentwatch SYNC;

CREATE MATERIALIZED VIEW IF NOT EXISTS runs_mv ON CLUSTER agentwatch TO runs_agg_local AS
SELECT project, hour, trace_id, 
    min(start_time) AS start_time,
    max(end_time) AS end_time,
    toUInt64(countIf((kind = 'run' OR (parent_span_id = '' AND kind != 'engine')))) AS roots,
    toUInt64(0) AS opened,
    argMinState(toString(name), toUInt8(multiIf(kind = 'run', 0, parent_span_id = '', 1, 2))) AS name,
    max(agent_name) AS agent,
    max(service_name) AS service,
    max(session_id) AS session_id,
    max(user_id) AS user_id,
    max(outcome) AS outcome,
    max(budget_exceeded) AS budget_exceeded,
    toUInt8(max((kind = 'run' OR (parent_span_id = '' AND kind != 'engine')) AND status_code = 'error')) AS root_error,
    toUInt8(max((kind = 'run' OR (parent_span_id = '' AND kind != 'engine')) AND is_timeout)) AS root_timeout,
    toUInt64(countIf(kind = 'step')) AS steps,
    toUInt64(countIf(kind = 'llm')) AS llm_calls,
    toUInt64(countIf(kind = 'tool')) AS tool_calls,
    toUInt64(countIf(kind = 'tool' AND status_code = 'error')) AS tool_failures,
    sumIf(toUInt64(input_tokens), (kind != 'run')) AS input_tokens,
    sumIf(toUInt64(output_tokens), (kind != 'run')) AS output_tokens,
    sumIf(toUInt64(cached_tokens), (kind != 'run')) AS cached_tokens,
    sumIf(cost_usd, (kind != 'run')) AS cost_usd,
    groupUniqArrayIf(toString(model), model != '') AS models
FROM (SELECT *, toStartOfHour(start_time) AS hour FROM spans_local)
GROUP BY project, hour, trace_id;

DROP VIEW IF EXISTS span_minutes_mv ON CLUSTER agentwatch SYNC;

CREATE MATERIALIZED VIEW IF NOT EXISTS span_minutes_mv ON CLUSTER agentwatch TO span_minutes_local AS 
SELECT project, minute, agent, model, sumIf(cost_usd, (kind != 'run')) AS cost_usd,
    sumIf(toUInt64(input_tokens), (kind != 'run')) AS input_tokens,
    sumIf(toUInt64(output_tokens), (kind != 'run')) AS output_tokens,
    toUInt64(countIf(kind = 'llm')) AS llm_calls,
    toUInt64(countIf(kind = 'tool')) AS tool_calls,
    toUInt64(countIf(kind = 'tool' AND status_code = 'error')) AS tool_failures,
    toUInt64(countIf(kind IN ('llm', 'tool'))) AS calls,
    toUInt64(countIf(kind IN ('llm', 'tool') AND is_timeout)) AS timeouts,
    toUInt64(countIf(kind = 'tool' AND tool_cache_hit)) AS tool_cache_hits,
    sumIf(toUInt64OrZero(attributes['agentwatch.tool.tokens_saved']), kind = 'tool') AS tokens_saved,
    toUInt64(countIf(kind = 'llm' AND attributes['agentwatch.llm.model_tier'] = 'small')) AS small_model_calls,
    quantilesTDigestIfState(0.5, 0.95)(toFloat32(ifNull(ttft_s, 0)), toUInt8((kind = 'llm' OR (kind = 'engine' AND attributes['agentwatch.ttft.counted'] = 'true')) AND ttft_s IS NOT NULL)) AS ttft,
    quantilesTDigestIfState(0.5, 0.95)(toFloat32(ifNull(tpot_s, 0)), toUInt8(kind = 'llm' AND tpot_s IS NOT NULL)) AS tpot
FROM (SELECT *, toDateTime(toStartOfMinute(start_time)) AS minute, agent_name AS agent FROM spans_local)
GROUP BY project, minute, agent, model;

-- migration 5: alert_incidents

ALTER TABLE alerts ON CLUSTER agentwatch ADD COLUMN IF NOT EXISTS peak Nullable(Float64);

ALTER TABLE alerts ON CLUSTER agentwatch ADD COLUMN IF NOT EXISTS last_breach_at Nullable(DateTime64(3));

ALTER TABLE alerts ON CLUSTER agentwatch ADD COLUMN IF NOT EXISTS no_data_since Nullable(DateTime64(3));

ALTER TABLE alert_deliveries ON CLUSTER agentwatch ADD COLUMN IF NOT EXISTS event LowCardinality(String) DEFAULT '';

-- migration 6: key_scopes_and_audit

ALTER TABLE api_keys ON CLUSTER agentwatch ADD COLUMN IF NOT EXISTS scopes String DEFAULT '' AFTER name;

CREATE TABLE IF NOT EXISTS audit_log ON CLUSTER agentwatch (
    project LowCardinality(String),
    at DateTime64(3),
    actor String,
    action LowCardinality(String),
    target String,
    detail String
)
ENGINE = ReplicatedMergeTree('/clickhouse/tables/all/{database}/{table}', '{replica}')
ORDER BY (project, at);

-- migration 7: leases

CREATE TABLE IF NOT EXISTS leases ON CLUSTER agentwatch (
    name LowCardinality(String),
    term UInt64,
    holder String,
    expires_at DateTime64(3),
    taken_at DateTime64(3)
)
ENGINE = ReplicatedMergeTree('/clickhouse/tables/all/{database}/{table}', '{replica}')
ORDER BY (name, term)
SETTINGS replicated_deduplication_window = 10000;

-- migration 8: collector_counters

CREATE TABLE IF NOT EXISTS collector_counters ON CLUSTER agentwatch (
    collector String,
    project LowCardinality(String),
    received UInt64,
    rejected UInt64,
    updated_at DateTime64(3)
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/all/{database}/{table}', '{replica}', updated_at)
ORDER BY (collector, project);

-- migration 9: spans_vertical_merges

ALTER TABLE spans_local ON CLUSTER agentwatch MODIFY SETTING vertical_merge_algorithm_min_rows_to_activate = 1, vertical_merge_algorithm_min_columns_to_activate = 1;

-- migration 10: run_minutes

CREATE TABLE IF NOT EXISTS run_minutes_local ON CLUSTER agentwatch (
    project LowCardinality(String),
    minute DateTime,
    agent LowCardinality(String),
    runs SimpleAggregateFunction(sum, UInt64),
    failed_runs SimpleAggregateFunction(sum, UInt64),
    successes SimpleAggregateFunction(sum, UInt64),
    with_outcome SimpleAggregateFunction(sum, UInt64),
    latency AggregateFunction(quantilesIf(0.5, 0.95), Float64, UInt8)
)
ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}')
PARTITION BY toYYYYMM(minute)
ORDER BY (project, minute, agent)
SETTINGS ttl_only_drop_parts = 1;

CREATE TABLE IF NOT EXISTS run_minutes ON CLUSTER agentwatch AS run_minutes_local
ENGINE = Distributed(agentwatch, currentDatabase(), run_minutes_local, cityHash64(project, agent));

CREATE MATERIALIZED VIEW IF NOT EXISTS run_minutes_mv ON CLUSTER agentwatch TO run_minutes_local AS 
SELECT project, toDateTime(intDiv(toUnixTimestamp64Nano(start_time), 60000000000) * 60) AS minute, agent,
    count() AS runs,
    countIf((budget_exceeded != '' OR root_timeout = 1 OR root_error = 1)) AS failed_runs,
    countIf(outcome = 'success') AS successes,
    countIf(outcome != '') AS with_outcome,
    quantilesIfState(0.5, 0.95)(greatest(toUnixTimestamp64Nano(end_time) - toUnixTimestamp64Nano(start_time), 0) / 1e9, toUInt8(1)) AS latency
FROM runs_agg_local
WHERE roots > 0
GROUP BY project, minute, agent;

INSERT INTO run_minutes 
SELECT project, toDateTime(intDiv(toUnixTimestamp64Nano(start_time), 60000000000) * 60) AS minute, agent,
    count() AS runs,
    countIf((budget_exceeded != '' OR root_timeout = 1 OR root_error = 1)) AS failed_runs,
    countIf(outcome = 'success') AS successes,
    countIf(outcome != '') AS with_outcome,
    quantilesIfState(0.5, 0.95)(greatest(toUnixTimestamp64Nano(end_time) - toUnixTimestamp64Nano(start_time), 0) / 1e9, toUInt8(1)) AS latency
FROM runs_agg
WHERE roots > 0
GROUP BY project, minute, agent;

-- migration 11: closed_run_minutes

ALTER TABLE runs_agg_local ON CLUSTER agentwatch ADD COLUMN IF NOT EXISTS inserted SimpleAggregateFunction(max, DateTime) DEFAULT toDateTime(0);

ALTER TABLE runs_agg ON CLUSTER agentwatch ADD COLUMN IF NOT EXISTS inserted SimpleAggregateFunction(max, DateTime) DEFAULT toDateTime(0);

ALTER TABLE runs_agg_local ON CLUSTER agentwatch ADD COLUMN IF NOT EXISTS trace_hash UInt64 MATERIALIZED cityHash64(trace_id);

ALTER TABLE runs_agg ON CLUSTER agentwatch ADD COLUMN IF NOT EXISTS trace_hash UInt64 MATERIALIZED cityHash64(trace_id);

ALTER TABLE runs_agg_local ON CLUSTER agentwatch ADD INDEX IF NOT EXISTS idx_inserted inserted TYPE minmax GRANULARITY 1;

ALTER TABLE runs_agg_local ON CLUSTER agentwatch MATERIALIZE COLUMN inserted SETTINGS mutations_sync = 2;

ALTER TABLE runs_agg_local ON CLUSTER agentwatch MATERIALIZE COLUMN trace_hash SETTINGS mutations_sync = 2;

ALTER TABLE runs_agg_local ON CLUSTER agentwatch MATERIALIZE INDEX idx_inserted SETTINGS mutations_sync = 2;

ALTER TABLE runs_agg_local ON CLUSTER agentwatch MODIFY COLUMN inserted SimpleAggregateFunction(max, DateTime) DEFAULT now();

ALTER TABLE runs_agg ON CLUSTER agentwatch MODIFY COLUMN inserted SimpleAggregateFunction(max, DateTime) DEFAULT now();

CREATE TABLE IF NOT EXISTS closed_run_minutes_local ON CLUSTER agentwatch (
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
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}', closed_to)
PARTITION BY toYYYYMM(minute)
ORDER BY (project, minute)
SETTINGS ttl_only_drop_parts = 1;

CREATE TABLE IF NOT EXISTS closed_run_minutes ON CLUSTER agentwatch AS closed_run_minutes_local
ENGINE = Distributed(agentwatch, currentDatabase(), closed_run_minutes_local, cityHash64(project, minute));

CREATE TABLE IF NOT EXISTS run_close_marks ON CLUSTER agentwatch (
    closed_to DateTime,
    at DateTime64(3) DEFAULT now64(3)
)
ENGINE = ReplicatedMergeTree('/clickhouse/tables/all/{database}/{table}', '{replica}')
ORDER BY closed_to;

-- migration 12: span_text_refs

ALTER TABLE spans_local ON CLUSTER agentwatch ADD COLUMN IF NOT EXISTS text_ref UInt64 DEFAULT 0 AFTER output_text;

ALTER TABLE spans ON CLUSTER agentwatch ADD COLUMN IF NOT EXISTS text_ref UInt64 DEFAULT 0;

-- migration 13: refused_requests

ALTER TABLE run_minutes_local ON CLUSTER agentwatch ADD COLUMN IF NOT EXISTS refused SimpleAggregateFunction(sum, UInt64) DEFAULT 0;

ALTER TABLE run_minutes ON CLUSTER agentwatch ADD COLUMN IF NOT EXISTS refused SimpleAggregateFunction(sum, UInt64) DEFAULT 0;

DROP VIEW IF EXISTS run_minutes_mv ON CLUSTER agentwatch SYNC;

CREATE MATERIALIZED VIEW IF NOT EXISTS run_minutes_mv ON CLUSTER agentwatch TO run_minutes_local AS 
SELECT project, toDateTime(intDiv(toUnixTimestamp64Nano(start_time), 60000000000) * 60) AS minute, agent,
    countIf(outcome != 'refused') AS runs,
    countIf(outcome != 'refused' AND (budget_exceeded != '' OR root_timeout = 1 OR root_error = 1)) AS failed_runs,
    countIf(outcome = 'success') AS successes,
    countIf(outcome != '' AND outcome != 'refused') AS with_outcome,
    quantilesIfState(0.5, 0.95)(greatest(toUnixTimestamp64Nano(end_time) - toUnixTimestamp64Nano(start_time), 0) / 1e9, toUInt8(outcome != 'refused')) AS latency,
    countIf(NOT outcome != 'refused') AS refused
FROM runs_agg_local
WHERE roots > 0
GROUP BY project, minute, agent;

-- migration 14: service_version

ALTER TABLE spans_local ON CLUSTER agentwatch ADD COLUMN IF NOT EXISTS service_version LowCardinality(String) DEFAULT '';

ALTER TABLE spans ON CLUSTER agentwatch ADD COLUMN IF NOT EXISTS service_version LowCardinality(String) DEFAULT '';

ALTER TABLE runs_agg_local ON CLUSTER agentwatch ADD COLUMN IF NOT EXISTS version SimpleAggregateFunction(max, LowCardinality(String)) DEFAULT '';

ALTER TABLE runs_agg ON CLUSTER agentwatch ADD COLUMN IF NOT EXISTS version SimpleAggregateFunction(max, LowCardinality(String)) DEFAULT '';

DROP VIEW IF EXISTS runs_mv ON CLUSTER agentwatch SYNC;

CREATE MATERIALIZED VIEW IF NOT EXISTS runs_mv ON CLUSTER agentwatch TO runs_agg_local AS
SELECT project, hour, trace_id, 
    min(start_time) AS start_time,
    max(end_time) AS end_time,
    toUInt64(countIf((kind = 'run' OR (parent_span_id = '' AND kind != 'engine')))) AS roots,
    toUInt64(0) AS opened,
    argMinState(toString(name), toUInt8(multiIf(kind = 'run', 0, parent_span_id = '', 1, 2))) AS name,
    max(agent_name) AS agent,
    max(service_name) AS service,
    max(session_id) AS session_id,
    max(user_id) AS user_id,
    max(outcome) AS outcome,
    max(budget_exceeded) AS budget_exceeded,
    toUInt8(max((kind = 'run' OR (parent_span_id = '' AND kind != 'engine')) AND status_code = 'error')) AS root_error,
    toUInt8(max((kind = 'run' OR (parent_span_id = '' AND kind != 'engine')) AND is_timeout)) AS root_timeout,
    toUInt64(countIf(kind = 'step')) AS steps,
    toUInt64(countIf(kind = 'llm')) AS llm_calls,
    toUInt64(countIf(kind = 'tool')) AS tool_calls,
    toUInt64(countIf(kind = 'tool' AND status_code = 'error')) AS tool_failures,
    sumIf(toUInt64(input_tokens), (kind != 'run')) AS input_tokens,
    sumIf(toUInt64(output_tokens), (kind != 'run')) AS output_tokens,
    sumIf(toUInt64(cached_tokens), (kind != 'run')) AS cached_tokens,
    sumIf(cost_usd, (kind != 'run')) AS cost_usd,
    groupUniqArrayIf(toString(model), model != '') AS models,
    maxIf(toString(service_version), (kind = 'run' OR (parent_span_id = '' AND kind != 'engine'))) AS version
FROM (SELECT *, toStartOfHour(start_time) AS hour FROM spans_local)
GROUP BY project, hour, trace_id;

-- migration 15: span_key_minutes

CREATE TABLE IF NOT EXISTS span_key_minutes_local ON CLUSTER agentwatch (
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
ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}')
PARTITION BY toYYYYMM(minute)
ORDER BY (project, minute, kind, tool, model, status, error_key, error_base, agent, version, name)
SETTINGS ttl_only_drop_parts = 1;

CREATE TABLE IF NOT EXISTS span_key_minutes ON CLUSTER agentwatch AS span_key_minutes_local
ENGINE = Distributed(agentwatch, currentDatabase(), span_key_minutes_local, cityHash64(project, agent, model));

CREATE MATERIALIZED VIEW IF NOT EXISTS span_key_minutes_mv ON CLUSTER agentwatch TO span_key_minutes_local AS 
SELECT project, minute, kind, tool, model, status, error_key, error_base, agent, version, name,
    count() AS spans,
    countIf((status_code = 'error' OR is_timeout)) AS failures,
    sum(toUInt64(input_tokens)) AS input_tokens,
    sum(toUInt64(output_tokens)) AS output_tokens,
    sum(cost_usd) AS cost_usd,
    uniqExactState(cityHash64(trace_id)) AS runs,
    quantilesTDigestState(0.5, 0.95)(greatest((toUnixTimestamp64Nano(end_time) - toUnixTimestamp64Nano(start_time)), 0) / 1e9) AS duration
FROM (SELECT *, toDateTime(toStartOfMinute(start_time)) AS minute, toString(tool_name) AS tool,
        if(is_timeout, 'timeout', toString(status_code)) AS status, if((multiIf(
    error_type != '', toString(error_type),
    is_timeout, 'TimeoutError',
    status_code != 'error', '',
    match(status_message, '^[A-Za-z_][A-Za-z0-9_.]*:'), extract(status_message, '^([A-Za-z_][A-Za-z0-9_.]*):'),
    'error')) = '', '',
    if((multiIf(
    attributes['http.response.status_code'] != '', attributes['http.response.status_code'],
    attributes['http.status_code'] != '', attributes['http.status_code'],
    extract(status_message, '(?i)(?:http|status|status code|answered|returned|response)[ :=]*([1-5][0-9][0-9])\\b'))) = '', multiIf(
    error_type != '', toString(error_type),
    is_timeout, 'TimeoutError',
    status_code != 'error', '',
    match(status_message, '^[A-Za-z_][A-Za-z0-9_.]*:'), extract(status_message, '^([A-Za-z_][A-Za-z0-9_.]*):'),
    'error'), concat(multiIf(
    error_type != '', toString(error_type),
    is_timeout, 'TimeoutError',
    status_code != 'error', '',
    match(status_message, '^[A-Za-z_][A-Za-z0-9_.]*:'), extract(status_message, '^([A-Za-z_][A-Za-z0-9_.]*):'),
    'error'), ' (HTTP ', multiIf(
    attributes['http.response.status_code'] != '', attributes['http.response.status_code'],
    attributes['http.status_code'] != '', attributes['http.status_code'],
    extract(status_message, '(?i)(?:http|status|status code|answered|returned|response)[ :=]*([1-5][0-9][0-9])\\b')), ')'))) AS error_key, multiIf(
    error_type != '', toString(error_type),
    is_timeout, 'TimeoutError',
    status_code != 'error', '',
    match(status_message, '^[A-Za-z_][A-Za-z0-9_.]*:'), extract(status_message, '^([A-Za-z_][A-Za-z0-9_.]*):'),
    'error') AS error_base, toString(agent_name) AS agent,
        toString(service_version) AS version
    FROM spans_local)
GROUP BY project, minute, kind, tool, model, status, error_key, error_base, agent, version, name;

INSERT INTO span_key_minutes 
SELECT project, minute, kind, tool, model, status, error_key, error_base, agent, version, name,
    count() AS spans,
    countIf((status_code = 'error' OR is_timeout)) AS failures,
    sum(toUInt64(input_tokens)) AS input_tokens,
    sum(toUInt64(output_tokens)) AS output_tokens,
    sum(cost_usd) AS cost_usd,
    uniqExactState(cityHash64(trace_id)) AS runs,
    quantilesTDigestState(0.5, 0.95)(greatest((toUnixTimestamp64Nano(end_time) - toUnixTimestamp64Nano(start_time)), 0) / 1e9) AS duration
FROM (SELECT *, toDateTime(toStartOfMinute(start_time)) AS minute, toString(tool_name) AS tool,
        if(is_timeout, 'timeout', toString(status_code)) AS status, if((multiIf(
    error_type != '', toString(error_type),
    is_timeout, 'TimeoutError',
    status_code != 'error', '',
    match(status_message, '^[A-Za-z_][A-Za-z0-9_.]*:'), extract(status_message, '^([A-Za-z_][A-Za-z0-9_.]*):'),
    'error')) = '', '',
    if((multiIf(
    attributes['http.response.status_code'] != '', attributes['http.response.status_code'],
    attributes['http.status_code'] != '', attributes['http.status_code'],
    extract(status_message, '(?i)(?:http|status|status code|answered|returned|response)[ :=]*([1-5][0-9][0-9])\\b'))) = '', multiIf(
    error_type != '', toString(error_type),
    is_timeout, 'TimeoutError',
    status_code != 'error', '',
    match(status_message, '^[A-Za-z_][A-Za-z0-9_.]*:'), extract(status_message, '^([A-Za-z_][A-Za-z0-9_.]*):'),
    'error'), concat(multiIf(
    error_type != '', toString(error_type),
    is_timeout, 'TimeoutError',
    status_code != 'error', '',
    match(status_message, '^[A-Za-z_][A-Za-z0-9_.]*:'), extract(status_message, '^([A-Za-z_][A-Za-z0-9_.]*):'),
    'error'), ' (HTTP ', multiIf(
    attributes['http.response.status_code'] != '', attributes['http.response.status_code'],
    attributes['http.status_code'] != '', attributes['http.status_code'],
    extract(status_message, '(?i)(?:http|status|status code|answered|returned|response)[ :=]*([1-5][0-9][0-9])\\b')), ')'))) AS error_key, multiIf(
    error_type != '', toString(error_type),
    is_timeout, 'TimeoutError',
    status_code != 'error', '',
    match(status_message, '^[A-Za-z_][A-Za-z0-9_.]*:'), extract(status_message, '^([A-Za-z_][A-Za-z0-9_.]*):'),
    'error') AS error_base, toString(agent_name) AS agent,
        toString(service_version) AS version
    FROM spans)
GROUP BY project, minute, kind, tool, model, status, error_key, error_base, agent, version, name;

-- migration 16: span_key_hours

CREATE TABLE IF NOT EXISTS span_key_hours_local ON CLUSTER agentwatch (
    project LowCardinality(String),
    hour DateTime,
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
ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}')
PARTITION BY toYYYYMM(hour)
ORDER BY (project, hour, kind, tool, model, status, error_key, error_base, agent, version, name)
SETTINGS ttl_only_drop_parts = 1;

CREATE TABLE IF NOT EXISTS span_key_hours ON CLUSTER agentwatch AS span_key_hours_local
ENGINE = Distributed(agentwatch, currentDatabase(), span_key_hours_local, cityHash64(project, agent, model));

CREATE MATERIALIZED VIEW IF NOT EXISTS span_key_hours_mv ON CLUSTER agentwatch TO span_key_hours_local AS 
SELECT project, toDateTime(intDiv(toUInt32(minute), 3600) * 3600) AS hour, kind, tool, model, status, error_key, error_base, agent, version, name,
    sum(spans) AS spans, sum(failures) AS failures, sum(input_tokens) AS input_tokens,
    sum(output_tokens) AS output_tokens, sum(cost_usd) AS cost_usd,
    uniqExactMergeState(runs) AS runs, quantilesTDigestMergeState(0.5, 0.95)(duration) AS duration
FROM span_key_minutes_local
GROUP BY project, hour, kind, tool, model, status, error_key, error_base, agent, version, name;

INSERT INTO span_key_hours 
SELECT project, toDateTime(intDiv(toUInt32(minute), 3600) * 3600) AS hour, kind, tool, model, status, error_key, error_base, agent, version, name,
    sum(spans) AS spans, sum(failures) AS failures, sum(input_tokens) AS input_tokens,
    sum(output_tokens) AS output_tokens, sum(cost_usd) AS cost_usd,
    uniqExactMergeState(runs) AS runs, quantilesTDigestMergeState(0.5, 0.95)(duration) AS duration
FROM span_key_minutes
GROUP BY project, hour, kind, tool, model, status, error_key, error_base, agent, version, name;

-- retention

ALTER TABLE spans_local ON CLUSTER agentwatch MODIFY TTL toDateTime(start_time) + INTERVAL 30 DAY SETTINGS materialize_ttl_after_modify = 0;

ALTER TABLE runs_agg_local ON CLUSTER agentwatch MODIFY TTL toDateTime(hour) + INTERVAL 30 DAY SETTINGS materialize_ttl_after_modify = 0;

ALTER TABLE span_minutes_local ON CLUSTER agentwatch MODIFY TTL toDateTime(minute) + INTERVAL 30 DAY SETTINGS materialize_ttl_after_modify = 0;

ALTER TABLE span_hours_local ON CLUSTER agentwatch MODIFY TTL toDateTime(hour) + INTERVAL 30 DAY SETTINGS materialize_ttl_after_modify = 0;

ALTER TABLE span_key_minutes_local ON CLUSTER agentwatch MODIFY TTL toDateTime(minute) + INTERVAL 30 DAY SETTINGS materialize_ttl_after_modify = 0;

ALTER TABLE span_key_hours_local ON CLUSTER agentwatch MODIFY TTL toDateTime(hour) + INTERVAL 30 DAY SETTINGS materialize_ttl_after_modify = 0;

ALTER TABLE run_minutes_local ON CLUSTER agentwatch MODIFY TTL toDateTime(minute) + INTERVAL 30 DAY SETTINGS materialize_ttl_after_modify = 0;

ALTER TABLE closed_run_minutes_local ON CLUSTER agentwatch MODIFY TTL toDateTime(minute) + INTERVAL 30 DAY SETTINGS materialize_ttl_after_modify = 0;

ALTER TABLE engine_metrics_local ON CLUSTER agentwatch MODIFY TTL toDateTime(ts) + INTERVAL 30 DAY SETTINGS materialize_ttl_after_modify = 0;
