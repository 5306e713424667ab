"""The store on every back end: schema, idempotent span inserts, parameter binding, errors."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from agentwatch_platform.collector.settings import Settings
from agentwatch_platform.collector.storage import open_store, schema
from agentwatch_platform.collector.storage.base import QueryError, Store, StoreUnavailable
from agentwatch_platform.collector.storage.chdb_store import ChdbStore
from agentwatch_platform.collector.storage.columns import SPANS_SCHEMA, empty_spans_table, spans_table, table_rows
from agentwatch_platform.collector.storage.model import SpanRow
from agentwatch_platform.collector.storage.recent import RecentKeys, key_hashes, trace_hashes
from agentwatch_platform.collector.storage.schema import MIGRATIONS
from agentwatch_platform.collector.storage.sql.ingest import STORED_TRACE_HASHES
from tests.collector.factories import agent_run, new_trace_id, with_project
from tests.collector.store_fixtures import forget_rollup, open_backend

TOTALS = "SELECT count() AS spans, sum(input_tokens) AS tokens, round(sum(cost_usd), 9) AS cost FROM spans WHERE project = {project:String}"
RUN_TOTALS = """
SELECT count() AS runs, sum(c) AS cost, sum(t) AS tokens, sum(s) AS steps FROM (
    SELECT trace_id, round(sum(cost_usd), 9) AS c, sum(input_tokens) AS t, sum(steps) AS s
    FROM runs_agg WHERE project = {project:String} GROUP BY trace_id)"""


def totals(store: Store, project: str = "p1") -> tuple[dict, dict]:
    return store.query(TOTALS, {"project": project})[0], store.query(RUN_TOTALS, {"project": project})[0]


def full_row() -> SpanRow:
    """A span with every field set to something other than its default (recent: not past the TTL)."""
    t0 = int(time.time() - 3600) * 1_000_000_000 + 123_456_789
    return SpanRow(
        project="p1",
        trace_id=new_trace_id(),
        span_id="00000000000000aa",
        parent_span_id="00000000000000bb",
        name="chat sim-small",
        kind="llm",
        start_time_ns=t0,
        end_time_ns=t0 + 1_864_197_532,
        service_name="svc",
        status_code="error",
        status_message="boom 'quoted' \\ back",
        error_type="TimeoutError",
        is_timeout=True,
        agent_name="researcher",
        session_id="s1",
        user_id="u1",
        model="sim-small",
        provider="sim",
        input_tokens=1234,
        output_tokens=56,
        cached_tokens=7,
        cost_usd=0.000123,
        price_version="v1",
        ttft_s=0.25,
        tpot_s=0.0125,
        queue_s=0.5,
        prefill_s=0.125,
        decode_s=1.0,
        tool_name="search",
        tool_cache_hit=True,
        step_index=3,
        finish_reason="stop",
        outcome="success",
        budget_exceeded="cost",
        request_id="req-1",
        input_text="héllo\n\tworld",
        output_text="out",
        attributes={"a.b": "1", "x": "y"},
        resource={"service.name": "svc"},
        events='[{"name":"e"}]',
    )


def test_migrate_is_versioned_and_idempotent(store: Store) -> None:
    store.migrate()
    store.migrate()
    versions = store.query("SELECT version, count() AS n FROM schema_migrations GROUP BY version ORDER BY version")
    assert versions == [{"version": v.version, "n": 1} for v in MIGRATIONS]
    tables = {r["name"] for r in store.query("SELECT name FROM system.tables WHERE database = currentDatabase()")}
    assert {
        "spans",
        "runs_agg",
        "span_minutes",
        "api_keys",
        "feedback",
        "engine_metrics",
        "alerts",
        "alert_deliveries",
        "price_versions",
    } <= tables


def test_span_round_trips_every_field(store: Store) -> None:
    row = full_row()
    assert store.insert_spans([row]) == 1
    got = store.query(
        "SELECT *, toUnixTimestamp64Nano(start_time) AS s_ns, toUnixTimestamp64Nano(end_time) AS e_ns FROM spans WHERE trace_id = {t:String}",
        {"t": row.trace_id},
    )[0]
    store.read_texts([got])  # an embedded store keeps the texts in files of its own (collector.storage.texts)
    assert (got["s_ns"], got["e_ns"]) == (row.start_time_ns, row.end_time_ns)
    for name in (
        "project",
        "span_id",
        "parent_span_id",
        "name",
        "kind",
        "status_message",
        "error_type",
        "is_timeout",
        "model",
        "input_tokens",
        "output_tokens",
        "cached_tokens",
        "cost_usd",
        "tool_cache_hit",
        "step_index",
        "outcome",
        "budget_exceeded",
        "request_id",
        "input_text",
        "output_text",
        "attributes",
        "resource",
        "events",
    ):
        assert got[name] == getattr(row, name), name
    assert got["ttft_s"] == pytest.approx(0.25) and got["tpot_s"] == pytest.approx(0.0125)


def test_retried_request_with_same_token_changes_no_total(store: Store) -> None:
    rows = agent_run(start_s=time.time() - 60, steps=3)
    assert store.insert_spans(rows, dedup_token="req-1") == len(rows)
    before = totals(store)
    assert store.insert_spans(rows, dedup_token="req-1") == 0
    assert totals(store) == before
    assert before[1] == {"runs": 1, "cost": 0.03, "tokens": 300, "steps": 3}


def test_spans_resent_in_other_groupings_change_no_total(store: Store) -> None:
    a = agent_run(start_s=time.time() - 120, steps=4)
    b = agent_run(start_s=time.time() - 100, steps=2)
    store.insert_spans(a[:5], dedup_token="r1")
    store.insert_spans(a[5:] + b[:3], dedup_token="r2")
    store.insert_spans(b[3:], dedup_token="r3")
    before = totals(store)
    store.insert_spans(a[3:] + b[:4], dedup_token="r4")  # a retry that regrouped the spans
    store.insert_spans(b + a)  # everything again, no token
    store.insert_spans(a[:2] + a[:2])  # duplicates within one batch
    assert totals(store) == before
    assert before[0]["spans"] == len(a) + len(b)
    assert before[1]["runs"] == 2 and before[1]["steps"] == 6


def test_duplicates_are_ignored_after_reopening(tmp_path: Path) -> None:
    rows = agent_run(start_s=time.time() - 60)
    first = open_backend("chdb", tmp_path)
    first.insert_spans(rows, dedup_token="t")
    before = totals(first)
    first.close()
    second = open_backend("chdb", tmp_path)
    try:
        second.insert_spans(rows, dedup_token="t")
        second.insert_spans(rows[::-1])
        assert totals(second) == before
    finally:
        second.close()


def test_duplicates_within_and_across_table_batches_change_no_total(store: Store) -> None:
    a = spans_table(agent_run(start_s=time.time() - 90, steps=3))
    b = spans_table(agent_run(start_s=time.time() - 80, steps=2))
    assert store.insert_spans(pa.concat_tables([a, a.slice(2, 3), a.slice(0, 1)])) == a.num_rows  # within the batch
    assert store.insert_spans(pa.concat_tables([a.slice(4), b, b])) == b.num_rows  # across batches, and within
    assert store.insert_spans(b) == 0
    spans, runs = totals(store)
    assert spans["spans"] == a.num_rows + b.num_rows and runs == {"runs": 2, "cost": 0.05, "tokens": 500, "steps": 5}


def test_first_occurrence_of_a_key_within_a_batch_is_the_one_stored(store: Store) -> None:
    row = full_row()
    assert store.insert_spans(spans_table([row, replace(row, name="second", input_tokens=1)])) == 1
    assert store.query("SELECT name, input_tokens FROM spans") == [{"name": row.name, "input_tokens": row.input_tokens}]


def test_a_spans_insert_is_not_merged_by_the_engine_on_the_way_in(store: Store) -> None:
    """``SPANS_INSERT_SETTINGS`` reach the engine: a key repeated within one inserted block stays twice
    (the replacing merge on insert copied every block; the store drops repeats before inserting)."""
    store.command("SYSTEM STOP MERGES spans")
    row = full_row()
    store._insert_arrow("spans", spans_table([row, row]).cast(SPANS_SCHEMA))  # type: ignore[attr-defined]
    assert store.query("SELECT count() AS n FROM spans")[0]["n"] == 2


def test_hold_merges_holds_only_an_embedded_stores_merges(store: Store) -> None:
    """chDB's spans merges wait while held (a merge asked for is cancelled) and run once resumed; a
    server's merges are the server's: holding is a no-op there."""
    for start in (90, 60):
        store.insert_spans(spans_table(agent_run(start_s=time.time() - start, steps=2)))
    store.hold_merges(True)
    if isinstance(store, ChdbStore):
        with pytest.raises(QueryError, match="Cancelled merging"):
            store.command("OPTIMIZE TABLE spans FINAL")
        store.hold_merges(False)
    store.command("OPTIMIZE TABLE spans FINAL")
    assert store.query(
        "SELECT count() AS n FROM system.parts WHERE database = currentDatabase() AND table = 'spans' AND active"
    ) == [{"n": 1}]


def test_a_sliced_table_inserts_only_its_spans(store: Store) -> None:
    rows = agent_run(start_s=time.time() - 60, steps=3)
    table = spans_table(rows)
    assert store.insert_spans(table.slice(3, 4)) == 4
    assert {r["span_id"] for r in store.query("SELECT span_id FROM spans")} == {r.span_id for r in rows[3:7]}
    assert store.insert_spans(table.slice(1)) == len(rows) - 5
    assert store.insert_spans(table) == 1 and totals(store)[0]["spans"] == len(rows)


def test_ids_of_another_width_are_deduplicated_too(store: Store) -> None:
    t0 = time.time_ns() - 10**9
    ids = [("abc", "1"), ("ab" * 20, "12" * 9), (new_trace_id(), "1" * 16), (new_trace_id()[:31] + "é", "2" * 16)]
    table = spans_table([SpanRow("p1", t, s, "", "s", "llm", t0, t0 + 1, input_tokens=10) for t, s in ids])
    assert store.insert_spans(pa.concat_tables([table, table.slice(0, 1), table.slice(3)])) == len(ids)
    assert store.insert_spans(table.slice(1)) == 0
    assert store.insert_spans(pa.concat_tables([table.slice(2, 1), table.slice(0, 2)])) == 0
    assert totals(store)[0] == {"spans": len(ids), "tokens": 10 * len(ids), "cost": 0}


def test_same_span_ids_in_another_project_are_separate(store: Store) -> None:
    rows = agent_run(start_s=time.time() - 60)
    store.insert_spans(rows)
    store.insert_spans(with_project(rows, "p2"))
    assert totals(store, "p1") == totals(store, "p2")
    assert totals(store, "p1")[0]["spans"] == len(rows)


def test_parameters_are_bound_by_the_server(store: Store) -> None:
    nasty = "it's a \\ back\tslash\nnew 'line'; DROP TABLE spans --"
    got = store.query(
        "SELECT {s:String} AS s, {a:Array(String)} AS a, {n:Nullable(Float64)} AS n, {i:Int64} AS i",
        {"s": nasty, "a": [nasty, "x"], "n": None, "i": -5},
    )[0]
    assert got == {"s": nasty, "a": [nasty, "x"], "n": None, "i": -5}
    assert (
        store.query("SELECT count() AS n FROM system.tables WHERE name = 'spans' AND database = currentDatabase()")[0][
            "n"
        ]
        == 1
    )


def test_bad_sql_and_unknown_tables_raise_query_error(store: Store) -> None:
    with pytest.raises(QueryError):
        store.query("SELECT no_such_column FROM spans")
    with pytest.raises(QueryError, match="unknown table 'spans'"):
        store.insert_rows("spans", ["project"], [["p"]])


def test_insert_rows_writes_small_tables(store: Store) -> None:
    now = time.time()
    store.insert_rows(
        "engine_metrics",
        ("project", "engine", "ts", "metric", "labels", "value"),
        [("p1", "e1", now, "vllm:num_requests_running", {"model_name": "m"}, 3.0)],
    )
    store.insert_rows(
        "api_keys",
        ("project", "key_id", "salt", "key_hash", "name", "created_at", "revoked_at"),
        [("p1", "k1", "s", "h", "ci", now, None)],
    )
    assert store.query("SELECT labels, value FROM engine_metrics") == [{"labels": {"model_name": "m"}, "value": 3.0}]
    assert store.query("SELECT key_id, revoked_at FROM api_keys") == [{"key_id": "k1", "revoked_at": None}]


def test_retention_sets_and_removes_the_ttl(tmp_path: Path) -> None:
    store = open_backend("chdb", tmp_path, retention_days=7)
    ddl = "SELECT create_table_query AS q FROM system.tables WHERE name = 'spans' AND database = currentDatabase()"
    try:
        assert "toIntervalDay(7)" in store.query(ddl)[0]["q"]
        store.retention_days = 0
        store.migrate()
        assert "TTL" not in store.query(ddl)[0]["q"]
    finally:
        store.close()


def test_a_restart_alters_only_the_ttls_the_retention_changes(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    statements: list[str] = []
    command = store.command

    def recorded(sql: str, *args: Any, **kwargs: Any) -> None:
        statements.append(sql)
        command(sql, *args, **kwargs)

    monkeypatch.setattr(store, "command", recorded)
    store.migrate()  # reopened at the retention it was created with
    assert [s for s in statements if "TTL" in s] == []
    store.retention_days = 7
    store.migrate()
    assert len([s for s in statements if "MODIFY TTL" in s and "INTERVAL 7 DAY" in s]) == len(schema.TTL_TABLES)
    statements.clear()
    store.migrate()
    assert [s for s in statements if "TTL" in s] == []
    store.retention_days = 0
    store.migrate()
    assert len([s for s in statements if "REMOVE TTL" in s]) == len(schema.TTL_TABLES)
    ttls = store.query(schema.TABLE_TTLS, {"names": list(schema.TTL_TABLES)})
    assert sorted(r["name"] for r in ttls) == sorted(schema.TTL_TABLES) and {r["ttl"] for r in ttls} == {""}


def test_open_store_puts_chdb_under_the_data_dir(tmp_path: Path) -> None:
    store = open_store(Settings.from_env(data_dir=tmp_path, clickhouse_url=""))
    try:
        assert isinstance(store, ChdbStore) and store.path == tmp_path / "chdb"
        assert store.insert_spans([replace(full_row(), trace_id=new_trace_id())]) == 1
    finally:
        store.close()
        store.close()
    with pytest.raises(StoreUnavailable, match="closed"):
        store.query("SELECT 1")


def test_second_process_on_the_same_data_dir_gets_store_unavailable(tmp_path: Path) -> None:
    store = open_backend("chdb", tmp_path)
    script = textwrap.dedent(f"""
        from agentwatch_platform.collector.storage.base import StoreUnavailable
        from agentwatch_platform.collector.storage.chdb_store import ChdbStore
        try:
            ChdbStore({str(tmp_path / "chdb")!r})
        except StoreUnavailable as exc:
            print("UNAVAILABLE:", exc)
    """)
    try:
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    finally:
        store.close()
    assert "UNAVAILABLE:" in out.stdout and "in use by another process" in out.stdout, out.stdout + out.stderr


def test_spans_table_and_table_rows_round_trip_with_the_schema() -> None:
    rows = [replace(full_row(), tpot_s=0.015625), SpanRow("p2", new_trace_id(), "1" * 16, "", "s", "llm", 1, 2)]
    for batch in ([], rows):
        table = spans_table(batch)
        assert table.schema.equals(SPANS_SCHEMA) and table.num_rows == len(batch)
        assert table_rows(table) == batch
    assert table_rows(spans_table(rows).slice(1)) == rows[1:]
    assert empty_spans_table().schema.equals(SPANS_SCHEMA) and table_rows(empty_spans_table()) == []
    assert (
        SPANS_SCHEMA.field("start_time").type == pa.timestamp("ns")
        and SPANS_SCHEMA.field("trace_id").type == pa.string()
    )


def test_key_hashes_do_not_depend_on_the_batch() -> None:
    """RecentKeys compares hashes across batches: a key must hash alike in a slice, in chunks, beside odd ids."""
    rows = [SpanRow(p, new_trace_id(), f"{i:016x}", "", "s", "llm", 0, 0) for i, p in enumerate("pqpqpq")]
    rows.append(SpanRow("p", "abc", "1", "", "s", "llm", 0, 0))
    table = spans_table(rows)
    whole = key_hashes(table)
    assert len(set(whole.tolist())) == len(rows)
    parts = [key_hashes(table.slice(0, 3)), key_hashes(pa.concat_tables([table.slice(3, 2), table.slice(5)]))]
    assert np.concatenate(parts).tolist() == whole.tolist()
    assert key_hashes(spans_table(rows[:6])).tolist() == whole[:6].tolist()
    assert not set(key_hashes(spans_table(with_project(rows, "r"))).tolist()) & set(whole.tolist())


def _recent_batch(trace_id: str, n: int, first: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    table = spans_table([SpanRow("p", trace_id, f"{i:016x}", "", "s", "llm", 0, 0) for i in range(first, first + n)])
    return (key_hashes(table), *trace_hashes(table))


def test_recent_keys_vouch_only_for_new_traces_and_unseen_spans_of_owned_ones() -> None:
    now = [1_000.0]
    recent = RecentKeys(60, clock=lambda: now[0])
    stored, fresh = new_trace_id(), new_trace_id()
    assert not recent.certainly_new(*_recent_batch(fresh, 3)).any()  # stored trace ids not read yet: ask the store
    recent.load(trace_hashes(spans_table([SpanRow("p", stored, "1" * 16, "", "s", "llm", 0, 0)]))[0])
    assert not recent.certainly_new(*_recent_batch(stored, 3)).any()  # a stored trace: any span of it may be stored
    assert recent.certainly_new(*_recent_batch(fresh, 3)).all()
    recent.add(*_recent_batch(fresh, 2))  # this process creates the trace: it owns it
    assert recent.certainly_new(*_recent_batch(fresh, 4)).tolist() == [False, False, True, True]
    now[0] += 70  # ownership ages out: the trace is a stored one like any other
    assert not recent.certainly_new(*_recent_batch(fresh, 4)).any()
    recent.forget()  # after a failed insert: nothing is vouched for until the trace ids are read again
    assert not recent.loaded and not recent.certainly_new(*_recent_batch(new_trace_id(), 2)).any()


def test_recent_keys_never_vouch_for_unusual_trace_ids() -> None:
    recent = RecentKeys(60)
    recent.load(np.zeros(0, dtype=np.uint64))
    for trace_id in ("abc", "0" * 31 + "G", "A" * 32, "ab" * 20):
        assert not recent.certainly_new(*_recent_batch(trace_id, 2)).any(), trace_id


def test_trace_hashes_match_the_stores_hash(store: Store) -> None:
    trace_ids = [new_trace_id() for _ in range(20)] + ["abc", "F" * 32]
    t0 = time.time_ns() - 60 * 10**9
    table = spans_table([SpanRow("p1", t, "1" * 16, "", "s", "llm", t0, t0) for t in trace_ids])
    store.insert_spans(table)
    [row] = store.query(STORED_TRACE_HASHES)
    hashes, usual = trace_hashes(table)
    assert usual.tolist() == [True] * 20 + [False, False]
    assert set(hashes[usual].tolist()) <= {int(h) for h in row["hashes"]}


def test_fast_path_keeps_totals_on_duplicate_delivery(tmp_path: Path) -> None:
    store = ChdbStore(tmp_path / "chdb", recent_window_s=0.5)
    store.migrate()
    try:
        time.sleep(0.6)
        t0 = time.time_ns() - 300_000_000
        span_ids = [f"{i:016x}" if i % 7 else f"{i:x}" for i in range(50)]  # some of another width
        table = spans_table(
            [
                SpanRow("p1", new_trace_id(), s, "", "llm", "llm", t0, t0 + 1000, input_tokens=10, cost_usd=0.5)
                for s in span_ids
            ]
        )
        assert store.insert_spans(table.slice(0, 30)) == 30
        assert store.insert_spans(table.slice(20)) == 20  # 10 of them vouched for as seen, checked exactly
        assert store.insert_spans(table) == 0
        assert store.insert_spans(table_rows(table)) == 0
        assert totals(store)[0] == {"spans": 50, "tokens": 500, "cost": 25.0}
    finally:
        store.close()


def test_upgrade_from_version_1_backfills_the_minute_rollup(store: Store) -> None:
    forget_rollup(store, "span_minutes", 2)
    rows = agent_run(start_s=time.time() - 300, steps=2)
    store.insert_spans(rows)
    store.migrate()
    got = store.query("SELECT sum(cost_usd) AS cost, sum(llm_calls) AS calls FROM span_minutes WHERE project = 'p1'")[0]
    assert got == {"cost": pytest.approx(0.02), "calls": 2}
    store.insert_spans(agent_run(start_s=time.time() - 200, steps=1))  # and the view feeds it from now on
    assert store.query("SELECT sum(llm_calls) AS calls FROM span_minutes")[0]["calls"] == 3


def test_text_heavy_spans_are_written_in_granules_of_at_most_two_mib(store: Store) -> None:
    """A merge reads a granule of each of its parts at once: with ClickHouse's 10 MiB granules the
    merges catching up after a burst with captured text added ~150 MB to the collector (+85 with
    2 MiB, bench/results/scale.md)."""
    base = full_row()
    text = "prompt text " * 170  # ~2 KB each way
    rows = [replace(base, span_id=f"{i:016x}", input_text=text, output_text=text) for i in range(4000)]
    # straight into the table: an embedded store keeps texts in files of its own (collector.storage.texts),
    # but a ClickHouse server, and an embedded store whose text files refuse a write, keep them here
    store._insert_arrow("spans", spans_table(rows))  # type: ignore[attr-defined]
    (part,) = store.query(
        "SELECT sum(rows) AS rows, sum(marks) AS marks, sum(data_uncompressed_bytes) AS bytes FROM system.parts"
        " WHERE active AND database = currentDatabase() AND table = 'spans'"
    )
    mib = part["bytes"] / 2**20
    assert part["rows"] == 4000 and mib > 12, part
    assert part["marks"] >= mib / 3, part  # 10 MiB granules: 2 marks
