"""``/api/alerts`` on a real collector: rules, history written and read per project, bad input."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from alerts.sources import HttpBackend
from tests.alerts.incident_setup import ingest, rootless
from tests.collector.ingest_helpers import Running, serve, settings_for

ALERT = {
    "alert_id": "a1", "fingerprint": "f1", "rule": "cost-per-hour-spike", "severity": "critical", "state": "firing",
    "scope": {"agent": "researcher"}, "metric": "cost_usd", "value": 41.2, "baseline": 6.1, "threshold": 15.8,
    "message": "spike", "started_at": 1_790_000_000.0, "last_notified_at": 1_790_000_000.0, "updated_at": 1_790_000_000.0,
}


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    with serve(settings_for(tmp_path_factory.mktemp("api") / "data")) as running:
        yield running


def client(collector: Running, project: str) -> httpx.Client:
    """A client with a read and admin key: what ``agentwatch alerts run`` needs to read and to write history."""
    return httpx.Client(base_url=collector.url, headers={"Authorization": f"Bearer {collector.key(project, ['read', 'admin'])}"}, timeout=30)


def test_rules_are_the_defaults_without_a_file(collector: Running) -> None:
    rules = client(collector, "a").get("/api/alerts/rules").json()
    names = [r["name"] for r in rules]
    assert "cost-per-hour-spike" in names and "success-rate-drop" in names and "stuck-run" in names and len(names) == 13
    spike = next(r for r in rules if r["name"] == "cost-per-hour-spike")
    assert spike["window_s"] == 3600 and spike["condition"]["kind"] == "anomaly" and spike["scope"] == {"agent": "*"}


def test_history_is_written_and_read_per_project(collector: Running) -> None:
    a, b = client(collector, "a"), client(collector, "b")
    assert a.post("/api/alerts", json=[ALERT]).status_code == 201
    resolved = {**ALERT, "state": "resolved", "resolved_at": 1_790_000_600.0, "updated_at": 1_790_000_600.0}
    assert a.post("/api/alerts", json=[resolved]).status_code == 201
    window = {"start": 1_789_999_000, "end": 1_790_003_600}
    [alert] = a.get("/api/alerts", params=window).json()
    assert alert["state"] == "resolved" and alert["resolved_at"] == 1_790_000_600.0 and alert["scope"] == {"agent": "researcher"}
    assert a.get("/api/alerts", params={**window, "state": "firing"}).json() == []
    assert b.get("/api/alerts", params=window).json() == []
    assert a.get("/api/alerts/context").json() == {"project": "a"}
    assert httpx.get(f"{collector.url}/api/alerts").status_code == 401


@pytest.mark.parametrize(
    "change",
    [{"value": float("inf")}, {"started_at": 1e300}, {"started_at": -5}, {"alert_id": ""}, {"state": "exploded"}, {"scope": {str(i): "x" for i in range(50)}}],
)
def test_bad_alert_bodies_are_422(collector: Running, change: dict) -> None:
    body = json.dumps([{**ALERT, **change}])  # allows Infinity, as some clients send it
    response = client(collector, "a").post("/api/alerts", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 422, response.text


def test_extreme_time_range_is_not_an_error(collector: Running) -> None:
    response = client(collector, "a").get("/api/alerts", params={"start": -1e300, "end": 1e300})
    assert response.status_code == 200 and isinstance(response.json(), list)


def test_deliveries_round_trip(collector: Running) -> None:
    c = client(collector, "c")
    body = [{"alert_id": "a9", "channel": "hook", "attempt": 1, "ok": False, "error": "HTTP 500", "at": 1_790_000_000.5, "event": "firing"}]
    assert c.post("/api/alerts/deliveries", json=body).status_code == 201
    assert c.get("/api/alerts/deliveries", params={"alert_id": "a9"}).json() == body
    assert client(collector, "a").get("/api/alerts/deliveries", params={"alert_id": "a9"}).json() == []


def test_rules_endpoint_names_a_broken_rules_file(collector: Running, tmp_path: Path) -> None:
    bad = tmp_path / "rules.yaml"
    bad.write_text("rules:\n  - name: x\n    metric: nope\n")
    collector.settings.alert_rules = str(bad)  # the app's own settings object
    try:
        response = client(collector, "a").get("/api/alerts/rules")
    finally:
        collector.settings.alert_rules = ""
    assert response.status_code == 500 and f"{bad}:3: rules[0].metric" in response.json()["detail"]


def test_run_states_for_an_out_of_process_evaluator(collector: Running) -> None:
    """``alerts run`` reads the stuck-run and crash-rate figures here (``HttpBackend.run_states``)."""
    now = time.time()
    store = collector.app.state.store.get()
    ingest(store, rootless("hung", now - 600, range(0, 600, 60), project="d"))
    backend = HttpBackend(collector.url, [collector.key("d", ["read"])])
    try:
        ages = backend.run_states("d", "oldest_running_run_s", now, 300, "agent")
    finally:
        backend.close()
    assert ages == {"hung": pytest.approx(600, abs=1)}
    c = client(collector, "d")
    assert c.get("/api/alerts/run-states", params={"metric": "incomplete_run_rate", "now": now, "window_s": 900}).json() == {"metric": "incomplete_run_rate", "values": {"": None}}
    assert c.get("/api/alerts/run-states", params={"metric": "cost_usd", "now": now, "window_s": 900}).status_code == 422
    assert c.get("/api/alerts/run-states", params={"metric": "incomplete_run_rate", "now": now, "window_s": 900, "group_by": "model"}).status_code == 422
