"""Cluster DDL: every statement the schema emits for a ClickHouse cluster parses with ClickHouse's
own parser (``formatQuery`` in chDB), has the shape a cluster needs, and the single-node DDL is
unchanged. (No cluster runs here; deploy/ and its test say how one is started.)"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentwatch_platform.collector.storage import schema
from agentwatch_platform.collector.storage.base import QueryError
from agentwatch_platform.collector.storage.chdb_store import ChdbStore
from agentwatch_platform.collector.storage.clickhouse_store import CLUSTER_READS
from agentwatch_platform.collector.storage.cluster_ddl import (
    SHARDED,
    ClusterDDLError,
    check_cluster_name,
    cluster_form,
    for_cluster,
)
from agentwatch_platform.collector.storage.sql import reprice as reprice_sql

CLUSTER = "agentwatch"
# Every mutation a store runs through ``command`` (re-pricing, rebuilding totals).
MUTATIONS = (
    reprice_sql.REPRICE_SPANS,
    reprice_sql.DROP_RUNS,
    reprice_sql.DROP_RUN_MINUTES,
    reprice_sql.DROP_MINUTES,
    reprice_sql.DROP_HOURS,
)


def cluster_ddl(cluster: str = CLUSTER) -> list[str]:
    statements = cluster_form(schema.bootstrap_statements(), cluster)
    for migration in schema.MIGRATIONS:
        statements += cluster_form(migration.statements, cluster)
    return statements + cluster_form(schema.ttl_statements(30) + schema.ttl_statements(0), cluster)


@pytest.fixture(scope="module")
def parser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChdbStore]:
    store = ChdbStore(tmp_path_factory.mktemp("parser") / "chdb", result_cache_s=0)
    yield store
    store.close()


def parsed(parser: ChdbStore, statement: str) -> str:
    """ClickHouse's own formatting of ``statement``; raises when it does not parse."""
    return parser.query("SELECT formatQuery({sql:String}) AS f", {"sql": statement})[0]["f"]


def test_every_cluster_statement_parses(parser: ChdbStore) -> None:
    mutations = [out for sql in MUTATIONS for out in for_cluster(sql, CLUSTER)]
    for statement in cluster_ddl() + mutations:
        assert parsed(parser, statement), statement


def test_a_broken_statement_fails_the_parse(parser: ChdbStore) -> None:
    with pytest.raises(Exception, match="Syntax error"):
        parsed(parser, "CREATE TABLE x ON CLUSTER c (a String ENGINE = MergeTree ORDER BY a")


def test_sharded_tables_are_replicated_locals_behind_distributed_tables(parser: ChdbStore) -> None:
    text = [parsed(parser, s) for s in cluster_ddl()]
    for table, key in SHARDED.items():
        local = [s for s in text if s.startswith(f"CREATE TABLE IF NOT EXISTS {table}_local ON CLUSTER {CLUSTER}")]
        assert (
            len(local) == 1
            and "ENGINE = Replicated" in local[0]
            and "/clickhouse/tables/{shard}/{database}/{table}" in local[0]
        )
        distributed = [
            s for s in text if s.startswith(f"CREATE TABLE IF NOT EXISTS {table} ON CLUSTER {CLUSTER} AS {table}_local")
        ]
        assert len(distributed) == 1
        assert f"Distributed({CLUSTER}, currentDatabase(), {table}_local, {key})" in distributed[0]


def test_every_table_is_replicated_and_every_statement_runs_on_the_cluster(parser: ChdbStore) -> None:
    for statement in cluster_ddl():
        text = parsed(parser, statement)
        if text.startswith("INSERT"):
            continue  # a backfill through the Distributed tables
        assert f"ON CLUSTER {CLUSTER}" in text.splitlines()[0], text
        engine = re.search(r"ENGINE = (\w+)", text)
        if text.startswith("CREATE TABLE") and engine is not None:
            assert engine[1].startswith("Replicated") or engine[1] == "Distributed", text
        assert "non_replicated_deduplication_window" not in text


