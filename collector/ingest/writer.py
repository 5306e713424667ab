"""The batching writer: a component with a lifetime that moves spooled spans into the store.

Transports hand it each request's spans table with ``enqueue`` once the request is durable in
the spool; it inserts a batch in a worker thread (the event loop keeps answering) when one is due
(``collector.ingest.write_queue``: what waits, in memory or on disk, and when). Each batch is
announced to the spool (an intent with its deduplication token) before the insert and committed
after it: a replay after a crash is exactly-once. While the store is away it retries with backoff
and the spool absorbs the load. One bad span never sinks a batch: ``collector.ingest.insert``.
Everything else done around an insert (engine join, live runs, totals repair, a backlog told to the store,
freshness, heap trim) is a hook it is given (``collector.ingest.hooks``).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Sequence

import pyarrow as pa

from agentwatch_platform.collector.ingest.hooks import Batch, Hooks, InsertHook
from agentwatch_platform.collector.ingest.insert import insert, lags
from agentwatch_platform.collector.ingest.spill import Spill
from agentwatch_platform.collector.ingest.spool import Recovery, Spool, SpoolError
from agentwatch_platform.collector.ingest.write_queue import Entry, WriteQueue
from agentwatch_platform.collector.metrics import Metrics
from agentwatch_platform.collector.storage.base import Store, StoreUnavailable

log = logging.getLogger(__name__)

_MAX_BACKOFF_S = 5.0


class Writer:
    """Async context manager; ``async with Writer(...) as writer: writer.enqueue(seq, table)``."""

    def __init__(
        self,
        *,
        store: Callable[[], Store],
        spool: Spool,
        reload: Callable[[int], pa.Table],
        metrics: Metrics,
        flush_rows: int,
        flush_interval_s: float,
        max_queue_spans: int,
        max_queue_bytes: int = 0,
        clock: Callable[[], float] = time.time,
        drain_timeout_s: float = 10.0,
        spill: Spill | None = None,
        hooks: Sequence[InsertHook] = (),
    ) -> None:
        self._store = store
        self._spool = spool
        self._queue = WriteQueue(
            flush_rows=flush_rows, max_spans=max_queue_spans, max_bytes=max_queue_bytes, reload=reload, spill=spill
        )
        self._metrics = metrics
        self._interval = flush_interval_s
        self._clock = clock
        self._drain_timeout = drain_timeout_s
        self._hooks = Hooks(hooks)
        self._wake = asyncio.Event()
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._epoch = uuid.uuid4().hex[:12]  # tokens never repeat across restarts
        self.store_available = True

    @property
    def running(self) -> bool:
        """Whether the writer's task is alive (entered, not stopped, not crashed)."""
        return self._task is not None and not self._task.done() and not self._stopping

    @property
    def queued_spans(self) -> int:
        return self._queue.queued

    def replay(self, recovery: Recovery, estimate: Callable[[int], int]) -> None:
        """Queue what a previous run left in the spool: unfinished batches first, as they were.

        ``estimate(seq)`` guesses a spooled request's span count (for batch sizes and gauges).
        """
        self._queue.replay(recovery, estimate)
        self._wake.set()

    def enqueue(self, seq: int, table: pa.Table) -> None:
        """Take the spans of a durable request (called on the event loop, never blocks)."""
        self._queue.enqueue(seq, table)
        self._hooks.enqueued(seq, table)
        self._wake.set()

    def forget(self, project: str, trace_ids: list[str] | None) -> None:
        """Deleted traces (``None``: the whole project) leave what the hooks remember of them
        (live-run heads opened, engine facts waiting for their client span)."""
        self._hooks.forget(project, trace_ids)

    # --- lifetime ----------------------------------------------------------------------------

    async def __aenter__(self) -> Writer:
        self._task = asyncio.create_task(self._run(), name="agentwatch-writer")
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def stop(self) -> None:
        """Flush what is queued (bounded in time); the rest stays in the spool. Safe twice."""
        if self._task is None:
            return
        self._stopping = True
        self._wake.set()
        try:
            await asyncio.wait_for(asyncio.shield(self._task), self._drain_timeout)
        except TimeoutError:
            log.warning(
                "writer: %d spans not flushed at shutdown; they stay in the spool for the next start",
                self._queue.queued,
            )
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._task = None

    async def _run(self) -> None:
        while True:
            if self._queue.replays:
                token, entries = self._queue.replays.popleft()
                await self._flush(entries, token, replayed=True)
            elif self._queue.entries and (self._stopping or self._queue.due(self._interval)):
                await self._flush(self._queue.take(), None)
            elif self._hooks.due() == 0 and self.store_available and not self._stopping:
                await asyncio.to_thread(self._hooks.when_idle)
            elif not self._stopping:
                await self._idle()
            if self._stopping and (not self.store_available or not (self._queue.entries or self._queue.replays)):
                return  # what is left stays in the spool for the next start

    async def _idle(self) -> None:
        """Sleep until more spans arrive or the oldest waiting ones are due."""
        self._wake.clear()
        timeout = self._queue.next_due(self._interval) - time.monotonic() if self._queue.entries else None
        if (due := self._hooks.due()) is not None:
            timeout = due if timeout is None else min(timeout, due)
        try:
            await asyncio.wait_for(self._wake.wait(), timeout)
        except TimeoutError:
            pass

    # --- one batch ---------------------------------------------------------------------------

    async def _flush(self, entries: list[Entry], token: str | None, *, replayed: bool = False) -> None:
        """Insert one batch, with the hooks around it; ``replayed``: a batch a crash interrupted."""
        token = token or f"{self._epoch}:{entries[0].seq}"
        seqs = [e.seq for e in entries]
        try:
            await self._spool.begin(token, seqs)
        except SpoolError as exc:
            log.error("writer: cannot log batch %s in the spool (%s); inserting anyway", token, exc)
        backlog = self._queue.queued - sum(e.spans for e in entries) >= self._queue.flush_rows
        batch = Batch(await self._queue.table(entries), seqs, replayed, backlog)
        if self._hooks:
            batch.table = await asyncio.to_thread(self._hooks.before_insert, batch)
        if await self._insert_until_stored(batch.table, token) is None:
            return  # shutting down with the store away: the spool keeps the batch
        if self._hooks:
            await asyncio.to_thread(self._hooks.after_insert, batch)
        self._spool.commit(token)
        self._queue.release(entries)
        del batch  # the batch's buffers are free now, for the hooks after the release
        if self._hooks:
            drained = not self._queue.entries
            await asyncio.to_thread(lambda: self._hooks.after_release(drained=drained))

    async def _insert_until_stored(self, table: pa.Table, token: str) -> int | None:
        backoff = 0.2
        while True:
            started = time.perf_counter()
            try:
                written = await asyncio.to_thread(lambda: insert(self._store(), table, token, self._metrics))
            except StoreUnavailable as exc:
                self._unavailable(exc)
                if self._stopping:
                    return None
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF_S)
                continue
            if not self.store_available:
                log.info("writer: store is reachable again; draining %d queued spans", self._queue.queued)
            self.store_available = True
            self._metrics.on_flush(written, time.perf_counter() - started, lags(table, self._clock()))
            return written

    def _unavailable(self, exc: Exception) -> None:
        if self.store_available:
            log.error("writer: store unavailable (%s); spans wait in the spool and are retried", exc)
        self.store_available = False
        self._metrics.store_up.set(0)
        self._metrics.flush_errors.inc()
