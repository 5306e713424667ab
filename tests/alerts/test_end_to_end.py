"""End to end: spans exported with the real OpenTelemetry exporter into a real collector
(uvicorn on 127.0.0.1, chDB in a tmp dir) whose in-process evaluator sees an injected cost
spike; a webhook receiver gets exactly one signed firing notification, then exactly one
resolved after the spike ends. Time is driven by the evaluator's clock and span timestamps."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agentwatch_platform.alerts.channels import SIGNATURE_HEADER, sign
from agentwatch_platform.alerts.evaluator import InProcessAlerts
from agentwatch_platform.collector.state import collector_state
from tests.alerts.incident_setup import webhook_rules
from tests.alerts.traffic import export_traffic, wait_for_runs
from tests.collector.ingest_helpers import alerts_plugin, serve, settings_for
from tests.support import local_http
from tests.support.poll import wait_until
from tests.support.receivers import Receiver

SPIKE = 20  # the minute of the cost spike
MINUTES = 30


class Clock:
    """The evaluator's clock (handed to the alerts plugin): now is what the test says."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _alerts(app: object) -> InProcessAlerts:
    """The in-process alerts, as the collector keeps its plugins' components."""
    component = collector_state(app).plugin_components["alerts"]
    assert isinstance(component, InProcessAlerts)
    return component


def advance(app: object, clock: Clock, now: float) -> None:
    """Set the evaluator's clock and wait for two complete rounds at that time."""
    clock.now = now
    evaluator = _alerts(app).evaluator
    target = evaluator.rounds + 2
    wait_until(lambda: evaluator.rounds >= target, 60, "the in-process evaluator stopped running", interval=0.01)


def test_cost_spike_notifies_once_then_resolves_once(tmp_path: Path, receiver: Receiver) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(webhook_rules(receiver.url, "e2e-secret", severity="critical"))
    t0 = int(time.time()) // 60 * 60 - (MINUTES + 5) * 60
    clock = Clock(float(t0))  # before any traffic: nothing to judge
    plugin = alerts_plugin(clock=clock, alert_rules=str(rules), alert_interval_s=0.02)
    with serve(settings_for(tmp_path / "data"), plugins=(plugin,)) as collector:
        key = collector.key("e2e")
        wait_for_runs(
            collector.url,
            key,
            t0 - 60,
            t0 + MINUTES * 60,
            export_traffic(collector.url, key, t0, minutes=MINUTES, spike_minutes={SPIKE}),
        )
        for minute in range(SPIKE - 3, SPIKE):
            advance(collector.app, clock, t0 + minute * 60 + 30)
        assert receiver.requests == []
        advance(collector.app, clock, t0 + SPIKE * 60 + 30)
        advance(collector.app, clock, t0 + (SPIKE + 1) * 60 + 30)  # still firing, inside the cool-down
        assert len(receiver.wait_for(1)) == 1
        for minute in range(SPIKE + 2, SPIKE + 6):
            advance(collector.app, clock, t0 + minute * 60 + 30)
        requests = receiver.wait_for(2)
        alerts = local_http.get(
            f"{collector.url}/api/alerts",
            params={"start": t0, "end": t0 + 3600},
            headers={"Authorization": f"Bearer {key}"},
        ).json()
        rules_out = local_http.get(
            f"{collector.url}/api/alerts/rules", headers={"Authorization": f"Bearer {key}"}
        ).json()
    assert [r.json()["event"] for r in requests] == ["firing", "resolved"]
    for request in requests:
        assert request.headers[SIGNATURE_HEADER.lower()] == sign("e2e-secret", request.body)
    fired = requests[0].json()["alert"]
    assert (
        fired["rule"] == "spend"
        and fired["scope"] == {"agent": "researcher"}
        and fired["started_at"] == t0 + SPIKE * 60 + 30
    )
    assert requests[1].json()["alert"]["resolved_at"] == t0 + (SPIKE + 2) * 60 + 30
    assert [(a["alert_id"], a["state"]) for a in alerts] == [(fired["alert_id"], "resolved")]
    assert [r["name"] for r in rules_out] == ["spend"]


def test_bad_rules_file_keeps_the_collector_ingesting(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - name: spend\n    metric: cost_usd\n    condition: {kind: anomaly, z: banana}\n")
    t0 = int(time.time()) // 60 * 60 - 120
    with (
        caplog.at_level("ERROR", logger="agentwatch.alerts"),
        serve(
            settings_for(tmp_path / "data"), plugins=(alerts_plugin(alert_rules=str(rules), alert_interval_s=1),)
        ) as collector,
    ):
        key = collector.key("p")
        wait_for_runs(
            collector.url,
            key,
            t0 - 60,
            t0 + 120,
            export_traffic(collector.url, key, t0, minutes=1, spike_minutes=set()),
        )
        assert _alerts(collector.app).evaluator is None
    assert f"{rules}:4: rules[0].condition.z: expected a number" in caplog.text
