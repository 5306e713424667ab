"""Per-user and per-session figures equal hand counts on a fixture and sum to the runs list; a
session's runs come in order with what was asked and got where captured; refused requests are
counted apart; project isolation. Both back ends. Over HTTP: ``test_users_http.py``."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from agentwatch_api.schemas import FeedbackIn
from agentwatch_platform.collector.query import feedback as feedback_query
from agentwatch_platform.collector.query import runs as runs_query
from agentwatch_platform.collector.query import users
from agentwatch_platform.collector.query.ranges import InvalidQuery
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.model import SpanRow
from tests.collector.factories import agent_run

T = (int(time.time()) // 3600 - 3) * 3600
W = {"start": T, "end": T + 3600}
P = "usr"


def _run(user: str, session: str, start: int, *, project: str = P, budget: float = 0.0, **kw: object) -> list[SpanRow]:
    rows = agent_run(project=project, start_s=T + start, **kw)  # type: ignore[arg-type]
    out = []
    for r in rows:
        r = replace(r, user_id=user, session_id=session)
        if r.kind == "run" and budget:
            r = replace(r, attributes={"agentwatch.budget.max_cost_usd": str(budget)})
        out.append(r)
    return out


def _fixture() -> dict[str, list[SpanRow]]:
    a1 = _run("alice", "s-a", 60, steps=2, outcome="success", budget=0.1)  # 0.02 of 0.1
    a2 = _run("alice", "s-a", 600, steps=3, outcome="failure", budget=0.1)  # 0.03 of 0.1
    a2 = [
        replace(r, input_text="what is X?", output_text="") if r.kind == "llm" and r.step_index == 0 else r for r in a2
    ]
    a2 = [replace(r, output_text="X is Y.") if r.kind == "llm" and r.step_index == 2 else r for r in a2]
    b1 = _run("bob", "s-b", 300, steps=1, cost_per_call=0.08, outcome="success")
    anon = _run("", "", 900, steps=1)
    refused = [replace(r, outcome="refused") for r in _run("alice", "s-a", 1200, steps=1) if r.kind == "run"]
    other = _run("alice", "s-a", 100, project="elsewhere", steps=4, cost_per_call=1.0)
    return {"a1": a1, "a2": a2, "b1": b1, "anon": anon, "refused": refused, "other": other}


@pytest.fixture(scope="module")
def seeded(module_store: Store) -> dict[str, list[SpanRow]]:
    runs = _fixture()
    for rows in runs.values():
        module_store.insert_spans(rows)
    feedback_query.add_feedback(module_store, P, runs["a1"][0].trace_id, FeedbackIn(score=1.0))
    return runs


def _cost(rows: list[SpanRow]) -> float:
    return sum(r.cost_usd for r in rows if r.kind != "run")


def test_user_figures_equal_hand_counts(module_store: Store, seeded: dict[str, list[SpanRow]]) -> None:
    page = users.users(module_store, P, **W)
    by = {u.user_id: u for u in page.items}
    assert [u.user_id for u in page.items] == ["bob", "alice", ""]  # by cost, most first
    alice = by["alice"]
    assert (alice.runs, alice.sessions, alice.successes, alice.with_outcome) == (2, 1, 1, 2)
    assert alice.cost_usd == pytest.approx(_cost(seeded["a1"]) + _cost(seeded["a2"]))
    assert alice.cost_per_success == pytest.approx(alice.cost_usd / 1)
    assert alice.success_rate == 0.5 and alice.feedback_score == 1.0 and alice.rated_runs == 1
    assert (alice.budget_runs, alice.budget_used) == (2, pytest.approx((0.2 + 0.3) / 2))
    assert alice.refused == 1 and by["bob"].refused == 0
    assert sum(alice.trend) == pytest.approx(alice.cost_usd) and len(alice.trend) == users.TREND_BUCKETS
    assert by["bob"].budget_used is None and by[""].cost_per_success is None
    assert page.total == 3


def test_one_users_figures_are_its_row_of_the_list(module_store: Store, seeded: dict) -> None:
    listed = {u.user_id: u for u in users.users(module_store, P, **W).items}
    alice = users.users(module_store, P, **W, user_id="alice")
    assert alice.items == [listed["alice"]] and alice.total == 1
    assert users.users(module_store, P, **W, user_id="nobody").items == []


def test_users_costs_sum_to_the_runs_list(module_store: Store, seeded: dict) -> None:
    page = users.users(module_store, P, **W)
    listed = runs_query.list_runs(module_store, P, **W, limit=500)
    assert sum(u.cost_usd for u in page.items) == pytest.approx(sum(r.cost_usd for r in listed.items))
    assert sum(u.runs for u in page.items) == listed.total


def test_sessions_and_a_session_replayed_in_order(module_store: Store, seeded: dict) -> None:
    page = users.sessions(module_store, P, **W, sort="-cost_usd")
    assert [s.session_id for s in page.items] == ["s-b", "s-a"] and page.items[1].user_id == "alice"
    assert users.sessions(module_store, P, **W, user_id="bob").total == 1
    detail = users.session(module_store, P, "s-a", **W)
    assert detail is not None and detail.refused == 1 and not detail.truncated
    assert [t.run.trace_id for t in detail.turns] == [seeded["a1"][0].trace_id, seeded["a2"][0].trace_id]
    assert (detail.turns[0].asked, detail.turns[0].answered) == (None, None)  # not captured
    assert (detail.turns[1].asked, detail.turns[1].answered) == ("what is X?", "X is Y.")
    assert detail.cost_usd == pytest.approx(_cost(seeded["a1"]) + _cost(seeded["a2"]))
    assert users.session(module_store, "nobody", "s-a", **W) is None


def test_a_bad_sort_is_refused(module_store: Store) -> None:
    with pytest.raises(InvalidQuery, match="sort must be one of"):
        users.users(module_store, P, **W, sort="-nonsense")
