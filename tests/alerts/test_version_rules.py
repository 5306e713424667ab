"""A version-scoped rule on a real store: once a costlier release appears, "cost per run of the
newest version vs the previous one > +30 %, beyond noise" opens one incident for that version and
none for a release that costs the same; rules with a version scope are validated."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from agentwatch_api.schemas import VersionFigures
from agentwatch_platform.alerts.errors import RulesError
from agentwatch_platform.alerts.evaluator import Evaluator
from agentwatch_platform.alerts.quality import Pager
from agentwatch_platform.alerts.rules import parse_rules
from agentwatch_platform.alerts.sources import StoreBackend
from agentwatch_platform.alerts.version_rules import newest_pair
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.model import SpanRow
from tests.alerts.incident_setup import ingest
from tests.collector.factories import agent_run

T = int(time.time()) // 3600 * 3600 - 3 * 3600
RULES = """
defaults: {repeat_interval: 0}
rules:
  - name: release-cost-regression
    metric: version_cost_per_run_change
    scope: {version: "*"}
    window: 1d
    min_runs: 5
    condition: {kind: threshold, threshold: 0.3}
"""


def _runs(version: str, first_minute: int, cost_per_call: float, n: int = 8) -> list[SpanRow]:
    rows: list[SpanRow] = []
    for i in range(n):
        run = agent_run(
            project="p1", start_s=T + (first_minute + i) * 60, steps=2, cost_per_call=cost_per_call + 0.001 * i
        )
        rows += [replace(r, service_version=version) for r in run]
    return rows


def evaluate(store: Store, minutes: list[int]) -> list[tuple[str, int, str]]:
    """(event, minute, version) of every notification, evaluating at each minute after ``T``."""
    backend = StoreBackend(store)
    evaluator = Evaluator(parse_rules(RULES), backend, backend, Pager())  # type: ignore[arg-type]
    return [
        (event, minute, alert.scope["version"])
        for minute in minutes
        for event, alert in evaluator.run_once(now=T + minute * 60 + 1)
    ]


def test_a_costlier_release_fires_once_and_a_like_one_does_not(store: Store) -> None:
    ingest(store, _runs("1.0", 0, 0.01))
    ingest(store, _runs("1.1", 20, 0.0102))  # the same cost: within noise of 1.0
    ingest(store, _runs("2.0", 40, 0.03))  # three times the cost per run
    events = evaluate(store, [35, 45, 60, 70, 80])
    assert events == [("firing", 45, "2.0")]  # five runs of 2.0 by then (min_runs)


def test_too_few_runs_of_the_new_release_is_no_data(store: Store) -> None:
    ingest(store, _runs("1.0", 0, 0.01))
    ingest(store, _runs("2.0", 20, 0.03, n=3))  # fewer than min_runs
    assert evaluate(store, [40, 50]) == []


def test_newest_pair_orders_versions_by_their_first_run() -> None:
    def v(name: str, first: float) -> VersionFigures:
        zero = dict.fromkeys(("cost_per_run", "tokens_per_run", "steps_per_run", "latency_mean_s"), 0.0)
        return VersionFigures(
            version=name,
            runs=1,
            cost_usd=0,
            **zero,
            latency_p50_s=0,
            latency_p95_s=0,
            success_rate=None,
            successes=0,
            with_outcome=0,
            error_rate=0,
            tool_failures=0,
            feedback_score=None,
            rated_runs=0,
            first_seen=first,
            last_seen=first,
        )

    items = [v("2.0", 30), v("", 5), v("1.10", 20), v("1.9", 10)]
    assert newest_pair(items) == ("1.10", "2.0")
    assert newest_pair(items, "1.10") == ("1.9", "1.10")
    assert newest_pair(items, "1.9") is None and newest_pair(items[:2]) is None


@pytest.mark.parametrize(
    ("scope", "metric", "message"),
    [
        ('{version: "*"}', "ttft_p95", "per version: metric one of"),
        ('{version: "*", model: m}', "version_cost_per_run_change", "per version"),
        ('{agent: "*"}', "version_latency_change", 'not "*"'),
    ],
)
def test_version_scopes_are_validated(scope: str, metric: str, message: str) -> None:
    text = f"rules:\n  - name: r\n    metric: {metric}\n    scope: {scope}\n    window: 1d\n    condition: {{kind: threshold, threshold: 0.3}}\n"
    with pytest.raises(RulesError, match=message):
        parse_rules(text)


def test_a_named_version_is_a_filter() -> None:
    rule = parse_rules(RULES.replace('{version: "*"}', '{version: "2.0", agent: researcher}')).rules[0]
    assert rule.group_by == "none" and rule.filters() == {"version": "2.0", "agent": "researcher"}
