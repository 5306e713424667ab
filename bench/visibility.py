"""Lag from a span's end to its visibility through the query API (issue 20: runs watched live).

A probe is one LLM span of a run whose root has not arrived (a running run), stamped to end
now and sent at once as its own OTLP/HTTP request; then ``/api/runs/{trace}`` and the running
runs list (``/api/runs?status=running``) are polled every ``POLL_S`` until each shows it. The
lag is from the span's end time to the first answer that shows it: the collector's decode,
queue and batched insert, the run head opened for the rootless trace, and the query. Probes go
one at a time, on an idle collector and while background senders keep it ingesting; with
``sdk=True`` the probe's span is ended by the agentwatch SDK instead (a tool span in an open
run), so the SDK's export interval is in the lag, as a user's agent sees it.
"""

from __future__ import annotations

import logging
import os
import random
import statistics
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
from agentwatch import semconv as sc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

log = logging.getLogger(__name__)
POLL_S = 0.05  # the figures' resolution; polling faster would load the store the probe measures
PROBE_AGENT = "lag-probe"
RUN_SETTLED_S = 1.5


def _kv(key: str, value: str | int) -> KeyValue:
    return KeyValue(
        key=key, value=AnyValue(int_value=value) if isinstance(value, int) else AnyValue(string_value=value)
    )


def probe_body(rng: random.Random) -> tuple[str, bytes, float]:
    """(trace id, an OTLP request with one LLM span under a root not sent, the span's end in epoch s)."""
    trace_id, root, span_id = rng.randbytes(16), rng.randbytes(8), rng.randbytes(8)
    end_ns = time.time_ns()
    span = Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=root,
        name="chat sim-small",
        kind=Span.SPAN_KIND_CLIENT,
        start_time_unix_nano=end_ns - 200_000_000,
        end_time_unix_nano=end_ns,
        attributes=[
            _kv(sc.GEN_AI_OPERATION_NAME, "chat"),
            _kv(sc.GEN_AI_REQUEST_MODEL, "sim-small"),
            _kv(sc.GEN_AI_USAGE_INPUT_TOKENS, 100),
            _kv(sc.GEN_AI_USAGE_OUTPUT_TOKENS, 10),
            _kv(sc.GEN_AI_AGENT_NAME, PROBE_AGENT),
        ],
    )
    request = ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                resource={"attributes": [_kv("service.name", PROBE_AGENT)]}, scope_spans=[ScopeSpans(spans=[span])]
            )
        ]
    )
    return trace_id.hex(), request.SerializeToString(), end_ns / 1e9


def probe(client: httpx.Client, rng: random.Random, *, timeout_s: float = 30.0) -> dict[str, float]:
    """One probe: seconds from the span's end until the run detail shows the span and until the
    running runs list shows its run."""
    trace_id, body, ended = probe_body(rng)
    response = client.post("/v1/traces", content=body, headers={"Content-Type": "application/x-protobuf"})
    response.raise_for_status()
    return poll(client, trace_id, ended, timeout_s=timeout_s)


def sdk_probe(client: httpx.Client, *, timeout_s: float = 30.0) -> dict[str, float]:
    """One probe through the SDK (``agentwatch.init`` done): a tool span ended inside a run
    still open, so its export interval is in the lag, as a user's agent has it."""
    import agentwatch

    with agentwatch.run(PROBE_AGENT) as run:
        time.sleep(RUN_SETTLED_S)  # the run's start is exported and stored: the span is one of a run under way
        with agentwatch.tool("probe"):
            pass
        ended = time.time()
        # the run is listed since its start: only the span's own lag is this probe's
        return poll(client, run.trace_id, ended, timeout_s=timeout_s, span_name="probe", want_listed=False)


