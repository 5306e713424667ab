"""Vega-Lite charts for the overview, the Alerts and Engine pages (over time) and the Cost and
Engine pages (bars over categories).

Metric cards draw their sparklines with Vega-Lite, so every chart is drawn with it too (run
detail's in ``dashboard.run_charts``): a page loads and starts one chart library (Plotly's bundle
is several megabytes and was most of a page's time to idle in the browser; see
bench/results/dashboard_render.md). Conventions: one line per series and group (stacked bars when asked),
sub-second times in ms, y kept in the metric's domain.
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TypeVar

import altair as alt
import pandas as pd

from agentwatch_api.schemas import TimeSeries

ERROR_COLOUR = "#d62728"  # a failure, on every chart
AnyChart = TypeVar("AnyChart", bound=alt.TopLevelMixin)


def unchecked(chart: AnyChart) -> AnyChart:
    """The chart as ``st.altair_chart`` draws it, without Altair's JSON-schema validation of the
    whole spec in ``to_dict()``: for run detail's 1000-bar waterfall that was 0.35-1.3 s of the
    script run on the loaded 2-core machine, against 0.05 s unvalidated. Every page draws through
    this; the tests validate the specs they receive (``tests/dashboard/conftest.chart``)."""
    object.__setattr__(chart, "to_dict", functools.partial(chart.to_dict, validate=False))
    return chart


def series_chart(series: Sequence[TimeSeries], title: str, unit: str, *, stacked: bool = False) -> alt.Chart:
    """Lines (or stacked bars) over time, one colour per series and group."""
    values = [p.value for ts in series for p in ts.points if p.value is not None]
    scale, unit = _scaled_unit(values, unit)
    frame = pd.DataFrame(_rows(series, scale, stacked=stacked), columns=["time", "series", "value"])
    base = alt.Chart(frame, title=title, height=300)
    mark = base.mark_bar() if stacked else base.mark_line(point=alt.OverlayMarkDef(size=20))
    return mark.encode(
        x=alt.X("time:T", title=None, axis=alt.Axis(format="%H:%M", labelOverlap=True)),
        y=alt.Y(
            "value:Q",
            title="share" if unit == "ratio" else unit,
            stack="zero" if stacked else None,
            axis=alt.Axis(format="%" if unit == "ratio" else _number_format(values)),
            scale=_y_scale(series, values, unit),
        ),
        color=alt.Color("series:N", legend=alt.Legend(orient="bottom", title=None)),
        tooltip=[alt.Tooltip("time:T", format="%Y-%m-%d %H:%M:%S"), "series:N", alt.Tooltip("value:Q", format=",.4~g")],
    )


def incident_chart(
    series: TimeSeries,
    title: str,
    unit: str,
    *,
    started: float,
    ended: float,
    lines: Sequence[tuple[str, float | None]],
) -> alt.LayerChart:
    """A metric over time with its incident shaded (``started`` to ``ended``) and level lines
    (name, value: a baseline, a threshold) across it, in the same unit as the line."""
    values = [p.value for p in series.points if p.value is not None]
    scale, shown = _scaled_unit([*values, *(v for _, v in lines if v is not None)], unit)
    shade = pd.DataFrame(
        {
            "start": [datetime.fromtimestamp(started, tz=UTC)],
            "end": [datetime.fromtimestamp(ended, tz=UTC)],
            "label": ["incident"],
        }
    )
    levels = pd.DataFrame(
        [(name, value * scale) for name, value in lines if value is not None], columns=["name", "value"]
    )
    band = (
        alt.Chart(shade)
        .mark_rect(color=ERROR_COLOUR, opacity=0.12)
        .encode(x="start:T", x2="end:T", tooltip=["label:N", "start:T", "end:T"])
    )
    layers = [band, series_chart([series], title, unit)]
    if not levels.empty:
        rule = alt.Chart(levels).mark_rule(color="#7f7f7f", strokeDash=[4, 4])
        layers += [
            rule.encode(y="value:Q", tooltip=["name:N", alt.Tooltip("value:Q", title=shown, format=",.4~g")]),
            rule.mark_text(align="left", dx=4, dy=-6, color="#7f7f7f").encode(
                y="value:Q", text="name:N", x=alt.value(0)
            ),
        ]
    return alt.LayerChart(layer=layers)


def _scaled_unit(values: Sequence[float], unit: str) -> tuple[float, str]:
    """Sub-second times in ms, as the metric cards show them: (factor, unit shown)."""
    if unit == "s" and values and max(abs(v) for v in values) < 1:
        return 1000.0, "ms"
    return 1.0, unit


def _rows(series: Sequence[TimeSeries], scale: float, *, stacked: bool) -> list[tuple[datetime, str, float | None]]:
    rows = []
    for ts in series:
        grouped = stacked and len({p.group for p in ts.points}) > 1  # empty buckets of a grouped series carry no group
        rows += [
            (datetime.fromtimestamp(p.t, tz=UTC), p.group or ts.metric, None if p.value is None else p.value * scale)
            for p in ts.points
            if not (grouped and p.group == "")
        ]
    return rows


def _y_scale(series: Sequence[TimeSeries], values: list[float], unit: str) -> alt.Scale:
    """Never below zero for costs, times, counts and rates; ratios between 0 and 100 %; a score
    (which may be negative) as the data go."""
    if any(v < 0 for v in values) or any(ts.metric == "feedback_score" for ts in series):
        return alt.Scale(zero=False)
    if unit == "ratio":
        top = max(values, default=1.0)
        return alt.Scale(domain=[0, 1.05 if top > 0.5 or top <= 0 else top * 1.2])  # all 0: to 105 %, not [0, 0]
    return _from_zero(values)


def _from_zero(values: Sequence[float]) -> alt.Scale:
    """From zero up; to 1 where every value is 0 (a domain [0, 0] draws its ticks as NaN)."""
    return alt.Scale(domainMin=0) if any(v > 0 for v in values) else alt.Scale(domain=[0, 1])


def _number_format(values: Sequence[float]) -> str:
    """Axis numbers: 1.5k, 2M from ten thousand up; plain below (SI would write 0.3 requests or
    dollars as "300m")."""
    return "~s" if values and max(abs(v) for v in values) >= 10_000 else ",.4~g"


def points_chart(series: Mapping[str, Mapping[float, float]], title: str, unit: str) -> alt.Chart:
    """Lines from ``{name: {t: value}}`` (engine gauges and counter rates); a line breaks where
    readings stopped (``segments``): an engine that was down is a gap, not a ramp across it."""
    rows = [
        (datetime.fromtimestamp(t, tz=UTC), name, f"{name} {segment}", value)
        for name, values in series.items()
        for segment, part in enumerate(segments(values))
        for t, value in part
    ]
    frame = pd.DataFrame(rows, columns=["time", "series", "segment", "value"])
    ratio, values = unit == "ratio", [row[3] for row in rows]
    return (
        alt.Chart(frame, title=title, height=300)
        .mark_line()
        .encode(
            x=alt.X("time:T", title=None, axis=alt.Axis(format="%H:%M", labelOverlap=True)),
            y=alt.Y(
                "value:Q",
                title="share" if ratio else unit,
                axis=alt.Axis(format=".1%" if ratio else _number_format(values)),
                scale=_from_zero(values),
            ),
            color=alt.Color("series:N", legend=alt.Legend(orient="bottom", title=None)),
            detail="segment:N",
            tooltip=[
                alt.Tooltip("time:T", format="%Y-%m-%d %H:%M:%S"),
                "series:N",
                alt.Tooltip("value:Q", format=",.4~g"),
            ],
        )
    )


def segments(values: Mapping[float, float], *, factor: float = 3.0) -> list[list[tuple[float, float]]]:
    """The readings ``{t: value}`` in time order, split where they stopped for longer than
    ``factor`` times the usual interval between them."""
    times = sorted(values)
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    usual = statistics.median(gaps) if len(gaps) > 1 else 0.0
    parts: list[list[tuple[float, float]]] = []
    for prev, t in zip([None, *times], times, strict=False):
        if prev is None or (usual > 0 and t - prev > factor * usual):
            parts.append([])
        parts[-1].append((t, values[t]))
    return parts


def bar_chart(keys: Sequence[str], values: Sequence[float], title: str, unit: str) -> alt.Chart:
    """Bars over categories (models, agents, days: never parsed as dates or numbers), in their order."""
    frame = pd.DataFrame({"key": list(keys), "value": list(values)})
    return (
        alt.Chart(frame, title=title, height=280)
        .mark_bar()
        .encode(
            x=alt.X("key:N", title=None, sort=None, axis=alt.Axis(labelAngle=-30, labelLimit=160)),
            y=alt.Y("value:Q", title=unit, scale=alt.Scale(domainMin=0)),
            tooltip=[alt.Tooltip("key:N", title="key"), alt.Tooltip("value:Q", title=unit, format=",.6~g")],
        )
    )
