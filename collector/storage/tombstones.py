"""What a deletion keeps out of the store for a while after it: spans that were already on their way.

A deletion reads which traces to delete from the store, but spans of those traces (and new runs
of a deleted user or session) may still wait in the collector's queue or spool, acknowledged and
not inserted yet; inserted after the deletion, they would bring the deleted data back. So a
deletion leaves a tombstone that ``SqlStore.insert_spans`` applies under its insert lock: for
``TOMBSTONE_S`` it drops the spans of the deleted traces, and spans of the deleted user, session,
range or project that started before the deletion was asked for. Spans that started later are
new data and are stored. Tombstones live in memory: a deletion replayed at start
(``collector.storage.deletion.replay``) leaves its tombstone again.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

log = logging.getLogger(__name__)

TOMBSTONE_S = 3600.0  # longer than any queue or spool backlog the writer drains


@dataclass(frozen=True)
class Tombstone:
    project: str
    traces: frozenset[str]
    column: str = ""  # "user_id", "session_id", "" (the traces only), "*" (the whole project)
    value: str = ""
    before_ns: int = 0  # spans of the column's value (or the project) that started before this
    range_ns: tuple[int, int] | None = None  # spans that started in this range
    expires: float = 0.0  # monotonic


class Tombstones:
    """The live tombstones of this process; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: list[Tombstone] = []
        self.dropped = 0  # spans dropped because a deletion had taken their trace

    def add(self, tombstone: Tombstone) -> None:
        with self._lock:
            self._live = [t for t in self._live if t.expires > time.monotonic()] + [tombstone]

    def without(self, table: pa.Table) -> pa.Table:
        """``table`` without the spans a live tombstone covers (logged and counted)."""
        with self._lock:
            live = [t for t in self._live if t.expires > time.monotonic()]
        if not live or not table.num_rows:
            return table
        drop = np.zeros(table.num_rows, dtype=bool)
        for tombstone in live:
            drop |= _covered(table, tombstone)
        if not drop.any():
            return table
        self.dropped += int(drop.sum())
        log.warning("deletion: %d spans of deleted data arrived late and were not stored", int(drop.sum()))
        return table.filter(pa.array(~drop))


def _covered(table: pa.Table, tombstone: Tombstone) -> np.ndarray:
    ours = pc.equal(table.column("project"), tombstone.project)
    hit = pc.is_in(table.column("trace_id"), value_set=pa.array(sorted(tombstone.traces), pa.string()))
    start = table.column("start_time").cast(pa.int64())
    if tombstone.column == "*":
        hit = pc.or_(hit, pc.less(start, tombstone.before_ns))
    elif tombstone.column:
        hit = pc.or_(
            hit, pc.and_(pc.equal(table.column(tombstone.column), tombstone.value), pc.less(start, tombstone.before_ns))
        )
    if tombstone.range_ns is not None:
        lo, hi = tombstone.range_ns
        hit = pc.or_(hit, pc.and_(pc.greater_equal(start, lo), pc.less(start, hi)))
    return pc.and_(ours, hit).to_numpy(zero_copy_only=False)
