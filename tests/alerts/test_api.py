"""``/api/alerts`` on a real collector: rules, history written and read per project, bad input."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agentwatch_platform.alerts.sources import FigureQuery, HttpBackend, SeriesQuery
from tests.alerts.incident_setup import ingest, rootless
from tests.collector.factories import agent_run
from tests.collector.ingest_helpers import Running, serve, settings_for
from tests.support import local_http

ALERT = {
    "alert_id": "a1",
    "fingerprint": "f1",
    "rule": "cost-per-hour-spike",
    "severity": "critical",
    "state": "firing",
    "scope": {"agent": "researcher"},
    "metric": "cost_usd",
    "value": 41.2,
    "baseline": 6.1,
    "threshold": 15.8,
    "message": "spike",
    "started_at": 1_790_000_000.0,
    "last_notified_at": 1_790_000_000.0,
    "updated_at": 1_790_000_000.0,
}


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    with serve(settings_for(tmp_path_factory.mktemp("api") / "data")) as running:
        yield running


def client(collector: Running, project: str) -> httpx.Client:
    """A client with a read and admin key: what ``agentwatch alerts run`` needs to read and to write history."""
    return httpx.Client(
        base_url=collector.url,
        headers={"Authorization": f"Bearer {collector.key(project, ['read', 'admin'])}"},
        timeout=30,
    )


def test_rules_are_the_defaults_without_a_file(collector: Running) -> None:
    rules = client(collector, "a").get("/api/alerts/rules").json()
    names = [r["name"] for r in rules]
    assert (
        "cost-per-hour-spike" in names
        and "success-rate-drop" in names
        and "stuck-run" in names
        and "user-cost-spike" in names
        and len(names) == 14
    )
    spike = next(r for r in rules if r["name"] == "cost-per-hour-spike")
    assert spike["window_s"] == 3600 and spike["condition"]["kind"] == "anomaly" and spike["scope"] == {"agent": "*"}


def test_history_is_written_and_read_per_project(collector: Running) -> None:
    a, b = client(collector, "a"), client(collector, "b")
    assert a.post("/api/alerts", json=[ALERT]).status_code == 201
    resolved = {**ALERT, "state": "resolved", "resolved_at": 1_790_000_600.0, "updated_at": 1_790_000_600.0}
    assert a.post("/api/alerts", json=[resolved]).status_code == 201
    window = {"start": 1_789_999_000, "end": 1_790_003_600}
    [alert] = a.get("/api/alerts", params=window).json()
    assert (
        alert["state"] == "resolved"
        and alert["resolved_at"] == 1_790_000_600.0
        and alert["scope"] == {"agent": "researcher"}
    )
    assert a.get("/api/alerts", params={**window, "state": "firing"}).json() == []
    assert b.get("/api/alerts", params=window).json() == []
    assert a.get("/api/alerts/context").json() == {"project": "a"}
    assert local_http.get(f"{collector.url}/api/alerts").status_code == 401
    # A notification's link names an incident: found by its id whatever the range, and only in its project.
    other = {**ALERT, "alert_id": "a2", "fingerprint": "f2", "started_at": 1_790_000_100.0}
    assert a.post("/api/alerts", json=[other]).status_code == 201
    [named] = a.get("/api/alerts", params={"alert_id": "a1", "start": 1_800_000_000, "end": 1_800_003_600}).json()
    assert named["alert_id"] == "a1" and named["state"] == "resolved"
    assert b.get("/api/alerts", params={"alert_id": "a1"}).json() == []


@pytest.mark.parametrize(
    "change",
    [
        {"value": float("inf")},
        {"started_at": 1e300},
        {"started_at": -5},
        {"alert_id": ""},
        {"state": "exploded"},
        {"scope": {str(i): "x" for i in range(50)}},
        {"scope": {"k" * 257: "x"}},
        {"scope": {"agent": "v" * 1025}},
    ],
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
    body = [
        {
            "alert_id": "a9",
            "channel": "hook",
            "attempt": 1,
            "ok": False,
            "error": "HTTP 500",
            "at": 1_790_000_000.5,
            "event": "firing",
        }
    ]
    assert c.post("/api/alerts/deliveries", json=body).status_code == 201
    assert c.get("/api/alerts/deliveries", params={"alert_id": "a9"}).json() == body
    assert client(collector, "a").get("/api/alerts/deliveries", params={"alert_id": "a9"}).json() == []


def test_rules_endpoint_names_a_broken_rules_file(collector: Running, tmp_path: Path) -> None:
    bad = tmp_path / "rules.yaml"
    bad.write_text("rules:\n  - name: x\n    metric: nope\n")
    settings = collector.app.state.plugin_settings["alerts"]  # the settings the plugin brought
    settings.alert_rules = str(bad)
    try:
        response = client(collector, "a").get("/api/alerts/rules")
    finally:
        settings.alert_rules = ""
    assert response.status_code == 500 and f"{bad}:3: rules[0].metric" in response.json()["detail"]


def test_run_states_for_an_out_of_process_evaluator(collector: Running) -> None:
    """``alerts run`` reads the stuck-run and crash-rate figures here (``HttpBackend.run_states``)."""
    now = time.time()
    store = collector.app.state.store.get()
    ingest(store, rootless("hung", now - 600, range(0, 600, 60), project="d"))
    backend = HttpBackend(collector.url, [collector.key("d", ["read"])])
    try:
        ages = backend.run_states("d", FigureQuery("oldest_running_run_s", now, 300, "agent"))
    finally:
        backend.close()
    assert ages == {"hung": pytest.approx(600, abs=1)}
    c = client(collector, "d")
    assert c.get(
        "/api/alerts/run-states", params={"metric": "incomplete_run_rate", "now": now, "window_s": 900}
    ).json() == {"metric": "incomplete_run_rate", "values": {"": None}}
    assert (
        c.get("/api/alerts/run-states", params={"metric": "cost_usd", "now": now, "window_s": 900}).status_code == 422
    )
    assert (
        c.get(
            "/api/alerts/run-states",
            params={"metric": "incomplete_run_rate", "now": now, "window_s": 900, "group_by": "model"},
        ).status_code
        == 422
    )


def test_per_user_series_for_an_out_of_process_evaluator(collector: Running) -> None:
    """``alerts run`` reads per-user and per-session series here (``HttpBackend.timeseries``)."""
    t0 = int(time.time()) // 60 * 60 - 600
    rows = []
    for user, cost in (("alice", 0.5), ("bob", 0.25)):
        rows += [
            dataclasses.replace(r, user_id=user) if r.kind == "run" else r
            for r in agent_run(project="e", start_s=t0 + 5, steps=1, cost_per_call=cost)
        ]
    collector.app.state.store.get().insert_spans(rows)
    backend = HttpBackend(collector.url, [collector.key("e", ["read"])])
    try:
        series = backend.timeseries("e", SeriesQuery("cost_usd", t0, t0 + 120, 60, "user"))
    finally:
        backend.close()
    assert [(p.t, p.group, p.value) for p in series.points] == [(t0, "alice", 0.5), (t0, "bob", 0.25)]
    # the collector's watermark comes with it, so the evaluator waits for runs still arriving
    assert series.complete_until is not None and series.complete_until <= time.time()
    assert not any(p.partial for p in series.points)  # ten minutes old: complete
    c = client(collector, "e")
    bad = {"metric": "ttft_p95", "start": t0, "end": t0 + 60, "step_s": 60, "group_by": "user"}
    assert c.get("/api/alerts/scope-series", params=bad).status_code == 422
    assert (
        c.get("/api/alerts/scope-series", params={**bad, "metric": "runs", "end": t0 + 10**7, "step_s": 1}).status_code
        == 422
    )
