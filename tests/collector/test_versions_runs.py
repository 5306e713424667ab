"""Per-version run figures are run-scoped: a run's latency, outcome and cost count under its root
span's ``service.version``, whatever version its child spans carry (a third-party library's spans
name their own release). Both back ends."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from agentwatch_platform.collector.query import versions
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.model import SpanRow
from tests.collector.factories import agent_run

T = (int(time.time()) // 3600 - 3) * 3600
W = {"start": T, "end": T + 3600}
P = "verrun"


def _run(root: str, children: str, start: int, *, steps: int, outcome: str) -> list[SpanRow]:
    """A run whose root says ``root`` and every other span ``children``."""
    rows = agent_run(project=P, agent="research", start_s=T + start, steps=steps, outcome=outcome)
    return [replace(r, service_version=root if r.kind == "run" else children) for r in rows]


def test_latency_and_success_count_under_the_roots_version(store: Store) -> None:
    runs = [
        _run("1.0", "2.0", 0, steps=1, outcome="success"),
        _run("1.0", "2.0", 60, steps=2, outcome="success"),
        _run("1.0", "", 120, steps=3, outcome="failure"),
        _run("2.0", "1.0", 180, steps=5, outcome="success"),
        _run("", "1.0", 240, steps=4, outcome="failure"),
    ]
    for rows in runs:
        store.insert_spans(rows)
    by = {v.version: v for v in versions.versions(store, P, **W).items}
    assert sorted(by) == ["", "1.0", "2.0"]
    one, two, unknown = by["1.0"], by["2.0"], by[""]
    duration = {id(r): (max(s.end_time_ns for s in r) - min(s.start_time_ns for s in r)) / 1e9 for r in runs}
    assert (one.runs, two.runs, unknown.runs) == (3, 1, 1)
    assert one.latency_mean_s == pytest.approx(sum(duration[id(r)] for r in runs[:3]) / 3)
    assert one.latency_p50_s == pytest.approx(duration[id(runs[1])])
    assert (two.latency_p50_s, two.latency_p95_s) == (pytest.approx(duration[id(runs[3])]),) * 2
    assert unknown.latency_mean_s == pytest.approx(duration[id(runs[4])])
    assert (one.successes, one.with_outcome, one.success_rate) == (2, 3, pytest.approx(2 / 3))
    assert (two.success_rate, unknown.success_rate) == (1.0, 0.0)
    assert one.cost_usd == pytest.approx(sum(s.cost_usd for r in runs[:3] for s in r if s.kind != "run"))
    assert one.steps_per_run == pytest.approx(2.0)
