"""Getting spans out of the process without ever holding the agent up.

``BoundedBatchProcessor`` is a span processor: ``on_end`` appends to a bounded queue under a
lock and returns; when the queue is full the span is dropped and counted. One named daemon
thread drains the queue in batches through ``OtlpHttpExporter``, which speaks OTLP/HTTP
protobuf to ``<endpoint>/v1/traces`` with a short timeout and a few retries with backoff.
Shutdown and flush are bounded in time; after ``fork()`` the child starts with an empty
queue and a fresh worker. Both classes must not block the caller and must not raise: they
return results (``Delivery``, ``bool``) and count what went wrong.

Accounting: a span counts as ``spans_pending`` from ``on_end`` until its batch is settled as
exported or failed, and each move is one atomic ``COUNTERS.update``, so ``stats()`` adds up
at every instant, also while a batch is in flight and after a ``force_flush`` that timed out.
"""

from __future__ import annotations

import collections
import os
import random
import threading
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Sequence
from typing import NamedTuple, Protocol

from opentelemetry import context as otel_context
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from ._config import Config, logger
from ._stats import COUNTERS, internal_error

_RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_MAX_RETRY_AFTER_S = 5.0
_WARN_EVERY_S = 60.0


def suppressed_context() -> otel_context.Context:
    """A context in which OpenTelemetry instrumentations (ours included) record nothing."""
    ctx = otel_context.set_value(otel_context._SUPPRESS_INSTRUMENTATION_KEY, True)
    return otel_context.set_value(otel_context._SUPPRESS_HTTP_INSTRUMENTATION_KEY, True, ctx)


def instrumentation_suppressed() -> bool:
    return bool(otel_context.get_value(otel_context._SUPPRESS_INSTRUMENTATION_KEY))


class Delivery(NamedTuple):
    """What became of one batch: ``ok`` once the collector answered 2xx, of which it rejected
    ``rejected`` spans (an OTLP partial success)."""

    ok: bool
    rejected: int = 0


_FAILED = Delivery(ok=False)


class BatchExporter(Protocol):
    """What ``BoundedBatchProcessor`` hands its batches to. ``export`` must not raise and must
    return by ``deadline`` (``time.monotonic()``, None: its own timeouts); ``shutdown`` makes a
    pending retry give up at once."""

    def export(self, spans: Sequence[ReadableSpan], deadline: float | None = None) -> Delivery: ...

    def shutdown(self) -> None: ...


class OTelExporter:
    """Any OpenTelemetry ``SpanExporter`` (console, in-memory, another OTLP exporter) as a
    ``BatchExporter``: SUCCESS is a delivery, anything else or an exception a failure."""

    def __init__(self, exporter: SpanExporter) -> None:
        self._exporter = exporter

    def export(self, spans: Sequence[ReadableSpan], deadline: float | None = None) -> Delivery:
        try:
            return Delivery(ok=self._exporter.export(spans) is SpanExportResult.SUCCESS)
        except Exception as exc:
            internal_error("exporting spans", exc)
            return _FAILED

    def shutdown(self) -> None:
        try:
            self._exporter.shutdown()
        except Exception as exc:
            internal_error("shutting an exporter down", exc)


