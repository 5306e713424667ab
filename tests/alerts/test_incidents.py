"""The incident lifecycle, window by window: one incident per spike however it dips, held by
hysteresis and the hold-down, ``for`` before opening, "no data" never resolving, repeats only
on the interval, and a baseline that does not learn the spike while the incident is open.

The metric source is scripted (``alerts.quality.SyntheticSource``: the values of one agent per
window); the evaluator, rules parser and detector are the real ones."""

from __future__ import annotations

import numpy as np
import pytest

from agentwatch_platform.alerts.errors import RulesError
from agentwatch_platform.alerts.evaluator import Evaluator
from agentwatch_platform.alerts.quality import Pager, Series, SyntheticSource
from agentwatch_platform.alerts.rules import parse_rules

STEP = 60
T0 = 1_700_006_400


def normal(n: int, seed: int = 1) -> list[float]:
    rng = np.random.default_rng(seed)
    return (1.0 * np.exp(rng.normal(0, 0.08, n))).tolist()


def with_spike(
    n: int, start: int, length: int, factor: float = 6.0, *, dips: tuple[int, ...] = (), seed: int = 1
) -> list[float]:
    values = normal(n, seed)
    for i in range(start, start + length):
        values[i] *= 1.2 if i - start in dips else factor
    return values


def rule_text(lifecycle: str = "", condition: str = "") -> str:
    return f"""
rules:
  - name: spend
    metric: cost_usd
    scope: {{agent: "*"}}
    window: 1m
    condition: {{kind: anomaly, transform: log, z: 5, z_resolve: 2, min_ratio: 2, history: 30m, season: 0, min_history: 10{condition}}}
    {lifecycle}
"""


def run(
    values: list[float] | dict[str, list[float | None]], lifecycle: str = "", condition: str = ""
) -> list[tuple[str, int, str]]:
    """(event, window index, agent) of every notification, evaluating once per window."""
    config = parse_rules(rule_text(lifecycle, condition))
    series_values = values if isinstance(values, dict) else {"researcher": values}
    series = [Series(name, "test", v) for name, v in series_values.items()]  # type: ignore[arg-type]
    source, pager = SyntheticSource(series, T0, STEP), Pager()
    evaluator = Evaluator(config, source, source, pager)  # type: ignore[arg-type]
    out = []
    for i in range(len(series[0].values)):
        for event, alert in evaluator.run_once(now=T0 + (i + 1) * STEP + 1):
            out.append((event, i, alert.scope["agent"]))
    return out


def test_a_spike_that_dips_is_one_incident_with_resolve_after() -> None:
    values = with_spike(60, 30, 12, dips=(4, 8))
    assert [e for e, _, _ in run(values, "resolve_after: 1")] == [
        "firing",
        "resolved",
        "firing",
        "resolved",
        "firing",
        "resolved",
    ]  # the flap
    events = run(values, "resolve_after: 2")
    assert [(e, i) for e, i, _ in events] == [("firing", 30), ("resolved", 43)]


def test_a_thirty_window_spike_stays_one_incident_until_it_ends() -> None:
    """The baseline does not learn the spike: without hiding it the detector's level creeps up
    and the incident resolves mid-spike; here it ends within two windows of the spike."""
    values = with_spike(120, 40, 30, factor=4.0)
    events = run(values, "resolve_after: 2", ", relearn_after: 40")
    assert [e for e, _, _ in events] == ["firing", "resolved"]
    (_, fired, _), (_, resolved, _) = events
    assert fired == 40 and abs((resolved - fired) - 30) <= 2


def test_a_lasting_step_becomes_the_new_normal_after_relearn_after() -> None:
    values = normal(120)
    for i in range(40, 120):
        values[i] *= 4.0
    events = run(values, "resolve_after: 2", ", relearn_after: 20")
    assert [e for e, _, _ in events] == ["firing", "resolved"]
    assert 40 + 20 <= events[1][1] <= 40 + 20 + 3


def test_keep_firing_for_holds_the_incident_after_the_condition_clears() -> None:
    values = with_spike(60, 30, 3)
    assert [(e, i) for e, i, _ in run(values)] == [("firing", 30), ("resolved", 33)]
    assert [(e, i) for e, i, _ in run(values, "keep_firing_for: 5m")] == [("firing", 30), ("resolved", 37)]


