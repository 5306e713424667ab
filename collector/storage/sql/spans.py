"""The span explorer's SQL: spans across runs, filtered, sorted and paged, or grouped by a key.

Every value is bound (``{name:Type}``); the only text spliced in is picked from the
dictionaries here (filter fragments, group keys, sort keys), never from a caller. Attribute
keys are values too: they are bound into map look-ups (``attributes[{attr_key_0:String}]``).

A span's user and session are its run's (the SDK sets them on the run's root and start-marker
spans only): they are looked up in ``runs_agg`` over the hours from a day before the range on,
so a span of a run begun before the range still finds them.
"""

from __future__ import annotations

# The spans of [start, end): the table's key starts (project, hour of start), so this reads the range only.
SPAN_RANGE = """project = {project:String}
    AND start_time >= fromUnixTimestamp64Nano({start_ns:Int64})
    AND start_time < fromUnixTimestamp64Nano({end_ns:Int64})"""

_RUN_HOURS = """project = {project:String}
        AND hour >= toStartOfHour(fromUnixTimestamp64Nano({start_ns:Int64})) - INTERVAL 1 DAY
        AND hour < fromUnixTimestamp64Nano({end_ns:Int64}) + INTERVAL 1 DAY"""

DURATION_NS = "(toUnixTimestamp64Nano(end_time) - toUnixTimestamp64Nano(start_time))"
DURATION_S = f"greatest({DURATION_NS}, 0) / 1e9"
FAILED = "(status_code = 'error' OR is_timeout)"
# ok | unset | error | timeout: a timeout is told apart from other errors (``is_timeout``).
STATUS = "if(is_timeout, 'timeout', toString(status_code))"

# The error's type: the SDK's ``error.type`` (or an instrumentation's ``exception.type`` event,
# which ingestion copies there); else a timeout is a TimeoutError; else the ``Type:`` that starts
# the status message (``TimeoutError: `` with an empty message is still a TimeoutError); else
# "error" for a failed span that says nothing more; "" for a span that did not fail.
ERROR_BASE = r"""multiIf(
    error_type != '', toString(error_type),
    is_timeout, 'TimeoutError',
    status_code != 'error', '',
    match(status_message, '^[A-Za-z_][A-Za-z0-9_.]*:'), extract(status_message, '^([A-Za-z_][A-Za-z0-9_.]*):'),
    'error')"""
# The HTTP status of a failed call, where it is known: the span's HTTP attribute (old and new
# semantic conventions), else a status code the message names ("answered 503", "HTTP 429",
# "status code: 500"). ``error type (HTTP 503)`` keeps 503s apart from other failures of a type.
HTTP_STATUS = r"""multiIf(
    attributes['http.response.status_code'] != '', attributes['http.response.status_code'],
    attributes['http.status_code'] != '', attributes['http.status_code'],
    extract(status_message, '(?i)(?:http|status|status code|answered|returned|response)[ :=]*([1-5][0-9][0-9])\\b'))"""
ERROR_KEY = f"""if(({ERROR_BASE}) = '', '',
    if(({HTTP_STATUS}) = '', {ERROR_BASE}, concat({ERROR_BASE}, ' (HTTP ', {HTTP_STATUS}, ')')))"""


def attribute(slot: str) -> str:
    """A span attribute (or, missing there, a resource attribute such as ``service.version``)
    by a bound key: ``slot`` names the placeholder, never the key."""
    return f"if(mapContains(attributes, {{{slot}:String}}), attributes[{{{slot}:String}}], resource[{{{slot}:String}}])"


# A step's spans: the step span and the spans directly under it (an agent's LLM and tool calls);
# steps begun up to an hour before the range still name their calls in it.
def _steps(columns: str) -> str:
    return f"""SELECT {columns} FROM spans
        WHERE project = {{project:String}} AND kind = 'step'
          AND start_time >= fromUnixTimestamp64Nano({{start_ns:Int64}}) - INTERVAL 1 HOUR
          AND start_time < fromUnixTimestamp64Nano({{end_ns:Int64}})"""


# Spans meet their step by a 64-bit hash of (trace id, span id): a join on one UInt64 instead of two
# strings (1M spans: 650 -> 460 ms of CPU for cost by step over a day). A collision
# (p ~ steps x spans / 2^64) would name a call's step wrongly, never change a total.
STEP_KEY = "cityHash64(trace_id, parent_span_id)"
STEP_FILTER = f"""((kind = 'step' AND name = {{step:String}})
    OR {STEP_KEY} IN ({_steps("cityHash64(trace_id, span_id)")} AND name = {{step:String}}))"""
