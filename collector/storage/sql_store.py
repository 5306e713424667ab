"""What both back ends share: migrations, idempotent span inserts, small-table inserts.

A back end supplies three primitives (run a SELECT, run a statement, insert an Arrow table)
and translates its driver's errors; everything that decides *what* SQL runs lives here and
in ``schema``/``queries``, so chDB and a ClickHouse server behave the same.
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from collector.model import SpanRow
from collector.storage import queries, schema
from collector.storage.base import QueryError
from collector.storage.columns import spans_table
from collector.storage.recent import RecentKeys, key_hashes, start_times

log = logging.getLogger(__name__)


class SqlStore(ABC):
    """Store logic over three back-end primitives; see ``collector.storage.base.Store``."""

    def __init__(self, *, retention_days: int = 30, recent_keys: RecentKeys | None = None) -> None:
        self.retention_days = retention_days
        self._insert_lock = threading.Lock()
        self._recent = recent_keys

    # --- back-end primitives -----------------------------------------------------------------
    @abstractmethod
    def query(self, sql: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run a parameterised SELECT and return rows as dicts."""

    @abstractmethod
    def command(self, sql: str, params: dict[str, Any] | None = None) -> None:
        """Run a statement that returns nothing."""

    @abstractmethod
    def _insert_arrow(self, table: str, data: pa.Table, *, dedup_token: str | None = None) -> None:
        """Insert an Arrow table whose column names match the table's."""

    @abstractmethod
    def close(self) -> None:
        """Release the back end; safe to call twice."""

    # --- schema ----------------------------------------------------------------------------
    def migrate(self) -> None:
        """Apply the migrations not yet recorded, then the retention TTL; idempotent."""
        self.command(schema.MIGRATIONS_TABLE)
        applied = {int(r["version"]) for r in self.query(schema.APPLIED_VERSIONS)}
        for migration in schema.MIGRATIONS:
            if migration.version in applied:
                continue
            for statement in migration.statements:
                self.command(statement)
            self.command(schema.RECORD_MIGRATION, {"version": migration.version, "name": migration.name})
            log.info("applied schema migration %d (%s)", migration.version, migration.name)
        self._apply_retention()

    def _apply_retention(self) -> None:
        for statement in schema.ttl_statements(self.retention_days):
            try:
                self.command(statement)
            except QueryError as exc:
                if "doesn't have any table TTL" not in str(exc):
                    raise

    # --- spans -----------------------------------------------------------------------------
    def insert_spans(self, rows: Sequence[SpanRow], *, dedup_token: str | None = None) -> int:
        """Insert the spans whose (project, trace_id, span_id) is not stored yet.

        The check and the insert run under one lock, so this process never writes a key
        twice; a repeated ``dedup_token`` is also ignored by the table itself. Spans that
        ``RecentKeys`` vouches for skip the look-up in the store.
        """
        with self._insert_lock:
            rows = _unique(rows)
            hashes, starts = key_hashes(rows), start_times(rows)
            new = self._recent.certainly_new(hashes, starts) if self._recent else np.zeros(len(rows), dtype=bool)
            stored = self._stored_keys([r for r, sure in zip(rows, new, strict=True) if not sure])
            keep = new | np.fromiter(((r.project, r.trace_id, r.span_id) not in stored for r in rows), dtype=bool, count=len(rows))
            fresh = [r for r, k in zip(rows, keep, strict=True) if k]
            if fresh:
                self._insert_arrow("spans", spans_table(fresh), dedup_token=dedup_token)
                if self._recent:
                    self._recent.add(hashes[keep], starts[keep])
            return len(fresh)

    def _stored_keys(self, rows: list[SpanRow]) -> set[tuple[str, str, str]]:
        """The keys among ``rows`` that the store already holds (exact)."""
        by_project: dict[str, list[SpanRow]] = defaultdict(list)
        for row in rows:
            by_project[row.project].append(row)
        stored: set[tuple[str, str, str]] = set()
        for project, group in by_project.items():
            stored.update((project, r["trace_id"], r["span_id"]) for r in self.query(queries.STORED_SPAN_KEYS, _key_params(project, group)))
        return stored

    # --- small tables ----------------------------------------------------------------------
    def insert_rows(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """Insert plain rows into one of the small tables (whitelisted by name)."""
        if table not in queries.SMALL_TABLES:
            raise QueryError(f"insert_rows: unknown table {table!r}; expected one of {sorted(queries.SMALL_TABLES)}")
        if not rows:
            return
        arrays = [pa.array(list(values)) if not _is_map(values) else _map_array(values) for values in zip(*rows, strict=True)]
        self._insert_arrow(table, pa.Table.from_arrays(arrays, names=list(columns)))


def _unique(rows: Sequence[SpanRow]) -> list[SpanRow]:
    """First occurrence of each span key within one batch."""
    seen: set[tuple[str, str, str]] = set()
    out: list[SpanRow] = []
    for row in rows:
        key = (row.project, row.trace_id, row.span_id)
        if key not in seen:
            seen.add(key)
            out.append(row)
    return out


def _key_params(project: str, rows: list[SpanRow]) -> dict[str, Any]:
    starts = [r.start_time_ns for r in rows]
    return {"project": project, "lo_ns": min(starts), "hi_ns": max(starts), "trace_ids": sorted({r.trace_id for r in rows})}


def _is_map(values: tuple) -> bool:
    return any(isinstance(v, dict) for v in values)


def _map_array(values: tuple) -> pa.Array:
    return pa.array([list((v or {}).items()) for v in values], type=pa.map_(pa.string(), pa.string()))


def arrow_rows(table: pa.Table) -> list[dict[str, Any]]:
    """Rows of a query result; Map columns become dicts (Arrow gives lists of pairs)."""
    rows = table.to_pylist()
    maps = [f.name for f in table.schema if pa.types.is_map(f.type)]
    for row in rows:
        for name in maps:
            row[name] = dict(row[name] or ())
    return rows
