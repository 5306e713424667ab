"""Overview: headline figures against the previous period, and each as a time series.

Only small aggregate queries (one overview, a bundle of bucketed series), so it stays fast
however many spans are stored.
"""

from __future__ import annotations

import html
import time
from calendar import monthrange
from datetime import UTC, datetime, timedelta

import streamlit as st

from agentwatch_api.client import CollectorClient as Api
from agentwatch_api.schemas import Overview, RunsPage, TimeSeries
from agentwatch_platform.dashboard import breakdowns, cards, svg_charts, ui
from agentwatch_platform.dashboard.overview_spec import CHARTS, HEADLINE_COUNTS, HEADLINES


def render() -> None:
    st.title("Overview")
    st.fragment(_body, run_every=ui.refresh_every("aw_autorefresh", "aw_refresh_s"))()


SERIES = list(dict.fromkeys((m, g) for charts_ in CHARTS.values() for _, metrics, g, _ in charts_ for m in metrics))


def _body() -> None:
    win, filters = ui.window(), ui.agent_model()
    with ui.guarded("the overview"):
        scope = {"start": win.start, "end": win.end, **filters}
        costliest = ui.fetch_later(
            Api.runs, **scope, sort="-cost_usd", limit=1
        )  # drawn last: the cards and charts first
        month_start, month_end = _months()
        got = ui.fetch_together(
            overview=ui.call(Api.overview, **scope),
            days=ui.call(Api.timeseries, metric="cost_usd", start=month_start, end=month_end, step_s=DAY_S, **filters),
            **ui.series_calls(SERIES, step_s=win.step_s, **scope),
        )
        overview: Overview = got["overview"]
        runs = overview.figures.get("runs")
        if runs is None or not runs.value:
            ui.empty(f"No runs in the {win.label.lower()}{_scope(filters)}.")
            return
        series = ui.series_of(got)
        long_range = win.end - win.start >= LONG_RANGE_S
        rates = (
            "rates: per day over the range"
            if long_range
            else "rates: the last complete bucket against the range's complete buckets"
        )
        st.caption(
            f"{win.label}{_scope(filters)}; changes compare with the {win.label.lower().replace('last ', 'previous ')} ({rates}); buckets of {_span_text(win.step_s)}. "
            "A call counts where its span starts, a run where its root starts; buckets after the collector's watermark "
            f"({ui.fmt_time(overview.complete_until) if overview.complete_until else 'now'}) are still filling and are marked partial."
        )
        headlines = _headlines(overview, series, win.step_s, long_range=long_range)
        st.html(cards.cards_html([*headlines, *_month_cards(got["days"]), *_unfinished(overview), _refused(overview)]))
        slot = st.container()
        _charts(series, win.step_s, got["days"])
        breakdowns.quality(win)  # failures by tool and error type, on the quality tab
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


REFUSED_HELP = (
    "Requests turned away before any work by a rate limit or a budget (outcome refused): no runs, so "
    "in none of the other figures (runs, latency, success and error rates, per-run cost)."
)


def _refused(overview: Overview) -> cards.Card:
    """Refused requests, counted on their own; the link lists them on the Runs page."""
    return cards.Card(
        "Refused requests",
        f"{overview.refused_runs:,}",
        help=REFUSED_HELP,
        link=("Show refused requests", "runs?outcome=refused"),
        counts="refused before any work: not runs",
    )


COSTLIEST_CLASS = "aw-costliest"


def _costliest(top: RunsPage) -> None:
    """The most expensive run of the range, one click away."""
    if not top.items:
        return
    run = top.items[0]
    facts = (
        f"{run.agent or run.name} · {ui.fmt(run.cost_usd, 'USD')} · {ui.plural(run.steps, 'step')} · "
        f"{run.tool_failures} failed tool calls · {run.status} · {ui.fmt_time(run.start_time)}"
    )
    st.html(
        f'<div class="{COSTLIEST_CLASS}"><b>Most expensive run:</b> {html.escape(facts)} · '
        f'<a href="run?run={html.escape(run.trace_id)}">open it →</a></div>'
    )


def _scope(filters: dict[str, str | None]) -> str:
    return "".join(f", {k} {v}" for k, v in filters.items() if v)


# Rates shown over the last complete bucket (what the chart beside them ends with), not averaged
# over the whole range: figure key -> (series of the rate, seconds per unit of the rate).
LAST_BUCKET_RATES = {"runs_per_min": 60.0, "cost_per_hour_usd": 3600.0, "tokens_per_s": None}
# Over 7 days and more, a rate per minute or hour is mostly empty buckets: the cards say per day
# (the range's complete part, against the previous range's): key -> (label, the figure it scales, factor).
LONG_RANGE_S = 7 * 86_400
PER_DAY = {
    "runs_per_min": ("Runs / day", "runs_per_min", 1440.0),
    "cost_per_hour_usd": ("Cost / day", "cost_per_hour_usd", 24.0),
    "tokens_per_s": ("Output tokens / day", "output_tokens", None),
}


def _headlines(
    overview: Overview, series: dict[str, TimeSeries], step_s: int, *, long_range: bool = False
) -> list[cards.Card]:
    """The headline figures as cards with sparklines (``dashboard.cards``)."""
    shown = []
    for key, label, spark, rise_is_good in HEADLINES:
        fig = overview.figures.get(key)
        unit = ui.unit_of(key, fig.unit if fig else "")
        unit = "" if unit == "tokens/s" else unit  # the label says "/ s": a card has room for the number only
        sparkline = _sparkline(series.get(spark))
        if long_range and key in PER_DAY:
            shown.append(_per_day(overview, key, rise_is_good, sparkline))
            continue
        value, change, help_ = (fig.value, fig.change, None) if fig else (None, None, None)
        if key in LAST_BUCKET_RATES and sparkline:
            value, change, help_ = _last_bucket(series.get(spark), step_s, LAST_BUCKET_RATES[key], unit)
        delta = ui.fmt_delta(change) if key not in LAST_BUCKET_RATES else _vs_average(change)
        shown.append(
            cards.Card(
                label, ui.fmt(value, unit), delta, rise_is_good, help_, sparkline, counts=HEADLINE_COUNTS.get(key, "")
            )
        )
    return shown


