"""Every parameterised query of the store and the query API.

Values are always bound by ClickHouse (``{name:Type}`` placeholders), never formatted into
SQL; the only text spliced into a statement is an identifier picked from a whitelist here.
Times travel as epoch seconds (``Float64``) or nanoseconds (``Int64``) and come back as
epoch seconds, so neither back end has to agree with Python on time zones.
"""

from __future__ import annotations

from agentwatch_platform.collector.storage.queries_closes import stale_runs
from agentwatch_platform.collector.storage.schema import (
    BILLABLE,
    COUNTED_RUN,
    EPOCH_HOUR,
    HEAD_DURATION_S,
    HEAD_MINUTE_S,
    ROLLUP_COLUMNS,
    RUN_PARTIAL_COLUMNS,
    RUN_PARTIALS,
    SPAN_PARTIALS,
)

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
# A project's spans (``/api/ingest``); ``project`` leads the sort key, so this reads the index only.
PROJECT_SPANS = "SELECT count() AS n FROM spans WHERE project = {project:String}"
# /ready: the store answers and has the spans table (no data read).
STORE_READY = "SELECT count() AS n FROM system.tables WHERE database = currentDatabase() AND name = 'spans'"

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

# --- runs ------------------------------------------------------------------------------------
# The traces with a row that starts in one of the minutes ``{exact_minutes}`` (read from their hours
# only): every run that starts in them (its earliest row does), and a few others.
_EXACT_MINUTE_TRACES = """
            SELECT trace_hash FROM runs_agg
            WHERE project = {project:String}
              AND hour IN (SELECT DISTINCT toStartOfHour(toDateTime(arrayJoin({exact_minutes:Array(Int64)}))))
              AND intDiv(toUnixTimestamp64Nano(start_time), 60000000000) * 60 IN {exact_minutes:Array(Int64)}"""

# Merge runs_agg partials (or the same partials computed from spans) into one row per trace.
_RUN_MERGE = """
    min(start_time) AS start_t,
    max(end_time) AS end_t,
    sum(roots) AS n_roots,
    sum(opened) AS n_opened,
    argMinMerge(name) AS run_name,
    max(agent) AS agent,
    max(service) AS service,
    max(session_id) AS session_id,
    max(user_id) AS user_id,
    max(outcome) AS outcome,
    max(budget_exceeded) AS budget_exceeded,
    max(root_error) AS root_error,
    max(root_timeout) AS root_timeout,
    sum(steps) AS step_spans,
    sum(llm_calls) AS llm_calls,
    sum(tool_calls) AS tool_calls,
    sum(tool_failures) AS tool_failures,
    sum(input_tokens) AS input_tokens,
    sum(output_tokens) AS output_tokens,
    sum(cached_tokens) AS cached_tokens,
    sum(cost_usd) AS cost_usd,
    groupUniqArrayArray(models) AS models,
    max(version) AS version"""

# RunSummary fields over merged rows. Steps are step spans, or LLM calls for agents without steps.
_RUN_FIELDS = """
    trace_id, run_name AS name, agent, service, session_id, user_id,
    toUnixTimestamp64Nano(start_t) AS start_ns,
    start_ns / 1e9 AS start_time,
    toUnixTimestamp64Nano(end_t) / 1e9 AS end_time,
    greatest(toUnixTimestamp64Nano(end_t) - start_ns, 0) / 1e9 AS duration_s,
    multiIf(n_roots = 0, if(toUnixTimestamp64Nano(end_t) >= {idle_cutoff_ns:Int64}, 'running', 'incomplete'),
        budget_exceeded != '', 'budget', root_timeout = 1, 'timeout', root_error = 1, 'error', 'ok') AS status,
    outcome, budget_exceeded,
    if(step_spans > 0, step_spans, llm_calls) AS steps,
    llm_calls, tool_calls, tool_failures, input_tokens, output_tokens, cached_tokens,
    input_tokens + output_tokens AS total_tokens,
    cost_usd,
    arraySort(models) AS models,
    version"""

_RUN_HOURS = """project = {project:String}
      AND hour >= toStartOfHour(fromUnixTimestamp64Nano({start_ns:Int64}))
      AND hour < fromUnixTimestamp64Nano({end_ns:Int64}) + INTERVAL 1 DAY"""


