"""Derived tables kept right: rebuild run totals and per-minute figures from the spans; retention."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

from agentwatch_platform.collector.storage.base import Store, StoreError
from agentwatch_platform.collector.storage.sql import delete as delete_sql
from agentwatch_platform.collector.storage.sql import reprice as reprice_sql
from agentwatch_platform.collector.storage.sql import span_keys as span_keys_sql

log = logging.getLogger(__name__)


def rebuild_totals(store: Store, *, since: float, project: str = "") -> None:
    """Recompute the run totals and per-minute figures from the stored spans, from ``since`` on.

    Used after a re-price and after replaying a batch that a crash interrupted, when the
    spans may be stored without their share of the derived totals. Run it with no insert
    racing it: the writer calls it from its own loop, and where collectors share the store it
    holds the span-writer lease, so no other collector inserts meanwhile.
    """
    params: dict[str, Any] = {"since_ns": int(since * 1e9), "project": project}
    lock = getattr(store, "write_lock", None)  # other collectors' inserts wait (collector.storage.lease)
    with lock.hold() if lock is not None else nullcontext():
        for statement in (
            reprice_sql.DROP_RUN_MINUTES,
            reprice_sql.DROP_RUNS,
            reprice_sql.REBUILD_RUNS,
            reprice_sql.DROP_MINUTES,
            reprice_sql.DROP_HOURS,
            reprice_sql.REBUILD_MINUTES,
            *span_keys_sql.DROP_SINCE,
            span_keys_sql.REBUILD_SINCE,
        ):
            store.command(statement, params)


DAY_S = 86_400


def retention_cutoff(retention_days: int, now: float) -> int:
    """The first UTC midnight kept: a day leaves whole once every moment of it is past the retention,
    as the spans table's day partitions and the text files' days do."""
    return int((now - retention_days * DAY_S) // DAY_S) * DAY_S


def enforce_retention(store: Store, retention_days: int, *, now: float | None = None) -> list[str]:
    """Remove what is older than the retention from every table and the text files, in one pass;
    the tables that had rows to remove. 0 days: keep everything.

    The TTLs (``schema.ttl_statements``) alone leave a run listed and billed long after its spans
    and texts are gone: the rollups are partitioned by month and dropped only whole
    (``ttl_only_drop_parts``), and TTL merges run when the server gets to them. This pass deletes
    the expired rows of the spans, every rollup and the texts at the same moment, with span
    inserts waiting, so a run leaves the list, the overview, the cost, search and its texts together.
    """
    if retention_days <= 0:
        return []
    cutoff_s = retention_cutoff(retention_days, time.time() if now is None else now)
    removed = []
    paused = getattr(store, "writes_paused", None)
    with paused() if paused is not None else nullcontext():
        for table, column in delete_sql.RETENTION_TABLES:
            if int(store.query(delete_sql.expired_rows(table, column), {"cutoff_s": cutoff_s})[0]["n"]):
                store.command(delete_sql.delete_expired(table, column), {"cutoff_s": cutoff_s})
                removed.append(table)
        texts = getattr(store, "texts", None)
        if texts is not None:
            texts.expire(now_ns=int((time.time() if now is None else now) * 1e9))
    return removed


# A pass an hour: a day leaves within the hour after its last moment passes the retention.
RETENTION_EVERY_S = 3600.0


class RetentionPass:
    """Runs ``enforce_retention``, and indexes new text frames for search, every ``every_s`` while
    ``may_run()`` (one collector of a cluster: the ``retention`` role); an async context manager. The first pass is the store's start
    (``SqlStore.migrate``); a failed pass is logged and the next one redoes it."""

    def __init__(
        self,
        store: Callable[[], Store],
        retention_days: int,
        *,
        may_run: Callable[[], bool],
        every_s: float = RETENTION_EVERY_S,
    ) -> None:
        self._store, self.retention_days, self._may_run, self.every_s = store, retention_days, may_run, every_s
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    def run_once(self) -> None:
        if not self._may_run():
            return
        if self.retention_days > 0:
            self._enforce()
        self._index_texts()  # after the retention: no day about to go is indexed

    def _enforce(self) -> None:
        try:
            removed = enforce_retention(self._store(), self.retention_days)
        except StoreError as exc:
            log.warning("retention: pass failed (%s); retried in %.0f s", exc, self.every_s)
            return
        if removed:
            log.info("retention: removed data older than %d days from %s", self.retention_days, ", ".join(removed))

    def _index_texts(self) -> None:
        """The captured texts of a quiet collector compressed (an embedded store's
        ``TextStore.seal_settled``), then the search index of the blocks and frames written since
        the last pass (``TextStore.index``), so that a search seldom reads one it could have passed over."""
        try:
            texts = getattr(self._store(), "texts", None)
        except StoreError as exc:
            log.warning("texts: no index pass (%s); retried in %.0f s", exc, self.every_s)
            return
        if texts is not None:
            texts.seal_settled()
            indexed = texts.index()
            if indexed:
                log.info("texts: %d frames indexed for search", indexed)

    async def __aenter__(self) -> RetentionPass:
        self._task = asyncio.create_task(self._loop(), name="agentwatch-retention")
        return self

    async def _loop(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), timeout=self.every_s)
            if not self._stop.is_set():
                await asyncio.to_thread(self.run_once)

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._stop.set()
            await self._task
            self._task = None
