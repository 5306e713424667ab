"""Run detail: a trace explorer (span tree with each span's bar on the run's timeline; a click opens the span panel with
every attribute and event, the error in full, tokens, cost, TTFT/TPOT, engine queue/prefill/
decode and the captured prompt and completion as chat messages), then per-step figures named
by their steps, context growth, engine share, the run graph and the content.

Deep links: ``/run?run=<trace id>&span=<span id>&view=steps`` opens that run on that view with
that span's panel open (``?trace_id=`` still works); an alert's ``/run?costliest=1&start=&end=&agent=``
opens the most expensive run of its window and scope. A run can hold 10,000 spans: the tree (``dashboard.tables``, plain
HTML) draws ``TREE_CHUNK`` rows at a time, the next as it scrolls.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import pandas as pd
import streamlit as st
from agentwatch import semconv as sc

from agentwatch_api.client import CollectorClient as Api
from agentwatch_api.schemas import RunDetail, RunSummary, SpanOut
from agentwatch_platform.dashboard import analysis, cards, live, run_charts, tables, trace, ui
from agentwatch_platform.dashboard.svg_charts import ERROR_COLOUR

TREE_CHUNK = 300  # tree rows drawn at a time: more come as the tree scrolls (a run can hold 10,000 spans)
MAX_CONTENT = 50
MAX_MESSAGE_CHARS = 20_000
MAX_TABLE_ATTRIBUTES = 200
ALL_DEPTHS = "all"
FACTS_PER_ROW = 2  # the span panel is two fifths of the page: three cards a row cut "$0.000049" at 1600 px


def render() -> None:
    st.title("Run detail")
    params = st.query_params
    wanted = (params.get("trace_id") or params.get("run") or "").strip().lower()
    if not wanted and params.get("costliest"):
        wanted = _costliest_run()
    # The trace id box only where no run is given: one more kind of widget on every run's load cost
    # ~0.1 s in headless Chromium (bench.dashboard_ab); the Runs page's search opens a pasted trace id.
    trace_id = wanted or (
        st.text_input("Trace id", placeholder="32 hex characters; or pick a run on the Runs page").strip().lower()
    )
    if not trace_id:
        ui.empty("Pick a run on the Runs page (click it) or paste its trace id.", "No runs yet? " + ui.DEMO_HINT)
        return
    if trace_id != wanted:  # another run typed in: its own span, not the last run's
        params.pop("span", None)
    params.pop("trace_id", None)
    params["run"] = trace_id
    with ui.guarded(f"run {trace_id}"):
        detail: RunDetail = ui.fetch(Api.run, trace_id=trace_id)
        running = detail.run.status == "running"
        every = ui.refresh_every("run_live", "run_live_s", on=True, label="Live: this running run") if running else None
        st.fragment(_run, run_every=every)(trace_id, running)


SCOPE_FILTERS = {"agent": "agent", "model": "model", "user": "user_id", "session": "session_id"}


def _costliest_run() -> str:
    """An alert's link (``?costliest=1&start=&end=&agent=...``, ``alerts.evaluator``): the most
    expensive run of the incident's window and scope, found when the link is opened; its trace
    id, or "" (said why) when the window holds no run."""
    params = st.query_params
    try:
        start, end = float(params.get("start", "")), float(params.get("end", ""))
    except ValueError:
        st.warning("This link names no time window (start and end): pick a run on the Runs page.")
        return ""
    filters: dict[str, Any] = {api: params[key] for key, api in SCOPE_FILTERS.items() if params.get(key)}
    with ui.guarded("the incident's runs"):
        page = ui.fetch(Api.runs, start=start, end=end, limit=1, sort="-cost_usd", **filters)
        if page.items:
            for key in ("costliest", "start", "end", *SCOPE_FILTERS):
                params.pop(key, None)
            scope = ", ".join(f"{k} {v}" for k, v in filters.items()) or "the whole project"
            st.caption(
                f"The most expensive of {ui.plural(page.total, 'run')} of the alert's window "
                f"({ui.fmt_time(start)} to {ui.fmt_time(end)}, {scope})."
            )
            return page.items[0].trace_id
        st.info(f"No run in the alert's window ({ui.fmt_time(start)} to {ui.fmt_time(end)}) yet.")
    return ""


def _run(trace_id: str, was_running: bool) -> None:
    """The run, redrawn on its own every few seconds while it runs (the waterfall grows); the
    whole page once more when it has finished (the live switch goes)."""
    with ui.guarded(f"run {trace_id}"):
        detail: RunDetail = ui.fetch(Api.run, trace_id=trace_id)
        if was_running and detail.run.status != "running":
            st.rerun(scope="app")
        _summary(detail)
        _views(detail)


def _people(run: RunSummary) -> None:
    """Links to the run's user, session and version (their pages) and to the comparison."""
    links = []
    if run.user_id:
        links.append(f"[user {ui.plain(run.user_id)}](./users?user={quote(run.user_id)})")
    if run.session_id:
        links.append(f"[session {ui.plain(run.session_id)}](./sessions?session={quote(run.session_id)})")
    if run.version:
        links.append(f"[version {ui.plain(run.version)}](./versions)")
    links.append(f"[compare with another run](./compare?a={run.trace_id})")
    st.markdown(" · ".join(links))


