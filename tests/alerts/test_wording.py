"""Notifications say each metric in words and its unit, for every metric a rule can watch.

The words are ``agentwatch_api.labels``' (the dashboard's too): a person on call reads "tool
failure rate = 32.5 %", not ``tool_failure_rate = 0.325``.
"""

from __future__ import annotations

import re

import pytest

from agentwatch_api.labels import METRICS as LABELS
from agentwatch_api.labels import figure, metric_label
from agentwatch_platform.alerts.channels import SlackChannel
from agentwatch_platform.alerts.detectors import Verdict
from agentwatch_platform.alerts.model import Alert, Notification
from agentwatch_platform.alerts.rules import METRICS, Rule, parse_rules
from agentwatch_platform.alerts.run_scopes import RUN_SCOPE_ONLY
from agentwatch_platform.alerts.wording import details, message
from tests.support.receivers import Receiver

T0 = 1_800_000_000.0


def _rule(metric: str) -> Rule:
    scope = '    scope: {version: "*"}\n' if metric in RUN_SCOPE_ONLY else ""  # no rollup has it: per version
    text = f"rules:\n  - name: watch\n    metric: {metric}\n{scope}    window: 1h\n    condition: {{kind: threshold, threshold: 0.3}}\n"
    [rule] = parse_rules(text).rules
    return rule


def _alert(metric: str, **extra: object) -> Alert:
    fields: dict[str, object] = {
        "project": "proj",
        "alert_id": "a1",
        "fingerprint": "fp1",
        "rule": "watch",
        "severity": "warning",
        "state": "firing",
        "scope": {"agent": "researcher"},
        "metric": metric,
        "value": 0.42,
        "baseline": 0.1,
        "threshold": 0.3,
        "peak": 0.5,
        "message": "",
        "started_at": T0,
        "last_notified_at": T0,
    }
    return Alert(**{**fields, **extra})  # type: ignore[arg-type]


def _raw(metric: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w-]){re.escape(metric)}(?![\w-])")


def test_every_metric_a_rule_can_watch_has_words() -> None:
    assert not [m for m in METRICS if m not in LABELS], "add the metric's words and unit to agentwatch_api.labels"


@pytest.mark.parametrize("metric", METRICS)
@pytest.mark.parametrize("event", ["firing", "resolved", "no_data"])
def test_a_notification_says_the_metric_in_words(metric: str, event: str) -> None:
    rule = _rule(metric)
    alert = _alert(metric, resolved_at=T0 + 211 if event == "resolved" else None)
    alert.message = message(rule, alert, Verdict(firing=event == "firing", ready=True, value=0.2), event)  # type: ignore[arg-type]
    text = details(Notification(event, alert, T0, "what the rule watches"))  # type: ignore[arg-type]
    assert metric_label(metric) in alert.message and metric_label(metric) in text
    if metric_label(metric) != metric:
        assert not _raw(metric).search(text), text


@pytest.mark.parametrize(
    ("metric", "value", "said"),
    [
        ("cost_usd", 41.2, "$41.2"),
        ("max_run_cost_usd", 0.00123, "$0.00123"),
        ("tool_failure_rate", 0.325, "32.5 %"),
        ("version_cost_per_run_change", -0.3, "-30 %"),
        ("ttft_p95", 1.24, "1.24 s"),
        ("oldest_running_run_s", 2400, "2,400 s"),
        ("tokens_per_s", 812, "812 tokens/s"),
        ("runs", 7, "7"),
        ("input_tokens", 1_755_020, "1,755,020"),
        ("cost_usd", None, "no data"),
    ],
)
def test_a_figure_is_shown_in_its_unit(metric: str, value: float | None, said: str) -> None:
    assert figure(metric, value) == said


def test_slack_reads_words_and_units(receiver: Receiver) -> None:
    rule, alert = _rule("tool_failure_rate"), _alert("tool_failure_rate", value=0.325)
    alert.message = message(rule, alert, Verdict(firing=True, ready=True, value=0.325, threshold=0.3), "firing")
    SlackChannel(url=receiver.url).send(Notification("firing", alert, T0))
    block = receiver.wait_for(1)[0].json()["blocks"][0]["text"]["text"]
    assert "watch [agent=researcher]: tool failure rate = 32.5 % (baseline 10 %, above 30 % fires" in block
    assert "tool failure rate: value 32.5 %, baseline 10 %, threshold 30 %, peak 50 %" in block
    assert not _raw("tool_failure_rate").search(block)
