"""A query's parameters: the range checked, the choices and sizes bounded (``InvalidQuery`` names
the bad one), and where the figures of a range come from (the rollups, the spans of its cut
minutes, the closed runs' minutes).

Every resource module of ``collector.query`` reads its range through here, so a window means the
same on every page (docs/runs.md: "What a time window contains").
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterable
from typing import Any

from agentwatch_platform.collector.storage.base import QueryError, Store
from agentwatch_platform.collector.storage.sql import closes as closes_sql
from agentwatch_platform.collector.storage.sql import metrics as metrics_sql
from agentwatch_platform.collector.storage.sql import scope as scope_sql

MAX_RANGE_S = 400 * 86_400
MAX_BUCKETS = 5_000


class InvalidQuery(QueryError):
    """A caller's parameter is out of range or unknown; the message names it."""


def range_ns(start: float, end: float) -> tuple[int, int]:
    """Validated [start, end) in nanoseconds."""
    if not (math.isfinite(start) and math.isfinite(end)):
        raise InvalidQuery("start and end must be finite epoch seconds")
    if end <= start:
        raise InvalidQuery(f"end ({end}) must be after start ({start})")
    if end - start > MAX_RANGE_S:
        raise InvalidQuery(f"time range too long: at most {MAX_RANGE_S // 86_400} days")
    return int(start * 1e9), int(end * 1e9)


def bucket_count(start: float, end: float, step_s: int) -> int:
    if step_s < 1:
        raise InvalidQuery(f"step_s must be >= 1, got {step_s}")
    count = math.ceil((end - start) / step_s)
    if count > MAX_BUCKETS:
        raise InvalidQuery(f"{count} buckets requested; at most {MAX_BUCKETS} (raise step_s)")
    return count


def choice(name: str, value: str, allowed: Iterable[str]) -> str:
    allowed = tuple(allowed)
    if value not in allowed:
        raise InvalidQuery(f"{name} must be one of {', '.join(allowed)}; got {value!r}")
    return value


def float_or_none(value: Any) -> float | None:
    """A float, or None for NULL/NaN (empty quantiles and averages)."""
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) or math.isinf(value) else value


def ratio(num: float, den: float) -> float | None:
    return num / den if den else None


DEFAULT_RUN_IDLE_TIMEOUT_S = 300.0
"""A run without its root span is "running" while a span arrived this recently, else "incomplete"."""


def idle_cutoff_ns(idle_timeout_s: float) -> int:
    """Now minus the idle timeout, to the whole second before: a run idle that long is
    incomplete, not running. Whole seconds keep the statements that bind it the same within a
    second, so the store's result cache answers a repeated question (at nanoseconds every call
    was a new statement: 23 ms a repeated overview instead of ~2, bench/results/compare.md); a
    run turns incomplete at most a second later."""
    return int(time.time() - idle_timeout_s) * 1_000_000_000