# Runs that started in [start, end): the hours from the start's hour on (a run's spans all
# start after its root), a day past the end (spans of long runs), and only traces whose root
# span, or whose opening head (``LiveRuns``: a run whose root has not arrived), is in those
# hours, so a run begun before the range never appears with partial totals. A run without its
# root is "running" until no span arrived for the idle timeout, then "incomplete".
def runs_in_range(traces: str = "1") -> str:
    """Run summaries; ``traces`` optionally narrows the traces merged (a constant condition)."""
    return f"""
SELECT {_RUN_FIELDS} FROM (
    SELECT trace_id, {_RUN_MERGE}
    FROM runs_agg
    WHERE {_RUN_HOURS} AND {traces}
    GROUP BY trace_id
    HAVING (n_roots > 0 OR n_opened > 0)
       AND start_t >= fromUnixTimestamp64Nano({{start_ns:Int64}})
       AND start_t < fromUnixTimestamp64Nano({{end_ns:Int64}})
)"""


RUNS_IN_RANGE = runs_in_range()

# The same summary for one trace, straight from its spans (any spans, root or not).
RUN_OF_TRACE = f"""
SELECT {_RUN_FIELDS} FROM (
    SELECT trace_id, {_RUN_MERGE}
    FROM (
        SELECT trace_id, {RUN_PARTIALS}
        FROM spans
        WHERE project = {{project:String}} AND trace_id = {{trace_id:String}}
        GROUP BY trace_id
    )
    GROUP BY trace_id
)"""

# Search: a case-insensitive substring of a run's trace id, user, session, agent or name, or of
# the prompt or completion text captured on any of its spans (read only when searching): in the
# spans' own columns, or, for an embedded store, the runs whose texts matched in its text files
# (``text_traces``, from ``Store.search_texts``).
_SEARCH_FIELDS = ("trace_id", "user_id", "session_id", "agent", "name")
_CAPTURED_TEXT = """trace_id IN (
        SELECT trace_id FROM spans
        WHERE project = {project:String}
          AND spans.start_time >= fromUnixTimestamp64Nano({start_ns:Int64})
          AND spans.start_time < fromUnixTimestamp64Nano({end_ns:Int64}) + INTERVAL 1 DAY
          AND (positionCaseInsensitiveUTF8(input_text, {search:String}) > 0
               OR positionCaseInsensitiveUTF8(output_text, {search:String}) > 0))"""
_TEXT_FILES = "trace_id IN {text_traces:Array(String)}"
RUN_SEARCH = (
    "("
    + " OR ".join(
        [
            *(f"positionCaseInsensitiveUTF8({f}, {{search:String}}) > 0" for f in _SEARCH_FIELDS),
            _CAPTURED_TEXT,
            _TEXT_FILES,
        ]
    )
    + ")"
)

RUN_FILTERS = {
    "agent": "agent = {agent:String}",
    "model": "has(models, {model:String})",
    "status": "status = {status:String}",
    "outcome": "outcome = {outcome:String}",
    "user_id": "user_id = {user_id:String}",
    "session_id": "session_id = {session_id:String}",
    "version": "version = {version:String}",
    "tool_failed": "(tool_failures > 0) = {tool_failed:Bool}",
    "min_cost": "cost_usd >= {min_cost:Float64}",
    "max_cost": "cost_usd <= {max_cost:Float64}",
    "min_steps": "steps >= {min_steps:UInt32}",
    "max_steps": "steps <= {max_steps:UInt32}",
    "search": RUN_SEARCH,
}
# Every column of a run summary. The feedback score is not one of the merged columns (a page's
# scores are looked up after it is picked): sorted on, it is looked up per run as ``run_totals``
# does; runs without a score come last either way (ClickHouse's NULLS LAST).
RUN_SORTS = (
    "start_time",
    "end_time",
    "duration_s",
    "cost_usd",
    "steps",
    "total_tokens",
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "llm_calls",
    "tool_calls",
    "tool_failures",
    "agent",
    "name",
    "service",
    "status",
    "outcome",
    "budget_exceeded",
    "user_id",
    "session_id",
    "models",
    "version",
    "trace_id",
    "feedback_score",
)


def where(fragments: dict[str, str], params: dict[str, object]) -> str:
    """``AND``-joined fragments for the filters that have a value (fragments are constants)."""
    parts = [sql for name, sql in fragments.items() if params.get(name) is not None]
    return " AND ".join(parts) if parts else "1"


def run_where(fragments: dict[str, str], params: dict[str, object]) -> str:
    """``where`` for a list of runs: refused requests are no runs and are left out, unless an
    outcome filter asks for them (``outcome=refused``)."""
    sql = where(fragments, params)
    return sql if params.get("outcome") is not None else f"{sql} AND {COUNTED_RUN}"


