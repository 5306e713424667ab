"""Sealed blocks of captured text: the texts of many write-ahead frames of a day
(``collector.storage.texts``) compressed together, so that zstd sees across spans.

Why: a frame holds one request's texts (often a few KiB per column), compressed on its own; the
same words, templates and re-sent context of the spans around it are out of its reach. A block
holds ~``SEAL_BYTES`` of frames, columnar (``COLUMNS``: keys, prompts, completions), each column's
bytes one zstd frame, and the lengths of every value one more, byte planes apart (so that a run of
32-character trace ids or of similar lengths costs next to nothing: Arrow's offsets, compressed as
they are, took ~7 B a span). Spans without text are dropped.

``<day>.awb``, beside the day's write-ahead file ``<day>.awt``, is a sequence of records::

    b"AWB1" | index bytes (u32) | data bytes (u32) | CRC-32 of the index (u32) | CRC-32 of the data (u32)
    | index | data

The index: ``sealed_to`` (u64, the write-ahead offset below which every frame is sealed, in this
record or an earlier one), then one entry per frame (``ENTRY``: the frame's offset, which span rows
point at, and its rows in the block). The data: ``rows`` (u32), then (compressed, raw) bytes (u32
each) of the lengths and of each column, then those zstd frames. A reader
finds a span's block by its frame's offset in the day's index (``DayBlocks``, built from the
records' heads: one ``pread`` per block), decompresses that one block, and matches the span on its
whole key, as in a frame. A record whose head or index does not check out, or that runs past the
file's end (a crash while it was appended), is skipped: its frames are still in the write-ahead
file, which is cut only after the block is written and synced.
"""

from __future__ import annotations

import os
import struct
import threading
import zlib
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from agentwatch_platform.collector.errors import CollectorError

BLOCK_SUFFIX = ".awb"
SEAL_BYTES = 1 << 20  # write-ahead bytes (uncompressed frames) per block: 1-8 MiB compress alike (bench.text_store)
ENTRY = np.dtype([("offset", "<u8"), ("start", "<u4"), ("count", "<u4")])
_MAGIC = b"AWB1"
_HEAD = struct.Struct("<4sIIII")
_SEALED_TO = struct.Struct("<Q")
COLUMNS = ("project", "trace_id", "span_id", "input_text", "output_text")
_DATA_HEAD = struct.Struct("<I" + "II" * (1 + len(COLUMNS)))  # rows; (compressed, raw) of lengths, columns
_SCAN_CHUNK = 1 << 20
_CACHED_BLOCKS = 3


class BlockError(CollectorError):
    """A block could not be read or decoded (damaged, or replaced under its reader)."""


@dataclass(frozen=True)
class Block:
    """One record of a blocks file: where it is, the CRC of its data, and the frames it holds."""

    position: int
    index_size: int
    data_size: int
    data_crc: int
    sealed_to: int
    entries: np.ndarray  # ENTRY

    @property
    def end(self) -> int:
        return self.position + _HEAD.size + self.index_size + self.data_size


@dataclass
class DayBlocks:
    """The blocks of one day's file: ``frames`` maps a frame's offset to (block, first row, rows)."""

    blocks: list[Block] = field(default_factory=list)
    frames: dict[int, tuple[Block, int, int]] = field(default_factory=dict)
    sealed_to: int = 0
    valid_end: int = 0  # where the last intact record ends: a torn tail after it is cut before appending
    damaged: int = 0  # stretches skipped

    def add(self, block: Block) -> None:
        self.blocks.append(block)
        for offset, start, count in block.entries.tolist():
            self.frames[offset] = (block, start, count)
        self.sealed_to = max(self.sealed_to, block.sealed_to)
        self.valid_end = block.end


def encode(table: pa.Table, entries: np.ndarray, sealed_to: int, codec: pa.Codec) -> bytes:
    """A record of ``table`` (string columns ``COLUMNS``) with its frames' ``entries``."""
    lengths, sections = [], []
    for name in COLUMNS:
        column = table.column(name).combine_chunks() if table.num_rows else pa.array([], pa.string())
        offsets = np.frombuffer(column.buffers()[1], dtype=np.int32, count=len(column) + 1, offset=column.offset * 4)
        lengths.append(np.diff(offsets))
        values = column.buffers()[2]
        sections.append(b"" if values is None else values[int(offsets[0]) : int(offsets[-1])].to_pybytes())
    planes = np.ascontiguousarray(np.concatenate(lengths).astype("<i4").view(np.uint8).reshape(-1, 4).T)
    sections.insert(0, planes.tobytes())
    packed = [codec.compress(section, asbytes=True) if section else b"" for section in sections]
    sizes = [size for section, done in zip(sections, packed, strict=True) for size in (len(done), len(section))]
    data = _DATA_HEAD.pack(table.num_rows, *sizes) + b"".join(packed)
    index = _SEALED_TO.pack(sealed_to) + entries.astype(ENTRY, copy=False).tobytes()
    head = _HEAD.pack(_MAGIC, len(index), len(data), zlib.crc32(index), zlib.crc32(data))
    return head + index + data


