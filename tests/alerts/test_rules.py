"""The rules file: defaults load, good files parse, bad files name the line and the key."""

from __future__ import annotations

import textwrap

import pytest

from agentwatch_platform.alerts.channels import EmailChannel, WebhookChannel
from agentwatch_platform.alerts.detectors import AnomalyDetector, ThresholdDetector
from agentwatch_platform.alerts.errors import RulesError
from agentwatch_platform.alerts.rules import DEFAULT_RULES, load_rules, parse_rules

GOOD = """\
version: 1
defaults: {channels: [log], cooldown: 30m}
delivery: {attempts: 3, backoff: 500ms, max_backoff: 10s}
channels:
  ops: {type: webhook, url: "${HOOK_URL}", secret: "${HOOK_SECRET:-s3cret}", timeout: 5s}
  mail: {type: email, host: 127.0.0.1, port: "${SMTP_PORT:-2525}", from: aw@example.com, to: [a@example.com, b@example.com], starttls: true}
rules:
  - name: spend
    metric: cost_usd
    scope: {agent: "*"}
    window: 1h
    condition: {kind: anomaly, transform: log, z: 5, history: 2d, season: 1d}
    severity: critical
    channels: [ops, log]
  - name: steps
    metric: max_steps
    scope: {agent: researcher, model: "*"}
    window: 300
    condition: {kind: threshold, threshold: 40}
  - name: off
    enabled: false
    metric: runs
    condition: {kind: threshold, threshold: 1}
"""


def parse(text: str, **env: str) -> object:
    return parse_rules(textwrap.dedent(text), source="rules.yaml", env=env)


def test_default_rules_load_and_cover_the_issue() -> None:
    config = load_rules()
    names = {r.name for r in config.rules}
    assert {
        "cost-per-hour-spike",
        "run-cost-outlier",
        "monthly-budget-burn",
        "tool-failure-rate",
        "error-rate",
        "timeout-rate",
        "run-latency-p95-regression",
        "ttft-p95-regression",
        "runaway-steps",
        "success-rate-drop",
        "feedback-score-drop",
    } <= names
    spike = next(r for r in config.rules if r.name == "cost-per-hour-spike")
    assert isinstance(spike.condition, AnomalyDetector) and spike.group_by == "agent" and spike.window_s == 3600
    assert config.source == str(DEFAULT_RULES)


def test_budget_comes_from_the_environment() -> None:
    text = DEFAULT_RULES.read_text()
    config = parse_rules(text, env={"AGENTWATCH_MONTHLY_BUDGET_USD": "250"})
    budget = next(r for r in config.rules if r.name == "monthly-budget-burn")
    assert budget.condition == ThresholdDetector(threshold=250.0)


def test_good_file_parses_with_env_expansion_and_defaults() -> None:
    config = parse(GOOD, HOOK_URL="http://127.0.0.1:9/hook")
    assert [r.name for r in config.rules] == ["spend", "steps"]
    spend, steps = config.rules
    assert spend.channels == ("ops", "log") and spend.cooldown_s == 1800
    assert spend.condition.history_s == 2 * 86400 and spend.condition.season_s == 86400
    assert steps.group_by == "model" and steps.filters() == {"agent": "researcher"} and steps.channels == ("log",)
    assert config.channels["ops"] == WebhookChannel(url="http://127.0.0.1:9/hook", secret="s3cret", timeout_s=5.0)
    mail = config.channels["mail"]
    assert (
        isinstance(mail, EmailChannel)
        and mail.port == 2525
        and mail.sender == "aw@example.com"
        and mail.to == ("a@example.com", "b@example.com")
    )
    assert config.delivery.attempts == 3 and config.delivery.backoff_s == 0.5
    out = spend.to_out()
    assert out.condition["kind"] == "anomaly" and out.window_s == 3600


@pytest.mark.parametrize(
    ("text", "line", "key", "words"),
    [
        (
            "rules:\n  - name: a\n    metric: cost_usd\n    condition: {kind: threshold, threshold: 1}\n    windw: 1h\n",
            5,
            "rules[0].windw",
            "unknown key",
        ),
        (
            "rules:\n  - name: a\n    metric: cost_dollars\n    condition: {kind: threshold, threshold: 1}\n",
            3,
            "rules[0].metric",
            "must be one of",
        ),
        (
            "rules:\n  - name: a\n    metric: runs\n    condition:\n      kind: threshold\n      threshold: lots\n",
            6,
            "rules[0].condition.threshold",
            "expected a number",
        ),
        (
            "rules:\n  - name: a\n    metric: runs\n    condition: {kind: anomaly, z: 2, z_resolve: 3}\n",
            4,
            "rules[0].condition",
            "z_resolve",
        ),
        (
            "rules:\n  - name: a\n    metric: runs\n    window: soon\n    condition: {kind: threshold, threshold: 1}\n",
            4,
            "rules[0].window",
            "duration",
        ),
        (
            "rules:\n  - name: a\n    metric: runs\n    condition: {kind: threshold, threshold: 1}\n    channels: [pager]\n",
            5,
            "rules[0].channels[0]",
            "unknown channel 'pager'",
        ),
        (
            "channels:\n  hook: {type: webhook, url: '${NOPE}'}\nrules:\n  - {name: a, metric: runs, condition: {kind: threshold, threshold: 1}}\n",
            2,
            "channels.hook.url",
            "NOPE is not set",
        ),
        ("channels:\n  hook: {type: carrier-pigeon}\nrules: []\n", 2, "channels.hook.type", "must be one of"),
        (
            "channels:\n  mail: {type: email, to: [x@example.com]}\nrules: []\n",
            2,
            "channels.mail",
            "missing required key 'host'",
        ),
        (
            "rules:\n  - {name: a, metric: runs, condition: {kind: threshold, threshold: 1}}\n  - {name: a, metric: runs, condition: {kind: threshold, threshold: 2}}\n",
            3,
            "rules[1].name",
            "duplicate rule name",
        ),
        (
            "rules:\n  - name: a\n    metric: runs\n    scope: {agent: '*', model: '*'}\n    condition: {kind: threshold, threshold: 1}\n",
            4,
            "rules[0].scope",
            "at most one",
        ),
        (
            "rules:\n  - name: a\n    metric: projected_month_cost_usd\n    condition: {kind: anomaly}\n",
            4,
            "rules[0].condition.kind",
            "only kind: threshold",
        ),
        ("rules:\n  - name: a\n    name: b\n", 3, "rules[0].name", "duplicate key"),
        ("version: 2\nrules: []\n", 1, "version", "unsupported version"),
        (
            "rules:\n  - name: a\n    metric: runs\n    window: 1s\n    condition: {kind: anomaly, history: 1d}\n",
            4,
            "rules[0].window",
            "at most 5000",
        ),
        ("rules: [\n", 2, "", "not valid YAML"),
        ("rules: []\n", 1, "rules", "non-empty list"),
    ],
)
def test_bad_rules_name_line_and_key(text: str, line: int, key: str, words: str) -> None:
    with pytest.raises(RulesError) as info:
        parse(text)
    error = info.value
    assert words in str(error)
    assert error.line == line, str(error)
    assert error.key == key
    assert str(error).startswith(f"rules.yaml:{line}: ")


def test_missing_file_is_a_rules_error(tmp_path) -> None:
    with pytest.raises(RulesError, match="cannot read rules file"):
        load_rules(tmp_path / "nope.yaml")
