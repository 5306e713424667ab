"""The run page in real Chromium at 1600x1000, as a person on call uses it: the span tree's deciding
columns in view, ordered by cost, folded per node; the view surviving a reload; a captured call's
prompt; an alert's link opening the costliest run.

Runs of the reference agent with content capture on (as ``agentwatch demo`` runs them), in a
project of their own on the seeded stack's collector: the other tests' figures stay as they are.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from selenium.webdriver.common.by import By

from agentwatch_api.schemas import SpanOut
from agentwatch_platform.dashboard import trace, ui
from agentwatch_platform.reference_agent.keys import project_key
from agentwatch_platform.reference_agent.supervisor import ProcessGroup
from tests.dashboard import browser
from tests.dashboard.support import SeededStack
from tests.support import local_http
from tests.support.poll import wait_until

pytestmark = pytest.mark.browser
PROJECT = "browser-tree"
QUESTIONS = ("How does continuous batching cut queue time?", "Why does a ReAct agent's cost grow with its steps?")


class Project:
    def __init__(self, collector: str, key: str) -> None:
        self.collector, self.key = collector, key

    def get(self, path: str, **params: Any) -> Any:
        headers = {"Authorization": f"Bearer {self.key}"}
        response = local_http.get(self.collector + path, params=params, headers=headers, timeout=15.0)
        response.raise_for_status()
        return response.json()


@pytest.fixture(scope="module")
def captured(seeded: SeededStack) -> Project:
    """Two research-agent runs that capture their prompts, stored in a project of their own."""
    key = project_key(seeded.collector, seeded.data_dir, PROJECT)
    env = {
        **os.environ,
        "AGENTWATCH_ENDPOINT": seeded.collector,
        "AGENTWATCH_API_KEY": key,
        "AGENTWATCH_CAPTURE_CONTENT": "true",
    }
    for seed, question in enumerate(QUESTIONS):
        argv = [sys.executable, "-m", "agentwatch", "agent", "--question", question, "--base-url"]
        argv += [seeded.engine + "/v1", "--mode", "react", "--max-steps", "6", "--seed", str(seed)]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr[-2000:]
    project = Project(seeded.collector, key)
    wait_until(
        lambda: sum(r["status"] == "ok" for r in project.get("/api/runs", limit=10)["items"]) == len(QUESTIONS),
        120,
        "the captured runs were not stored",
        interval=0.5,
    )
    return project


@pytest.fixture(scope="module")
def dashboard(captured: Project, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    group = ProcessGroup(tmp_path_factory.mktemp("tree-dashboard-logs"), log=lambda line: print(line, file=sys.stderr))
    try:
        yield browser.start_dashboards(group, captured.collector, {"tree": ["--api-key", captured.key, "--open"]})[
            "tree"
        ]
    finally:
        group.stop()


@pytest.fixture(scope="module")
def page() -> Iterator[browser.Page]:
    driver = browser.Chromium()
    driver.set_window_size(1600, 1000)
    try:
        yield browser.Page(driver)
    finally:
        driver.quit()


def _costliest(project: Project) -> dict[str, Any]:
    run = project.get("/api/runs", limit=1, sort="-cost_usd")["items"][0]
    return project.get(f"/api/runs/{run['trace_id']}")


def _tree_key(page: browser.Page) -> str:
    return next((k for k in page.table_keys() if k.startswith("tree-")), "")  # "" while a rerun swaps it


def _drawn_ids(page: browser.Page) -> list[str] | None:
    """The tree's rows as drawn (None while a rerun swaps the table)."""
    return page.driver.execute_script(
        "const t = document.querySelector('table.aw-table[data-key^=\"tree-\"]');"
        "return t ? [...t.tBodies[0].rows].map(r => r.dataset.id) : null;"
    )


def test_the_trees_deciding_columns_show_without_scrolling(
    dashboard: str, page: browser.Page, captured: Project
) -> None:
    run = _costliest(captured)
    page.open(f"{dashboard}/run?run={run['run']['trace_id']}")
    assert page.exceptions() == []
    placed = page.driver.execute_script(
        """
        const table = document.querySelector('table.aw-table[data-key^="tree-"]');
        const wrap = table.closest('.aw-table-wrap').getBoundingClientRect();
        const at = {};
        for (const th of table.tHead.rows[0].cells) {
          const r = th.getBoundingClientRect();
          at[th.dataset.column] = r.left >= wrap.left - 1 && r.right <= wrap.right + 1;
        }
        return [at, table.closest('.aw-table-wrap').scrollLeft, window.innerWidth];
        """
    )
    shown, scrolled, width = placed
    assert width >= 1500 and scrolled == 0
    assert all(shown[c] for c in ("span", "status", "cost", "duration", "start", "step")), shown
    rows = page.table_rows(_tree_key(page))
    assert rows[0]["cost"] == ui.fmt(run["run"]["cost_usd"], "USD")  # the run's row: everything under it
    engine = [r for r in rows if r["span"].startswith(trace.ICONS["engine"])]
    assert engine and all(" 0 in / 0 out" not in r["detail"] for r in engine), engine[:3]


