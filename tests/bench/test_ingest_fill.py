"""The storage benchmark's SQL fill: a fill resumed at a checkpoint adds new runs, not spans of old ones."""

from __future__ import annotations

import time
from pathlib import Path

from agentwatch_platform.collector.storage.chdb_store import ChdbStore
from bench import ingest


def test_a_resumed_fill_numbers_new_traces(tmp_path: Path) -> None:
    store = ChdbStore(tmp_path / "chdb", result_cache_s=0)
    store.migrate()
    try:
        end_ns = int(time.time() * 1e9)
        ingest.fill(store, 10 * ingest.SPANS_PER_TRACE, end_ns=end_ns)
        ingest.fill(store, 20 * ingest.SPANS_PER_TRACE, end_ns=end_ns + 60 * 10**9)  # the next checkpoint
        row = store.query(
            "SELECT count() AS spans, uniqExact(trace_id, span_id) AS keys, uniqExact(trace_id) AS traces, "
            "countIf(kind = 'run') AS roots FROM spans"
        )[0]
    finally:
        store.close()
    assert row == {"spans": 600, "keys": 600, "traces": 20, "roots": 20}