def _degraded(detail: RunDetail) -> bool:
    """A degradation lever acted in the run (its root span says so)."""
    return any(s.kind == "run" and s.attributes.get(sc.AW_RUN_DEGRADED) == "true" for s in detail.spans)


def _summary(detail: RunDetail) -> None:
    run = detail.run
    st.subheader(
        f"{run.agent or run.name} · {run.status}"
        + (f" · outcome {run.outcome}" if run.outcome else "")
        + (f" · stopped by budget ({run.budget_exceeded})" if run.budget_exceeded else "")
        + (" · degraded" if _degraded(detail) else "")
    )
    if run.outcome == sc.OUTCOME_REFUSED:
        st.caption("Refused before any work (a rate limit or a budget): not counted as a run in any figure.")
    now = time.time()
    _unfinished_banner(run, now)
    median = detail.agent_median_cost_usd
    change = (run.cost_usd - median) / median if median else None
    elapsed = run.status == "running"
    st.html(
        cards.cards_html(
            [
                cards.Card(
                    "Elapsed" if elapsed else "Duration",
                    ui.fmt(live.elapsed_s(run, now) if elapsed else run.duration_s, "s"),
                    help="Since the run's first span; it has not ended." if elapsed else None,
                ),
                cards.Card("Steps", str(run.steps)),
                cards.Card("LLM calls", str(run.llm_calls)),
                cards.Card("Tool calls (failed)", f"{run.tool_calls} ({run.tool_failures})"),
                cards.Card(
                    "Tokens",
                    ui.fmt(run.total_tokens, ""),  # 1.67B, not "1,669,50…": the exact counts are in its help
                    help=f"{run.input_tokens:,} input ({run.cached_tokens:,} cached), {run.output_tokens:,} output",
                ),
                cards.Card(
                    "Cost (USD)",
                    ui.fmt(run.cost_usd, "USD"),
                    None if change is None else f"{change * 100:+.0f} % vs median",
                    rise_is_good=False,
                    help=f"The median run of this agent costs {ui.fmt(median, 'USD')}.",
                ),
            ]
        )
    )
    st.caption(
        f"Trace {run.trace_id} · tokens: {run.input_tokens:,} input ({run.cached_tokens:,} cached), {run.output_tokens:,} output · agent median cost {ui.fmt(median, 'USD')} · models {', '.join(run.models) or '–'}"
    )
    _people(run)
    if detail.feedback:
        st.dataframe(pd.DataFrame([f.model_dump() for f in detail.feedback]), hide_index=True)


