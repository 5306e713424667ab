"""Bounds on the numbers a span brings from outside, checked before they reach any total.

Tokens, cost and latencies arrive from clients and engines nobody here controls; one
hostile or broken value (1e18 tokens, -40M tokens, a cost of 1e308, a negative TTFT) must
not turn a project's totals into nonsense, null or infinity. Each bounded column has one
converter here, used by ``collector.ingest.spec.ATTRIBUTES`` for every attribute that feeds it:

- tokens (``input_tokens``, ``output_tokens``, ``cached_tokens``): an integer in
  0 … 100,000,000, else the field is dropped (0) and never priced;
- the client's own cost estimate (``cost_usd``): finite, $0 … $10,000, else dropped (0;
  the collector's price still applies when it knows the model);
- latencies (``ttft_s``, ``tpot_s``, ``queue_s``, ``prefill_s``, ``decode_s``): finite,
  0 … 86,400 s (a day), else dropped (not measured);
- ``step_index``: an Int32, else dropped (-1), as before;
- the start time: inside the retention window and at most ``latest_start_ns(retention)``
  (2106-02-07T06:28:15Z less the retention), else the span is rejected;
- the end time: at most 2106-02-07T06:28:15Z, else the span is rejected; an end before the
  start is set to the start, with a warning.

Why these: no model has a context near 100M tokens, so a larger count is a bug, not a call;
$10,000 is well above any single call at list prices; a day is longer than any request an
engine keeps. The times are what the store can hold: ``DateTime`` (UInt32 seconds) ends at
2106-02-07 06:28:15 UTC, and the retention TTL (``toDateTime(start_time) + INTERVAL n DAY``)
wraps past it, which would drop a later span right after it was acknowledged.

A dropped field keeps the span: the converter raises ``BadValue`` (so the native decoder
declines the span and the Python path, the reference, takes it), ``Normalizer.normalize``
leaves the column at its "absent" value and reports the field and the span in the response's
``partial_success.error_message`` (with ``rejected_spans`` unchanged: OTLP's warning form).
The collector's price is computed from the bounded token counts, so a dropped count is never
priced either. Values in bounds, the common case, take one type check and two comparisons.
"""

from __future__ import annotations

import math
from typing import Any

from agentwatch_platform.collector.errors import CollectorError

MAX_TOKENS = 100_000_000
MAX_COST_USD = 10_000.0
MAX_SECONDS = 86_400.0
MAX_TIME_NS = (2**32 - 1) * 1_000_000_000  # 2106-02-07T06:28:15Z: the end of ClickHouse's DateTime
DAY_NS = 86_400 * 1_000_000_000


class BadValue(CollectorError, ValueError):
    """A value outside its column's bound; ``str(exc)`` says what was wrong. The field is dropped."""


def latest_start_ns(retention_days: int) -> int:
    """The latest start time the store keeps: a later one's TTL would wrap past 2106 and drop it."""
    return MAX_TIME_NS - max(retention_days, 0) * DAY_NS


def tokens(value: Any) -> int | None:
    """A token count in 0 … ``MAX_TOKENS``; None when absent; ``BadValue`` otherwise."""
    if type(value) is int and 0 <= value <= MAX_TOKENS:
        return value
    if value is None or value == "":
        return None
    if type(value) is bool:
        raise BadValue(f"is a boolean ({value}), not a token count")
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        raise BadValue(f"is not a token count: {_show(value)}") from None
    if not 0 <= number <= MAX_TOKENS:
        raise BadValue(f"= {_show(value)} is outside 0..{MAX_TOKENS:,} tokens")
    return number


def seconds(value: Any) -> float | None:
    """A duration (TTFT, TPOT, queue, prefill, decode) in 0 … ``MAX_SECONDS``."""
    if type(value) is float and 0.0 <= value <= MAX_SECONDS:  # NaN fails both comparisons
        return value
    return _bounded(value, MAX_SECONDS, "s")


def cost_usd(value: Any) -> float | None:
    """A client's cost estimate in $0 … ``MAX_COST_USD``."""
    if type(value) is float and 0.0 <= value <= MAX_COST_USD:
        return value
    return _bounded(value, MAX_COST_USD, "USD")


def _bounded(value: Any, bound: float, unit: str) -> float | None:
    if value is None or value == "":
        return None
    if type(value) is bool:
        raise BadValue(f"is a boolean ({value}), not a number of {unit}")
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise BadValue(f"is not a number of {unit}: {_show(value)}") from None
    if not math.isfinite(number) or not 0.0 <= number <= bound:
        raise BadValue(f"= {_show(value)} is outside 0..{bound:,g} {unit}")
    return number


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "…"
