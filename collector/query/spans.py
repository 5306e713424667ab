"""The span explorer: spans across the runs of a range, filtered, sorted and paged, or grouped.

"Which tool fails most", "which error", "which user's calls cost most" are questions about many
runs' spans at once; they are answered here in the store, over every span of the range (SQL in
``collector.storage.sql.spans``). A bad parameter raises ``InvalidQuery`` naming it (422).
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentwatch_api.schemas import (
    SPAN_GROUP_KEYS,
    SPAN_GROUP_SORTS,
    SPAN_SORTS,
    SpanGroup,
    SpanGroups,
    SpanHit,
    SpansPage,
)
from agentwatch_platform.collector.query import text_search
from agentwatch_platform.collector.query.ranges import MAX_RANGE_S, InvalidQuery
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.sql import span_keys
from agentwatch_platform.collector.storage.sql import spans as sql

if TYPE_CHECKING:  # the text store loads pyarrow
    from agentwatch_platform.collector.storage.texts import TextSearch

MAX_PAGE = 500
MAX_OFFSET = 10_000
MAX_GROUPS = 1_000
ATTRIBUTE_PREFIX = "attribute:"


def list_spans(
    store: Store,
    project: str,
    *,
    start: float,
    end: float,
    sort: str = "-start_time",
    limit: int = 50,
    offset: int = 0,
    cursor: str | None = None,
    rollups: bool = True,
    **filters: Any,
) -> SpansPage:
    """One page of the spans that started in [start, end) and pass every filter, in the order of
    ``sort`` (then trace and span id, so pages never overlap or skip). Their number comes from the
    rollups where they hold every filter (else, or with ``rollups=False``, from the spans)."""
    field, descending = _sort(sort, SPAN_SORTS)
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidQuery(f"limit must be between 1 and {MAX_PAGE}, got {limit}")
    if not 0 <= offset <= MAX_OFFSET:
        raise InvalidQuery(f"offset must be between 0 and {MAX_OFFSET} (page deeper with cursor), got {offset}")
    if cursor and offset:
        raise InvalidQuery("give cursor or offset, not both")
    params, where = _filtered(project, start, end, filters)
    params |= {"limit": limit, "offset": offset}
    if cursor:
        params |= _cursor_params(cursor, field)
    bounded = params.get("search") is None  # a search's filter reads the captured text: once only
    statement = sql.page(where, field, descending, after=bool(cursor), bounded=bounded)
    rows, warnings = _searching(
        store, params, lambda: store.query(statement, params), full=limit, most=text_search.STEPS[-1]
    )
    total = _total(store, params, where, rollups=rollups)
    next_cursor = _cursor_of(rows[-1], field) if len(rows) == limit else None
    items = _hits(store, params, rows)
    return SpansPage(items=items, total=total, limit=limit, offset=offset, next_cursor=next_cursor, warnings=warnings)


def span_groups(
    store: Store,
    project: str,
    *,
    start: float,
    end: float,
    by: str = "tool",
    sort: str = "-spans",
    limit: int = 100,
    rollups: bool = True,
    **filters: Any,
) -> SpanGroups:
    """Per value of ``by``: spans, failures and their rate, runs, latency p50/p95, tokens, cost.

    Read from the rollups where the key and the filters are a span's own (``_rollups``), else (or
    with ``rollups=False``) from every span of the range: the same figures."""
    field, descending = _sort(sort, SPAN_GROUP_SORTS)
    if not 1 <= limit <= MAX_GROUPS:
        raise InvalidQuery(f"limit must be between 1 and {MAX_GROUPS}, got {limit}")
    key, group_key = _group(by)
    params, where = _filtered(project, start, end, filters)
    params |= {"limit": limit, "group_key": group_key}
    rolled = _rollups(params) if rollups and key in span_keys.GROUP_KEYS else None
    if rolled is None:
        statement = sql.groups(key, where, field, descending)
    else:
        keyed = key in sql.KEYED_ONLY
        statement = sql.ranked(
            span_keys.groups(key, sql.GROUP_KEYS[key], rolled, where, keyed=keyed), field, descending
        )
    # a group's figures need every match: through the steps, up to the runs a search read before them
    rows, warnings = _searching(store, params, lambda: store.query(statement, params), full=None, most=10_000)
    return SpanGroups(
        by=by,
        groups=[_group_row(r) for r in rows],
        total_groups=int(rows[0]["groups"]) if rows else 0,
        warnings=warnings,
    )


def _total(store: Store, params: dict[str, Any], where: str, *, rollups: bool) -> int:
    """How many spans pass the filters: from the rollups where they hold them (one scan of the
    spans fewer: at 10M spans the count read as much as the page), else from the spans."""
    rolled = _rollups(params) if rollups else None
    statement = sql.count(where) if rolled is None else span_keys.count(rolled, where)
    return int(store.query(statement, params)[0]["total"])


def _rollups(params: dict[str, Any]) -> str | None:
    """The rollups' filter clause (``span_keys.rollup_filters``) if they hold every filter given,
    with the parts of the range each source reads added to ``params``; else None."""
    given = {name for name in sql.FILTERS if params.get(name) is not None}
    if any(name.startswith("attr_key_") for name in params) or not given <= set(span_keys.FILTERS):
        return None
    params |= _parts(params["start_ns"], params["end_ns"])
    return span_keys.rollup_filters(params)


def _parts(start_ns: int, end_ns: int) -> dict[str, int]:
    """The whole minutes ``[lo_s, hi_s)`` and whole hours ``[lo_h, hi_h)`` of [start, end), epoch
    seconds; (0, 0) for none."""
    lo_s, hi_s = -(-start_ns // 60_000_000_000) * 60, end_ns // 60_000_000_000 * 60
    if lo_s >= hi_s:
        return {"lo_s": 0, "hi_s": 0, "lo_h": 0, "hi_h": 0}
    lo_h, hi_h = -(-lo_s // 3600) * 3600, hi_s // 3600 * 3600
    return {"lo_s": lo_s, "hi_s": hi_s} | ({"lo_h": lo_h, "hi_h": hi_h} if lo_h < hi_h else {"lo_h": 0, "hi_h": 0})


# --- parameters ----------------------------------------------------------------------------------
def _range(start: float, end: float) -> tuple[int, int]:
    if not (math.isfinite(start) and math.isfinite(end)):
        raise InvalidQuery("start and end must be finite epoch seconds")
    if end <= start:
        raise InvalidQuery(f"end ({end}) must be after start ({start})")
    if end - start > MAX_RANGE_S:
        raise InvalidQuery(f"time range too long: at most {MAX_RANGE_S // 86_400} days")
    return int(start * 1e9), int(end * 1e9)


def _sort(sort: str, allowed: tuple[str, ...]) -> tuple[str, bool]:
    field = sort.removeprefix("-")
    if field not in allowed:
        raise InvalidQuery(f"sort must be one of {', '.join(allowed)} ('-' first for descending); got {sort!r}")
    return field, sort.startswith("-")


def _group(by: str) -> tuple[str, str]:
    """(the ``GROUP_KEYS`` name, the attribute key bound for ``attribute:<key>``, else "")."""
    if by.startswith(ATTRIBUTE_PREFIX):
        name = by.removeprefix(ATTRIBUTE_PREFIX).strip()
        if not name:
            raise InvalidQuery("by: attribute:<key> needs a key, e.g. attribute:service.version")
        return "attribute", name
    if by not in SPAN_GROUP_KEYS:
        raise InvalidQuery(f"by must be one of {', '.join(SPAN_GROUP_KEYS)} or attribute:<key>; got {by!r}")
    return by, ""


def _attributes(values: list[str]) -> dict[str, str]:
    """``["key=value", ...]`` -> the bound ``attr_key_i``/``attr_value_i`` parameters."""
    if len(values) > sql.MAX_ATTRIBUTE_FILTERS:
        raise InvalidQuery(f"attribute: at most {sql.MAX_ATTRIBUTE_FILTERS} key=value filters")
    params: dict[str, str] = {}
    for i, item in enumerate(values):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InvalidQuery(f"attribute must be key=value (e.g. http.status_code=503); got {item[:80]!r}")
        params |= {f"attr_key_{i}": key.strip(), f"attr_value_{i}": value}
    return params


def _filtered(project: str, start: float, end: float, filters: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The bound parameters and the WHERE clause (a search's captured-text matches are added by
    ``_searching``)."""
    attributes = list(filters.pop("attribute", None) or [])
    unknown = set(filters) - set(sql.FILTERS)
    if unknown:
        raise InvalidQuery(f"unknown span filter(s): {', '.join(sorted(unknown))}")
    filters = {name: (None if value == "" else value) for name, value in filters.items()}
    _bounds(filters, "min_duration_s", "max_duration_s")
    _bounds(filters, "min_cost", "max_cost")
    start_ns, end_ns = _range(start, end)
    params: dict[str, Any] = {"project": project, "start_ns": start_ns, "end_ns": end_ns, **filters}
    params |= _attributes(attributes)
    return params, sql.where(params, len(attributes))