def test_for_waits_before_opening_and_the_incident_starts_at_the_first_breach() -> None:
    assert run(with_spike(60, 30, 2), "for: 2m") == []
    config = parse_rules(rule_text("for: 2m"))
    source, pager = SyntheticSource([Series("researcher", "test", with_spike(60, 30, 5))], T0, STEP), Pager()
    evaluator = Evaluator(config, source, source, pager)  # type: ignore[arg-type]
    fired = [
        alert
        for i in range(60)
        for event, alert in evaluator.run_once(now=T0 + (i + 1) * STEP + 1)
        if event == "firing"
    ]
    assert len(fired) == 1 and fired[0].started_at == T0 + 31 * STEP + 1


def test_repeat_only_on_the_interval_and_never_with_zero() -> None:
    values = with_spike(80, 30, 20)
    assert [e for e, _, _ in run(values, "repeat_interval: 0", ", relearn_after: 40")] == ["firing", "resolved"]
    events = run(values, "repeat_interval: 8m", ", relearn_after: 40")
    assert [(e, i) for e, i, _ in events] == [("firing", 30), ("repeat", 38), ("repeat", 46), ("resolved", 50)]


def test_no_data_keeps_the_incident_firing_and_notifies_once_when_asked() -> None:
    """A max-like metric (no zero-filling) whose scope goes silent mid-incident."""
    values: list[float | None] = list(with_spike(60, 30, 4))
    for i in range(32, 45):
        values[i] = None
    text = rule_text("no_data: notify").replace("cost_usd", "max_run_cost_usd")
    config = parse_rules(text)
    source, pager = SyntheticSource([Series("researcher", "test", values)], T0, STEP), Pager()  # type: ignore[arg-type]
    evaluator = Evaluator(config, source, source, pager)  # type: ignore[arg-type]
    seen = []
    for i in range(60):
        for event, alert in evaluator.run_once(now=T0 + (i + 1) * STEP + 1):
            seen.append((event, i, alert.no_data_since is not None))
        if i == 40:
            (alert,) = evaluator._active["bench"].values()
            assert alert.state == "firing" and alert.no_data_since == T0 + 33 * STEP + 1
    assert seen == [("firing", 30, False), ("no_data", 32, True), ("resolved", 45, False)]


def test_scopes_are_separate_incidents() -> None:
    events = run({"researcher": with_spike(60, 30, 3), "writer": with_spike(60, 40, 3, seed=2)})
    assert [(e, i, a) for e, i, a in events] == [
        ("firing", 30, "researcher"),
        ("resolved", 33, "researcher"),
        ("firing", 40, "writer"),
        ("resolved", 43, "writer"),
    ]


def test_lifecycle_keys_parse_with_defaults_and_errors_name_the_key() -> None:
    config = parse_rules(
        rule_text(
            "for: 2m\n    keep_firing_for: 10m\n    resolve_after: 3\n    repeat_interval: 0\n    no_data: notify"
        )
    )
    (rule,) = config.rules
    assert (rule.for_s, rule.keep_firing_for_s, rule.resolve_after, rule.repeat_interval_s, rule.no_data) == (
        120,
        600,
        3,
        0,
        "notify",
    )
    assert rule.to_out().resolve_after == 3
    assert parse_rules(rule_text("cooldown: 2h")).rules[0].repeat_interval_s == 7200  # the older name
    for bad, key in (
        ("resolve_after: 0", "resolve_after"),
        ("no_data: resolve", "no_data"),
        ("cooldown: 1h\n    repeat_interval: 2h", "cooldown"),
    ):
        with pytest.raises(RulesError) as caught:
            parse_rules(rule_text(bad))
        assert caught.value.key == f"rules[0].{key}"


def test_the_incident_ends_at_its_first_clear_window_and_resolves_when_confirmed() -> None:
    """``resolve_after: 3``: the resolved notice waits for three clear windows, but the incident's
    recorded end (``resolved_at``) is the evaluation that saw the first of them: its duration is
    the spike's, not the spike's plus the confirmation."""
    config = parse_rules(rule_text("resolve_after: 3"))
    source, pager = SyntheticSource([Series("researcher", "test", with_spike(60, 30, 6))], T0, STEP), Pager()
    evaluator = Evaluator(config, source, source, pager)  # type: ignore[arg-type]
    events = [(event, i, alert) for i in range(60) for event, alert in evaluator.run_once(now=T0 + (i + 1) * STEP + 1)]
    assert [(e, i) for e, i, _ in events] == [("firing", 30), ("resolved", 38)]
    alert = events[1][2]
    assert (
        alert.started_at == T0 + 31 * STEP + 1 and alert.resolved_at == T0 + 37 * STEP + 1
    )  # windows 30..35 breached, 36 clear
    assert alert.last_notified_at == T0 + 39 * STEP + 1 and "resolved after 6 min" in alert.message
