"""SQL of the LLM engines: registered and scraped engines, their metric points, and their calls' timings."""

from __future__ import annotations

ENGINES_REGISTERED = """
SELECT engine, argMax(url, updated_at) AS url FROM engines
WHERE project = {project:String} GROUP BY engine ORDER BY engine"""

ENGINES_SEEN = """
SELECT toString(engine) AS engine, max(toUnixTimestamp64Milli(ts)) / 1e3 AS last_scrape,
    arraySort(groupUniqArrayIf(labels['model_name'], labels['model_name'] != '')) AS model_names
FROM engine_metrics
WHERE project = {project:String} AND ts >= fromUnixTimestamp64Milli({since_ms:Int64})
GROUP BY engine"""

# Counters and histogram parts keep their last value per bucket; gauges their mean.
ENGINE_POINTS = """
SELECT intDiv(toUnixTimestamp64Milli(ts) - {start_ms:Int64}, {step_ms:Int64}) AS bucket,
    toString(metric) AS metric, labels,
    if(match(metric, '(_total|_count|_sum|_bucket)$'), argMax(engine_metrics.value, ts), avg(engine_metrics.value)) AS value
FROM engine_metrics
WHERE project = {project:String} AND engine = {engine:String}
  AND ts >= fromUnixTimestamp64Milli({start_ms:Int64}) AND ts < fromUnixTimestamp64Milli({end_ms:Int64})
GROUP BY bucket, metric, labels
ORDER BY bucket, metric
LIMIT {limit:UInt32}"""

# Per-call timings of an engine's calls over a range (the engine's models: its metrics' ``model_name``
# labels): the engine's own queue time and TTFT (queue + prefill, measured at the server) from its
# spans, and the TTFT the clients saw (their first streamed token; engine-filled values excluded).
# Percentiles at the resolution of the data, not inside a histogram bucket (``ENGINE_POINTS``).
ENGINE_CALL_TIMINGS = """
SELECT countIf(kind = 'engine' AND queue_s IS NOT NULL) AS queue_calls,
    quantilesTDigestIf(0.5, 0.95)(queue_s, kind = 'engine' AND queue_s IS NOT NULL) AS queue,
    countIf(kind = 'engine' AND ttft_s IS NOT NULL) AS ttft_calls,
    quantilesTDigestIf(0.5, 0.95)(ttft_s, kind = 'engine' AND ttft_s IS NOT NULL) AS ttft,
    countIf(kind = 'llm' AND by_client) AS client_calls,
    quantilesTDigestIf(0.5, 0.95)(ttft_s, kind = 'llm' AND by_client) AS client_ttft
FROM (
    SELECT kind, queue_s, ttft_s,
        ttft_s IS NOT NULL AND attributes['agentwatch.ttft.source'] != 'engine'
            AND attributes['agentwatch.engine.only'] != 'true' AS by_client
    FROM spans
    WHERE project = {project:String} AND kind IN ('engine', 'llm')
      AND spans.start_time >= fromUnixTimestamp64Milli({start_ms:Int64})
      AND spans.start_time < fromUnixTimestamp64Milli({end_ms:Int64})
      AND model IN (
          SELECT labels['model_name'] FROM engine_metrics
          WHERE project = {project:String} AND engine = {engine:String} AND labels['model_name'] != ''
            AND ts >= fromUnixTimestamp64Milli({start_ms:Int64}) AND ts < fromUnixTimestamp64Milli({end_ms:Int64}))
)"""

# Every registered engine of every project: the scraper's runtime targets.
ENGINES_ALL = """
SELECT toString(project) AS project, engine, argMax(url, updated_at) AS url
FROM engines GROUP BY project, engine"""