def _searching(
    store: Store, params: dict[str, Any], query: Callable[[], list[dict[str, Any]]], *, full: int | None, most: int
) -> tuple[list[dict[str, Any]], list[str]]:
    """``query``'s rows, with the spans whose captured text matches the search (if any) taken from
    the text store's steps (``text_search.steps``, up to ``most`` runs) until ``full`` rows come
    back (None: through every step); and the warnings of the search."""
    if params.get("search") is None:
        return query(), []

    def with_matches(found: TextSearch) -> list[dict[str, Any]]:
        params["text_spans"] = found.span_keys  # the count after the page reads them too
        return query()

    search = (params["project"], params["start_ns"], params["end_ns"], params["search"])
    rows, found = text_search.until_enough(
        store, search, with_matches, lambda rows: full is not None and len(rows) >= full, most=most
    )
    return rows, text_search.warnings(found, "spans")


def _bounds(filters: dict[str, Any], low: str, high: str) -> None:
    lo, hi = filters.get(low), filters.get(high)
    for name, value in ((low, lo), (high, hi)):
        if value is not None and (not math.isfinite(value) or value < 0):
            raise InvalidQuery(f"{name} must be a finite number >= 0, got {value}")
    if lo is not None and hi is not None and lo > hi:
        raise InvalidQuery(f"{low} ({lo}) is above {high} ({hi}): no span can match")


