"""SQL of metrics over time: call-level figures from the rollups (``span_minutes``,
``span_hours``) and the spans of cut minutes (``span_source``), run-level figures from run heads,
``run_minutes`` and ``closed_run_minutes``, the filters' values.

One rule for time (docs/runs.md "What a time window contains"): a call counts in the bucket, and the
window, that its span's start falls in, to the nanosecond.
"""

from __future__ import annotations

from agentwatch_platform.collector.storage.schema import (
    BILLABLE,
    COUNTED_RUN,
    HEAD_DURATION_S,
    ROLLUP_COLUMNS,
    SPAN_PARTIALS,
)
from agentwatch_platform.collector.storage.sql.closes import stale_runs
from agentwatch_platform.collector.storage.sql.feedback import FEEDBACK, FEEDBACK_COUNT, FEEDBACK_FIGURES, FEEDBACK_SUM
from agentwatch_platform.collector.storage.sql.runs import (
    EDGE_HEADS,
    EXACT_MINUTE_TRACES,
    HEAD_STATUS,
    HEADS_IN_RANGE,
    RUN_HEAD_GROUPS,
    RUNS_IN_RANGE,
)
from agentwatch_platform.collector.storage.sql.scope import RUN_HOURS, SPAN_RANGE

# A model filter keeps the model's calls and the tool calls of the runs that used it (a tool
# span has no model: without them a tool-failure rate under a model filter would be empty).
SPAN_FILTERS = {
    "agent": "agent_name = {agent:String}",
    "model": f"""(model = {{model:String}} OR (kind = 'tool'
        AND trace_id IN (SELECT trace_id FROM runs_agg WHERE {RUN_HOURS} AND has(models, {{model:String}}))))""",
}

# The calls of the runs that used the model, whatever model each call used: the cost levers'
# scope under a model filter (the share of calls routed to the small model among one model's
# own calls is 0 or 1 by definition).
RUN_CALL_FILTERS = {
    "agent": "agent_name = {agent:String}",
    "model": f"trace_id IN (SELECT trace_id FROM runs_agg WHERE {RUN_HOURS} AND has(models, {{model:String}}))",
}

SPAN_GROUPS = {"none": "''", "agent": "toString(agent_name)", "model": "toString(model)"}

RUN_GROUPS = {"none": "''", "agent": "agent", "model": "arrayJoin(if(empty(models), [''], models))"}

ROLLUP_FILTERS = {"agent": "agent = {agent:String}", "model": "model = {model:String}"}

ROLLUP_GROUPS = {"none": "''", "agent": "toString(agent)", "model": "toString(model)"}

# One rule for time (docs/runs.md "What a time window contains"): a call counts in the bucket, and the
# window, that its span's start falls in, to the nanosecond. The rollups answer for the whole
# minutes of [start, end) that no bucket boundary cuts; the minutes a boundary or the window's ends
# cut (``{cut_minutes}``, epoch seconds) are read from their spans, so no figure gains or loses
# the part of a minute outside its window.


# A rollup row's bucket: the one its minute (or hour) starts in.
def _bucket_of(t: str) -> str:
    return f"""least(intDiv(greatest(toInt64(toUnixTimestamp({t})) * 1000000000, {{start_ns:Int64}}) - {{start_ns:Int64}}, {{step_ns:Int64}}),
        {{last_bucket:Int64}})"""


# The whole minutes of [start, end) (``{lo_s}``..``{hi_s}``) but the cut ones, as they are or with
# the whole hours read from span_hours and only the other minutes from span_minutes: the same
# figures from fewer rows. Which hours are whole (``{wh_lo}``..``{wh_hi}`` but ``{not_whole_hours}``)
# is worked out by the caller (``collector.query.ranges.whole_hours``). (Hours only where some exist:
# an empty branch still costs a read.)
_MINUTE_ROWS = f"""
        SELECT agent, model, minute, {ROLLUP_COLUMNS} FROM span_minutes
        WHERE project = {{project:String}}
          AND minute >= toDateTime({{lo_s:Int64}}) AND minute < toDateTime({{hi_s:Int64}})
          AND NOT has({{cut_minutes:Array(Int64)}}, toInt64(toUnixTimestamp(minute)))"""


