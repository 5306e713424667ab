"""How far the stored figures are complete: the collector's watermark.

A call counts at its span's start, but its span arrives when it ends, after the SDK's export
delay: the figures of the last minute keep growing for seconds after the minute is over. The
watermark is the instant before which no more spans are expected: ``now`` less the longest
arrival delay (span start -> stored) of the last five minutes, with a quarter and a second to
spare, and never past the earliest start among the spans accepted but not yet stored. Until it
has seen ``warm_calls`` calls in those five minutes (a quiet or new collector) it waits
``cold_delay_s``; it never waits more than ``max_delay_s``. A bucket that ends after the
watermark is *partial*: the query API flags it, the dashboard never reads it as a drop, and
alerts judge complete buckets only.

Spans that arrive for a start before a watermark already published are *late*: they are stored
and counted as usual, and counted here (``late_spans``), so a revised "complete" bucket is seen.
Only calls (spans that are not a run's root) count: a run's root arrives when the run ends, and
runs are counted where they start whenever their root comes.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from agentwatch_platform.collector.ingest.hooks import Batch, InsertHook

__all__ = ["LIVE_S", "Freshness", "FreshnessState"]

LIVE_S = 60.0  # a call stored later than this after its end is a backfill: it measures no delay


@dataclass(frozen=True, slots=True)
class FreshnessState:
    now: float
    complete_until: float
    delay_s: float
    in_flight_spans: int
    late_spans: int


class Freshness(InsertHook):
    """Thread-safe: the writer reports on the event loop and in threads (one of its hooks,
    ``collector.ingest.hooks``), the API reads."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        window_s: float = 300.0,
        warm_calls: int = 20,
        cold_delay_s: float = 60.0,
        max_delay_s: float = 300.0,
    ) -> None:
        self._clock = clock
        self._window_s = window_s
        self._warm_calls = warm_calls
        self._cold_delay_s = cold_delay_s
        self._max_delay_s = max_delay_s
        self._lock = threading.Lock()
        self._pending: dict[int, tuple[float, int]] = {}  # request seq -> (earliest call start, calls)
        self._delays: deque[tuple[float, float, int]] = deque()  # (stored at, longest delay, calls) per batch
        self._published = float("-inf")  # the highest watermark given out
        self._late = 0

    def accepted(self, seq: int, table: pa.Table) -> None:
        """A durable request's spans are queued for the store."""
        starts = _call_starts(table)
        if starts is None or not len(starts):
            return
        with self._lock:
            self._pending[seq] = (float(starts.min()), len(starts))

    def stored(self, seqs: Iterable[int], table: pa.Table) -> None:
        """A batch made of the requests ``seqs`` is in the store. Only calls stored within
        ``LIVE_S`` of their end measure the arrival delay: older ones are a backfill or a replay
        after an outage, whose delay says nothing of the live traffic's (they may be late)."""
        now = self._clock()
        starts = _call_starts(table)
        with self._lock:
            for seq in seqs:
                self._pending.pop(seq, None)
            if starts is None or not len(starts):
                return
            self._late += int(np.count_nonzero(starts < self._published))
            live = starts[now - _call_times(table, "end_time") <= LIVE_S]
            if len(live):
                self._delays.append((now, max(0.0, now - float(live.min())), len(live)))
            self._prune(now)

    def enqueued(self, seq: int, table: pa.Table) -> None:
        self.accepted(seq, table)

    def after_insert(self, batch: Batch) -> None:
        self.stored(batch.seqs, batch.table)

    def state(self) -> FreshnessState:
        """The watermark now (published: later spans before it count as late)."""
        now = self._clock()
        with self._lock:
            self._prune(now)
            until = now - self._delay()
            if self._pending:
                until = min(until, min(start for start, _ in self._pending.values()))
            self._published = max(self._published, until)
            in_flight = sum(n for _, n in self._pending.values())
            return FreshnessState(now, until, now - until, in_flight, self._late)

    def measured_lag(self) -> float:
        """How far the watermark trails now once arrival delays have been measured (``warm_calls``
        seen), else 0: in-process alerts judge by it, and by the clock while the collector is cold
        (they keep firing on a quiet collector's first minute, as before the watermark existed)."""
        now = self._clock()
        with self._lock:
            self._prune(now)
            measured = self._delay() if sum(n for _, _, n in self._delays) >= self._warm_calls else 0.0
            in_flight = max((now - start for start, _ in self._pending.values()), default=0.0)
        return max(measured, in_flight)

    def _delay(self) -> float:
        if sum(n for _, _, n in self._delays) < self._warm_calls:
            return self._cold_delay_s
        longest = max(d for _, d, _ in self._delays)
        return min(longest * 1.25 + 1.0, self._max_delay_s)

    def _prune(self, now: float) -> None:
        while self._delays and self._delays[0][0] < now - self._window_s:
            self._delays.popleft()


def _call_starts(table: pa.Table) -> np.ndarray | None:
    """Start times (epoch seconds) of the table's calls: every span but runs' roots."""
    if not table.num_rows or "start_time" not in table.column_names:
        return None
    return _call_times(table, "start_time")


def _call_times(table: pa.Table, column: str) -> np.ndarray:
    times = table.column(column)
    if "kind" in table.column_names:
        times = pc.filter(times, pc.not_equal(table.column("kind").cast(pa.string()), "run"))
    return times.cast(pa.int64()).to_numpy(zero_copy_only=False) / 1e9
