"""Queries of the cost levers: measured savings against their counterfactuals, and what-if.

Prices are bound, never stored in SQL: ``{keys:Array(String)}`` holds model names and
``{input}``, ``{output}``, ``{cached}`` (``Array(Float64)``, USD per 1M tokens) their prices, as
``agentwatch.PriceTable.cost`` computes them (cached tokens are part of the input tokens). A
model not in ``keys`` is unpriced: its counterfactual is left out and counted.

These read spans in the range (lever attributes live in the attribute map, not in rollups).
"""

from __future__ import annotations

from agentwatch_platform.collector.storage.schema import BILLABLE, ROOT
from agentwatch_platform.collector.storage.sql.feedback import FEEDBACK, FEEDBACK_FIGURES
from agentwatch_platform.collector.storage.sql.scope import SPAN_RANGE

_LEVER = "attributes['agentwatch.lever.name']"
_BASELINE = "attributes['agentwatch.lever.baseline_model']"
_CACHED = "least(cached_tokens, input_tokens)"


def _price(column: str, index: str) -> str:
    return f"arrayElement({{{column}:Array(Float64)}}, {index})"


def priced(model: str) -> str:
    """USD of this span's tokens on ``model`` (an SQL expression), 0 when unpriced."""
    i = f"indexOf({{keys:Array(String)}}, {model})"
    return (
        f"((input_tokens - {_CACHED}) * {_price('input', i)} + {_CACHED} * {_price('cached', i)}"
        f" + output_tokens * {_price('output', i)}) / 1e6"
    )


def is_priced(model: str) -> str:
    return f"indexOf({{keys:Array(String)}}, {model}) > 0"


# Every model the levers' counterfactuals may need a price for.
LEVER_MODELS = f"""
SELECT arraySort(groupUniqArray(m)) AS models FROM (
    SELECT arrayJoin([toString(model), {_BASELINE}]) AS m FROM spans
    WHERE {SPAN_RANGE} AND kind = 'llm')
WHERE m != ''"""


def span_levers(filters: str) -> str:
    """Cache and routing, call by call.

    Cache: tool calls a hit served and the tokens they returned (counts), and the prompt cache:
    cached input tokens priced at the model's input price instead of its cached price.
    Routing: calls that carry ``agentwatch.lever.name = routing`` priced on their
    ``baseline_model`` with the same tokens."""
    own = "toString(model)"
    routed = f"kind = 'llm' AND {_LEVER} = 'routing' AND {_BASELINE} != ''"
    return f"""
SELECT
    countIf(kind = 'tool' AND tool_cache_hit) AS tool_cache_hits,
    sumIf(toUInt64OrZero(attributes['agentwatch.tool.tokens_saved']), kind = 'tool' AND tool_cache_hit) AS tool_tokens_avoided,
    sumIf(toUInt64({_CACHED}), kind = 'llm' AND {is_priced(own)}) AS cache_tokens,
    countIf(kind = 'llm' AND cached_tokens > 0 AND {is_priced(own)}) AS cache_calls,
    sumIf(cost_usd, kind = 'llm' AND cached_tokens > 0 AND {is_priced(own)}) AS cache_calls_usd,
    sumIf({_CACHED} * ({_price("input", f"indexOf({{keys:Array(String)}}, {own})")}
                      - {_price("cached", f"indexOf({{keys:Array(String)}}, {own})")}) / 1e6,
          kind = 'llm' AND {is_priced(own)}) AS prompt_cache_saving_usd,
    countIf({routed} AND {is_priced(_BASELINE)}) AS routed_calls,
    countIf({routed} AND NOT {is_priced(_BASELINE)}) AS routed_unpriced,
    sumIf(toUInt64(input_tokens) + output_tokens, {routed} AND {is_priced(_BASELINE)}) AS routed_tokens,
    sumIf(cost_usd, {routed} AND {is_priced(_BASELINE)}) AS routed_usd,
    sumIf({priced(_BASELINE)}, {routed} AND {is_priced(_BASELINE)}) AS routed_counterfactual_usd
FROM spans
WHERE {SPAN_RANGE} AND {filters}"""