_STEP_NAMES = f"({_steps('cityHash64(trace_id, span_id) AS step_key, name AS step_name')})"


def _run_traces(condition: str) -> str:
    return f"trace_id IN (SELECT trace_id FROM runs_agg WHERE {_RUN_HOURS} AND {condition})"


# Searched text: the span's name, tool, status message and captured prompt or completion, in the
# spans' own columns, or (an embedded store keeps captured text in files) the spans whose text
# matched there (``text_spans``: trace id and span id, concatenated, from ``Store.search_texts``).
SEARCH = """(positionCaseInsensitiveUTF8(name, {search:String}) > 0
    OR positionCaseInsensitiveUTF8(tool_name, {search:String}) > 0
    OR positionCaseInsensitiveUTF8(status_message, {search:String}) > 0
    OR positionCaseInsensitiveUTF8(input_text, {search:String}) > 0
    OR positionCaseInsensitiveUTF8(output_text, {search:String}) > 0
    OR concat(trace_id, span_id) IN {text_spans:Array(String)})"""

# filter name -> fragment; a fragment applies when its parameter has a value.
FILTERS: dict[str, str] = {
    "kind": "kind = {kind:String}",
    "name": "name = {name:String}",
    "tool": "tool_name = {tool:String}",
    "model": "model = {model:String}",
    "status": f"{STATUS} = {{status:String}}",
    "failed": f"{FAILED} = {{failed:Bool}}",
    "error_type": f"(({ERROR_KEY}) = {{error_type:String}} OR ({ERROR_BASE}) = {{error_type:String}})",
    "agent": "agent_name = {agent:String}",
    "version": "service_version = {version:String}",
    "step": STEP_FILTER,
    "user_id": _run_traces("user_id = {user_id:String}"),
    "session_id": _run_traces("session_id = {session_id:String}"),
    "trace_id": "trace_id = {trace_id:String}",
    "min_duration_s": f"{DURATION_NS} >= {{min_duration_s:Float64}} * 1e9",
    "max_duration_s": f"{DURATION_NS} <= {{max_duration_s:Float64}} * 1e9",
    "min_cost": "cost_usd >= {min_cost:Float64}",
    "max_cost": "cost_usd <= {max_cost:Float64}",
    "search": SEARCH,
}
MAX_ATTRIBUTE_FILTERS = 8


def attribute_filter(i: int) -> str:
    """The ``i``-th ``key=value`` attribute filter (placeholders ``attr_key_i``, ``attr_value_i``)."""
    return f"{attribute(f'attr_key_{i}')} = {{attr_value_{i}:String}}"


def where(params: dict[str, object], attributes: int) -> str:
    """The range and every filter with a value, ``AND``-joined (fragments are constants)."""
    parts = [SPAN_RANGE, *(sql for name, sql in FILTERS.items() if params.get(name) is not None)]
    parts += [attribute_filter(i) for i in range(attributes)]
    return "\n    AND ".join(parts)


# --- the list ----------------------------------------------------------------------------------
# sort name -> (expression, the bound type of a cursor's value for it)
SORTS: dict[str, tuple[str, str]] = {
    "start_time": ("toUnixTimestamp64Nano(start_time)", "Int64"),
    "duration_s": (DURATION_NS, "Int64"),
    "cost_usd": ("cost_usd", "Float64"),
    "total_tokens": ("(toInt64(input_tokens) + output_tokens)", "Int64"),
}

# Aliases never reuse a column's name: ClickHouse resolves aliases in WHERE too.
_ROW = f"""trace_id, span_id, parent_span_id, name, kind, tool_name AS tool, model,
    {STATUS} AS span_status, status_message, {ERROR_KEY} AS error_key, is_timeout,
    toUnixTimestamp64Nano(start_time) / 1e9 AS start_s, {DURATION_S} AS duration_s,
    input_tokens, output_tokens, cached_tokens, cost_usd, agent_name AS agent"""


