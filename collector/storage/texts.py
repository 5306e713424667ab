"""Captured prompt and completion text of the embedded store, kept in files of its own, not in chDB.

Why: chDB's insert holds ~4x its batch, and captured text makes a span ~4x larger (~950 B
against ~240); merging text-heavy parts costs as much again. With the text in chDB a 500k-span
burst peaked at ~490 MB of anonymous memory in the collector; with it here, ~255-270 MB, for
~11 % of the HTTP ingest rate with text (the compression, framing and writes on the decode
threads; bench/results/scale.md). The texts are written when a request is decoded
(``collector.ingest.pipeline``), so they never wait in the writer's queue either, and by the
store's insert for any span that still carries its text (``ChdbStore._insert_fresh``).

Layout: ``<directory>/<YYYY-MM-DD>.awt``, one append-only file per UTC day of the spans' start
time (the spans table's partition), deleted whole when the retention has passed over that day.
A file is a header (``_FILE_HEADER``) and frames; each frame holds the texts of one write::

    b"AWT1" | payload bytes (u32 LE) | CRC-32 of the payload (u32 LE) | payload

where the payload is an Arrow IPC stream of ``BLOCK_SCHEMA`` (ZSTD-compressed buffers). A span
row points at its frame with ``text_ref`` (UInt64): the day (days since 1970) in the high 24
bits, the frame's offset in the low 40. 0 (no frame is at offset 0) means the text, if any, is in
the row's own columns: the ClickHouse back end, a store from before migration 12, or a write
that failed. ``REMOVED_REF`` (day 0, never a frame's) means the text was removed by retention or
a deletion while the span stays. The CRC lets a scan (``search``) skip a frame torn by a crash
and find the next one; a span row never points at a torn frame, because the frame is written
before the row is inserted. A frame whose spans were never inserted (a crash, a retried request,
a duplicate) is dead weight until its day expires. Written without fsync, as chDB writes its
parts.

Whose text: a frame holds the texts of many traces (one request, or one insert batch), and span
ids are unique only within a trace (counter-based tracers reuse ``0000000000000001``...). So a
span's text is found in its frame by the whole key (project, trace id, span id), checked on every
read together with the frame's CRC: a frame that is not there, is damaged, or does not hold that
key (a file truncated at a frame boundary and appended to, replaced, or copied from elsewhere)
gives the span no text and the state ``damaged``, never another span's text. Each row read gets a
``text_state`` (``TEXT_STATES``). The frames have held the whole key since the first version, so
the files of every existing data directory read as they are; no migration.

Search index: beside each day file, ``<day>.awi`` (``collector.storage.text_index``) holds a trigram
filter per frame, keyed by the frame's offset and CRC, written by the first search that reads the
frame (ingest pays nothing). A later search passes over a frame the filter rules out by its header
alone; a frame without a valid record (a damaged or missing index, a frame rewritten by a deletion,
a file truncated or replaced) is read and matched as before, so the index changes the time of a
search, never its answer. A deletion that rewrites a day file deletes its index; retention expires
it with the day.

A day file removed or replaced under a running collector (by hand, a restore, a cleanup script)
is noticed before the next write (the open handle's device and inode against the path's) and
opened anew; frames that could not be written are counted (``write_failures``, spans) and their
texts stay in the spans table's columns (the callers' fallback).
"""

from __future__ import annotations

import logging
import os
import signal
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from agentwatch_platform.collector.storage import text_index

log = logging.getLogger(__name__)

TEXT_COLUMNS = ("input_text", "output_text")
TEXT_REF = "text_ref"
TEXT_STATE = "text_state"
CAPTURED, NOT_CAPTURED, REMOVED, DAMAGED = "captured", "not_captured", "removed", "damaged"
TEXT_STATES = (CAPTURED, NOT_CAPTURED, REMOVED, DAMAGED)
REMOVED_REF = 1  # day 0 holds no frame (``_append``): a text removed by retention or deletion, its span kept
BLOCK_SCHEMA = pa.schema(
    [("project", pa.string()), ("trace_id", pa.string()), ("span_id", pa.string())]
    + [(name, pa.string()) for name in TEXT_COLUMNS]
)
DAY_NS = 86_400 * 1_000_000_000
_OFFSET_BITS = 40
_MAX_OFFSET = (1 << _OFFSET_BITS) - 1
_MAX_DAY = (1 << (64 - _OFFSET_BITS)) - 1
_FILE_HEADER = b"AWTEXTS1\n"  # no frame starts at offset 0: a ref of 0 is "no frame"
_MAGIC = b"AWT1"
_FRAME = struct.Struct("<4sII")
_MAX_PAYLOAD = 0xFFFFFFFF
_SUFFIX = ".awt"
_EXPIRE_EVERY_S = 3600.0
_SCAN_CHUNK = 1 << 20
FAULT_ENV = "AGENTWATCH_FAULT_KILL_AT"  # crash tests: where the process kills itself