# --- cursors -------------------------------------------------------------------------------------
def _cursor_of(row: dict[str, Any], field: str) -> str:
    """The position after ``row`` in the ``field`` order, opaque to clients."""
    payload = json.dumps([field, row["sort_value"], row["trace_id"], row["span_id"]])
    return base64.urlsafe_b64encode(payload.encode()).decode()


def _cursor_params(cursor: str, field: str) -> dict[str, Any]:
    try:
        sort, value, trace, span = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        value = float(value) if sql.SORTS[field][1] == "Float64" else int(value)
        valid = isinstance(trace, str) and isinstance(span, str)
    except (ValueError, TypeError, KeyError):
        valid, sort = False, None
    if not valid:
        raise InvalidQuery("cursor: not a cursor this API gave (pass next_cursor back unchanged)")
    if sort != field:
        raise InvalidQuery(f"cursor: it pages the {sort} order, not {field}; start again without a cursor")
    return {"cursor_value": value, "cursor_trace": trace, "cursor_span": span}


# --- rows ----------------------------------------------------------------------------------------
def _hits(store: Store, params: dict[str, Any], rows: list[dict[str, Any]]) -> list[SpanHit]:
    """The page's spans with their runs' name, user and session (one look-up for the page)."""
    traces = sorted({r["trace_id"] for r in rows})
    runs = {r["trace_id"]: r for r in store.query(sql.RUNS_OF_SPANS, params | {"trace_ids": traces})} if traces else {}
    return [_hit(row, runs.get(row["trace_id"], {})) for row in rows]


def _hit(row: dict[str, Any], run: dict[str, Any]) -> SpanHit:
    return SpanHit(
        trace_id=row["trace_id"],
        span_id=row["span_id"],
        parent_span_id=row["parent_span_id"],
        name=row["name"],
        kind=row["kind"],
        tool=row["tool"],
        model=row["model"],
        status=row["span_status"],
        status_message=row["status_message"],
        error_type=row["error_key"],
        is_timeout=bool(row["is_timeout"]),
        start_time=row["start_s"],
        duration_s=row["duration_s"],
        input_tokens=row["input_tokens"],
        output_tokens=row["output_tokens"],
        cached_tokens=row["cached_tokens"],
        total_tokens=int(row["input_tokens"]) + int(row["output_tokens"]),
        cost_usd=row["cost_usd"],
        agent=row["agent"],
        run_name=run.get("run_name", ""),
        user_id=run.get("user_id", ""),
        session_id=run.get("session_id", ""),
    )


def _group_row(row: dict[str, Any]) -> SpanGroup:
    p50, p95 = (_num(q) for q in (list(row["duration_q"]) + [None, None])[:2])
    return SpanGroup(
        key=row["key"],
        spans=row["n_spans"],
        failures=row["failures"],
        failure_rate=row["failure_rate"],
        runs=row["runs"],
        duration_p50_s=p50,
        duration_p95_s=p95,
        input_tokens=row["in_tokens"],
        output_tokens=row["out_tokens"],
        total_tokens=row["total_tokens"],
        cost_usd=row["cost"],
    )


def _num(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) or math.isinf(value) else value
