"""The store's merges held while a burst's backlog is inserted: the writer's hook.

While a backlog waits behind the batch being inserted, the spans table's background merges wait
too (``Store.hold_merges``, ``sql.admin.HOLD_MERGES``): merging text-heavy parts during a burst's
inserts added 60-140 MB to its peak (bench/results/scale.md). For at most ``limit_s``
(``AGENTWATCH_CHDB_MERGE_HOLD_S``); after that limit, not again until the queue has drained once.
Only where batches are bounded in bytes (``bounded``): without the bound, the faster inserts let
the batches, and the peak, grow instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pyarrow as pa

from agentwatch_platform.collector.ingest.hooks import Batch, InsertHook
from agentwatch_platform.collector.storage.base import Store, StoreError


class MergeHold(InsertHook):
    def __init__(self, store: Callable[[], Store], *, limit_s: float, bounded: bool) -> None:
        self._store = store
        self._limit_s = limit_s  # 0: the store's merges never wait for a backlog
        self._bounded = bounded
        self._held_since: float | None = None  # monotonic time the store's merges were held
        self._may_hold = True  # False after a hold reached its limit, until the queue drains

    def before_insert(self, batch: Batch) -> pa.Table:
        self._hold(batch.backlog)
        return batch.table

    def after_release(self, *, drained: bool) -> None:
        if drained:
            self._hold(False)

    def _hold(self, backlog: bool) -> None:
        now = time.monotonic()
        if not backlog:
            self._may_hold = True
        elif self._held_since is not None and now - self._held_since >= self._limit_s:
            self._may_hold = False
        hold = backlog and self._may_hold and self._limit_s > 0 and self._bounded
        if hold == (self._held_since is not None):
            return
        self._held_since = now if hold else None
        try:
            store = self._store()
        except StoreError:
            return  # a reopened store merges as usual
        store.hold_merges(hold)
