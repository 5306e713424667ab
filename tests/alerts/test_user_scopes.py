"""Cost-spike rules per user id and per session id on a real store: two small users spiking at
once are two incidents of their own, where the agent's total (dominated by a heavy but steady
user) shows nothing; ``top_k`` bounds the users judged without losing them."""

from __future__ import annotations

import dataclasses
import re

import pytest

from agentwatch_platform.alerts.errors import RulesError
from agentwatch_platform.alerts.evaluator import Evaluator
from agentwatch_platform.alerts.quality import Pager
from agentwatch_platform.alerts.rules import parse_rules
from agentwatch_platform.alerts.run_scopes import run_scope_series, top_k
from agentwatch_platform.alerts.sources import StoreBackend
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.model import SpanRow
from tests.alerts.incident_setup import T0
from tests.collector.factories import agent_run

USERS = [f"u{i:02d}" for i in range(10)]
SPIKING = ("u03", "u07")
RULES = """
defaults: {{repeat_interval: 0, resolve_after: 2}}
rules:
  - name: spend-{scope}
    metric: cost_usd
    scope: {{{scope}: "*"}}
    window: 1m
    {top_k}
    condition: {{kind: anomaly, transform: log, z: 5, z_resolve: 3, min_ratio: 2, history: 30m, season: 0, min_history: 10}}
"""


def user_run(user: str, minute: int, cost: float) -> list[SpanRow]:
    rows = agent_run(project="p1", agent="researcher", start_s=T0 + minute * 60 + 5, steps=1, cost_per_call=cost)
    return [
        dataclasses.replace(r, user_id=user, session_id=f"{user}-s{minute // 10}") if r.kind == "run" else r
        for r in rows
    ]


def seed(store: Store) -> None:
    """Ten users at $0.01 a run a minute and a steady heavy one at $0.50; two users spend 20x in
    minutes 20-21."""
    rows = []
    for minute in range(30):
        rows += user_run("heavy", minute, 0.50)
        for user in USERS:
            rows += user_run(user, minute, 0.20 if user in SPIKING and minute in (20, 21) else 0.01)
    store.insert_spans(rows)


def evaluate(store: Store, scope: str, top: str = "") -> list[tuple[str, int, str]]:
    config = parse_rules(RULES.format(scope=scope, top_k=top))
    backend, pager = StoreBackend(store), Pager()
    evaluator = Evaluator(config, backend, backend, pager)  # type: ignore[arg-type]
    return [
        (event, minute, alert.scope.get(scope, ""))
        for minute in range(12, 29)
        for event, alert in evaluator.run_once(now=T0 + minute * 60 + 30)
    ]


def test_each_spiking_user_is_an_incident_the_agent_total_hides(store: Store) -> None:
    seed(store)
    assert evaluate(store, "agent") == []  # $1.00 -> $1.38 a minute: the heavy user hides both
    events = evaluate(store, "user", "top_k: 3")
    assert sorted(events) == [
        ("firing", 20, "u03"),
        ("firing", 20, "u07"),
        ("resolved", 24, "u03"),
        ("resolved", 24, "u07"),
    ]
    sessions = run_scope_series(store, "p1", "cost_usd", T0 + 1200, T0 + 1260, 60, "session")
    assert {p.group: p.value for p in sessions.points}["u03-s2"] == pytest.approx(0.20)
    assert len(sessions.points) == 11  # one session per user in that minute


def test_top_k_keeps_the_highest_now_and_every_open_incident() -> None:
    groups = {"a": [1.0, 9.0, 0.0], "b": [1.0, 2.0, 5.0], "c": [1.0, 1.0, 1.0], "d": [3.0, 0.5, None]}
    assert set(top_k(groups, 2)) == {"a", "b"}
    assert set(top_k(groups, 2, keep={"d"})) == {"a", "b", "d"}
    assert top_k(groups, 0) == groups


@pytest.mark.parametrize(
    ("scope", "problem"),
    [
        ('{user: "alice"}', 'takes "*" only'),
        ('{user: "*", agent: "*"}', "at most one of"),
        ('{session: "*", model: m}', "per session"),
    ],
)
def test_user_and_session_scopes_are_checked(scope: str, problem: str) -> None:
    with pytest.raises(RulesError, match=re.escape(problem)):
        parse_rules(
            f"rules:\n  - name: a\n    metric: cost_usd\n    scope: {scope}\n    condition: {{kind: threshold, threshold: 1}}\n"
        )
    with pytest.raises(RulesError, match="per user"):
        parse_rules(
            'rules:\n  - name: a\n    metric: ttft_p95\n    scope: {user: "*"}\n    condition: {kind: threshold, threshold: 1}\n'
        )


def test_top_k_is_part_of_the_rule_as_served() -> None:
    rule = parse_rules(RULES.format(scope="user", top_k="top_k: 3")).rules[0]
    assert (rule.group_by, rule.top_k, rule.to_out().top_k) == ("user", 3, 3)
    with pytest.raises(RulesError, match="top_k"):
        parse_rules(RULES.format(scope="user", top_k="top_k: -1"))


def test_refused_requests_are_not_runs_of_a_users_baseline(store: Store) -> None:
    """A user's refused requests ($0, no work) neither count as runs nor pull its runs' figures down."""
    rows = user_run("u01", 0, 0.01)
    refused = [dataclasses.replace(r, outcome="refused") for r in user_run("u01", 0, 0.0) if r.kind == "run"]
    store.insert_spans(rows + refused + [dataclasses.replace(r, trace_id="f" * 32) for r in refused])
    series = {
        metric: run_scope_series(store, "p1", metric, T0, T0 + 60, 60, "user").points[0].value
        for metric in ("runs", "cost_usd")
    }
    assert series == {"runs": 1.0, "cost_usd": pytest.approx(0.01)}


def test_a_users_runs_still_on_their_way_are_not_judged_missing(store: Store) -> None:
    """A user's runs come 60 s after they start, and the collector's watermark trails by 150 s: a
    per-user ``below`` rule judges the newest bucket the watermark calls complete, not the minute
    just ended whose last run is still on its way (judged by the clock, it read 2 runs of 3)."""
    config = parse_rules("""
rules:
  - name: quiet-user
    metric: runs
    scope: {user: "*"}
    window: 1m
    condition: {kind: threshold, threshold: 3, direction: below}
""")
    backend, pager = StoreBackend(store, lag=lambda: 150.0), Pager()
    evaluator = Evaluator(config, backend, backend, pager)  # type: ignore[arg-type]
    starts = [minute * 60 + s for minute in range(16) for s in ((5, 25, 45) if minute < 10 else (5,))]
    events, arrived = [], 0
    for minute in range(3, 16):
        now = minute * 60 + 30
        coming = [s for s in starts[arrived:] if s + 60 <= now]  # started at least 60 s ago
        for start in coming:
            store.insert_spans(_user_run_at("u01", start))
        arrived += len(coming)
        events += [(e, minute, a.scope["user"]) for e, a in evaluator.run_once(now=T0 + now)]
    assert events == [("firing", 13, "u01")]  # minute 10, the first with one run, once complete


def _user_run_at(user: str, start_s: float) -> list[SpanRow]:
    rows = agent_run(project="p1", agent="researcher", start_s=T0 + start_s, steps=1, cost_per_call=0.01)
    return [dataclasses.replace(r, user_id=user) if r.kind == "run" else r for r in rows]
