"""What both back ends share: migrations, idempotent span inserts, small-table inserts.

A back end supplies three primitives (run a SELECT, run a statement, insert an Arrow table)
and translates its driver's errors; everything that decides *what* SQL runs lives here and
in ``schema``/``sql``, so chDB and a ClickHouse server behave the same.
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from agentwatch_platform.collector.storage import schema
from agentwatch_platform.collector.storage.base import QueryError
from agentwatch_platform.collector.storage.cluster_ddl import cluster_form
from agentwatch_platform.collector.storage.columns import SPANS_SCHEMA, spans_table
from agentwatch_platform.collector.storage.lease import SCHEMA, LeaseLock, SpanWriteLock
from agentwatch_platform.collector.storage.maintenance import enforce_retention
from agentwatch_platform.collector.storage.model import SpanRow
from agentwatch_platform.collector.storage.recent import RecentKeys, key_hashes, trace_hashes
from agentwatch_platform.collector.storage.sql import ingest as ingest_sql
from agentwatch_platform.collector.storage.texts import TEXT_REF, TEXT_STATE, TextSearch, row_state
from agentwatch_platform.collector.storage.tombstones import Tombstones

_KEY = ("project", "trace_id", "span_id")
_WITH_TEXT_REFS = SPANS_SCHEMA.append(pa.field(TEXT_REF, pa.uint64()))  # spans whose texts a text store holds

log = logging.getLogger(__name__)


class SqlStore(ABC):
    """Store logic over three back-end primitives; see ``collector.storage.base.Store``."""

    def __init__(self, *, retention_days: int = 30, recent_keys: RecentKeys | None = None, cluster: str = "") -> None:
        self.retention_days = retention_days
        self.cluster = cluster  # a ClickHouse cluster's name: DDL in its form (``cluster_ddl.cluster_form``)
        self._insert_lock = threading.Lock()
        self._recent = recent_keys
        self.write_lock: SpanWriteLock | None = None  # set where other collectors write the same store
        self.tombstones = (
            Tombstones()
        )  # deleted data kept out when late spans of it arrive (collector.storage.deletion)

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
        for statement in cluster_form(schema.bootstrap_statements(), self.cluster):
            self.command(statement)
        with self._schema_lock():
            applied = {int(r["version"]) for r in self.query(schema.APPLIED_VERSIONS)}
            for migration in schema.MIGRATIONS:
                if migration.version in applied:
                    continue
                for statement in cluster_form(migration.statements, self.cluster):
                    self.command(statement)
                self.command(schema.RECORD_MIGRATION, {"version": migration.version, "name": migration.name})
                log.info("applied schema migration %d (%s)", migration.version, migration.name)
            self._apply_retention()

    def _schema_lock(self) -> AbstractContextManager[None]:
        """Where collectors share the store, one applies migrations at a time (the ``schema`` lease)."""
        if self.write_lock is None:
            return nullcontext()
        return LeaseLock(self, SCHEMA, self.write_lock.holder, ttl_s=600.0, wait_s=900.0).hold()

    def _apply_retention(self) -> None:
        """The TTLs, and the retention pass at once: a lowered retention takes effect at start."""
        current = None
        if not self.cluster:  # a cluster's start alters every node's (one node's TTLs say nothing of the others)
            current = {r["name"]: r["ttl"] for r in self.query(schema.TABLE_TTLS, {"names": list(schema.TTL_TABLES)})}
        for statement in cluster_form(schema.ttl_statements(self.retention_days, current), self.cluster):
            try:
                self.command(statement)
            except QueryError as exc:
                if "doesn't have any table TTL" not in str(exc):
                    raise
        enforce_retention(self, self.retention_days)  # type: ignore[arg-type]

    # --- spans -----------------------------------------------------------------------------
    def insert_spans(self, spans: pa.Table | Sequence[SpanRow], *, dedup_token: str | None = None) -> int:
        """Insert the spans whose identity (project, trace_id, span_id) is not stored yet.

        Identity does not depend on the start time: a span re-sent with another start time is
        the stored one. The first occurrence of a key within the batch counts. The check and the
        insert run under one lock, so this process never writes a key twice (and, with a
        ``write_lock``, under the store's ``span-writer`` lease, so no collector does); a repeated
        ``dedup_token`` is also ignored by the table itself. Spans that ``RecentKeys`` vouches
        for skip the look-up in the store. Works on columns: no Python per span.
        """
        table = spans if isinstance(spans, pa.Table) else spans_table(spans)
        if not table.schema.equals(SPANS_SCHEMA) and not table.schema.equals(_WITH_TEXT_REFS):
            table = _current_schema(table)
        with self._insert_lock, self.write_lock.hold() if self.write_lock else nullcontext():
            table = self.tombstones.without(table)
            hashes = key_hashes(table)
            first = _first_occurrences(table, hashes)
            traces, usual, sure = self._certainly_new(table, hashes)
            keep = first & ~self._stored(table, first & ~sure)
            fresh = table if keep.all() else table.filter(keep)
            if fresh.num_rows:
                if self.write_lock:
                    self.write_lock.refresh()  # a slow look-up must not leave the insert without its lease
                self._insert_fresh(fresh, dedup_token)
                if self.write_lock:
                    self.write_lock.overran()
                if self._recent:
                    self._recent.add(hashes[keep], traces[keep], usual[keep])
            return fresh.num_rows

    def _certainly_new(self, table: pa.Table, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(trace hash, usual trace id, certainly new) per row; nothing is certainly new without ``RecentKeys``."""
        if self._recent is None:
            none = np.zeros(len(hashes), dtype=bool)
            return np.zeros(len(hashes), dtype=np.uint64), none, none
        if not self._recent.loaded:
            rows = self.query(ingest_sql.STORED_TRACE_HASHES)
            self._recent.load(np.array(rows[0]["hashes"] if rows else [], dtype=np.uint64))
        traces, usual = trace_hashes(table)
        return traces, usual, self._recent.certainly_new(hashes, traces, usual)

    def _insert_fresh(self, fresh: pa.Table, dedup_token: str | None) -> None:
        try:
            self._insert_arrow("spans", fresh, dedup_token=dedup_token)
        except BaseException:
            if self._recent:  # the insert may have landed in part: what this process knew may be wrong
                self._recent.forget()
            raise

    def _stored(self, table: pa.Table, ask: np.ndarray) -> np.ndarray:
        """True for the rows in ``ask`` whose identity the store already holds (exact, by a join)."""
        stored = np.zeros(table.num_rows, dtype=bool)
        rows = np.flatnonzero(ask)
        if not len(rows):
            return stored
        asked = _with_rows(table, rows)
        keys = self._stored_keys(asked)
        if keys.num_rows:
            found = asked.join(keys, keys=list(_KEY), join_type="left semi", use_threads=False)
            stored[found.column("row").to_numpy()] = True
        return stored

    def _stored_keys(self, spans: pa.Table) -> pa.Table:
        """The keys among ``spans`` that the store already holds, at any start time; one look-up per project."""
        projects = pc.unique(spans.column("project")).to_pylist()
        found = []
        for project in projects:
            group = spans if len(projects) == 1 else spans.filter(pc.equal(spans.column("project"), project))
            rows = self.query(ingest_sql.STORED_SPAN_KEYS, _key_params(project, group))
            columns = [[project] * len(rows), [r["trace_id"] for r in rows], [r["span_id"] for r in rows]]
            found.append(pa.table([pa.array(c, type=pa.string()) for c in columns], names=list(_KEY)))
        return pa.concat_tables(found)

    @contextmanager
    def writes_paused(self) -> Iterator[None]:
        """No span insert runs meanwhile: this process's wait for the insert lock, other collectors'
        for the ``span-writer`` lease (a deletion or a retention pass rebuilds rollups from the spans)."""
        with self._insert_lock, self.write_lock.hold() if self.write_lock else nullcontext():
            yield

    # --- captured text ----------------------------------------------------------------------
    def read_texts(self, spans: list[dict[str, Any]], *, project: str = "", trace_id: str = "") -> None:
        """Texts are in the spans' own columns here (a back end with a text store overrides this)."""
        for span in spans:
            span[TEXT_STATE] = row_state(span, int(span.pop(TEXT_REF, 0) or 0))

    def search_texts(self, project: str, start_ns: int, end_ns: int, needle: str, *, limit: int) -> TextSearch:
        """Nothing beyond the spans table's columns, which ``runs_sql.RUN_SEARCH`` reads itself."""
        return TextSearch()

    # --- small tables ----------------------------------------------------------------------
    def insert_rows(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """Insert plain rows into one of the small tables (whitelisted by name)."""
        if table not in ingest_sql.SMALL_TABLES:
            raise QueryError(f"insert_rows: unknown table {table!r}; expected one of {sorted(ingest_sql.SMALL_TABLES)}")
        if not rows:
            return
        arrays = [
            pa.array(list(values)) if not _is_map(values) else _map_array(values) for values in zip(*rows, strict=True)
        ]
        self._insert_arrow(table, pa.Table.from_arrays(arrays, names=list(columns)))


def _first_occurrences(table: pa.Table, hashes: np.ndarray) -> np.ndarray:
    """True for the first row of each key in the batch.

    Rows whose hash is unique have a unique key; only rows whose hash repeats are grouped by key.
    """
    first = np.ones(len(hashes), dtype=bool)
    _, inverse, counts = np.unique(hashes, return_inverse=True, return_counts=True)
    shared = np.flatnonzero(counts[inverse] > 1)
    if len(shared):
        first[shared] = False
        groups = _with_rows(table, shared).group_by(list(_KEY), use_threads=False).aggregate([("row", "min")])
        first[groups.column("row_min").to_numpy()] = True
    return first


def _with_rows(table: pa.Table, rows: np.ndarray) -> pa.Table:
    """The keys of ``rows`` and their row numbers in ``table``."""
    return table.select(list(_KEY)).take(rows).append_column("row", pa.array(rows))


def _key_params(project: str, spans: pa.Table) -> dict[str, Any]:
    trace_ids = pc.unique(spans.column("trace_id")).sort().to_pylist()
    span_ids = pc.unique(spans.column("span_id")).sort().to_pylist()
    return {"project": project, "trace_ids": trace_ids, "span_ids": span_ids}


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


def _current_schema(table: pa.Table) -> pa.Table:
    """``table`` as ``SPANS_SCHEMA`` (with text refs if it has them): a table spilled by an older
    collector lacks the later columns (``service_version``), which take their defaults."""
    target = _WITH_TEXT_REFS if TEXT_REF in table.column_names else SPANS_SCHEMA
    for field in target:
        if field.name not in table.column_names:
            table = table.append_column(field, pa.nulls(table.num_rows, field.type).fill_null(""))
    return table.select(target.names).cast(target)
