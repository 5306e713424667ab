"""Any screen is a link: the sidebar's filters and the run page's view survive a reload and a share."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.dashboard.support import SeededStack
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
