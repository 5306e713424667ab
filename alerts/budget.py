"""The monthly budget rules' figures: month-to-date spend and where the month is heading.

- ``projected_month_cost_usd``: month-to-date spend extrapolated at the month's average rate
  so far (the Cost page's forecast): steady, slow to notice a change of pace;
- ``month_end_cost_usd``: month-to-date spend plus the *current* burn rate (the cost of the
  rule's last ``window``) over the rest of the month: what the month ends at if the pace of
  the last window goes on. Against ``AGENTWATCH_MONTHLY_BUDGET_USD`` it fires on the day the
  pace turns, not weeks later when the average has caught up (the burn-rate idea of SRE error
  budgets). A window of a day averages out the daily pattern.

Months are UTC calendar months, as on the Cost page.
"""

from __future__ import annotations

from calendar import monthrange
from dataclasses import dataclass
from datetime import UTC, datetime

BUDGET_METRICS = ("projected_month_cost_usd", "month_end_cost_usd")


@dataclass(frozen=True)
class MonthCost:
    """What the collector says about the month at ``now``, and the cost of the last ``window_s``."""

    now: float
    month_to_date_usd: float
    projected_month_usd: float  # at the month's average rate so far
    window_usd: float
    window_s: float

    def value(self, metric: str) -> float:
        if metric == "projected_month_cost_usd":
            return self.projected_month_usd
        if metric == "month_end_cost_usd":
            return self.month_to_date_usd + self.window_usd / self.window_s * month_remaining_s(self.now)
        raise ValueError(f"metric must be one of {', '.join(BUDGET_METRICS)}, not {metric!r}")


def month_remaining_s(now: float) -> float:
    """Seconds from ``now`` to the end of its UTC calendar month."""
    today = datetime.fromtimestamp(now, UTC)
    first = datetime(today.year, today.month, 1, tzinfo=UTC).timestamp()
    return first + monthrange(today.year, today.month)[1] * 86_400 - now
