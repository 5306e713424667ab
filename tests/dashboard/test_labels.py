"""Every page walked under AppTest, as a reader sees it: no raw metric or column name, no number in
scientific notation, no "1 calls". The labels' words come from ``agentwatch_api.labels``, shared with
the alerts' notifications."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from agentwatch_api import labels
from agentwatch_platform.dashboard.overview_spec import CHARTS
from tests.dashboard.support import SeededStack, metrics, svg_charts, tables
from tests.dashboard.test_pages import app, page, text  # noqa: F401 (app: the pages' fixture)

VIEWS = ("Trace", "Steps", "Context growth", "Engine", "Graph", "Content", "Spans")  # run detail's (a page script)
RAW_NAMES = {name for name, label in labels.METRICS.items() if name != label.words} | {
    "llm_calls",
    "tool_calls",
    "offset_s",
    "duration_s",
    "ttft_s",
    "tpot_s",
    "mean_cost_usd",
    "delay_s",
    "queue_s",
    "prefill_s",
    "decode_s",
    "other_s",
    "span_id",
}
RAW = re.compile(
    r"(?<![\w.`/=])(" + "|".join(sorted(map(re.escape, RAW_NAMES), key=len, reverse=True)) + r")(?![\w`(=])"
)
SCIENTIFIC = re.compile(r"\b\d(\.\d+)?e[+-]\d+\b", re.IGNORECASE)
ONE_PLURAL = re.compile(r"(?<![\d,.])1 ([A-Za-z]+ )?(calls|runs|spans|steps|tokens|failures|users|messages)\b")


def _titles(spec: Any) -> Iterator[str]:
    """The titles in a Vega-Lite spec (chart and axes), not its data."""
    if isinstance(spec, dict):
        for key, value in spec.items():
            if key == "title" and isinstance(value, str):
                yield value
            elif key != "datasets" and key != "data":
                yield from _titles(value)
    elif isinstance(spec, list):
        for item in spec:
            yield from _titles(item)


def _shown(at: AppTest) -> list[str]:
    """What the reader reads: texts, cards, tables (headers and cells), charts' titles, axes, legends and hovers."""
    words = [text(at)]
    words += [f"{label} {value}" for label, value in metrics(at).items()]
    for table in tables(at).values():
        words += table.labels + [cell for row in table.rows for cell in row.values()]
    for svg in svg_charts(at):
        words += [svg.title, *svg.legend, *svg.tips] + (svg.texts() if svg.svg is not None else [])
    for element in at.get("vega_lite_chart"):
        words += list(_titles(json.loads(element.proto.spec)))
    for frame in at.dataframe:
        words += [str(c) for c in frame.value.columns]
    return words


def _problems(where: str, at: AppTest) -> list[str]:
    assert not at.exception, [e.value for e in at.exception]
    found = []
    for words in _shown(at):
        for pattern, what in (
            (RAW, "raw name"),
            (SCIENTIFIC, "scientific notation"),
            (ONE_PLURAL, "'1' with a plural"),
        ):
            found += [f"{where}: {what} {m.group(0)!r} in {words[:120]!r}" for m in pattern.finditer(words)]
    return list(dict.fromkeys(found))[:5]  # a few of each page: the same label repeats in every hover


def _react_run(seeded: SeededStack) -> str:
    for run in seeded.get("/api/runs", limit=50, sort="-steps")["items"]:
        return run["trace_id"]
    raise AssertionError("no run stored")


def test_every_page_speaks_in_words(app: AppTest, seeded: SeededStack) -> None:  # noqa: F811
    problems: list[str] = []
    at = page(app, "views/overview.py")
    for tab in CHARTS:
        at.segmented_control(key="overview_tab").set_value(tab).run()
        problems += _problems(f"Overview · {tab}", at)
    for path in ("views/runs.py", "views/spans.py", "views/cost.py", "views/engine.py", "views/alerts.py"):
        problems += _problems(path, page(at, path))
    at = page(at, "views/run_detail.py", run=_react_run(seeded))
    for view in VIEWS:
        at.radio(key="run_view").set_value(view).run()
        problems += _problems(f"Run detail · {view}", at)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("metric", "said"),
    [
        ("run_latency_p50", "median run latency"),
        ("tool_failure_rate", "tool failure rate"),
        ("mean_cost_usd", "mean cost"),
        ("delay_s", "delay"),
        ("ttft_p99", "ttft (p99)"),
    ],
)
def test_metric_names_read_as_words(metric: str, said: str) -> None:
    assert labels.metric_label(metric) == said