def _whole_hour(hour_s: str) -> str:
    return f"""({hour_s} >= {{wh_lo:Int64}} AND {hour_s} < {{wh_hi:Int64}}
          AND NOT has({{not_whole_hours:Array(Int64)}}, {hour_s}))"""


_HOUR_ROWS = f"""
        SELECT agent, model, hour AS minute, {ROLLUP_COLUMNS} FROM span_hours
        WHERE project = {{project:String}} AND hour >= toDateTime({{wh_lo:Int64}}) AND hour < toDateTime({{wh_hi:Int64}})
          AND NOT has({{not_whole_hours:Array(Int64)}}, toInt64(toUnixTimestamp(hour)))
        UNION ALL {_MINUTE_ROWS}
          AND NOT {_whole_hour("intDiv(toInt64(toUnixTimestamp(minute)), 3600) * 3600")}"""

# The spans of the cut minutes that fall in [start, end), read from their hours only (the spans'
# sort key starts with the project and the hour).
_CUT_SPANS = """
    AND toStartOfHour(start_time) IN (SELECT toStartOfHour(toDateTime(arrayJoin({cut_minutes:Array(Int64)}))))
    AND has({cut_minutes:Array(Int64)}, intDiv(toUnixTimestamp64Nano(start_time), 60000000000) * 60)"""

SPAN_SOURCES = ("spans", "minutes", "hours")


def span_source(
    key_rollup: str,
    key_spans: str,
    filters_rollup: str,
    filters_spans: str,
    *,
    source: str,
    edges: bool = False,
    tail: bool = False,
) -> str:
    """Call-level partials per key ``k``, from ``source`` (one of ``SPAN_SOURCES``): the
    rollups over the whole, uncut minutes of [start, end) (``minutes``, or ``hours`` with whole
    hours from span_hours) and, where ``edges``, the spans of the cut minutes; or every span of
    the range (``spans``: buckets under a minute, model filters, many cut minutes).

    Where ``tail``, each row also carries ``tail_cost_usd``: its cost from the whole minute
    ``{tail_s}`` (``{tail_ns}``) on, exact where no hour read from span_hours holds that minute
    (``{cut_hours}`` must hold its hour)."""
    if source not in SPAN_SOURCES:
        raise ValueError(f"source must be one of {SPAN_SOURCES}, got {source!r}")
    spans = f"""
    SELECT {key_spans} AS k, {SPAN_PARTIALS}{_SPAN_TAIL if tail else ""} FROM spans
    WHERE {SPAN_RANGE} AND {filters_spans}{_CUT_SPANS if source != "spans" else ""}
    GROUP BY k"""
    if source == "spans":
        return spans
    rollups = f"""
    SELECT {key_rollup} AS k, {ROLLUP_COLUMNS}{_ROLLUP_TAIL if tail else ""}
    FROM ({_HOUR_ROWS if source == "hours" else _MINUTE_ROWS})
    WHERE {filters_rollup}"""
    return f"{rollups}\n    UNION ALL{spans}" if edges else rollups


# A row's cost from the minute {tail_s} on (the part of a range after the collector's watermark):
# a rollup row's minute (or hour) starts there or after, a span starts there or after. (``spans.``:
# the column, not the ``cost_usd`` partial of the same SELECT.)
_ROLLUP_TAIL = ", if(minute >= toDateTime({tail_s:Int64}), cost_usd, 0) AS tail_cost_usd"
_SPAN_TAIL = f""",
    sumIf(spans.cost_usd, {BILLABLE} AND toUnixTimestamp64Nano(start_time) >= {{tail_ns:Int64}}) AS tail_cost_usd"""