def runs_page(filters: str, sort: str, descending: bool) -> str:
    """The trace ids of a page of runs; ``sort`` must be one of ``RUN_SORTS`` (checked here,
    not by callers). Only the partials the filters and the sort read are merged (ClickHouse
    drops unused aggregates), so a page costs a fraction of whole summaries for every run."""
    if sort not in RUN_SORTS:
        raise ValueError(f"sort must be one of {RUN_SORTS}, got {sort!r}")
    direction = "DESC" if descending else "ASC"
    scores, key = (_FEEDBACK, _FEEDBACK_SCORE) if sort == "feedback_score" else ("", sort)
    return f"""{scores}
SELECT trace_id, count() OVER () AS total FROM ({RUNS_IN_RANGE})
WHERE {filters}
ORDER BY {key} {direction}, trace_id
LIMIT {{limit:UInt32}} OFFSET {{offset:UInt32}}"""


def runs_count(filters: str) -> str:
    return f"SELECT count() AS total FROM ({RUNS_IN_RANGE}) WHERE {filters}"


FEEDBACK_SCORES = """
SELECT trace_id, avg(score) AS mean_score FROM feedback
WHERE project = {project:String} AND trace_id IN {trace_ids:Array(String)} AND score IS NOT NULL
GROUP BY trace_id"""

FEEDBACK_OF_TRACE = """
SELECT feedback_id, trace_id, score, label, comment, source, toUnixTimestamp64Milli(feedback.created_at) / 1e3 AS created_at
FROM feedback
WHERE project = {project:String} AND trace_id = {trace_id:String}
ORDER BY feedback.created_at, feedback_id
LIMIT 1000"""

SPANS_OF_TRACE = """
SELECT span_id, parent_span_id, name, kind,
    toUnixTimestamp64Nano(spans.start_time) / 1e9 AS start_time,
    toUnixTimestamp64Nano(spans.end_time) / 1e9 AS end_time,
    greatest(toUnixTimestamp64Nano(spans.end_time) - toUnixTimestamp64Nano(spans.start_time), 0) / 1e9 AS duration_s,
    status_code AS status, status_message, error_type, is_timeout, model,
    input_tokens, output_tokens, cached_tokens, cost_usd,
    ttft_s, tpot_s, queue_s, prefill_s, decode_s,
    tool_name, tool_cache_hit, step_index, finish_reason,
    agent_name AS agent, service_name AS service,
    input_text, output_text, text_ref, attributes, events
FROM spans
WHERE project = {project:String} AND trace_id = {trace_id:String}
ORDER BY spans.start_time, span_id
LIMIT {limit:UInt32}"""

# The agent's runs are matched and grouped by a 64-bit hash of their trace id, not the id: at 100M
# spans (667k runs of the agent in the week) 570-710 -> 330-370 ms of CPU, on bench.ingest's 100M
# store, where it was run detail's largest statement. A collision among a week's runs (p ~ n^2 / 2^65) would
# merge two runs' costs in a median that ClickHouse already estimates from a sample (``median``).
AGENT_MEDIAN_COST = f"""
SELECT median(run_cost) AS median FROM (
    SELECT cityHash64(trace_id) AS run, sum(cost_usd) AS run_cost, toUnixTimestamp64Nano(min(start_time)) AS start_ns
    FROM runs_agg
    WHERE {_RUN_HOURS}
      AND cityHash64(trace_id) IN (
        SELECT cityHash64(trace_id) FROM runs_agg
        WHERE {_RUN_HOURS} AND roots > 0 AND agent = {{agent:String}} AND {COUNTED_RUN})
    GROUP BY run
    HAVING start_ns >= {{start_ns:Int64}} AND start_ns < {{end_ns:Int64}}
)"""

# AGENT_MEDIAN_COST with the whole minutes of the range (but ``{exact_minutes}``) read from
# closed_run_minutes (``run_totals_closed``), and the runs of the other minutes merged as it merges them.
AGENT_MEDIAN_COST_CLOSED = f"""
SELECT median(run_cost) AS median FROM (
    SELECT arrayJoin(costs) AS run_cost
    FROM closed_run_minutes FINAL ARRAY JOIN cost_agents AS agent, run_costs AS costs
    WHERE project = {{project:String}} AND agent = {{agent:String}}
      AND minute >= toDateTime({{whole_lo_s:Int64}}) AND minute < toDateTime({{whole_hi_s:Int64}})
      AND toInt64(toUnixTimestamp(minute)) NOT IN {{exact_minutes:Array(Int64)}}
    UNION ALL
    SELECT run_cost FROM (
        SELECT trace_id, sum(cost_usd) AS run_cost, toUnixTimestamp64Nano(min(start_time)) AS start_ns,
            countIf(roots > 0 AND agent = {{agent:String}} AND {COUNTED_RUN}) AS agent_roots
        FROM runs_agg
        PREWHERE trace_hash IN ({_EXACT_MINUTE_TRACES})
        WHERE {_RUN_HOURS}
        GROUP BY trace_id
        HAVING agent_roots > 0 AND start_ns >= {{start_ns:Int64}} AND start_ns < {{end_ns:Int64}}
            AND intDiv(start_ns, 60000000000) * 60 IN {{exact_minutes:Array(Int64)}}
    )
)"""