class TextStoreError(Exception):
    """A text could not be written or read; the caller keeps the text in the row or shows none."""


@dataclass(frozen=True)
class TextSearch:
    """What a search of the text files found: ``trace_ids``, and ``unreadable``, one line per day
    file that could not be read whole (not openable, or damaged frames skipped): traces whose text
    is there may be missing from ``trace_ids``. ``span_keys``: the matching spans themselves, each
    trace id and span id concatenated (the span explorer's search)."""

    trace_ids: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    span_keys: list[str] = field(default_factory=list)


def row_state(row: dict[str, Any], ref: int) -> str:
    """The ``text_state`` of a row whose texts are in its own columns (``ref`` 0) or were removed."""
    if ref == REMOVED_REF:
        return REMOVED
    return CAPTURED if row.get("input_text") or row.get("output_text") else NOT_CAPTURED


class TextStore:
    """The day files under ``directory``; safe to use from several threads.

    ``retention_days`` (0: keep everything) matches the spans table's TTL: a day's file goes
    once no span of that day can be stored any more (``expire``, run at most hourly by ``stash``).
    """

    def __init__(self, directory: str | Path, *, retention_days: int = 30, zstd_level: int = 3) -> None:
        self.directory = Path(directory)
        self.retention_days = retention_days
        self._options = pa.ipc.IpcWriteOptions(compression=pa.Codec("zstd", compression_level=zstd_level))
        self._lock = threading.Lock()
        self._files: dict[int, int] = {}  # day -> append descriptor
        self._expired_at = 0.0
        self.write_failures = 0  # spans whose texts could not be written here (kept in the spans table)
        self.reopened = 0  # day files found replaced or removed under an open descriptor
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # the store still opens: texts go into the spans table until this is mended
            log.warning(
                "texts: cannot create %s: %s; captured texts are stored in the spans table", self.directory, exc
            )

    # --- writing -------------------------------------------------------------------------------
    def stash(self, table: pa.Table) -> pa.Table:
        """``table`` with the texts of its spans written here: those spans' text columns emptied
        and their ``text_ref`` set (the column is added, 0 for the rest). Works on columns.

        Raises ``TextStoreError`` (nothing emptied) when the disk refuses; rows already holding
        a ref and rows without text are left as they are.
        """
        refs = _refs_of(table)
        if not table.num_rows:
            return _with_refs(table, refs)
        has_text = np.zeros(table.num_rows, dtype=bool)
        for name in TEXT_COLUMNS:
            has_text |= pc.greater(pc.binary_length(table.column(name)), 0).to_numpy(zero_copy_only=False)
        pending = refs == 0
        captured = has_text & pending
        if not captured.any():
            return _with_refs(table, refs)
        days = table.column("start_time").cast(pa.int64()).to_numpy() // DAY_NS
        texts = table.select(list(BLOCK_SCHEMA.names))
        refs = refs.copy()
        for day in np.unique(days[captured]):
            on_day = days == day
            of_day = pending & on_day  # a frame holds every pending span of its day: no copy in the usual case
            block = texts if of_day.all() else texts.filter(pa.array(of_day))
            try:
                offset = self._append(int(day), _payload(block, self._options))
            except TextStoreError:
                self.write_failures += int(captured.sum())  # the whole table stays as it was
                raise
            refs[captured & on_day] = (int(day) << _OFFSET_BITS) | offset
        kept = (has_text & ~pending).any()  # rows whose texts are stored already keep them (their ref says where)
        empty = None if kept else _empty_strings(table.num_rows)
        for name in TEXT_COLUMNS:
            emptied = pc.if_else(pa.array(~captured), table.column(name), "") if kept else empty
            table = table.set_column(table.schema.get_field_index(name), name, emptied)
        self._expire_hourly()
        return _with_refs(table, refs)

    def _append(self, day: int, payload: pa.Buffer) -> int:
        """Write one frame to ``day``'s file; its offset."""
        if not 0 < day <= _MAX_DAY:
            raise TextStoreError(f"day {day} is outside what a text reference holds (1..{_MAX_DAY})")
        if payload.size > _MAX_PAYLOAD:
            raise TextStoreError(f"a frame of {payload.size} bytes exceeds {_MAX_PAYLOAD}")
        header = _FRAME.pack(_MAGIC, payload.size, zlib.crc32(payload))
        with self._lock:
            try:
                fd = self._descriptor(day)
                offset = os.fstat(fd).st_size
                if offset + _FRAME.size + payload.size > _MAX_OFFSET:
                    raise TextStoreError(f"{self._path(day)} has reached {_MAX_OFFSET} bytes")
                _write_all(fd, [header, memoryview(payload)])
            except OSError as exc:
                raise TextStoreError(f"cannot write {self._path(day)}: {exc}") from exc
        return offset

    def _descriptor(self, day: int) -> int:
        """``day``'s append descriptor, opened anew when the file at its path is no longer the
        one it writes to (removed, or replaced by another file): one ``stat`` per write."""
        path = self._path(day)
        fd = self._files.get(day)
        if fd is not None and not _same_file(fd, path):
            log.warning("texts: %s was removed or replaced while open; writing to it anew", path)
            self.reopened += 1
            del self._files[day]
            os.close(fd)
            fd = None
        if fd is None:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            self._files[day] = fd
        if os.fstat(fd).st_size == 0:  # new, or truncated to nothing: no frame may start at offset 0
            _write_all(fd, [_FILE_HEADER])
        return fd

    # --- reading -------------------------------------------------------------------------------
    def fill(self, rows: list[dict[str, Any]], *, project: str = "", trace_id: str = "") -> None:
        """Put the texts of ``rows`` (query results with ``span_id`` and ``text_ref``; ``project``
        and ``trace_id`` from the row, else the arguments) into their text columns and their
        ``text_state``, in place, and drop ``text_ref``. A text whose frame cannot be read or does
        not hold the row's (project, trace id, span id) is left empty and ``damaged`` (logged): the
        rest of the trace still shows."""
        wanted: dict[int, list[dict[str, Any]]] = {}
        for row in rows:
            ref = int(row.pop(TEXT_REF, 0) or 0)
            if ref > REMOVED_REF:
                wanted.setdefault(ref, []).append(row)
            else:
                row[TEXT_STATE] = row_state(row, ref)
        by_day: dict[int, dict[int, list[dict[str, Any]]]] = {}
        for ref, group in wanted.items():
            by_day.setdefault(ref >> _OFFSET_BITS, {})[ref & _MAX_OFFSET] = group
        for day, frames in by_day.items():  # each day's file opened once
            self._fill_day(day, frames, (project, trace_id))

    def _fill_day(self, day: int, frames: dict[int, list[dict[str, Any]]], default: tuple[str, str]) -> None:
        path = self._path(day)
        try:
            with open(path, "rb", buffering=0) as file:
                fd, size_of_file = file.fileno(), os.fstat(file.fileno()).st_size
                for offset, group in frames.items():
                    try:
                        payload = _read_frame(fd, offset, size_of_file)
                        if payload is None:
                            raise TextStoreError(f"no intact frame at {path}:{offset}")
                        _put_texts(_block(payload), group, default)
                    except TextStoreError as exc:
                        log.warning("texts: %s; %d spans show no captured text", exc, len(group))
                        _mark(group, DAMAGED)
        except OSError as exc:
            gone = isinstance(exc, FileNotFoundError) and self._expired(day)
            if not gone:
                log.warning("texts: cannot read %s: %s; its spans show no captured text", path, exc)
            for group in frames.values():
                _mark(group, REMOVED if gone else DAMAGED)

    def _expired(self, day: int) -> bool:
        """Whether ``day`` is past the retention (its file deleted by ``expire``, not lost)."""
        return self.retention_days > 0 and day < (time.time_ns() - self.retention_days * DAY_NS) // DAY_NS

    def search(self, project: str, start_ns: int, end_ns: int, needle: str, *, limit: int = 10_000) -> TextSearch:
        """Trace ids of ``project`` with a span whose captured text contains ``needle``
        (case-insensitive), among the days that [start_ns, end_ns) touches; at most ``limit``.
        Day files that cannot be opened or hold damaged frames are named in ``unreadable``."""
        found: set[str] = set()
        spans: set[str] = set()
        unreadable: list[str] = []
        first, last = max(start_ns, 0) // DAY_NS, max(end_ns - 1, 0) // DAY_NS
        trigrams = text_index.needle_trigrams(needle)
        for day in range(first, min(last, _MAX_DAY) + 1):
            path = self._path(day)
            if not os.path.lexists(path):
                continue
            damaged = 0
            try:
                for block in self._candidate_frames(day, trigrams):
                    if block is None:
                        damaged += 1
                        continue
                    traces, keys = _matching(block, project, needle)
                    found.update(traces)
                    spans.update(keys)
                    if len(found) >= limit:
                        break
            except OSError as exc:
                log.warning("texts: search cannot read %s: %s", path, exc)
                unreadable.append(f"{path.name}: cannot be read ({exc.strerror or type(exc).__name__})")
                continue
            if damaged:
                unreadable.append(f"{path.name}: {damaged} damaged part(s) skipped")
            if len(found) >= limit:
                break
        return TextSearch(sorted(found)[:limit], unreadable, sorted(spans))

    def _candidate_frames(self, day: int, trigrams: np.ndarray | None) -> Iterator[pa.Table | None]:
        """The frames of ``day``'s file a search must read: every intact one except those whose
        index record (``text_index``, for the frame's offset and CRC) rules the needle out; None for
        each damaged stretch. Frames read without a valid record get one (appended after the scan)."""
        index_path = self._path(day).with_suffix(text_index.INDEX_SUFFIX)
        records = _index_records(index_path)
        fresh: list[bytes] = []
        try:
            ruled_out = None if trigrams is None else (lambda bloom: not text_index.may_hold(bloom, trigrams))
            for position, crc, block in _frames(self._path(day), records, ruled_out):
                if block is not None and records.get(position, (None,))[0] != crc:
                    fresh.append(text_index.index_record(position, crc, _bloom(block)))
                yield block
        finally:
            if fresh:
                self._append_index(index_path, fresh)

    def index(self) -> int:
        """Index the frames of every day file that have no valid index record yet (run by the
        hourly retention pass, so a search seldom pays for it); how many frames were indexed.
        Reads without the store's lock, as a search does."""
        indexed = 0
        for path in sorted(self.directory.glob(f"*{_SUFFIX}")):
            day = _day_of(path)
            if day is None:
                continue
            index_path = path.with_suffix(text_index.INDEX_SUFFIX)
            fresh = []
            try:
                for position, crc, block in _frames(path, _index_records(index_path), lambda _bloom: True):
                    if block is not None:
                        fresh.append(text_index.index_record(position, crc, _bloom(block)))
            except (OSError, pa.ArrowException, ValueError) as exc:  # the frames stay scanned; the pass goes on
                log.warning("texts: cannot index %s: %s", path, exc)
            if fresh:
                self._append_index(index_path, fresh)
                indexed += len(fresh)
        return indexed

    def _append_index(self, path: Path, records: list[bytes]) -> None:
        """Index records appended (a failure is logged: the next search scans those frames again)."""
        with self._lock:
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                try:
                    _write_all(fd, [b"".join(records)])
                finally:
                    os.close(fd)
            except OSError as exc:
                log.warning("texts: cannot write the search index %s: %s", path, exc)

    # --- retention -----------------------------------------------------------------------------
    def expire(self, now_ns: int | None = None) -> list[Path]:
        """Delete the day files whose every span is past the retention; the files deleted."""
        if self.retention_days <= 0:
            return []
        now_ns = time.time_ns() if now_ns is None else now_ns
        oldest_kept = (now_ns - self.retention_days * DAY_NS) // DAY_NS
        gone = []
        with self._lock:
            for path in sorted(self.directory.glob(f"*{_SUFFIX}")):
                day = _day_of(path)
                if day is None or day >= oldest_kept:
                    continue
                if (fd := self._files.pop(day, None)) is not None:
                    os.close(fd)
                try:
                    path.unlink()
                    gone.append(path)
                except OSError as exc:
                    log.warning("texts: cannot delete expired %s: %s", path, exc)
            for index in self.directory.glob(f"*{text_index.INDEX_SUFFIX}"):
                day = _day_of(index)
                if day is not None and day < oldest_kept:
                    index.unlink(missing_ok=True)
        return gone

    # --- deletion ------------------------------------------------------------------------------
    def remove(self, project: str, trace_ids: set[str] | None, days: list[int] | None) -> int:
        """Rewrite the day files (``days``; None: every file) without the texts of ``project``'s traces
        ``trace_ids`` (None: all of the project's); how many span texts went. Idempotent.

        Every frame keeps its offset and length (span rows point at frames by offset,
        ``text_ref``): a frame holding deleted texts is written again without them, its payload
        padded with zeros to its old length. A file is rewritten whole, atomically: the new file is
        written and fsynced, then renamed over the old one; the append descriptor of that day is
        closed first, so the next write opens the new file. Appends wait meanwhile.
        """
        removed = 0
        with self._lock:
            paths = (
                [self._path(day) for day in days] if days is not None else sorted(self.directory.glob(f"*{_SUFFIX}"))
            )
            for path in paths:
                if path.exists():
                    removed += self._rewrite_without(path, project, trace_ids)
        return removed

    def _rewrite_without(self, path: Path, project: str, trace_ids: set[str] | None) -> int:
        data = bytearray(path.read_bytes())
        removed, changed = 0, False
        for position, payload in _intact_frames(bytes(data)):
            block = _block(payload)
            gone = pc.equal(block.column("project"), project)
            if trace_ids is not None:
                gone = pc.and_(
                    gone, pc.is_in(block.column("trace_id"), value_set=pa.array(sorted(trace_ids), pa.string()))
                )
            if pc.any(gone).as_py():
                texts = pc.or_(*(pc.greater(pc.binary_length(block.column(n)), 0) for n in TEXT_COLUMNS))
                count = pc.sum(pc.and_(gone, texts)).as_py() or 0
                kept = _payload(block.filter(pc.invert(gone)), self._options)
                data[position : position + _FRAME.size + len(payload)] = _padded_frame(kept, len(payload))
                removed, changed = removed + count, True
        if changed:
            self._replace(path, bytes(data))
            path.with_suffix(text_index.INDEX_SUFFIX).unlink(missing_ok=True)  # no filter of deleted texts stays
        return removed

    def _replace(self, path: Path, data: bytes) -> None:
        """``data`` as ``path``: written to a new file, fsynced, renamed over it, the directory fsynced."""
        day = _day_of(path)
        if day is not None and (fd := self._files.pop(day, None)) is not None:
            os.close(fd)
        temporary = path.with_name(path.name + ".tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            _write_all(fd, [data])
            os.fsync(fd)
        finally:
            os.close(fd)
        if os.environ.get(FAULT_ENV) == "texts_written":  # the crash tests stop here (never set in production)
            os.kill(os.getpid(), signal.SIGKILL)
        os.replace(temporary, path)
        directory = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)

    def _expire_hourly(self) -> None:
        now = time.monotonic()
        if now - self._expired_at >= _EXPIRE_EVERY_S:
            self._expired_at = now
            self.expire()

    def size_bytes(self) -> int:
        """Bytes of the day files and of their search indexes."""
        files = [*self.directory.glob(f"*{_SUFFIX}"), *self.directory.glob(f"*{text_index.INDEX_SUFFIX}")]
        return sum(path.stat().st_size for path in files)

    def close(self) -> None:
        with self._lock:
            for fd in self._files.values():
                os.close(fd)
            self._files.clear()

    def _path(self, day: int) -> Path:
        return self.directory / f"{datetime.fromtimestamp(day * 86_400, UTC):%Y-%m-%d}{_SUFFIX}"


