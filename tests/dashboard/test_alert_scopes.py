"""Alerts page evidence for the newer rule kinds (Streamlit AppTest against a real collector on
127.0.0.1): a per-user incident shows that user's series and that user's runs, most expensive
first; a per-version incident on cost per run shows that version's series and runs; a stuck-run
incident (a figure of the moment) shows its figures without a chart."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator

import pytest
from streamlit.testing.v1 import AppTest

from agentwatch_platform.dashboard.svg_charts import ERROR_COLOUR
from tests.collector.factories import agent_run
from tests.collector.ingest_helpers import Running, serve, settings_for
from tests.dashboard.support import APP, money, svg_charts, tables
from tests.support import local_http

# The incidents and runs of a fixed past hour, three days back: the page must open a linked
# incident whatever the range shown, and whenever this module runs (under load, an hour after
# it was imported, an import-time "an hour ago" had left the page's range).
NOW = time.time()
HOUR = int(NOW) // 3600 * 3600 - 3 * 86_400  # the incident's hour (the rule's window is 1 h)


def incident(alert_id: str, rule: str, metric: str, scope: dict[str, str], *, resolved: bool) -> dict:
    return {
        "alert_id": alert_id,
        "fingerprint": f"fp-{alert_id}",
        "rule": rule,
        "severity": "warning",
        "state": "resolved" if resolved else "firing",
        "scope": scope,
        "metric": metric,
        "value": 3.0,
        "baseline": 0.5,
        "threshold": 1.5,
        "peak": 4.0,
        "message": f"{rule} evidence",
        "started_at": HOUR + 60.0,
        "resolved_at": HOUR + 3000 if resolved else None,
        "last_notified_at": HOUR + 60.0,
        "updated_at": NOW,
    }


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    with serve(settings_for(tmp_path_factory.mktemp("alert-scopes") / "data")) as running:
        rows = []
        for k, (user, cost) in enumerate([("alice", 0.9), ("alice", 0.4), ("bob", 2.0), ("alice", 0.7)]):
            run = agent_run(project="dash", start_s=HOUR + 120 + k * 60, steps=1, cost_per_call=cost)
            rows += [dataclasses.replace(r, user_id=user) if r.kind == "run" else r for r in run]
        for k, version in enumerate(["1.0", "1.1", "1.1", "1.0", "1.1"]):
            run = agent_run(project="dash", start_s=HOUR + 150 + k * 60, steps=1, cost_per_call=0.1 + 0.1 * k)
            rows += [dataclasses.replace(r, service_version=version, user_id="carol") for r in run]
        running.app.state.store.get().insert_spans(rows)
        admin = {"Authorization": f"Bearer {running.key('dash', ['read', 'admin'])}"}
        body = [
            incident("u1", "user-cost-spike", "cost_usd", {"user": "alice"}, resolved=True),
            incident("s1", "stuck-run", "oldest_running_run_s", {"agent": "researcher"}, resolved=False),
            incident("v1", "release-cost-per-run", "cost_per_run", {"version": "1.1"}, resolved=True),
        ]
        assert local_http.post(f"{running.url}/api/alerts", json=body, headers=admin).status_code == 201
        yield running


def alerts_page(collector: Running, monkeypatch: pytest.MonkeyPatch, focus: str) -> AppTest:
    env = {
        "AGENTWATCH_COLLECTOR_URL": collector.url,
        "AGENTWATCH_API_KEY": collector.key("dash", ["read"]),
        "AGENTWATCH_DASHBOARD_CACHE_TTL_S": "1",
        "AGENTWATCH_DASHBOARD_OPEN": "1",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AGENTWATCH_DASHBOARD_PASSWORD", raising=False)
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    at.query_params.update({"alert": focus})
    at.switch_page("views/alerts.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_a_user_incident_shows_that_users_series_and_runs(collector: Running, monkeypatch: pytest.MonkeyPatch) -> None:
    at = alerts_page(collector, monkeypatch, "u1")
    assert any("u1 started" in c.value and "before the range shown" in c.value for c in at.caption)  # 3 days ago
    *_, runs = (t for key, t in tables(at).items() if key.startswith("alert-runs-"))  # the focused incident's, last
    assert runs.column("user") == ["alice"] * 3
    costs = [money(c) for c in runs.column("cost")]
    assert costs == sorted(costs, reverse=True)
    charts = svg_charts(at)  # SVG, as the overview's: the page loads no chart library
    assert charts and all("Traceback" not in str(e.value) for e in at.error) and not at.get("plotly_chart")
    focused = charts[-1]  # the focused incident's: the incident shaded, baseline and threshold ruled and named
    svg = "{http://www.w3.org/2000/svg}"
    assert any(r.get("fill") == ERROR_COLOUR for r in focused.svg.iter(svg + "rect")), focused.title
    assert len(list(focused.svg.iter(svg + "path"))) == 1 and len(list(focused.svg.iter(svg + "line"))) >= 2
    named = " ".join(focused.texts())
    assert "incident" in named and "baseline" in named and "threshold" in named, named


def test_a_version_incident_shows_that_versions_series_and_runs(
    collector: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = alerts_page(collector, monkeypatch, "v1")
    *_, runs = (t for key, t in tables(at).items() if key.startswith("alert-runs-"))
    assert [money(c) for c in runs.column("cost")] == pytest.approx([0.5, 0.3, 0.2])  # 1.1's runs only
    charts = svg_charts(at)
    assert charts and "Cost per run" in charts[-1].title, [c.title for c in charts]
    assert not at.error, [e.value for e in at.error]


def test_a_stuck_run_incident_needs_no_series(collector: Running, monkeypatch: pytest.MonkeyPatch) -> None:
    at = alerts_page(collector, monkeypatch, "s1")
    captions = [c.value for c in at.caption]
    assert any("Age of the oldest running run is a figure of the moment" in c for c in captions)  # in words
    assert not at.error, [e.value for e in at.error]
