"""Versions: the agent's figures per version (``service.version``), and two versions compared.

The table is ``GET /api/versions`` over the range's finished runs, each version a link to its runs;
the comparison is ``GET /api/versions/compare``: each figure of B against A, its 95 % interval and
a mark when the difference is beyond noise (Welch's t-test for per-run means, the two-proportion
z-test for the success rate; docs/runs.md's *Versions* states both).
"""

from __future__ import annotations

from urllib.parse import quote

import streamlit as st

from agentwatch_api.client import CollectorClient as Api
from agentwatch_api.schemas import FigureChange, VersionComparison, VersionFigures, VersionsOut
from agentwatch_platform.dashboard import tables, ui

NONE = "(no version)"
ROW_ID = "v:"  # a row's id: the version after it ("" is a version: the runs without one)
COLUMNS = [
    tables.Column("version", "version"),
    tables.Column("runs", "runs", numeric=True),
    tables.Column("cost", "cost", numeric=True),
    tables.Column("cost_run", "cost / run", numeric=True),
    tables.Column("tokens_run", "tokens / run", numeric=True),
    tables.Column("steps_run", "steps / run", numeric=True),
    tables.Column("latency", "latency mean", numeric=True),
    tables.Column("latency_p95", "latency p95", numeric=True),
    tables.Column("success", "success rate", numeric=True),
    tables.Column("errors", "error rate", numeric=True),
    tables.Column("feedback", "feedback (rated runs)", numeric=True),
    tables.Column("first", "first run (UTC)"),
]
# figure -> (label, unit, higher is worse)
FIGURES = {
    "cost_per_run": ("Cost / run", "USD", True),
    "tokens_per_run": ("Tokens / run", "", True),
    "steps_per_run": ("Steps / run", "", True),
    "latency_mean_s": ("Latency (mean)", "s", True),
    "success_rate": ("Success rate", "ratio", False),
    "feedback_score": ("Feedback score", "", False),
}
COMPARE_COLUMNS = [
    tables.Column("figure", "figure"),
    tables.Column("a", "A", numeric=True),
    tables.Column("b", "B", numeric=True),
    tables.Column("change", "B − A", numeric=True),
    tables.Column("relative", "relative", numeric=True),
    tables.Column("interval", "95 % interval of B − A", numeric=True),
    tables.Column("p", "p-value", numeric=True),
    tables.Column("verdict", "beyond noise?"),
    tables.Column("n", "runs tested (A / B)", numeric=True),
]


def label(version: str) -> str:
    return version or NONE


def runs_href(version: str) -> str:
    return f"./runs?version={quote(version)}"


def render() -> None:
    st.title("Versions")
    st.caption(
        "Per agent version (the run's service.version: `agentwatch.init(service_version=...)` or "
        "`agentwatch.run(..., version=...)`), over the finished runs that started in the range; refused "
        "requests are no runs. Click a version to list its runs."
    )
    win = ui.window()
    with ui.guarded("the versions"):
        out: VersionsOut = ui.fetch(Api.versions, start=win.start, end=win.end, agent=ui.chosen("aw_agent"))
        if not out.items:
            ui.empty(f"No finished runs in the {win.label.lower()}.")
            return
        _table(out.items)
        _comparison(win, out.items)


def _table(items: list[VersionFigures]) -> None:
    rows = [
        tables.Row(
            id=ROW_ID + v.version,
            cells=[
                label(v.version),
                f"{v.runs:,}",
                ui.fmt(v.cost_usd, "USD"),
                ui.fmt(v.cost_per_run, "USD"),
                ui.fmt(v.tokens_per_run, ""),
                ui.fmt(v.steps_per_run, ""),
                ui.fmt(v.latency_mean_s, "s"),
                ui.fmt(v.latency_p95_s, "s"),
                ui.fmt(v.success_rate, "ratio"),
                ui.fmt(v.error_rate, "ratio"),
                f"{ui.fmt(v.feedback_score, '')} ({v.rated_runs:,})",
                ui.fmt_time(v.first_seen),
            ],
            href=runs_href(v.version),
        )
        for v in items
    ]
    event = tables.table(COLUMNS, rows, key="versions_table", clickable=True)
    if event.opened and event.opened.startswith(ROW_ID):
        st.switch_page("views/runs.py", query_params={"version": event.opened.removeprefix(ROW_ID)})


def _comparison(win: ui.Window, items: list[VersionFigures]) -> None:
    st.subheader("Compare two versions")
    if len(items) < 2:
        st.info("One version in this range: a comparison needs two.")
        return
    names = [v.version for v in items]  # oldest first: B defaults to the newest, A to the one before it
    c = st.columns(2)
    a = c[0].selectbox("A (baseline)", names, index=len(names) - 2, format_func=label, key="versions_a")
    b = c[1].selectbox("B", names, index=len(names) - 1, format_func=label, key="versions_b")
    if a == b:
        st.info("Choose two different versions.")
        return
    compared: VersionComparison = ui.fetch(
        Api.compare_versions, a=a, b=b, start=win.start, end=win.end, agent=ui.chosen("aw_agent")
    )
    tables.table(
        COMPARE_COLUMNS, [_change_row(ch) for ch in compared.changes if ch.metric in FIGURES], key="versions_compare"
    )
    st.caption(
        "Beyond noise: p < 0.05, the 95 % interval of B − A excludes 0. Means per run by Welch's t-test "
        "(unequal variances), the success rate by the two-proportion z-test."
        + (" Each side's latest 20,000 runs were tested." if compared.sampled else "")
    )


def _change_row(change: FigureChange) -> tables.Row:
    name, unit, worse_up = FIGURES[change.metric]
    interval = ui.BLANK if change.low is None else f"{ui.fmt(change.low, unit)} … {ui.fmt(change.high, unit)}"
    verdict = "yes" if change.significant else ("too few runs" if change.test == "none" else "no")
    marks = {}
    if change.significant and change.difference:
        marks["verdict"] = "bad" if (change.difference > 0) == worse_up else "good"
    return tables.Row(
        id=change.metric,
        cells=[
            name,
            ui.fmt(change.a, unit),
            ui.fmt(change.b, unit),
            ui.fmt(change.difference, unit),
            ui.BLANK if change.relative is None else f"{change.relative * 100:+.1f} %",
            interval,
            ui.BLANK if change.p_value is None else f"{change.p_value:.3g}",
            verdict,
            f"{change.n_a:,} / {change.n_b:,}",
        ],
        marks=marks,
    )


render()