# Sums are cheap; merging TDigest states is not, so quantiles are merged only when asked for.
SPAN_SUMS = """
    sum(cost_usd) AS cost_usd, sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
    sum(llm_calls) AS llm_calls, sum(tool_calls) AS tool_calls, sum(tool_failures) AS tool_failures,
    sum(calls) AS calls, sum(timeouts) AS timeouts, sum(tool_cache_hits) AS tool_cache_hits,
    sum(tokens_saved) AS tokens_saved, sum(small_model_calls) AS small_model_calls"""

_SPAN_QUANTILES = """,
    quantilesTDigestIfMerge(0.5, 0.95)(ttft) AS ttft_q, quantilesTDigestIfMerge(0.5, 0.95)(tpot) AS tpot_q"""


def span_metrics(
    group: str,
    filters_rollup: str,
    filters_spans: str,
    *,
    source: str,
    quantiles: bool,
    edges: bool = False,
    tail: bool = False,
) -> str:
    """Per (bucket, group): call-level figures, with TTFT/TPOT quantiles if ``quantiles`` and the
    cost from the minute ``{tail_s}`` on if ``tail`` (``span_source``). ``group`` is from
    ``ROLLUP_GROUPS``; a minute counts in the bucket it starts in (the edge minutes in the first
    and last)."""
    key_rollup = f"({_bucket_of('minute')}, {ROLLUP_GROUPS[group]})"
    key_spans = (
        f"(intDiv(toUnixTimestamp64Nano(start_time) - {{start_ns:Int64}}, {{step_ns:Int64}}), {SPAN_GROUPS[group]})"
    )
    source_sql = span_source(
        key_rollup, key_spans, filters_rollup, filters_spans, source=source, edges=edges, tail=tail
    )
    return f"""
SELECT k.1 AS bucket, k.2 AS grp, {SPAN_SUMS}{_SPAN_QUANTILES if quantiles else ""}{_TAIL_SUM if tail else ""}
FROM ({source_sql})
GROUP BY k"""


_TAIL_SUM = ", sum(tail_cost_usd) AS tail_cost_usd"


def run_heads(group: str, filters: str) -> str:
    """Per (bucket, group): runs that started in the bucket, latency, status and outcome."""
    return f"""
SELECT intDiv(toUnixTimestamp64Nano(start_time) - {{start_ns:Int64}}, {{step_ns:Int64}}) AS bucket,
    {RUN_HEAD_GROUPS[group]} AS grp,
    count() AS runs,
    quantilesIf(0.5, 0.95)({HEAD_DURATION_S}, roots > 0) AS latency_q,
    countIf({HEAD_STATUS} NOT IN ('ok', 'open')) AS failed_runs,
    countIf(outcome = 'success') AS successes,
    countIf(outcome != '') AS with_outcome
{HEADS_IN_RANGE} AND {filters} AND {COUNTED_RUN}
GROUP BY bucket, grp"""


def run_head_minutes(group: str, filters: str) -> str:
    """``run_heads`` with the whole minutes of the range that fall in one bucket (``{whole_lo_s}``
    to ``{whole_hi_s}`` but ``{edge_minutes}``) read from run_minutes, and only the heads of the
    edge minutes and the runs without a root read from runs_agg: the same figures from a few rows
    per minute instead of a head per run. ``filters`` from ``RUN_MINUTE_FILTERS``."""
    group_sql = RUN_HEAD_GROUPS[group]
    return f"""
SELECT bucket, grp, sum(runs) AS runs, quantilesIfMerge(0.5, 0.95)(latency) AS latency_q,
    sum(failed_runs) AS failed_runs, sum(successes) AS successes, sum(with_outcome) AS with_outcome
FROM (
    SELECT intDiv(toInt64(toUnixTimestamp(minute)) * 1000000000 - {{start_ns:Int64}}, {{step_ns:Int64}}) AS bucket,
        {group_sql} AS grp, toUInt64(runs) AS runs, toUInt64(failed_runs) AS failed_runs,
        toUInt64(successes) AS successes, toUInt64(with_outcome) AS with_outcome, latency
    FROM run_minutes
    WHERE project = {{project:String}}
      AND minute >= toDateTime({{whole_lo_s:Int64}}) AND minute < toDateTime({{whole_hi_s:Int64}})
      AND NOT has({{edge_minutes:Array(Int64)}}, toInt64(toUnixTimestamp(minute))) AND {filters}
    UNION ALL
    SELECT intDiv(toUnixTimestamp64Nano(start_time) - {{start_ns:Int64}}, {{step_ns:Int64}}) AS bucket,
        {group_sql} AS grp, count() AS runs, countIf({HEAD_STATUS} NOT IN ('ok', 'open')) AS failed_runs,
        countIf(outcome = 'success') AS successes, countIf(outcome != '') AS with_outcome,
        quantilesIfState(0.5, 0.95)({HEAD_DURATION_S}, roots > 0) AS latency
    {EDGE_HEADS} AND {filters} AND {COUNTED_RUN}
    GROUP BY bucket, grp
)
GROUP BY bucket, grp"""