def read_fd(fd: int, size_of_file: int) -> DayBlocks:
    """The intact records of the first ``size_of_file`` bytes of a blocks file open as ``fd``."""
    day = DayBlocks()
    for block in _records(fd, size_of_file, day):
        day.add(block)
    return day


def _records(fd: int, size_of_file: int, day: DayBlocks) -> Iterator[Block]:
    """The intact records in order; a damaged stretch is counted and skipped to the next magic,
    but not a torn last record (a crash, or a seal under way: its frames are in the write-ahead file)."""
    position = 0
    while position + _HEAD.size <= size_of_file:
        block = _record_at(fd, position, size_of_file)
        if block is None:
            position = next_magic(fd, position + 1, size_of_file)
            day.damaged += position < size_of_file
            continue
        yield block
        position = block.end


def _record_at(fd: int, position: int, size_of_file: int) -> Block | None:
    magic, index_size, data_size, index_crc, data_crc = _HEAD.unpack(
        os.pread(fd, _HEAD.size, position).ljust(_HEAD.size, b"\0")
    )
    end = position + _HEAD.size + index_size + data_size
    if magic != _MAGIC or end > size_of_file or index_size < _SEALED_TO.size:
        return None
    index = os.pread(fd, index_size, position + _HEAD.size)
    if (index_size - _SEALED_TO.size) % ENTRY.itemsize or zlib.crc32(index) != index_crc:
        return None
    (sealed_to,) = _SEALED_TO.unpack_from(index)
    entries = np.frombuffer(index, dtype=ENTRY, offset=_SEALED_TO.size)
    return Block(position, index_size, data_size, data_crc, sealed_to, entries)


def read_block(fd: int, block: Block) -> pa.Table:
    """The texts of ``block`` from the blocks file open as ``fd`` (its data's CRC checked)."""
    data = os.pread(fd, block.data_size, block.position + _HEAD.size + block.index_size)
    if len(data) != block.data_size or zlib.crc32(data) != block.data_crc:
        raise BlockError(f"the block at {block.position} is damaged")
    try:
        return _decode(data)
    except (pa.ArrowException, ValueError, struct.error) as exc:
        raise BlockError(f"the block at {block.position} cannot be decoded: {exc}") from exc


def _decode(data: bytes) -> pa.Table:
    rows, *sizes = _DATA_HEAD.unpack_from(data)
    codec = pa.Codec("zstd")
    sections, position = [], _DATA_HEAD.size
    for packed, raw in zip(sizes[::2], sizes[1::2], strict=True):
        chunk = data[position : position + packed]
        sections.append(codec.decompress(chunk, decompressed_size=raw) if raw else pa.py_buffer(b""))
        position += packed
    planes = np.frombuffer(sections[0], dtype=np.uint8).reshape(4, -1)
    lengths = np.ascontiguousarray(planes.T).view("<i4").reshape(len(COLUMNS), rows)
    columns = []
    for values, counts in zip(sections[1:], lengths, strict=True):
        offsets = np.zeros(rows + 1, dtype=np.int32)
        np.cumsum(counts, out=offsets[1:])
        if offsets[-1] != values.size or (counts < 0).any():
            raise ValueError("lengths that do not fit the values")
        columns.append(pa.StringArray.from_buffers(rows, pa.py_buffer(offsets), values))
    return pa.Table.from_arrays(columns, names=list(COLUMNS))


def raw_record(fd: int, block: Block) -> bytes:
    """The bytes of ``block``'s whole record (copied as they are by a rewrite)."""
    return os.pread(fd, block.end - block.position, block.position)


class BlockCache:
    """The last few decompressed blocks, keyed by (day, file identity, position): reading the spans
    of a run, or of the runs next to it, decompresses a block once. Thread-safe."""

    def __init__(self, size: int = _CACHED_BLOCKS) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._tables: OrderedDict[tuple[int, int, int, int], pa.Table] = OrderedDict()

    def get(self, key: tuple[int, int, int, int]) -> pa.Table | None:
        with self._lock:
            table = self._tables.get(key)
            if table is not None:
                self._tables.move_to_end(key)
            return table

    def put(self, key: tuple[int, int, int, int], table: pa.Table) -> None:
        with self._lock:
            self._tables[key] = table
            while len(self._tables) > self._size:
                self._tables.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._tables.clear()


def next_magic(fd: int, position: int, size_of_file: int, magic: bytes = _MAGIC) -> int:
    """Where the next ``magic`` (a block's, or the write-ahead file's frames') starts at or after
    ``position`` (the file's size: none): how a reader resynchronises past a torn record."""
    while position < size_of_file:
        chunk = os.pread(fd, _SCAN_CHUNK + len(magic) - 1, position)
        found = chunk.find(magic)
        if found >= 0:
            return position + found
        position += _SCAN_CHUNK
    return size_of_file
