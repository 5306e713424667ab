"""Runs: one page of a project's runs, filtered and sorted, and one run in full (its spans, its
feedback, the agent's usual cost beside it), with the agents and models a range's filters offer.

A run is a trace: its summary is merged from the run heads and totals (``sql.runs``), its state
("running", "incomplete") read against the idle timeout (``ranges.DEFAULT_RUN_IDLE_TIMEOUT_S``).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import TypeAdapter

from agentwatch_api.schemas import FeedbackOut, FilterValues, RunDetail, RunsPage, RunSummary, SpanOut
from agentwatch_platform.collector.query import text_search
from agentwatch_platform.collector.query.engine_calls import fold_engine_figures
from agentwatch_platform.collector.query.ranges import (
    DEFAULT_RUN_IDLE_TIMEOUT_S,
    InvalidQuery,
    choice,
    closed_minute_params,
    float_or_none,
    idle_cutoff_ns,
    range_ns,
)
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.sql import feedback as feedback_sql
from agentwatch_platform.collector.storage.sql import metrics as metrics_sql
from agentwatch_platform.collector.storage.sql import runs as runs_sql

MAX_PAGE = 500
MAX_TRACE_SPANS = 100_000
TRACE_ID = re.compile(r"^[0-9a-f]{32}$")
_SPANS = TypeAdapter(list[SpanOut])


def list_runs(
    store: Store,
    project: str,
    *,
    start: float,
    end: float,
    sort: str = "-start_time",
    limit: int = 50,
    offset: int = 0,
    idle_timeout_s: float = DEFAULT_RUN_IDLE_TIMEOUT_S,
    **filters: Any,
) -> RunsPage:
    """One page of the runs that started in [start, end), filtered (``sql.runs.RUN_FILTERS``)."""
    unknown = set(filters) - set(runs_sql.RUN_FILTERS)
    if unknown:
        raise InvalidQuery(f"unknown run filter(s): {', '.join(sorted(unknown))}")
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidQuery(f"limit must be between 1 and {MAX_PAGE}, got {limit}")
    if offset < 0:
        raise InvalidQuery(f"offset must be >= 0, got {offset}")
    field = sort.removeprefix("-")
    choice("sort", field, runs_sql.RUN_SORTS)
    filters = {name: (None if value == "" else value) for name, value in filters.items()}  # an empty search matches all
    start_ns, end_ns = range_ns(start, end)
    params = {
        "project": project,
        "start_ns": start_ns,
        "end_ns": end_ns,
        "limit": limit,
        "offset": offset,
        "idle_cutoff_ns": idle_cutoff_ns(idle_timeout_s),
        **filters,
    }
    descending = sort.startswith("-")
    open_state = filters.get("status") in ("running", "incomplete")  # known only from whole-run merges
    if field in runs_sql.HEAD_SORTS and set(_given(filters)) <= set(runs_sql.RUN_HEAD_FILTERS) and not open_state:
        where = runs_sql.run_where(runs_sql.RUN_HEAD_FILTERS, params)
        page, count = runs_sql.head_page(where, field, descending), runs_sql.head_count(where)
    else:
        where = runs_sql.run_where(runs_sql.RUN_FILTERS, params)
        page, count = runs_sql.runs_page(where, field, descending), runs_sql.runs_count(where)
    warnings: list[str] = []
    if filters.get("search") is None:
        rows, total = _page(store, params, page, count)
    else:  # the runs whose captured text matches, the newest first, as many as a full page needs
        (rows, total), found = text_search.until_enough(
            store,
            (project, start_ns, end_ns, filters["search"]),
            lambda found: _page(store, params | {"text_traces": found.trace_ids}, page, count),
            lambda answer: len(answer[0]) == limit,
        )
        warnings = text_search.warnings(found, "runs")
    items = _with_feedback(store, project, rows)
    return RunsPage(items=items, total=total, limit=limit, offset=offset, warnings=warnings)


def _given(filters: dict[str, Any]) -> list[str]:
    return [name for name, value in filters.items() if value is not None]


def _page(store: Store, params: dict[str, Any], page: str, count: str) -> tuple[list[dict[str, Any]], int]:
    """Pick the page's trace ids (``page``: from run heads alone where the sort and filters
    allow, else from lean whole-run merges), then merge whole summaries for its runs only."""
    ids = store.query(page, params)
    if not ids:  # an empty first page has no total column to read; a page past the end must count
        total = int(store.query(count, params)[0]["total"]) if params["offset"] else 0
        return [], total
    rows = store.query(runs_sql.RUNS_OF_PAGE, params | {"trace_ids": [r["trace_id"] for r in ids]})
    return rows, int(ids[0]["total"])


def _with_feedback(store: Store, project: str, rows: list[dict[str, Any]]) -> list[RunSummary]:
    ids = [r["trace_id"] for r in rows]
    scores = {}
    if ids:
        scores = {
            r["trace_id"]: r["mean_score"]
            for r in store.query(feedback_sql.FEEDBACK_SCORES, {"project": project, "trace_ids": ids})
        }
    return [RunSummary(**r, feedback_score=scores.get(r["trace_id"])) for r in rows]


def get_run(
    store: Store, project: str, trace_id: str, *, idle_timeout_s: float = DEFAULT_RUN_IDLE_TIMEOUT_S
) -> RunDetail | None:
    """A run with its spans and feedback; None when the trace is not in this project."""
    trace_id = valid_trace_id(trace_id)
    params = {"project": project, "trace_id": trace_id}
    runs = store.query(runs_sql.RUN_OF_TRACE, params | {"idle_cutoff_ns": idle_cutoff_ns(idle_timeout_s)})
    if not runs:
        return None
    spans = store.query(runs_sql.SPANS_OF_TRACE, {**params, "limit": MAX_TRACE_SPANS})
    store.read_texts(spans, project=project, trace_id=trace_id)
    run = runs[0]
    return RunDetail(
        run=RunSummary(**run, feedback_score=_mean_score(feedback))
        if (feedback := _feedback(store, params))
        else RunSummary(**run),
        spans=with_engine_facts(
            flag_broken_parents(_SPANS.validate_python(fold_engine_figures(spans)))
        ),  # one call into pydantic-core: 10k spans must load fast
        feedback=feedback,
        agent_median_cost_usd=_agent_median(store, project, run),
    )


_ENGINE_TIMINGS = ("ttft_s", "tpot_s", "queue_s", "prefill_s", "decode_s")


def with_engine_facts(spans: list[SpanOut]) -> list[SpanOut]:
    """Client LLM spans show the timings of the engine span under them where they lack their own
    (an engine span that arrived after its client span was stored: ``collector.ingest.engine_join``)."""
    by_id = {s.span_id: s for s in spans}
    for engine in spans:
        client = by_id.get(engine.parent_span_id) if engine.kind == "engine" else None
        if client is None or client.kind != "llm":
            continue
        for name in _ENGINE_TIMINGS:
            if getattr(client, name) is None and getattr(engine, name) is not None:
                setattr(client, name, getattr(engine, name))
                if name == "ttft_s":
                    client.attributes["agentwatch.ttft.source"] = "engine"
    return spans


def flag_broken_parents(spans: list[SpanOut]) -> list[SpanOut]:
    """Mark spans whose parent is not in the trace, and spans on a parent cycle."""
    parent_of = {s.span_id: s.parent_span_id for s in spans}
    state: dict[str, int] = {}  # 1: on the current path, 2: resolved, not on a cycle, 3: on a cycle
    for span in spans:
        if span.parent_span_id and span.parent_span_id not in parent_of:
            span.parent_missing = True
        path: list[str] = []
        node = span.span_id
        while node in parent_of and node not in state:
            state[node] = 1
            path.append(node)
            node = parent_of[node]
        cycle = set(path[path.index(node) :]) if state.get(node) == 1 else set()
        for visited in path:
            state[visited] = 3 if visited in cycle else 2
    for span in spans:
        span.in_cycle = state.get(span.span_id) == 3
    return spans


def valid_trace_id(trace_id: str) -> str:
    trace_id = trace_id.lower()
    if not TRACE_ID.match(trace_id):
        raise InvalidQuery(f"trace_id must be 32 hex characters, got {trace_id[:64]!r}")
    return trace_id


def _feedback(store: Store, params: dict[str, Any]) -> list[FeedbackOut]:
    return [FeedbackOut(**r) for r in store.query(feedback_sql.FEEDBACK_OF_TRACE, params)]


def _mean_score(feedback: list[FeedbackOut]) -> float | None:
    scores = [f.score for f in feedback if f.score is not None]
    return sum(scores) / len(scores) if scores else None


def _agent_median(store: Store, project: str, run: dict[str, Any], *, days: int = 7) -> float | None:
    """Median run cost of the same agent over the week before this run: context for its cost."""
    if not run["agent"]:
        return None
    end = run["start_time"] + 1
    start_ns, end_ns = int((end - days * 86_400) * 1e9), int(end * 1e9)
    params = {"project": project, "agent": run["agent"], "start_ns": start_ns, "end_ns": end_ns}
    params |= closed_minute_params(store, params | {"step_ns": end_ns - start_ns})
    sql = runs_sql.AGENT_MEDIAN_COST_CLOSED if "exact_minutes" in params else runs_sql.AGENT_MEDIAN_COST
    return float_or_none(store.query(sql, params)[0]["median"])


def filters(store: Store, project: str, *, start: float, end: float) -> FilterValues:
    start_ns, end_ns = range_ns(start, end)
    return FilterValues(
        **store.query(metrics_sql.FILTER_VALUES, {"project": project, "start_ns": start_ns, "end_ns": end_ns})[0],
        project=project,
    )
