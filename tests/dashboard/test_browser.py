"""Every page of a running ``agentwatch dashboard`` in headless Chromium, against the seeded stack.

Each page must render without a Streamlit exception box and show its key figures; a
screenshot of each is saved to the folder printed in the test summary.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from agentwatch_api.schemas import SpanOut
from agentwatch_platform.dashboard import breakdowns, trace, ui
from agentwatch_platform.reference_agent.supervisor import ProcessGroup
from tests.dashboard import browser
from tests.dashboard.support import PROJECT, SCREENSHOTS, SeededStack
from tests.support.poll import wait_until

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def servers(seeded: SeededStack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """One dashboard in open local mode, one that asks for a project key."""
    group = ProcessGroup(tmp_path_factory.mktemp("dashboard-logs"), log=lambda line: print(line, file=sys.stderr))
    try:
        yield browser.start_dashboards(
            group, seeded.collector, {"open": ["--api-key", seeded.key, "--open"], "login": []}
        )
    finally:
        group.stop()


@pytest.fixture(scope="module")
def page() -> Iterator[browser.Page]:
    driver = browser.Chromium()
    try:
        yield browser.Page(driver)
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def shots(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("dashboard-screenshots")
    request.config.stash[SCREENSHOTS] = folder
    print(f"dashboard screenshots: {folder}")
    return folder


def _react_run(seeded: SeededStack) -> dict:
    for run in seeded.get("/api/runs", limit=50, sort="-steps")["items"]:
        detail = seeded.get(f"/api/runs/{run['trace_id']}")
        root = next(s for s in detail["spans"] if s["kind"] == "run")
        if "react" in json.loads(root["attributes"].get("agentwatch.run.tags", "[]")):
            return detail
    raise AssertionError("no ReAct run stored")


def _listed(page: browser.Page) -> list[str] | None:
    """The trace ids the runs table shows (None while a rerun swaps it)."""
    try:
        return [r["trace id"] for r in page.table_rows("runs_table")]
    except WebDriverException:
        return None


def _check(page: browser.Page, shots: Path, name: str) -> dict[str, str]:
    assert page.exceptions() == [], f"{name}: Streamlit exception box: {page.exceptions()}"
    assert ui.OPEN_MODE_BANNER in page.text(), f"{name}: the open-mode banner is missing"
    assert f"Project: {PROJECT}" in page.sidebar_text(), f"{name}: the project is not named"
    assert page.truncated() == [], f"{name}: metric values cut off: {page.truncated()}"
    path = page.screenshot(shots, name)
    print(f"{name}: {path}")
    return page.metrics()


def _more_filters_filter_and_say_so(page: browser.Page, seeded: SeededStack, listed: list[dict]) -> None:
    """The runs page's More filters popover: its widgets drawn once opened, a typed user id filters
    with it open, and closed the page says which filter is set, which still applies."""
    assert page.count(".st-key-runs_user input") == 0  # not drawn while closed
    page.driver.find_element(By.XPATH, "//button[contains(., 'More filters')]").click()
    wait_until(lambda: page.count(".st-key-runs_user input") == 1, 30, "the popover's widgets were not drawn")
    user = next(r["user_id"] for r in listed if r["user_id"])
    page.driver.find_element(By.CSS_SELECTOR, ".st-key-runs_user input").send_keys(user, Keys.ENTER)
    mine = [r["trace_id"] for r in seeded.get("/api/runs", user_id=user, limit=50)["items"]]
    assert 0 < len(mine) < seeded.runs
    wait_until(lambda: _listed(page) == mine, 30, "a user id typed in More filters did not filter the runs")
    assert page.count(".st-key-runs_user input") == 1  # the popover stays open while its filters are set
    page.driver.find_element(By.CSS_SELECTOR, "h1").click()  # a click outside closes it
    wait_until(lambda: page.count(".st-key-runs_user input") == 0, 30, "a click outside did not close the popover")
    assert f"More filters set: User id {user}" in page.settle().text()
    assert _listed(page) == mine and page.exceptions() == []


def test_every_page_renders_with_its_key_figures(
    servers: dict[str, str], page: browser.Page, shots: Path, seeded: SeededStack
) -> None:
    base = servers["open"]
    figures = seeded.get("/api/overview")["figures"]
    shown = _check(page.open(base + "/"), shots, "overview")
    assert shown["Runs"] == str(seeded.runs) and shown["Cost"] == ui.fmt(figures["cost_usd"]["value"], "USD")
    assert page.count(".aw-chart img") == 5 and page.count('[data-testid="stVegaLiteChart"]') == 0  # 4 + cost per day
    assert "Month to date" in shown and "Projected month end" in shown
    bands = page.driver.find_elements(By.CSS_SELECTOR, ".aw-charts > .aw-chart:first-child .aw-hover")  # cost by model
    assert len(bands) > 1  # a band per time bucket, whose hover shows the bucket's values
    ActionChains(page.driver).move_to_element(bands[len(bands) // 2]).perform()
    tip = page.driver.execute_script("return getComputedStyle(arguments[0], '::after').content", bands[len(bands) // 2])
    assert "UTC" in tip and "$" in tip, tip
    costliest = seeded.get("/api/runs", sort="-cost_usd", limit=1)["items"][0]
    page.click(lambda: page.driver.find_element(By.CSS_SELECTOR, ".aw-costliest a"))  # the costliest run: one click
    assert page.driver.current_url.endswith(f"/run?run={costliest['trace_id']}") and "Run detail" in page.text()

    _check(page.open(base + "/runs"), shots, "runs")
    assert f"of {seeded.runs:,}" in page.text() and page.count('[data-testid="stDataFrame"]') == 0
    listed = seeded.get("/api/runs", limit=50)["items"]
    rows = page.table_rows("runs_table")
    assert [r["trace id"] for r in rows] == [r["trace_id"] for r in listed]
    assert rows[0]["cost"] == ui.fmt(listed[0]["cost_usd"], "USD")
    page.driver.find_element(By.XPATH, "//table[@data-key='runs_table']//th/button[text()='cost']").click()
    by_cost = [r["trace_id"] for r in seeded.get("/api/runs", sort="-cost_usd", limit=50)["items"]]
    wait_until(lambda: _listed(page) == by_cost, 30, "a click on the cost header did not sort every run by cost")
    header = page.driver.find_element(By.XPATH, "//table[@data-key='runs_table']//th[@data-column='cost']")
    assert header.text == "cost ↓"  # most expensive first; the Sort by box says the same
    sort_box = page.driver.find_element(By.CSS_SELECTOR, ".st-key-runs_sort input")
    assert sort_box.get_attribute("value") == "Cost"
    page.click_table_row("runs_table", 0)  # a click on a run opens it
    assert page.driver.current_url.endswith(f"/run?run={by_cost[0]}") and "Run detail" in page.text()

    _more_filters_filter_and_say_so(page.open(base + "/runs"), seeded, listed)

    react = _react_run(seeded)
    shown = _check(page.open(f"{base}/run?trace_id={react['run']['trace_id']}"), shots, "run_detail")
    assert shown["Steps"] == str(react["run"]["steps"]) and "Fitted growth" not in page.text()  # other tab
    assert "Fitted growth: quadratic" in page.click_label("Context growth").text()
    page.screenshot(shots, "run_detail_growth")

    cost = seeded.get("/api/cost")
    shown = _check(page.open(base + "/cost"), shots, "cost")
    assert shown["Cost, last hour (USD)"] == ui.fmt(cost["total_usd"], "USD")
    assert "Estimated cost (USD)" not in shown  # the what-if is estimated once its expander is opened
    page.driver.find_element(By.XPATH, "//summary[contains(., 'What if')]").click()
    wait_until(lambda: "Estimated cost (USD)" in page.metrics(), 30, "opening What if showed no estimate")
    whatif = seeded.get("/api/whatif", policy="route", step="research", model="sim-small")
    assert page.settle().metrics()["Estimated cost (USD)"] == ui.fmt(whatif["estimate_usd"], "USD")

    shown = _check(page.open(base + "/engine"), shots, "engine")
    assert shown["Generation tokens/s (mean)"].endswith("tok/s") and "sim-engine" in page.text()

    shown = _check(page.open(base + "/alerts"), shots, "alerts")
    assert int(shown["Firing now"]) + int(shown["Resolved, last hour"]) >= 1 and "dash-traffic-seen" in page.text()


def test_login_asks_for_a_project_key(
    servers: dict[str, str], page: browser.Page, shots: Path, seeded: SeededStack
) -> None:
    page.open(servers["login"] + "/")
    assert "Project API key" in page.text() and not page.metrics() and page.exceptions() == []
    assert ui.OPEN_MODE_BANNER not in page.text()
    page.screenshot(shots, "login")
    field = page.driver.find_element(By.CSS_SELECTOR, 'input[type="password"]')
    field.send_keys(seeded.key)
    page.click(lambda: page.driver.find_element(By.XPATH, "//button[.//p[text()='Log in']]"))
    assert page.metrics().get("Runs") == str(seeded.runs) and page.exceptions() == []
    wait_until(lambda: page.driver.get_cookie(ui.SESSION_COOKIE), 30.0, "no session cookie after the login")
    page.driver.refresh()
    page.settle()
    assert page.metrics().get("Runs") == str(seeded.runs), "a reload forgot the login"
    run = seeded.get("/api/runs", limit=1)["items"][0]
    page.open(f"{servers['login']}/run?run={run['trace_id']}")  # a deep link, as an alert's, in the same browser
    assert "Project API key" not in page.text() and "Run detail" in page.text() and page.exceptions() == []
    page.driver.find_element(By.XPATH, "//button[.//p[text()='Log out']]").click()
    wait_until(
        lambda: not (page.driver.get_cookie(ui.SESSION_COOKIE) or {}).get("value"),
        30.0,
        "the cookie outlived the logout",
    )
    page.settle()
    page.driver.refresh()
    page.settle()
    assert "Project API key" in page.text(), "logged out, a reload must ask again"


def _failed_tool(seeded: SeededStack) -> tuple[dict, dict]:
    """A run with a failed tool call that has an error message, and that tool span."""
    for run in seeded.get("/api/runs", limit=50)["items"]:
        if run["tool_failures"]:
            detail = seeded.get(f"/api/runs/{run['trace_id']}")
            for span in detail["spans"]:
                if span["kind"] == "tool" and span["status"] == "error" and span["status_message"]:
                    return detail, span
    raise AssertionError("no failed tool call with a message stored")


def test_a_click_on_a_span_opens_its_panel_with_the_full_error(
    servers: dict[str, str], page: browser.Page, shots: Path, seeded: SeededStack
) -> None:
    detail, failed = _failed_tool(seeded)
    trace_id = detail["run"]["trace_id"]
    _check(page.open(f"{servers['open']}/run?run={trace_id}"), shots, "trace_explorer")
    assert "Select a span" in page.text()
    page.click_label("Failures only")
    spans = [SpanOut(**s) for s in detail["spans"]]
    shown = [item.span for item in trace.tree(spans, failures=True)]  # the failures and the path to each
    tree = next(k for k in page.table_keys() if k.startswith("tree-"))
    assert len(page.table_rows(tree)) == len(shown)
    page.click_table_row(tree, next(i for i, s in enumerate(shown) if s.span_id == failed["span_id"]))
    assert page.exceptions() == []
    assert f"span={failed['span_id']}" in page.driver.current_url
    body = page.text()
    assert f"{failed['error_type'] or 'error'}: {failed['status_message']}" in body, body[-3000:]
    assert f"Tool {failed['tool_name']}" in body and "Events (1)" in body and "exception.stacktrace" in body
    assert "Span fields" in body and "Attributes (" in body
    page.screenshot(shots, "trace_explorer_span")


def test_a_click_on_a_timeline_bar_opens_its_span(
    servers: dict[str, str], page: browser.Page, shots: Path, seeded: SeededStack
) -> None:
    detail, failed = _failed_tool(seeded)
    page.open(f"{servers['open']}/run?run={detail['run']['trace_id']}")
    bar = page.driver.find_element(By.CSS_SELECTOR, f'tr[data-id="{failed["span_id"]}"] .aw-bar')
    assert bar.value_of_css_property("background-color") == "rgba(214, 39, 40, 1)"  # a failed span's bar is red
    page.driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", bar)
    page.act(lambda: ActionChains(page.driver).move_to_element(bar).click().perform())
    assert page.exceptions() == [] and f"span={failed['span_id']}" in page.driver.current_url
    assert f"{failed['error_type'] or 'error'}: {failed['status_message']}" in page.text()
    selected = page.driver.find_elements(By.CSS_SELECTOR, "tr.aw-selected")
    assert [r.get_attribute("data-id") for r in selected] == [failed["span_id"]]  # the tree shows which
    page.screenshot(shots, "timeline_click")


def test_a_deep_link_opens_the_span(
    servers: dict[str, str], page: browser.Page, shots: Path, seeded: SeededStack
) -> None:
    detail, failed = _failed_tool(seeded)
    trace_id = detail["run"]["trace_id"]
    _check(page.open(f"{servers['open']}/run?run={trace_id}&span={failed['span_id']}"), shots, "deep_link_tool")
    assert failed["status_message"] in page.text() and failed["span_id"] in page.text()
    engine = {s["parent_span_id"]: s for s in detail["spans"] if s["kind"] == "engine"}
    llm = next(s for s in detail["spans"] if s["kind"] == "llm" and s["ttft_s"] is not None and s["span_id"] in engine)
    queue = llm["queue_s"] if llm["queue_s"] is not None else engine[llm["span_id"]]["queue_s"]
    _check(
        page.open(f"{servers['open']}/?run={trace_id}&span={llm['span_id']}"), shots, "deep_link_llm"
    )  # from the root too
    shown = page.metrics()
    assert "/run?" in page.driver.current_url and f"span={llm['span_id']}" in page.driver.current_url
    assert shown["TTFT"] == ui.fmt(llm["ttft_s"], "s") and shown["Engine queue"] == ui.fmt(queue, "s")
    assert shown["Input tokens"] == f"{llm['input_tokens']:,}" and shown["Cost"] == ui.fmt(llm["cost_usd"], "USD")


def test_which_tool_fails_most_in_two_clicks_from_the_overview(
    servers: dict[str, str], page: browser.Page, shots: Path, seeded: SeededStack
) -> None:
    """Click 1: the Overview's quality tab shows failed tool calls by tool, most first; click 2: the
    top bar opens the Spans page with that tool's failed calls, grouped by error type."""
    top = seeded.get("/api/spans/groups", by="tool", kind="tool", sort="-failures")["groups"][0]
    page.open(servers["open"] + "/")
    page.driver.find_element(By.XPATH, "//button[contains(., 'Quality and failures')]").click()
    wait_until(lambda: page.count(".aw-bar-row") > 0, 30, "the quality tab showed no breakdown")
    page.settle()
    first = page.driver.find_element(By.CSS_SELECTOR, ".aw-bar-row")
    assert first.find_element(By.CSS_SELECTOR, ".aw-bar-label").text == top["key"]
    assert first.find_element(By.CSS_SELECTOR, ".aw-bar-value").text.startswith(f"{top['failures']:,} of")
    page.screenshot(shots, "overview_failures_by_tool")
    _check(page.click(lambda: first), shots, "spans_failed_tool")
    assert "/spans" in page.driver.current_url and "Spans" in page.text()
    errors = seeded.get("/api/spans/groups", by="error_type", tool=top["key"], failed="true")["groups"]
    assert {r["Group"] for r in page.table_rows("spans_groups_table")} == {
        breakdowns.short_error(g["key"]) for g in errors
    }
    assert {r["Tool / model"] for r in page.table_rows("spans_table")} == {top["key"]}


