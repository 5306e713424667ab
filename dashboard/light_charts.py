"""Vega-Lite charts for the overview (over time) and the Cost page (bars over categories).

Its metric cards draw their sparklines with Vega-Lite, so charts drawn with it too make the
first visit load and start one chart library, not Vega-Lite and Plotly (Plotly's bundle is
several megabytes and was most of the overview's time to idle in the browser; see
bench/results/dashboard_render.md). Same conventions as ``charts.series_figure``: one line per
series and group (stacked bars when asked), sub-second times in ms, y kept in the metric's domain.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import altair as alt
import pandas as pd

from agentwatch_api.schemas import TimeSeries


def series_chart(series: Sequence[TimeSeries], title: str, unit: str, *, stacked: bool = False) -> alt.Chart:
    """Lines (or stacked bars) over time, one colour per series and group."""
    values = [p.value for ts in series for p in ts.points if p.value is not None]
    scale = 1000.0 if unit == "s" and values and max(abs(v) for v in values) < 1 else 1.0
    unit = "ms" if scale != 1.0 else unit  # as the cards show sub-second times
    frame = pd.DataFrame(_rows(series, scale, stacked=stacked), columns=["time", "series", "value"])
    base = alt.Chart(frame, title=title, height=300)
    mark = base.mark_bar() if stacked else base.mark_line(point=alt.OverlayMarkDef(size=20))
    return mark.encode(
        x=alt.X("time:T", title=None, axis=alt.Axis(format="%H:%M", labelOverlap=True)),
        y=alt.Y("value:Q", title="share" if unit == "ratio" else unit, stack="zero" if stacked else None,
                axis=alt.Axis(format="%" if unit == "ratio" else "~s"), scale=_y_scale(series, values, unit)),
        color=alt.Color("series:N", legend=alt.Legend(orient="bottom", title=None)),
        tooltip=[alt.Tooltip("time:T", format="%Y-%m-%d %H:%M:%S"), "series:N", alt.Tooltip("value:Q", format=",.4~g")],
    )


def _rows(series: Sequence[TimeSeries], scale: float, *, stacked: bool) -> list[tuple[datetime, str, float | None]]:
    rows = []
    for ts in series:
        grouped = stacked and len({p.group for p in ts.points}) > 1  # empty buckets of a grouped series carry no group
        rows += [(datetime.fromtimestamp(p.t, tz=UTC), p.group or ts.metric, None if p.value is None else p.value * scale)
                 for p in ts.points if not (grouped and p.group == "")]
    return rows


def _y_scale(series: Sequence[TimeSeries], values: list[float], unit: str) -> alt.Scale:
    """Never below zero for costs, times, counts and rates; ratios between 0 and 100 %; a score
    (which may be negative) as the data go."""
    if any(v < 0 for v in values) or any(ts.metric == "feedback_score" for ts in series):
        return alt.Scale(zero=False)
    if unit == "ratio":
        top = max(values, default=1.0)
        return alt.Scale(domain=[0, 1.05 if top > 0.5 or not values else top * 1.2])
    return alt.Scale(domainMin=0)


def bar_chart(keys: Sequence[str], values: Sequence[float], title: str, unit: str) -> alt.Chart:
    """Bars over categories (models, agents, days: never parsed as dates or numbers), in their order."""
    frame = pd.DataFrame({"key": list(keys), "value": list(values)})
    return alt.Chart(frame, title=title, height=280).mark_bar().encode(
        x=alt.X("key:N", title=None, sort=None, axis=alt.Axis(labelAngle=-30, labelLimit=160)),
        y=alt.Y("value:Q", title=unit, scale=alt.Scale(domainMin=0)),
        tooltip=[alt.Tooltip("key:N", title="key"), alt.Tooltip("value:Q", title=unit, format=",.6~g")],
    )