class OtlpHttpExporter:
    """POST encoded spans; retry connection errors and 408/429/5xx with jittered backoff.

    ``export`` never raises and never takes longer than its deadline; ``shutdown`` wakes a
    backoff sleep at once so that exit is quick even against a dead collector.
    """

    def __init__(self, config: Config) -> None:
        self._url = config.traces_url
        self._headers = config.headers
        self._timeout = config.export_timeout_s
        self._retries = config.export_retries
        self._stop = threading.Event()

    def export(self, spans: Sequence[ReadableSpan], deadline: float | None = None) -> Delivery:
        try:
            body = encode_spans(spans).SerializeToString()
        except Exception as exc:  # a span we cannot encode is our bug, not the agent's
            internal_error("encoding spans", exc)
            return _FAILED
        for attempt in range(self._retries + 1):
            if attempt:
                COUNTERS.add("export_retries")
            delivery, retry_after = self._post(body, deadline)
            if delivery is not None:
                return delivery
            if attempt == self._retries or not self._backoff(attempt, retry_after, deadline):
                break
        return _FAILED

    def _post(self, body: bytes, deadline: float | None) -> tuple[Delivery | None, float | None]:
        """One attempt: (Delivery, None) when final, (None, retry_after) when worth retrying."""
        timeout = self._timeout if deadline is None else min(self._timeout, deadline - time.monotonic())
        if timeout <= 0 or (self._stop.is_set() and deadline is None):
            return None, None
        COUNTERS.add("export_requests")
        request = urllib.request.Request(self._url, data=body, headers=self._headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return Delivery(ok=True, rejected=_rejected(response.read())), None
        except urllib.error.HTTPError as exc:
            if exc.code in _RETRYABLE_STATUS:
                return None, _retry_after(exc.headers.get("Retry-After"))
            why = _refusal(exc)
            logger.warning("agentwatch: collector rejected spans: HTTP %s %s%s", exc.code, exc.reason, why)
            return _FAILED, None
        except (OSError, ValueError) as exc:  # refused, reset, timed out, bad URL
            logger.debug("agentwatch: export attempt failed: %r", exc)
            return None, None

    def _backoff(self, attempt: int, retry_after: float | None, deadline: float | None) -> bool:
        """Sleep before the next attempt; False when the deadline or shutdown forbids it."""
        delay = retry_after if retry_after is not None else 0.2 * 2**attempt * random.uniform(0.5, 1.0)
        if deadline is not None and time.monotonic() + delay >= deadline:
            return False
        return not self._stop.wait(delay)

    def shutdown(self) -> None:
        self._stop.set()


def _retry_after(value: str | None) -> float | None:
    try:
        return min(max(float(value), 0.0), _MAX_RETRY_AFTER_S) if value else None
    except ValueError:
        return None


def _refusal(exc: urllib.error.HTTPError) -> str:
    """The collector's reason as ``": <why>"``, from the ``google.rpc.Status`` an OTLP collector
    answers a refusal with (the OTLP specification, "Failures"); ``""`` without one. On the wire a Status (1: code, 2: message) reads
    as an ``ExportTracePartialSuccess`` (1: rejected_spans, 2: error_message), so the SDK needs
    no googleapis package to read it."""
    if exc.headers.get("Content-Type", "").split(";")[0].strip() != "application/x-protobuf":
        return ""
    try:
        message = ExportTracePartialSuccess.FromString(exc.read()).error_message
    except Exception:  # a body that is no Status: the HTTP status says enough
        return ""
    return f": {message[:300]}" if message else ""


def _rejected(body: bytes) -> int:
    """OTLP partial success: how many spans of an accepted request the collector rejected."""
    if not body:
        return 0
    try:
        response = ExportTraceServiceResponse.FromString(body)
    except Exception:  # a non-OTLP 200 body (a proxy page): nothing to learn from it
        return 0
    rejected = int(response.partial_success.rejected_spans)
    if rejected:
        logger.warning("agentwatch: collector rejected %d spans: %s", rejected, response.partial_success.error_message)
    return max(rejected, 0)


class _Flush:
    """One flush request: the worker sets ``done`` once the first ``upto`` spans ever queued are
    out (FIFO, one worker), so spans ended later never hold it back."""

    def __init__(self, upto: int) -> None:
        self.upto = upto
        self.done = threading.Event()
        self.ok = True


class BoundedBatchProcessor(SpanProcessor):
    """Queue ended spans (bounded, drop-and-count) and export them from one daemon thread.

    An OpenTelemetry ``SpanProcessor``: any ``TracerProvider`` can hold it, and its
    ``shutdown()`` is the bounded one (``config.shutdown_timeout_s``); ``close(timeout_s)`` says
    whether the final flush got everything out. The exporter is any ``BatchExporter``
    (``OtlpHttpExporter`` to the collector, or ``OTelExporter`` around an OpenTelemetry one).
    """

    def __init__(self, exporter: BatchExporter, config: Config) -> None:
        self._exporter = exporter
        self._shutdown_timeout_s = config.shutdown_timeout_s
        self._max_queue = config.max_queue_size
        self._batch = config.max_export_batch_size
        self._interval = config.export_interval_s
        self._init_state()
        self._shutdown = False
        self._deadline: float | None = None  # set while a bounded shutdown drains the queue
        self._last_warning = -_WARN_EVERY_S
        self._exporter_url = config.traces_url
        ref = weakref.WeakMethod(self._after_fork)
        os.register_at_fork(after_in_child=lambda: (ref() or (lambda: None))())

    def _init_state(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._queue: collections.deque[ReadableSpan] = collections.deque()
        self._queued_total = 0  # spans ever queued ...
        self._taken_total = 0  # ... and ever taken for export, in queue order
        self._flushes: list[_Flush] = []
        self._worker: threading.Thread | None = None

    def _after_fork(self) -> None:
        """The parent's queued spans are the parent's to send; the child starts clean."""
        self._init_state()

    def _ensure_worker(self) -> None:
        """Start the worker on first use (and in a forked child); the loop never dies early."""
        if self._worker is None:
            worker = threading.Thread(target=self._run, name="agentwatch-exporter", daemon=True)
            try:
                worker.start()
            except RuntimeError as exc:  # "can't create new thread at interpreter shutdown"
                internal_error("starting the export worker", exc)
                return
            self._worker = worker

    def on_start(self, span: object, parent_context: object = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        if not span.context.trace_flags.sampled:
            return
        with self._cond:
            if self._shutdown or len(self._queue) >= self._max_queue:
                COUNTERS.add("spans_dropped")
                return
            self._queue.append(span)
            self._queued_total += 1
            COUNTERS.update(spans_ended=1, spans_pending=1)
            self._ensure_worker()
            if len(self._queue) == 1 or len(self._queue) >= self._batch:
                self._cond.notify()  # the first span starts the worker's linger; a full batch ends it

    def _run(self) -> None:
        otel_context.attach(suppressed_context())  # the exporter's HTTP calls are not spans
        while True:
            try:
                if not self._drain_once():
                    return
            except Exception as exc:  # keep exporting whatever our bug was
                internal_error("export worker", exc)
                time.sleep(self._interval)

    def _drain_once(self) -> bool:
        """Wait for a batch (or a flush, or the interval), export it; False once shut down.

        Idle (nothing queued), the worker sleeps until a span ends: no wake-ups for an agent
        that is not running. From the first span queued it lingers at most ``export_interval_s``
        for more to share the request, so a span reaches the collector within about that long
        of its end however seldom the agent ends one."""
        with self._cond:
            if not self._queue and not self._flushes and not self._shutdown:
                self._cond.wait()
            linger_until = time.monotonic() + self._interval
            while len(self._queue) < self._batch and not self._flushes and not self._shutdown:
                left = linger_until - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            if self._shutdown and not self._queue and not self._flushes:
                return False
            batch = [self._queue.popleft() for _ in range(min(self._batch, len(self._queue)))]
            self._taken_total += len(batch)
            # the flushes whose spans are all taken by now: earlier batches are settled, this one next
            flushes = [f for f in self._flushes if f.upto <= self._taken_total]
            if flushes:
                self._flushes = [f for f in self._flushes if f.upto > self._taken_total]
        ok = self._export(batch)
        for flush in flushes:
            flush.ok = flush.ok and ok
            flush.done.set()
        self._note_partial_flush(ok)
        return True

    def _note_partial_flush(self, ok: bool) -> None:
        """A failed batch fails every flush still waiting for later batches too."""
        if not ok:
            with self._cond:
                for flush in self._flushes:
                    flush.ok = False

    def _export(self, batch: list[ReadableSpan]) -> bool:
        if not batch:
            return True
        try:
            delivery = self._exporter.export(batch, self._deadline)
        except Exception as exc:
            internal_error("exporting spans", exc)
            delivery = _FAILED
        _settle(len(batch), delivery)
        if not delivery.ok:
            self._warn_failed(len(batch))
        return delivery.ok

    def _warn_failed(self, lost: int) -> None:
        """One warning per ``_WARN_EVERY_S`` (the counters have the full story)."""
        now = time.monotonic()
        if now - self._last_warning >= _WARN_EVERY_S:
            self._last_warning = now
            logger.warning(
                "agentwatch: could not export %d spans to %s; the agent is unaffected (see agentwatch.stats(): %s)",
                lost,
                self._exporter_url,
                COUNTERS.snapshot(),
            )

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Export everything queued now; True when it all reached the collector in time.

        On a timeout the spans not yet settled keep being exported in the background and
        count as ``spans_pending`` meanwhile.
        """
        if self._shutdown:  # the shutdown flush already ran (or is running) with its deadline
            return not self._queue
        return self._flush(timeout_millis / 1000)

    def _flush(self, timeout_s: float) -> bool:
        with self._cond:
            if not self._queue and self._worker is None:
                return True
            flush = _Flush(self._queued_total)
            self._flushes.append(flush)
            self._ensure_worker()
            self._cond.notify()
        return flush.done.wait(timeout_s) and flush.ok

    def shutdown(self) -> None:
        """OpenTelemetry's ``SpanProcessor.shutdown``: ``close`` with the configured timeout."""
        self.close(self._shutdown_timeout_s)

    def close(self, timeout_s: float) -> bool:
        """Flush what is queued within ``timeout_s``, then stop; safe to call again (True)."""
        with self._cond:
            if self._shutdown:
                return True
            self._shutdown = True
        self._deadline = time.monotonic() + timeout_s
        ok = self._flush(timeout_s)
        self._exporter.shutdown()
        with self._cond:
            self._cond.notify()
            worker = self._worker
        if worker is not None:
            worker.join(max(0.0, self._deadline - time.monotonic()) + 0.1)
        return ok

    def queue_size(self) -> int:
        return len(self._queue)


def _settle(n: int, delivery: Delivery) -> None:
    """Move a finished batch of ``n`` spans out of pending, in one step (see the module doc)."""
    if delivery.ok:
        rejected = min(delivery.rejected, n)
        COUNTERS.update(spans_pending=-n, spans_exported=n - rejected, spans_failed=rejected)
    else:
        COUNTERS.update(spans_pending=-n, spans_failed=n, export_failures=1)
