"""The Engine page's percentiles, each at the resolution of the data it comes from.

Per-call figures come from the engine's spans (queue time and TTFT of each call, measured at the
server). Without them (an engine that does not trace), a percentile is only known to lie in one
bucket of the engine's Prometheus histogram, and is shown as that bucket's range.
"""

from __future__ import annotations

from agentwatch_platform.dashboard import ui
from agentwatch_platform.dashboard.analysis import Distribution

# What each TTFT measures: the page says it beside the figures, as the Overview's differs.
ENGINE_TTFT = "engine TTFT: queue + prefill, measured at the server"
CLIENT_TTFT = "client TTFT (the Overview's): the first streamed token the client saw, network included"


def bucket_range(bucket: tuple[float, float] | None) -> str:
    """A histogram bucket as a range of seconds: "≤ 300 ms", "100 ms–300 ms", "> 10 s"."""
    if bucket is None:
        return ui.BLANK
    lower, upper = bucket
    if upper == float("inf"):
        return f"> {ui.fmt(lower, 's')}"
    return f"≤ {ui.fmt(upper, 's')}" if lower <= 0 else f"{ui.fmt(lower, 's')}–{ui.fmt(upper, 's')}"


def percentiles(dist: Distribution, p50: float | None, p95: float | None, calls: int) -> str:
    """p50 and p95 from the calls' own spans where there are any, else the histogram buckets they lie in."""
    if calls > 0:
        return f"p50 {ui.fmt(p50, 's')} · p95 {ui.fmt(p95, 's')} (from the engine spans of {ui.plural(calls, 'call')})"
    return (
        f"p50 {bucket_range(dist.quantile_bucket(0.5))} · p95 {bucket_range(dist.quantile_bucket(0.95))}"
        " (histogram buckets)"
    )