def _unfinished_banner(run: RunSummary, now: float) -> None:
    if run.status == "running":
        st.badge("running", icon=":material/play_circle:", color="green")
        st.info(
            f"Running: started {ui.fmt(live.elapsed_s(run, now), 's')} ago, last span {ui.fmt(max(now - run.end_time, 0.0), 's')} ago. "
            "Figures are so far; spans not ended yet (the run itself, its current step) are drawn open to now, "
            f"marked {trace.OPEN_MARK}, and the page refreshes while the sidebar's Live switch is on.",
            icon=":material/autorenew:",
        )
    elif run.status == "incomplete":
        st.badge("incomplete", icon=":material/error:", color="orange")
        st.warning(
            f"Incomplete: its root span never arrived and nothing came for longer than the collector's idle timeout "
            f"(last span at {ui.fmt_time(run.end_time)}): the agent's process most likely crashed or was killed. "
            f"Its spans and cost are counted; spans that never ended are drawn open to the last activity, marked {trace.OPEN_MARK}.",
            icon=":material/warning:",
        )


VIEWS = ("Trace", "Steps", "Context growth", "Engine", "Graph", "Content", "Spans")


def _slug(view: str) -> str:
    return view.lower().replace(" ", "-")


def _view_from_url() -> None:
    """The view the URL names (``view=steps``): a reload or a shared link opens where it was."""
    wanted = st.query_params.get("view", "")
    found = next((v for v in VIEWS if _slug(v) == wanted), VIEWS[0])
    if st.session_state.get("run_view") != found:
        st.session_state["run_view"] = found


def _view_to_url() -> None:
    """The view chosen, into the URL (before the page reruns, so ``_view_from_url`` agrees); Trace, the default, is left out."""
    view = st.session_state.get("run_view", VIEWS[0])
    if view == VIEWS[0]:
        st.query_params.pop("view", None)
    else:
        st.query_params["view"] = _slug(view)


def _views(detail: RunDetail) -> None:
    """One view at a time: only what is shown is computed, which keeps 10,000-span runs quick."""
    spans = detail.spans
    if not spans:
        st.info("This run has no spans stored yet (they may still be in the collector's queue).")
        return
    _view_from_url()
    view = st.radio(
        "View", VIEWS, horizontal=True, key="run_view", label_visibility="collapsed", on_change=_view_to_url
    )
    if view == "Trace":
        _explorer(detail)
    elif view == "Steps":
        _steps(spans)
    elif view == "Context growth":
        _growth(spans)
    elif view == "Engine":
        _engine(spans)
    elif view == "Graph":
        st.altair_chart(run_charts.unchecked(run_charts.graph_chart(analysis.run_graph(spans))), key="graph")
    elif view == "Content":
        _content(spans)
    else:
        _spans_table(spans)


# --- the trace explorer ----------------------------------------------------------------------

# The columns a span is picked by come first, so that they show in the tree's pane without scrolling
# (1600 px wide window): status, cost, duration, start and step; then its bar on the run's timeline,
# then the details (model and tokens, tool, the whole error), which may run past the pane's edge.
TREE_COLUMNS = [
    tables.Column("span", "span"),
    tables.Column("status", "status"),
    tables.Column("cost", "cost", numeric=True, help="USD; a step or the run: everything under it"),
    tables.Column("duration", "duration", numeric=True),
    tables.Column("start", "start", numeric=True, help="Seconds after the run's first span"),
    tables.Column("step", "step"),
    tables.Column("timeline", "timeline", timeline=True, help="Each span on the run's timeline: hover for its times"),
    tables.Column("detail", "detail"),
]
TREE_SORTS = {"Start": "start", "Cost": "cost", "Duration": "duration"}
TREE_KINDS = ("run", "step", "llm", "tool", "retrieval", "engine", "other")