def test_small_tables_are_one_table_for_the_whole_cluster(parser: ChdbStore) -> None:
    for statement in cluster_ddl():
        text = parsed(parser, statement)
        table = re.match(r"CREATE TABLE IF NOT EXISTS (\w+) ON CLUSTER", text)
        if table and table[1] not in SHARDED and not table[1].endswith("_local"):
            assert "/clickhouse/tables/all/{database}/{table}" in text, text


def test_views_read_and_write_the_local_tables(parser: ChdbStore) -> None:
    views = [parsed(parser, s) for s in cluster_ddl() if s.startswith("CREATE MATERIALIZED VIEW")]
    assert {re.search(r"VIEW IF NOT EXISTS (\w+)", v)[1] for v in views} == {
        "runs_mv",
        "span_minutes_mv",
        "span_hours_mv",
        "run_minutes_mv",
        "span_key_minutes_mv",
        "span_key_hours_mv",
    }  # type: ignore[index]
    for view in views:
        sources = re.findall(r"FROM (\w+)", view)
        assert sources and all(s.endswith("_local") for s in sources), view
        assert re.search(r" TO \w+_local", view), view


def test_column_changes_reach_the_distributed_table_and_mutations_only_the_locals() -> None:
    add = for_cluster("ALTER TABLE runs_agg ADD COLUMN IF NOT EXISTS opened UInt64 DEFAULT 0 AFTER roots", CLUSTER)
    assert add == [
        f"ALTER TABLE runs_agg_local ON CLUSTER {CLUSTER} ADD COLUMN IF NOT EXISTS opened UInt64 DEFAULT 0 AFTER roots",
        f"ALTER TABLE runs_agg ON CLUSTER {CLUSTER} ADD COLUMN IF NOT EXISTS opened UInt64 DEFAULT 0",
    ]
    update = for_cluster(reprice_sql.REPRICE_SPANS, CLUSTER)
    assert len(update) == 1 and update[0].startswith(f"ALTER TABLE spans_local ON CLUSTER {CLUSTER} UPDATE")


def test_single_node_ddl_is_unchanged() -> None:
    for migration in schema.MIGRATIONS:
        assert cluster_form(migration.statements, "") == list(migration.statements)
    assert schema.bootstrap_statements() == [schema.MIGRATIONS_TABLE, schema.LEASES]


def test_bad_cluster_names_and_unknown_statements_are_refused() -> None:
    with pytest.raises(ValueError, match="must be an identifier"):
        check_cluster_name("x; DROP TABLE spans")
    with pytest.raises(ClusterDDLError, match="no cluster form"):
        for_cluster("RENAME TABLE spans TO old_spans", CLUSTER)


def test_cluster_ddl_file_is_current() -> None:
    """deploy/clickhouse/schema.sql is what a cluster gets (written by ``python -m collector.storage.cluster_ddl``)."""
    from agentwatch_platform.collector.storage.cluster_ddl import render

    path = Path(__file__).resolve().parents[2] / "deploy" / "clickhouse" / "schema.sql"
    assert path.read_text() == render(CLUSTER), (
        "regenerate: python -m agentwatch_platform.collector.storage.cluster_ddl agentwatch > deploy/clickhouse/schema.sql"
    )


def test_a_cluster_store_reads_with_settings_clickhouse_knows(parser: ChdbStore) -> None:
    """The settings a cluster's reads carry are ClickHouse's (a misspelt one is refused), and
    subqueries over Distributed tables inside distributed queries are allowed (the default denies them)."""
    assert CLUSTER_READS["distributed_product_mode"] == "global"
    bound = ", ".join(f"{name} = '{value}'" for name, value in CLUSTER_READS.items())
    assert parser.query(f"SELECT 1 AS one SETTINGS {bound}") == [{"one": 1}]
    with pytest.raises(QueryError, match="(?i)setting"):
        parser.query("SELECT 1 AS one SETTINGS distributed_product_mod = 'global'")
