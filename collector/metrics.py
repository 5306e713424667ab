"""Prometheus metrics about the collector itself, and the figures behind ``/api/ingest``.

Slow, invisible ingestion is the most reported pain with today's tools, so the collector
shows what it received, rejected, queued, flushed, how long flushes take, how big its
spool is, whether the store is reachable, and the lag from a span's end until it is
queryable. Each app has its own registry, so several collectors (tests) never collide.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterator

from prometheus_client import CONTENT_TYPE_LATEST as CONTENT_TYPE
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily

__all__ = ["CONTENT_TYPE", "Metrics"]

_LAG_BUCKETS = (0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 1800, 3600, math.inf)
_FLUSH_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, math.inf)


class Metrics:
    """Counters and gauges of one collector; cheap to update from the hot path."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.received = Counter(
            "agentwatch_collector_received_spans", "Spans received (valid or not)", ["transport"], registry=r
        )
        self.rejected = Counter(
            "agentwatch_collector_rejected_spans", "Spans rejected, by reason", ["reason"], registry=r
        )
        self.dropped_fields = Counter(
            "agentwatch_collector_dropped_fields",
            "Span fields dropped or corrected as out of bounds (agentwatch_platform.collector.ingest.bounds), the spans kept",
            registry=r,
        )
        self.requests = Counter(
            "agentwatch_collector_requests",
            "Export requests answered, by transport and status code",
            ["transport", "code"],
            registry=r,
        )
        self.flushed = Counter("agentwatch_collector_flushed_spans", "Spans written to the store", registry=r)
        self.flush_seconds = Histogram(
            "agentwatch_collector_flush_seconds", "Duration of one batch insert", buckets=_FLUSH_BUCKETS, registry=r
        )
        self.flush_errors = Counter(
            "agentwatch_collector_flush_errors", "Batch inserts that failed and will be retried", registry=r
        )
        self.lag_seconds = Histogram(
            "agentwatch_collector_ingest_lag_seconds",
            "Span end to queryable in the store (sampled)",
            buckets=_LAG_BUCKETS,
            registry=r,
        )
        self.spool_errors = Counter(
            "agentwatch_collector_spool_errors", "Spool writes or fsyncs the disk refused (full, read-only)", registry=r
        )
        self.queued = Gauge("agentwatch_collector_queued_spans", "Spans accepted and not yet in the store", registry=r)
        self.spool_bytes = Gauge("agentwatch_collector_spool_bytes", "Bytes in the on-disk spool", registry=r)
        self.store_up = Gauge(
            "agentwatch_collector_store_available", "1 when the last insert reached the store", registry=r
        )
        self.store_up.set(1)
        self.native_decoder = Gauge(
            "agentwatch_collector_native_decoder",
            "1 when OTLP is decoded by the built-in C decoder; 0: the Python path (not built, or AGENTWATCH_NATIVE_DECODE=false), ~3x the CPU per span",
            registry=r,
        )
        self.lease_overruns = Gauge(
            "agentwatch_collector_span_writer_lease_overruns",
            "Batch inserts that outlasted the span-writer lease (many collectors on one ClickHouse): each may have stored a batch twice; raise AGENTWATCH_LEASE_TTL_S",
            registry=r,
        )
        self.text_write_failures = Gauge(
            "agentwatch_collector_text_write_failures",
            "Spans whose captured text the text files refused (disk full, directory gone); kept in the spans table instead",
            registry=r,
        )
        self.text_files_reopened = Gauge(
            "agentwatch_collector_text_files_reopened",
            "Day files of captured text found removed or replaced under the collector and opened anew (what was in them is unreadable)",
            registry=r,
        )
        self.text_seal_failures = ReadCounter(
            "agentwatch_collector_text_seal_failures",
            "Seals of captured text into compressed blocks that failed (logged; the texts stay readable, uncompressed, in the write-ahead file, and the next seal tries again)",
            registry=r,
        )
        self._recent_lags: deque[float] = deque(maxlen=4096)
        self.totals = {"received": 0, "rejected": 0, "stored": 0}
        # per project (projects come from API keys, so this stays small): what /api/ingest shows a key
        self.by_project: dict[str, dict[str, int]] = {}

    def bind(
        self,
        *,
        queued: Callable[[], float],
        spool_bytes: Callable[[], float],
        lease_overruns: Callable[[], float],
        text_files: Callable[[], tuple[float, float, float]] = lambda: (0.0, 0.0, 0.0),
    ) -> None:
        """Gauges read live values at scrape time; ``text_files``: (write failures, reopened, seal failures)."""
        self.queued.set_function(queued)
        self.spool_bytes.set_function(spool_bytes)
        self.lease_overruns.set_function(lease_overruns)
        self.text_write_failures.set_function(lambda: text_files()[0])
        self.text_files_reopened.set_function(lambda: text_files()[1])
        self.text_seal_failures.read = lambda: text_files()[2]

    def on_request(
        self, transport: str, code: int, received: int, rejected: int, reason: str = "invalid", *, project: str = ""
    ) -> None:
        self.requests.labels(transport, str(code)).inc()
        if received:
            self.received.labels(transport).inc(received)
            self.totals["received"] += received
        if rejected:
            self.on_rejected(reason, rejected)
        if project and (received or rejected):
            mine = self.by_project.setdefault(project, {"received": 0, "rejected": 0})
            mine["received"] += received
            mine["rejected"] += rejected

    def on_rejected(self, reason: str, spans: int) -> None:
        self.rejected.labels(reason).inc(spans)
        self.totals["rejected"] += spans

    def on_flush(self, rows: int, seconds: float, lags: list[float]) -> None:
        self.flushed.inc(rows)
        self.totals["stored"] += rows
        self.flush_seconds.observe(seconds)
        self.store_up.set(1)
        for lag in lags:
            self.lag_seconds.observe(lag)
        self._recent_lags.extend(lags)

    def lag_quantiles(self) -> tuple[float | None, float | None]:
        """p50 and p95 of recent sampled lags (None before the first flush)."""
        if not self._recent_lags:
            return None, None
        ordered = sorted(self._recent_lags)
        return ordered[len(ordered) // 2], ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]

    def render(self) -> bytes:
        return generate_latest(self.registry)


class ReadCounter:
    """A counter whose value a component keeps (``read`` at scrape time), exposed as a Prometheus
    counter (``<name>_total``): a count that only grows, such as failures, and resets only when its
    component is opened anew (a reopened store), which Prometheus' ``rate`` handles as a restart."""

    def __init__(self, name: str, documentation: str, *, registry: CollectorRegistry) -> None:
        self._name, self._documentation = name, documentation
        self.read: Callable[[], float] = lambda: 0.0
        registry.register(self)

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(self._name, self._documentation)
        family.add_metric([], self.read())
        yield family
