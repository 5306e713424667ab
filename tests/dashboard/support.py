"""What the dashboard tests share besides the seeded stack fixture: the stack's handle, the app's
path, the dashboard's environment, and readers of what a page shows (charts, cards)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agentwatch_platform.reference_agent.supervisor import ProcessGroup
from tests.support import local_http

PROJECT = "dash"

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"


@dataclass
class SeededStack:
    collector: str
    key: str
    engine: str
    group: ProcessGroup
    data_dir: Path
    runs: int
    facts: dict[str, Any] = field(default_factory=dict)

    def get(self, path: str, **params: Any) -> Any:
        response = local_http.get(
            self.collector + path, params=params, headers={"Authorization": f"Bearer {self.key}"}, timeout=15.0
        )
        response.raise_for_status()
        return response.json()


def dashboard_env(stack: SeededStack, **extra: str) -> dict[str, str]:
    return {
        "AGENTWATCH_COLLECTOR_URL": stack.collector,
        "AGENTWATCH_API_KEY": stack.key,
        "AGENTWATCH_DASHBOARD_CACHE_TTL_S": "1",
        **extra,
    }


SCREENSHOTS = pytest.StashKey[Path]()


def chart(at: Any, index: int = 0) -> tuple[dict[str, Any], list[Any]]:
    """A page's ``index``-th Vega-Lite chart as AppTest holds it: its spec and its data sets
    (Streamlit sends a chart's data apart from its spec, as Arrow). The spec is checked against
    Vega-Lite's JSON schema here: the dashboard draws without Altair's validation
    (``run_charts.unchecked``)."""
    from streamlit import dataframe_util

    element = at.get("vega_lite_chart")[index]
    spec = json.loads(element.proto.spec)
    valid_vega_lite(spec)
    return spec, [dataframe_util.convert_arrow_bytes_to_pandas_df(d.data.data) for d in element.proto.datasets]


@dataclass(frozen=True)
class Table:
    """A ``dashboard.tables`` table as the page sent it: column keys and labels, each row's id,
    link and cells (column key -> the text shown)."""

    key: str
    columns: list[str]
    labels: list[str]
    ids: list[str]
    hrefs: list[str | None]
    rows: list[dict[str, str]]
    hidden: list[str]
    sort: tuple[str, bool] | None
    bars: list[dict[str, list]]  # per row: timeline column -> [start, width, colour] (fractions of the axis)
    depths: list[int]
    pager: list[int] | None  # [page, pages]

    def column(self, key: str) -> list[str]:
        return [row[key] for row in self.rows]


def tables(at: Any) -> dict[str, Table]:
    """The page's tables (``dashboard.tables``) by key."""
    found: dict[str, Table] = {}
    for element in at.get("bidi_component"):
        if element.proto.component_name != "agentwatch.table":
            continue
        data = json.loads(element.proto.bytes)  # the table goes to the browser as JSON bytes
        columns = [c["key"] for c in data["columns"]]
        sort = data["sort"]
        found[data["key"]] = Table(
            key=data["key"],
            columns=columns,
            labels=[c["label"] for c in data["columns"]],
            ids=[r["id"] for r in data["rows"]],
            hrefs=[r.get("href") for r in data["rows"]],
            rows=[dict(zip(columns, r["cells"], strict=True)) for r in data["rows"]],
            hidden=data["hidden"],
            sort=(sort["column"], sort["descending"]) if sort else None,
            bars=[r.get("bars", {}) for r in data["rows"]],
            depths=[r.get("depth", 0) for r in data["rows"]],
            pager=data.get("pager"),
        )
    return found


def money(cell: str) -> float:
    """A table's money cell ("$1,234.000001") as a number."""
    return float(cell.lstrip("$").replace(",", ""))


def valid_vega_lite(spec: dict[str, Any]) -> None:
    """Raise ``jsonschema``'s error where ``spec`` is not valid Vega-Lite (Altair's own schema)."""
    from altair.utils.schemapi import validate_jsonschema
    from altair.vegalite.v6.schema import load_schema

    validate_jsonschema(spec, load_schema())


def metrics(at: Any) -> dict[str, str]:
    """Every figure a page shows, label -> value: its ``st.metric`` cards and its HTML cards
    (``dashboard.cards``: the overview's headlines)."""
    shown = {m.label: m.value for m in at.metric}
    for element in at.get("html"):
        shown |= html_cards(element.proto.body)
    return shown


def html_cards(body: str) -> dict[str, str]:
    """label -> value of the cards in a ``dashboard.cards`` block."""
    from html.parser import HTMLParser

    from agentwatch_platform.dashboard import cards

    found: dict[str, str] = {}

    class Reader(HTMLParser):
        field = ""
        label = ""

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            classes = dict(attrs).get("class") or ""
            self.field = {cards.LABEL_CLASS: "label", cards.VALUE_CLASS: "value"}.get(classes, "")

        def handle_data(self, data: str) -> None:
            if self.field == "label":
                self.label = data
            elif self.field == "value":
                found[self.label] = data
            self.field = ""

    Reader().feed(body)
    return found


@dataclass(frozen=True)
class SvgChart:
    """One chart of a ``dashboard.svg_charts`` block as the browser gets it: its title, its drawing
    (parsed: the data URI must hold well-formed SVG), its hover texts and legend."""

    title: str
    svg: Any
    tips: list[str]
    legend: list[str]

    def texts(self) -> list[str]:
        return [t.text or "" for t in self.svg.iter("{http://www.w3.org/2000/svg}text")]


def svg_charts(at: Any) -> list[SvgChart]:
    """Every SVG chart a page drew, in order (``st.html`` blocks of ``dashboard.svg_charts``)."""
    import base64
    import xml.etree.ElementTree as ET
    from html.parser import HTMLParser

    from agentwatch_platform.dashboard import svg_charts as charts_module

    found: list[SvgChart] = []

    class Reader(HTMLParser):
        field = ""

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            a = dict(attrs)
            classes = (a.get("class") or "").split()
            if charts_module.CHART_CLASS in classes:
                found.append(SvgChart("", None, [], []))
            elif "aw-title" in classes or (tag == "span" and found and found[-1].svg is not None):
                self.field = "title" if "aw-title" in classes else "legend"
            elif tag == "img" and found and (a.get("src") or "").startswith("data:image/svg+xml;base64,"):
                data = base64.b64decode((a["src"] or "").split(",", 1)[1])
                object.__setattr__(found[-1], "svg", ET.fromstring(data))
            elif charts_module.BAND_CLASS in classes and found:
                found[-1].tips.append(a.get("data-tip") or "")

        def handle_data(self, data: str) -> None:
            if self.field == "title":
                object.__setattr__(found[-1], "title", found[-1].title + data)
            elif self.field == "legend":
                found[-1].legend.append(data)
            self.field = ""

    for element in at.get("html"):
        Reader().feed(element.proto.body)
    return found


def svg_of(block: str) -> SvgChart:
    """The one chart of an ``svg_charts`` chart's HTML, read as the page tests read a page's."""

    class Element:
        class proto:  # noqa: N801 - shaped as AppTest's html element
            body = block

    class Page:
        @staticmethod
        def get(kind: str) -> list[Any]:
            return [Element] if kind == "html" else []

    (chart,) = svg_charts(Page)
    return chart