# --- metrics over time -------------------------------------------------------------------
_SPAN_RANGE = """project = {project:String}
    AND start_time >= fromUnixTimestamp64Nano({start_ns:Int64})
    AND start_time < fromUnixTimestamp64Nano({end_ns:Int64})"""

# A model filter keeps the model's calls and the tool calls of the runs that used it (a tool
# span has no model: without them a tool-failure rate under a model filter would be empty).
SPAN_FILTERS = {
    "agent": "agent_name = {agent:String}",
    "model": f"""(model = {{model:String}} OR (kind = 'tool'
        AND trace_id IN (SELECT trace_id FROM runs_agg WHERE {_RUN_HOURS} AND has(models, {{model:String}}))))""",
}
# The calls of the runs that used the model, whatever model each call used: the cost levers'
# scope under a model filter (the share of calls routed to the small model among one model's
# own calls is 0 or 1 by definition).
RUN_CALL_FILTERS = {
    "agent": "agent_name = {agent:String}",
    "model": f"trace_id IN (SELECT trace_id FROM runs_agg WHERE {_RUN_HOURS} AND has(models, {{model:String}}))",
}
SPAN_GROUPS = {"none": "''", "agent": "toString(agent_name)", "model": "toString(model)"}
RUN_GROUPS = {"none": "''", "agent": "agent", "model": "arrayJoin(if(empty(models), [''], models))"}


ROLLUP_FILTERS = {"agent": "agent = {agent:String}", "model": "model = {model:String}"}
ROLLUP_GROUPS = {"none": "''", "agent": "toString(agent)", "model": "toString(model)"}


# One rule for time (README "What a time window contains"): a call counts in the bucket, and the
# window, that its span's start falls in, to the nanosecond. The rollups answer for the whole
# minutes of [start, end) that no bucket boundary cuts; the minutes a boundary or the window's ends
# cut (``{cut_minutes}``, epoch seconds) are read from their spans, so no figure gains or loses
# the part of a minute outside its window.


# A rollup row's bucket: the one its minute (or hour) starts in.
def _bucket_of(t: str) -> str:
    return f"""least(intDiv(greatest(toInt64(toUnixTimestamp({t})) * 1000000000, {{start_ns:Int64}}) - {{start_ns:Int64}}, {{step_ns:Int64}}),
        {{last_bucket:Int64}})"""


# An hour whose minutes are all whole minutes of the range, none cut, all in one bucket: read
# from span_hours (``{cut_hours}``: the UTC hours of the cut minutes).
def _whole_hour(hour: str) -> str:
    return f"""({hour} >= toDateTime({{lo_s:Int64}}) AND {hour} + INTERVAL 1 HOUR <= toDateTime({{hi_s:Int64}})
        AND NOT has({{cut_hours:Array(Int64)}}, toInt64(toUnixTimestamp({hour})))
        AND {_bucket_of(hour)} = {_bucket_of(f"{hour} + INTERVAL 59 MINUTE")})"""


# The whole minutes of [start, end) (``{lo_s}``..``{hi_s}``) but the cut ones, as they are or with
# the whole hours read from span_hours and only the other minutes from span_minutes: the same
# figures from fewer rows. (Hours only where some exist: an empty branch still costs a read.)
_MINUTE_ROWS = f"""
        SELECT agent, model, minute, {ROLLUP_COLUMNS} FROM span_minutes
        WHERE project = {{project:String}}
          AND minute >= toDateTime({{lo_s:Int64}}) AND minute < toDateTime({{hi_s:Int64}})
          AND NOT has({{cut_minutes:Array(Int64)}}, toInt64(toUnixTimestamp(minute)))"""
_HOUR_ROWS = f"""
        SELECT agent, model, hour AS minute, {ROLLUP_COLUMNS} FROM span_hours
        WHERE project = {{project:String}} AND {_whole_hour("hour")}
        UNION ALL {_MINUTE_ROWS}
          AND NOT {_whole_hour(EPOCH_HOUR.format("minute"))}"""
# The spans of the cut minutes that fall in [start, end), read from their hours only (the spans'
# sort key starts with the project and the hour).
_CUT_SPANS = """
    AND toStartOfHour(start_time) IN (SELECT toStartOfHour(toDateTime(arrayJoin({cut_minutes:Array(Int64)}))))
    AND has({cut_minutes:Array(Int64)}, intDiv(toUnixTimestamp64Nano(start_time), 60000000000) * 60)"""
