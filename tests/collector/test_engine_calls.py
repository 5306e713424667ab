"""An engine's timings from its calls' own spans (``collector.query.engine_calls``): the Engine
page's percentiles at the resolution of the data, not inside a histogram bucket."""

from __future__ import annotations

import time

import pytest

from agentwatch_platform.collector.query import engines as engine_query
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.model import SpanRow
from tests.collector.factories import new_span_id, new_trace_id

P = "engine-calls"
QUEUE_S = [0.0002, 0.00022, 0.00025, 0.00028, 0.0003, 0.00033]  # every call's own queue time


def call(t: float, kind: str, *, model: str = "sim-small", **timings: object) -> SpanRow:
    start = int(t * 1e9)
    return SpanRow(P, new_trace_id(), new_span_id(), "", kind, kind, start, start + 500_000_000, model=model, **timings)


def seed(store: Store, t0: float) -> None:
    engine = [call(t0 + i, "engine", queue_s=q, ttft_s=0.026) for i, q in enumerate(QUEUE_S)]
    client = [call(t0 + i, "llm", ttft_s=0.062) for i in range(len(QUEUE_S))]
    engine_filled = call(t0, "llm", ttft_s=0.026)  # a client TTFT the engine filled in: not the client's
    engine_filled.attributes["agentwatch.ttft.source"] = "engine"
    other_model = call(t0, "engine", model="another", queue_s=5.0, ttft_s=9.0)  # another engine's model
    store.insert_spans([*engine, *client, engine_filled, other_model])
    # the engine's histogram: every call in its first bucket, 0-300 ms
    metrics = [
        (P, "sim", t0 + 10, "vllm:request_queue_time_seconds_bucket", {"model_name": "sim-small", "le": le}, 6.0)
        for le in ("0.3", "+Inf")
    ]
    store.insert_rows("engine_metrics", ("project", "engine", "ts", "metric", "labels", "value"), metrics)


def test_engine_percentiles_come_from_the_calls_own_spans(store: Store) -> None:
    t0 = float(int(time.time()) - 600)
    seed(store, t0)
    calls = engine_query.engine_series(store, P, "sim", start=t0 - 60, end=t0 + 60).calls
    assert (calls.queue_calls, calls.ttft_calls, calls.client_calls) == (6, 6, 6)
    assert calls.queue_p50 is not None and calls.queue_p95 is not None
    assert min(QUEUE_S) <= calls.queue_p50 <= calls.queue_p95 <= max(QUEUE_S) * 1.0001  # not 150 ms
    assert calls.ttft_p50 == pytest.approx(0.026, rel=1e-4)  # the engine's: queue + prefill at the server
    assert calls.client_ttft_p50 == pytest.approx(0.062, rel=1e-4)  # the client's first streamed token


def test_an_engine_without_spans_has_no_per_call_percentiles(store: Store) -> None:
    t0 = float(int(time.time()) - 600)
    seed(store, t0)
    calls = engine_query.engine_series(store, P, "another-engine", start=t0 - 60, end=t0 + 60).calls
    assert (calls.queue_calls, calls.queue_p50, calls.ttft_p95, calls.client_ttft_p50) == (0, None, None, None)
