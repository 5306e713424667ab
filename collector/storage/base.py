"""The store interface every back end implements.

SQL lives in ``collector.storage.schema`` (DDL, migrations) and ``collector.storage.sql``
(parameterised queries, ``{name:Type}`` placeholders bound by ClickHouse); back ends only
execute it. Driver exceptions are translated to ``StoreError`` subclasses at this boundary.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pyarrow as pa

    from agentwatch_platform.collector.storage.texts import TextSearch

from agentwatch_platform.collector.errors import CollectorError
from agentwatch_platform.collector.storage.model import SpanRow


class StoreError(CollectorError):
    """Base of every storage error."""


class StoreUnavailable(StoreError):
    """The back end cannot be reached or opened now; the caller should spool and retry.

    ``message`` is for the log: a driver's error names the store's host, port and user. What a
    client is told (``answer``) names none of it: ``ANSWER``, unless the raiser says more.
    """

    status = 503
    retry_after = 5.0
    ANSWER = "store unavailable; retry later"

    def __init__(self, message: str = "", *, retry_after: float | None = None, answer: str = ANSWER) -> None:
        super().__init__(message, retry_after=retry_after)
        self._answer = answer

    @property
    def answer(self) -> str:
        return self._answer


class QueryError(StoreError):
    """A query was rejected (bad parameters, timeout, result too large)."""


class Store(Protocol):
    def migrate(self) -> None:
        """Create or upgrade the schema to the current version; idempotent."""

    def insert_spans(self, spans: pa.Table | Sequence[SpanRow], *, dedup_token: str | None = None) -> int:
        """Insert a ``SPANS_SCHEMA`` table (or rows, converted first); a repeated dedup_token
        (a retried request) inserts nothing.

        Storage stays idempotent on (project, trace_id, span_id) for every total.
        Returns the number of spans written.
        """

    def query(self, sql: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run a parameterised SELECT and return rows as dicts."""

    def read_texts(self, spans: list[dict[str, Any]], *, project: str = "", trace_id: str = "") -> None:
        """Fill in place the captured texts of span rows read with their ``text_ref``
        (``sql.runs.SPANS_OF_TRACE``; rows without ``project`` or ``trace_id`` columns are of the
        ``project`` and ``trace_id`` given) and set each row's ``text_state`` (``texts.TEXT_STATES``:
        captured, not_captured, removed, damaged); drops ``text_ref``. Never another span's text."""

    def search_texts(self, project: str, start_ns: int, end_ns: int, needle: str, *, limit: int) -> TextSearch:
        """Trace ids whose captured text kept outside the spans table contains ``needle``
        (case-insensitive), for spans started in [start_ns, end_ns), at most ``limit``, the newest
        first, and the files that could not be read; none where texts are in the table."""

    def command(self, sql: str, params: dict[str, Any] | None = None) -> None:
        """Run a statement that returns nothing (DDL, INSERT ... VALUES, ALTER)."""

    def insert_rows(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """Insert plain rows into one of the schema's small tables (keys, alerts, feedback, engine metrics)."""

    def hold_merges(self, hold: bool) -> None:
        """While ``hold``, the spans table's background merges wait (an embedded store in a burst);
        a no-op where the merges are a server's. Must not raise: merges are not the caller's concern."""

    def backlog(self, waiting: bool) -> None:
        """Whether a backlog waits behind the spans being inserted (told before each insert, and
        ``False`` once the writer's queue drained): an embedded store holds its merges meanwhile, for
        a limited time (``collector.storage.merge_hold``); a no-op where the merges are a server's.
        Must not raise."""

    def close(self) -> None:
        """Release the back end; safe to call twice."""
