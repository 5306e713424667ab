"""The project in use is named on every page; a session with keys of several projects switches
between them (AppTest against the seeded stack's collector)."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from agentwatch_platform.reference_agent.keys import project_key
from tests.dashboard.support import APP, PROJECT, SeededStack, dashboard_env, metrics

OTHER = "dash-second"


def _app(monkeypatch: pytest.MonkeyPatch, seeded: SeededStack, **env: str) -> AppTest:
    for name in ("AGENTWATCH_DASHBOARD_OPEN", "AGENTWATCH_DASHBOARD_PASSWORD", "AGENTWATCH_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {**dashboard_env(seeded), **env}.items():
        monkeypatch.setenv(name, value)
    return AppTest.from_file(str(APP), default_timeout=60).run()


def _runs_shown(at: AppTest) -> str:
    return metrics(at).get("Runs", "")


def _sidebar_text(at: AppTest) -> str:
    return "\n".join(str(m.value) for m in at.sidebar.markdown)


@pytest.mark.parametrize(
    "path", ["views/overview.py", "views/runs.py", "views/cost.py", "views/engine.py", "views/alerts.py"]
)
def test_every_page_names_its_project(path: str, seeded: SeededStack, monkeypatch: pytest.MonkeyPatch) -> None:
    at = _app(monkeypatch, seeded, AGENTWATCH_DASHBOARD_OPEN="1")
    at.switch_page(path).run()
    assert not at.exception and f"Project: **{PROJECT}**" in _sidebar_text(at)


def test_keys_of_two_projects_switch_in_the_sidebar(seeded: SeededStack, monkeypatch: pytest.MonkeyPatch) -> None:
    other = project_key(seeded.collector, seeded.data_dir, OTHER)
    at = _app(monkeypatch, seeded, AGENTWATCH_DASHBOARD_OPEN="1", AGENTWATCH_API_KEY=f"{seeded.key}, {other}")
    switch = at.selectbox(key="aw_project_switch")
    assert switch.options == [PROJECT, OTHER] and switch.value == PROJECT
    assert _runs_shown(at) == str(seeded.runs)
    switch.set_value(OTHER).run()
    assert not at.exception and at.selectbox(key="aw_project_switch").value == OTHER
    assert "No runs in the last hour" in "\n".join(str(i.value) for i in at.info), "the second project has no runs"
    at.selectbox(key="aw_project_switch").set_value(PROJECT).run()
    assert _runs_shown(at) == str(seeded.runs)


def test_a_key_login_adds_a_project_and_refuses_a_bad_key(seeded: SeededStack, monkeypatch: pytest.MonkeyPatch) -> None:
    other = project_key(seeded.collector, seeded.data_dir, OTHER)
    at = _app(monkeypatch, seeded)
    at.text_input(key="aw_login_secret").input(seeded.key)
    at.button[0].click().run()
    assert f"Project: **{PROJECT}**" in _sidebar_text(at) and _runs_shown(at) == str(seeded.runs)
    at.text_input(key="aw_add_project_key").input("aw_not_a_key")
    at.sidebar.button[0].click().run()
    assert any("rejected this API key" in str(e.value) for e in at.error) and _runs_shown(at) == str(seeded.runs)
    at.text_input(key="aw_add_project_key").input(other)
    at.sidebar.button[0].click().run()
    assert not at.exception and at.selectbox(key="aw_project_switch").value == OTHER
    assert at.selectbox(key="aw_project_switch").options == [PROJECT, OTHER]


def test_a_link_naming_its_project_switches_to_it(seeded: SeededStack, monkeypatch: pytest.MonkeyPatch) -> None:
    other = project_key(seeded.collector, seeded.data_dir, OTHER)
    at = _app(monkeypatch, seeded, AGENTWATCH_DASHBOARD_OPEN="1", AGENTWATCH_API_KEY=f"{seeded.key},{other}")
    at.query_params["project"] = OTHER
    at.switch_page("views/overview.py").run()
    assert not at.exception and at.selectbox(key="aw_project_switch").value == OTHER
    assert "No runs in the last hour" in "\n".join(str(i.value) for i in at.info)
    at.selectbox(key="aw_project_switch").set_value(
        PROJECT
    ).run()  # the link's project applied once, not on every rerun
    assert _runs_shown(at) == str(seeded.runs)