def _per_day(overview: Overview, key: str, rise_is_good: bool, sparkline: list[float]) -> cards.Card:
    label, figure, factor = PER_DAY[key]
    fig = overview.figures.get(figure)
    days = (overview.end - overview.start) / 86_400
    scale = factor if factor is not None else 1 / days
    value = None if fig is None or fig.value is None else fig.value * scale
    unit = "USD" if key == "cost_per_hour_usd" else ""
    help_ = "Per day over the complete part of the range, against the same figure over the previous range."
    change = None if fig is None else fig.change
    return cards.Card(
        label, ui.fmt(value, unit), ui.fmt_delta(change), rise_is_good, help_, sparkline, counts="per day of the range"
    )


def _last_bucket(
    ts: TimeSeries | None, step_s: int, per_s: float | None, unit: str
) -> tuple[float | None, float | None, str]:
    """The rate in the last complete bucket (by the collector's watermark, not the clock), its
    change against the average of the range's complete buckets, and a help text that says both
    and what the partial bucket holds so far. ``per_s``: seconds per unit (None: the series is a rate)."""
    totals, partial = _bucket_totals(ts), _partial_totals(ts)
    complete = sorted(t for t in totals if t not in partial)

    def rate(t: float) -> float:
        return totals[t] if per_s is None else totals[t] / step_s * per_s

    so_far = ""
    if partial:
        newest = max(partial)
        so_far = f" The bucket from {ui.fmt_time(newest)} is still filling (spans arriving): {ui.fmt(rate(newest), unit)} so far, not counted."
    if not complete:
        return None, None, "No complete bucket yet." + so_far
    average = sum(rate(t) for t in complete) / len(complete)
    last = rate(complete[-1])
    change = (last - average) / average if average else None
    return (
        last,
        change,
        f"Over the last complete bucket ({_span_text(step_s)} from {ui.fmt_time(complete[-1])}); the change compares it with the average of the range's complete buckets, {ui.fmt(average, unit)}.{so_far}",
    )


def _partial_totals(ts: TimeSeries | None) -> set[float]:
    return {p.t for p in ts.points if p.partial} if ts is not None else set()


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


DAY_S = 86_400


def _months(now: float | None = None) -> tuple[float, float]:
    """[first day of last month, first day of next month), UTC: the daily cost trend's range."""
    today = datetime.fromtimestamp(time.time() if now is None else now, UTC)
    first = datetime(today.year, today.month, 1, tzinfo=UTC)
    previous = (first - timedelta(days=1)).replace(day=1)
    following = (first + timedelta(days=32)).replace(day=1)
    return previous.timestamp(), following.timestamp()


def _month_cards(days: TimeSeries, now: float | None = None) -> list[cards.Card]:
    """Month to date against the same days of last month, and the month's linear projection
    against last month's total (as ``/api/cost`` projects it), from the daily costs."""
    now = time.time() if now is None else now
    last_start, _ = _months(now)
    today = datetime.fromtimestamp(now, UTC)
    month_start = datetime(today.year, today.month, 1, tzinfo=UTC).timestamp()
    totals = _bucket_totals(days)
    elapsed = now - month_start
    mtd = sum(v for t, v in totals.items() if t >= month_start)
    last_month = sum(v for t, v in totals.items() if t < month_start)
    same_days = sum(v for t, v in totals.items() if last_start <= t < last_start + elapsed)
    month_s = monthrange(today.year, today.month)[1] * DAY_S
    projected = mtd * month_s / max(elapsed, 3600.0)
    spark = [totals[t] for t in sorted(totals) if t >= month_start]
    return [
        cards.Card(
            "Month to date",
            ui.fmt(mtd, "USD"),
            _vs(mtd, same_days, "the same days last month"),
            False,
            f"Cost since the 1st (UTC), against the first {elapsed / DAY_S:.1f} days of last month: {ui.fmt(same_days, 'USD')}.",
            spark,
        ),
        cards.Card(
            "Projected month end",
            ui.fmt(projected, "USD"),
            _vs(projected, last_month, "last month"),
            False,
            f"Month to date scaled to the whole month (linear); last month cost {ui.fmt(last_month, 'USD')}.",
            spark,
        ),
    ]


def _vs(value: float, before: float, what: str) -> str | None:
    return None if not before else f"{(value - before) / before * 100:+.0f} % vs {what}"


def _charts(series: dict[str, TimeSeries], step_s: int, days: TimeSeries | None = None) -> None:
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
        partial = ui.partial_from(present)
        drawn.append(
            svg_charts.time_chart(
                lines, title + suffix, unit, ui.fmt, stacked=stacked, score=score, partial_from=partial
            )
        )
    if days is not None and tab == list(CHARTS)[0]:
        lines = [svg_charts.Line("cost", line.points) for line in svg_charts.from_series([days], stacked=True)]
        title = "Cost per day, this month and last (UTC)"
        drawn.append(
            svg_charts.time_chart(lines, title, "USD", ui.fmt, stacked=True, partial_from=ui.partial_from([days]))
        )
    st.html(svg_charts.html_block(drawn, columns=2))


render()
