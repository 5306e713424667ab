"""Run detail: waterfall, per-step figures, context growth, engine share, run graph, content.

A run can hold 10,000 spans: the waterfall draws at most ``MAX_DRAWN`` of them (failures,
steps and calls first) and the tables are plain data frames, so the page stays quick.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from collector.api.schemas import RunDetail
from dashboard import analysis, charts, ui

MAX_DRAWN = 1000
MAX_CONTENT = 50


def render() -> None:
    st.title("Run detail")
    trace_id = st.text_input("Trace id", value=st.query_params.get("trace_id", ""), placeholder="32 hex characters; or pick a run on the Runs page").strip().lower()
    if not trace_id:
        ui.empty("Pick a run on the Runs page (select a row) or paste its trace id.", "No runs yet? " + ui.DEMO_HINT)
        return
    st.query_params["trace_id"] = trace_id
    with ui.guarded(f"run {trace_id}"):
        detail: RunDetail = ui.fetch("run", trace_id=trace_id)
        _summary(detail)
        _views(detail)


def _summary(detail: RunDetail) -> None:
    run = detail.run
    st.subheader(f"{run.agent or run.name} · {run.status}" + (f" · outcome {run.outcome}" if run.outcome else "") + (f" · stopped by budget ({run.budget_exceeded})" if run.budget_exceeded else ""))
    c = st.columns(6)
    c[0].metric("Duration", ui.fmt(run.duration_s, "s"))
    c[1].metric("Steps", run.steps)
    c[2].metric("LLM calls", run.llm_calls)
    c[3].metric("Tool calls (failed)", f"{run.tool_calls} ({run.tool_failures})")
    c[4].metric("Tokens", f"{run.total_tokens:,}", help=f"{run.input_tokens:,} input ({run.cached_tokens:,} cached), {run.output_tokens:,} output")
    median = detail.agent_median_cost_usd
    change = (run.cost_usd - median) / median if median else None
    c[5].metric("Cost (USD)", ui.fmt(run.cost_usd, "USD"), delta=None if change is None else f"{change * 100:+.0f} % vs median", delta_color="inverse", help=f"The median run of this agent costs {ui.fmt(median, 'USD')}.")
    st.caption(f"Tokens: {run.input_tokens:,} input ({run.cached_tokens:,} cached), {run.output_tokens:,} output · agent median cost {ui.fmt(median, 'USD')} · models {', '.join(run.models) or '–'}")
    if detail.feedback:
        st.dataframe(pd.DataFrame([f.model_dump() for f in detail.feedback]), hide_index=True)


VIEWS = ("Waterfall", "Steps", "Context growth", "Engine", "Graph", "Content", "Spans")


def _views(detail: RunDetail) -> None:
    """One view at a time: only what is shown is computed, which keeps 10,000-span runs quick."""
    spans = detail.spans
    if not spans:
        st.info("This run has no spans stored yet (they may still be in the collector's queue).")
        return
    view = st.radio("View", VIEWS, horizontal=True, key="run_view", label_visibility="collapsed")
    if view == "Waterfall":
        st.plotly_chart(charts.waterfall_figure(analysis.spans_to_draw(spans, MAX_DRAWN), len(spans)), key="waterfall")
    elif view == "Steps":
        _steps(spans)
    elif view == "Context growth":
        _growth(spans)
    elif view == "Engine":
        _engine(spans)
    elif view == "Graph":
        st.plotly_chart(charts.graph_figure(analysis.run_graph(spans)), key="graph")
    elif view == "Content":
        _content(spans)
    else:
        st.dataframe(_spans_frame(spans), hide_index=True)


def _steps(spans) -> None:
    steps = analysis.step_rows(spans)
    if not steps:
        st.info("No LLM or tool calls in this run.")
        return
    st.dataframe(pd.DataFrame(steps), hide_index=True, column_config={
        "cost_usd": st.column_config.NumberColumn("cost (USD)", format="$%.5f"),
        "ttft_s": st.column_config.NumberColumn("TTFT (s)", format="%.3f s"),
    })
    calls = analysis.client_llm_calls(spans)
    st.caption(f"{len(calls)} LLM calls")
    st.dataframe(pd.DataFrame([{
        "step": c.step_index, "model": c.model, "input tokens": c.input_tokens, "output tokens": c.output_tokens,
        "cached tokens": c.cached_tokens, "cost_usd": c.cost_usd, "ttft_s": c.ttft_s, "tpot_s": c.tpot_s,
        "duration_s": c.duration_s, "finish": c.finish_reason, "status": c.status,
    } for c in calls]), hide_index=True, column_config={
        "cost_usd": st.column_config.NumberColumn("cost (USD)", format="$%.5f"),
        "ttft_s": st.column_config.NumberColumn("TTFT (s)", format="%.3f s"),
        "tpot_s": st.column_config.NumberColumn("TPOT (s)", format="%.4f s"),
        "duration_s": st.column_config.NumberColumn("duration (s)", format="%.2f s"),
    })


def _growth(spans) -> None:
    fit = analysis.context_growth(spans)
    if fit.chosen == "too few calls":
        st.info("Context growth needs at least three LLM calls.")
        return
    explain = "the history is re-sent every step (ReAct-like): tokens grow with steps squared" if fit.chosen == "quadratic" else "the context stays bounded: tokens grow linearly with steps"
    st.markdown(f"**Fitted growth: {fit.chosen}** — {explain}. Each call's input grows by **{fit.tokens_added_per_call:,.0f} tokens per call**.")
    st.plotly_chart(charts.growth_figure(fit), key="growth")


def _engine(spans) -> None:
    rows = analysis.engine_shares(spans)
    if not rows:
        st.info("No engine spans in this run: start the engine with OTLP tracing pointed at the collector (vLLM `--otlp-traces-endpoint`, or the simulated engine) to see queue, prefill and decode time.")
        return
    frame = pd.DataFrame(rows)
    totals = frame[["queue_s", "prefill_s", "decode_s", "other_s"]].sum()
    share = totals / max(totals.sum(), 1e-9)
    st.markdown(" · ".join(f"{k.removesuffix('_s')}: **{v * 100:.0f} %**" for k, v in share.items()) + " of the time in LLM calls")
    st.plotly_chart(charts.shares_figure(rows[:300]), key="shares")


def _content(spans) -> None:
    captured = [s for s in spans if s.input_text or s.output_text]
    if not captured:
        st.info("No captured content: prompt and completion capture is off by default (`agentwatch.init(capture_content=True)`).")
        return
    st.caption(f"{len(captured)} spans with captured content" + (f"; the first {MAX_CONTENT} shown" if len(captured) > MAX_CONTENT else ""))
    for span in captured[:MAX_CONTENT]:
        with st.expander(f"{span.kind} · {span.name} · step {span.step_index}"):
            if span.input_text:
                st.text_area("input", span.input_text, height=150, disabled=True, key=f"in-{span.span_id}")
            if span.output_text:
                st.text_area("output", span.output_text, height=150, disabled=True, key=f"out-{span.span_id}")


def _spans_frame(spans) -> pd.DataFrame:
    t0 = min(s.start_time for s in spans)
    return pd.DataFrame([{
        "offset_s": round(s.start_time - t0, 4), "duration_s": round(s.duration_s, 4), "kind": s.kind, "name": s.name,
        "status": s.status, "error": s.error_type or s.status_message, "timeout": s.is_timeout, "model": s.model, "tool": s.tool_name,
        "step": s.step_index, "input tokens": s.input_tokens, "output tokens": s.output_tokens, "cost_usd": s.cost_usd, "span_id": s.span_id,
    } for s in sorted(spans, key=lambda s: s.start_time)])


render()
