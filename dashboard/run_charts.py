"""Run detail's charts in Vega-Lite: the run graph, context growth on two y axes and the
engine's share of each LLM call; ``KIND_COLOURS`` also colour the trace explorer's timeline bars.

Vega-Lite here, where a chart is read closely (the other pages draw SVG,
``dashboard.svg_charts``, lighter in the browser); never Plotly: its bundle took about 2 s of run
detail's time to idle in the browser (bench/results/dashboard_render.md). Each chart takes plain
data and labels its units.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import TypeVar

import altair as alt
import pandas as pd
from agentwatch import semconv as sc

from agentwatch_platform.dashboard.analysis import GrowthFit, RunGraph
from agentwatch_platform.dashboard.formatting import plural
from agentwatch_platform.dashboard.svg_charts import ERROR_COLOUR

KIND_COLOURS = {
    sc.KIND_RUN: "#6c757d",
    sc.KIND_STEP: "#9b8afb",
    sc.KIND_LLM: "#1f77b4",
    sc.KIND_TOOL: "#2ca02c",
    sc.KIND_RETRIEVAL: "#17becf",
    sc.KIND_OTHER: "#bcbd22",
    sc.KIND_ENGINE: "#ff7f0e",  # the engine's own spans (queue, prefill, decode) under an LLM call
}
AnyChart = TypeVar("AnyChart", bound=alt.TopLevelMixin)


def unchecked(chart: AnyChart) -> AnyChart:
    """The chart as ``st.altair_chart`` draws it, without Altair's JSON-schema validation of the
    whole spec in ``to_dict()``: for a 1000-bar chart that was 0.35-1.3 s of the script run on
    the loaded 2-core machine, against 0.05 s unvalidated. Every Vega-Lite chart is
    drawn through this; the tests validate the specs they receive (``tests/dashboard/support.chart``)."""
    object.__setattr__(chart, "to_dict", functools.partial(chart.to_dict, validate=False))
    return chart


_KINDS = alt.Scale(domain=list(KIND_COLOURS), range=list(KIND_COLOURS.values()))
_LEGEND = alt.Legend(orient="bottom", title=None, columns=4)  # in a half-width column: wrapped, not cut


def growth_chart(fit: GrowthFit) -> alt.LayerChart:
    """Input tokens per call (bars, left axis) and the run's cumulative input with the chosen fit
    (points and a dashed line, right axis)."""
    frame = pd.DataFrame(
        {
            "call": fit.calls,
            "step": [f"step {s}" for s in fit.steps],
            "input": fit.input_tokens,
            "cumulative": fit.cumulative,
            "fitted": fit.fitted if fit.fitted else [None] * len(fit.calls),
        }
    )
    base = alt.Chart(frame, title=f"Context growth: {fit.chosen}", height=340)
    x = alt.X("call:O", title="LLM call, in order (its step index on hover)", axis=alt.Axis(labelAngle=0))
    bars = base.mark_bar(color=KIND_COLOURS[sc.KIND_LLM]).encode(
        x=x,
        y=alt.Y("input:Q", title="input tokens per call", scale=alt.Scale(domainMin=0)),
        tooltip=["call:O", "step:N", "input:Q"],
    )
    right = alt.Y(
        "cumulative:Q", title="cumulative input tokens (points; dashed: the fit)", scale=alt.Scale(domainMin=0)
    )
    layers = [
        bars,
        base.mark_point(color="#ff7f0e", filled=True).encode(
            x=x, y=right, tooltip=["call:O", "step:N", "cumulative:Q"]
        ),
    ]
    if fit.fitted:
        layers.append(base.mark_line(color="#ff7f0e", strokeDash=[6, 4]).encode(x=x, y=alt.Y("fitted:Q", axis=None)))
    return alt.layer(*layers).resolve_scale(y="independent")


def shares_chart(rows: Sequence[Mapping[str, object]]) -> alt.Chart:
    """Each LLM call's time split into engine queue, prefill, decode and the rest (stacked bars)."""
    parts = {"queue_s": "#ff7f0e", "prefill_s": "#9467bd", "decode_s": "#1f77b4", "other_s": "#c7c7c7"}
    frame = pd.DataFrame(
        [(str(r["call"]), part.removesuffix("_s"), r[part], order) for r in rows for order, part in enumerate(parts)],
        columns=["call", "part", "seconds", "order"],
    )
    calls = list(dict.fromkeys(str(r["call"]) for r in rows))
    return (
        # 24 px a call and no label limit: at 20 px Vega dropped every second label as overlapping, and
        # cut the rest at 180 px ("1. step 3 · sim-lar…")
        alt.Chart(frame, title="Engine time of each LLM call", height=min(7200, 60 + 24 * len(calls)))
        .mark_bar()
        .encode(
            x=alt.X("seconds:Q", title="seconds", stack="zero"),
            y=alt.Y("call:N", sort=calls, title=None, axis=alt.Axis(labelLimit=0, labelOverlap=False)),
            order="order:Q",
            color=alt.Color(
                "part:N",
                scale=alt.Scale(domain=[p.removesuffix("_s") for p in parts], range=list(parts.values())),
                legend=_LEGEND,
            ),
            tooltip=["call:N", "part:N", alt.Tooltip("seconds:Q", format=",.4~g")],
        )
    )


