"""A Streamlit page that queries nothing: the floor under ``bench.dashboard_render``'s browser figures.

``?cards=N&charts=M&svg=K``: N metric cards with sparklines (``dashboard.cards``, one HTML block, as
the overview draws its 18), M Vega-Lite line charts over 60 points (as run detail draws its) and K
SVG line charts (``dashboard.svg_charts``, one HTML block, as the overview draws its 4), static
data; none given: a title only. What any Streamlit page with those elements costs on this
machine before the dashboard's own queries and work: its time to idle is what no change to the
pages can cut.
"""

from __future__ import annotations

import math

import altair as alt
import pandas as pd
import streamlit as st

from agentwatch_platform.dashboard import cards, run_charts, svg_charts, ui

st.title("Floor")
count, charts = int(st.query_params.get("cards", 0)), int(st.query_params.get("charts", 0))
svgs = int(st.query_params.get("svg", 0))
points = [1 + math.sin(i / 6) for i in range(60)]
if count:
    st.html(cards.cards_html([cards.Card(f"card {i}", "1.23", "+4.5 %", points=points) for i in range(count)]))
frame = pd.DataFrame(
    {
        "time": pd.date_range("2026-01-01", periods=60, freq="min", tz="UTC").repeat(2),
        "value": [p for p in points for _ in "ab"],
        "series": ["a", "b"] * 60,
    }
)
columns = st.columns(2)
for i in range(charts):
    chart = alt.Chart(frame, title=f"chart {i}", height=300).mark_line(point=alt.OverlayMarkDef(size=20))
    columns[i % 2].altair_chart(
        run_charts.unchecked(chart.encode(x="time:T", y="value:Q", color="series:N")), key=f"chart-{i}"
    )
if svgs:
    lines = [svg_charts.Line(name, [(1_767_225_600 + 60 * i, p) for i, p in enumerate(points)]) for name in ("a", "b")]
    st.html(
        svg_charts.html_block([svg_charts.time_chart(lines, f"chart {i}", "", ui.fmt) for i in range(svgs)], columns=2)
    )
