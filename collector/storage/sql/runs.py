"""SQL of runs: summaries merged from ``runs_agg`` partials, the runs list (filters, search,
sorts, pages from whole runs or from run heads alone), one run's spans, the agent's median
cost, refused and open runs.
"""

from __future__ import annotations

from agentwatch_platform.collector.storage.schema import COUNTED_RUN, HEAD_MINUTE_S, RUN_PARTIALS
from agentwatch_platform.collector.storage.sql.feedback import FEEDBACK, FEEDBACK_SCORE
from agentwatch_platform.collector.storage.sql.scope import RUN_HOURS, where

# The traces with a row that starts in one of the minutes ``{exact_minutes}`` (read from their hours
# only): every run that starts in them (its earliest row does), and a few others.
EXACT_MINUTE_TRACES = """
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
    WHERE {RUN_HOURS} AND {traces}
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
    scores, key = (FEEDBACK, FEEDBACK_SCORE) if sort == "feedback_score" else ("", sort)
    return f"""{scores}
SELECT trace_id, count() OVER () AS total FROM ({RUNS_IN_RANGE})
WHERE {filters}
ORDER BY {key} {direction}, trace_id
LIMIT {{limit:UInt32}} OFFSET {{offset:UInt32}}"""


def runs_count(filters: str) -> str:
    return f"SELECT count() AS total FROM ({RUNS_IN_RANGE}) WHERE {filters}"


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
    WHERE {RUN_HOURS}
      AND cityHash64(trace_id) IN (
        SELECT cityHash64(trace_id) FROM runs_agg
        WHERE {RUN_HOURS} AND roots > 0 AND agent = {{agent:String}} AND {COUNTED_RUN})
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
        PREWHERE trace_hash IN ({EXACT_MINUTE_TRACES})
        WHERE {RUN_HOURS}
        GROUP BY trace_id
        HAVING agent_roots > 0 AND start_ns >= {{start_ns:Int64}} AND start_ns < {{end_ns:Int64}}
            AND intDiv(start_ns, 60000000000) * 60 IN {{exact_minutes:Array(Int64)}}
    )
)"""

# Run heads: the partial row holding a run's root span has its start, end, status and outcome,
# so counting runs needs no merge of partials. (Its model list may be partial: a model filter
# looks the traces up; grouping by model takes the exact path, ``run_metrics``.)
HEAD_STATUS = "multiIf(roots = 0, 'open', budget_exceeded != '', 'budget', root_timeout = 1, 'timeout', root_error = 1, 'error', 'ok')"

RUN_HEAD_FILTERS = {
    "agent": "agent = {agent:String}",
    "model": f"trace_id IN (SELECT trace_id FROM runs_agg WHERE {RUN_HOURS} AND has(models, {{model:String}}))",
    "status": f"{HEAD_STATUS} = {{status:String}}",
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

HEADS_IN_RANGE = f"""
FROM ({_ROOTED_HEADS}
    UNION ALL{_OPEN_HEADS}
)
WHERE {_IN_RANGE}"""

# The rooted heads of the minutes ``{edge_minutes}`` (epoch seconds) only, read from their hours alone.
EDGE_HEADS = f"""
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
SELECT trace_id, count() OVER () AS total {HEADS_IN_RANGE} AND {filters}
ORDER BY {HEAD_SORTS[sort]} {direction}, trace_id
LIMIT {{limit:UInt32}} OFFSET {{offset:UInt32}}"""


def head_count(filters: str) -> str:
    return f"SELECT count() AS total {HEADS_IN_RANGE} AND {filters}"


# Whole-run summaries of the traces ``{trace_ids}`` (a page), in the page's order (its ids').
RUNS_OF_PAGE = f"SELECT * FROM ({runs_in_range('trace_id IN {trace_ids:Array(String)}')}) ORDER BY indexOf({{trace_ids:Array(String)}}, trace_id)"

RUN_HEAD_GROUPS = {"none": "''", "agent": "toString(agent)"}

# Requests of the range refused before any work (``schema.COUNTED_RUN``): counted apart from the runs.
REFUSED_RUNS = f"SELECT count() AS refused {HEADS_IN_RANGE} AND NOT {COUNTED_RUN} AND {{agent:String}} IN ('', agent)"

# Runs of the range without their root: running (a span arrived within the idle timeout) or incomplete.
OPEN_RUN_STATES = f"""
SELECT countIf(last_ns >= {{idle_cutoff_ns:Int64}}) AS running, countIf(last_ns < {{idle_cutoff_ns:Int64}}) AS incomplete
FROM (
    SELECT trace_id, sum(roots) AS n_roots, toUnixTimestamp64Nano(min(start_time)) AS start_ns,
        toUnixTimestamp64Nano(max(end_time)) AS last_ns
    FROM runs_agg
    WHERE {RUN_HOURS}
      AND trace_id IN (SELECT trace_id FROM runs_agg WHERE {RUN_HOURS} AND opened > 0)
    GROUP BY trace_id
    HAVING n_roots = 0 AND start_ns >= {{start_ns:Int64}} AND start_ns < {{end_ns:Int64}}
)"""

# The overview's run states and refused requests in one statement (one round trip): two one-row
# aggregates side by side.
OPEN_AND_REFUSED_RUNS = f"""
SELECT running, incomplete, refused FROM ({OPEN_RUN_STATES}) AS states CROSS JOIN ({REFUSED_RUNS}) AS refused_runs"""
