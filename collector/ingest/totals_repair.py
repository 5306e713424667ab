"""Run totals rebuilt after a crash: the writer's hook for a replayed batch.

A kill during an insert can commit the spans but not the derived run and per-minute totals
(the materialized views' parts); the replay of that batch from the spool then finds the spans
stored and inserts nothing new, so the totals are rebuilt from the stored spans, per project,
from the batch's earliest start (``collector.storage.maintenance.rebuild_totals``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import pyarrow as pa

from agentwatch_platform.collector.ingest.hooks import Batch, InsertHook
from agentwatch_platform.collector.storage.base import Store, StoreError
from agentwatch_platform.collector.storage.maintenance import rebuild_totals

log = logging.getLogger(__name__)


class TotalsRepair(InsertHook):
    def __init__(self, store: Callable[[], Store]) -> None:
        self._store = store

    def after_insert(self, batch: Batch) -> None:
        if not batch.replayed or not batch.table.num_rows:
            return
        table = batch.table
        starts = pa.table({"project": table.column("project"), "since_ns": table.column("start_time").cast(pa.int64())})
        for group in starts.group_by("project", use_threads=False).aggregate([("since_ns", "min")]).to_pylist():
            try:
                rebuild_totals(self._store(), since=group["since_ns_min"] / 1e9, project=group["project"])
            except StoreError as exc:
                log.error("writer: rebuilding run totals of project %s after a crash failed: %s", group["project"], exc)