def _explorer(detail: RunDetail) -> None:
    """The span tree with each span's bar on the run's timeline (a waterfall, as Jaeger and
    Phoenix draw one), beside the selected span's panel; a click on a row selects its span. The
    selection lives in the URL (``span=``), so it can be shared. An unfinished run's open spans
    are drawn too (``dashboard.live``). The tree takes three fifths of the width: its deciding
    columns (status, cost, duration, start, step) show without scrolling."""
    spans = live.with_open_spans(detail.run, detail.spans, time.time())
    tree_col, panel_col = st.columns([3, 2], gap="medium")
    shape = (ui.viewer(), len(spans), max(s.end_time for s in spans), detail.run.status)
    with tree_col:
        view = _tree_controls(spans)
        key = (
            f"tree-{detail.run.trace_id}-{view.sort}-{view.depth}-{'.'.join(sorted(view.kinds or ()))}-{view.failures}"
        )
        folded = _folded(detail.run.trace_id, tables.clicked(key, "fold"))
        if picked := tables.clicked(key, "open"):
            st.query_params["span"] = picked
        items, rows = _tree(detail.run.trace_id, shape, view, folded, spans)
        st.caption(
            f"{len(items):,} of {ui.plural(len(spans), 'span')} · click a span to inspect it, "
            f"{trace.UNFOLDED} / {trace.FOLDED} to fold what is under it; its bar is its time on the run's timeline"
        )
        tables.table(
            TREE_COLUMNS,
            rows,
            key=key,
            clickable=True,
            selected=st.query_params.get("span"),
            max_height=640,
            chunk=TREE_CHUNK,
            folds=True,
        )
    with panel_col:
        chosen = trace.find(spans, st.query_params.get("span", ""))
        if chosen is None:
            _no_span_chosen(spans)
        else:
            _span_panel(chosen, spans)


@dataclass(frozen=True)
class TreeView:
    """What the tree's controls ask for (``trace.tree``'s arguments)."""

    sort: str = "start"
    kinds: frozenset[str] | None = None  # None: every kind
    failures: bool = False
    depth: int | None = None


def _tree_controls(spans: list[SpanOut]) -> TreeView:
    """Order, kinds, failures only and depth: the ways to find a span in a large tree."""
    _tree_from_url()
    c = st.columns([4, 3, 3], vertical_alignment="bottom")
    sort = c[0].segmented_control(
        "Order",
        list(TREE_SORTS),
        default="Start",
        key="tree_sort",
        help="Siblings by start time, or costliest (a step by everything under it) or longest first.",
        on_change=_tree_to_url,
    )
    failures = c[1].toggle("Failures only", value=False, key="tree_failures", on_change=_tree_to_url)
    depth = c[2].selectbox(
        "Expand to depth",
        [ALL_DEPTHS, "1", "2", "3", "4"],
        key="tree_depth",
        help="Fold the tree below this depth (1: the run's direct children); a fold mark opens one span.",
    )
    present = [k for k in TREE_KINDS if any(s.kind == k for s in spans)]
    kinds = st.pills("Kinds", present, default=present, selection_mode="multi", key="tree_kinds")
    return TreeView(
        sort=TREE_SORTS.get(sort or "Start", "start"),
        kinds=None if set(kinds or ()) >= set(present) else frozenset(kinds or ()),
        failures=bool(failures),
        depth=None if depth in (None, ALL_DEPTHS) else int(depth),
    )


def _tree_from_url() -> None:
    """A link's tree order and failure filter (``order=cost``, ``failures=1``), set before the widgets."""
    order = st.query_params.get("order", "start")
    st.session_state["tree_sort"] = next((label for label, o in TREE_SORTS.items() if o == order), "Start")
    st.session_state["tree_failures"] = st.query_params.get("failures") == "1"


def _tree_to_url() -> None:
    """The tree's order and failure filter into the URL (before the rerun); the defaults leave it."""
    order = TREE_SORTS.get(st.session_state.get("tree_sort") or "Start", "start")
    for param, value in (
        ("order", "" if order == "start" else order),
        ("failures", "1" if st.session_state.get("tree_failures") else ""),
    ):
        if value:
            st.query_params[param] = value
        else:
            st.query_params.pop(param, None)


def _folded(trace_id: str, clicked: str | None) -> frozenset[str]:
    """The spans of this run whose fold mark the reader clicked (``trace.tree``'s ``toggled``),
    kept for the session; a click flips one."""
    state = st.session_state.setdefault(f"tree_folds_{trace_id}", set())
    if clicked:
        state.symmetric_difference_update({clicked})
    return frozenset(state)


