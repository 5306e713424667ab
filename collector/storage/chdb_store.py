"""Embedded ClickHouse (chDB): the default back end, a data directory and no server.

chDB allows one data directory per process and one process per data directory, so the
collector owns it; queries are serialised through one lock because a chDB connection is
not safe to use from several threads at once.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa

from agentwatch_platform.collector.storage.base import QueryError, StoreError, StoreUnavailable
from agentwatch_platform.collector.storage.chdb_memory import ChdbMemory
from agentwatch_platform.collector.storage.merge_hold import MergeHold
from agentwatch_platform.collector.storage.recent import RecentKeys
from agentwatch_platform.collector.storage.result_cache import ResultCache, is_read
from agentwatch_platform.collector.storage.sql.admin import HOLD_MERGES, PURGE_ALLOCATOR, RESUME_MERGES
from agentwatch_platform.collector.storage.sql.ingest import SPANS_INSERT_SETTINGS
from agentwatch_platform.collector.storage.sql_store import SqlStore, arrow_rows
from agentwatch_platform.collector.storage.texts import TextSearch, TextStore, TextStoreError

log = logging.getLogger(__name__)


class ChdbStore(SqlStore):
    """A chDB session over ``path``; raises ``StoreUnavailable`` when the path is in use.

    The only writer of its directory, so it may vouch for recently stored span keys itself
    (``RecentKeys``, ``recent_window_s`` = 0 turns that off), and keeps captured texts in files
    of its own under ``<path>/texts`` (``texts``, ``collector.storage.texts``): chDB's inserts and
    merges of text-heavy spans cost the collector ~4x their bytes in memory. ``memory`` bounds
    chDB's caches and allocator (``collector.storage.chdb_memory``); after inserting spans, what
    the insert freed goes back to the OS at once (``PURGE_ALLOCATOR``), while queries keep the
    allocator's decay. While a backlog waits behind an insert its merges wait, for at most
    ``merge_hold_s`` (``collector.storage.merge_hold``; 0: never).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        retention_days: int = 30,
        recent_window_s: float = 60.0,
        result_cache_s: float = 10.0,
        memory: ChdbMemory | None = None,
        merge_hold_s: float = 0.0,
    ) -> None:
        self.recent_window_s = recent_window_s
        recent = RecentKeys(recent_window_s) if recent_window_s > 0 else None
        super().__init__(retention_days=retention_days, recent_keys=recent)
        self.path = Path(path)
        self._lock = threading.RLock()
        self._results = ResultCache(max_age_s=result_cache_s) if result_cache_s > 0 else None
        self._session = _open_session(self.path, memory or ChdbMemory())
        self.texts = TextStore(self.path / "texts", retention_days=retention_days)
        self.merges_held = False
        self._merge_hold = MergeHold(self.hold_merges, limit_s=merge_hold_s)

    def query(self, sql: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Rows of a SELECT; repeated reads between two writes come from ``ResultCache``."""
        cache = self._results
        key = cache.key(sql, _bind(params)) if cache is not None else None
        if key is None:
            return arrow_rows(_arrow_table(self._run(sql, params, fmt="Arrow")))
        assert cache is not None
        generation = cache.generation
        rows = cache.get(key)
        if rows is None:
            rows = arrow_rows(_arrow_table(self._run(sql, params, fmt="Arrow")))
            cache.put(key, rows, generation)
        return rows

    def command(self, sql: str, params: dict[str, Any] | None = None) -> None:
        self._run(sql, params, fmt="CSV")

    def _insert_fresh(self, fresh: pa.Table, dedup_token: str | None) -> None:
        """Texts still in the rows (not written at decode) go to ``texts`` first; where the disk
        refuses, they are stored in the spans table's columns instead, as before migration 12."""
        try:
            fresh = self.texts.stash(fresh)
        except TextStoreError as exc:
            log.warning("chDB: %s; these spans keep their captured text in the spans table", exc)
        super()._insert_fresh(fresh, dedup_token)

    def read_texts(self, spans: list[dict[str, Any]], *, project: str = "", trace_id: str = "") -> None:
        self.texts.fill(spans, project=project, trace_id=trace_id)

    def search_texts(self, project: str, start_ns: int, end_ns: int, needle: str, *, limit: int) -> TextSearch:
        return self.texts.search(project, start_ns, end_ns, needle, limit=limit)

    def _apply_retention(self) -> None:
        super()._apply_retention()
        self.texts.expire()

    def _insert_arrow(self, table: str, data: pa.Table, *, dedup_token: str | None = None) -> None:
        columns = ", ".join(data.column_names)
        settings = [f"{name} = {value}" for name, value in SPANS_INSERT_SETTINGS.items() if table == "spans"]
        params: dict[str, Any] = {}
        if dedup_token:
            settings.append("insert_deduplication_token = {token:String}")
            params["token"] = dedup_token
        sql = f"INSERT INTO {table} ({columns}) SELECT {columns} FROM Python(aw_batch)"
        if settings:
            sql += f" SETTINGS {', '.join(settings)}"
        self._run(sql, params, fmt="CSV", aw_batch=data)
        if table == "spans":
            self._purge_allocator()

    def backlog(self, waiting: bool) -> None:
        self._merge_hold.backlog(waiting)

    def hold_merges(self, hold: bool) -> None:
        """Stop or restart the spans table's background merges (``HOLD_MERGES``); a failure is logged."""
        if hold == self.merges_held:
            return
        try:
            self.command(HOLD_MERGES if hold else RESUME_MERGES)
        except StoreError as exc:
            log.warning("chDB: %s merges failed: %s", "holding" if hold else "resuming", exc)
            return
        self.merges_held = hold

    def _purge_allocator(self) -> None:
        try:
            self._run(PURGE_ALLOCATOR, None, fmt="CSV")
        except QueryError as exc:  # the spans are stored; only the memory waits for the decay
            log.warning("chDB: purging the allocator after an insert failed: %s", exc)

    def _run(self, sql: str, params: dict[str, Any] | None, *, fmt: str, aw_batch: pa.Table | None = None) -> Any:
        """Run one statement; ``aw_batch`` is the table that ``Python(aw_batch)`` reads
        (chDB resolves that name among the calling frame's locals)."""
        with self._lock:
            if self._session is None:
                raise StoreUnavailable(f"chDB store at {self.path} is closed")
            try:
                return self._session.query(sql, fmt, params=_bind(params))
            except Exception as exc:  # chDB raises RuntimeError/ChdbError subclasses
                raise QueryError(f"chDB query failed: {exc}") from exc
            finally:
                if self._results is not None and not is_read(sql):
                    self._results.invalidate()  # inside the lock: no read runs between the write and this

    def close(self) -> None:
        with self._lock:
            if self._session is not None:
                self._session.close()
                self._session = None
                self.texts.close()


def _open_session(path: Path, memory: ChdbMemory) -> Any:
    memory.configure_allocator()
    from chdb import session

    path.mkdir(parents=True, exist_ok=True)
    try:
        return session.Session(memory.connection_string(path))
    except Exception as exc:
        message = str(exc)
        if "Error initializing EmbeddedServer" in message or "Cannot lock file" in message:
            raise StoreUnavailable(
                f"chDB data directory {path} is in use by another process (only one process may open it; "
                "stop the other collector or go through its API)"
            ) from exc
        if "already initialized with path" in message:
            raise StoreUnavailable(
                f"this process already has another chDB data directory open; close it before opening {path}"
            ) from exc
        raise StoreUnavailable(f"cannot open chDB data directory {path}: {message}") from exc


def _arrow_table(result: Any) -> pa.Table:
    """A result in the Arrow file format as a table, read where chDB holds it. chDB's own
    ``ArrowTable`` reads it the same way but imports pandas first, which the collector keeps out
    (``collector.tuning``)."""
    if not len(result):
        return pa.table({})
    return pa.ipc.open_file(result.get_memview().view()).read_all()


def _bind(params: dict[str, Any] | None) -> dict[str, str]:
    """chDB takes parameter values in ClickHouse's text form (as the HTTP interface does)."""
    return {name: _text(value) for name, value in (params or {}).items()}


def _text(value: Any) -> str:
    if value is None:
        return "\\N"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, str):
        return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")
    if isinstance(value, list | tuple | set | frozenset):
        return "[" + ",".join(_literal(v) for v in value) + "]"
    return str(value)


def _literal(value: Any) -> str:
    """An element inside an array parameter: strings quoted, the rest as text."""
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return _text(value)
