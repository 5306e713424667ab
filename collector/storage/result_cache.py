"""Results of recent SELECTs, valid until the next write: for a store that is its only writer.

Planning a query costs chDB several milliseconds even over a few rows, and the dashboard and
the alert evaluator ask the same questions again and again between two flushes of the writer.
An embedded chDB directory has exactly one writer, this process, so a result stays exact until
this process writes: every statement other than a SELECT bumps the generation and empties the
cache. A result computed while a write ran (its generation is older) is never stored. Entries
also expire after ``max_age_s``, which bounds what background work (TTL drops) could make stale;
statements over ``system.`` tables, which change without a write, are never cached.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any

_READS = ("SELECT", "WITH", "EXPLAIN")

Key = tuple[str, tuple[tuple[str, str], ...]]
Rows = list[dict[str, Any]]


class ResultCache:
    """LRU of ``(sql, bound params) -> rows``, at most ``max_rows`` rows in all (memory stays
    bounded whatever the results hold); rows are handed out as fresh dicts."""

    def __init__(self, *, max_entries: int = 256, max_rows: int = 20_000, max_age_s: float = 10.0) -> None:
        self.max_entries, self.max_rows, self.max_age_s = max_entries, max_rows, max_age_s
        self._lock = threading.Lock()
        self._entries: OrderedDict[Key, tuple[float, Rows]] = OrderedDict()
        self._rows = 0
        self.generation = 0

    @staticmethod
    def key(sql: str, bound: dict[str, str]) -> Key | None:
        """The cache key, or None for a statement that must always run. Parameters the
        statement does not use are left out (callers pass a range's whole parameter set).
        A read of the server's clock (``now64``: leases) always runs."""
        if "system." in sql or "now64(" in sql or not is_read(sql):
            return None
        return sql, tuple(sorted((name, value) for name, value in bound.items() if f"{{{name}:" in sql))

    def get(self, key: Key) -> Rows | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if time.monotonic() - entry[0] > self.max_age_s:
                self._drop(key)
                return None
            self._entries.move_to_end(key)
            rows = entry[1]
        return [dict(row) for row in rows]

    def put(self, key: Key, rows: Rows, generation: int) -> None:
        """Keep ``rows`` if nothing was written since ``generation`` was read (before the query ran)."""
        if len(rows) > self.max_rows:
            return
        with self._lock:
            if generation != self.generation:
                return
            if key in self._entries:
                self._drop(key)
            self._entries[key] = (time.monotonic(), [dict(row) for row in rows])
            self._rows += len(rows)
            while len(self._entries) > self.max_entries or self._rows > self.max_rows:
                self._drop(next(iter(self._entries)))

    def _drop(self, key: Key) -> None:
        self._rows -= len(self._entries.pop(key)[1])

    def invalidate(self) -> None:
        """Forget everything: the store was written (or may have been)."""
        with self._lock:
            self.generation += 1
            self._entries.clear()
            self._rows = 0


def is_read(sql: str) -> bool:
    """A statement that cannot change stored data; any other one empties the cache."""
    head = sql.lstrip()[:8].upper()
    return any(head.startswith(word) and not head[len(word) : len(word) + 1].isalnum() for word in _READS)
