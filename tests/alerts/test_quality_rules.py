"""The default success-rate and feedback-score rules fire on a seeded drop (issue: quality signals)."""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Iterator

import pytest

from agentwatch_platform.alerts.channels import Dispatcher
from agentwatch_platform.alerts.evaluator import Evaluator
from agentwatch_platform.alerts.model import Delivery
from agentwatch_platform.alerts.rules import load_rules, parse_rules
from agentwatch_platform.alerts.sources import StoreBackend
from agentwatch_platform.collector.storage.chdb_store import ChdbStore
from tests.collector.factories import agent_run

T = int(time.time()) // 3600 * 3600 - 2 * 86_400  # recent: older spans fall to the retention TTL
HOURS = 15  # 14 normal hours, then the drop


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChdbStore]:
    """Ten runs an hour: nine of ten succeed and score 4-5, except in the last hour (3/10, score 1-2)."""
    s = ChdbStore(tmp_path_factory.mktemp("quality") / "chdb")
    s.migrate()
    spans, feedback = [], []
    for hour in range(HOURS):
        dropped = hour == HOURS - 1
        for k in range(10):
            success = k < (3 if dropped else 9)
            rows = agent_run(
                project="q",
                agent="researcher",
                start_s=T + hour * 3600 + k * 300,
                steps=1,
                outcome="success" if success else "failure",
            )
            spans += rows
            score = (1.0 + k % 2) if dropped else (4.0 + k % 2)
            feedback.append(
                ("q", rows[0].trace_id, uuid.uuid4().hex, score, "", "", "user", T + hour * 3600 + k * 300 + 60)
            )
    s.insert_spans(spans)
    s.insert_rows(
        "feedback",
        ("project", "trace_id", "feedback_id", "score", "label", "comment", "source", "created_at"),
        feedback,
    )
    yield s
    s.close()


def evaluate(store: ChdbStore, rule_name: str, now: float) -> list[tuple[str, dict[str, str], float | None]]:
    config = load_rules()
    config = dataclasses.replace(config, rules=tuple(r for r in config.rules if r.name == rule_name))
    backend = StoreBackend(store)
    deliveries: list[Delivery] = []
    dispatcher = Dispatcher(config.channels, record=deliveries.append, policy=config.delivery)
    try:
        events = Evaluator(config, backend, backend, dispatcher).run_once(now=now)
        assert dispatcher.flush(10)
    finally:
        dispatcher.close()
    assert len(deliveries) == len(events) and all(d.ok and d.channel == "log" for d in deliveries)
    return [(event, alert.scope, alert.value) for event, alert in events]


@pytest.mark.parametrize(("rule", "value"), [("success-rate-drop", 0.3), ("feedback-score-drop", 1.5)])
def test_quality_drop_fires(store: ChdbStore, rule: str, value: float) -> None:
    before = evaluate(store, rule, now=T + (HOURS - 1) * 3600 + 60)  # the last complete hour is still normal
    assert before == []
    after = evaluate(store, rule, now=T + HOURS * 3600 + 60)
    assert after == [("firing", {"agent": "researcher"}, pytest.approx(value))]


@pytest.mark.parametrize(("min_runs", "fires"), [(10, True), (11, False)])
def test_buckets_with_too_few_runs_are_no_data(store: ChdbStore, min_runs: int, fires: bool) -> None:
    config = parse_rules(f"""
rules:
  - name: success-floor-{min_runs}
    metric: success_rate
    window: 1h
    min_runs: {min_runs}
    condition: {{kind: threshold, threshold: 0.5, direction: below}}
""")
    backend = StoreBackend(store)
    dispatcher = Dispatcher(config.channels, record=lambda d: None)
    try:
        events = Evaluator(config, backend, backend, dispatcher).run_once(now=T + HOURS * 3600 + 60)
    finally:
        dispatcher.close()
    assert [e for e, _ in events] == (["firing"] if fires else [])
