"""Runs watched while they run (issue 20), end to end: real SDK runs against a real collector.

A slow agent (``tests.dashboard.slow_agent``: a step every 1.5 s, each step left open while it
waits) keeps running through the module; a second one is SIGKILLed after two steps and becomes
``incomplete`` after the collector's idle timeout (6 s here). The pages are checked under
Streamlit's AppTest and, for the runs page's live figures, in headless Chromium.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from selenium.common.exceptions import WebDriverException
from streamlit.testing.v1 import AppTest

from agentwatch_platform.dashboard import live, trace, ui
from agentwatch_platform.reference_agent.keys import project_key
from agentwatch_platform.reference_agent.supervisor import ProcessGroup, start_collector
from tests.dashboard import browser
from tests.dashboard.support import APP, metrics, tables
from tests.support import local_http
from tests.support.ports import free_port

pytestmark = pytest.mark.slow  # slow agents watched past an idle timeout (make test runs it, make quick not)

PROJECT = "live"
IDLE_TIMEOUT_S = 6
RUNNING, CRASHED = "slow-agent", "crashing-agent"


@dataclass
class LiveStack:
    collector: str
    key: str
    group: ProcessGroup
    running: str = ""  # trace ids
    crashed: str = ""

    def get(self, path: str, **params: Any) -> Any:
        response = local_http.get(
            self.collector + path, params=params, headers={"Authorization": f"Bearer {self.key}"}, timeout=15.0
        )
        response.raise_for_status()
        return response.json()

    def runs(self, **params: Any) -> dict[str, dict]:
        """Agent name -> its run, as the query API lists it."""
        return {r["agent"]: r for r in self.get("/api/runs", limit=50, **params)["items"]}

    def wait(self, what: str, ready: Any, timeout_s: float = 45.0) -> Any:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = ready()
            if found:
                return found
            time.sleep(0.3)
        raise AssertionError(f"{what} not seen within {timeout_s} s: {self.runs()}")


def _agent(group: ProcessGroup, name: str, env: dict[str, str], *, pause: float) -> Any:
    argv = [sys.executable, "-m", "tests.dashboard.slow_agent", "--name", name, "--steps", "400", "--pause", str(pause)]
    return group.start(name, argv, env)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveStack]:
    root = tmp_path_factory.mktemp("live-stack")
    group = ProcessGroup(root / "logs", log=lambda line: print(line, file=sys.stderr))
    try:
        collector = start_collector(
            group,
            root / "data",
            port=free_port(),
            grpc_port=0,
            env={"AGENTWATCH_RUN_IDLE_TIMEOUT_S": str(IDLE_TIMEOUT_S)},
        )
        stack = LiveStack(collector, project_key(collector, root / "data", PROJECT), group)
        env = {"AGENTWATCH_ENDPOINT": collector, "AGENTWATCH_API_KEY": stack.key}
        _agent(group, RUNNING, env, pause=1.5)
        crashing = _agent(group, CRASHED, env, pause=0.4)
        runs = stack.wait(
            "two running runs, one with 2 steps",
            lambda: (
                (r := stack.runs(status="running")).get(CRASHED, {}).get("llm_calls", 0) >= 2 and RUNNING in r and r
            ),
        )
        os.killpg(crashing.pid, signal.SIGKILL)  # mid-run: its root span and open step are never sent
        stack.running, stack.crashed = runs[RUNNING]["trace_id"], runs[CRASHED]["trace_id"]
        stack.wait(
            "the killed run incomplete",
            lambda: stack.runs(status="incomplete").get(CRASHED),
            timeout_s=IDLE_TIMEOUT_S + 30,
        )
        yield stack
    finally:
        group.stop()


def _incomplete(stack: LiveStack) -> dict:
    return stack.runs(status="incomplete")[CRASHED]


# --- AppTest ----------------------------------------------------------------------------------


@pytest.fixture
def app(stack: LiveStack, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    env = {
        "AGENTWATCH_COLLECTOR_URL": stack.collector,
        "AGENTWATCH_API_KEY": stack.key,
        "AGENTWATCH_DASHBOARD_CACHE_TTL_S": "1",
        "AGENTWATCH_DASHBOARD_OPEN": "1",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AGENTWATCH_DASHBOARD_PASSWORD", raising=False)
    return AppTest.from_file(str(APP), default_timeout=60).run()


def page(at: AppTest, path: str, **query: str) -> AppTest:
    at.query_params.update(query)
    at.switch_page(path).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def texts(at: AppTest) -> str:
    return "\n".join(
        str(e.value) for kind in ("markdown", "caption", "info", "warning", "subheader") for e in getattr(at, kind)
    )


def test_a_running_run_is_listed_with_rising_figures_and_an_incomplete_one_after_the_timeout(stack: LiveStack) -> None:
    first = stack.runs(status="running")[RUNNING]
    assert first["status"] == "running" and first["user_id"] == "watcher" and first["cost_usd"] > 0
    later = stack.wait(
        "a rising step count", lambda: (r := stack.runs()[RUNNING])["llm_calls"] > first["llm_calls"] and r
    )
    assert (
        later["status"] == "running"
        and later["total_tokens"] > first["total_tokens"]
        and later["cost_usd"] > first["cost_usd"]
    )
    crashed = _incomplete(stack)
    assert crashed["llm_calls"] >= 2 and crashed["cost_usd"] > 0
    overview = stack.get("/api/overview")
    assert (overview["running_runs"], overview["incomplete_runs"]) == (1, 1)


def test_overview_cards_count_running_and_incomplete_runs(stack: LiveStack, app: AppTest) -> None:
    at = page(app, "views/overview.py")
    shown = metrics(at)
    assert (shown["Running now"], shown["Incomplete"]) == ("1", "1")
    body = " ".join(e.proto.body for e in at.get("html"))
    assert 'href="runs?status=running"' in body and 'href="runs?status=incomplete"' in body  # each card lists its runs
    at = page(at, "views/runs.py", status="incomplete")  # where the Incomplete card links
    assert at.selectbox(key="runs_status").value == "incomplete"
    assert tables(at)["runs_table"].ids == [stack.crashed]


def test_runs_page_pins_running_runs_above_the_list(stack: LiveStack, app: AppTest) -> None:
    at = page(app, "views/runs.py")
    pinned = tables(at)["runs_running_table"]
    assert pinned.column("agent") == [RUNNING] and pinned.ids == [stack.running]
    (row,) = pinned.rows
    assert int(row["steps"]) >= 1 and row["elapsed"] not in ("0", "0 ms") and row["cost"] not in ("$0", "–")
    assert "Running now: 1" in texts(at)
    assert at.toggle(key="runs_live").value is True  # live by default
    listed = tables(at)["runs_table"]  # the list below holds every run, the running one too
    assert set(listed.ids) == {stack.running, stack.crashed} and set(listed.column("status")) == {
        "running",
        "incomplete",
    }
    at.selectbox(key="runs_status").set_value("incomplete").run()
    shown = tables(at)
    assert shown["runs_table"].ids == [stack.crashed] and len(shown["runs_running_table"].ids) == 1  # still pinned


def _tree(at: AppTest) -> list[dict[str, str]]:
    """The trace explorer's rows (column -> text), each with its span's kind (from its icon) and bar."""
    (tree,) = [t for key, t in tables(at).items() if key.startswith("tree-")]
    kinds = {icon: kind for kind, icon in trace.ICONS.items()}
    return [
        row | {"kind": kinds[row["span"].split(" ")[0]], "bar": bar["timeline"]}
        for row, bar in zip(tree.rows, tree.bars, strict=True)
    ]


def test_run_detail_of_a_running_run_draws_its_open_spans_to_now(stack: LiveStack, app: AppTest) -> None:
    at = page(app, "views/run_detail.py", run=stack.running)
    assert "Elapsed" in metrics(at) and "Running: started" in texts(at)
    assert at.toggle(key="run_live").value is True
    opened = [row for row in _tree(at) if row["status"] == live.OPEN]
    assert {row["kind"] for row in opened} == {"run", "step"}  # the run and its current step, not stored yet
    assert any(trace.OPEN_MARK in row["span"] and RUNNING in row["span"] for row in opened)
    assert all(row["bar"][2].endswith("80") for row in opened)  # drawn pale: not ended
    run = next(row for row in opened if row["kind"] == "run")
    assert run["bar"][:2] == [0.0, 1.0]  # to now: the end of the timeline


def test_run_detail_of_a_crashed_run_says_incomplete(stack: LiveStack, app: AppTest) -> None:
    crashed = _incomplete(stack)
    at = page(app, "views/run_detail.py", run=stack.crashed)
    assert "Incomplete: its root span never arrived" in texts(at) and "Duration" in metrics(at)
    assert "run_live" not in {t.key for t in at.toggle}  # nothing to refresh
    (root,) = [row for row in _tree(at) if row["status"] == live.OPEN and row["kind"] == "run"]
    assert root["duration"] == ui.fmt(crashed["duration_s"], "s")  # to its last activity


# --- headless Chromium ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dashboard_url(stack: LiveStack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    group = ProcessGroup(tmp_path_factory.mktemp("live-dashboard-logs"), log=lambda line: print(line, file=sys.stderr))
    try:
        yield browser.start_dashboards(group, stack.collector, {"dashboard": ["--api-key", stack.key, "--open"]})[
            "dashboard"
        ]
    finally:
        group.stop()


def _pinned(page: browser.Page) -> dict[str, str]:
    assert "Running now: 1" in page.text() and page.exceptions() == [], page.text()[:2000]
    (row,) = page.table_rows("runs_running_table")
    return row


def _until(ready: Any, timeout_s: float = 60.0) -> None:
    """Poll ``ready`` (a page that reruns may swap an element while it is read: try again)."""
    deadline = time.monotonic() + timeout_s
    while True:
        with contextlib.suppress(WebDriverException):
            if ready():
                return
        assert time.monotonic() < deadline, "not shown in time"
        time.sleep(0.5)


@pytest.mark.browser
def test_runs_page_in_a_browser_shows_the_running_run_with_a_growing_step_count(
    stack: LiveStack, dashboard_url: str
) -> None:
    page = browser.Page(browser.Chromium())
    try:
        first = _pinned(page.open(dashboard_url + "/runs"))
        assert first["agent"] == RUNNING and int(first["steps"]) >= 1, first
        stack.wait("two more steps", lambda: stack.runs()[RUNNING]["steps"] >= int(first["steps"]) + 2)
        later = _pinned(page.open(dashboard_url + "/runs"))
        assert int(later["steps"]) > int(first["steps"]) and later["time (UTC)"] == first["time (UTC)"], (
            first,
            later,
        )
        page.click_table_row(
            "runs_running_table", 0
        )  # opens it, live: the page refreshes on its own, so it is never still for long
        _until(
            lambda: page.driver.current_url.endswith(f"/run?run={stack.running}") and "Running: started" in page.text()
        )
        page.open(dashboard_url + "/runs?status=incomplete")  # the Overview's Incomplete card links here
        assert "Runs 1–1 of 1" in page.text() and page.table_rows("runs_table")[0]["status"] == "incomplete"
    finally:
        page.driver.quit()
