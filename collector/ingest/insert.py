"""Inserting one batch so that one bad span never sinks it.

A batch the store rejects is split until the offending spans are isolated, logged and counted.
A batch over the store's memory limit (chDB's ``max_server_memory_usage``) is inserted in halves,
down to ``MEMORY_SPLIT_FLOOR`` spans: a smaller batch refused for memory means the limit is taken by
other work (merges, queries; seen on a loaded machine, where even 2 spans were refused), so it is
retried after a pause instead of split into ever smaller inserts. Each half goes under its own
deduplication token, derived from the batch's, so a replay after a crash splits the same way.
Errors of the store's environment (disk, memory, network, chDB failing to read the Arrow batch it
was handed) are raised as ``StoreUnavailable``: the writer retries those, it never drops them.
"""

from __future__ import annotations

import logging

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from agentwatch_platform.collector.metrics import Metrics
from agentwatch_platform.collector.storage.base import Store, StoreUnavailable

log = logging.getLogger(__name__)

_LAG_SAMPLES = 32

_TRANSIENT = (
    "no space left",
    "read-only",
    "cannot write",
    "cannot open",
    "cannot lock",
    "memory limit",
    "too many parts",
    "timeout",
    "timed out",
    "connection",
    "errno",
    # chDB reading the batch's Arrow stream and failing midway ("Invalid IPC file: advertised body
    # size...", "Unexpected empty message in IPC file format"): seen only with its memory limit
    # reached; the batch is ours and well formed, so its spans are never the cause.
    "ipc file",
)
MEMORY_SPLIT_FLOOR = 1_000


def insert(store: Store, table: pa.Table, token: str, metrics: Metrics) -> int:
    """Insert; when the store rejects the batch itself, split it to isolate the bad spans."""
    try:
        return store.insert_spans(table, dedup_token=token)
    except StoreUnavailable:
        raise
    except Exception as exc:
        if _over_memory(exc) and table.num_rows > MEMORY_SPLIT_FLOOR:
            log.warning(
                "writer: the store's memory limit refused a batch of %d spans (%s); inserting it in halves",
                table.num_rows,
                exc,
            )
            return _insert_halves(store, table, token, metrics)
        if _looks_unavailable(exc):
            raise StoreUnavailable(str(exc)) from exc
        if table.num_rows == 1:
            trace_id, span_id = table.column("trace_id")[0].as_py(), table.column("span_id")[0].as_py()
            log.error("writer: the store rejected span %s/%s; dropped: %s", trace_id, span_id, exc)
            metrics.on_rejected("store_rejected", 1)
            return 0
        log.warning("writer: the store rejected a batch of %d spans (%s); isolating the bad ones", table.num_rows, exc)
        return _insert_halves(store, table, token, metrics)


def _insert_halves(store: Store, table: pa.Table, token: str, metrics: Metrics) -> int:
    """Each half under its own token, derived from the batch's: a replay splits the same way."""
    mid = table.num_rows // 2
    return insert(store, table.slice(0, mid), f"{token}/0", metrics) + insert(
        store, table.slice(mid), f"{token}/1", metrics
    )


def _over_memory(exc: Exception) -> bool:
    """ClickHouse's MEMORY_LIMIT_EXCEEDED: this batch is too large for the store's memory now (a
    smaller one fits, or the limit frees up); retrying it whole would never end where it never fits."""
    text = str(exc).lower()
    return "memory_limit_exceeded" in text or "memory limit exceeded" in text


def _looks_unavailable(exc: Exception) -> bool:
    """Errors of the store's environment (disk, memory, network), not of the rows: retry, never drop."""
    text = str(exc).lower()
    return any(marker in text for marker in _TRANSIENT)


def lags(table: pa.Table, now: float) -> list[float]:
    """Span end -> queryable for a sample of a stored batch (``now``: the wall clock after its insert)."""
    if not table.num_rows:
        return []
    sample = np.arange(0, table.num_rows, max(1, table.num_rows // _LAG_SAMPLES))
    ends_s = pc.take(table.column("end_time"), sample).cast(pa.int64()).to_numpy() / 1e9
    return np.maximum(0.0, now - ends_s).tolist()
