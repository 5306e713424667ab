"""The Spans page and the breakdowns that link to it, under Streamlit's AppTest, against the live
collector seeded with reference-agent runs (tool failures and timeouts included)."""

from __future__ import annotations

import html
import re
import time
from urllib.parse import parse_qs, urlsplit

import pytest
from streamlit.testing.v1 import AppTest

from agentwatch_platform.dashboard import breakdowns, ui
from tests.dashboard.support import APP, SeededStack, dashboard_env, tables


@pytest.fixture
def app(seeded: SeededStack, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    for name, value in dashboard_env(seeded, AGENTWATCH_DASHBOARD_OPEN="1").items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AGENTWATCH_DASHBOARD_PASSWORD", raising=False)
    return AppTest.from_file(str(APP), default_timeout=60).run()


def page(at: AppTest, path: str, **query: str) -> AppTest:
    at.query_params.update(query)
    at.switch_page(path).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def bar_links(at: AppTest, title: str) -> dict[str, str]:
    """label -> href of the bars under ``title`` in a ``dashboard.breakdowns`` block."""
    for element in at.get("html"):
        body = element.proto.body
        if f'<div class="aw-title">{html.escape(title)}</div>' not in body:
            continue
        block = body.split(f'<div class="aw-title">{html.escape(title)}</div>', 1)[1].split(
            '<div class="aw-bar-list">'
        )[0]
        found = re.findall(
            r'<a class="aw-bar-row" href="([^"]+)"[^>]*><span class="aw-bar-label">([^<]*)</span>', block
        )
        return {html.unescape(label): html.unescape(href) for href, label in found}
    raise AssertionError(f"no bar list {title!r}")


def query_of(href: str) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlsplit(href).query).items()}


def test_spans_page_groups_by_tool_and_lists_spans_linked_to_their_runs(app: AppTest, seeded: SeededStack) -> None:
    at = page(app, "views/spans.py")
    groups = tables(at)["spans_groups_table"]
    assert groups.labels == [
        "Group",
        "Spans",
        "Failures",
        "Failure rate",
        "Runs",
        "Latency p50",
        "Latency p95",
        "Tokens",
        "Cost",
    ]
    expected = seeded.get("/api/spans/groups", by="tool")["groups"]
    assert {r["key"]: r["spans"] for r in groups.rows} == {g["key"]: ui.fmt(g["spans"], "count") for g in expected}
    assert all(
        query_of(h)["tool"] == r["key"] and query_of(h)["by"] == "tool"
        for h, r in zip(groups.hrefs, groups.rows, strict=True)
    )
    listed = tables(at)["spans_table"]
    assert "Tool / model" in listed.labels and listed.ids
    trace, span = listed.ids[0].split("/")
    assert listed.hrefs[0] == f"./run?run={trace}&span={span}"


def test_a_breakdown_link_opens_the_filtered_spans(app: AppTest, seeded: SeededStack) -> None:
    at = page(app, "views/spans.py", tool="fetch", failed="true", by="error_type")
    errors = {r["key"]: r for r in tables(at)["spans_groups_table"].rows}
    expected = seeded.get("/api/spans/groups", by="error_type", tool="fetch", failed="true")["groups"]
    assert set(errors) == {breakdowns.short_error(g["key"]) for g in expected} and expected
    assert at.selectbox(key="spans_by").value == "Error type" and at.toggle(key="spans_failed").value
    total = seeded.get("/api/spans", tool="fetch", failed="true", limit=1)["total"]
    assert f"Spans: {total:,}" in [s.value for s in at.subheader]
    assert set(tables(at)["spans_table"].column("what")) == {"fetch"}
    assert set(tables(at)["spans_table"].column("status")) <= {"error", "timeout"}


def test_grouping_by_an_attribute_and_a_typo_in_a_bound(app: AppTest, seeded: SeededStack) -> None:
    at = page(app, "views/spans.py")
    at.selectbox(key="spans_by").set_value("Attribute…").run()
    at.text_input(key="spans_by_attribute").set_value("agentwatch.llm.model_tier").run()
    assert not at.exception
    expected = seeded.get("/api/spans/groups", by="attribute:agentwatch.llm.model_tier")["groups"]
    assert expected  # the reference agent's router names the tier of every LLM call
    assert {r["key"] for r in tables(at)["spans_groups_table"].rows} == {g["key"] or "(none)" for g in expected}
    at.text_input(key="spans_min_cost").set_value("lots").run()
    assert any("Min cost (USD)" in str(e.value) for e in at.error)


def test_overview_quality_tab_answers_which_tool_fails_most(app: AppTest, seeded: SeededStack) -> None:
    at = page(app, "views/overview.py")
    at.session_state["overview_tab"] = "Quality and failures"
    at.run()
    tools = bar_links(at, "Failed tool calls by tool")
    expected = seeded.get("/api/spans/groups", by="tool", kind="tool", sort="-failures")["groups"]
    assert list(tools) == [g["key"] for g in expected]  # most failures first
    assert query_of(tools[expected[0]["key"]]) | {} == {
        "kind": "tool",
        "failed": "true",
        "by": "error_type",
        "tool": expected[0]["key"],
    }
    errors = bar_links(at, "Failures by error type")
    assert "TimeoutError" in errors and query_of(errors["TimeoutError"])["error_type"] == "TimeoutError"


def test_cost_page_cost_by_user_model_and_step_link_to_spans(app: AppTest, seeded: SeededStack) -> None:
    at = page(app, "views/cost.py")
    users = bar_links(at, "Cost by user")
    expected = [g for g in seeded.get("/api/spans/groups", by="user", sort="-cost_usd")["groups"] if g["cost_usd"] > 0]
    assert list(users) == [g["key"] or "(none)" for g in expected][:10]
    assert all(query_of(h)["by"] == "model" for h in users.values())
    steps = bar_links(at, "Cost by step")
    assert steps and all("step" in query_of(h) for h in steps.values())
    assert bar_links(at, "Cost by model")


def test_a_cost_by_model_link_keeps_the_range_and_sets_the_sidebars_model(app: AppTest, seeded: SeededStack) -> None:
    at = page(app, "views/cost.py", range="24h")
    model, href = next(iter(bar_links(at, "Cost by model").items()))
    query = query_of(href)
    assert query == {"model": model, "range": "24h", "by": "step"}
    at = page(app, "views/spans.py", **query)
    assert at.selectbox(key="aw_model").value == model and at.selectbox(key="aw_range").value == "Last 24 hours"
    assert at.selectbox(key="spans_by").value == "Step" and at.query_params["range"] == "24h"  # the sidebar's stay
    assert set(tables(at)["spans_table"].column("what")) == {model}
    expected = seeded.get("/api/spans/groups", by="step", model=model, start=time.time() - 86_400)["groups"]
    assert {r["key"] for r in tables(at)["spans_groups_table"].rows} == {g["key"] for g in expected}