def test_cost_order_puts_the_costliest_step_and_call_first(
    dashboard: str, page: browser.Page, captured: Project
) -> None:
    run = _costliest(captured)
    spans = [SpanOut(**s) for s in run["spans"]]
    page.open(f"{dashboard}/run?run={run['run']['trace_id']}")
    page.click(
        lambda: page.driver.find_element(
            By.XPATH, "//div[contains(@class, 'st-key-tree_sort')]//button[normalize-space()='Cost']"
        )
    )
    expected = [i.span.span_id for i in trace.tree(spans, sort="cost")]
    wait_until(lambda: "-cost-" in _tree_key(page), 60, "the tree was not ordered by cost", interval=0.3)
    page.settle()
    assert _drawn_ids(page)[:10] == expected[:10]
    costliest_call = max((s for s in spans if s.kind == "llm"), key=lambda s: s.cost_usd)
    first_call = next(i.span for i in trace.tree(spans, sort="cost") if i.span.kind == "llm")
    assert first_call.span_id == costliest_call.span_id or first_call.step_index != costliest_call.step_index


def test_a_fold_mark_folds_that_span_alone(dashboard: str, page: browser.Page, captured: Project) -> None:
    run = _costliest(captured)
    spans = [SpanOut(**s) for s in run["spans"]]
    page.open(f"{dashboard}/run?run={run['run']['trace_id']}")
    items = trace.tree(spans)
    step = next(i for i in items if i.span.kind == "step" and i.children)
    before = _drawn_ids(page)
    page.click(lambda: page.driver.find_element(By.CSS_SELECTOR, f'tr[data-id="{step.span.span_id}"] .aw-fold'))
    folded = [i.span.span_id for i in trace.tree(spans, toggled=frozenset({step.span.span_id}))]
    wait_until(lambda: _drawn_ids(page) == folded, 60, "the fold mark did not fold its span", interval=0.3)
    assert len(folded) < len(before) and "span=" not in page.driver.current_url  # folding selects nothing
    page.choose("Steps", lambda: "view=steps" in page.driver.current_url)  # other reruns leave the fold as it is
    page.choose("Trace", lambda: "view=" not in page.driver.current_url)  # (a click is read once)
    wait_until(lambda: _drawn_ids(page) == folded, 60, "a later rerun undid the fold", interval=0.3)


def test_the_run_view_survives_a_reload(dashboard: str, page: browser.Page, captured: Project) -> None:
    run = _costliest(captured)
    page.open(f"{dashboard}/run?run={run['run']['trace_id']}")
    page.click_label("Steps")
    wait_until(lambda: "view=steps" in page.driver.current_url, 30, "the view is not in the URL", interval=0.3)
    page.driver.refresh()
    page.settle()
    assert "steps_table" in page.table_keys() and page.exceptions() == []
    chosen = page.driver.find_element(By.XPATH, "//label[contains(., 'Steps')]//input")
    assert chosen.is_selected()


def test_a_captured_call_shows_its_prompt_as_chat_messages(
    dashboard: str, page: browser.Page, captured: Project
) -> None:
    run = _costliest(captured)
    llm = max((s for s in run["spans"] if s["kind"] == "llm"), key=lambda s: s["cost_usd"])
    assert llm["text_state"] == "captured", llm["text_state"]
    page.open(f"{dashboard}/run?run={run['run']['trace_id']}&span={llm['span_id']}")
    body = page.text()
    assert "Prompt (" in body and "Completion (" in body and "Not captured" not in body
    question = next(q for q in QUESTIONS if q in (llm.get("input_text") or ""))
    assert question in body


def test_an_alerts_costliest_run_link_opens_that_run(dashboard: str, page: browser.Page, captured: Project) -> None:
    """The link an alert notification carries (``alerts.evaluator``): window and scope, the run found on opening."""
    runs = captured.get("/api/runs", limit=10, sort="-cost_usd")["items"]
    start, end = min(r["start_time"] for r in runs) - 60, max(r["end_time"] for r in runs) + 60
    agent = runs[0]["agent"]
    page.open(f"{dashboard}/run?costliest=1&project={PROJECT}&start={int(start)}&end={int(end) + 1}&agent={agent}")
    assert page.exceptions() == []
    assert f"Trace {runs[0]['trace_id']}" in page.text()
    assert f"run={runs[0]['trace_id']}" in page.driver.current_url and "costliest" not in page.driver.current_url
    assert f"The most expensive of {len(runs)} runs" in page.text()


@pytest.mark.parametrize("view", ["trace", "steps", "spans"])
def test_the_run_views_cut_no_cell(dashboard: str, page: browser.Page, captured: Project, view: str) -> None:
    """Every value whole ("sim-larg" was a clipped grid cell); no canvas grid, whose cells clip."""
    run = _costliest(captured)
    page.open(f"{dashboard}/run?run={run['run']['trace_id']}&view={view}")
    assert page.exceptions() == [] and page.count('[data-testid="stDataFrame"]') == 0
    cut = page.driver.execute_script(
        """
        return [...document.querySelectorAll('table.aw-table td:not(.aw-timeline)')]
          .filter(td => td.scrollWidth > td.clientWidth + 1).map(td => td.textContent);
        """
    )
    assert cut == [], cut[:5]
    assert page.truncated() == []  # the figures' cards too