# The filters run_minutes can answer (it has no models: a model filter reads the heads).
RUN_MINUTE_FILTERS = {"agent": "agent = {agent:String}"}

RUN_TOTAL_FILTERS = {"agent": "agent = {agent:String}", "model": "has(models, {model:String})"}

# A trace merged from runs_agg partials is a run (``schema.COUNTED_RUN``): no root row refused it.
_NOT_REFUSED = f"countIf(roots > 0 AND NOT {COUNTED_RUN}) = 0"


def run_totals(group: str, filters: str) -> str:
    """Per (bucket, group): figures that need each run's totals (steps, cost) and its feedback.
    A run's agent and models are merged only when the group or the filters use them."""
    agent = ", max(agent) AS agent" if group == "agent" or "agent" in filters else ""
    models = ", groupUniqArrayArray(models) AS models" if group == "model" or "models" in filters else ""
    return f"""{FEEDBACK}
SELECT intDiv(start_ns - {{start_ns:Int64}}, {{step_ns:Int64}}) AS bucket,
    {RUN_GROUPS[group]} AS grp,
    avg(run_steps) AS steps_per_run, max(run_steps) AS max_steps, max(run_cost) AS max_run_cost_usd,{FEEDBACK_FIGURES}
FROM (
    SELECT trace_id, toUnixTimestamp64Nano(min(start_time)) AS start_ns, sum(roots) AS n_roots, sum(opened) AS n_opened,
        if(sum(steps) > 0, sum(steps), sum(llm_calls)) AS run_steps, sum(cost_usd) AS run_cost{agent}{models}
    FROM runs_agg WHERE {RUN_HOURS}
    GROUP BY trace_id
    HAVING (n_roots > 0 OR n_opened > 0) AND {_NOT_REFUSED} AND start_ns >= {{start_ns:Int64}} AND start_ns < {{end_ns:Int64}}
)
WHERE {filters}
GROUP BY bucket, grp"""


# The minutes of [{whole_lo_s}, {whole_hi_s}) holding a stale run (``sql.closes``) of the range,
# at most ``{cap}`` of them (one more says there are too many to read the runs of).
STALE_RUN_MINUTES = f"""
SELECT groupUniqArray({{cap:UInt32}})(m) AS minutes FROM (
    SELECT arrayJoin(range(greatest(lo_s, {{whole_lo_s:Int64}}), least(hi_s + 60, {{whole_hi_s:Int64}}), 60)) AS m
    FROM ({stale_runs(RUN_HOURS)})
)"""

RUN_CLOSED_FILTERS = {"agent": "agent = {agent:String}"}


