"""The monthly budget rule on a real store: month-to-date spend plus the last day's pace over
the rest of the month against the budget fires on the day spending picks up, where the month's
average pace (the Cost page's forecast) is still under it."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from agentwatch_platform.alerts.budget import month_remaining_s
from agentwatch_platform.alerts.evaluator import Evaluator
from agentwatch_platform.alerts.quality import Pager
from agentwatch_platform.alerts.rules import parse_rules
from agentwatch_platform.alerts.sources import StoreBackend
from agentwatch_platform.collector.storage.base import Store
from tests.collector.factories import agent_run

RULES = """
rules:
  - name: budget-pace
    metric: month_end_cost_usd
    window: 1d
    condition: {kind: threshold, threshold: "${BUDGET}"}
  - name: budget-average
    metric: projected_month_cost_usd
    window: 1d
    condition: {kind: threshold, threshold: "${BUDGET}"}
"""


def an_instant_in_a_recent_month() -> float:
    """Noon on the 8th of this month, or on the 15th of the last one early in a month: a week or
    more into its month, and within the store's retention."""
    today = datetime.now(UTC)
    if today.day >= 10:
        return datetime(today.year, today.month, 8, 12, tzinfo=UTC).timestamp()
    last = today.replace(day=1) - timedelta(days=1)
    return datetime(last.year, last.month, 15, 12, tzinfo=UTC).timestamp()


def test_the_last_days_pace_fires_before_the_months_average_does(store: Store) -> None:
    now = an_instant_in_a_recent_month()
    assert now < time.time()
    rows = []
    for k in range(10):  # $10 in the last three hours, nothing before in the month
        rows += agent_run(project="p1", start_s=now - 3 * 3600 + k * 600, steps=1, cost_per_call=1.0)
    store.insert_spans(rows)
    backend = StoreBackend(store)
    month = backend.month_cost("p1", now, 86_400)
    assert month.month_to_date_usd == pytest.approx(10.0) and month.window_usd == pytest.approx(10.0)
    pace = month.value("month_end_cost_usd")
    assert pace == pytest.approx(10.0 + 10.0 / 86_400 * month_remaining_s(now))
    average = month.value("projected_month_cost_usd")
    assert average < 100 < pace  # ~$20-40 at the average pace, over $145 at the last day's
    pager = Pager()
    evaluator = Evaluator(parse_rules(RULES, env={"BUDGET": "100"}), backend, backend, pager)  # type: ignore[arg-type]
    events = evaluator.run_once(now=now)
    assert [(event, alert.rule, round(alert.value or 0)) for event, alert in events] == [
        ("firing", "budget-pace", round(pace))
    ]


def test_month_remaining_counts_to_the_utc_months_end() -> None:
    assert month_remaining_s(datetime(2026, 2, 27, tzinfo=UTC).timestamp()) == 2 * 86_400
    assert month_remaining_s(datetime(2026, 12, 31, 18, tzinfo=UTC).timestamp()) == 6 * 3600
