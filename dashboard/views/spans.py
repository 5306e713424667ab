"""Spans: every span of the range across runs, filtered, grouped and listed (the span explorer).

"Which tool fails most?", "which error?", "whose calls cost most?": pick a grouping (tool, error
type, model, step kind, user, session, ..., or any attribute such as ``service.version``), read
each group's spans, failures, failure rate, latency and cost, and click a group to list its spans;
a span opens in its run (``run?run=<trace>&span=<span>``). Every filter, the grouping, the sort
and the page are applied by the collector in the store, over every span of the range. The
Overview's and Cost page's breakdowns link here with their filters in the address
(``spans?tool=fetch&failed=true``).
"""

from __future__ import annotations

from typing import Any

import streamlit as st
from agentwatch import semconv as sc

from agentwatch_api.client import CollectorClient as Api
from agentwatch_api.schemas import SpanGroups, SpanHit, SpansPage
from agentwatch_platform.dashboard import breakdowns, tables, ui
from agentwatch_platform.dashboard.formatting import plural

ANY = "any"
KINDS = [ANY, *sc.SPAN_KINDS, sc.KIND_ENGINE]
STATUSES = [ANY, "ok", "error", "timeout", "unset"]
ATTRIBUTE_LABEL = "Attribute…"
GROUPINGS = {label: key for key, (label, _) in breakdowns.GROUP_BY.items()} | {ATTRIBUTE_LABEL: breakdowns.ATTRIBUTE}
GROUP_SORTS = {  # label -> SpanGroup figure (descending)
    "Spans": "spans",
    "Failures": "failures",
    "Failure rate": "failure_rate",
    "Cost": "cost_usd",
    "Tokens": "total_tokens",
    "Latency p95": "duration_p95_s",
    "Runs": "runs",
}
SORTS = {"Start time": "start_time", "Duration": "duration_s", "Cost": "cost_usd", "Tokens": "total_tokens"}
TEXT = {  # state key -> (label, API filter, help)
    "spans_tool": ("Tool", "tool", "Exactly this tool name."),
    "spans_error_type": ("Error type", "error_type", "As the groups name it: TimeoutError, X (HTTP 503), or X."),
    "spans_name": ("Span name", "name", "Exactly this span name."),
    "spans_step": ("Step", "step", "A step of this name and the calls directly under it."),
    "spans_version": ("Version", "version", "The agent's version (service.version)."),
    "spans_user": ("User id", "user_id", "Spans of this user's runs."),
    "spans_session": ("Session id", "session_id", "Spans of this session's runs."),
    "spans_attribute": ("Attribute", "attribute", "key=value, e.g. service.version=1.1 or http.status_code=503."),
}
BOUNDS = {  # state key -> (label, API filter)
    "spans_min_duration": ("Min duration (s)", "min_duration_s"),
    "spans_max_duration": ("Max duration (s)", "max_duration_s"),
    "spans_min_cost": ("Min cost (USD)", "min_cost"),
    "spans_max_cost": ("Max cost (USD)", "max_cost"),
}
LINKED = {  # address parameter -> state key (the breakdowns' links, a group's link)
    "kind": "spans_kind",
    "status": "spans_status",
    "failed": "spans_failed",
    "search": "spans_search",
    **{api: key for key, (_, api, _) in TEXT.items()},
    **{api: key for key, (_, api) in BOUNDS.items()},
}
PAGE_SIZE = 50
MAX_OFFSET = 10_000


def render() -> None:
    st.title("Spans")
    _from_link()
    _group_from_click()
    _page_from_pager()
    filters = _filters()
    by = _grouping()
    win = ui.window()
    scope: dict[str, Any] = {"start": win.start, "end": win.end, **filters}
    with ui.guarded("the span groups"):
        _groups(
            ui.fetch(Api.span_groups, **scope, by=by, sort="-" + GROUP_SORTS[_group_sort()], limit=100), by, filters
        )
    with ui.guarded("the spans"):
        _spans(win, scope)


