"""Figures per agent version equal hand counts over a fixture, sum to the project's runs, and two
versions compare with the stated tests (a costlier release flagged, a like one not). Both back ends."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from agentwatch_api.schemas import FeedbackIn
from agentwatch_platform.collector.query import feedback as feedback_query
from agentwatch_platform.collector.query import runs as runs_query
from agentwatch_platform.collector.query import versions
from agentwatch_platform.collector.query.ranges import InvalidQuery
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.model import SpanRow
from tests.collector.factories import agent_run

T = (int(time.time()) // 3600 - 3) * 3600
W = {"start": T, "end": T + 3600}
P = "ver"


def _run(version: str, start: int, *, project: str = P, **kwargs: object) -> list[SpanRow]:
    rows = agent_run(project=project, agent="research", start_s=T + start, **kwargs)  # type: ignore[arg-type]
    return [replace(r, service_version=version) for r in rows]


# v1: six runs of 2 steps at 0.01 a call; v2: six runs of 2 steps at 0.03 a call (a costlier policy).
# Outcomes: v1 5 of 6 succeed, v2 3 of 6. A refused request of v2 and a running v2 run (no root) count
# in no figure; another project's v2 runs neither.
def _fixture() -> dict[str, list[list[SpanRow]]]:
    v1 = [
        _run("1.0", 60 * i, steps=2, cost_per_call=0.01 + 0.001 * i, outcome="success" if i else "failure")
        for i in range(6)
    ]
    v2 = [
        _run("2.0", 900 + 60 * i, steps=2, cost_per_call=0.03 + 0.001 * i, outcome="success" if i % 2 else "failure")
        for i in range(6)
    ]
    refused = [replace(r, outcome="refused") for r in _run("2.0", 1500, steps=1) if r.kind == "run"]
    running = [r for r in _run("2.0", 1600, steps=1) if r.kind != "run"]
    other = [_run("2.0", 1700, project="other", steps=5, cost_per_call=1.0)]
    return {"1.0": v1, "2.0": v2, "refused": [refused], "running": [running], "other": other}


@pytest.fixture(scope="module")
def seeded(module_store: Store) -> dict[str, list[list[SpanRow]]]:
    runs = _fixture()
    for group in runs.values():
        for rows in group:
            module_store.insert_spans(rows)
    feedback_query.add_feedback(module_store, P, runs["1.0"][0][0].trace_id, FeedbackIn(score=1.0))
    feedback_query.add_feedback(module_store, P, runs["1.0"][1][0].trace_id, FeedbackIn(score=0.5))
    feedback_query.add_feedback(module_store, P, runs["2.0"][0][0].trace_id, FeedbackIn(score=0.0))
    return runs


def _cost(rows: list[SpanRow]) -> float:
    return sum(r.cost_usd for r in rows if r.kind != "run")


def test_version_figures_equal_hand_counts(module_store: Store, seeded: dict[str, list[list[SpanRow]]]) -> None:
    out = versions.versions(module_store, P, **W)
    by = {v.version: v for v in out.items}
    assert list(by) == ["1.0", "2.0"]  # oldest first; refused, running and other-project runs add none
    for name in ("1.0", "2.0"):
        runs = seeded[name]
        figures = by[name]
        assert figures.runs == 6
        assert figures.cost_usd == pytest.approx(sum(_cost(r) for r in runs))
        assert figures.cost_per_run == pytest.approx(sum(_cost(r) for r in runs) / 6)
        assert figures.tokens_per_run == pytest.approx(2 * 120)
        assert figures.steps_per_run == 2
        assert figures.latency_mean_s == pytest.approx(3.0)
    assert (by["1.0"].successes, by["1.0"].with_outcome, by["1.0"].success_rate) == (5, 6, pytest.approx(5 / 6))
    assert by["2.0"].success_rate == pytest.approx(0.5)
    assert (by["1.0"].feedback_score, by["1.0"].rated_runs) == (pytest.approx(0.75), 2)
    assert (by["2.0"].feedback_score, by["2.0"].rated_runs) == (0.0, 1)


def test_version_costs_sum_to_the_runs_of_the_range(module_store: Store, seeded: dict) -> None:
    """The runs list (finished, counted runs) and the versions split the same cost."""
    out = versions.versions(module_store, P, **W)
    page = runs_query.list_runs(module_store, P, **W, limit=500)
    finished = [r for r in page.items if r.status not in ("running", "incomplete")]
    assert sum(v.cost_usd for v in out.items) == pytest.approx(sum(r.cost_usd for r in finished))
    assert sum(v.runs for v in out.items) == len(finished)


def test_runs_list_filters_and_shows_the_version(module_store: Store, seeded: dict) -> None:
    page = runs_query.list_runs(module_store, P, **W, version="1.0", limit=500)
    assert page.total == 6 and {r.version for r in page.items} == {"1.0"}
    assert {r.trace_id for r in page.items} == {rows[0].trace_id for rows in seeded["1.0"]}
    detail = runs_query.get_run(module_store, P, seeded["2.0"][0][0].trace_id)
    assert detail is not None and detail.run.version == "2.0"


def test_a_costlier_version_is_flagged_beyond_noise(module_store: Store, seeded: dict) -> None:
    out = versions.compare(module_store, P, "1.0", "2.0", **W)
    changes = {c.metric: c for c in out.changes}
    cost = changes["cost_per_run"]
    assert cost.test == "welch_t" and cost.significant and (cost.n_a, cost.n_b) == (6, 6)
    assert cost.difference == pytest.approx(out.b.cost_per_run - out.a.cost_per_run)
    assert cost.relative == pytest.approx(cost.difference / out.a.cost_per_run)
    assert cost.low is not None and cost.high is not None and 0 < cost.low < cost.difference < cost.high
    assert not changes["steps_per_run"].significant  # the same steps: no spread, no difference
    success = changes["success_rate"]
    assert success.test == "two_proportion_z" and success.difference == pytest.approx(0.5 - 5 / 6)
    assert not success.significant  # 5/6 vs 3/6 on six runs each is within noise
    assert changes["feedback_score"].test == "none"  # one rated run of 2.0: no test


def test_compare_refuses_what_it_cannot_compare(module_store: Store, seeded: dict) -> None:
    with pytest.raises(InvalidQuery, match="twice"):
        versions.compare(module_store, P, "1.0", "1.0", **W)
    with pytest.raises(InvalidQuery, match=r"b='9\.9': no finished run"):
        versions.compare(module_store, P, "1.0", "9.9", **W)
    with pytest.raises(InvalidQuery, match="no finished run"):  # another project's version
        versions.compare(module_store, "nobody", "1.0", "2.0", **W)