# The tree's rows are built once per run and shape (who asks, span count, last end, status) and shared by
# reruns and sessions, not rebuilt on each: about 0.3 s for a 10,000-span run on the 2-core machine. A running
# run's shape changes as it grows (its open spans end "now").
@st.cache_resource(ttl=60, max_entries=32, show_spinner=False)
def _tree(
    trace_id: str,
    shape: tuple[str, int, float, str],
    view: TreeView,
    folded: frozenset[str],
    _spans: list[SpanOut],
) -> tuple[list[trace.TreeItem], tables.Encoded]:
    """The tree cut to what the controls ask for, and its rows encoded for the browser."""
    items = trace.tree(
        _spans, sort=view.sort, kinds=view.kinds, failures=view.failures, depth=view.depth, toggled=folded
    )
    rows = trace.tree_rows(items, trace.step_names(_spans), _spans)
    return items, tables.encode([_tree_row(row) for row in rows])


def _tree_row(row: dict[str, Any]) -> tables.Row:
    failed = row["status"] in ("error", "timeout")
    colour = ERROR_COLOUR if failed else run_charts.KIND_COLOURS.get(row["kind"], run_charts.KIND_COLOURS["other"])
    if row["status"] == live.OPEN:
        colour += "80"  # pale: not ended
    start, duration = row["start_s"], row["duration_s"]
    took = ui.fmt(duration, "s")
    marks = {"status": "bad"} if failed else ({"status": "dim"} if row["status"] == live.OPEN else {})
    if not row["matched"]:
        marks["span"] = "dim"  # kept to show where a match sits, not a match itself
    return tables.Row(
        id=row["span_id"],
        cells=[
            row["span"],
            row["status"],
            ui.fmt(row["cost_usd"], "USD") if row["cost_usd"] else "",
            took,
            f"+{start:.3f} s",
            row["step"],
            f"+{start:.3f} s to +{start + duration:.3f} s ({took})",
            row["detail"],
        ],
        depth=row["depth"],
        marks=marks,
        titles={"detail": row["detail"]} if len(row["detail"]) > 60 else {},
        bars={"timeline": (row["offset"], row["share"], colour)},
        fold=row["collapsed"] if row["children"] else None,
    )


def _no_span_chosen(spans: list[SpanOut]) -> None:
    failed = [s for s in spans if analysis.is_failed(s) and s.kind != "run"]
    st.info(
        "Select a span in the tree to see its attributes, events, error, tokens, "
        "timings and captured messages."
        + (
            f" This run has {ui.plural(len(failed), 'failed span')} ({trace.FAILED_MARK}): the Failures only switch lists them."
            if failed
            else ""
        )
    )
    if st.query_params.get("span"):
        st.warning(f"Span {st.query_params['span']} is not part of this run.")


def _span_panel(span: SpanOut, spans: list[SpanOut]) -> None:
    names = trace.step_names(spans)
    st.subheader(f"{trace.icon(span)} {span.name}")
    t0 = min(s.start_time for s in spans)
    st.caption(
        f"{span.kind} · step {trace.step_label(span.step_index, names)} · +{span.start_time - t0:.3f} s · "
        f"span {span.span_id}"
        + (f" · parent {span.parent_span_id}" if span.parent_span_id else "")
        + (f" · {span.service}" if span.service else "")
    )
    if analysis.is_failed(span):
        st.error(
            f"**{span.error_type or ('timeout' if span.is_timeout else 'error')}**"
            + (" (timeout)" if span.is_timeout and span.error_type else "")
        )
        st.code(trace.error_text(span), language=None, wrap_lines=True)
    engine = trace.engine_child(spans, span)
    _facts(span, engine)
    if engine is not None:
        st.caption(
            f"Joined engine span {engine.name} ({engine.span_id}): queue {ui.fmt(engine.queue_s, 's')}, "
            f"prefill {ui.fmt(engine.prefill_s, 's')}, decode {ui.fmt(engine.decode_s, 's')}"
        )
    _text_note(span)
    _chat("Prompt", trace.messages(span.input_text, default_role="user"))
    _chat("Completion", trace.messages(span.output_text, default_role="assistant"))
    _attributes(span)
    _events(span)


