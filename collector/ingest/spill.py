"""Decoded spans on disk: the writer's overflow beyond its in-memory bound, read back memory-mapped.

Spans the writer does not keep in memory (``AGENTWATCH_MAX_QUEUE_BYTES``) wait in the spool
anyway; decoding them again when their turn comes costs ~9 µs a span with captured text. The
request's decoded table is written here instead (Arrow IPC, uncompressed, temp file then
rename) and memory-mapped when its batch is inserted: its pages are the page cache's, not the
collector's anonymous memory. The spool stays the only record of what was acknowledged: a
missing, torn or unreadable file means decoding from the spool, and a start clears what a
previous run left (its requests are replayed from the spool). A file is deleted once its batch
is committed. Writes happen on the event loop, like the spool's; reads in the writer's thread.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc

log = logging.getLogger(__name__)

_SUFFIX = ".arrow"


class Spill:
    """``<directory>/<seq>.arrow`` files; every method logs and carries on rather than raise."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.failures = 0  # writes or reads that failed (the spool decode stood in)
        self._failing = False

    def clear(self) -> None:
        """Forget a previous run's files (called at start, before any write)."""
        shutil.rmtree(self.directory, ignore_errors=True)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            self._failed(f"cannot create {self.directory}: {exc}")

    def write(self, seq: int, table: pa.Table) -> bool:
        """Store ``table`` as request ``seq``'s spans; False (logged, counted) when the disk refuses."""
        path = self._path(seq)
        temp = path.with_suffix(".tmp")
        try:
            with pa.OSFile(str(temp), "wb") as sink, ipc.new_file(sink, table.schema) as writer:
                writer.write_table(table)
            os.replace(temp, path)
        except (OSError, pa.ArrowException) as exc:
            temp.unlink(missing_ok=True)
            self._failed(f"cannot write {path}: {exc}")
            return False
        self._failing = False
        return True

    def read(self, seq: int) -> pa.Table | None:
        """Request ``seq``'s spans, memory-mapped; None when there is no usable file."""
        path = self._path(seq)
        try:
            with pa.memory_map(str(path)) as source:
                return ipc.open_file(source).read_all()
        except FileNotFoundError:
            return None
        except (OSError, pa.ArrowException) as exc:
            self._failed(f"cannot read {path}: {exc}")
            return None

    def delete(self, seqs: list[int]) -> None:
        for seq in seqs:
            try:
                self._path(seq).unlink(missing_ok=True)
            except OSError as exc:
                self._failed(f"cannot delete {self._path(seq)}: {exc}")

    def _path(self, seq: int) -> Path:
        return self.directory / f"{seq:012d}{_SUFFIX}"

    def _failed(self, reason: str) -> None:
        self.failures += 1
        if not self._failing:  # once per run of failures, not once per request
            log.warning("spill: %s; those spans are decoded again from the spool", reason)
        self._failing = True
