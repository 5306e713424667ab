"""The Users, Sessions and Compare-runs pages under Streamlit's AppTest, on the seeded stack
(loadgen's simulated users, each run in a session of its user), and their links from a run."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from agentwatch_platform.dashboard import ui
from tests.dashboard.support import APP, SeededStack, dashboard_env, metrics, tables
from tests.dashboard.test_pages import page


@pytest.fixture
def app(seeded: SeededStack, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    for name, value in dashboard_env(seeded, AGENTWATCH_DASHBOARD_OPEN="1").items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AGENTWATCH_DASHBOARD_PASSWORD", raising=False)
    return AppTest.from_file(str(APP), default_timeout=60).run()


def test_users_page_matches_the_api_and_links_to_each_user(app: AppTest, seeded: SeededStack) -> None:
    at = page(app, "views/users.py")
    shown = tables(at)["users_table"]
    api = seeded.get("/api/users", limit=200)["items"]
    assert shown.column("cost") == [ui.fmt(u["cost_usd"], "USD") for u in api]
    assert shown.column("runs") == [f"{u['runs']:,}" for u in api]
    assert shown.hrefs == [f"./users?user={u['user_id']}" if u["user_id"] else "./runs" for u in api]
    assert sum(u["runs"] for u in api) == seeded.runs


def test_a_users_page_shows_its_figures_and_runs(app: AppTest, seeded: SeededStack) -> None:
    user = seeded.get("/api/users", limit=1)["items"][0]
    runs = seeded.get("/api/runs", user_id=user["user_id"], limit=50)["items"]
    at = page(app, "views/users.py", user=user["user_id"])
    shown = metrics(at)
    assert shown["Cost"] == ui.fmt(user["cost_usd"], "USD") and shown["Runs"] == f"{user['runs']:,}"
    assert shown["Sessions"] == f"{user['sessions']:,}"
    assert tables(at)["user_runs"].ids == [r["trace_id"] for r in runs]


def test_a_session_replays_its_runs_in_order(app: AppTest, seeded: SeededStack) -> None:
    session = seeded.get("/api/sessions")["items"][0]["session_id"]
    detail = seeded.get(f"/api/sessions/{session}")
    at = page(app, "views/sessions.py", session=session)
    assert tables(at)["session_runs"].ids == [t["run"]["trace_id"] for t in detail["turns"]]
    assert len(at.chat_message) == 2 * len(detail["turns"])


def test_run_detail_links_its_user_session_and_the_comparison(app: AppTest, seeded: SeededStack) -> None:
    run = seeded.get("/api/runs", limit=1)["items"][0]
    at = page(app, "views/run_detail.py", run=run["trace_id"])
    links = "\n".join(str(m.value) for m in at.markdown)
    assert f"./sessions?session={run['session_id']}" in links and f"./compare?a={run['trace_id']}" in links
    assert f"./users?user={run['user_id']}" in links


def test_two_runs_compared_side_by_side(app: AppTest, seeded: SeededStack) -> None:
    a, b = seeded.get("/api/runs", limit=2, sort="-cost_usd")["items"]
    at = page(app, "views/compare.py", a=a["trace_id"], b=b["trace_id"])
    rows = {
        key: row for key, row in zip(tables(at)["compare_table"].ids, tables(at)["compare_table"].rows, strict=True)
    }
    assert rows["cost"]["a"] == ui.fmt(a["cost_usd"], "USD") and rows["cost"]["b"] == ui.fmt(b["cost_usd"], "USD")
    assert rows["steps"]["a"] == f"{a['steps']:,}"
    assert rows["cost_per_step"]["a"] == ui.fmt(a["cost_usd"] / a["steps"], "USD")
    assert rows["tools"]["a"].startswith(("search", "fetch", "none"))
    assert tables(at)["compare_steps"].ids
    at.text_input(key="compare_a").set_value("nothex").run()
    assert any("32 hex digits" in e.value for e in at.error)