SPAN_SOURCES = ("spans", "minutes", "hours")


def span_source(
    key_rollup: str, key_spans: str, filters_rollup: str, filters_spans: str, *, source: str, edges: bool = False
) -> str:
    """Call-level partials per key ``k``, from ``source`` (one of ``SPAN_SOURCES``): the
    rollups over the whole, uncut minutes of [start, end) (``minutes``, or ``hours`` with whole
    hours from span_hours) and, where ``edges``, the spans of the cut minutes; or every span of
    the range (``spans``: buckets under a minute, model filters, many cut minutes)."""
    if source not in SPAN_SOURCES:
        raise ValueError(f"source must be one of {SPAN_SOURCES}, got {source!r}")
    spans = f"""
    SELECT {key_spans} AS k, {SPAN_PARTIALS} FROM spans
    WHERE {_SPAN_RANGE} AND {filters_spans}{_CUT_SPANS if source != "spans" else ""}
    GROUP BY k"""
    if source == "spans":
        return spans
    rollups = f"""
    SELECT {key_rollup} AS k, {ROLLUP_COLUMNS} FROM ({_HOUR_ROWS if source == "hours" else _MINUTE_ROWS})
    WHERE {filters_rollup}"""
    return f"{rollups}\n    UNION ALL{spans}" if edges else rollups


# Sums are cheap; merging TDigest states is not, so quantiles are merged only when asked for.
_SPAN_SUMS = """
    sum(cost_usd) AS cost_usd, sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
    sum(llm_calls) AS llm_calls, sum(tool_calls) AS tool_calls, sum(tool_failures) AS tool_failures,
    sum(calls) AS calls, sum(timeouts) AS timeouts, sum(tool_cache_hits) AS tool_cache_hits,
    sum(tokens_saved) AS tokens_saved, sum(small_model_calls) AS small_model_calls"""
_SPAN_QUANTILES = """,
    quantilesTDigestIfMerge(0.5, 0.95)(ttft) AS ttft_q, quantilesTDigestIfMerge(0.5, 0.95)(tpot) AS tpot_q"""


def span_metrics(
    group: str, filters_rollup: str, filters_spans: str, *, source: str, quantiles: bool, edges: bool = False
) -> str:
    """Per (bucket, group): call-level figures, with TTFT/TPOT quantiles if ``quantiles``.
    ``group`` is from ``ROLLUP_GROUPS``; a minute counts in the bucket it starts in (the edge
    minutes in the first and last)."""
    key_rollup = f"({_bucket_of('minute')}, {ROLLUP_GROUPS[group]})"
    key_spans = (
        f"(intDiv(toUnixTimestamp64Nano(start_time) - {{start_ns:Int64}}, {{step_ns:Int64}}), {SPAN_GROUPS[group]})"
    )
    return f"""
SELECT k.1 AS bucket, k.2 AS grp, {_SPAN_SUMS}{_SPAN_QUANTILES if quantiles else ""}
FROM ({span_source(key_rollup, key_spans, filters_rollup, filters_spans, source=source, edges=edges)})
GROUP BY k"""


# Run heads: the partial row holding a run's root span has its start, end, status and outcome,
# so counting runs needs no merge of partials. (Its model list may be partial: a model filter
# looks the traces up; grouping by model takes the exact path, ``run_metrics``.)
_HEAD_STATUS = "multiIf(roots = 0, 'open', budget_exceeded != '', 'budget', root_timeout = 1, 'timeout', root_error = 1, 'error', 'ok')"
RUN_HEAD_FILTERS = {
    "agent": "agent = {agent:String}",
    "model": f"trace_id IN (SELECT trace_id FROM runs_agg WHERE {_RUN_HOURS} AND has(models, {{model:String}}))",
    "status": f"{_HEAD_STATUS} = {{status:String}}",
    "outcome": "outcome = {outcome:String}",
}
HEAD_SORTS = {
    "start_time": "start_time",
    "duration_s": "toUnixTimestamp64Nano(end_time) - toUnixTimestamp64Nano(start_time)",
}
# A head's hour is that of its earliest span, so no later than its start: heads need only the
# range's own hours, not the day after it that whole-run merges read.
# A finished run is its root's row (one per trace: the root is in one partial); only runs whose
# root has not come (an opening head, collector.ingest.live_runs) are merged per trace, so the common
# case needs no GROUP BY over every run of the range (that merge tripled overview_24h at 10M spans).
_ROOTED_HEADS = """
    SELECT trace_id, start_time, end_time, roots, agent, outcome, budget_exceeded, root_error, root_timeout
    FROM runs_agg
    WHERE runs_agg.project = {project:String}
      AND runs_agg.hour >= toStartOfHour(fromUnixTimestamp64Nano({start_ns:Int64})) AND runs_agg.hour < fromUnixTimestamp64Nano({end_ns:Int64})
      AND runs_agg.roots > 0"""
