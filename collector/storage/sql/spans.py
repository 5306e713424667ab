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


# Sorts whose first pages are cut at their last key (``page``'s ``bounded``): the expressions. A page
# by cost, a column of its own, came out dearer cut (10M spans, large-model calls by cost: 0.56 ->
# 0.77 s of CPU): the engine's own top-N already reads little past the sort column there.
_CUT_SORTS = frozenset({"start_time", "duration_s", "total_tokens"})


def page(filters: str, sort: str, descending: bool, *, after: bool, bounded: bool = True) -> str:
    """One page of spans in a total order (the sort key, then trace and span id); ``after``: only
    the spans past the cursor (``cursor_value``, ``cursor_trace``, ``cursor_span``) in that order.

    ``bounded`` (a first or offset page, sorted by a ``_CUT_SORTS`` key): the spans are first cut
    to those whose sort key reaches the page's last key (``_edge``), read from the sort key's
    columns alone, so trace and span ids, the tie-breakers, are read only where a granule holds
    such a span: over 10M spans they were most of a page (failed tool calls by duration: 1.0 ->
    0.54 s of CPU). Not for a search, whose filter reads the captured text and would be read twice."""
    expr, kind = SORTS[sort]
    direction, beyond = ("DESC", "<") if descending else ("ASC", ">")
    cut = ""
    if after:
        cut = f"\n    AND ({expr}, trace_id, span_id) {beyond} ({{cursor_value:{kind}}}, {{cursor_trace:String}}, {{cursor_span:String}})"
    elif bounded and sort in _CUT_SORTS:
        cut = f"\n    AND {expr} {'>=' if descending else '<='} {_edge(filters, expr, descending)}"
    return f"""
SELECT {_ROW}, {expr} AS sort_value
FROM spans
WHERE {filters}{cut}
ORDER BY {expr} {direction}, trace_id {direction}, span_id {direction}
LIMIT {{limit:UInt32}} OFFSET {{offset:UInt32}}"""


def _edge(filters: str, expr: str, descending: bool) -> str:
    """The sort key of the page's last span (ties included: every span of the page has a key at
    least as far), from the filtered spans' keys alone."""
    direction, edge = ("DESC", "min") if descending else ("ASC", "max")
    return f"""(SELECT {edge}(edge_key) FROM (SELECT {expr} AS edge_key FROM spans WHERE {filters}
        ORDER BY edge_key {direction} LIMIT {{limit:UInt32}} + {{offset:UInt32}}))"""


def count(filters: str) -> str:
    return f"SELECT count() AS total FROM spans WHERE {filters}"


# Run link data for a page's traces: the run's name, user and session.
RUNS_OF_SPANS = f"""
SELECT trace_id, argMinMerge(name) AS run_name, max(user_id) AS user_id, max(session_id) AS session_id
FROM runs_agg
WHERE {_RUN_HOURS} AND trace_id IN {{trace_ids:Array(String)}}
GROUP BY trace_id"""

# --- groups ------------------------------------------------------------------------------------
# A run's user and session, by the 64-bit hash of its trace id (as the steps' join, ``STEP_KEY``).
_RUN_KEYS = f"""(SELECT cityHash64(trace_id) AS trace_key, max(user_id) AS run_user, max(session_id) AS run_session
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

# A group's figures over its spans' rows.
_FIGURES = f"""count() AS n_spans,
    countIf({FAILED}) AS failures,
    uniqExact(cityHash64(trace_id)) AS runs,
    quantilesTDigest(0.5, 0.95)({DURATION_S}) AS duration_q,
    sum(input_tokens) AS in_tokens,
    sum(output_tokens) AS out_tokens,
    sum(cost_usd) AS cost"""
# The same figures in parts (per run) to be merged into their group after a join; a part
# keeps its spans' durations (an array), so a group's quantiles are over the same values as above
# (a per-part TDigest state cost more: 1M spans by user, 0.23 against 0.20 s of CPU).
_PARTS = f"""count() AS part_spans,
    countIf({FAILED}) AS part_failures,
    groupArray({DURATION_S}) AS part_durations,
    sum(input_tokens) AS part_in,
    sum(output_tokens) AS part_out,
    sum(cost_usd) AS part_cost"""
_MERGED = """sum(part_spans) AS n_spans,
    sum(part_failures) AS failures,
    uniqExact(trace_key) AS runs,
    quantilesTDigestArray(0.5, 0.95)(part_durations) AS duration_q,
    sum(part_in) AS in_tokens,
    sum(part_out) AS out_tokens,
    sum(part_cost) AS cost"""


def _per_run(filters: str) -> str:
    """The filtered spans' figures per run, joined to the run's user and session: the join meets one
    row a run, not one a span (10M spans: ~330k rows)."""
    return f"""(SELECT cityHash64(trace_id) AS trace_key, {_PARTS}
    FROM spans WHERE {filters} GROUP BY trace_key) AS parts
    ANY LEFT JOIN {_RUN_KEYS} AS run_keys USING (trace_key)"""


# A call's step: its parent step span's name (a step span is its own). Not summed per step before
# the join as runs are: a third of an agent's spans are steps, so the parts were nearly as many as
# the spans (10M spans by step: 5.3 s of CPU joined per span, 5.5 s summed per step first).
_PER_SPAN_STEP = f"spans ANY LEFT JOIN {_STEP_NAMES} AS steps ON {STEP_KEY} = steps.step_key"


def groups(by: str, filters: str, sort: str, descending: bool) -> str:
    """Per group of ``by`` (a ``GROUP_KEYS`` name): spans, failures, runs, latency quantiles,
    tokens and cost; sorted by a ``GROUP_SORTS`` name (then the key), with the number of groups.

    A run's user and session are its root's: their groups sum the spans per run first and join
    those parts to the runs, not every span (10M spans by user: 3.3 -> 1.75 s of CPU)."""
    key = GROUP_KEYS[by]
    if by in ("user", "session"):
        source, figures, where = _per_run(filters), _MERGED, ""
    else:
        keyed = f"\n    AND ({key}) != ''" if by in KEYED_ONLY else ""
        source = _PER_SPAN_STEP if by == "step" else "spans"
        figures, where = _FIGURES, f"\nWHERE {filters}{keyed}"
    direction = "DESC" if descending else "ASC"
    return f"""
SELECT {key} AS key,
    {figures},
    failures / n_spans AS failure_rate,
    duration_q[1] AS duration_p50_s,
    duration_q[2] AS duration_p95_s,
    in_tokens + out_tokens AS total_tokens,
    count() OVER () AS groups
FROM {source}{where}
GROUP BY key
ORDER BY {GROUP_SORTS[sort]} {direction}, key
LIMIT {{limit:UInt32}}"""


def ranked(figures: str, sort: str, descending: bool) -> str:
    """``figures`` (rows of key, n_spans, failures, runs, duration_q, in_tokens, out_tokens, cost, as
    ``sql.span_keys.groups`` gives them) with the columns and order ``groups`` gives."""
    direction = "DESC" if descending else "ASC"
    return f"""
SELECT key, n_spans, failures, runs, duration_q, in_tokens, out_tokens, cost,
    failures / n_spans AS failure_rate,
    duration_q[1] AS duration_p50_s,
    duration_q[2] AS duration_p95_s,
    in_tokens + out_tokens AS total_tokens,
    count() OVER () AS groups
FROM ({figures})
ORDER BY {GROUP_SORTS[sort]} {direction}, key
LIMIT {{limit:UInt32}}"""
