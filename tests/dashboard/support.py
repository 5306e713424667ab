"""What the dashboard tests share besides the seeded stack fixture: the stack's handle, the app's
path, the dashboard's environment, and readers of what a page shows (charts, cards)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentwatch_platform.reference_agent.demo import ProcessGroup

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
        response = httpx.get(
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
    (``light_charts.unchecked``)."""
    from streamlit import dataframe_util

    element = at.get("vega_lite_chart")[index]
    spec = json.loads(element.proto.spec)
    valid_vega_lite(spec)
    return spec, [dataframe_util.convert_arrow_bytes_to_pandas_df(d.data.data) for d in element.proto.datasets]


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