def _facts(span: SpanOut, engine: SpanOut | None) -> None:
    details = [("Model", span.model), ("Finish", span.finish_reason), ("Tool", span.tool_name), ("Agent", span.agent)]
    shown = " · ".join(f"{label} **{value}**" for label, value in details if value)
    if span.tool_cache_hit:
        shown += " · served from the tool cache"
    if shown:
        st.markdown(shown)
    cards = trace.facts(span, engine)
    for row in range(0, len(cards), FACTS_PER_ROW):
        cols = st.columns(FACTS_PER_ROW)
        for col, (label, value, unit) in zip(cols, cards[row : row + FACTS_PER_ROW], strict=False):
            col.metric(label, _fact(value, unit))


def _fact(value: object, unit: str) -> str:
    if value is None:
        return "–"
    if unit == "" and isinstance(value, int):
        return f"{value:,}"
    return ui.fmt(float(value), unit)  # type: ignore[arg-type]


_AVATARS = {"tool": ":material/build:", "system": ":material/settings:", "developer": ":material/settings:"}


def _text_note(span: SpanOut) -> None:
    """Absence, removal and damage of the captured text, each said as what it is."""
    note = trace.text_note(span)
    if note is None:
        return
    if span.text_state == "damaged":
        st.warning(note)
    else:
        st.caption(note)


def _chat(title: str, messages: list[trace.Message]) -> None:
    if not messages:
        return
    st.markdown(f"**{title}** ({len(messages)} message{'s' if len(messages) != 1 else ''})")
    for message in messages:
        with st.chat_message(message.role, avatar=_AVATARS.get(message.role)):
            st.caption(message.role)
            if message.text:
                st.text(message.text[:MAX_MESSAGE_CHARS] + ("…" if len(message.text) > MAX_MESSAGE_CHARS else ""))
            for call in message.tool_calls:
                st.code(f"tool call: {call}", language=None, wrap_lines=True)


def _attributes(span: SpanOut) -> None:
    st.markdown("**Span fields** (as the collector read them)")
    st.table(pd.DataFrame(trace.fields(span), columns=["field", "value"]).set_index("field"))
    st.markdown(f"**Attributes** ({len(span.attributes)}, as sent, besides those read into the fields above)")
    if not span.attributes:
        st.caption("none")
        return
    frame = pd.DataFrame(sorted(span.attributes.items()), columns=["attribute", "value"]).set_index("attribute")
    if len(frame) <= MAX_TABLE_ATTRIBUTES:  # a plain table: every value whole, wrapped, findable with Ctrl-F
        st.table(frame)
    else:
        st.dataframe(
            frame,
            key=f"attrs-{span.span_id}",
            column_config={"value": st.column_config.TextColumn("value", width="large")},
        )


def _events(span: SpanOut) -> None:
    events = trace.parse_events(span.events, span.start_time)
    st.markdown(f"**Events** ({len(events)})")
    if not events:
        st.caption("none recorded")
        return
    for event in events:
        when = "" if event.offset_s is None else f" at +{event.offset_s:.3f} s"
        st.markdown(f"`{event.name}`{when}")
        rest = {k: v for k, v in event.attributes.items() if k != "exception.stacktrace"}
        if rest:
            st.code(json.dumps(rest, indent=2, ensure_ascii=False), language="json", wrap_lines=True)
        if "exception.stacktrace" in event.attributes:  # as the traceback it is, not one escaped line
            st.caption("exception.stacktrace")
            st.code(str(event.attributes["exception.stacktrace"]), language="python", wrap_lines=True)


# --- the other views -------------------------------------------------------------------------


