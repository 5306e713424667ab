"""Overview: headline figures against the previous period, and each as a time series.

Only small aggregate queries (one overview, a bundle of bucketed series), so it stays fast
however many spans are stored.
"""

from __future__ import annotations

import streamlit as st

from collector.api.schemas import Overview, TimeSeries
from dashboard import charts, ui
from dashboard.overview_spec import CHARTS, HEADLINES


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
