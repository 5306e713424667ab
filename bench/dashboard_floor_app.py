"""A Streamlit page that queries nothing: the floor under ``bench.dashboard_render``'s browser figures.

``?frame=1``: the dashboard's frame around it (wide layout, the sidebar's navigation over 11 pages,
its three filter select boxes and caption), with ``&tabs=1`` the overview's own widgets (an
auto-refreshing fragment, a caption, the charts' segmented control) and with ``&controls=1`` run
detail's (a radio, pills, a text input, an expander). ``cards=N&charts=M&svg=K``: N metric cards with sparklines (``dashboard.cards``, one HTML block, as
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

FRAME_PAGES = "Overview Runs Run-detail Spans Cost Versions Users Sessions Compare-runs Engine Alerts".split()


def _frame() -> None:
    """The dashboard's layout and sidebar (``dashboard/app.py``, ``ui.sidebar_filters``), static."""
    st.set_page_config(page_title="floor", layout="wide")
    pages = [
        st.Page(_floor, title=name.replace("-", " "), url_path=name.lower(), default=i == 0)
        for i, name in enumerate(FRAME_PAGES)
    ]
    page = st.navigation(pages, position="sidebar")
    with st.sidebar:
        for label, options in (("Time range", ["Last hour", "Last 24 hours"]), ("Agent", ["All"]), ("Model", ["All"])):
            st.selectbox(label, options)
        st.caption("Collector: http://127.0.0.1:4318 · ingest lag p95 0.4 s")
    page.run()


def _floor() -> None:
    if st.query_params.get("tabs"):
        st.fragment(_body, run_every=30)()
    else:
        _body()


def _body() -> None:
    st.title("Floor")
    if st.query_params.get("tabs"):
        st.caption("Last hour; changes compare with the previous hour; buckets of 1 min.")
    if st.query_params.get("controls"):
        st.radio("View", ["Trace", "Steps", "Engine"], horizontal=True, label_visibility="collapsed")
        st.pills("Kinds", ["llm", "tool"], default=["llm", "tool"], selection_mode="multi")
        st.text_input("Search")
        with st.expander("a span"):
            st.code("{}")
    _elements()
    if st.query_params.get("tabs"):
        st.segmented_control("Charts", ["Cost", "Latency", "Quality"], default="Cost", label_visibility="collapsed")


def _elements() -> None:
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
        lines = [
            svg_charts.Line(name, [(1_767_225_600 + 60 * i, p) for i, p in enumerate(points)]) for name in ("a", "b")
        ]
        st.html(
            svg_charts.html_block(
                [svg_charts.time_chart(lines, f"chart {i}", "", ui.fmt) for i in range(svgs)], columns=2
            )
        )


if st.query_params.get("frame"):
    _frame()
else:
    _floor()