def _follow(page: browser.Page, text: str) -> browser.Page:
    """Click the page's link whose text is ``text``; a link that opens a tab of its own is followed
    there (the run's tab is closed, so the next page is the only one)."""
    before = set(page.driver.window_handles)
    link = page.driver.find_element(By.XPATH, f"//a[normalize-space(.) = '{text}']")
    page.driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", link)
    link.click()
    left = lambda: set(page.driver.window_handles) != before or "/run?" not in page.driver.current_url  # noqa: E731
    wait_until(left, 30, f"the link {text!r} opened nothing")
    if opened := set(page.driver.window_handles) - before:
        page.driver.close()
        page.driver.switch_to.window(opened.pop())
    wait_until(lambda: "/run?" not in page.driver.current_url, 30, f"the link {text!r} did not leave the run")
    return page.settle()


def _row_ids(page: browser.Page, key: str) -> list[str]:
    """The table's rows' ids, read in one script (a rerun cannot swap the table halfway)."""
    return page.driver.execute_script(
        'return [...document.querySelectorAll(`table.aw-table[data-key="${arguments[0]}"] tbody tr`)]'
        ".map(tr => tr.dataset.id)",
        key,
    )


def test_a_runs_user_and_session_open_from_the_run(
    servers: dict[str, str], page: browser.Page, shots: Path, seeded: SeededStack
) -> None:
    """From a run's page, its user link opens the user's page (that user's figures, the run among
    its runs) and its session link the session's page (its runs in order, the run among them)."""
    run = next(r for r in seeded.get("/api/runs", limit=50)["items"] if r["user_id"] and r["session_id"])
    user = seeded.get("/api/users", user_id=run["user_id"])["items"]
    session = seeded.get(f"/api/sessions/{run['session_id']}")
    assert [u["user_id"] for u in user] == [run["user_id"]]
    run_page = f"{servers['open']}/run?run={run['trace_id']}"

    _check(page.open(run_page), shots, "run_for_people")
    shown = _check(_follow(page, f"user {run['user_id']}"), shots, "user_page")
    assert "/users?" in page.driver.current_url and f"User {run['user_id']}" in page.text()
    assert shown["Cost"] == ui.fmt(user[0]["cost_usd"], "USD") and shown["Runs"] == f"{user[0]['runs']:,}"
    assert shown["Sessions"] == f"{user[0]['sessions']:,}"
    assert run["trace_id"] in _row_ids(page, "user_runs")

    _check(page.open(run_page), shots, "run_for_people")
    _check(_follow(page, f"session {run['session_id']}"), shots, "session_page")
    assert "/sessions?" in page.driver.current_url and f"Session {run['session_id']}" in page.text()
    assert ui.fmt(session["cost_usd"], "USD") in page.text() and f"User {run['user_id']}" in page.text()
    assert _row_ids(page, "session_runs") == [t["run"]["trace_id"] for t in session["turns"]]
    assert run["trace_id"] in _row_ids(page, "session_runs")
