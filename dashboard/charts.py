"""Plotly figures for the pages; each takes plain data and returns a figure with labelled units."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import plotly.graph_objects as go
from agentwatch import semconv as sc

from agentwatch_api.schemas import SpanOut
from dashboard.analysis import GrowthFit, RunGraph, is_engine_span, is_failed
from dashboard.live import OPEN

KIND_COLOURS = {
    sc.KIND_RUN: "#6c757d",
    sc.KIND_STEP: "#9b8afb",
    sc.KIND_LLM: "#1f77b4",
    sc.KIND_TOOL: "#2ca02c",
    sc.KIND_RETRIEVAL: "#17becf",
    sc.KIND_OTHER: "#bcbd22",
    sc.KIND_ENGINE: "#ff7f0e",  # the engine's own spans (queue, prefill, decode) under an LLM call
}
ERROR_COLOUR = "#d62728"
_LAYOUT = {"margin": {"l": 10, "r": 30, "t": 40, "b": 10}, "legend": {"orientation": "h", "y": -0.2}, "modebar": {"orientation": "v"}}


def waterfall_figure(items: Sequence[tuple[SpanOut, int]], total_spans: int) -> go.Figure:
    """Span bars on a shared time axis (seconds from the run's start), one bar trace per kind."""
    t0 = min((s.start_time for s, _ in items), default=0.0)
    labels = [f"{i:>5} {'· ' * min(d, 12)}{s.name}" for i, (s, d) in enumerate(items)]
    fig = go.Figure()
    kinds = [draw_kind(s) for s, _ in items]
    for kind in KIND_COLOURS:
        rows = [(lab, s) for lab, (s, _), k in zip(labels, items, kinds, strict=True) if k == kind]
        if rows:
            fig.add_trace(_kind_bars(kind, rows, t0))
    failed = [(lab, s) for lab, (s, _) in zip(labels, items, strict=True) if is_failed(s)]
    if failed:
        fig.add_trace(go.Scatter(
            x=[s.end_time - t0 for _, s in failed], y=[lab for lab, _ in failed], mode="markers", name="error / timeout",
            marker={"symbol": "x", "size": 10, "color": ERROR_COLOUR},
            hovertext=[f"{s.error_type or ('timeout' if s.is_timeout else 'error')}: {s.status_message}"[:200] for _, s in failed],
            customdata=[s.span_id for _, s in failed],
        ))
    shown = f" (the {len(items)} most telling of {total_spans})" if len(items) < total_spans else ""
    fig.update_layout(title=f"Waterfall: {len(items)} spans{shown}", barmode="overlay", height=min(2000, 120 + 18 * len(items)), **_LAYOUT)
    fig.update_yaxes(autorange="reversed", categoryorder="array", categoryarray=labels, showticklabels=len(items) <= 150, tickfont={"family": "monospace", "size": 10})
    fig.update_xaxes(title="seconds since the run started")
    return fig


def draw_kind(span: SpanOut) -> str:
    if is_engine_span(span):
        return "engine"
    return span.kind if span.kind in KIND_COLOURS else sc.KIND_OTHER


def _kind_bars(kind: str, rows: list[tuple[str, SpanOut]], t0: float) -> go.Bar:
    """A kind's bars; a span not ended yet (``live.OPEN``) is hatched, drawn to now."""
    return go.Bar(
        y=[lab for lab, _ in rows], x=[max(s.duration_s, 1e-4) for _, s in rows], base=[s.start_time - t0 for _, s in rows],
        orientation="h", name=kind, marker={"color": KIND_COLOURS[kind], "line": {"color": [ERROR_COLOUR if is_failed(s) else KIND_COLOURS[kind] for _, s in rows], "width": 2},
                                            "pattern": {"shape": ["/" if s.status == OPEN else "" for _, s in rows]}},
        hovertext=[f"{s.name} · " + ("not ended: open" if s.status == OPEN else f"{s.duration_s * 1000:.0f} ms · {s.status}") + (f" · {s.model}" if s.model else "") for _, s in rows], hoverinfo="text",
        customdata=[s.span_id for _, s in rows],  # a click selects the span (run detail's span panel)
    )


def growth_figure(fit: GrowthFit) -> go.Figure:
    """Input tokens per call (bars) and the run's cumulative input with the chosen fit (lines)."""
    fig = go.Figure()
    steps = [f"step {s}" for s in fit.steps]
    fig.add_trace(go.Bar(x=fit.calls, y=fit.input_tokens, name="input tokens of the call", marker_color=KIND_COLOURS[sc.KIND_LLM], hovertext=steps))
    fig.add_trace(go.Scatter(x=fit.calls, y=fit.cumulative, name="cumulative input tokens", mode="markers", yaxis="y2", hovertext=steps))
    if fit.fitted:
        fig.add_trace(go.Scatter(x=fit.calls, y=fit.fitted, name=f"{fit.chosen} fit", mode="lines", line={"dash": "dash"}, yaxis="y2"))
    fig.update_layout(
        title=f"Context growth: {fit.chosen}", height=340, xaxis_title="LLM call, in order (its step index on hover)",
        yaxis={"title": "input tokens per call", "rangemode": "nonnegative"},
        yaxis2={"title": "cumulative input tokens", "overlaying": "y", "side": "right", "rangemode": "nonnegative"}, **_LAYOUT,
    )
    return fig


def shares_figure(rows: Sequence[Mapping[str, object]]) -> go.Figure:
    """Each LLM call's time split into engine queue, prefill, decode and the rest."""
    fig = go.Figure()
    calls = [str(r["call"]) for r in rows]
    for part, colour in (("queue_s", "#ff7f0e"), ("prefill_s", "#9467bd"), ("decode_s", "#1f77b4"), ("other_s", "#c7c7c7")):
        fig.add_trace(go.Bar(y=calls, x=[r[part] for r in rows], name=part.removesuffix("_s"), orientation="h", marker_color=colour))
    fig.update_layout(title="Engine time of each LLM call", barmode="stack", height=min(1600, 120 + 20 * len(rows)), **_LAYOUT)
    fig.update_xaxes(title="seconds")
    fig.update_yaxes(autorange="reversed")
    return fig


def _usd(value: float) -> str:
    """Two significant digits below a dollar (the dashboard's cards do the same)."""
    if value >= 1:
        return f"${value:,.2f}"
    return f"${value:.2g}" if value >= 1e-4 else f"${value:.7f}".rstrip("0")


def graph_figure(graph: RunGraph) -> go.Figure:
    """Agents left, models and tools right; edge labels carry calls, failures and cost."""
    pos = _graph_layout(graph)
    fig = go.Figure()
    for (src, dst), edge in graph.edges.items():
        (x0, y0), (x1, y1) = pos[src], pos[dst]
        colour = ERROR_COLOUR if edge.failures else "#888"
        fig.add_trace(go.Scatter(x=[x0, x1], y=[y0, y1], mode="lines", line={"color": colour, "width": 1 + min(6, math.log2(1 + edge.calls))}, hoverinfo="skip", showlegend=False))
        label = f"{edge.calls} calls" + (f", {edge.failures} failed" if edge.failures else "") + (f", {_usd(edge.cost_usd)}" if edge.cost_usd else "")
        # on an opaque box, so the edge does not strike the label through
        fig.add_annotation(x=(x0 + x1) / 2, y=(y0 + y1) / 2, text=label, showarrow=False, font={"size": 11},
                           bgcolor="rgba(255,255,255,0.9)", borderpad=2)
    for kind, colour in (("agent", "#6c757d"), ("llm", KIND_COLOURS[sc.KIND_LLM]), ("tool", KIND_COLOURS[sc.KIND_TOOL])):
        nodes = [n for n, k in graph.nodes.items() if k == kind]
        if nodes:
            fig.add_trace(go.Scatter(
                x=[pos[n][0] for n in nodes], y=[pos[n][1] for n in nodes], mode="markers+text", name=kind,
                text=[n.split(":", 1)[1] for n in nodes], textposition="top center", marker={"size": 22, "color": colour},
            ))
    fig.update_layout(title="Run graph: agents, models and tools", height=max(320, 70 * len(graph.nodes)), **_LAYOUT)
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return fig


def _graph_layout(graph: RunGraph) -> dict[str, tuple[float, float]]:
    """Columns by hand-off depth for agents; models and tools one column further right."""
    depth: dict[str, int] = {}
    agents = [n for n, k in graph.nodes.items() if k == "agent"]
    targets = {dst for (_, dst) in graph.edges}
    frontier = [a for a in agents if a not in targets] or agents[:1]
    for level in range(len(agents) + 1):
        for node in frontier:
            depth.setdefault(node, level)
        frontier = [d for (s, d) in graph.edges if s in frontier and graph.nodes[d] == "agent" and d not in depth]
    leaf_x = max(depth.values(), default=0) + 1
    columns: dict[int, list[str]] = {}
    for node, kind in graph.nodes.items():
        columns.setdefault(depth.get(node, 0) if kind == "agent" else leaf_x, []).append(node)
    return {n: (x, -i) for x, nodes in columns.items() for i, n in enumerate(nodes)}