def rollup_params(start: float, end: float, step_s: float) -> dict[str, Any]:
    """Where the call-level figures of [start, end) in buckets of ``step_s`` come from: the whole
    minutes of the range (``lo_s``..``hi_s``) from the rollups (whole hours of one bucket from
    span_hours), and the minutes cut by the range's ends or a bucket boundary (``cut_minutes``,
    their UTC hours ``cut_hours``) from their spans, exactly. More than ``MAX_EDGE_MINUTES`` cut
    minutes (buckets off the minute): every span of the range is read (``spans_only``).

    So a day's overview reads hundreds of rows, not millions of spans, and a call counts in the
    window its span starts in wherever the window's edges fall (docs/runs.md: "What a time window contains").
    """
    start_ns, end_ns = range_ns(start, end)
    step_ns = int(step_s * 1e9)
    cut = _cut_minutes(start_ns, end_ns, step_ns)
    edges = cut.get("edge_minutes", [])
    params = {
        "start_ns": start_ns,
        "lo_s": -(-start_ns // _MINUTE_NS) * 60,
        "hi_s": end_ns // _MINUTE_NS * 60,
        "last_bucket": max(1, math.ceil((end - start) / step_s)) - 1,
        "step_ns": step_ns,
        "cut_minutes": edges,
        "cut_hours": sorted({m // 3600 * 3600 for m in edges}),
        "spans_only": not cut,
    }
    return params | whole_hours(params)


MAX_SPLIT_HOURS = 256  # beyond it (buckets off the hour over months) no hour is read whole


def whole_hours(params: dict[str, Any]) -> dict[str, Any]:
    """The UTC hours of the range that span_hours answers for (``sql.metrics.span_source``): those of
    [``wh_lo``, ``wh_hi``) whose minutes are all whole minutes of the range, none of them cut (``cut_hours``)
    and all in one bucket, but for ``not_whole_hours``. Worked out here, not in the statement: the bucket
    arithmetic per row was a quarter of the planner's work on the overview's figures
    (bench/results/query_plan.md). No whole hour at all: an empty range (0, 0)."""
    start_ns, step_ns, last = params["start_ns"], params["step_ns"], params["last_bucket"]

    def bucket(t_s: int) -> int:  # as sql.metrics._bucket_of
        return min((max(t_s * 10**9, start_ns) - start_ns) // step_ns, last)

    lo, hi = -(-params["lo_s"] // 3600) * 3600, params["hi_s"] // 3600 * 3600
    cut = set(params["cut_hours"])
    split = [h for h in range(lo, hi, 3600) if h in cut or bucket(h) != bucket(h + 3540)]
    if lo >= hi or len(split) == (hi - lo) // 3600 or len(split) > MAX_SPLIT_HOURS:
        return {"wh_lo": 0, "wh_hi": 0, "not_whole_hours": []}
    return {"wh_lo": lo, "wh_hi": hi, "not_whole_hours": split}


_MINUTE_NS = 60 * 10**9
MAX_EDGE_MINUTES = 64  # beyond it (many buckets off the minute) the heads are read as they are


def head_minute_params(start_ns: int, end_ns: int, step_ns: int) -> dict[str, Any]:
    """Which minutes of [start, end) run_minutes answers for (``sql.metrics.run_head_minutes``): the
    whole minutes in the range, but those a bucket boundary cuts, which are read from the heads
    with the range's first and last minute when they are partial (``edge_minutes``).

    Nothing where reading the heads as they are costs no more: each cut minute reads its hour of
    heads, so run_minutes pays only where those hours are at most half the range's (an hour's
    overview, three cut minutes over two hours, reads its heads directly), and never beyond
    ``MAX_EDGE_MINUTES`` of them (buckets under a minute, say)."""
    cut = _cut_minutes(start_ns, end_ns, step_ns)
    if not cut or len(cut["edge_minutes"]) * 2 * 3600 * 10**9 > end_ns - start_ns:
        return {}
    return cut


def _cut_minutes(start_ns: int, end_ns: int, step_ns: int) -> dict[str, Any]:
    """The whole minutes of [start, end) and, of them and the range's partial first and last
    minute, those a bucket boundary cuts (``edge_minutes``); nothing beyond ``MAX_EDGE_MINUTES``."""
    minute = 60 * 10**9
    edges: set[int] = set()
    for t in itertools.chain((start_ns, end_ns), range(start_ns + step_ns, end_ns, step_ns)):
        if t % minute:
            edges.add(t // minute)
            if len(edges) > MAX_EDGE_MINUTES:
                return {}
    return {
        "whole_lo_s": -(-start_ns // minute) * 60,
        "whole_hi_s": end_ns // minute * 60,
        "edge_minutes": sorted(m * 60 for m in edges),
    }


# Beyond these (the closer stopped, say) the runs are merged as they are: finding the minutes of
# the runs changed since the closer's mark, and merging them, would cost more.
MAX_STALE_ROWS = 100_000
MAX_STALE_MINUTES = 240
# Under this many run rows in the range, merging them by trace costs less than the closed path's
# extra statements: at 2M spans (67k runs a day) it took the overview over 24 h from 80 to 107 ms
# p50 and run detail from 188 to 210 ms (bench.ingest --phases query, quiet); at 100M (140k rows an
# hour, 3.36M a day) it takes run totals from 81 to 44 ms of CPU for an hour, 416 to 48 for a day.
MIN_CLOSED_RUN_ROWS = 100_000


def closed_minute_params(store: Store, params: dict[str, Any]) -> dict[str, Any]:
    """Which minutes of the range closed_run_minutes answers for (``sql.metrics.run_totals_closed``):
    the whole minutes but those cut by a bucket boundary and those holding a run that changed
    since the closer's mark (``collector.storage.run_closes``), whose runs are merged instead.
    Nothing where the closer has not run, under a model filter (closed minutes have no models),
    where too many minutes changed, or where the range holds few runs (``MIN_CLOSED_RUN_ROWS``)."""
    if params.get("model") is not None:
        return {}
    cut = _cut_minutes(params["start_ns"], params["end_ns"], params["step_ns"])
    if not cut:
        return {}
    rows = store.query(closes_sql.RUN_ROWS, params)[0]
    closed_to = int(rows["closed_to"] or 0)
    if not closed_to or int(rows["n"]) < MIN_CLOSED_RUN_ROWS:
        return {}
    bound = params | {"closed_to": closed_to, "cap": MAX_STALE_MINUTES + 1}
    changed = int(store.query(closes_sql.ROWS_SINCE, bound)[0]["n"])
    if changed > MAX_STALE_ROWS:
        return {}
    whole = {"whole_lo_s": cut["whole_lo_s"], "whole_hi_s": cut["whole_hi_s"]}  # as the heads' (if set)
    stale = store.query(metrics_sql.STALE_RUN_MINUTES, bound | whole)[0]["minutes"] if changed else []
    if len(stale) > MAX_STALE_MINUTES:
        return {}
    return whole | {"exact_minutes": sorted({*cut["edge_minutes"], *(int(m) for m in stale)})}


def call_source(params: dict[str, Any]) -> str:
    """Where call-level figures come from (``sql.metrics.SPAN_SOURCES``): spans for buckets under a
    minute, where too many minutes are cut (``rollup_params``) and under a model filter (the
    tool calls of the runs that used the model: rollup rows of tool calls have no model), else
    the rollups (with the spans of the cut minutes)."""
    if params["step_ns"] < _MINUTE_NS or params["spans_only"] or params.get("model") is not None:
        return "spans"
    return _rollup_source(params)


def _rollup_source(params: dict[str, Any]) -> str:
    """How to read the minutes that cover the range (``sql.metrics.SPAN_SOURCES``): through
    span_hours where some whole hour of them falls in one bucket (``whole_hours``). Both give the
    same figures; this only spares reading span_hours when it has nothing to give."""
    return "hours" if params["wh_lo"] < params["wh_hi"] else "minutes"


def call_params(project: str, start: float, end: float, agent: str | None, model: str | None) -> dict[str, Any]:
    """Parameters of ``sql.metrics.span_source`` for one range taken whole."""
    start_ns, end_ns = range_ns(start, end)
    return {
        "project": project,
        "start_ns": start_ns,
        "end_ns": end_ns,
        "agent": agent,
        "model": model,
    } | rollup_params(start, end, end - start)


def call_filters(params: dict[str, Any]) -> tuple[tuple[str, str], str]:
    """The rollup and span filters of ``params`` and where its call-level figures come from."""
    return (
        scope_sql.where(metrics_sql.ROLLUP_FILTERS, params),
        scope_sql.where(metrics_sql.SPAN_FILTERS, params),
    ), call_source(params)


def has_edges(params: dict[str, Any], source: str) -> bool:
    """Whether the rollups of ``source`` need the spans of cut minutes beside them."""
    return source != "spans" and bool(params["cut_minutes"])
