"""The writer's hook that tells the store whether a backlog waits behind the batch it inserts.

The store decides what to do about it (``Store.backlog``): an embedded one holds its background
merges through a burst, for a limited time (``collector.storage.merge_hold``); a server does
nothing. Told before each insert, and again once the queue has drained.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

from agentwatch_platform.collector.ingest.hooks import Batch, InsertHook
from agentwatch_platform.collector.storage.base import Store, StoreError


class BacklogHook(InsertHook):
    def __init__(self, store: Callable[[], Store]) -> None:
        self._store = store

    def before_insert(self, batch: Batch) -> pa.Table:
        self._tell(batch.backlog)
        return batch.table

    def after_release(self, *, drained: bool) -> None:
        if drained:
            self._tell(False)

    def _tell(self, waiting: bool) -> None:
        try:
            store = self._store()
        except StoreError:
            return  # a reopened store merges as usual
        store.backlog(waiting)
