"""SQL the ingest path runs: insert settings, the idempotency look-ups, the engine join
(``collector.ingest.engine_join``) and the opening heads of runs whose root has not arrived
(``collector.ingest.live_runs``). Ingest code reads no other SQL module.
"""

from __future__ import annotations

# Tables that ``Store.insert_rows`` may write (the spans table has its own columnar path).
SMALL_TABLES = frozenset(
    {"api_keys", "feedback", "engine_metrics", "engines", "alerts", "alert_deliveries", "price_versions"}
)

# A spans insert skips ClickHouse's merge of the inserted block by the table's engine
# (``optimize_on_insert``; the setting reaches the rollups' views too): the spans table's
# replacing merge only drops keys repeated within a block, which the store has already dropped,
# and each view already groups by its table's key. That merge copied the whole block: a 60k-span batch with captured text, inserted
# into embedded chDB, peaked 235-250 MB above its start instead of 239-304, at 11-13 us of CPU a
# span instead of 15-16 (merges stopped, /tmp probe, load 3-4).
SPANS_INSERT_SETTINGS: dict[str, int] = {"optimize_on_insert": 0}

# The keys of a batch that are already stored: the insert-time guard of idempotency.
# Identity look-up for idempotent inserts: any start time (the primary key narrows each hour
# to the granules that may hold the trace ids, the trace_id bloom filter skips the rest).
STORED_SPAN_KEYS = """
SELECT trace_id, span_id FROM spans
WHERE project = {project:String}
  AND trace_id IN {trace_ids:Array(String)}
  AND span_id IN {span_ids:Array(String)}
"""

# Every stored trace id as recent.RecentKeys hashes it: its first 16 hex digits as a UInt64.
STORED_TRACE_HASHES = """
SELECT groupArray(h) AS hashes
FROM (SELECT DISTINCT reinterpretAsUInt64(unhex(substring(trace_id, 1, 16))) AS h FROM spans)
"""

# An engine span's own tokens and price are attributes (normalize.set_engine_figures_aside).
_ENGINE_COLUMNS = """project, trace_id, span_id, parent_span_id, request_id, toString(model) AS model,
    toString(provider) AS provider, toUInt32OrZero(attributes['agentwatch.engine.input_tokens']) AS input_tokens,
    toUInt32OrZero(attributes['agentwatch.engine.output_tokens']) AS output_tokens,
    toUInt32OrZero(attributes['agentwatch.engine.cached_tokens']) AS cached_tokens,
    toFloat64OrZero(attributes['agentwatch.engine.cost_usd']) AS cost_usd,
    attributes['agentwatch.engine.price_version'] AS price_version, ttft_s, tpot_s, queue_s, prefill_s, decode_s,
    toString(service_name) AS service_name, toString(status_code) AS status_code,
    toString(error_type) AS error_type, toString(finish_reason) AS finish_reason,
    toString(agent_name) AS agent_name,
    toUnixTimestamp64Nano(spans.start_time) AS start_time, toUnixTimestamp64Nano(spans.end_time) AS end_time"""

# Engine spans that ended in a window (every project): candidates to bill as engine-only calls.
ENGINE_SPANS_ENDED = f"""
SELECT {_ENGINE_COLUMNS}
FROM spans
WHERE kind = 'engine' AND attributes['agentwatch.engine.client_span_id'] = ''
  AND spans.start_time >= fromUnixTimestamp64Nano({{since_ns:Int64}}) - INTERVAL 15 MINUTE
  AND spans.end_time > fromUnixTimestamp64Nano({{since_ns:Int64}})
  AND spans.end_time <= fromUnixTimestamp64Nano({{until_ns:Int64}})
ORDER BY spans.end_time
LIMIT {{limit:UInt32}}"""

# Client LLM spans that may account for some engine spans of a project: same trace, same
# request id, or same model (matched on tokens and time in Python); engine-only rows excluded.
CLIENT_LLM_SPANS_FOR_ENGINE = """
SELECT trace_id, span_id, request_id, toString(model) AS model, input_tokens, output_tokens,
    attributes['agentwatch.engine.span_id'] AS engine_span_id,
    toUnixTimestamp64Nano(spans.start_time) AS start_time, toUnixTimestamp64Nano(spans.end_time) AS end_time
FROM spans
WHERE project = {project:String} AND kind = 'llm'
  AND spans.start_time BETWEEN fromUnixTimestamp64Nano({lo_ns:Int64}) AND fromUnixTimestamp64Nano({hi_ns:Int64})
  AND attributes['agentwatch.engine.only'] != 'true'
  AND (trace_id IN {trace_ids:Array(String)} OR request_id IN {request_ids:Array(String)}
       OR attributes['agentwatch.engine.span_id'] IN {span_ids:Array(String)}
       OR (request_id = '' AND model IN {models:Array(String)}))"""

# One engine serving several projects (it exports with one project's key): client LLM spans of the
# *other* projects by trace context or request id only (never by model and tokens across projects).
# The window is narrower than a project's own look-up: the whole installation is scanned.
_ELSEWHERE = """project != {project:String} AND kind = 'llm'
  AND spans.start_time BETWEEN fromUnixTimestamp64Nano({lo_ns:Int64}) AND fromUnixTimestamp64Nano({hi_ns:Int64})"""