_OPEN_HEADS = """
    SELECT trace_id, min(runs_agg.start_time) AS start_time, max(runs_agg.end_time) AS end_time, sum(runs_agg.roots) AS roots,
        max(runs_agg.agent) AS agent, max(runs_agg.outcome) AS outcome, max(runs_agg.budget_exceeded) AS budget_exceeded,
        max(runs_agg.root_error) AS root_error, max(runs_agg.root_timeout) AS root_timeout
    FROM runs_agg
    WHERE runs_agg.project = {project:String}
      AND runs_agg.hour >= toStartOfHour(fromUnixTimestamp64Nano({start_ns:Int64})) AND runs_agg.hour < fromUnixTimestamp64Nano({end_ns:Int64})
      AND trace_id IN (
          SELECT trace_id FROM runs_agg
          WHERE project = {project:String} AND opened > 0
            AND hour >= toStartOfHour(fromUnixTimestamp64Nano({start_ns:Int64})) AND hour < fromUnixTimestamp64Nano({end_ns:Int64}))
    GROUP BY trace_id
    HAVING roots = 0"""
_IN_RANGE = (
    "start_time >= fromUnixTimestamp64Nano({start_ns:Int64}) AND start_time < fromUnixTimestamp64Nano({end_ns:Int64})"
)
_HEADS_IN_RANGE = f"""
FROM ({_ROOTED_HEADS}
    UNION ALL{_OPEN_HEADS}
)
WHERE {_IN_RANGE}"""
# The rooted heads of the minutes ``{edge_minutes}`` (epoch seconds) only, read from their hours alone.
_EDGE_HEADS = f"""
FROM ({_ROOTED_HEADS}
      AND runs_agg.hour IN (SELECT toStartOfHour(toDateTime(arrayJoin({{edge_minutes:Array(Int64)}}))))
      AND has({{edge_minutes:Array(Int64)}}, {HEAD_MINUTE_S})
    UNION ALL{_OPEN_HEADS}
)
WHERE {_IN_RANGE}"""


def head_page(filters: str, sort: str, descending: bool) -> str:
    """The trace ids of a page of runs, found from run heads alone (no merge of partials);
    for sorts in ``HEAD_SORTS`` and filters in ``RUN_HEAD_FILTERS``."""
    direction = "DESC" if descending else "ASC"
    return f"""
SELECT trace_id, count() OVER () AS total {_HEADS_IN_RANGE} AND {filters}
ORDER BY {HEAD_SORTS[sort]} {direction}, trace_id
LIMIT {{limit:UInt32}} OFFSET {{offset:UInt32}}"""


def head_count(filters: str) -> str:
    return f"SELECT count() AS total {_HEADS_IN_RANGE} AND {filters}"


# Whole-run summaries of the traces ``{trace_ids}`` (a page), in the page's order (its ids').
RUNS_OF_PAGE = f"SELECT * FROM ({runs_in_range('trace_id IN {trace_ids:Array(String)}')}) ORDER BY indexOf({{trace_ids:Array(String)}}, trace_id)"
RUN_HEAD_GROUPS = {"none": "''", "agent": "toString(agent)"}


def run_heads(group: str, filters: str) -> str:
    """Per (bucket, group): runs that started in the bucket, latency, status and outcome."""
    return f"""
SELECT intDiv(toUnixTimestamp64Nano(start_time) - {{start_ns:Int64}}, {{step_ns:Int64}}) AS bucket,
    {RUN_HEAD_GROUPS[group]} AS grp,
    count() AS runs,
    quantilesIf(0.5, 0.95)({HEAD_DURATION_S}, roots > 0) AS latency_q,
    countIf({_HEAD_STATUS} NOT IN ('ok', 'open')) AS failed_runs,
    countIf(outcome = 'success') AS successes,
    countIf(outcome != '') AS with_outcome
{_HEADS_IN_RANGE} AND {filters} AND {COUNTED_RUN}
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
        {group_sql} AS grp, count() AS runs, countIf({_HEAD_STATUS} NOT IN ('ok', 'open')) AS failed_runs,
        countIf(outcome = 'success') AS successes, countIf(outcome != '') AS with_outcome,
        quantilesIfState(0.5, 0.95)({HEAD_DURATION_S}, roots > 0) AS latency
    {_EDGE_HEADS} AND {filters} AND {COUNTED_RUN}
    GROUP BY bucket, grp
)
GROUP BY bucket, grp"""