# --- filters -------------------------------------------------------------------------------------
def _from_link() -> None:
    """``spans?tool=fetch&failed=true&by=error_type`` (a breakdown's or a group's link) sets the
    filters and the grouping before the widgets are drawn; other filters start cleared."""
    params = st.query_params
    if not any(name in params for name in (*LINKED, "by")):  # agent, model, range: the sidebar's (ui.URL_FILTERS)
        return
    for key in (*TEXT, *BOUNDS, "spans_search"):
        st.session_state[key] = ""
    st.session_state["spans_kind"], st.session_state["spans_status"] = ANY, ANY
    st.session_state["spans_failed"] = False
    for name, key in LINKED.items():
        if (value := params.get(name)) is None:
            continue
        if key == "spans_failed":
            st.session_state[key] = value == "true"
        elif key in ("spans_kind", "spans_status"):
            st.session_state[key] = value if value in (KINDS if key == "spans_kind" else STATUSES) else ANY
        else:
            st.session_state[key] = value
    _set_grouping(params.get("by"))
    st.session_state["spans_page"] = 1
    for name in (*LINKED, "by"):
        params.pop(name, None)


def _set_grouping(by: str | None) -> None:
    if not by:
        return
    if by.startswith(f"{breakdowns.ATTRIBUTE}:"):
        st.session_state["spans_by"], st.session_state["spans_by_attribute"] = ATTRIBUTE_LABEL, by.split(":", 1)[1]
    elif by in breakdowns.GROUP_BY:
        st.session_state["spans_by"] = breakdowns.GROUP_BY[by][0]


def _filters() -> dict[str, Any]:
    """The query API's filters (``SpanQuery``) as the widgets set them."""
    ui.keep_state(dict.fromkeys((*TEXT, *BOUNDS), ""))
    c = st.columns([1, 1, 0.8, 2])
    kind = c[0].selectbox("Span kind", KINDS, key="spans_kind", help="run, step, LLM call, tool call, ...")
    status = c[1].selectbox("Status", STATUSES, key="spans_status", help="A timeout is its own status.")
    failed = c[2].toggle("Failed only", key="spans_failed", help="Spans that failed or timed out.")
    search = (
        c[3]
        .text_input(
            "Search", key="spans_search", placeholder="part of a span's name, tool, error message or captured text"
        )
        .strip()
    )
    filters: dict[str, object] = {
        "kind": None if kind == ANY else kind,
        "status": None if status == ANY else status,
        "failed": True if failed else None,
        "search": search or None,
        **ui.agent_model(),  # the sidebar's: a model keeps that model's LLM calls only
    }
    return {k: v for k, v in (filters | _more_filters()).items() if v is not None}


def _more_filters() -> dict[str, object]:
    """Tool, error type, name, step, version, user, session, attribute, duration and cost bounds: in an
    expander, listed under it when set so a closed one still says that it filters."""
    state = st.session_state
    with st.expander("More filters"):
        c = st.columns(4)
        for i, (key, (label, _, help_)) in enumerate(TEXT.items()):
            c[i % 4].text_input(label, key=key, help=help_)
        c = st.columns(4)
        for i, (key, (label, _)) in enumerate(BOUNDS.items()):
            c[i].text_input(label, key=key, placeholder="any")
    out: dict[str, object] = {}
    for key, (_, api, _) in TEXT.items():
        if value := str(state.get(key) or "").strip():
            out[api] = (value,) if api == "attribute" else value
    for key, (label, api) in BOUNDS.items():
        try:
            out[api] = ui.read_number(state.get(key))
        except ValueError:
            st.error(ui.number_typo(label, state.get(key)), icon=":material/error:")
    shown = [
        f"{TEXT[k][0] if k in TEXT else BOUNDS[k][0]} {str(state[k]).strip()}" for k in (*TEXT, *BOUNDS) if _typed(k)
    ]
    if shown:
        st.caption("More filters set: " + ui.plain(" · ".join(shown)))
    return {k: v for k, v in out.items() if v is not None}