def _empty_strings(n: int) -> pa.Array:
    """``n`` empty strings, built from one zeroed offsets buffer."""
    return pa.StringArray.from_buffers(n, pa.py_buffer(np.zeros(n + 1, dtype=np.int32)), pa.py_buffer(b""))


def _refs_of(table: pa.Table) -> np.ndarray:
    if TEXT_REF not in table.column_names:
        return np.zeros(table.num_rows, dtype=np.uint64)
    return table.column(TEXT_REF).fill_null(0).to_numpy().astype(np.uint64, copy=False)


def _with_refs(table: pa.Table, refs: np.ndarray) -> pa.Table:
    column = pa.array(refs, type=pa.uint64())
    index = table.schema.get_field_index(TEXT_REF)
    return table.append_column(TEXT_REF, column) if index < 0 else table.set_column(index, TEXT_REF, column)


def _payload(block: pa.Table, options: pa.ipc.IpcWriteOptions) -> pa.Buffer:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, BLOCK_SCHEMA, options=options) as writer:
        writer.write_table(block.cast(BLOCK_SCHEMA))
    return sink.getvalue()


def _block(payload: bytes | pa.Buffer) -> pa.Table:
    try:
        return pa.ipc.open_stream(payload).read_all()
    except pa.ArrowException as exc:
        raise TextStoreError(f"a frame cannot be decoded: {exc}") from exc