def poll(
    client: httpx.Client,
    trace_id: str,
    ended: float,
    *,
    timeout_s: float,
    span_name: str = "",
    want_listed: bool = True,
) -> dict[str, float]:
    """Seconds from ``ended`` until the run detail shows a span of the trace (one whose name
    holds ``span_name``) and, with ``want_listed``, until the running runs list shows its run."""
    seen: dict[str, float] = {}
    deadline = time.monotonic() + timeout_s
    while len(seen) < 1 + want_listed and time.monotonic() < deadline:
        if "detail_s" not in seen:
            detail = client.get(f"/api/runs/{trace_id}")
            if detail.status_code == 200 and any(span_name in span["name"] for span in detail.json()["spans"]):
                seen["detail_s"] = time.time() - ended
        if want_listed and "listed_s" not in seen:
            listed = client.get(
                "/api/runs", params={"status": "running", "agent": PROBE_AGENT, "start": ended - 60, "limit": 50}
            )
            if listed.status_code == 200 and any(r["trace_id"] == trace_id for r in listed.json()["items"]):
                seen["listed_s"] = time.time() - ended
            elif listed.status_code != 200:
                log.warning("running runs list answered %s: %s", listed.status_code, listed.text[:200])
        time.sleep(POLL_S)
    return seen  # a lag missing: not visible within timeout_s


def quantiles(values: list[float]) -> dict[str, float]:
    if len(values) < 2:
        return {"p50_ms": float("nan"), "p95_ms": float("nan"), "max_ms": float("nan")}
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return {"p50_ms": cuts[49] * 1000, "p95_ms": cuts[94] * 1000, "max_ms": max(values) * 1000}


def measure(url: str, key: str, probes: int, *, spacing_s: float = 0.25, sdk: bool = False) -> dict[str, Any]:
    """``probes`` probes one after another; p50/p95 of each lag. Fresh ids every call: a span
    sent again is a duplicate, which the collector drops. ``sdk``: each probe's span is ended
    by the agentwatch SDK (its defaults, the export interval included) instead of sent at once."""
    rng = random.Random()
    lags: dict[str, list[float]] = {"detail_s": [], "listed_s": []}
    if sdk:
        import agentwatch

        agentwatch.init(endpoint=url, api_key=key, service_name=PROBE_AGENT, instrument_openai=False)
    try:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=30.0) as client:
            for _ in range(probes):
                for name, value in (sdk_probe(client) if sdk else probe(client, rng)).items():
                    lags[name].append(value)
                time.sleep(spacing_s)  # pacing the probes: one at a time, not a load
    finally:
        if sdk:
            agentwatch.shutdown()
    return {
        "probes": probes,
        "span_in_run_detail": quantiles(lags["detail_s"]) | {"not_seen": probes - len(lags["detail_s"])},
        **(
            {}
            if sdk
            else {"run_in_running_list": quantiles(lags["listed_s"]) | {"not_seen": probes - len(lags["listed_s"])}}
        ),
        "poll_s": POLL_S,
        "load_average": os.getloadavg()[0],
    }


class Background:
    """Senders that keep the collector ingesting (the bodies an iterator yields, e.g. a large
    ``reference_agent.workload.Workload``'s batches, each sent once) until stopped or exhausted."""

    def __init__(self, url: str, key: str, bodies: Iterator[bytes], senders: int = 2) -> None:
        self._url, self._bodies, self._senders = url, bodies, senders
        self._headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/x-protobuf"}
        self._lock, self._stop = threading.Lock(), threading.Event()
        self._threads = [threading.Thread(target=self._send, daemon=True) for _ in range(senders)]
        self.requests = 0

    def _next(self) -> bytes | None:
        with self._lock:
            self.requests += 1
            return next(self._bodies, None)

    def _send(self) -> None:
        with httpx.Client(timeout=120) as client:
            while not self._stop.is_set() and (body := self._next()) is not None:
                if client.post(f"{self._url}/v1/traces", content=body, headers=self._headers).status_code in (429, 503):
                    time.sleep(0.05)

    def __enter__(self) -> Background:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=150)