def _typed(key: str) -> bool:
    return bool(str(st.session_state.get(key) or "").strip())


def _grouping() -> str:
    """The group-by key the API takes: a whitelisted name or ``attribute:<key>``."""
    c = st.columns([1, 1, 2])
    label = c[0].selectbox("Group by", list(GROUPINGS), key="spans_by")
    c[1].selectbox("Sort groups by", list(GROUP_SORTS), key="spans_group_sort")
    if GROUPINGS[label] != breakdowns.ATTRIBUTE:
        return GROUPINGS[label]
    key = (
        c[2]
        .text_input(
            "Attribute key",
            key="spans_by_attribute",
            placeholder="service.version",
            help="A span or resource attribute.",
        )
        .strip()
    )
    return f"{breakdowns.ATTRIBUTE}:{key or 'service.version'}"


def _group_sort() -> str:
    return str(st.session_state.get("spans_group_sort", "Spans"))


# --- groups --------------------------------------------------------------------------------------
GROUP_COLUMNS = [
    tables.Column("key", "Group"),
    tables.Column("spans", "Spans", numeric=True),
    tables.Column("failures", "Failures", numeric=True),
    tables.Column("failure_rate", "Failure rate", numeric=True),
    tables.Column("runs", "Runs", numeric=True),
    tables.Column("p50", "Latency p50", numeric=True),
    tables.Column("p95", "Latency p95", numeric=True),
    tables.Column("tokens", "Tokens", numeric=True),
    tables.Column("cost", "Cost", numeric=True),
]


def _groups(got: SpanGroups, by: str, filters: dict[str, object]) -> None:
    for warning in got.warnings:
        st.warning(warning)
    label = next((lbl for lbl, key in GROUPINGS.items() if key == by), by.replace("attribute:", "Attribute "))
    st.subheader(f"By {label.lower()}")
    if not got.groups:
        ui.empty("No spans match in this range.")
        return
    more = f", the first {len(got.groups)} shown" if got.total_groups > len(got.groups) else ""
    st.caption(
        f"{plural(got.total_groups, 'group')}{more}. Click a group to list its spans below (or open it in a new tab)."
    )
    rows = [
        tables.Row(
            id=f"g:{g.key}",
            cells=[
                (breakdowns.short_error(g.key) if by == "error_type" else g.key) or breakdowns.NONE,
                ui.fmt(g.spans, "count"),
                ui.fmt(g.failures, "count"),
                ui.fmt(g.failure_rate, "ratio"),
                ui.fmt(g.runs, "count"),
                ui.fmt(g.duration_p50_s, "s"),
                ui.fmt(g.duration_p95_s, "s"),
                ui.fmt(g.total_tokens, "count"),
                ui.fmt(g.cost_usd, "USD"),
            ],
            href=breakdowns.spans_href(**{**_link_filters(filters), **breakdowns.group_filter(by, g.key), "by": by}),
            marks={"failures": "bad"} if g.failures else {},
            titles={"key": g.key},
        )
        for g in got.groups
    ]
    st.session_state["spans_group_by"] = by
    tables.table(GROUP_COLUMNS, rows, key="spans_groups_table", clickable=True, max_height=420)


def _link_filters(filters: dict[str, object]) -> dict[str, object]:
    """The page's own filters as a link carries them (the sidebar's are added by ``spans_href``)."""
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in filters.items() if k not in ("agent", "model")}


def _group_from_click() -> None:
    """A click on a group sets its filter (tool, error type, user, ...) for the list below."""
    clicked = tables.clicked("spans_groups_table", "open")
    by = st.session_state.get("spans_group_by")
    if not clicked or not by or not clicked.startswith("g:"):
        return
    ((api, value),) = breakdowns.group_filter(by, clicked[2:]).items()
    if api in ui.URL_FILTERS and value:  # agent, model: the sidebar's filters, set from the address
        st.query_params[api] = value
        st.rerun()
    choices = {"spans_kind": KINDS, "spans_status": STATUSES}
    if (key := LINKED.get(api)) and value in choices.get(key, [value]):
        st.session_state[key] = value
        st.session_state["spans_page"] = 1


