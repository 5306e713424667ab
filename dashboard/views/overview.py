"""Overview: headline figures against the previous period, and each as a time series.

Only small aggregate queries (one overview, a bundle of bucketed series), so it stays fast
however many spans are stored.
"""

from __future__ import annotations

import html
import time

import streamlit as st

from agentwatch_api.schemas import Overview, RunsPage, TimeSeries
from agentwatch_platform.dashboard import cards, svg_charts, ui
from agentwatch_platform.dashboard.overview_spec import CHARTS, HEADLINES


def render() -> None:
    st.title("Overview")
    st.fragment(_body, run_every=ui.refresh_every("aw_autorefresh", "aw_refresh_s"))()


SERIES = list(dict.fromkeys((m, g) for charts_ in CHARTS.values() for _, metrics, g, _ in charts_ for m in metrics))


def _body() -> None:
    win, filters = ui.window(), ui.agent_model()
    with ui.guarded("the overview"):
        scope = {"start": win.start, "end": win.end, **filters}
        costliest = ui.fetch_later("runs", **scope, sort="-cost_usd", limit=1)  # drawn last: the cards and charts first
        got = ui.fetch_together(overview=("overview", scope), **ui.series_calls(SERIES, step_s=win.step_s, **scope))
        overview: Overview = got["overview"]
        runs = overview.figures.get("runs")
        if runs is None or not runs.value:
            ui.empty(f"No runs in the {win.label.lower()}{_scope(filters)}.")
            return
        series = ui.series_of(got)
        st.caption(
            f"{win.label}{_scope(filters)}; changes compare with the {win.label.lower().replace('last ', 'previous ')} (rates: their last complete bucket with the range's average); buckets of {_span_text(win.step_s)}."
        )
        st.html(cards.cards_html([*_headlines(overview, series, win.step_s), *_unfinished(overview)]))
        slot = st.container()
        _charts(series, win.step_s)
        with slot:
            _costliest(costliest.result())


UNFINISHED_CARDS = (
    (
        "running",
        "Running now",
        "Runs of the range whose root span has not arrived and that sent a span within the collector's idle timeout (AGENTWATCH_RUN_IDLE_TIMEOUT_S).",
    ),
    (
        "incomplete",
        "Incomplete",
        "Runs of the range whose root span never arrived and that sent nothing for longer than the idle timeout: a crashed or killed agent. Their spans and cost are counted.",
    ),
)


def _unfinished(overview: Overview) -> list[cards.Card]:
    """Runs not finished, as cards whose link lists them on the Runs page. Links, not Streamlit's
    page links and metrics: each kind of Streamlit element costs its code's load in the browser."""
    counts = {"running": overview.running_runs, "incomplete": overview.incomplete_runs}
    return [
        cards.Card(label, f"{counts[status]:,}", help=help_, link=(f"Show {status} runs", f"runs?status={status}"))
        for status, label, help_ in UNFINISHED_CARDS
    ]


COSTLIEST_CLASS = "aw-costliest"


def _costliest(top: RunsPage) -> None:
    """The most expensive run of the range, one click away."""
    if not top.items:
        return
    run = top.items[0]
    facts = (
        f"{run.agent or run.name} · {ui.fmt(run.cost_usd, 'USD')} · {run.steps} steps · "
        f"{run.tool_failures} failed tool calls · {run.status} · {ui.fmt_time(run.start_time)}"
    )
    st.html(
        f'<div class="{COSTLIEST_CLASS}"><b>Most expensive run:</b> {html.escape(facts)} · '
        f'<a href="run?run={html.escape(run.trace_id)}">open it →</a></div>'
    )


def _scope(filters: dict[str, str | None]) -> str:
    return "".join(f", {k} {v}" for k, v in filters.items() if v)


# Rates shown over the last complete bucket (what the chart beside them ends with), not averaged
# over the whole range: figure key -> (seconds per unit of the rate).
LAST_BUCKET_RATES = {"runs_per_min": 60.0, "cost_per_hour_usd": 3600.0}


def _headlines(overview: Overview, series: dict[str, TimeSeries], step_s: int) -> list[cards.Card]:
    """The headline figures as cards with sparklines (``dashboard.cards``)."""
    shown = []
    for key, label, spark, rise_is_good in HEADLINES:
        fig = overview.figures.get(key)
        unit = ui.unit_of(key, fig.unit if fig else "")
        unit = "" if unit == "tokens/s" else unit  # the label says "/ s": a card has room for the number only
        sparkline = _sparkline(series.get(spark))
        value, change, help_ = (fig.value, fig.change, None) if fig else (None, None, None)
        if key in LAST_BUCKET_RATES and sparkline:
            value, change, help_ = _last_bucket(
                series.get(spark), step_s, LAST_BUCKET_RATES[key], fig.value if fig else None, unit
            )
        delta = ui.fmt_delta(change) if key not in LAST_BUCKET_RATES else _vs_average(change)
        shown.append(cards.Card(label, ui.fmt(value, unit), delta, rise_is_good, help_, sparkline))
    return shown


def _last_bucket(
    ts: TimeSeries | None, step_s: int, per_s: float, average: float | None, unit: str
) -> tuple[float | None, float | None, str]:
    """The rate in the last complete bucket, its change against the range's average, and a help
    text that gives that average."""
    now = time.time()
    totals = _bucket_totals(ts)
    complete = [t for t in totals if t + step_s <= now]
    if not complete:
        return average, None, "Average over the range (no complete bucket yet)."
    rate = totals[max(complete)] / step_s * per_s
    change = (rate - average) / average if average else None
    return (
        rate,
        change,
        f"Over the last complete bucket ({_span_text(step_s)}); the change compares it with the average over the range, {ui.fmt(average, unit)}.",
    )


def _vs_average(change: float | None) -> str | None:
    return None if change is None else f"{change * 100:+.0f} % vs avg"


def _span_text(seconds: int) -> str:
    if seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    return f"{seconds // 60} min" if seconds % 60 == 0 else f"{seconds} s"


def _bucket_totals(ts: TimeSeries | None) -> dict[float, float]:
    totals: dict[float, float] = {}
    for p in ts.points if ts is not None else ():
        if p.value is not None:
            totals[p.t] = totals.get(p.t, 0.0) + p.value
    return totals


def _sparkline(ts: TimeSeries | None) -> list[float]:
    totals = _bucket_totals(ts)
    return [totals[t] for t in sorted(totals)]


def _charts(series: dict[str, TimeSeries], step_s: int) -> None:
    tab = (
        st.segmented_control(
            "Charts", list(CHARTS), default=list(CHARTS)[0], key="overview_tab", label_visibility="collapsed"
        )
        or list(CHARTS)[0]
    )
    drawn = []
    for title, metrics, _, stacked in CHARTS[tab]:
        present = [series[m] for m in metrics if m in series]
        unit = ui.unit_of(metrics[0], present[0].unit if present else "")
        suffix = f" (per {_span_text(step_s)})" if metrics[0] in ("cost_usd", "runs") else ""
        lines = svg_charts.from_series(present, stacked=stacked)
        score = "feedback_score" in metrics
        drawn.append(svg_charts.time_chart(lines, title + suffix, unit, ui.fmt, stacked=stacked, score=score))
    st.html(svg_charts.html_block(drawn, columns=2))


render()
