"""The Overview's rate cards read complete buckets only (the collector's watermark), so a
bucket still filling during a spike never reads as a drop; long ranges read per day."""

from __future__ import annotations

from agentwatch_api.schemas import Headline, Overview, SeriesPoint, TimeSeries
from agentwatch_platform.dashboard.views import overview as page


def _cost(values: list[float], partial_from: int) -> TimeSeries:
    points = [SeriesPoint(t=60.0 * i, group="", value=v, partial=i >= partial_from) for i, v in enumerate(values)]
    return TimeSeries(metric="cost_usd", unit="usd", step_s=60, group_by="none", points=points)


def test_a_filling_bucket_in_a_spike_is_not_read_as_a_drop() -> None:
    # a spike: $1.25 a minute against $0.02 before; the newest minute has only its first spans
    series = _cost([0.02, 0.02, 0.02, 1.25, 1.27, 0.05], partial_from=5)
    value, change, help_ = page._last_bucket(series, 60, 3600.0, "USD")
    assert value == 1.27 * 60  # $/h over the last complete minute, not the filling one
    assert change is not None and change > 0
    assert "still filling" in help_


def test_no_complete_bucket_gives_no_rate() -> None:
    value, change, help_ = page._last_bucket(_cost([0.5, 0.1], partial_from=0), 60, 3600.0, "USD")
    assert value is None and change is None and "No complete bucket" in help_


def test_long_ranges_give_rates_per_day() -> None:
    figures = {
        "cost_per_hour_usd": Headline(value=0.5, previous=0.25, change=1.0, unit="usd/h"),
        "output_tokens": Headline(value=70_000.0, previous=None, change=None, unit="tokens"),
    }
    ov = Overview(start=0.0, end=7 * 86_400.0, figures=figures)
    cost = page._per_day(ov, "cost_per_hour_usd", False, [])
    tokens = page._per_day(ov, "tokens_per_s", True, [])
    assert (cost.label, cost.value) == ("Cost / day", "$12.00") and "+100" in (cost.delta or "")
    assert (tokens.label, tokens.value) == ("Output tokens / day", "10,000")


def test_month_cards_compare_with_the_same_days_of_last_month() -> None:
    now = 1_764_892_800.0 + 43_200  # 2025-12-05 12:00 UTC
    start, _ = page._months(now)  # 2025-11-01
    days = [SeriesPoint(t=start + d * 86_400, group="", value=1.0) for d in range(30 + 5)]
    series = TimeSeries(metric="cost_usd", unit="usd", step_s=86_400, group_by="none", points=days)
    mtd, projected = page._month_cards(series, now)
    assert mtd.value == "$5.00"  # Dec 1-5
    assert mtd.delta == "+0 % vs the same days last month"  # Nov 1-5 (4.5 days elapsed: five day buckets)
    assert projected.value == page.ui.fmt(5.0 * 31 / 4.5, "USD")
