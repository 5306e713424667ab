"""``agentwatch alerts check|test|run``: the linter, a test message, and the evaluator as its own
process against a real collector's HTTP API (history written back through ``/api/alerts``)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from agentwatch.cli import main

from agentwatch_platform.alerts.channels import SIGNATURE_HEADER, sign
from tests.alerts.incident_setup import webhook_rules
from tests.alerts.traffic import export_traffic, wait_for_runs
from tests.collector.ingest_helpers import serve, settings_for
from tests.support import local_http
from tests.support.receivers import Receiver


def write_rules(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text(webhook_rules(url, "cli-secret"))
    return path


def test_check_accepts_the_defaults_and_a_good_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["alerts", "check", str(Path("alerts/default_rules.yaml"))]) == 0
    assert main(["alerts", "check", str(write_rules(tmp_path, "http://127.0.0.1:9/"))]) == 0
    assert "OK, 1 rules, channels: hook, log" in capsys.readouterr().out


def test_check_names_line_and_key_of_a_bad_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules:\n  - name: spend\n    metric: cost_usd\n    condition: {kind: anomaly, z: -1}\n")
    assert main(["alerts", "check", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:4: rules[0].condition:" in err and "z_resolve" in err


def test_test_command_sends_a_signed_test_notification(
    tmp_path: Path, receiver: Receiver, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["alerts", "test", "--channel", "hook", "--rules", str(write_rules(tmp_path, receiver.url))]) == 0
    [request] = receiver.wait_for(1)
    assert request.headers[SIGNATURE_HEADER.lower()] == sign("cli-secret", request.body)
    assert request.json()["event"] == "test"
    assert "test notification sent on hook (webhook)" in capsys.readouterr().out


def test_test_command_reports_an_unreachable_channel(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.support.ports import free_port

    rules = write_rules(tmp_path, f"http://127.0.0.1:{free_port()}/")
    assert main(["alerts", "test", "--channel", "hook", "--rules", str(rules)]) == 1
    assert main(["alerts", "test", "--channel", "pager", "--rules", str(rules)]) == 2
    err = capsys.readouterr().err
    assert "ConnectError" in err and "no channel 'pager'" in err


def test_run_once_over_http_fires_and_stores_history_in_the_collector(tmp_path: Path, receiver: Receiver) -> None:
    rules = write_rules(tmp_path, receiver.url)
    now = time.time()
    current = int(now) // 60 * 60
    t0 = current - 20 * 60
    with serve(settings_for(tmp_path / "data")) as collector:  # in-process alerts off
        key, other = collector.key("watched"), collector.key("other")
        sent = export_traffic(collector.url, key, t0, minutes=21, spike_minutes={19, 20}, until=now)
        wait_for_runs(collector.url, key, t0 - 60, now + 60, sent)
        evaluator = collector.key("watched", ["read", "admin"])  # alerts run reads and writes alert history
        code = main(["alerts", "run", "--once", "--url", collector.url, "--key", evaluator, "--rules", str(rules)])
        again = main(
            ["alerts", "run", "--once", "--url", collector.url, "--key", evaluator, "--rules", str(rules)]
        )  # reloads it as firing
        headers = {"Authorization": f"Bearer {key}"}
        alerts = local_http.get(
            f"{collector.url}/api/alerts", params={"state": "firing", "start": t0}, headers=headers
        ).json()
        deliveries = local_http.get(f"{collector.url}/api/alerts/deliveries", headers=headers).json()
        foreign = local_http.get(
            f"{collector.url}/api/alerts", params={"start": t0}, headers={"Authorization": f"Bearer {other}"}
        ).json()
    assert code == 0 and again == 0
    time.sleep(0.2)  # a late second notification would have landed (the CLI returned after sending)
    [request] = receiver.requests  # the second process did not notify again
    body = json.loads(request.body)
    assert (
        body["event"] == "firing" and body["project"] == "watched" and body["alert"]["scope"] == {"agent": "researcher"}
    )
    assert [(a["rule"], a["alert_id"]) for a in alerts] == [("spend", body["alert"]["alert_id"])]
    assert [(d["channel"], d["attempt"], d["ok"]) for d in deliveries] == [("hook", 1, True)]
    assert foreign == []  # another project's key sees none of it
