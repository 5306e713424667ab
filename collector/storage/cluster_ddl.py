"""The schema's statements for a ClickHouse cluster, derived from the single-node ones.

``collector.storage.schema`` writes every table once, for one node. With
``AGENTWATCH_CLICKHOUSE_CLUSTER=<name>`` each statement is rewritten here (its single-node
text stays the one source of truth):

- **Sharded tables** (``SHARDED``: spans and the tables its views fill, engine metrics) become
  ``<table>_local``, a ``Replicated*MergeTree`` per shard (Keeper path
  ``/clickhouse/tables/{shard}/{database}/{table}``), plus ``<table>``, a ``Distributed`` table
  over them with the sharding key named in ``SHARDED``. Queries keep reading ``spans``,
  ``runs_agg``, ... and so run unchanged; the views read and write the local tables, so each
  shard folds its own spans and a query merges the shards' partial states as it merges hours.
- **Spans are sharded by** ``cityHash64(project, trace_id)``: one trace lives on one shard, so a
  run's partial rows, its spans' identity look-up and the ReplacingMergeTree second guard
  (which only merges rows of one shard) all see the whole trace. Run totals use the same key.
- **Small tables** (keys, alerts, engines, feedback, prices, audit, migrations, leases) are not
  sharded: one ``Replicated*MergeTree`` with a shard-free Keeper path
  (``/clickhouse/tables/all/{database}/{table}``), so every node holds all of it and an
  ``insert_deduplication_token`` is decided once for the whole cluster (``collector.lease``).
  ``{replica}`` must therefore be unique across the cluster (deploy/ names them per node).
- Every DDL statement carries ``ON CLUSTER``; mutations (``ALTER ... UPDATE/DELETE``, TTL) go
  to the local tables. Migrations are applied by one collector at a time (``collector.lease``),
  recorded in the replicated ``schema_migrations``: once per cluster.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from agentwatch_platform.collector.errors import CollectorError
from agentwatch_platform.collector.storage import schema

# Sharded table -> sharding key of its Distributed table.
SHARDED: dict[str, str] = {
    "spans": "cityHash64(project, trace_id)",
    "runs_agg": "cityHash64(project, trace_id)",
    "span_minutes": "cityHash64(project, agent, model)",
    "span_hours": "cityHash64(project, agent, model)",
    "span_key_minutes": "cityHash64(project, agent, model)",
    "span_key_hours": "cityHash64(project, agent, model)",
    "run_minutes": "cityHash64(project, agent)",
    "closed_run_minutes": "cityHash64(project, minute)",  # a minute's versions on one shard, for FINAL
    "engine_metrics": "cityHash64(project, engine)",
}
LOCAL_SUFFIX = "_local"
SHARD_PATH = "/clickhouse/tables/{shard}/{database}/{table}"
GLOBAL_PATH = "/clickhouse/tables/all/{database}/{table}"

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CREATE_TABLE = re.compile(
    r"^\s*CREATE TABLE IF NOT EXISTS (?P<table>\w+) \((?P<columns>.*)\)\s*ENGINE = (?P<engine>\w*MergeTree)(?:\((?P<args>[^)]*)\))?(?P<rest>.*)$",
    re.DOTALL,
)
_CREATE_VIEW = re.compile(
    r"^\s*CREATE MATERIALIZED VIEW IF NOT EXISTS (?P<view>\w+) TO (?P<target>\w+) AS(?P<select>.*)$", re.DOTALL
)
_DROP_VIEW = re.compile(r"^\s*DROP VIEW IF EXISTS (?P<view>\w+)\s*$")
_ALTER = re.compile(r"^\s*ALTER TABLE (?P<table>\w+) (?P<action>.*)$", re.DOTALL)
_INSERT = re.compile(r"^\s*INSERT INTO ", re.IGNORECASE)
_COLUMN_CHANGE = re.compile(r"^(ADD|DROP|MODIFY|RENAME) COLUMN\b")


class ClusterDDLError(CollectorError, ValueError):
    """A statement this module does not know how to run on a cluster."""


def check_cluster_name(cluster: str) -> str:
    """``cluster`` if it is a plain identifier (it is written into DDL), else ``ValueError``."""
    if not _NAME.fullmatch(cluster):
        raise ValueError(f"ClickHouse cluster name {cluster!r} must be an identifier (letters, digits, underscore)")
    return cluster


def for_cluster(statement: str, cluster: str) -> list[str]:
    """The statements that do on ``cluster`` what ``statement`` does on one node."""
    check_cluster_name(cluster)
    if (m := _CREATE_TABLE.match(statement)) is not None:
        return _create_table(m, cluster)
    if (m := _CREATE_VIEW.match(statement)) is not None:
        select = _local_sources(m["select"])
        return [
            f"CREATE MATERIALIZED VIEW IF NOT EXISTS {m['view']} ON CLUSTER {cluster} TO {_local(m['target'])} AS{select}"
        ]
    if (m := _DROP_VIEW.match(statement)) is not None:
        return [f"DROP VIEW IF EXISTS {m['view']} ON CLUSTER {cluster} SYNC"]
    if (m := _ALTER.match(statement)) is not None:
        return _alter(m["table"], m["action"], cluster)
    if _INSERT.match(statement):
        return [statement]  # into the Distributed table, which routes rows by its sharding key
    raise ClusterDDLError(f"no cluster form for statement: {statement.strip()[:80]!r}")


def _create_table(m: re.Match[str], cluster: str) -> list[str]:
    table, engine, rest = (
        m["table"],
        m["engine"],
        m["rest"].replace("non_replicated_deduplication_window", "replicated_deduplication_window"),
    )
    sharded = table in SHARDED
    path = SHARD_PATH if sharded else GLOBAL_PATH
    args = ", ".join(a for a in (f"'{path}'", "'{replica}'", (m["args"] or "").strip()) if a)
    name = _local(table) if sharded else table
    local = f"CREATE TABLE IF NOT EXISTS {name} ON CLUSTER {cluster} ({m['columns']})\nENGINE = Replicated{engine}({args}){rest}"
    if not sharded:
        return [local]
    distributed = (
        f"CREATE TABLE IF NOT EXISTS {table} ON CLUSTER {cluster} AS {name}\n"
        f"ENGINE = Distributed({cluster}, currentDatabase(), {name}, {SHARDED[table]})"
    )
    return [local, distributed]


def _alter(table: str, action: str, cluster: str) -> list[str]:
    """Mutations and TTLs on the local tables; column changes on the Distributed table too."""
    if table not in SHARDED:
        return [f"ALTER TABLE {table} ON CLUSTER {cluster} {action}"]
    statements = [f"ALTER TABLE {_local(table)} ON CLUSTER {cluster} {action}"]
    if _COLUMN_CHANGE.match(action.strip()):
        statements.append(f"ALTER TABLE {table} ON CLUSTER {cluster} {_without_placement(action)}")
    return statements


def _without_placement(action: str) -> str:
    """A Distributed table has no column codecs or order to keep: only the column and its type."""
    return re.sub(r"\s+AFTER \w+\s*$", "", action)


def _local_sources(select: str) -> str:
    """``FROM <sharded>`` -> ``FROM <sharded>_local``: a view folds the rows its shard stores."""
    return re.sub(r"\bFROM (\w+)\b", lambda m: f"FROM {_local(m[1]) if m[1] in SHARDED else m[1]}", select)


def _local(table: str) -> str:
    return table + LOCAL_SUFFIX if table in SHARDED else table


def cluster_form(statements: Iterable[str], cluster: str) -> list[str]:
    """Single-node ``statements`` as ``cluster`` runs them; as written when ``cluster`` is empty."""
    if not cluster:
        return list(statements)
    return [out for statement in statements for out in for_cluster(statement, cluster)]


def render(cluster: str, retention_days: int = 30) -> str:
    """The whole schema for ``cluster`` as one SQL file (what ``deploy/clickhouse/schema.sql`` holds)."""
    lines = [
        f"-- agentwatch schema for ClickHouse cluster {cluster!r}: written by python -m agentwatch_platform.collector.storage.cluster_ddl",
        "-- The collector applies it itself (AGENTWATCH_CLICKHOUSE_CLUSTER); this file is for review and manual setup.",
    ]
    blocks = cluster_form(schema.bootstrap_statements(), cluster)
    for migration in schema.MIGRATIONS:
        blocks += [f"-- migration {migration.version}: {migration.name}"] + cluster_form(migration.statements, cluster)
    blocks += ["-- retention"] + cluster_form(schema.ttl_statements(retention_days), cluster)
    return (
        "\n".join(lines) + "\n\n" + "\n\n".join(b.strip() + ("" if b.startswith("--") else ";") for b in blocks) + "\n"
    )


if __name__ == "__main__":
    import sys

    sys.stdout.write(render(sys.argv[1] if len(sys.argv) > 1 else "agentwatch"))
