"""The writer's queue: spooled requests waiting for their insert, bounded in spans and in bytes.

A batch is due when ``flush_rows`` spans wait, or ``flush_interval_s`` has passed since the oldest
waiting one arrived or since the last batch was taken, whichever is sooner: an idle collector
inserts a span at once (its lag is the visibility of a live run), a busy one batches. A burst
that has ended (nothing arrived for ``_SETTLED_S``) with a quarter of ``flush_rows`` waiting goes
in at once: no span is coming to share the insert, so lingering would only delay the burst's
last spans (up to an interval, ~0.25 s on average, of a 50k-span burst's ~2 s until queryable).

Spans beyond ``max_spans`` or ``max_bytes`` are not kept in memory but written to ``spill``
(decoded; memory-mapped back, ``collector.ingest.spill``) or, without it or when the file is
gone, decoded again from the spool when their turn comes (``reload``). A batch is the requests'
tables concatenated (no copy); nothing here loops over spans.

Under load the batches grow: what queued up during one insert goes into the next, up to
``_BACKLOG_BATCHES`` times ``flush_rows``. An insert costs a fixed ~35 ms (chDB 26.9: the
spans part and the three materialized views' parts) on top of ~5 µs per span, so one large
batch instead of several small ones is what lets the store keep up with the decoders. Memory
is bounded in bytes too (``max_bytes``: captured prompt text makes a span ten times larger):
a batch takes at most half of it, which bounds what chDB's insert holds (~3.8x the batch), and
spans beyond it wait on disk only. Smaller batches cost CPU per span (more parts to merge): the
bound trades memory for ingest rate (bench/results/scale.md).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

from agentwatch_platform.collector.ingest.spill import Spill
from agentwatch_platform.collector.ingest.spool import Recovery
from agentwatch_platform.collector.storage.texts import TEXT_REF

_BACKLOG_BATCHES = 8
# A burst has ended when no request arrived for this long (a 1,000-span request arrives every
# ~30 ms while one is under way) and at least 1/_SETTLED_SHARE of flush_rows spans wait: a batch
# that large amortises the insert's fixed ~35 ms, so a pause mid-burst costs little either way.
_SETTLED_S = 0.05
_SETTLED_SHARE = 4


@dataclass(slots=True)
class Entry:
    seq: int
    spans: int
    table: pa.Table | None  # None: not kept in memory, read back from the spill or the spool
    nbytes: int = 0  # the table's bytes while kept in memory


class WriteQueue:
    """Requests in arrival order, and the batches a crash left unfinished; used on the event loop."""

    def __init__(
        self,
        *,
        flush_rows: int,
        max_spans: int,
        max_bytes: int,
        reload: Callable[[int], pa.Table],
        spill: Spill | None,
    ) -> None:
        self.flush_rows = flush_rows
        self.max_bytes = max_bytes  # 0: no bound in bytes
        self._max_memory = max_spans
        self._reload = reload
        self._spill = spill
        self.entries: deque[Entry] = deque()
        self.replays: deque[tuple[str, list[Entry]]] = deque()
        self.queued = 0  # spans waiting (in memory or only in the spool)
        self._in_memory = 0
        self._bytes_in_memory = 0
        self._span_bytes = 0.0  # recent bytes per span in memory: what an entry re-read from the spool will take
        self.oldest = 0.0  # monotonic time the oldest waiting entry arrived
        self.latest = 0.0  # monotonic time the newest one arrived
        # monotonic time the last batch was taken (at start: as if one just was): at most one
        # early insert an interval
        self._last_take = time.monotonic()

    def replay(self, recovery: Recovery, estimate: Callable[[int], int]) -> None:
        """Queue what a previous run left in the spool: unfinished batches first, as they were.

        ``estimate(seq)`` guesses a spooled request's span count (for batch sizes and gauges).
        """
        for token, seqs in recovery.intents:
            entries = [Entry(seq, estimate(seq), None) for seq in seqs]
            self.replays.append((token, entries))
            self.queued += sum(e.spans for e in entries)
        for seq in recovery.pending:
            self.add(Entry(seq, estimate(seq), None))

    def enqueue(self, seq: int, table: pa.Table) -> None:
        """A durable request's spans: kept in memory within the bounds, else spilled."""
        nbytes = table.nbytes
        if table.num_rows:
            self._span_bytes = (
                0.9 * self._span_bytes + 0.1 * nbytes / table.num_rows if self._span_bytes else nbytes / table.num_rows
            )
        keep = self._in_memory + table.num_rows <= self._max_memory and (
            not self.max_bytes or self._bytes_in_memory + nbytes <= self.max_bytes
        )
        if not keep and self._spill is not None:
            self._spill.write(seq, table)
        self.add(Entry(seq, table.num_rows, table if keep else None, nbytes if keep else 0))

    def add(self, entry: Entry) -> None:
        self.latest = time.monotonic()
        if not self.entries:
            self.oldest = self.latest
        self.entries.append(entry)
        self.queued += entry.spans
        if entry.table is not None:
            self._in_memory += entry.spans
            self._bytes_in_memory += entry.nbytes

    def next_due(self, interval_s: float) -> float:
        """When the waiting spans go in: an interval after the oldest arrived or after the last
        batch was taken, whichever is sooner. Idle, a span is inserted as it comes (its lag is the
        visibility of a live run); busy, batches stay an interval apart; once a burst has ended
        with enough spans waiting (``_SETTLED_S``), they go in then."""
        due = min(self.oldest, self._last_take) + interval_s
        if self.queued * _SETTLED_SHARE >= self.flush_rows:
            due = min(due, self.latest + _SETTLED_S)
        return due

    def due(self, interval_s: float) -> bool:
        """Whether a batch is due: ``flush_rows`` spans wait, or ``next_due`` has come."""
        return self.queued >= self.flush_rows or time.monotonic() >= self.next_due(interval_s)

    def take(self) -> list[Entry]:
        """The next batch: the oldest entries, up to ``_BACKLOG_BATCHES`` times ``flush_rows`` spans."""
        batch: list[Entry] = []
        spans, nbytes = 0, 0.0
        limit = self.flush_rows * _BACKLOG_BATCHES
        while self.entries and (
            not batch
            or (
                spans + self.entries[0].spans <= limit
                and not self._over_bytes(nbytes + self._bytes_of(self.entries[0]))
            )
        ):
            entry = self.entries.popleft()
            batch.append(entry)
            spans += entry.spans
            nbytes += self._bytes_of(entry)
        self.oldest = self._last_take = time.monotonic()
        return batch

    def _bytes_of(self, entry: Entry) -> float:
        """An entry's bytes in memory, or what it will take once re-read from the spool."""
        return entry.nbytes if entry.table is not None else entry.spans * self._span_bytes

    def _over_bytes(self, nbytes: float) -> bool:
        """A batch beyond the byte bound (half of it: the batch and what queues meanwhile share it)."""
        return bool(self.max_bytes) and nbytes > self.max_bytes / 2

    def release(self, batch: list[Entry]) -> None:
        """A stored batch leaves the queue: its counts, its spill files, its tables."""
        if self._spill is not None:
            self._spill.delete([e.seq for e in batch if e.table is None])
        self.queued = max(0, self.queued - sum(e.spans for e in batch))
        self._in_memory -= sum(e.spans for e in batch if e.table is not None)
        self._bytes_in_memory -= sum(e.nbytes for e in batch)
        for entry in batch:
            entry.table = None

    async def table(self, batch: list[Entry]) -> pa.Table:
        """The batch's spans as one table; entries not kept in memory are read back from disk."""
        if all(e.table is not None for e in batch):
            return _concat([e.table for e in batch if e.table is not None])
        return await asyncio.to_thread(lambda: _concat([self._read_back(e) for e in batch]))

    def _read_back(self, entry: Entry) -> pa.Table:
        """An entry's spans: in memory, memory-mapped from the spill, or decoded from the spool."""
        if entry.table is not None:
            return entry.table
        spilled = self._spill.read(entry.seq) if self._spill is not None else None
        return spilled if spilled is not None else self._reload(entry.seq)


def _concat(tables: list[pa.Table]) -> pa.Table:
    """Requests decoded while the store's text files were not at hand have no ``text_ref``
    (``collector.storage.texts``): theirs is 0 in the batch, their texts still in their rows."""
    table = pa.concat_tables(tables, promote_options="default")
    if TEXT_REF in table.column_names and table.column(TEXT_REF).null_count:
        table = table.set_column(table.schema.get_field_index(TEXT_REF), TEXT_REF, table.column(TEXT_REF).fill_null(0))
    return table