def page(filters: str, sort: str, descending: bool, *, after: bool) -> str:
    """One page of spans in a total order (the sort key, then trace and span id); ``after``: only
    the spans past the cursor (``cursor_value``, ``cursor_trace``, ``cursor_span``) in that order."""
    expr, kind = SORTS[sort]
    direction, beyond = ("DESC", "<") if descending else ("ASC", ">")
    cursor = (
        f"\n    AND ({expr}, trace_id, span_id) {beyond} ({{cursor_value:{kind}}}, {{cursor_trace:String}}, {{cursor_span:String}})"
        if after
        else ""
    )
    return f"""
SELECT {_ROW}, {expr} AS sort_value
FROM spans
WHERE {filters}{cursor}
ORDER BY {expr} {direction}, trace_id {direction}, span_id {direction}
LIMIT {{limit:UInt32}} OFFSET {{offset:UInt32}}"""


def count(filters: str) -> str:
    return f"SELECT count() AS total FROM spans WHERE {filters}"


# Run link data for a page's traces: the run's name, user and session.
RUNS_OF_SPANS = f"""
SELECT trace_id, argMinMerge(name) AS run_name, max(user_id) AS user_id, max(session_id) AS session_id
FROM runs_agg
WHERE {_RUN_HOURS} AND trace_id IN {{trace_ids:Array(String)}}
GROUP BY trace_id"""

# --- groups ------------------------------------------------------------------------------------
_RUN_KEYS = f"""(SELECT trace_id, max(user_id) AS run_user, max(session_id) AS run_session
    FROM runs_agg WHERE {_RUN_HOURS} GROUP BY trace_id)"""

# group name -> key expression; ``attribute`` is the ``attribute:<key>`` group (key bound as ``group_key``).
GROUP_KEYS: dict[str, str] = {
    "tool": "toString(tool_name)",
    "name": "name",
    "model": "toString(model)",
    "kind": "toString(kind)",
    "error_type": ERROR_KEY,
    "agent": "toString(agent_name)",
    "version": "toString(service_version)",
    "user": "run_user",
    "session": "run_session",
    "status": STATUS,
    "step": "if(kind = 'step', name, step_name)",
    "attribute": attribute("group_key"),
}
# Groups whose key most spans lack (a tool call's tool, a call's model, a failure's type, an
# attribute): the spans without one are left out, not lumped into one "" group.
KEYED_ONLY = frozenset({"tool", "model", "error_type", "attribute", "step"})
_JOINED = frozenset({"user", "session"})

GROUP_SORTS: dict[str, str] = {
    "spans": "n_spans",
    "failures": "failures",
    "failure_rate": "failure_rate",
    "duration_p50_s": "duration_p50_s",
    "duration_p95_s": "duration_p95_s",
    "total_tokens": "total_tokens",
    "cost_usd": "cost",
    "runs": "runs",
    "key": "key",
}


def groups(by: str, filters: str, sort: str, descending: bool) -> str:
    """Per group of ``by`` (a ``GROUP_KEYS`` name): spans, failures, runs, latency quantiles,
    tokens and cost; sorted by a ``GROUP_SORTS`` name (then the key), with the number of groups."""
    key = GROUP_KEYS[by]
    source = "spans"
    if by in _JOINED:
        source = f"spans ANY LEFT JOIN {_RUN_KEYS} AS run_keys USING (trace_id)"
    elif by == "step":
        source = f"spans ANY LEFT JOIN {_STEP_NAMES} AS steps ON {STEP_KEY} = steps.step_key"
    keyed = f"\n    AND ({key}) != ''" if by in KEYED_ONLY else ""
    direction = "DESC" if descending else "ASC"
    return f"""
SELECT {key} AS key,
    count() AS n_spans,
    countIf({FAILED}) AS failures,
    failures / n_spans AS failure_rate,
    uniqExact(trace_id) AS runs,
    quantilesTDigest(0.5, 0.95)({DURATION_S}) AS duration_q,
    duration_q[1] AS duration_p50_s,
    duration_q[2] AS duration_p95_s,
    sum(input_tokens) AS in_tokens,
    sum(output_tokens) AS out_tokens,
    in_tokens + out_tokens AS total_tokens,
    sum(cost_usd) AS cost,
    count() OVER () AS groups
FROM {source}
WHERE {filters}{keyed}
GROUP BY key
ORDER BY {GROUP_SORTS[sort]} {direction}, key
LIMIT {{limit:UInt32}}"""