# One row per trace with a root in the range: its agent, user, outcome, cost, the cost budget its
# root recorded (0: none), and what the levers did. Refused: turned away before any work (the rate
# limiter's refusal, or the outcome ``refused``).
_TRACE_LEVERS = f"""
    SELECT trace_id, max(agent_name) AS agent, max(user_id) AS run_user, max(outcome) AS outcome,
        toUInt8(max({_LEVER} = 'degradation')) AS degraded,
        toUInt8(max(({_LEVER} = 'rate_limit' AND attributes['agentwatch.lever.refused'] = 'true')
            OR ({ROOT} AND spans.outcome = 'refused'))) AS refused,
        maxIf(toFloat64OrZero(attributes['agentwatch.budget.max_cost_usd']), {ROOT}) AS budget,
        maxIf(toFloat64OrZero(attributes['agentwatch.lever.projected_cost_usd']), {_LEVER} = 'degradation') AS projected,
        toUInt8(max({_LEVER} = 'rate_limit' AND toFloat64OrZero(attributes['agentwatch.lever.delay_s']) > 0)) AS delayed,
        sumIf(toFloat64OrZero(attributes['agentwatch.lever.delay_s']), {_LEVER} = 'rate_limit') AS delay_s,
        sumIf(cost_usd, {BILLABLE}) AS cost,
        max({ROOT}) AS has_root
    FROM spans
    WHERE {SPAN_RANGE}
    GROUP BY trace_id
    HAVING has_root"""


def run_levers(filters: str) -> str:
    """Degradation and rate limiting, run by run, per (agent, user, degraded, refused, budget): runs,
    successes, cost, the projected cost at each degradation, delays, and feedback."""
    return f"""{FEEDBACK}
SELECT agent, run_user, degraded, refused, budget, count() AS runs, countIf(outcome = 'success') AS successes,
    sum(cost) AS cost_usd, countIf(projected > 0) AS projected_runs, sumIf(projected, projected > 0) AS projected_usd,
    sumIf(cost, projected > 0) AS projected_runs_usd, countIf(delayed) AS delayed, sum(delay_s) AS delay_s,
    {FEEDBACK_FIGURES}
FROM ({_TRACE_LEVERS})
WHERE {filters}
GROUP BY agent, run_user, degraded, refused, budget
ORDER BY agent, run_user, degraded, refused, budget"""


# --- what-if -------------------------------------------------------------------------------
def priced_tokens(model: str, input_tokens: str, output_tokens: str, cached_tokens: str) -> str:
    """USD of the given token expressions on ``model`` (0 when unpriced)."""
    i = f"indexOf({{keys:Array(String)}}, {model})"
    cached = f"least({cached_tokens}, {input_tokens})"
    return (
        f"(({input_tokens} - {cached}) * {_price('input', i)} + {cached} * {_price('cached', i)}"
        f" + {output_tokens} * {_price('output', i)}) / 1e6"
    )


# Per run with a root in the range: its cost now (``actual``), under the policy (``estimate``),
# and the tokens of each; summed with the squares of the per-run changes (for the uncertainty).
_WHATIF_SUMS = """
SELECT count() AS runs, countIf(estimate != actual) AS runs_changed, sum(actual) AS actual_usd,
    sum(estimate) AS estimate_usd, sum((estimate - actual) * (estimate - actual)) AS change_sq,
    sum(tokens) AS actual_tokens, sum(estimate_tokens) AS estimate_tokens, sum(calls_changed) AS calls_changed
FROM ({per_run})"""