def _usd(value: float) -> str:
    """Two significant digits below a dollar (the dashboard's cards do the same)."""
    if value >= 1:
        return f"${value:,.2f}"
    return f"${value:.2g}" if value >= 1e-4 else f"${value:.7f}".rstrip("0")


def graph_chart(graph: RunGraph) -> alt.LayerChart:
    """Agents left, models and tools right; edges as wide as their calls, red where calls
    failed, labelled with calls, failures and cost above their middle (not struck through)."""
    pos = _graph_layout(graph)
    edges = pd.DataFrame(
        [
            {
                "x": pos[src][0],
                "y": pos[src][1],
                "x2": pos[dst][0],
                "y2": pos[dst][1],
                "mx": (pos[src][0] + pos[dst][0]) / 2,
                "my": (pos[src][1] + pos[dst][1]) / 2,
                "width": 1 + min(6, math.log2(1 + e.calls)),
                "failed": e.failures > 0,
                "label": plural(e.calls, "call")
                + (f", {e.failures:,} failed" if e.failures else "")
                + (f", {_usd(e.cost_usd)}" if e.cost_usd else ""),
            }
            for (src, dst), e in graph.edges.items()
        ],
        columns=["x", "y", "x2", "y2", "mx", "my", "width", "failed", "label"],
    )
    nodes = pd.DataFrame(
        [{"x": pos[n][0], "y": pos[n][1], "kind": k, "name": n.split(":", 1)[1]} for n, k in graph.nodes.items()],
        columns=["x", "y", "kind", "name"],
    )
    x, y = alt.X("x:Q", axis=None, scale=alt.Scale(padding=60)), alt.Y("y:Q", axis=None, scale=alt.Scale(padding=30))
    lines = (
        alt.Chart(edges)
        .mark_rule()
        .encode(
            x=x,
            y=y,
            x2="x2:Q",
            y2="y2:Q",
            strokeWidth=alt.StrokeWidth("width:Q", legend=None, scale=None),
            color=alt.condition("datum.failed", alt.value(ERROR_COLOUR), alt.value("#888")),
        )
    )
    labels = (
        alt.Chart(edges)
        .mark_text(fontSize=11, dy=-9)
        .encode(x=alt.X("mx:Q", axis=None), y=alt.Y("my:Q", axis=None), text="label:N")
    )
    kinds = alt.Scale(
        domain=["agent", "llm", "tool"], range=["#6c757d", KIND_COLOURS[sc.KIND_LLM], KIND_COLOURS[sc.KIND_TOOL]]
    )
    dots = (
        alt.Chart(nodes)
        .mark_circle(size=400, opacity=1)
        .encode(x=x, y=y, color=alt.Color("kind:N", scale=kinds, legend=_LEGEND), tooltip=["name:N", "kind:N"])
    )
    names = alt.Chart(nodes).mark_text(dy=-20, fontSize=12).encode(x=x, y=y, text="name:N")
    return alt.LayerChart(
        layer=[lines, labels, dots, names],
        title="Run graph: agents, models and tools",
        height=max(320, 70 * len(graph.nodes)),
    )


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