# The filters run_minutes can answer (it has no models: a model filter reads the heads).
RUN_MINUTE_FILTERS = {"agent": "agent = {agent:String}"}


# Feedback per run without a join: the project's scored traces as constant arrays, looked up
# per run with transform() (a hash lookup; a JOIN against every run in range cost more than
# the runs themselves).
_FEEDBACK = """
WITH (
    SELECT (groupArray(trace_id), groupArray(fb_sum), groupArray(fb_n)) FROM (
        SELECT trace_id, toFloat64(ifNull(sum(score), 0)) AS fb_sum, count(score) AS fb_n
        FROM feedback WHERE project = {project:String} AND score IS NOT NULL GROUP BY trace_id)
) AS fb"""
_FEEDBACK_SCORE = (
    "if(transform(trace_id, fb.1, fb.3, toUInt64(0)) = 0, NULL, "
    "transform(trace_id, fb.1, fb.2, toFloat64(0)) / transform(trace_id, fb.1, fb.3, toUInt64(0)))"
)
_FEEDBACK_SUM = "sum(transform(trace_id, fb.1, fb.2, toFloat64(0)))"
_FEEDBACK_COUNT = "sum(transform(trace_id, fb.1, fb.3, toUInt64(0)))"
_FEEDBACK_FIGURES = f"""
    {_FEEDBACK_SUM} AS fb_sum, {_FEEDBACK_COUNT} AS fb_n"""

RUN_TOTAL_FILTERS = {"agent": "agent = {agent:String}", "model": "has(models, {model:String})"}
# A trace merged from runs_agg partials is a run (``schema.COUNTED_RUN``): no root row refused it.
_NOT_REFUSED = f"countIf(roots > 0 AND NOT {COUNTED_RUN}) = 0"


def run_totals(group: str, filters: str) -> str:
    """Per (bucket, group): figures that need each run's totals (steps, cost) and its feedback.
    A run's agent and models are merged only when the group or the filters use them."""
    agent = ", max(agent) AS agent" if group == "agent" or "agent" in filters else ""
    models = ", groupUniqArrayArray(models) AS models" if group == "model" or "models" in filters else ""
    return f"""{_FEEDBACK}
SELECT intDiv(start_ns - {{start_ns:Int64}}, {{step_ns:Int64}}) AS bucket,
    {RUN_GROUPS[group]} AS grp,
    avg(run_steps) AS steps_per_run, max(run_steps) AS max_steps, max(run_cost) AS max_run_cost_usd,{_FEEDBACK_FIGURES}
FROM (
    SELECT trace_id, toUnixTimestamp64Nano(min(start_time)) AS start_ns, sum(roots) AS n_roots, sum(opened) AS n_opened,
        if(sum(steps) > 0, sum(steps), sum(llm_calls)) AS run_steps, sum(cost_usd) AS run_cost{agent}{models}
    FROM runs_agg WHERE {_RUN_HOURS}
    GROUP BY trace_id
    HAVING (n_roots > 0 OR n_opened > 0) AND {_NOT_REFUSED} AND start_ns >= {{start_ns:Int64}} AND start_ns < {{end_ns:Int64}}
)
WHERE {filters}
GROUP BY bucket, grp"""


# --- per-run figures from closed minutes (collector.storage.run_closes) ----------------------
# The minutes of [{whole_lo_s}, {whole_hi_s}) holding a stale run (``queries_closes``) of the range,
# at most ``{cap}`` of them (one more says there are too many to read the runs of).
STALE_RUN_MINUTES = f"""
SELECT groupUniqArray({{cap:UInt32}})(m) AS minutes FROM (
    SELECT arrayJoin(range(greatest(lo_s, {{whole_lo_s:Int64}}), least(hi_s + 60, {{whole_hi_s:Int64}}), 60)) AS m
    FROM ({stale_runs(_RUN_HOURS)})
)"""
RUN_CLOSED_FILTERS = {"agent": "agent = {agent:String}"}


