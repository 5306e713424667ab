"""Captured prompt and completion text of the embedded store, kept in files of its own, not in chDB.

Why: chDB's insert holds ~4x its batch, and captured text makes a span ~4x larger (~950 B
against ~240); merging text-heavy parts costs as much again. With the text in chDB a 500k-span
burst peaked at ~490 MB of anonymous memory in the collector; with it here, ~255-270 MB
(bench/results/scale.md). The texts are written when a request is decoded
(``collector.ingest.pipeline``), so they never wait in the writer's queue either, and by the
store's insert for any span that still carries its text (``ChdbStore._insert_fresh``).

Layout: per UTC day of the spans' start time (the spans table's partition), deleted whole when
the retention has passed over that day, a write-ahead file ``<directory>/<YYYY-MM-DD>.awt`` and
its sealed blocks ``<YYYY-MM-DD>.awb`` (``collector.storage.text_blocks``). The write-ahead file is
a header and frames; each frame holds the texts of one write, uncompressed::

    b"AWT1" | payload bytes (u32 LE) | CRC-32 of the payload (u32 LE) | payload

where the payload is an Arrow IPC stream of ``BLOCK_SCHEMA``. A span row points at its frame with
``text_ref`` (UInt64): the day (days since 1970) in the high 24 bits, the frame's *offset* in the
low 40: its position in the day's write-ahead stream, which stays the frame's name when it is
sealed. Once the write-ahead file holds ``SEAL_BYTES`` a background thread (``seal``) compresses
its frames together into a block (one zstd stream per column across ~1 MiB of spans, texts of a
narrow vocabulary word-coded first: ``text_blocks``; blocks of 1 to 8 MiB compress alike, and a
small one is quicker to read), taking the frames this process wrote from memory (``_Held``: only
their headers are read back) and reading the others (a restart, a file replaced) from the file,
appends and syncs the block, then cuts the sealed frames off the write-ahead file: the file is
rewritten (synced, renamed over) with a header saying at which offset its first frame starts
(``_HEADER_V2``; a file of the first version, ``_HEADER_V1``, starts at its own position 0). A
crash between the two steps leaves frames in both places, the same bytes; the blocks' ``sealed_to``
says which frames of the write-ahead file are sealed already. Reading a span's text decompresses
its one block (the last few are cached: ``BlockCache``) or reads its one frame.

0 (no frame is at offset 0) means the text, if any, is in the row's own columns: the ClickHouse
back end, a store from before migration 12, or a write that failed. ``REMOVED_REF`` (day 0, never
a frame's) means the text was removed by retention or a deletion while the span stays. The CRC
lets a scan (``search``) skip a frame torn by a crash and find the next one; a span row never
points at a torn frame, because the frame is written before the row is inserted. A frame whose
spans were never inserted (a crash, a retried request, a duplicate) is dead weight until its day
expires. Frames are written without fsync, as chDB writes its parts (a killed process loses
nothing: the kernel holds the bytes); blocks and the cut write-ahead file are synced.

Whose text: a frame holds the texts of many traces (one request, or one insert batch), and span
ids are unique only within a trace (counter-based tracers reuse ``0000000000000001``...). So a
span's text is found in its frame or block by the whole key (project, trace id, span id), checked
on every read together with the CRC: a frame that is not there, is damaged, or does not hold that
key (a file truncated at a frame boundary and appended to, replaced, or copied from elsewhere)
gives the span no text and the state ``damaged``, never another span's text. Each row read gets a
``text_state`` (``TEXT_STATES``). Files of the first version read as they are; no migration.

Search index: beside the day's files, ``<day>.awi`` (``collector.storage.text_index``) holds a
trigram filter per block (keyed by the block's position, with ``_BLOCK_KEY`` set, and its CRC) and
per write-ahead frame (keyed by its offset and CRC), written by the first search that reads it or
by the hourly pass (ingest pays nothing). A later search passes over what a filter rules out; a
block or frame without a valid record is read and matched as before, so the index changes the time
of a search, never its answer. A deletion that rewrites a day's files deletes its index; retention
expires it with the day.

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
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from agentwatch_platform.collector.errors import CollectorError
from agentwatch_platform.collector.storage import text_blocks, text_index
from agentwatch_platform.collector.storage.text_blocks import BLOCK_SUFFIX, SEAL_BYTES, Block, DayBlocks

log = logging.getLogger(__name__)

TEXT_COLUMNS = ("input_text", "output_text")
TEXT_REF = "text_ref"
TEXT_STATE = "text_state"
CAPTURED, NOT_CAPTURED, REMOVED, DAMAGED = "captured", "not_captured", "removed", "damaged"
TEXT_STATES = (CAPTURED, NOT_CAPTURED, REMOVED, DAMAGED)
REMOVED_REF = 1  # day 0 holds no frame (``_append``): a text removed by retention or deletion, its span kept
BLOCK_SCHEMA = pa.schema([(name, pa.string()) for name in text_blocks.COLUMNS])  # keys, then TEXT_COLUMNS
DAY_NS = 86_400 * 1_000_000_000
_OFFSET_BITS = 40
_MAX_OFFSET = (1 << _OFFSET_BITS) - 1
_MAX_DAY = (1 << (64 - _OFFSET_BITS)) - 1
_HEADER_V1 = b"AWTEXTS1\n"  # a file's position is its frames' offset; no frame starts at offset 0
_HEADER_V2 = struct.Struct("<8sQI")  # b"AWTEXTS2", the offset of the frame right after it, CRC-32 of that
_V2_MAGIC = b"AWTEXTS2"
_BLOCK_KEY = 1 << 63  # index records of blocks: the block's position with this bit (frames' offsets lack it)
_HELD_BLOCKS = 8  # blocks' worth of write-ahead frames held in memory for the sealer, at most
SEAL_MIN_BYTES = 64 << 10  # what a stop or the hourly pass seals of today's write-ahead file (older days: all)
_MAGIC = b"AWT1"
_FRAME = struct.Struct("<4sII")
_MAX_PAYLOAD = 0xFFFFFFFF
_SUFFIX = ".awt"
_EXPIRE_EVERY_S = 3600.0
FAULT_ENV = "AGENTWATCH_FAULT_KILL_AT"  # crash tests: where the process kills itself


class TextStoreError(CollectorError):
    """A text could not be written or read; the caller keeps the text in the row or shows none."""


@dataclass(frozen=True)
class TextSearch:
    """What a search of the text files found: ``trace_ids``, and ``unreadable``, one line per day
    file that could not be read whole (not openable, or damaged frames skipped): traces whose text
    is there may be missing from ``trace_ids``. ``span_keys``: the matching spans themselves, each
    trace id and span id concatenated (the span explorer's search). ``complete``: False when the
    search stopped at its limit of traces before the start of the range; what it holds is then the
    newest matches (days newest first, and in a day its newest texts first)."""

    trace_ids: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    span_keys: list[str] = field(default_factory=list)
    complete: bool = True


@dataclass(frozen=True)
class _Held:
    """A frame of the write-ahead file as written: its bytes there (header included), its CRC, and
    the texts it was made of. The sealer takes these instead of reading, checking and decoding the
    frame again (its header is still read, and must state the same length and CRC)."""

    size: int
    crc: int
    table: pa.Table

    @property
    def head(self) -> tuple[int, int]:
        return (self.size, self.crc)


def row_state(row: dict[str, Any], ref: int) -> str:
    """The ``text_state`` of a row whose texts are in its own columns (``ref`` 0) or were removed."""
    if ref == REMOVED_REF:
        return REMOVED
    return CAPTURED if row.get("input_text") or row.get("output_text") else NOT_CAPTURED


class TextStore:
    """The day files under ``directory``; safe to use from several threads.

    ``retention_days`` (0: keep everything) matches the spans table's TTL: a day's file goes
    once no span of that day can be stored any more (``expire``, run at most hourly by ``stash``).
    ``seal_bytes``: the write-ahead bytes of a day that the background sealer compresses into a
    block (``text_blocks``), unless ``background_seal`` is off (then only ``seal`` calls seal);
    ``zstd_level``: the blocks' compression.
    """

    def __init__(
        self,
        directory: str | Path,
        *,
        retention_days: int = 30,
        zstd_level: int = 3,
        seal_bytes: int = SEAL_BYTES,
        background_seal: bool = True,
    ) -> None:
        self.directory = Path(directory)
        self.retention_days = retention_days
        self.seal_bytes = seal_bytes
        self.background_seal = background_seal
        self._options = pa.ipc.IpcWriteOptions(compression=None)  # frames: compressed once, in their block
        self._coder = text_blocks.Coder(pa.Codec("zstd", compression_level=zstd_level))
        self._lock = threading.Lock()  # appends, and the cut of a sealed write-ahead file
        self._seal_lock = threading.Lock()  # one sealer, deletion or expiry at a time
        self._files: dict[int, tuple[int, int]] = {}  # day -> (append descriptor, offset minus position)
        self._day_blocks: dict[int, tuple[tuple[int, int, int], DayBlocks]] = {}
        self._held: dict[int, dict[int, _Held]] = {}  # day -> frame offset -> the frame as written, until sealed
        self._held_bytes = 0
        self._cache = text_blocks.BlockCache()
        self._sealer = _Sealer(self)
        self._expired_at = 0.0
        self.write_failures = 0  # spans whose texts could not be written here (kept in the spans table)
        self.reopened = 0  # day files found replaced or removed under an open descriptor
        self.seal_failures = 0  # seals that failed (logged; the frames stay in the write-ahead file)
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
                offset = self._append(int(day), _payload(block, self._options), block)
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

    def _append(self, day: int, payload: pa.Buffer, table: pa.Table | None = None) -> int:
        """Write one frame to ``day``'s write-ahead file; its offset. Wakes the sealer when the
        file holds a block's worth. ``table``, the texts the frame was made of, is held for the
        sealer (``_Held``), which then reads only the frame's header back."""
        if not 0 < day <= _MAX_DAY:
            raise TextStoreError(f"day {day} is outside what a text reference holds (1..{_MAX_DAY})")
        if payload.size > _MAX_PAYLOAD:
            raise TextStoreError(f"a frame of {payload.size} bytes exceeds {_MAX_PAYLOAD}")
        crc = zlib.crc32(payload)
        header = _FRAME.pack(_MAGIC, payload.size, crc)
        with self._lock:
            try:
                fd, delta = self._descriptor(day)
                position = os.fstat(fd).st_size
                if position + delta + _FRAME.size + payload.size > _MAX_OFFSET:
                    raise TextStoreError(f"{self._path(day)} has reached {_MAX_OFFSET} bytes")
                self._hold(day, position + delta, None)  # whatever was held there is no longer the frame
                _write_all(fd, [header, memoryview(payload)])
            except OSError as exc:
                raise TextStoreError(f"cannot write {self._path(day)}: {exc}") from exc
            if table is not None:
                self._hold(day, position + delta, _Held(_FRAME.size + payload.size, crc, table))
        if self.background_seal and position + _FRAME.size + payload.size >= self.seal_bytes:
            self._sealer.wake()
        return position + delta

    def _hold(self, day: int, offset: int, frame: _Held | None) -> None:
        """Hold ``frame`` (None: nothing) as the one at ``offset``, within ``_HELD_BLOCKS`` blocks'
        worth (a sealer that falls behind reads the rest back from the file). Under the lock."""
        frames = self._held.setdefault(day, {})
        gone = frames.pop(offset, None)
        self._held_bytes -= gone.size if gone is not None else 0
        if frame is not None and self._held_bytes + frame.size <= _HELD_BLOCKS * self.seal_bytes:
            frames[offset] = frame
            self._held_bytes += frame.size

    def _forget(self, day: int, below: int | None = None) -> None:
        """Drop the frames held for ``day`` (offsets ``below``, sealed; None: all, the file was
        replaced or rewritten). Under the lock."""
        frames = self._held.get(day, {})
        for offset in [o for o in frames if below is None or o < below]:
            self._held_bytes -= frames.pop(offset).size

    def _descriptor(self, day: int) -> tuple[int, int]:
        """``day``'s append descriptor and its offset minus position, opened anew when the file at
        its path is no longer the one it writes to (removed, or replaced by another file): one
        ``stat`` per write. A new file starts where the day's blocks end."""
        path = self._path(day)
        held = self._files.get(day)
        if held is not None and not _same_file(held[0], path):
            log.warning("texts: %s was removed or replaced while open; writing to it anew", path)
            self.reopened += 1
            del self._files[day]
            os.close(held[0])
            self._forget(day)
            held = None
        if held is None:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
            held = self._files[day] = (fd, _wal_header(fd)[1])
        if os.fstat(held[0]).st_size == 0:  # new, or truncated to nothing: no frame may start at offset 0
            start = max(_HEADER_V2.size, self._blocks(day).sealed_to)
            _write_all(held[0], [_v2_header(start)])
            held = self._files[day] = (held[0], start - _HEADER_V2.size)
        return held

    # --- reading -------------------------------------------------------------------------------
    def fill(self, rows: list[dict[str, Any]], *, project: str = "", trace_id: str = "") -> None:
        """Put the texts of ``rows`` (query results with ``span_id`` and ``text_ref``; ``project``
        and ``trace_id`` from the row, else the arguments) into their text columns and their
        ``text_state``, in place, and drop ``text_ref``. A text whose frame or block cannot be read
        or does not hold the row's (project, trace id, span id) is left empty and ``damaged``
        (logged): the rest of the trace still shows."""
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
        for day, frames in by_day.items():  # each day's files opened once
            self._fill_day(day, frames, (project, trace_id))

    def _fill_day(self, day: int, frames: dict[int, list[dict[str, Any]]], default: tuple[str, str]) -> None:
        """The write-ahead file is opened before the blocks are read: a seal that cuts it in
        between has written its block first, so every frame is in one or the other."""
        path = self._path(day)
        try:
            with _opened(path) as wal, _opened(self._blocks_path(day)) as sealed:
                if wal is None and sealed is None:
                    raise FileNotFoundError(2, "no such file", str(path))
                blocks = self._blocks(day, sealed) if sealed is not None else DayBlocks()
                for offset, group in frames.items():
                    try:
                        _put_texts(self._frame_texts(day, offset, wal, sealed, blocks), group, default)
                    except TextStoreError as exc:
                        log.warning("texts: %s; %d spans show no captured text", exc, len(group))
                        _mark(group, DAMAGED)
        except OSError as exc:
            gone = isinstance(exc, FileNotFoundError) and self._expired(day)
            if not gone:
                log.warning("texts: cannot read %s: %s; its spans show no captured text", path, exc)
            for group in frames.values():
                _mark(group, REMOVED if gone else DAMAGED)

    def _frame_texts(self, day: int, offset: int, wal: int | None, sealed: int | None, blocks: DayBlocks) -> pa.Table:
        """The texts of the frame at ``offset``: from its block, else from the write-ahead file."""
        found = blocks.frames.get(offset)
        if found is not None and sealed is not None:
            block, start, count = found
            return self._block_table(day, sealed, block).slice(start, count)
        if wal is not None:
            header, delta = _wal_header(wal)
            position = offset - delta
            payload = _read_frame(wal, position, os.fstat(wal).st_size) if position >= header else None
            if payload is not None:
                return _block(payload)
        raise TextStoreError(f"no intact frame at {self._path(day)}:{offset}")

    def _block_table(self, day: int, fd: int, block: Block) -> pa.Table:
        key = (day, os.fstat(fd).st_ino, block.position, block.data_crc)
        table = self._cache.get(key)
        if table is None:
            try:
                table = text_blocks.read_block(fd, block)
            except text_blocks.BlockError as exc:
                raise TextStoreError(f"{self._blocks_path(day)}: {exc}") from exc
            self._cache.put(key, table)
        return table

    def _blocks(self, day: int, fd: int | None = None) -> DayBlocks:
        """The day's blocks (from its blocks file open as ``fd``, else by path), read again only
        when the file changed (its inode, size or time)."""
        if fd is None:
            with _opened(self._blocks_path(day)) as opened:
                return DayBlocks() if opened is None else self._blocks(day, opened)
        stat = os.fstat(fd)
        key = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
        cached = self._day_blocks.get(day)
        if cached is not None and cached[0] == key:
            return cached[1]
        blocks = text_blocks.read_fd(fd, stat.st_size)
        self._day_blocks[day] = (key, blocks)
        return blocks

    def _expired(self, day: int) -> bool:
        """Whether ``day`` is past the retention (its file deleted by ``expire``, not lost)."""
        return self.retention_days > 0 and day < (time.time_ns() - self.retention_days * DAY_NS) // DAY_NS

    def search(self, project: str, start_ns: int, end_ns: int, needle: str, *, limit: int = 10_000) -> TextSearch:
        """Trace ids of ``project`` with a span whose captured text contains ``needle``
        (case-insensitive), among the days that [start_ns, end_ns) touches; at most ``limit``, the
        newest first: days from the last, and in a day its write-ahead frames, then its blocks, each
        from the last written. So a word in every run costs what its first ``limit`` hits cost, not the
        retention (``complete`` says whether the search reached the range's start). Day files that
        cannot be opened or hold damaged frames are named in ``unreadable``."""
        found: dict[str, None] = {}  # insertion-ordered: newest first
        spans: dict[str, None] = {}
        unreadable: list[str] = []
        first, last = max(start_ns, 0) // DAY_NS, max(end_ns - 1, 0) // DAY_NS
        trigrams = text_index.needle_trigrams(needle)
        test = None if trigrams is None else text_index.NeedleTest(trigrams)
        ruled_out = None if test is None else (lambda bloom: not test.may_hold(bloom))
        for day in range(min(last, _MAX_DAY), first - 1, -1):
            path = self._path(day)
            if not os.path.lexists(path) and not os.path.lexists(self._blocks_path(day)):
                continue
            damaged = 0
            try:
                for block in self._indexed_scan(day, ruled_out):
                    if block is None:
                        damaged += 1
                        continue
                    traces, keys = _matching(block, project, needle)
                    found.update(dict.fromkeys(traces))
                    spans.update(dict.fromkeys(keys))
                    if len(found) >= limit:
                        break
            except OSError as exc:
                log.warning("texts: search cannot read %s: %s", path, exc)
                unreadable.append(f"{path.name}: cannot be read ({exc.strerror or type(exc).__name__})")
                continue
            if damaged:
                unreadable.append(f"{path.name}: {damaged} damaged part(s) skipped")
            if len(found) >= limit:  # stopped in this day: what is older was not searched
                return TextSearch(list(found)[:limit], unreadable, list(spans), complete=False)
        return TextSearch(list(found), unreadable, list(spans))

    def _indexed_scan(self, day: int, ruled_out: Callable[[bytes], bool] | None) -> Iterator[pa.Table | None]:
        """``_scan`` of ``day`` with its index; the records it lacked are appended after the scan."""
        index_path = self._path(day).with_suffix(text_index.INDEX_SUFFIX)
        fresh: list[bytes] = []
        try:
            yield from self._scan(day, _index_records(index_path), ruled_out, fresh)
        finally:
            if fresh:
                self._append_index(index_path, fresh)

    def _scan(
        self, day: int, records: dict[int, tuple[int, bytes]], ruled_out: Callable[[bytes], bool] | None, fresh: list
    ) -> Iterator[pa.Table | None]:
        """The write-ahead frames not sealed yet, then the blocks, of ``day``, each from the last
        written (its newest texts first), that a search must read: all but those whose index record
        (for the block's position or frame's offset, and its CRC) is ``ruled_out``; None for each
        damaged stretch. Those read without a valid record get one in ``fresh``."""
        with _opened(self._blocks_path(day)) as sealed:
            blocks = None if sealed is None else self._blocks(day, sealed)
            if os.path.lexists(self._path(day)):  # the unsealed tail (about a block's worth), read whole
                frames = list(_frames(self._path(day), records, ruled_out, blocks.sealed_to if blocks else 0))
                for offset, crc, table in reversed(frames):
                    if table is not None and records.get(offset, (None,))[0] != crc:
                        fresh.append(text_index.index_record(offset, crc, _bloom(table)))
                    yield table
            if sealed is None or blocks is None:
                return
            yield from [None] * blocks.damaged
            for block in reversed(blocks.blocks):
                known = records.get(_BLOCK_KEY | block.position)
                indexed = known is not None and known[0] == block.data_crc
                if indexed and ruled_out is not None and ruled_out(known[1]):  # type: ignore[index]
                    continue
                try:
                    table = text_blocks.read_block(sealed, block)
                except text_blocks.BlockError as exc:
                    log.warning("texts: %s: %s; skipped", self._blocks_path(day), exc)
                    yield None
                    continue
                if not indexed:
                    fresh.append(text_index.index_record(_BLOCK_KEY | block.position, block.data_crc, _bloom(table)))
                yield table

    def index(self) -> int:
        """Index the blocks and frames of every day that have no valid index record yet (run by the
        hourly pass, so a search seldom pays for it); how many were indexed. Reads without the
        store's lock, as a search does."""
        indexed = 0
        for day in self._days():
            index_path = self._path(day).with_suffix(text_index.INDEX_SUFFIX)
            fresh: list[bytes] = []
            try:
                for _ in self._scan(day, _index_records(index_path), lambda _bloom: True, fresh):
                    pass
            except (OSError, pa.ArrowException, ValueError) as exc:  # the rest stays scanned; the pass goes on
                log.warning("texts: cannot index %s: %s", self._path(day), exc)
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

    # --- sealing -------------------------------------------------------------------------------
    def seal(self, minimum_bytes: int | None = None, *, settled_before: int | None = None) -> int:
        """Compress the frames of every write-ahead file holding at least ``minimum_bytes`` of them
        (default ``seal_bytes``; every frame of the days before ``settled_before``) into blocks,
        and cut them off the file; how many blocks were written. Run by the background sealer, at
        ``close`` and by the hourly pass (``seal_settled``). A failure is logged and counted: the
        frames stay where they are, readable, and the next seal tries again."""
        minimum = self.seal_bytes if minimum_bytes is None else minimum_bytes
        written = 0
        with self._seal_lock:
            for path in sorted(self.directory.glob(f"*{_SUFFIX}")):
                day = _day_of(path)
                if day is None:
                    continue
                try:
                    written += self._seal_day(
                        day, 1 if settled_before is not None and day < settled_before else minimum
                    )
                except (OSError, TextStoreError, pa.ArrowException) as exc:
                    self.seal_failures += 1
                    log.warning("texts: cannot seal %s: %s; its frames stay in it", path, exc)
        return written

    def seal_settled(self, now_ns: int | None = None) -> int:
        """What the hourly pass seals: the days before yesterday whole, newer ones from
        ``SEAL_MIN_BYTES`` (a quiet collector's texts do not stay uncompressed)."""
        today = (time.time_ns() if now_ns is None else now_ns) // DAY_NS
        return self.seal(SEAL_MIN_BYTES, settled_before=today - 1)

    def _seal_day(self, day: int, minimum: int) -> int:
        path = self._path(day)
        blocks = self._blocks(day)
        with self._lock:  # the end is taken between two appends
            try:
                wal = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                return 0
            end = os.fstat(wal).st_size
            held = dict(self._held.get(day, {}))
        try:
            header, delta = _wal_header(wal)
            if end - header < max(1, minimum):
                return 0
            written = 0
            if end + delta > blocks.sealed_to:  # else sealed already, by a seal killed before its cut
                frames = _sealable(wal, header, end, delta, blocks.sealed_to, held)
                written = self._write_blocks(day, blocks, frames, end + delta)
            if os.environ.get(FAULT_ENV) == "texts_sealed":  # the crash tests stop here (never set in production)
                os.kill(os.getpid(), signal.SIGKILL)
            self._cut(day, wal, end, end + delta)
            with self._lock:
                self._forget(day, below=end + delta)
        finally:
            os.close(wal)
        return written

    def _write_blocks(self, day: int, blocks: DayBlocks, frames: Iterator[tuple[int, pa.Table]], sealed_to: int) -> int:
        """Append ``frames`` to the day's blocks file, ~``seal_bytes`` per block, and sync it; a
        torn record a crash left at its end is cut first. The last block says ``sealed_to``."""
        fd = os.open(self._blocks_path(day), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            if os.fstat(fd).st_size > blocks.valid_end:
                os.ftruncate(fd, blocks.valid_end)
            written, size = 0, 0
            pending: list[tuple[int, pa.Table]] = []
            for offset, table in frames:
                pending.append((offset, table))
                size += table.nbytes
                if size >= self.seal_bytes:
                    _write_all(fd, [self._record(pending, offset + 1)])
                    written, pending, size = written + 1, [], 0
            if pending or not written or sealed_to > offset + 1:  # the last says where the sealed frames end
                _write_all(fd, [self._record(pending, sealed_to)])
                written += 1
            os.fsync(fd)
        finally:
            os.close(fd)
        return written

    def _record(self, frames: list[tuple[int, pa.Table]], sealed_to: int) -> bytes:
        """One block record of ``frames`` ((offset, texts) each), without their spans that
        captured no text."""
        tables = [table.select(BLOCK_SCHEMA.names).cast(BLOCK_SCHEMA) for _, table in frames]
        table = pa.concat_tables(tables) if tables else BLOCK_SCHEMA.empty_table()
        kept = _has_text(table).to_numpy(zero_copy_only=False) if table.num_rows else np.zeros(0, dtype=bool)
        before = np.concatenate([[0], np.cumsum(kept)])
        ends = np.cumsum([t.num_rows for t in tables], dtype=np.int64)
        entries = np.zeros(len(frames), dtype=text_blocks.ENTRY)
        entries["offset"] = [offset for offset, _ in frames]
        entries["start"] = before[ends - [t.num_rows for t in tables]] if tables else []
        entries["count"] = before[ends] - entries["start"] if tables else []
        table = table.combine_chunks() if kept.all() else table.filter(pa.array(kept)).combine_chunks()
        return text_blocks.encode(table, entries, sealed_to, self._coder)

    def _cut(self, day: int, wal: int, end: int, start: int) -> None:
        """The write-ahead file without its first ``end`` bytes (sealed): the frames appended
        since, after a header that says they start at offset ``start``. The new file is written and
        synced without the append lock; under it only the frames appended meanwhile are copied
        (unsynced, as every frame is) and the file renamed over, so appends wait for no fsync. A
        file replaced or removed meanwhile is left as it is (its frames below the blocks'
        ``sealed_to`` are passed over)."""
        path = self._path(day)
        temporary = path.with_name(path.name + ".tmp")
        size = os.fstat(wal).st_size
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            _write_all(fd, [_v2_header(start), os.pread(wal, size - end, end) if size > end else b""])
            os.fsync(fd)
            with self._lock:
                if not _same_file(wal, path):
                    os.unlink(temporary)
                    return
                grown = os.fstat(wal).st_size
                if grown > size:
                    _write_all(fd, [os.pread(wal, grown - size, size)])
                if (held := self._files.pop(day, None)) is not None:
                    os.close(held[0])
                os.replace(temporary, path)
        finally:
            os.close(fd)
        _sync_directory(self.directory)

    # --- retention -----------------------------------------------------------------------------
    def expire(self, now_ns: int | None = None) -> list[Path]:
        """Delete the day files whose every span is past the retention; the files deleted."""
        if self.retention_days <= 0:
            return []
        now_ns = time.time_ns() if now_ns is None else now_ns
        oldest_kept = (now_ns - self.retention_days * DAY_NS) // DAY_NS
        gone = []
        with self._seal_lock, self._lock:
            for path in sorted([*self.directory.glob(f"*{_SUFFIX}"), *self.directory.glob(f"*{BLOCK_SUFFIX}")]):
                day = _day_of(path)
                if day is None or day >= oldest_kept:
                    continue
                if path.suffix == _SUFFIX and (held := self._files.pop(day, None)) is not None:
                    os.close(held[0])
                self._forget(day)
                try:
                    path.unlink()
                    gone.append(path)
                except OSError as exc:
                    log.warning("texts: cannot delete expired %s: %s", path, exc)
            for index in self.directory.glob(f"*{text_index.INDEX_SUFFIX}"):
                day = _day_of(index)
                if day is not None and day < oldest_kept:
                    index.unlink(missing_ok=True)
        if gone:
            self._cache.clear()
        return gone

    # --- deletion ------------------------------------------------------------------------------
    def remove(self, project: str, trace_ids: set[str] | None, days: list[int] | None) -> int:
        """Rewrite the day files (``days``; None: every day) without the texts of ``project``'s traces
        ``trace_ids`` (None: all of the project's); how many span texts went. Idempotent.

        Every frame keeps its offset and length (span rows point at frames by offset,
        ``text_ref``): a frame holding deleted texts is written again without them, its payload
        padded with zeros to its old length. A block holding deleted texts is compressed again
        without them (the blocks' index names frames by offset, so the blocks may move). A file is
        rewritten whole, atomically: the new file is written and fsynced, then renamed over the old
        one; the append descriptor of that day is closed first, so the next write opens the new
        file. Appends and seals wait meanwhile.
        """
        removed = 0
        with self._seal_lock, self._lock:
            for day in self._days() if days is None else days:
                if self._path(day).exists():
                    removed += self._rewrite_without(self._path(day), project, trace_ids)
                if self._blocks_path(day).exists():
                    removed += self._rewrite_blocks_without(day, project, trace_ids)
            self._cache.clear()
        return removed

    def _rewrite_without(self, path: Path, project: str, trace_ids: set[str] | None) -> int:
        data = bytearray(path.read_bytes())
        removed, changed = 0, False
        for position, payload in _intact_frames(bytes(data)):
            block = _block(payload)
            gone = _deleted(block, project, trace_ids)
            if pc.any(gone).as_py():
                kept = _payload(block.filter(pc.invert(gone)), self._options)
                data[position : position + _FRAME.size + len(payload)] = _padded_frame(kept, len(payload))
                removed, changed = removed + _with_text(block, gone), True
        if changed:
            self._replace(path, bytes(data))
            path.with_suffix(text_index.INDEX_SUFFIX).unlink(missing_ok=True)  # no filter of deleted texts stays
        return removed

    def _rewrite_blocks_without(self, day: int, project: str, trace_ids: set[str] | None) -> int:
        """The day's blocks file without the deleted texts (damaged blocks, which no read can show,
        are dropped too: they might hold them)."""
        path = self._blocks_path(day)
        removed, changed, records = 0, False, []
        with open(path, "rb", buffering=0) as file:
            fd = file.fileno()
            blocks = text_blocks.read_fd(fd, os.fstat(fd).st_size)
            changed = os.fstat(fd).st_size != blocks.valid_end or bool(blocks.damaged)
            for block in blocks.blocks:
                try:
                    table = text_blocks.read_block(fd, block)
                except text_blocks.BlockError as exc:
                    log.warning("texts: %s: %s; dropped by the deletion", path, exc)
                    records.append(self._record([], block.sealed_to))
                    changed = True
                    continue
                gone = _deleted(table, project, trace_ids)
                if not pc.any(gone).as_py():
                    records.append(text_blocks.raw_record(fd, block))
                    continue
                removed, changed = removed + _with_text(table, gone), True
                records.append(self._record(_refiltered(table, block.entries, gone), block.sealed_to))
        if changed:
            self._replace(path, b"".join(records))
            self._path(day).with_suffix(text_index.INDEX_SUFFIX).unlink(missing_ok=True)
        return removed

    def _replace(self, path: Path, data: bytes, *, fault: bool = True) -> None:
        """``data`` as ``path``: written to a new file, fsynced, renamed over it, the directory fsynced."""
        day = _day_of(path)
        if path.suffix == _SUFFIX and day is not None and (held := self._files.pop(day, None)) is not None:
            os.close(held[0])
        if path.suffix == _SUFFIX and day is not None:
            self._forget(day)
        temporary = path.with_name(path.name + ".tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            _write_all(fd, [data])
            os.fsync(fd)
        finally:
            os.close(fd)
        if fault and os.environ.get(FAULT_ENV) == "texts_written":  # the crash tests stop here (never in production)
            os.kill(os.getpid(), signal.SIGKILL)
        os.replace(temporary, path)
        _sync_directory(self.directory)

    def _expire_hourly(self) -> None:
        now = time.monotonic()
        if now - self._expired_at >= _EXPIRE_EVERY_S:
            self._expired_at = now
            self.expire()

    def size_bytes(self) -> int:
        """Bytes of the day files, their blocks and their search indexes."""
        suffixes = (_SUFFIX, BLOCK_SUFFIX, text_index.INDEX_SUFFIX)
        return sum(path.stat().st_size for suffix in suffixes for path in self.directory.glob(f"*{suffix}"))

    def close(self) -> None:
        """Stops the sealer and seals what a stop would otherwise leave uncompressed (from
        ``SEAL_MIN_BYTES`` a day); then closes the files."""
        self._sealer.stop()
        self.seal(SEAL_MIN_BYTES)
        with self._lock:
            for fd, _ in self._files.values():
                os.close(fd)
            self._files.clear()

    def _days(self) -> list[int]:
        """The days with a write-ahead or a blocks file, in order."""
        paths = [*self.directory.glob(f"*{_SUFFIX}"), *self.directory.glob(f"*{BLOCK_SUFFIX}")]
        return sorted({day for path in paths if (day := _day_of(path)) is not None})

    def _path(self, day: int) -> Path:
        return self.directory / f"{datetime.fromtimestamp(day * 86_400, UTC):%Y-%m-%d}{_SUFFIX}"

    def _blocks_path(self, day: int) -> Path:
        return self._path(day).with_suffix(BLOCK_SUFFIX)


class _Sealer:
    """The background thread that seals full write-ahead files (``TextStore.seal``), so that no
    request waits on the compression: woken by an append that fills one, started by the first
    wake, stopped by ``TextStore.close`` (and started again by a later wake)."""

    def __init__(self, store: TextStore) -> None:
        self._store = store
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def wake(self) -> None:
        with self._lock:
            if self._thread is None:
                self._stop = threading.Event()  # each thread its own: a stopped one never runs on
                self._thread = threading.Thread(
                    target=self._run, args=(self._stop,), name="agentwatch-text-sealer", daemon=True
                )
                self._thread.start()
            self._wake.set()

    def _run(self, stop: threading.Event) -> None:
        while True:
            self._wake.wait()
            if stop.is_set():
                return
            self._wake.clear()
            try:
                self._store.seal()
            except Exception:  # our bug: logged and counted, and the thread lives on for the next wake
                self._store.seal_failures += 1
                log.exception("texts: the sealer failed")

    def stop(self, timeout_s: float = 60.0) -> None:
        with self._lock:
            thread, self._thread = self._thread, None
            self._stop.set()
            self._wake.set()
        if thread is not None:
            thread.join(timeout_s)


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
    path: Path, records: dict[int, tuple[int, bytes]], ruled_out: Callable[[bytes], bool] | None, sealed_to: int = 0
) -> Iterator[tuple[int, int, pa.Table | None]]:
    """(offset, CRC, frame) of every intact frame of a write-ahead file from offset ``sealed_to``
    on but those whose record in ``records`` (index records by offset: frame CRC and filter) is
    ``ruled_out``, in order, read one at a time; (offset, 0, None) for each torn or damaged stretch,
    which is skipped (the scan looks for the next magic whose frame checks out). A frame ruled out,
    or sealed already (a crash before the file was cut), is passed over by its header alone."""
    with open(path, "rb", buffering=0) as file:
        fd, size_of_file = file.fileno(), os.fstat(file.fileno()).st_size
        position, delta = _wal_header(fd)
        while position + _FRAME.size <= size_of_file:
            known = records.get(position + delta)
            if position + delta < sealed_to or (known is not None and ruled_out is not None):
                magic, size, crc = _FRAME.unpack(os.pread(fd, _FRAME.size, position).ljust(_FRAME.size, b"\0"))
                fits = magic == _MAGIC and position + _FRAME.size + size <= size_of_file
                sealed = position + delta < sealed_to
                if fits and (sealed or (known is not None and known[0] == crc and ruled_out(known[1]))):  # type: ignore[misc]
                    position += _FRAME.size + size
                    continue
            payload = _read_frame(fd, position, size_of_file)
            if payload is None:
                log.warning("texts: damaged frame at %s:%d skipped", path, position)
                yield position + delta, 0, None
                position = text_blocks.next_magic(fd, position + 1, size_of_file, _MAGIC)
                continue
            try:
                block = _block(payload)
            except TextStoreError as exc:
                log.warning("texts: %s:%d skipped: %s", path, position, exc)
                block = None
            yield position + delta, zlib.crc32(payload), block
            position += _FRAME.size + len(payload)


def _index_records(path: Path) -> dict[int, tuple[int, bytes]]:
    """The day's index records (``text_index.read_index``); none when it cannot be read (scanned)."""
    try:
        return text_index.read_index(path.read_bytes())
    except OSError:
        return {}


@contextmanager
def _opened(path: Path) -> Iterator[int | None]:
    """A read descriptor of ``path``, or None when there is no such file."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        yield None
        return
    try:
        yield fd
    finally:
        os.close(fd)


def _wal_header(fd: int) -> tuple[int, int]:
    """(header bytes, frame offset minus file position) of a write-ahead file."""
    return _header_of(os.pread(fd, _HEADER_V2.size, 0))


def _header_of(head: bytes) -> tuple[int, int]:
    if head.startswith(_HEADER_V1):
        return len(_HEADER_V1), 0
    if len(head) == _HEADER_V2.size:
        magic, start, crc = _HEADER_V2.unpack(head)
        if magic == _V2_MAGIC and crc == zlib.crc32(start.to_bytes(8, "little")):
            return _HEADER_V2.size, start - _HEADER_V2.size
    return 0, 0  # no header (a file truncated or replaced): positions are offsets


def _v2_header(start: int) -> bytes:
    return _HEADER_V2.pack(_V2_MAGIC, start, zlib.crc32(start.to_bytes(8, "little")))


def _sealable(
    wal: int, header: int, end: int, delta: int, sealed_to: int, held: dict[int, _Held]
) -> Iterator[tuple[int, pa.Table]]:
    """(offset, texts) of the intact frames of a write-ahead file before position ``end`` and from
    offset ``sealed_to`` on: a frame ``held`` (the table it was written from) whose header in the
    file says the same length and CRC is taken from memory, any other read back and checked."""
    position = header
    while position + _FRAME.size <= end:
        known = held.get(position + delta)
        if known is not None and position + known.size <= end and _frame_head(wal, position) == known.head:
            if position + delta >= sealed_to:
                yield position + delta, known.table
            position += known.size
            continue
        payload = _read_frame(wal, position, end)
        if payload is None:
            position = text_blocks.next_magic(wal, position + 1, end, _MAGIC)
            continue
        if position + delta >= sealed_to:
            try:
                table = _block(payload).cast(BLOCK_SCHEMA)
            except (TextStoreError, pa.ArrowException) as exc:
                log.warning("texts: the frame at offset %d cannot be sealed (left out): %s", position + delta, exc)
            else:
                yield position + delta, table
        position += _FRAME.size + len(payload)


def _frame_head(fd: int, position: int) -> tuple[int, int] | None:
    """(length, CRC) that the frame header at ``position`` states, None when there is none."""
    magic, size, crc = _FRAME.unpack(os.pread(fd, _FRAME.size, position).ljust(_FRAME.size, b"\0"))
    return (_FRAME.size + size, crc) if magic == _MAGIC else None


def _has_text(table: pa.Table) -> pa.ChunkedArray:
    return pc.or_(*(pc.greater(pc.binary_length(table.column(n)), 0) for n in TEXT_COLUMNS))


def _deleted(table: pa.Table, project: str, trace_ids: set[str] | None) -> pa.ChunkedArray:
    """Which rows of ``table`` a deletion takes."""
    gone = pc.equal(table.column("project"), project)
    if trace_ids is not None:
        ids = pa.array(sorted(trace_ids), pa.string())
        gone = pc.and_(gone, pc.is_in(table.column("trace_id"), value_set=ids))
    return pc.fill_null(gone, False)


def _with_text(table: pa.Table, gone: pa.ChunkedArray) -> int:
    """How many of the rows ``gone`` captured text."""
    return int(pc.sum(pc.and_(gone, _has_text(table))).as_py() or 0)


def _refiltered(table: pa.Table, entries: np.ndarray, gone: pa.ChunkedArray) -> list[tuple[int, pa.Table]]:
    """The frames of a block ((offset, texts) each) without the rows ``gone``."""
    kept = table.filter(pc.invert(gone))
    counts = np.concatenate([[0], np.cumsum(~np.asarray(gone.to_numpy(zero_copy_only=False), dtype=bool))])
    return [
        (int(offset), kept.slice(int(counts[start]), int(counts[start + count] - counts[start])))
        for offset, start, count in entries.tolist()
    ]


def _bloom(block: pa.Table) -> bytes:
    return text_index.bloom_of([block.column(name) for name in TEXT_COLUMNS])


def _intact_frames(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(offset, payload) of every intact frame of a day file's bytes, in order."""
    position = _header_of(data[: _HEADER_V2.size])[0]
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


def _day_of(path: Path) -> int | None:
    name = path.name.removesuffix(_SUFFIX).removesuffix(text_index.INDEX_SUFFIX).removesuffix(BLOCK_SUFFIX)
    try:
        moment = datetime.strptime(name, "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError:
        return None
    return int(moment.timestamp()) // 86_400


def _sync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
