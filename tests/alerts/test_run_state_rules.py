"""Issue 20's alert rules on a real store: a run stuck in ``running`` past a threshold (a hung
agent) opens one incident that resolves when the run stops being ``running``; a burst of runs
that never finish (crashing agents) raises the incomplete-run rate of that agent only."""

from __future__ import annotations

import time

import pytest

from agentwatch_platform.alerts.evaluator import Evaluator
from agentwatch_platform.alerts.quality import Pager
from agentwatch_platform.alerts.rules import parse_rules
from agentwatch_platform.alerts.run_states import run_state_values
from agentwatch_platform.alerts.sources import StoreBackend
from agentwatch_platform.collector.storage.base import Store
from tests.alerts.incident_setup import ingest, rootless
from tests.collector.factories import agent_run

T = int(time.time()) // 3600 * 3600 - 3 * 3600  # a recent hour boundary
IDLE_S = 300.0
RULES = """
defaults: {repeat_interval: 0}
rules:
  - name: stuck-run
    metric: oldest_running_run_s
    scope: {agent: "*"}
    window: 5m
    condition: {kind: threshold, threshold: 1500}
  - name: incomplete-run-rate
    metric: incomplete_run_rate
    scope: {agent: "*"}
    window: 15m
    min_runs: 3
    condition: {kind: threshold, threshold: 0.25}
"""


def evaluate(store: Store, minutes: list[int]) -> list[tuple[str, str, int, str]]:
    """(event, rule, minute, agent) of every notification, evaluating at each minute after ``T``."""
    pager = Pager()
    backend = StoreBackend(store, idle_timeout_s=IDLE_S)
    evaluator = Evaluator(parse_rules(RULES), backend, backend, pager)  # type: ignore[arg-type]
    return [
        (event, alert.rule, minute, alert.scope["agent"])
        for minute in minutes
        for event, alert in evaluator.run_once(now=T + minute * 60 + 1)
    ]


def test_a_hung_run_is_one_incident_until_it_stops_running(store: Store) -> None:
    ingest(store, rootless("looper", T, range(0, 41 * 60, 60)))  # a step a minute for 40 minutes, no root
    ingest(store, agent_run(project="p1", agent="writer", start_s=T, steps=2))  # finished at once
    events = evaluate(store, [10, 15, 20, 25, 30, 40, 45, 50, 55])
    assert [e for e in events if e[1] == "stuck-run"] == [
        ("firing", "stuck-run", 25, "looper"),
        ("resolved", "stuck-run", 50, "looper"),
    ]
    # at 50 min its last span is 10 min old: incomplete, no longer running (the crash rule's business)
    ages = run_state_values(
        store, "p1", "oldest_running_run_s", now=T + 30 * 60, window_s=300, idle_timeout_s=IDLE_S, group_by="agent"
    )
    assert ages["looper"] == pytest.approx(30 * 60, abs=2) and ages["writer"] == 0.0


def test_crashing_runs_raise_the_incomplete_rate_of_their_agent_only(store: Store) -> None:
    rows = []
    for k in range(4):  # four crashes and two finished runs in the first minutes...
        rows += rootless("crasher", T + k * 60, range(0, 3))
    for k in range(2):
        rows += agent_run(project="p1", agent="crasher", start_s=T + k * 60 + 30, steps=1)
    for k in range(6):
        rows += agent_run(project="p1", agent="steady", start_s=T + k * 60, steps=1)
    for k in range(5):  # ...then five runs that finish
        rows += agent_run(project="p1", agent="crasher", start_s=T + (30 + k) * 60, steps=1)
    ingest(store, rows)
    rates = run_state_values(
        store,
        "p1",
        "incomplete_run_rate",
        now=T + 10 * 60,
        window_s=900,
        idle_timeout_s=IDLE_S,
        group_by="agent",
        min_runs=3,
    )
    assert rates == {"crasher": pytest.approx(4 / 6), "steady": 0.0}
    events = [e for e in evaluate(store, [3, 10, 25, 40]) if e[1] == "incomplete-run-rate"]
    # minute 3: the crashed runs are still "running" (idle timeout not passed); 10: 4 of 6 ended runs
    # incomplete; 25: no run ended in 15 min (no data: the incident stays); 40: five finished, none crashed
    assert events == [
        ("firing", "incomplete-run-rate", 10, "crasher"),
        ("resolved", "incomplete-run-rate", 40, "crasher"),
    ]


def test_run_state_rules_are_thresholds_per_agent_or_project() -> None:
    with pytest.raises(Exception, match="supports only kind: threshold"):
        parse_rules("rules:\n  - name: a\n    metric: incomplete_run_rate\n    condition: {kind: anomaly}\n")
    with pytest.raises(Exception, match="not per model"):
        parse_rules(
            "rules:\n  - name: a\n    metric: oldest_running_run_s\n    scope: {model: '*'}\n    condition: {kind: threshold, threshold: 60}\n"
        )


def test_a_stuck_run_incident_resolves_when_its_agent_has_had_no_run_for_a_day(store: Store) -> None:
    ingest(store, rootless("looper", T, range(0, 41 * 60, 60)))
    events = evaluate(store, [25, 30, 2 * 24 * 60])  # two days later nothing of it is left in the lookback
    assert [(e, m) for e, rule, m, _ in events if rule == "stuck-run"] == [("firing", 25), ("resolved", 2 * 24 * 60)]