def run_totals_closed(group: str, filters: str) -> str:
    """``run_totals`` (group none or agent, filters from ``RUN_CLOSED_FILTERS``) with the whole
    minutes of the range read from ``closed_run_minutes``, but the minutes ``{exact_minutes}``
    (those a bucket boundary or the range's ends cut, and those of stale runs), whose runs are
    merged from runs_agg as run_totals merges them; so are the runs that have feedback, for its
    figures. The same figures from a few rows per minute and the rows of a few runs."""
    group_sql = RUN_HEAD_GROUPS[group]
    return f"""{_FEEDBACK}
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
        {_FEEDBACK_SUM} AS fb_s, {_FEEDBACK_COUNT} AS fb_c
    FROM (
        SELECT trace_id, toUnixTimestamp64Nano(min(start_time)) AS start_ns, sum(roots) AS n_roots,
            sum(opened) AS n_opened, if(sum(steps) > 0, sum(steps), sum(llm_calls)) AS run_steps,
            sum(cost_usd) AS run_cost, max(agent) AS agent,
            intDiv(start_ns, 60000000000) * 60 IN {{exact_minutes:Array(Int64)}} AS exact
        FROM runs_agg
        PREWHERE trace_hash IN (
            {_EXACT_MINUTE_TRACES}
            UNION ALL
            SELECT cityHash64(trace_id) FROM feedback WHERE project = {{project:String}} AND score IS NOT NULL)
        WHERE {_RUN_HOURS}
        GROUP BY trace_id
        HAVING (n_roots > 0 OR n_opened > 0) AND {_NOT_REFUSED} AND start_ns >= {{start_ns:Int64}} AND start_ns < {{end_ns:Int64}}
    )
    WHERE {filters}
    GROUP BY bucket, grp
)
GROUP BY bucket, grp"""


def run_metrics(group: str, filters: str) -> str:
    """Per (bucket, group): every run-level figure from whole runs (grouping by model)."""
    return f"""{_FEEDBACK}
SELECT intDiv(start_ns - {{start_ns:Int64}}, {{step_ns:Int64}}) AS bucket,
    {RUN_GROUPS[group]} AS grp,
    count() AS runs,
    quantilesIf(0.5, 0.95)(duration_s, status NOT IN ('running', 'incomplete')) AS latency_q,
    countIf(status NOT IN ('ok', 'running', 'incomplete')) AS failed_runs,
    countIf(outcome = 'success') AS successes,
    countIf(outcome != '') AS with_outcome,
    avg(steps) AS steps_per_run, max(steps) AS max_steps, max(cost_usd) AS max_run_cost_usd,{_FEEDBACK_FIGURES}
FROM ({RUNS_IN_RANGE})
WHERE {filters} AND {COUNTED_RUN}
GROUP BY bucket, grp"""


# --- cost ----------------------------------------------------------------------------------
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
    return f"SELECT {_SPAN_SUMS} FROM ({inner})"


FILTER_VALUES = f"""
SELECT arraySort(groupUniqArrayIf(toString(agent_name), agent_name != '')) AS agents,
    arraySort(groupUniqArrayIf(toString(model), model != '')) AS models,
    arraySort(groupUniqArrayIf(toString(service_name), service_name != '')) AS services
FROM spans WHERE {_SPAN_RANGE}"""

# --- feedback ------------------------------------------------------------------------------
TRACE_EXISTS = """
SELECT count() AS n FROM spans
WHERE project = {project:String} AND trace_id = {trace_id:String}"""

# --- engines -------------------------------------------------------------------------------
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

# --- self-hosted cost ----------------------------------------------------------------------
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
    FROM spans WHERE {_SPAN_RANGE}
    GROUP BY minute
) AS t ON m.minute = t.minute
GROUP BY running
ORDER BY running"""

# Every registered engine of every project: the scraper's runtime targets.
ENGINES_ALL = """
SELECT toString(project) AS project, engine, argMax(url, updated_at) AS url
FROM engines GROUP BY project, engine"""

# --- re-pricing ----------------------------------------------------------------------------
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

# --- engine spans joined to client LLM spans (collector.ingest.engine_join) ---------------------------
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

# --- runs whose root has not arrived (collector.ingest.live_runs) --------------------------------------
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

# Requests of the range refused before any work (``schema.COUNTED_RUN``): counted apart from the runs.
REFUSED_RUNS = f"SELECT count() AS refused {_HEADS_IN_RANGE} AND NOT {COUNTED_RUN} AND {{agent:String}} IN ('', agent)"

# Runs of the range without their root: running (a span arrived within the idle timeout) or incomplete.
OPEN_RUN_STATES = f"""
SELECT countIf(last_ns >= {{idle_cutoff_ns:Int64}}) AS running, countIf(last_ns < {{idle_cutoff_ns:Int64}}) AS incomplete
FROM (
    SELECT trace_id, sum(roots) AS n_roots, toUnixTimestamp64Nano(min(start_time)) AS start_ns,
        toUnixTimestamp64Nano(max(end_time)) AS last_ns
    FROM runs_agg
    WHERE {_RUN_HOURS}
      AND trace_id IN (SELECT trace_id FROM runs_agg WHERE {_RUN_HOURS} AND opened > 0)
    GROUP BY trace_id
    HAVING n_roots = 0 AND start_ns >= {{start_ns:Int64}} AND start_ns < {{end_ns:Int64}}
)"""

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
