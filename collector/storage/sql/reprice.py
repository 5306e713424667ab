"""SQL of re-pricing: the priced models, one mutation that re-prices every model's spans, and
the rebuild of run totals and per-minute figures from the re-priced spans
(``collector.query.reprice``, ``collector.storage.maintenance``).
"""

from __future__ import annotations

from agentwatch_platform.collector.storage.schema import EPOCH_HOUR, RUN_PARTIAL_COLUMNS, RUN_PARTIALS, SPAN_PARTIALS

_REPRICE_SCOPE = """kind = 'llm' AND model != ''
    AND start_time >= fromUnixTimestamp64Nano({since_ns:Int64})
    AND ({project:String} = '' OR project = {project:String})"""

REPRICE_MODELS = f"""
SELECT toString(model) AS model, toString(provider) AS provider, count() AS spans
FROM spans WHERE {_REPRICE_SCOPE}
GROUP BY model, provider ORDER BY model, provider"""

# One mutation for every model: prices are looked up by "model|provider" in bound arrays; the
# formula is agentwatch.PriceTable.cost (cached tokens are part of the input tokens).
_PRICE_INDEX = "indexOf({keys:Array(String)}, concat(toString(model), '|', toString(provider)))"

REPRICE_SPANS = f"""
ALTER TABLE spans UPDATE
    cost_usd = if({_PRICE_INDEX} = 0, cost_usd, (
        (input_tokens - least(cached_tokens, input_tokens)) * arrayElement({{input:Array(Float64)}}, {_PRICE_INDEX})
        + least(cached_tokens, input_tokens) * arrayElement({{cached:Array(Float64)}}, {_PRICE_INDEX})
        + output_tokens * arrayElement({{output:Array(Float64)}}, {_PRICE_INDEX})) / 1e6),
    price_version = if({_PRICE_INDEX} = 0, price_version, {{version:String}})
WHERE {_REPRICE_SCOPE}
SETTINGS mutations_sync = 2"""

# Run totals are rebuilt from the re-priced spans, hour by hour from the first affected hour.
_PROJECT_SCOPE = "({project:String} = '' OR project = {project:String})"

_REBUILD_SCOPE = f"hour >= toStartOfHour(fromUnixTimestamp64Nano({{since_ns:Int64}})) AND {_PROJECT_SCOPE}"

DROP_RUNS = f"ALTER TABLE runs_agg DELETE WHERE {_REBUILD_SCOPE} SETTINGS mutations_sync = 2"

# Run heads per minute from the first rebuilt hour: refilled by their view as runs_agg is rebuilt (a
# head's minute is in its partial's hour).
DROP_RUN_MINUTES = (
    "ALTER TABLE run_minutes DELETE WHERE minute >= toStartOfHour(fromUnixTimestamp64Nano({since_ns:Int64})) "
    f"AND {_PROJECT_SCOPE} SETTINGS mutations_sync = 2"
)

# Per-minute figures are rebuilt from the first affected hour, so that span_hours, dropped from
# that hour on, is refilled whole by its view from the rebuilt minutes.
_SINCE_HOUR = EPOCH_HOUR.format("intDiv({since_ns:Int64}, 1000000000)")

_MINUTES_SCOPE = f"minute >= {_SINCE_HOUR} AND {_PROJECT_SCOPE}"

DROP_MINUTES = f"ALTER TABLE span_minutes DELETE WHERE {_MINUTES_SCOPE} SETTINGS mutations_sync = 2"

DROP_HOURS = (
    f"ALTER TABLE span_hours DELETE WHERE hour >= {_SINCE_HOUR} AND {_PROJECT_SCOPE} SETTINGS mutations_sync = 2"
)

REBUILD_MINUTES = f"""
INSERT INTO span_minutes
SELECT project, minute, agent, model, {SPAN_PARTIALS}
FROM (SELECT *, toDateTime(toStartOfMinute(start_time)) AS minute, agent_name AS agent FROM spans)
WHERE {_MINUTES_SCOPE}
GROUP BY project, minute, agent, model"""

REBUILD_RUNS = f"""
INSERT INTO runs_agg (project, hour, trace_id, {RUN_PARTIAL_COLUMNS})
SELECT project, hour, trace_id, {RUN_PARTIALS}
FROM (SELECT *, toStartOfHour(start_time) AS hour FROM spans)
WHERE {_REBUILD_SCOPE}
GROUP BY project, hour, trace_id"""
