"""The Versions page under Streamlit's AppTest, on the seeded stack: loadgen ran the research agent
as version 1.0 (evolving report) and 2.0 (ReAct, whose growing context costs more per run)."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from agentwatch_platform.dashboard import ui
from tests.dashboard.support import APP, SeededStack, dashboard_env, tables
from tests.dashboard.test_pages import page


def test_versions_table_matches_the_api_and_links_each_version(app: AppTest, seeded: SeededStack) -> None:
    at = page(app, "views/versions.py")
    shown = tables(at)["versions_table"]
    api = seeded.get("/api/versions")["items"]
    assert shown.column("version") == [v["version"] for v in api] and set(shown.column("version")) == {"1.0", "2.0"}
    assert shown.column("runs") == [f"{v['runs']:,}" for v in api]
    assert shown.column("cost_run") == [ui.fmt(v["cost_per_run"], "USD") for v in api]
    assert shown.hrefs == [f"./runs?version={v['version']}" for v in api]
    assert sum(v["runs"] for v in api) == seeded.runs  # every run of the stack has a version


def test_versions_comparison_shows_each_figure_with_its_test(app: AppTest, seeded: SeededStack) -> None:
    at = page(app, "views/versions.py")
    at.selectbox(key="versions_a").set_value("1.0").run()
    at.selectbox(key="versions_b").set_value("2.0").run()
    compared = tables(at)["versions_compare"]
    api = seeded.get("/api/versions/compare", a="1.0", b="2.0")["changes"]
    cost = next(c for c in api if c["metric"] == "cost_per_run")
    row = compared.rows[compared.ids.index("cost_per_run")]
    assert row["change"] == ui.fmt(cost["difference"], "USD")
    assert row["verdict"] == ("yes" if cost["significant"] else ("too few runs" if cost["test"] == "none" else "no"))
    assert "Welch" in "\n".join(str(c.value) for c in at.caption)


def test_runs_page_opens_filtered_to_a_version(app: AppTest, seeded: SeededStack) -> None:
    at = page(app, "views/runs.py", version="2.0")
    ids = tables(at)["runs_table"].ids
    assert ids and set(ids) == {r["trace_id"] for r in seeded.get("/api/runs", version="2.0", limit=50)["items"]}


@pytest.fixture
def app(seeded: SeededStack, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    for name, value in dashboard_env(seeded, AGENTWATCH_DASHBOARD_OPEN="1").items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AGENTWATCH_DASHBOARD_PASSWORD", raising=False)
    return AppTest.from_file(str(APP), default_timeout=60).run()