def run_totals_closed(group: str, filters: str) -> str:
    """``run_totals`` (group none or agent, filters from ``RUN_CLOSED_FILTERS``) with the whole
    minutes of the range read from ``closed_run_minutes``, but the minutes ``{exact_minutes}``
    (those a bucket boundary or the range's ends cut, and those of stale runs), whose runs are
    merged from runs_agg as run_totals merges them; so are the runs that have feedback, for its
    figures. The same figures from a few rows per minute and the rows of a few runs."""
    group_sql = RUN_HEAD_GROUPS[group]
    return f"""{FEEDBACK}
SELECT bucket, grp, sum(n) AS runs, sum(steps) / sum(n) AS steps_per_run, max(max_steps) AS max_steps,
    max(max_cost) AS max_run_cost_usd, sum(fb_s) AS fb_sum, sum(fb_c) AS fb_n
FROM (
    SELECT intDiv(toInt64(toUnixTimestamp(minute)) * 1000000000 - {{start_ns:Int64}}, {{step_ns:Int64}}) AS bucket,
        {group_sql} AS grp, n, steps, max_steps, max_cost, toFloat64(0) AS fb_s, toUInt64(0) AS fb_c
    FROM closed_run_minutes FINAL
    ARRAY JOIN agents AS agent, runs AS n, steps, max_steps, max_cost_usd AS max_cost
    WHERE project = {{project:String}}
      AND minute >= toDateTime({{whole_lo_s:Int64}}) AND minute < toDateTime({{whole_hi_s:Int64}})
      AND toInt64(toUnixTimestamp(minute)) NOT IN {{exact_minutes:Array(Int64)}} AND {filters}
    UNION ALL
    SELECT intDiv(start_ns - {{start_ns:Int64}}, {{step_ns:Int64}}) AS bucket, {group_sql} AS grp,
        countIf(exact) AS n, sumIf(run_steps, exact) AS steps, maxIfOrNull(run_steps, exact) AS max_steps,
        maxIfOrNull(run_cost, exact) AS max_cost,
        {FEEDBACK_SUM} AS fb_s, {FEEDBACK_COUNT} AS fb_c
    FROM (
        SELECT trace_id, toUnixTimestamp64Nano(min(start_time)) AS start_ns, sum(roots) AS n_roots,
            sum(opened) AS n_opened, if(sum(steps) > 0, sum(steps), sum(llm_calls)) AS run_steps,
            sum(cost_usd) AS run_cost, max(agent) AS agent,
            intDiv(start_ns, 60000000000) * 60 IN {{exact_minutes:Array(Int64)}} AS exact
        FROM runs_agg
        PREWHERE trace_hash IN (
            {EXACT_MINUTE_TRACES}
            UNION ALL
            SELECT cityHash64(trace_id) FROM feedback WHERE project = {{project:String}} AND score IS NOT NULL)
        WHERE {RUN_HOURS}
        GROUP BY trace_id
        HAVING (n_roots > 0 OR n_opened > 0) AND {_NOT_REFUSED} AND start_ns >= {{start_ns:Int64}} AND start_ns < {{end_ns:Int64}}
    )
    WHERE {filters}
    GROUP BY bucket, grp
)
GROUP BY bucket, grp"""


def run_metrics(group: str, filters: str) -> str:
    """Per (bucket, group): every run-level figure from whole runs (grouping by model)."""
    return f"""{FEEDBACK}
SELECT intDiv(start_ns - {{start_ns:Int64}}, {{step_ns:Int64}}) AS bucket,
    {RUN_GROUPS[group]} AS grp,
    count() AS runs,
    quantilesIf(0.5, 0.95)(duration_s, status NOT IN ('running', 'incomplete')) AS latency_q,
    countIf(status NOT IN ('ok', 'running', 'incomplete')) AS failed_runs,
    countIf(outcome = 'success') AS successes,
    countIf(outcome != '') AS with_outcome,
    avg(steps) AS steps_per_run, max(steps) AS max_steps, max(cost_usd) AS max_run_cost_usd,{FEEDBACK_FIGURES}
FROM ({RUNS_IN_RANGE})
WHERE {filters} AND {COUNTED_RUN}
GROUP BY bucket, grp"""


FILTER_VALUES = f"""
SELECT arraySort(groupUniqArrayIf(toString(agent_name), agent_name != '')) AS agents,
    arraySort(groupUniqArrayIf(toString(model), model != '')) AS models,
    arraySort(groupUniqArrayIf(toString(service_name), service_name != '')) AS services
FROM spans WHERE {SPAN_RANGE}"""
