"""Runs as a table (``tables.table``): one row per run, every figure formatted as the cards show
it, a click on a row (or its link) opens the run. Used by the Runs, Cost and Alerts pages."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import streamlit as st

from agentwatch_api.schemas import RunSummary
from agentwatch_platform.dashboard import live, tables, ui


@dataclass(frozen=True)
class RunField:
    """A run's column: its label, how a run's value reads, the query API's sort field (None: the
    API cannot sort on it) and whether it is a number (right-aligned)."""

    label: str
    text: Callable[[RunSummary], str]
    sort: str | None
    numeric: bool = False


def _time(t: float) -> str:
    return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def _count(n: int | float) -> str:
    return f"{n:,}" if isinstance(n, int) else ui.fmt(n, "")


FIELDS: dict[str, RunField] = {
    "time": RunField("time (UTC)", lambda r: _time(r.start_time), "start_time"),
    "agent": RunField("agent", lambda r: r.agent or r.name, "agent"),
    "name": RunField("run name", lambda r: r.name, "name"),
    "status": RunField("status", lambda r: r.status, "status"),
    "outcome": RunField("outcome", lambda r: r.outcome or ui.BLANK, "outcome"),
    "duration": RunField("duration", lambda r: ui.fmt(r.duration_s, "s"), "duration_s", True),
    "steps": RunField("steps", lambda r: _count(r.steps), "steps", True),
    "llm_calls": RunField("LLM calls", lambda r: _count(r.llm_calls), "llm_calls", True),
    "tool_calls": RunField("tool calls", lambda r: _count(r.tool_calls), "tool_calls", True),
    "tool_failures": RunField("tool failures", lambda r: _count(r.tool_failures), "tool_failures", True),
    "tokens": RunField("tokens", lambda r: _count(r.total_tokens), "total_tokens", True),
    "cost": RunField("cost", lambda r: ui.fmt(r.cost_usd, "USD"), "cost_usd", True),
    "input_tokens": RunField("input tokens", lambda r: _count(r.input_tokens), "input_tokens", True),
    "output_tokens": RunField("output tokens", lambda r: _count(r.output_tokens), "output_tokens", True),
    "cached_tokens": RunField("cached tokens", lambda r: _count(r.cached_tokens), "cached_tokens", True),
    "budget_stop": RunField("budget stop", lambda r: r.budget_exceeded, "budget_exceeded"),
    "models": RunField("models", lambda r: ", ".join(r.models), "models"),
    "feedback": RunField("feedback score", lambda r: ui.fmt(r.feedback_score, ""), "feedback_score", True),
    "user": RunField("user", lambda r: r.user_id, "user_id"),
    "session": RunField("session", lambda r: r.session_id, "session_id"),
    "version": RunField("version", lambda r: r.version, "version"),
    "trace_id": RunField("trace id", lambda r: r.trace_id, "trace_id"),
}
SORT_FIELDS = {f.sort: key for key, f in FIELDS.items() if f.sort}  # API sort field -> column

_MARKS: dict[str, Callable[[RunSummary], str | None]] = {
    "status": lambda r: "good" if r.status == "ok" else ("dim" if live.is_unfinished(r) else "bad"),
    "outcome": lambda r: {"success": "good", "failure": "bad"}.get(r.outcome),
    "tool_failures": lambda r: "bad" if r.tool_failures else None,
    "budget_stop": lambda r: "bad" if r.budget_exceeded else None,
}


def run_href(trace_id: str) -> str:
    return f"./run?run={trace_id}"


def run_row(run: RunSummary, columns: Sequence[str]) -> tables.Row:
    marks = {c: mark for c in columns if c in _MARKS and (mark := _MARKS[c](run))}
    return tables.Row(
        id=run.trace_id, cells=[FIELDS[c].text(run) for c in columns], href=run_href(run.trace_id), marks=marks
    )


def runs_table(
    runs: Sequence[RunSummary],
    *,
    key: str,
    columns: Sequence[str],
    hidden: Sequence[str] = (),
    sort: tuple[str, bool] | None = None,
    sortable: bool = False,
    chooser: bool = False,
    pager: tuple[int, int] | None = None,
) -> tables.TableEvent:
    """The runs, one row each, ``columns`` from ``FIELDS`` in that order; a click on a row opens
    the run (in this session: no page load). ``sort`` is (API sort field, descending) as applied."""
    event = tables.table(
        [
            tables.Column(c, FIELDS[c].label, numeric=FIELDS[c].numeric, sortable=sortable and bool(FIELDS[c].sort))
            for c in columns
        ],
        [run_row(r, columns) for r in runs],
        key=key,
        clickable=True,
        sort=(SORT_FIELDS[sort[0]], sort[1]) if sort and sort[0] in SORT_FIELDS else None,
        chooser=chooser,
        hidden=hidden,
        pager=pager,
    )
    open_run(event.opened)
    return event


def open_run(trace_id: str | None) -> None:
    """A run clicked in a table opens its detail page."""
    if trace_id:
        st.switch_page("views/run_detail.py", query_params={"run": trace_id})


# --- the runs page's pinned table of running runs ---------------------------------------------

RUNNING_COLUMNS = ["time", "agent", "elapsed", "steps", "llm_calls", "tool_calls", "tokens", "cost", "last", "user"]


def running_fields(now: float) -> dict[str, RunField]:
    return FIELDS | {
        "elapsed": RunField("elapsed", lambda r: ui.fmt(live.elapsed_s(r, now), "s"), None, True),
        "last": RunField("last activity", lambda r: f"{max(now - r.end_time, 0.0):.0f} s ago", None, True),
    }


def running_rows(runs: Sequence[RunSummary], now: float) -> list[tables.Row]:
    """Running runs, oldest first: their figures so far, how long they have run and when they
    were last heard from."""
    fields = running_fields(now)
    return [
        tables.Row(id=r.trace_id, cells=[fields[c].text(r) for c in RUNNING_COLUMNS], href=run_href(r.trace_id))
        for r in sorted(runs, key=lambda r: r.start_time)
    ]


def running_table(runs: Sequence[RunSummary], now: float | None = None, *, key: str) -> tables.TableEvent:
    now = time.time() if now is None else now
    fields = running_fields(now)
    event = tables.table(
        [tables.Column(c, fields[c].label, numeric=fields[c].numeric) for c in RUNNING_COLUMNS],
        running_rows(runs, now),
        key=key,
        clickable=True,
    )
    open_run(event.opened)
    return event
