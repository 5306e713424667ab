"""The run_closes probe times the statement it claims: close rows give today's run totals."""

from __future__ import annotations

import time
from pathlib import Path

from agentwatch_platform.collector.storage.chdb_store import ChdbStore
from bench import ingest, run_closes_probe


def test_close_rows_give_the_figures_of_run_totals(tmp_path: Path) -> None:
    store = ChdbStore(tmp_path / "chdb", result_cache_s=0)
    store.migrate()
    now = time.time()
    try:
        ingest.fill(store, 50 * ingest.SPANS_PER_TRACE, end_ns=int(now * 1e9))
        ingest._big_trace(store, now)  # a run across hours: its totals merge several partial rows
        out = run_closes_probe.probe(store, now, repeats=1)
        tables = store.query("SELECT count() AS n FROM system.tables WHERE name = 'x_run_closes'")[0]["n"]
    finally:
        store.close()
    assert out["closes"]["same_figures"] is True
    assert out["closes"]["rows"] == 51
    check = out["closes"]["minutes_complete"]
    assert check["minutes"] > 0 and check["complete"] == check["minutes"]
    assert out["close_per_batch"]["traces"] > 0
    assert tables == 0  # the probe leaves the store as it found it
