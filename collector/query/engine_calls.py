"""The engine's record of calls, read per call: a call's figures on the call's row, and an engine's
timings from its calls' spans.

Spans are stored append-only. When an engine span arrives after its client's LLM span is stored,
``collector.ingest.engine_join`` cannot re-price the stored client row, so the engine row carries
what it adds to the call: the cached tokens the client did not record and the price difference
they make (a discount: a negative cost). Every total sums both rows and is right. A run's detail
shows one row per call, so there the engine row's additions move onto the call's row: the per-call
costs and tokens add up to the run's total, and no row is negative (``finite_total`` would read a
negative row as 0 and log an error about stored spans that predate the bounds).
"""

from __future__ import annotations

import math
from typing import Any

from agentwatch import semconv as sc

from agentwatch_api.schemas import EngineCallTimings

# The columns an engine row may carry for its call (normalize.set_engine_figures_aside zeroes its own).
_ADDED = ("input_tokens", "output_tokens", "cached_tokens", "cost_usd")


def fold_engine_figures(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` (``sql.runs.SPANS_OF_TRACE``) with each engine row's additions moved onto its call."""
    # here, not at the top: engine_join loads pyarrow, which `agentwatch collector` must load first
    from agentwatch_platform.collector.ingest.engine_join import CLIENT_SPAN

    by_id = {r["span_id"]: r for r in rows}
    for row in rows:
        if row["kind"] != sc.KIND_ENGINE or not any(row[name] for name in _ADDED):
            continue
        client = by_id.get(_attributes(row).get(CLIENT_SPAN) or row["parent_span_id"])
        if client is None or client["kind"] != sc.KIND_LLM:
            continue  # its call is not in this trace: the row keeps what it adds
        for name in _ADDED:
            client[name] += row[name]
            row[name] = 0.0 if name == "cost_usd" else 0
    return rows


def _attributes(row: dict[str, Any]) -> dict[str, str]:
    attributes = row.get("attributes") or {}
    return attributes if isinstance(attributes, dict) else dict(attributes)


def engine_call_timings(rows: list[dict[str, Any]]) -> EngineCallTimings:
    """``sql.engines.ENGINE_CALL_TIMINGS``' row as the API's figures; a percentile of no call is None."""
    row = rows[0] if rows else {}
    figures: dict[str, Any] = {}
    for name, count in (("queue", "queue_calls"), ("ttft", "ttft_calls"), ("client_ttft", "client_calls")):
        n = int(row.get(count) or 0)
        p50, p95 = (_seconds(v) for v in (row.get(name) or [None, None])) if n else (None, None)
        figures |= {count: n, f"{name}_p50": p50, f"{name}_p95": p95}
    return EngineCallTimings(**figures)


def _seconds(value: Any) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None
