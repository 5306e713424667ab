"""The batching writer: a component with a lifetime that moves spooled spans into the store.

Transports hand it each request's spans table with ``enqueue`` after the request is durable
in the spool; it inserts batches when ``flush_rows`` spans are waiting or ``flush_interval_s``
has passed since the oldest waiting one arrived or since the last batch was taken, whichever
is sooner (an idle collector inserts a span at once; a busy one batches), in a worker thread so
the event loop keeps answering. Each batch is announced to the
spool (intent, with its deduplication token) before the insert and released after it, which
makes a replay after a crash exactly-once. While the store is unavailable it retries with
backoff and the spool absorbs the load. What waits, in memory or on disk, and how batches grow
under load: ``collector.ingest.write_queue``; how one bad span is kept from sinking a batch:
``collector.ingest.insert``. After each insert the C heap's free pages go back to the OS
(``collector.ingest.heap``). While a backlog waits behind the batch being inserted, and batches
are bounded in bytes, the store's background merges wait too (``merge_hold_s``,
``Store.hold_merges``): merging text-heavy parts during a burst's inserts added 60-140 MB to its peak.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from agentwatch_platform.collector.ingest import heap
from agentwatch_platform.collector.ingest.engine_join import EngineJoin
from agentwatch_platform.collector.ingest.freshness import Freshness
from agentwatch_platform.collector.ingest.insert import insert
from agentwatch_platform.collector.ingest.live_runs import LiveRuns
from agentwatch_platform.collector.ingest.spill import Spill
from agentwatch_platform.collector.ingest.spool import Recovery, Spool, SpoolError
from agentwatch_platform.collector.ingest.write_queue import Entry, WriteQueue
from agentwatch_platform.collector.metrics import Metrics
from agentwatch_platform.collector.storage.base import Store, StoreError, StoreUnavailable
from agentwatch_platform.collector.storage.maintenance import rebuild_totals

log = logging.getLogger(__name__)

_LAG_SAMPLES = 32
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
        engine_join: EngineJoin | None = None,
        live_runs: LiveRuns | None = None,
        may_bill: Callable[[], bool] | None = None,
        spill: Spill | None = None,
        merge_hold_s: float = 0.0,
        freshness: Freshness | None = None,
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
        self._join = engine_join
        self._live = live_runs
        self._freshness = freshness  # how far the stored figures are complete (collector.ingest.freshness)
        self._may_bill = may_bill  # whether this collector holds the engine-join role (collector.roles)
        self._wake = asyncio.Event()
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._epoch = uuid.uuid4().hex[:12]  # tokens never repeat across restarts
        self._merge_hold_s = merge_hold_s  # 0: the store's merges never wait for a backlog
        self._merges_held_since: float | None = None  # monotonic time the store's merges were held
        self._may_hold_merges = True  # False after a hold reached its limit, until the queue drains
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
        if self._freshness is not None:
            self._freshness.accepted(seq, table)
        self._wake.set()

    def forget(self, project: str, trace_ids: list[str] | None) -> None:
        """Deleted traces (``None``: the whole project) leave what the collector remembers of them:
        live-run heads opened and engine facts waiting for their client span."""
        if self._live is not None:
            self._live.forget(project, trace_ids)
        if self._join is not None:
            self._join.forget(project, trace_ids)

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
                await self._flush(entries, token, repair=True)
            elif self._queue.entries and self._due():
                await self._flush(self._queue.take(), None)
            elif self._join is not None and self._join.due() == 0 and self.store_available and not self._stopping:
                await self._reconcile()
            elif not self._stopping:
                await self._idle()
            if self._stopping and (not self.store_available or not (self._queue.entries or self._queue.replays)):
                return  # what is left stays in the spool for the next start

    async def _idle(self) -> None:
        """Sleep until more spans arrive or the oldest waiting ones are due."""
        self._wake.clear()
        timeout = self._queue.next_due(self._interval) - time.monotonic() if self._queue.entries else None
        if self._join is not None:
            timeout = self._join.due() if timeout is None else min(timeout, self._join.due())
        try:
            await asyncio.wait_for(self._wake.wait(), timeout)
        except TimeoutError:
            pass

    def _due(self) -> bool:
        return (
            self._stopping
            or self._queue.queued >= self._queue.flush_rows
            or time.monotonic() >= self._queue.next_due(self._interval)
        )

    # --- one batch ---------------------------------------------------------------------------

    async def _flush(self, batch: list[Entry], token: str | None, *, repair: bool = False) -> None:
        """Insert one batch; ``repair`` (a batch a crash interrupted) also rebuilds its run totals.

        A kill during an insert can commit the spans but not the derived run and per-minute
        totals; the replay then finds the spans stored, so the totals are rebuilt from them.
        """
        token = token or f"{self._epoch}:{batch[0].seq}"
        try:
            await self._spool.begin(token, [e.seq for e in batch])
        except SpoolError as exc:
            log.error("writer: cannot log batch %s in the spool (%s); inserting anyway", token, exc)
        table = await self._queue.table(batch)
        if self._join is not None:
            table = await asyncio.to_thread(self._prepare, table)
        await self._hold_merges(self._queue.queued - sum(e.spans for e in batch) >= self._queue.flush_rows)
        written = await self._insert_until_stored(table, token)
        if written is None:
            return  # shutting down with the store away: the spool keeps the batch
        if self._freshness is not None:
            self._freshness.stored([e.seq for e in batch], table)
        if repair and table.num_rows:
            await asyncio.to_thread(self._rebuild_totals, table)
        if self._live is not None:
            await asyncio.to_thread(self._open_runs, table)
        self._spool.commit(token)
        self._queue.release(batch)
        if not self._queue.entries:
            await self._hold_merges(False)
        del table
        await asyncio.to_thread(heap.trim)  # the batch's buffers are free now (collector.ingest.heap)

    async def _hold_merges(self, backlog: bool) -> None:
        """The store's merges wait while a backlog does (a burst: ``sql.admin.HOLD_MERGES``), for at
        most ``merge_hold_s``; after that limit, not again until the queue has drained once. Only with
        a bound in bytes: without one, the faster inserts let the batches, and the peak, grow instead."""
        now = time.monotonic()
        if not backlog:
            self._may_hold_merges = True
        elif self._merges_held_since is not None and now - self._merges_held_since >= self._merge_hold_s:
            self._may_hold_merges = False
        hold = backlog and self._may_hold_merges and self._merge_hold_s > 0 and self._queue.max_bytes > 0
        if hold == (self._merges_held_since is not None):
            return
        self._merges_held_since = now if hold else None
        try:
            store = self._store()
        except StoreError:
            return  # a reopened store merges as usual
        await asyncio.to_thread(store.hold_merges, hold)

    def _prepare(self, table: pa.Table) -> pa.Table:
        """Engine spans joined to client LLM spans (``collector.ingest.engine_join``); the store may be away."""
        assert self._join is not None
        try:
            store = self._store()
        except StoreError:
            store = None
        return self._join.prepare(table, store)

    async def _reconcile(self) -> None:
        """Bill engine-only calls (``collector.ingest.engine_join``); a failure waits for the next pass."""
        assert self._join is not None
        if self._may_bill is not None and not self._may_bill():
            self._join.postpone()  # another collector bills engine-only calls
            return
        try:
            await asyncio.to_thread(lambda: self._join.reconcile(self._store()) if self._join else 0)
        except StoreError as exc:
            log.warning("writer: engine join pass skipped: %s", exc)

    def _open_runs(self, table: pa.Table) -> None:
        """Runs whose root has not arrived are listed from now on (``collector.ingest.live_runs``)."""
        assert self._live is not None
        try:
            self._live.after_insert(self._store(), table)
        except StoreError as exc:
            log.warning("writer: opening runs skipped: %s", exc)

    def _rebuild_totals(self, table: pa.Table) -> None:
        starts = pa.table({"project": table.column("project"), "since_ns": table.column("start_time").cast(pa.int64())})
        for group in starts.group_by("project", use_threads=False).aggregate([("since_ns", "min")]).to_pylist():
            try:
                rebuild_totals(self._store(), since=group["since_ns_min"] / 1e9, project=group["project"])
            except StoreError as exc:
                log.error("writer: rebuilding run totals of project %s after a crash failed: %s", group["project"], exc)

    async def _insert_until_stored(self, table: pa.Table, token: str) -> int | None:
        backoff = 0.2
        while True:
            started = time.perf_counter()
            try:
                written = await asyncio.to_thread(self._insert, table, token)
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
            self._metrics.on_flush(written, time.perf_counter() - started, self._lags(table))
            return written

    def _unavailable(self, exc: Exception) -> None:
        if self.store_available:
            log.error("writer: store unavailable (%s); spans wait in the spool and are retried", exc)
        self.store_available = False
        self._metrics.store_up.set(0)
        self._metrics.flush_errors.inc()

    def _insert(self, table: pa.Table, token: str) -> int:
        return insert(self._store(), table, token, self._metrics)

    def _lags(self, table: pa.Table) -> list[float]:
        """Span end -> queryable for a sample of the batch."""
        if not table.num_rows:
            return []
        sample = np.arange(0, table.num_rows, max(1, table.num_rows // _LAG_SAMPLES))
        ends_s = pc.take(table.column("end_time"), sample).cast(pa.int64()).to_numpy() / 1e9
        return np.maximum(0.0, self._clock() - ends_s).tolist()
