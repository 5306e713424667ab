"""A ClickHouse server or cluster through clickhouse-connect: the way to scale past one machine.

Selected by ``AGENTWATCH_CLICKHOUSE_URL`` (``http://user:pass@host:8123/db``). Runs exactly
the DDL and SQL that chDB runs; parameters are bound by the server. With
``AGENTWATCH_CLICKHOUSE_CLUSTER`` the DDL and mutations take their cluster form
(``collector.storage.cluster_ddl``); queries are the same.
"""

from __future__ import annotations

import threading
from typing import Any

import pyarrow as pa

from agentwatch_platform.collector.storage.base import QueryError, StoreUnavailable
from agentwatch_platform.collector.storage.cluster_ddl import check_cluster_name, for_cluster
from agentwatch_platform.collector.storage.lease import SpanWriteLock, holder_id
from agentwatch_platform.collector.storage.sql.ingest import SPANS_INSERT_SETTINGS
from agentwatch_platform.collector.storage.sql_store import SqlStore, arrow_rows


class ClickHouseStore(SqlStore):
    """One HTTP client (no server session, so concurrent queries from threads are allowed).

    ``shared`` (the default): other collectors may write the same server, so span batches are
    inserted under the store's ``span-writer`` lease (``collector.storage.lease``), held as
    ``holder``.
    """

    def __init__(
        self,
        url: str,
        *,
        retention_days: int = 30,
        cluster: str = "",
        holder: str = "",
        lease_ttl_s: float = 15.0,
        shared: bool = True,
    ) -> None:
        super().__init__(retention_days=retention_days, cluster=check_cluster_name(cluster) if cluster else "")
        self.url = url
        self.holder = holder or holder_id()
        self._closed = threading.Event()
        self._client = _connect(url)
        if shared:  # other collectors may write this server: span inserts under its span-writer lease
            self.write_lock = SpanWriteLock(self, self.holder, ttl_s=lease_ttl_s)

    def query(self, sql: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        settings = CLUSTER_READS if self.cluster else None
        return arrow_rows(self._call(self._client.query_arrow, sql, parameters=params or {}, settings=settings))

    def command(self, sql: str, params: dict[str, Any] | None = None) -> None:
        """Run a statement; on a cluster a mutation (``ALTER``) goes to every shard's local table."""
        statements = for_cluster(sql, self.cluster) if self.cluster and _is_alter(sql) else [sql]
        for statement in statements:
            self._call(self._client.command, statement, parameters=params or {})

    def _insert_arrow(self, table: str, data: pa.Table, *, dedup_token: str | None = None) -> None:
        settings: dict[str, Any] = dict(SPANS_INSERT_SETTINGS) if table == "spans" else {}
        if dedup_token:
            settings["insert_deduplication_token"] = dedup_token
        if self.cluster:  # acknowledged spans are on their shard, and visible to the identity look-up
            settings.update(CLUSTER_READS, distributed_foreground_insert=1)
        self._call(self._client.insert_arrow, table, data, settings=settings or None)

    def _call(self, method: Any, *args: Any, **kwargs: Any) -> Any:
        from clickhouse_connect.driver.exceptions import DatabaseError, OperationalError

        if self._closed.is_set():
            raise StoreUnavailable(f"ClickHouse store {_redact(self.url)} is closed")
        try:
            return method(*args, **kwargs)
        except OperationalError as exc:
            raise StoreUnavailable(f"ClickHouse server {_redact(self.url)} unreachable: {exc}") from exc
        except DatabaseError as exc:
            raise QueryError(f"ClickHouse query failed: {exc}") from exc

    def hold_merges(self, hold: bool) -> None:
        """A no-op: a server merges its parts itself, whichever collectors insert into it."""

    def backlog(self, waiting: bool) -> None:
        """A no-op: a server's merges are its own (``hold_merges``)."""

    def close(self) -> None:
        if not self._closed.is_set():
            self._closed.set()
            self._client.close()


# On a cluster, reads and inserts through the Distributed tables go to each shard's first healthy
# replica (config order), whichever node a collector is connected to: the identity look-up reads
# the replica the insert wrote, not one that has not fetched the part yet. A subquery over a
# Distributed table inside a query over one (``trace_id IN (SELECT trace_id FROM runs_agg ...)``)
# is refused under ClickHouse's default (``distributed_product_mode = 'deny'``); ``global`` runs it
# once and sends its result to every shard, right whichever keys the two tables are sharded by.
CLUSTER_READS = {"load_balancing": "in_order", "distributed_product_mode": "global"}


def _is_alter(sql: str) -> bool:
    return sql.lstrip()[:12].upper() == "ALTER TABLE "


def _connect(url: str) -> Any:
    import clickhouse_connect
    from clickhouse_connect.driver.exceptions import Error

    try:
        return clickhouse_connect.get_client(dsn=url, autogenerate_session_id=False)
    except Error as exc:
        raise StoreUnavailable(f"cannot connect to ClickHouse at {_redact(url)}: {exc}") from exc


def _redact(url: str) -> str:
    """The URL without its password, for messages and logs."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit(parts._replace(netloc=netloc))