STEP_COLUMNS = [
    tables.Column("step", "step"),
    tables.Column("llm", "LLM calls", numeric=True),
    tables.Column("tools", "tool calls", numeric=True),
    tables.Column("input", "input tokens", numeric=True),
    tables.Column("output", "output tokens", numeric=True),
    tables.Column("cost", "cost", numeric=True),
    tables.Column("ttft", "first TTFT", numeric=True, help="Time to first token of the step's first LLM call"),
    tables.Column("failures", "failures", numeric=True),
    tables.Column("models", "models"),
]
CALL_COLUMNS = [
    tables.Column("step", "step"),
    tables.Column("model", "model"),
    tables.Column("input", "input tokens", numeric=True),
    tables.Column("cached", "cached tokens", numeric=True),
    tables.Column("output", "output tokens", numeric=True),
    tables.Column("cost", "cost", numeric=True),
    tables.Column("ttft", "TTFT", numeric=True, help="Time to first token"),
    tables.Column("tpot", "TPOT", numeric=True, help="Time per output token"),
    tables.Column("duration", "duration", numeric=True),
    tables.Column("finish", "finish reason"),
    tables.Column("status", "status"),
]


def _steps(spans) -> None:
    """Per step, then per LLM call: plain tables (every value whole, in words and units)."""
    steps = analysis.step_rows(spans)
    if not steps:
        st.info("No LLM or tool calls in this run.")
        return
    names = trace.step_names(spans)
    tables.table(STEP_COLUMNS, [_step_row(row, names) for row in steps], key="steps_table")
    calls = analysis.client_llm_calls(spans)
    st.caption(ui.plural(len(calls), "LLM call"))
    tables.table(CALL_COLUMNS, [_call_row(c, names) for c in calls], key="calls_table", max_height=640)


def _step_row(row: dict[str, Any], names: dict[int, str]) -> tables.Row:
    step = int(row["step"])
    return tables.Row(
        id=str(step),
        cells=[
            trace.step_label(step, names),
            f"{row['llm_calls']:,}",
            f"{row['tool_calls']:,}",
            f"{row['input_tokens']:,}",
            f"{row['output_tokens']:,}",
            ui.fmt(row["cost_usd"], "USD"),
            ui.fmt(row["ttft_s"], "s"),
            f"{row['failures']:,}",
            str(row["models"]).replace(",", ", "),
        ],
        marks={"failures": "bad"} if row["failures"] else {},
    )


def _call_row(call: SpanOut, names: dict[int, str]) -> tables.Row:
    return tables.Row(
        id=call.span_id,
        cells=[
            trace.step_label(call.step_index, names),
            call.model,
            f"{call.input_tokens:,}",
            f"{call.cached_tokens:,}",
            f"{call.output_tokens:,}",
            ui.fmt(call.cost_usd, "USD"),
            ui.fmt(call.ttft_s, "s"),
            ui.fmt(call.tpot_s, "s"),
            ui.fmt(call.duration_s, "s"),
            call.finish_reason.replace("_", " ") or ui.BLANK,  # OpenAI's "tool_calls" as words
            trace.status_word(call),
        ],
        marks={"status": "bad"} if analysis.is_failed(call) else {},
    )


def _growth(spans) -> None:
    fit = analysis.context_growth(spans)
    if fit.chosen == "too few calls":
        st.info("Context growth needs at least three LLM calls.")
        return
    explain = (
        "the history is re-sent every step (ReAct-like): tokens grow with steps squared"
        if fit.chosen == "quadratic"
        else "the context stays bounded: tokens grow linearly with steps"
    )
    st.markdown(
        f"**Fitted growth: {fit.chosen}** — {explain}. Each call's input grows by **{fit.tokens_added_per_call:,.0f} tokens per call**."
    )
    st.altair_chart(run_charts.unchecked(run_charts.growth_chart(fit)), key="growth")


