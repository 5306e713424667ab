"""SQL of cost: per model, agent or day, the range's totals, and self-hosted cost (GPU time, cost
by load) from the engines' metrics.
"""

from __future__ import annotations

from agentwatch_platform.collector.storage.schema import BILLABLE
from agentwatch_platform.collector.storage.sql.metrics import SPAN_SUMS, span_source
from agentwatch_platform.collector.storage.sql.scope import SPAN_RANGE

COST_KEYS = {
    "model": ("toString(model)", "toString(model)"),
    "agent": ("toString(agent)", "toString(agent_name)"),
    "day": ("toString(toDate(minute))", "toString(toDate(start_time))"),
}


def cost_by(key: str, filters_rollup: str, filters_spans: str, source: str, *, edges: bool = False) -> str:
    """Cost, tokens and LLM calls per model, agent or day (``key`` from ``COST_KEYS``). Days
    are the server's local days, which a UTC hour may straddle (zones half an hour off UTC),
    so days are summed from minutes (sums only: cheap, unlike quantile merges)."""
    key_rollup, key_spans = COST_KEYS[key]
    source = "minutes" if key == "day" and source == "hours" else source
    return f"""
SELECT k AS key, sum(cost_usd) AS cost_usd, sum(input_tokens) AS input_tokens,
    sum(output_tokens) AS output_tokens, sum(llm_calls) AS calls
FROM ({span_source(key_rollup, key_spans, filters_rollup, filters_spans, source=source, edges=edges)})
GROUP BY k
HAVING cost_usd > 0 OR calls > 0
ORDER BY cost_usd DESC, key
LIMIT 500"""


def cost_totals(filters_rollup: str, filters_spans: str, source: str, *, edges: bool = False) -> str:
    """Every call-level total of the range in one row (levers, tokens, cost)."""
    inner = span_source("0", "0", filters_rollup, filters_spans, source=source, edges=edges)
    return f"SELECT {SPAN_SUMS} FROM ({inner})"


_ENGINE_RANGE = """project = {project:String}
    AND ts >= fromUnixTimestamp64Milli({start_ms:Int64}) AND ts < fromUnixTimestamp64Milli({end_ms:Int64})"""

# GPU time held in the range: per GPU the span of its samples; an engine without GPU samples
# (a CPU simulation) counts as one GPU for the span of its own metrics.
GPU_SECONDS = f"""
SELECT sum(if(gpus_s > 0, gpus_s, engine_s)) AS gpu_seconds FROM (
    SELECT engine, sumIf(span_s, gpu != '') AS gpus_s, maxIf(span_s, gpu = '') AS engine_s FROM (
        SELECT engine, if(metric = 'gpu:utilization', labels['gpu'], '') AS gpu,
            (max(toUnixTimestamp64Milli(ts)) - min(toUnixTimestamp64Milli(ts))) / 1e3 AS span_s
        FROM engine_metrics
        WHERE {_ENGINE_RANGE} AND (metric = 'gpu:utilization' OR startsWith(metric, 'vllm:'))
        GROUP BY engine, gpu
    )
    GROUP BY engine
)"""

# Per minute: running requests, GPUs held and tokens served; summed per load level.
COST_BY_LOAD = f"""
SELECT round(m.running) AS running, sum(greatest(m.gpus, 1) * 60) AS gpu_seconds, sum(t.tokens) AS tokens
FROM (
    SELECT toDateTime(toStartOfMinute(ts)) AS minute,
        avgIf(value, metric = 'vllm:num_requests_running') AS running,
        uniqExactIf(labels['gpu'], metric = 'gpu:utilization') AS gpus
    FROM engine_metrics
    WHERE {_ENGINE_RANGE} AND metric IN ('vllm:num_requests_running', 'gpu:utilization')
    GROUP BY minute
    HAVING countIf(metric = 'vllm:num_requests_running') > 0
) AS m
INNER JOIN (
    SELECT toDateTime(toStartOfMinute(start_time)) AS minute, sumIf(input_tokens + output_tokens, {BILLABLE}) AS tokens
    FROM spans WHERE {SPAN_RANGE}
    GROUP BY minute
) AS t ON m.minute = t.minute
GROUP BY running
ORDER BY running"""
