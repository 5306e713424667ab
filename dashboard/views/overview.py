"""Overview: headline figures against the previous period, and each as a time series.

Only small aggregate queries (one overview, a bundle of bucketed series), so it stays fast
however many spans are stored.
"""

from __future__ import annotations

import streamlit as st

from collector.api.schemas import Overview, TimeSeries
from dashboard import charts, ui

# (figure key, label, series that draws its sparkline, a rise is good)
HEADLINES = [
    ("runs", "Runs", "runs", True),
    ("runs_per_min", "Runs / min", "runs", True),
    ("cost_usd", "Cost", "cost_usd", False),
    ("cost_per_hour_usd", "Cost / hour", "cost_usd", False),
    ("cost_per_success_usd", "Cost / successful task", "cost_per_success_usd", False),
    ("success_rate", "Task success rate", "success_rate", True),
    ("run_latency_p50", "Run latency p50", "run_latency_p50", False),
    ("run_latency_p95", "Run latency p95", "run_latency_p95", False),
    ("ttft_p50", "TTFT p50", "ttft_p50", False),
    ("ttft_p95", "TTFT p95", "ttft_p95", False),
    ("tpot_p50", "TPOT p50", "tpot_p50", False),
    ("tpot_p95", "TPOT p95", "tpot_p95", False),
    ("tokens_per_s", "Output tokens / s", "tokens_per_s", True),
    ("steps_per_run", "Steps / run", "steps_per_run", False),
    ("tool_failure_rate", "Tool-failure rate", "tool_failure_rate", False),
    ("error_rate", "Error rate", "error_rate", False),
    ("timeout_rate", "Timeout rate", "timeout_rate", False),
    ("feedback_score", "Mean feedback score", "feedback_score", True),
]
# tab -> [(title, metrics, group_by, stacked)]; one tab is drawn at a time, so the page stays light
CHARTS = {
    "Cost and volume": [
        ("Cost per bucket, by model", ["cost_usd"], "model", True),
        ("Runs per bucket", ["runs"], "none", False),
        ("Cost per successful task", ["cost_per_success_usd"], "none", False),
        ("Output tokens per second", ["tokens_per_s"], "none", False),
    ],
    "Latency": [
        ("Run latency", ["run_latency_p50", "run_latency_p95"], "none", False),
        ("Time to first token", ["ttft_p50", "ttft_p95"], "none", False),
        ("Time per output token", ["tpot_p50", "tpot_p95"], "none", False),
        ("Steps per run", ["steps_per_run"], "none", False),
    ],
    "Quality and failures": [
        ("Failure rates", ["tool_failure_rate", "error_rate", "timeout_rate"], "none", False),
        ("Task success rate", ["success_rate"], "none", False),
        ("Mean feedback score", ["feedback_score"], "none", False),
    ],
}


def render() -> None:
    st.title("Overview")
    with st.sidebar:
        refresh = st.toggle("Auto-refresh", key="aw_autorefresh")
        every = st.select_slider("Every (s)", [5, 10, 30, 60], value=10, key="aw_refresh_s", disabled=not refresh)
    st.fragment(_body, run_every=every if refresh else None)()


def _body() -> None:
    win, filters = ui.window(), ui.agent_model()
    with ui.guarded("the overview"):
        overview: Overview = ui.fetch("overview", start=win.start, end=win.end, **filters)
        runs = overview.figures.get("runs")
        if runs is None or not runs.value:
            ui.empty(f"No runs in the {win.label.lower()}{_scope(filters)}.")
            return
        specs = list(dict.fromkeys((m, g) for charts_ in CHARTS.values() for _, metrics, g, _ in charts_ for m in metrics))
        series = ui.fetch_series(specs, start=win.start, end=win.end, step_s=win.step_s, **filters)
        st.caption(f"{win.label}{_scope(filters)}; changes compare with the {win.label.lower().replace('last ', 'previous ')}; buckets of {win.step_s} s.")
        _headlines(overview, series)
        _charts(series, win.step_s)


def _scope(filters: dict[str, str | None]) -> str:
    return "".join(f", {k} {v}" for k, v in filters.items() if v)


def _headlines(overview: Overview, series: dict[str, TimeSeries]) -> None:
    cols = st.columns(6)
    for i, (key, label, spark, rise_is_good) in enumerate(HEADLINES):
        fig = overview.figures.get(key)
        unit = ui.unit_of(key, fig.unit if fig else "")
        sparkline = _sparkline(series.get(spark))
        cols[i % 6].metric(
            label,
            ui.fmt(fig.value if fig else None, unit),
            delta=ui.fmt_change(fig.change if fig else None),
            delta_color="normal" if rise_is_good else "inverse",
            chart_data=sparkline or None, chart_type="area", border=True,
        )


def _sparkline(ts: TimeSeries | None) -> list[float]:
    if ts is None:
        return []
    totals: dict[float, float] = {}
    for p in ts.points:
        if p.value is not None:
            totals[p.t] = totals.get(p.t, 0.0) + p.value
    return [totals[t] for t in sorted(totals)]


def _charts(series: dict[str, TimeSeries], step_s: int) -> None:
    tab = st.segmented_control("Charts", list(CHARTS), default=list(CHARTS)[0], key="overview_tab", label_visibility="collapsed") or list(CHARTS)[0]
    cols = st.columns(2)
    for i, (title, metrics, _, stacked) in enumerate(CHARTS[tab]):
        present = [series[m] for m in metrics if m in series]
        unit = ui.unit_of(metrics[0], present[0].unit if present else "")
        suffix = f" (per {step_s} s)" if metrics[0] in ("cost_usd", "runs") else ""
        cols[i % 2].plotly_chart(charts.series_figure(present, title + suffix, unit, stacked=stacked), key=f"overview-{title}")


render()