def _matching(block: pa.Table, project: str, needle: str) -> tuple[list[str], list[str]]:
    """The trace ids, and the span keys (trace id + span id), of the block's matching spans."""
    matched = pc.equal(block.column("project"), project)
    text = pc.or_(*(pc.match_substring(block.column(n), needle, ignore_case=True) for n in TEXT_COLUMNS))
    hits = block.filter(pc.and_(matched, text))
    traces = hits.column("trace_id")
    return pc.unique(traces).to_pylist(), pc.binary_join_element_wise(traces, hits.column("span_id"), "").to_pylist()


def _mark(rows: list[dict[str, Any]], state: str) -> None:
    for row in rows:
        row["input_text"] = row["output_text"] = ""
        row[TEXT_STATE] = state


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` still names the file open as ``fd``."""
    try:
        at_path = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (at_path.st_dev, at_path.st_ino)


def _frames(
    path: Path, records: dict[int, tuple[int, bytes]], ruled_out: Callable[[bytes], bool] | None
) -> Iterator[tuple[int, int, pa.Table | None]]:
    """(offset, CRC, frame) of every intact frame of a day file but those whose record in ``records``
    (index records by offset: frame CRC and filter) is ``ruled_out``, in order, read one at a time;
    (offset, 0, None) for each torn or damaged stretch, which is skipped (the scan looks for the
    next magic whose frame checks out). A frame ruled out is passed over by its header alone."""
    with open(path, "rb", buffering=0) as file:
        fd, size_of_file = file.fileno(), os.fstat(file.fileno()).st_size
        position = len(_FILE_HEADER) if os.pread(fd, len(_FILE_HEADER), 0) == _FILE_HEADER else 0
        while position + _FRAME.size <= size_of_file:
            known = records.get(position)
            if known is not None and ruled_out is not None:
                magic, size, crc = _FRAME.unpack(os.pread(fd, _FRAME.size, position).ljust(_FRAME.size, b"\0"))
                fits = magic == _MAGIC and position + _FRAME.size + size <= size_of_file
                if fits and known[0] == crc and ruled_out(known[1]):
                    position += _FRAME.size + size
                    continue
            payload = _read_frame(fd, position, size_of_file)
            if payload is None:
                log.warning("texts: damaged frame at %s:%d skipped", path, position)
                yield position, 0, None
                position = _next_magic(fd, position + 1, size_of_file)
                continue
            try:
                block = _block(payload)
            except TextStoreError as exc:
                log.warning("texts: %s:%d skipped: %s", path, position, exc)
                block = None
            yield position, zlib.crc32(payload), block
            position += _FRAME.size + len(payload)


def _index_records(path: Path) -> dict[int, tuple[int, bytes]]:
    """The day's index records (``text_index.read_index``); none when it cannot be read (scanned)."""
    try:
        return text_index.read_index(path.read_bytes())
    except OSError:
        return {}


def _bloom(block: pa.Table) -> bytes:
    return text_index.bloom_of([block.column(name) for name in TEXT_COLUMNS])


def _intact_frames(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(offset, payload) of every intact frame of a day file's bytes, in order."""
    position = len(_FILE_HEADER) if data.startswith(_FILE_HEADER) else 0
    while position + _FRAME.size <= len(data):
        magic, size, crc = _FRAME.unpack_from(data, position)
        end = position + _FRAME.size + size
        if magic == _MAGIC and end <= len(data) and zlib.crc32(data[position + _FRAME.size : end]) == crc:
            yield position, data[position + _FRAME.size : end]
            position = end
        else:
            found = data.find(_MAGIC, position + 1)
            position = found if found >= 0 else len(data)


def _padded_frame(payload: pa.Buffer, size: int) -> bytes:
    """A frame of ``payload`` zero-padded to ``size`` bytes (an Arrow stream ends at its end-of-stream
    marker: the zeros after it are never read), with its CRC."""
    if payload.size > size:
        raise TextStoreError(f"a frame rewritten without deleted texts grew ({payload.size} > {size} bytes)")
    body = payload.to_pybytes() + bytes(size - payload.size)
    return _FRAME.pack(_MAGIC, size, zlib.crc32(body)) + body


def _read_frame(fd: int, offset: int, size_of_file: int) -> bytes | None:
    """The payload of the intact frame at ``offset`` (magic, length within the file, CRC), else None."""
    head = os.pread(fd, _FRAME.size, offset)
    if len(head) < _FRAME.size:
        return None
    magic, size, crc = _FRAME.unpack(head)
    if magic != _MAGIC or offset + _FRAME.size + size > size_of_file:
        return None
    payload = os.pread(fd, size, offset + _FRAME.size)
    return payload if len(payload) == size and zlib.crc32(payload) == crc else None


_KEY = ("project", "trace_id", "span_id")


def _put_texts(block: pa.Table, rows: list[dict[str, Any]], default: tuple[str, str]) -> None:
    """The texts of ``rows`` (query results whose spans are in one frame) from that frame's
    ``block``, matched on the whole key (``default``: project and trace id of rows without
    them): a row the frame does not hold is ``damaged``."""
    ids = pa.array([row["span_id"] for row in rows], type=pa.string())
    found = block.filter(pc.is_in(block.column("span_id"), value_set=ids))
    texts = {
        (project, trace, span): (given, taken)
        for project, trace, span, given, taken in zip(
            *(found.column(n).to_pylist() for n in (*_KEY, *TEXT_COLUMNS)), strict=True
        )
    }
    for row in rows:
        key = (row.get("project", default[0]), row.get("trace_id", default[1]), row["span_id"])
        pair = texts.get(key)
        if pair is None:
            log.warning("texts: the frame of span %s/%s does not hold it", key[1], key[2])
        row["input_text"], row["output_text"] = pair or ("", "")
        row[TEXT_STATE] = DAMAGED if pair is None else CAPTURED


def _next_magic(fd: int, position: int, size_of_file: int) -> int:
    """Where the next frame magic starts at or after ``position`` (the file's size: none)."""
    while position < size_of_file:
        chunk = os.pread(fd, _SCAN_CHUNK + len(_MAGIC) - 1, position)
        found = chunk.find(_MAGIC)
        if found >= 0:
            return position + found
        position += _SCAN_CHUNK
    return size_of_file


def _day_of(path: Path) -> int | None:
    try:
        moment = datetime.strptime(
            path.name.removesuffix(_SUFFIX).removesuffix(text_index.INDEX_SUFFIX), "%Y-%m-%d"
        ).replace(tzinfo=UTC)
    except ValueError:
        return None
    return int(moment.timestamp()) // 86_400


def _write_all(fd: int, parts: list[bytes | memoryview]) -> None:
    """``os.writev`` until every byte is written (a short write continues where it stopped)."""
    views = [memoryview(part) for part in parts]
    while views:
        written = os.writev(fd, views)
        while views and written >= len(views[0]):
            written -= len(views[0])
            views.pop(0)
        if views and written:
            views[0] = views[0][written:]
