"""ClickHouse storage: one module of DDL and SQL, two back ends (embedded chDB, server); the
embedded one keeps captured texts in files of its own (``texts``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from agentwatch_platform.collector.storage.base import QueryError, Store, StoreError, StoreUnavailable

if TYPE_CHECKING:
    from agentwatch_platform.collector.settings import Settings

__all__ = ["QueryError", "Store", "StoreError", "StoreUnavailable", "open_store"]


def open_store(settings: Settings, *, migrate: bool = True) -> Store:
    """The configured back end, migrated: a ClickHouse server when ``clickhouse_url`` is set,
    else embedded chDB in ``data_dir / "chdb"``."""
    if settings.clickhouse_url:
        from agentwatch_platform.collector.storage.clickhouse_store import ClickHouseStore
        from agentwatch_platform.collector.storage.lease import holder_id

        store: Store = ClickHouseStore(
            settings.clickhouse_url,
            retention_days=settings.retention_days,
            cluster=settings.clickhouse_cluster,
            holder=holder_id(settings.collector_id),
            lease_ttl_s=settings.lease_ttl_s,
        )
    else:
        from agentwatch_platform.collector.storage.chdb_memory import ChdbMemory
        from agentwatch_platform.collector.storage.chdb_store import ChdbStore

        memory = ChdbMemory(
            cache_bytes=settings.chdb_cache_bytes,
            limit_bytes=settings.chdb_memory_limit_bytes,
            dirty_decay_ms=settings.chdb_dirty_decay_ms,
            arenas=settings.chdb_allocator_arenas,
            merge_threads=settings.chdb_merge_threads,
        )
        # Merges wait through a burst only where batches are bounded in bytes: without the bound, the
        # faster inserts let the batches, and the peak, grow instead.
        store = ChdbStore(
            Path(settings.data_dir) / "chdb",
            retention_days=settings.retention_days,
            memory=memory,
            merge_hold_s=settings.chdb_merge_hold_s if settings.max_queue_bytes > 0 else 0.0,
        )
    if migrate:
        try:
            store.migrate()
        except BaseException:
            store.close()
            raise
    return store