def _engine(spans) -> None:
    rows = analysis.engine_shares(spans)
    if not rows:
        st.info(
            "No engine spans in this run: start the engine with OTLP tracing pointed at the collector (vLLM `--otlp-traces-endpoint`, or the simulated engine) to see queue, prefill and decode time."
        )
        return
    frame = pd.DataFrame(rows)
    totals = frame[["queue_s", "prefill_s", "decode_s", "other_s"]].sum()
    share = totals / max(totals.sum(), 1e-9)
    st.markdown(
        " · ".join(f"{k.removesuffix('_s')}: **{v * 100:.0f} %**" for k, v in share.items())
        + " of the time in LLM calls"
    )
    st.altair_chart(run_charts.unchecked(run_charts.shares_chart(rows[:300])), key="shares")


def _content(spans) -> None:
    captured = [s for s in spans if s.input_text or s.output_text]
    damaged, removed = (sum(s.text_state == state for s in spans) for state in ("damaged", "removed"))
    if damaged:
        st.warning(
            f"Captured text of {ui.plural(damaged, 'span')} is unreadable (damaged): stored, but its file is gone, torn or corrupt."
        )
    if removed:
        st.caption(f"Captured text of {ui.plural(removed, 'span')} was removed by retention or a deletion.")
    if not captured and not (damaged or removed):
        st.info("No captured content: " + trace.TEXT_NOTES["not_captured"].removeprefix("Not captured: "))
        return
    if not captured:
        return
    st.caption(
        f"{ui.plural(len(captured), 'span')} with captured content"
        + (f"; the first {MAX_CONTENT} shown" if len(captured) > MAX_CONTENT else "")
    )
    names = trace.step_names(spans)
    for span in captured[:MAX_CONTENT]:
        with st.expander(
            f"{trace.icon(span)} {span.name} · {span.kind} · step {trace.step_label(span.step_index, names)}"
        ):
            _chat(
                "Prompt" if span.kind != "tool" else "Arguments",
                trace.messages(span.input_text, default_role="user" if span.kind != "tool" else "tool"),
            )
            _chat(
                "Completion" if span.kind != "tool" else "Result",
                trace.messages(span.output_text, default_role="assistant" if span.kind != "tool" else "tool"),
            )


SPAN_COLUMNS = [
    tables.Column("start", "start", numeric=True, help="Seconds after the run's first span"),
    tables.Column("duration", "duration", numeric=True),
    tables.Column("kind", "kind"),
    tables.Column("name", "name"),
    tables.Column("status", "status"),
    tables.Column("step", "step"),
    tables.Column("model", "model"),
    tables.Column("tool", "tool"),
    tables.Column("input", "input tokens", numeric=True),
    tables.Column("output", "output tokens", numeric=True),
    tables.Column("cost", "cost", numeric=True),
    tables.Column("error", "error"),
    tables.Column("span_id", "span id"),
]


def _spans_table(spans) -> None:
    """Every span by start time, a click opens it in the Trace view."""
    t0 = min(s.start_time for s in spans)
    names = trace.step_names(spans)
    key = "spans_table"
    if picked := tables.clicked(key, "open"):
        st.query_params["span"] = picked
        st.query_params.pop("view", None)  # the next run opens Trace (``_view_from_url``)
        st.rerun()
    rows = [
        tables.Row(
            id=s.span_id,
            cells=[
                f"+{s.start_time - t0:.3f} s",
                ui.fmt(s.duration_s, "s"),
                s.kind,
                s.name,
                trace.status_word(s),
                trace.step_label(s.step_index, names),
                s.model,
                s.tool_name,
                f"{s.input_tokens:,}" if s.input_tokens else "",
                f"{s.output_tokens:,}" if s.output_tokens else "",
                ui.fmt(s.cost_usd, "USD") if s.cost_usd else "",
                trace.error_text(s) if analysis.is_failed(s) else "",
                s.span_id,
            ],
            marks={"status": "bad", "error": "bad"} if analysis.is_failed(s) else {},
        )
        for s in sorted(spans, key=lambda s: s.start_time)
    ]
    st.caption(ui.plural(len(rows), "span") + " by start time · click one to open it in the Trace view")
    tables.table(SPAN_COLUMNS, rows, key=key, clickable=True, max_height=640, chunk=TREE_CHUNK)


render()
