"""Per-run metrics scoped per agent version: "cost per run of version 1.1 above $0.05" reads whole
runs of that version (``runs_agg`` has the version; the rollups do not), in process and over the
HTTP API ``agentwatch alerts run`` reads; it fires for the costlier release and not for the one
before it, and the figures it judges are the fixture's runs counted by hand."""

from __future__ import annotations

import re
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import replace

import pytest

from agentwatch_platform.alerts.errors import RulesError
from agentwatch_platform.alerts.evaluator import Evaluator
from agentwatch_platform.alerts.quality import Pager
from agentwatch_platform.alerts.rules import parse_rules
from agentwatch_platform.alerts.run_scopes import run_scope_series
from agentwatch_platform.alerts.sources import HttpBackend, SeriesQuery, StoreBackend
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.model import SpanRow
from tests.alerts.incident_setup import ingest
from tests.collector.factories import agent_run
from tests.collector.ingest_helpers import Running, serve, settings_for

T = int(time.time()) // 60 * 60 - 1800  # a recent minute boundary
MINUTES = 6
RULE = """
defaults: {{repeat_interval: 0}}
rules:
  - name: cost-per-run-{name}
    metric: cost_per_run
    scope: {{version: "{version}"}}
    window: 1m
    condition: {{kind: threshold, threshold: 0.05}}
"""


def fixture_rows(project: str) -> list[SpanRow]:
    """Two runs a minute of each of 1.0 (2 steps at $0.01-0.015 a call) and 1.1 (3 steps at
    $0.03-0.035: costlier), and one run without a version (in no version's figures)."""
    rows: list[SpanRow] = []
    for minute in range(MINUTES):
        for k in range(2):
            for version, steps, cost in (("1.0", 2, 0.01), ("1.1", 3, 0.03)):
                run = agent_run(
                    project=project, start_s=T + minute * 60 + 5 + k * 20, steps=steps, cost_per_call=cost + 0.005 * k
                )
                rows += [replace(r, service_version=version) for r in run]
        rows += agent_run(project=project, start_s=T + minute * 60 + 50, steps=1, cost_per_call=1.0)
    return rows


def hand_counts(rows: list[SpanRow]) -> dict[tuple[int, str], tuple[int, float, float]]:
    """(minute, version) -> (runs, cost per run, steps per run), counted from the rows themselves."""
    runs: dict[str, dict] = defaultdict(lambda: {"cost": 0.0, "steps": 0})
    for r in rows:
        run = runs[r.trace_id]
        run["cost"] += r.cost_usd
        run["steps"] += r.kind == "step"
        if r.kind == "run":
            run["key"] = (int(r.start_time_ns // 1e9 - T) // 60, r.service_version)
    grouped: dict[tuple[int, str], list[dict]] = defaultdict(list)
    for run in runs.values():
        if run["key"][1]:
            grouped[run["key"]].append(run)
    return {
        key: (len(group), sum(r["cost"] for r in group) / len(group), sum(r["steps"] for r in group) / len(group))
        for key, group in grouped.items()
    }


def evaluate(backend: StoreBackend | HttpBackend, version: str) -> list[tuple[str, int, dict[str, str]]]:
    evaluator = Evaluator(
        parse_rules(RULE.format(version=version, name=version.replace("*", "each"))), backend, backend, Pager()
    )  # type: ignore[arg-type]
    return [
        (event, minute, alert.scope)
        for minute in range(1, MINUTES + 2)
        for event, alert in evaluator.run_once(now=T + minute * 60 + 30)
    ]


def test_per_version_figures_are_the_hand_counts(store: Store) -> None:
    rows = fixture_rows("p1")
    ingest(store, rows)
    figures = {
        metric: {
            (round((p.t - T) / 60), p.group): p.value
            for p in run_scope_series(store, "p1", metric, T, T + MINUTES * 60, 60, "version").points
        }
        for metric in ("runs", "cost_per_run", "steps_per_run")
    }
    counted = hand_counts(rows)
    assert set(figures["runs"]) == set(counted) and len(counted) == 2 * MINUTES
    for key, (runs, cost_per_run, steps_per_run) in counted.items():
        assert figures["runs"][key] == runs == 2
        assert figures["cost_per_run"][key] == pytest.approx(cost_per_run)
        assert figures["steps_per_run"][key] == pytest.approx(steps_per_run)
    assert counted[(0, "1.1")][1] == pytest.approx(3 * 0.0325) and counted[(0, "1.0")][1] == pytest.approx(2 * 0.0125)


def test_a_rule_on_the_costlier_version_fires_and_on_the_other_does_not(store: Store) -> None:
    ingest(store, fixture_rows("p1"))
    backend = StoreBackend(store)
    assert evaluate(backend, "1.1") == [("firing", 1, {"version": "1.1"})]
    assert evaluate(backend, "1.0") == []
    assert evaluate(backend, "*") == [("firing", 1, {"version": "1.1"})]  # one incident per version


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    with serve(settings_for(tmp_path_factory.mktemp("versions") / "data")) as running:
        yield running


def test_the_same_over_the_http_api(collector: Running) -> None:
    """``agentwatch alerts run`` reads the per-version series from ``/api/alerts/scope-series``."""
    rows = fixture_rows("v")
    collector.app.state.store.get().insert_spans(rows)
    backend = HttpBackend(collector.url, [collector.key("v", ["read", "admin"])])
    try:
        series = backend.timeseries("v", SeriesQuery("cost_per_run", T, T + 60, 60, "version"))
        assert {p.group: p.value for p in series.points} == pytest.approx(
            {version: figures[1] for (minute, version), figures in hand_counts(rows).items() if minute == 0}
        )
        assert evaluate(backend, "1.1") == [("firing", 1, {"version": "1.1"})]
        assert evaluate(backend, "1.0") == []
    finally:
        backend.close()


@pytest.mark.parametrize(
    ("metric", "scope", "message"),
    [
        ("ttft_p95", '{version: "1.1"}', "per version: metric one of cost_usd, runs, cost_per_run"),
        ("cost_per_run", '{version: "1.1", model: m}', "per version: metric one of"),
        ("cost_per_run", '{version: "1.1", user: "*"}', "per user: metric one of"),
        ("cost_usd", '{version: "1.1", agent: "*"}', "with an agent filter at most"),
        ("cost_per_run", "{agent: researcher}", "cost_per_run is per user, session or version"),
    ],
)
def test_scopes_that_cannot_be_read_per_run_are_refused(metric: str, scope: str, message: str) -> None:
    text = f"rules:\n  - name: r\n    metric: {metric}\n    scope: {scope}\n    condition: {{kind: threshold, threshold: 1}}\n"
    with pytest.raises(RulesError, match=re.escape(message)):
        parse_rules(text)


def test_a_named_version_on_a_per_run_metric_is_read_per_version() -> None:
    rule = parse_rules(RULE.format(version="1.1", name="v")).rules[0]
    assert (rule.group_by, rule.series_group_by, rule.filters()) == ("none", "version", {"version": "1.1"})