# The attributes map is read only for the rows the ids picked (PREWHERE): reading it for every LLM span
# of the window made a look-up over 190k spans take ~90 ms instead of ~30.
_NOT_BILLED = "attributes['agentwatch.engine.only'] != 'true'"

# ... for the reconcile pass: those that account for engine spans still unbilled.
CLIENT_LLM_SPANS_ELSEWHERE_FOR_ENGINE = f"""
SELECT trace_id, span_id, request_id, toString(model) AS model, input_tokens, output_tokens,
    attributes['agentwatch.engine.span_id'] AS engine_span_id,
    toUnixTimestamp64Nano(spans.start_time) AS start_time, toUnixTimestamp64Nano(spans.end_time) AS end_time
FROM spans
PREWHERE {_ELSEWHERE}
  AND (trace_id IN {{trace_ids:Array(String)}} OR request_id IN {{request_ids:Array(String)}}
       OR attributes['agentwatch.engine.span_id'] IN {{span_ids:Array(String)}})
WHERE {_NOT_BILLED}"""

# ... for a batch's engine rows: stored client spans not yet joined, with what the join needs; by
# trace context (the trace id's bloom filter skips most granules) or by request id, one query each
# (an OR of the two read the window's every request id even when one side was empty: 3x slower).
_ELSEWHERE_CLIENTS = f"""
SELECT toString(project) AS project, trace_id, span_id, request_id, ttft_s IS NULL AS no_ttft, cached_tokens,
    input_tokens, output_tokens, toString(model) AS model, toString(provider) AS provider, cost_usd,
    toUnixTimestamp64Nano(spans.start_time) AS start_time, toUnixTimestamp64Nano(spans.end_time) AS end_time
FROM spans
PREWHERE {_ELSEWHERE} AND IDS
WHERE {_NOT_BILLED} AND attributes['agentwatch.engine.span_id'] = ''"""

CLIENT_LLM_SPANS_ELSEWHERE_BY_TRACE = _ELSEWHERE_CLIENTS.replace(
    "IDS", "trace_id IN {trace_ids:Array(String)} AND span_id IN {parents:Array(String)}"
)

CLIENT_LLM_SPANS_ELSEWHERE_BY_REQUEST = _ELSEWHERE_CLIENTS.replace(
    "IDS", "request_id != '' AND request_id IN {request_ids:Array(String)}"
)

# An opening head in runs_agg for each trace of ``trace_ids`` with spans but no root stored yet:
# what lists a running run (and, after the idle timeout, an incomplete one) before its root.
OPEN_RUN_HEADS = """
INSERT INTO runs_agg (project, hour, trace_id, start_time, end_time, roots, opened, name, agent, service, session_id, user_id)
SELECT project, toStartOfHour(min(start_time)) AS hour, trace_id, min(start_time), max(end_time), toUInt64(0), toUInt64(1),
    argMinState(if(attributes['agentwatch.run.start'] = 'true', attributes['agentwatch.run.name'], toString(name)),
        toUInt8(multiIf(kind = 'run', 0, attributes['agentwatch.run.start'] = 'true', 1, 3))),
    max(agent_name), max(service_name), max(session_id), max(user_id)
FROM spans
WHERE project = {project:String} AND trace_id IN {trace_ids:Array(String)}
  AND start_time >= fromUnixTimestamp64Nano({lo_ns:Int64}) - INTERVAL 1 DAY
  AND kind != 'engine'
GROUP BY project, trace_id
HAVING countIf(kind = 'run' OR parent_span_id = '') = 0"""

# Stored client LLM spans that engine rows of a batch belong to: their parent (traceparent), or
# the same request id (vLLM's request id is the response id the client records).
CLIENT_LLM_SPANS_OF_ENGINE_ROWS = """
SELECT trace_id, span_id, request_id, ttft_s IS NULL AS no_ttft, cached_tokens, input_tokens, output_tokens,
    toString(model) AS model, toString(provider) AS provider, cost_usd,
    toUnixTimestamp64Nano(spans.start_time) AS start_time, toUnixTimestamp64Nano(spans.end_time) AS end_time
FROM spans
WHERE project = {project:String} AND kind = 'llm'
  AND spans.start_time BETWEEN fromUnixTimestamp64Nano({lo_ns:Int64}) AND fromUnixTimestamp64Nano({hi_ns:Int64})
  AND attributes['agentwatch.engine.only'] != 'true' AND attributes['agentwatch.engine.span_id'] = ''
  AND (span_id IN {parents:Array(String)} OR (request_id != '' AND request_id IN {request_ids:Array(String)})
       OR (request_id = '' AND model IN {models:Array(String)}
           AND span_id NOT IN (SELECT parent_span_id FROM spans WHERE project = {project:String} AND kind = 'engine'
               AND spans.start_time BETWEEN fromUnixTimestamp64Nano({lo_ns:Int64}) AND fromUnixTimestamp64Nano({hi_ns:Int64}))))"""