# --- the list ------------------------------------------------------------------------------------
SPAN_COLUMNS = [
    tables.Column("time", "Start"),
    tables.Column("kind", "Kind"),
    tables.Column("name", "Name"),
    tables.Column("what", "Tool / model"),
    tables.Column("status", "Status"),
    tables.Column("error", "Error"),
    tables.Column("duration", "Duration", numeric=True),
    tables.Column("tokens", "Tokens", numeric=True),
    tables.Column("cost", "Cost", numeric=True),
    tables.Column("agent", "Agent"),
    tables.Column("user", "User"),
    tables.Column("run", "Run"),
]


def _page_from_pager() -> None:
    if (wanted := tables.clicked("spans_table", "page")) and wanted.isdigit():
        st.session_state["spans_page"] = max(1, int(wanted))


def _spans(win: ui.Window, scope: dict[str, Any]) -> None:
    c = st.columns([1, 1, 4])
    sort = c[0].selectbox("Sort spans by", list(SORTS), key="spans_sort")
    descending = c[1].toggle("Descending", value=True, key="spans_desc")
    page_no = int(st.session_state.get("spans_page", 1))
    offset = min((page_no - 1) * PAGE_SIZE, MAX_OFFSET)
    page: SpansPage = ui.fetch(
        Api.spans, **scope, sort=("-" if descending else "") + SORTS[sort], limit=PAGE_SIZE, offset=offset
    )
    for warning in page.warnings:
        st.warning(warning)
    st.subheader(f"Spans: {page.total:,}")
    if not page.items:
        if page.total and offset:  # filters changed under a later page: back to the first
            st.session_state["spans_page"] = 1
            st.rerun()
        ui.empty(f"No spans match in the {win.label.lower()}.")
        return
    pages = max(1, -(-min(page.total, MAX_OFFSET + PAGE_SIZE) // PAGE_SIZE))
    deep = (
        f" Pages reach the first {MAX_OFFSET + PAGE_SIZE:,}: narrow the filters for the rest."
        if page.total > MAX_OFFSET
        else ""
    )
    st.caption(
        f"Spans {offset + 1:,}–{offset + len(page.items):,} of {page.total:,}. Click a span to open it in its run.{deep}"
    )
    event = tables.table(
        SPAN_COLUMNS,
        [_span_row(s) for s in page.items],
        key="spans_table",
        clickable=True,
        pager=(offset // PAGE_SIZE + 1, pages),
    )
    if event.opened and "/" in event.opened:
        trace, span = event.opened.split("/", 1)
        st.switch_page("views/run_detail.py", query_params={"run": trace, "span": span})


def _span_row(s: SpanHit) -> tables.Row:
    status = "timeout" if s.is_timeout else s.status
    return tables.Row(
        id=f"{s.trace_id}/{s.span_id}",
        cells=[
            ui.fmt_time(s.start_time).removesuffix(" UTC"),
            s.kind,
            s.name,
            s.tool or s.model or ui.BLANK,
            status,
            breakdowns.short_error(s.error_type) or ui.BLANK,
            ui.fmt(s.duration_s, "s"),
            ui.fmt(s.total_tokens, "count"),
            ui.fmt(s.cost_usd, "USD"),
            s.agent or ui.BLANK,
            s.user_id or ui.BLANK,
            s.run_name or s.trace_id[:12],
        ],
        href=f"./run?run={s.trace_id}&span={s.span_id}",
        marks={"status": "bad"} if status in ("error", "timeout") else ({"status": "good"} if status == "ok" else {}),
        titles={"error": f"{s.error_type}: {s.status_message}"} if s.error_type else {},
    )


render()
