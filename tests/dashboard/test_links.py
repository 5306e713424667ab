"""Any screen is a link: the sidebar's filters and the run page's view survive a reload and a share."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.dashboard.support import SeededStack, tables
from tests.dashboard.test_pages import app, page  # noqa: F401 (app: the pages' fixture)


def test_a_link_with_filters_opens_them_and_a_change_goes_into_the_url(app: AppTest, seeded: SeededStack) -> None:  # noqa: F811
    agent = seeded.get("/api/runs", limit=1)["items"][0]["agent"]
    at = page(app, "views/runs.py", range="7d", agent=agent)
    assert at.selectbox(key="aw_range").value == "Last 7 days" and at.selectbox(key="aw_agent").value == agent
    at.selectbox(key="aw_range").set_value("Last 24 hours").run()
    assert at.query_params["range"] == "24h" and at.query_params["agent"] == agent
    at.selectbox(key="aw_agent").set_value("(all)").run()
    at.selectbox(key="aw_range").set_value("Last hour").run()
    assert "agent" not in at.query_params and "range" not in at.query_params  # the defaults leave the URL


def test_an_agent_quiet_in_the_range_stays_chosen_from_a_link(app: AppTest) -> None:  # noqa: F811
    at = page(app, "views/overview.py", agent="an-agent-not-seen")
    assert not at.exception and at.selectbox(key="aw_agent").value == "an-agent-not-seen"


def test_a_runs_tree_order_and_failure_filter_are_in_its_link(app: AppTest, seeded: SeededStack) -> None:  # noqa: F811
    trace_id = seeded.get("/api/runs", limit=1, sort="-cost_usd")["items"][0]["trace_id"]
    at = page(app, "views/run_detail.py", run=trace_id, order="cost", failures="1", view="trace")
    assert at.toggle(key="tree_failures").value is True
    assert [k for k in tables(at) if k.startswith("tree-")][0].split("-")[2] == "cost"
    at.toggle(key="tree_failures").set_value(False).run()
    assert "failures" not in at.query_params and at.query_params["order"] == "cost"
    at.radio(key="run_view").set_value("Engine").run()
    assert at.query_params["view"] == "engine" and at.query_params["run"] == trace_id