def whatif_route(filters: str) -> str:
    """Route the LLM calls of steps named ``{step}`` to ``{model}``: the same tokens priced there."""
    target = (
        "kind = 'llm' AND (trace_id, parent_span_id) IN (SELECT trace_id, span_id FROM spans "
        f"WHERE {SPAN_RANGE} AND kind = 'step' AND attributes['agentwatch.step.name'] = {{step:String}})"
    )
    new_cost = priced_tokens("{model:String}", "input_tokens", "output_tokens", "cached_tokens")
    per_run = f"""
    SELECT trace_id, sumIf(cost_usd, {BILLABLE}) AS actual,
        sumIf(cost_usd, {BILLABLE} AND NOT ({target})) + sumIf({new_cost}, {target}) AS estimate,
        sumIf(toUInt64(input_tokens) + output_tokens, {BILLABLE}) AS tokens, tokens AS estimate_tokens,
        countIf({target}) AS calls_changed, max({ROOT}) AS has_root
    FROM spans WHERE {SPAN_RANGE} AND {filters}
    GROUP BY trace_id HAVING has_root"""
    return _WHATIF_SUMS.format(per_run=per_run)


def whatif_cap(filters: str) -> str:
    """Cap runs at ``{cap}`` steps of work: a run that needed more keeps the cost of its first
    ``{cap}`` steps; one whose work fit keeps its closing step (its last) too, unchanged."""
    per_run = f"""
    SELECT trace_id, sumIf(cost_usd, {BILLABLE}) AS actual, max(step_index) + 1 AS steps,
        if(steps <= {{cap:Int32}} + 1, actual, sumIf(cost_usd, {BILLABLE} AND step_index < {{cap:Int32}})) AS estimate,
        sumIf(toUInt64(input_tokens) + output_tokens, {BILLABLE}) AS tokens,
        if(steps <= {{cap:Int32}} + 1, tokens, sumIf(toUInt64(input_tokens) + output_tokens, {BILLABLE} AND step_index < {{cap:Int32}})) AS estimate_tokens,
        if(steps <= {{cap:Int32}} + 1, 0, countIf(kind = 'llm' AND step_index >= {{cap:Int32}})) AS calls_changed,
        max({ROOT}) AS has_root
    FROM spans WHERE {SPAN_RANGE} AND {filters}
    GROUP BY trace_id HAVING has_root"""
    return _WHATIF_SUMS.format(per_run=per_run)


def whatif_bounded(filters: str) -> str:
    """The evolving report instead of the whole history: every LLM call of a run sees at most its
    smallest prompt (system and question) plus ``{bound}`` tokens of report; its output, and the
    share of its input found in the prefix cache, stay as they were."""
    new_input = "least(input_tokens, base + {bound:UInt32})"
    new_cached = f"intDiv(toUInt64(cached_tokens) * {new_input}, greatest(input_tokens, 1))"
    new_cost = priced_tokens("toString(model)", new_input, "output_tokens", new_cached)
    per_run = f"""
    SELECT trace_id, sum(span_cost) AS actual, sum(if(kind = 'llm', span_new_cost, span_cost)) AS estimate,
        sum(span_tokens) AS tokens, sum(span_new_tokens) AS estimate_tokens,
        countIf(kind = 'llm' AND span_new_tokens < span_tokens) AS calls_changed, max(is_root) AS has_root
    FROM (
        SELECT trace_id, kind, if({BILLABLE}, cost_usd, 0) AS span_cost, {ROOT} AS is_root,
            minIf(input_tokens, kind = 'llm') OVER (PARTITION BY trace_id) AS base,
            {new_cost} AS span_new_cost,
            if({BILLABLE}, toUInt64(input_tokens) + output_tokens, 0) AS span_tokens,
            if(kind = 'llm', toUInt64({new_input}) + output_tokens, span_tokens) AS span_new_tokens
        FROM spans WHERE {SPAN_RANGE} AND {filters})
    GROUP BY trace_id HAVING has_root"""
    return _WHATIF_SUMS.format(per_run=per_run)
