"""Sealed blocks of captured text: the texts of many write-ahead frames of a day
(``collector.storage.texts``) compressed together, so that zstd sees across spans.

Why: a frame holds one request's texts (often a few KiB per column), compressed on its own; the
same words, templates and re-sent context of the spans around it are out of its reach. A block
holds ~``SEAL_BYTES`` of frames, columnar (``COLUMNS``: keys, prompts, completions), each column's
bytes one zstd frame, and the lengths of every value one more, byte planes apart (so that a run of
32-character trace ids or of similar lengths costs next to nothing: Arrow's offsets, compressed as
they are, took ~7 B a span). Spans without text are dropped.

Text columns are word-coded where that pays (``WORDS``, chosen per column and block on a sample):
each value cut into words after each space, the block's distinct words kept once (the dictionary)
and every value written as the ids of its words. On texts of a narrow vocabulary (bench.text_store's
words drawn from 87; agents' instructions and tool names) zstd spends ~14 bits on a repeated word
(an offset and a length) where its id costs ~7: on the issue's shape 64.6 -> 36 B/span of text. On
prose, code and JSON of a wide vocabulary plain zstd wins by 20-25 % and is kept (``PLAIN``); no real
agent's texts were measured, so which one a store gets is the sample's call, block after block.

``<day>.awb``, beside the day's write-ahead file ``<day>.awt``, is a sequence of records::

    b"AWB2" | index bytes (u32) | data bytes (u32) | CRC-32 of the index (u32) | CRC-32 of the data (u32)
    | index | data

The index: ``sealed_to`` (u64, the write-ahead offset below which every frame is sealed, in this
record or an earlier one), then one entry per frame (``ENTRY``: the frame's offset, which span rows
point at, and its rows in the block). The data (``_encode_data``): ``rows`` (u32), sections (u32),
one coding byte per column (``PLAIN``, ``WORDS``), (compressed, raw) bytes (u32 each) per section,
then the sections' zstd frames: first the lengths of the plain columns' values, then per column its
values (plain) or its word counts, word ids, dictionary lengths and dictionary values (words);
numbers byte-planed. Records of the first version (``b"AWB1"``: every column plain, the sections
counted by ``COLUMNS``) read as they are, also in the same file as newer ones. A reader
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
import pyarrow.compute as pc

from agentwatch_platform.collector.errors import CollectorError

BLOCK_SUFFIX = ".awb"
SEAL_BYTES = 1 << 20  # write-ahead bytes (uncompressed frames) per block: 1-8 MiB compress alike (bench.text_store)
ENTRY = np.dtype([("offset", "<u8"), ("start", "<u4"), ("count", "<u4")])
_MAGIC = b"AWB2"  # what ``encode`` writes
_VERSIONS = {b"AWB1": 1, _MAGIC: 2}
_RESYNC = b"AWB"  # every version's magic starts so: a resync finds records of either
_HEAD = struct.Struct("<4sIIII")
_SEALED_TO = struct.Struct("<Q")
COLUMNS = ("project", "trace_id", "span_id", "input_text", "output_text")
WORD_COLUMNS = ("input_text", "output_text")  # the columns word coding is tried on
PLAIN, WORDS = 0, 1  # a column's coding in a block
_DATA_HEAD_V1 = struct.Struct("<I" + "II" * (1 + len(COLUMNS)))  # rows; (compressed, raw) of lengths, columns
_DATA_HEAD = struct.Struct("<II")  # rows, sections
_SAMPLE_BYTES = 64 << 10  # the text a column's coding is chosen on
_MIN_CHOICE_BYTES = 4 << 10  # smaller columns stay plain
_WORDS_GAIN = 0.9  # word coding only where it saves 10 % of the sample
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
    version: int = 2

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


class Coder:
    """What blocks are compressed with: the zstd ``codec`` and each text column's coding, chosen
    on a sample of one block in ``RESAMPLE_EVERY`` (a store's texts keep their kind from block to
    block; sampling costs ~1 ms a column). Used by one sealer at a time."""

    RESAMPLE_EVERY = 8

    def __init__(self, codec: pa.Codec) -> None:
        self.codec = codec
        self._chosen: dict[str, tuple[int, int]] = {}  # column -> (coding, blocks coded since the sample)

    def coding(self, name: str, column: pa.Array) -> int:
        if name not in WORD_COLUMNS:
            return PLAIN
        coding, since = self._chosen.get(name, (PLAIN, self.RESAMPLE_EVERY))
        if since >= self.RESAMPLE_EVERY:
            coding, since = _coding(column, self.codec), 0
        self._chosen[name] = (coding, since + 1)
        return coding


def encode(table: pa.Table, entries: np.ndarray, sealed_to: int, coder: Coder) -> bytes:
    """A record of ``table`` (string columns ``COLUMNS``) with its frames' ``entries``."""
    data = _encode_data(table, coder)
    index = _SEALED_TO.pack(sealed_to) + entries.astype(ENTRY, copy=False).tobytes()
    head = _HEAD.pack(_MAGIC, len(index), len(data), zlib.crc32(index), zlib.crc32(data))
    return head + index + data


def _encode_data(table: pa.Table, coder: Coder) -> bytes:
    codings, lengths, sections = bytearray(), [], []
    for name in COLUMNS:
        column = table.column(name).combine_chunks() if table.num_rows else pa.array([], pa.string())
        coding = coder.coding(name, column)
        codings.append(coding)
        if coding == WORDS:
            sections += _words(column)
        else:
            values, counts = _plain(column)
            sections.append(values)
            lengths.append(counts)
    sections.insert(0, _planes(np.concatenate(lengths), 4))
    packed = [coder.codec.compress(section, asbytes=True) if section else b"" for section in sections]
    sizes = [size for section, done in zip(sections, packed, strict=True) for size in (len(done), len(section))]
    head = _DATA_HEAD.pack(table.num_rows, len(sections)) + bytes(codings)
    return head + struct.pack(f"<{len(sizes)}I", *sizes) + b"".join(packed)


def _plain(column: pa.Array) -> tuple[bytes, np.ndarray]:
    """The values of a string array back to back, and their lengths (a null: empty)."""
    offsets = np.frombuffer(column.buffers()[1], dtype=np.int32, count=len(column) + 1, offset=column.offset * 4)
    values = column.buffers()[2]
    data = b"" if values is None else values[int(offsets[0]) : int(offsets[-1])].to_pybytes()
    return data, np.diff(offsets)


def _words(column: pa.Array) -> list[bytes]:
    """The sections of a word-coded column: words per value, word ids, the dictionary's lengths
    and values. A word is cut after each space and at the value's end (``"find the"``: ``"find "``,
    ``"the"``), so a value is its words back to back: no separator to put back, nothing lost."""
    values = column.buffers()[2]
    offsets = np.frombuffer(column.buffers()[1], dtype=np.int32, count=len(column) + 1, offset=column.offset * 4)
    data = np.frombuffer(values, dtype=np.uint8) if values is not None else np.zeros(0, dtype=np.uint8)
    first = int(offsets[0])
    cut = np.empty(int(offsets[-1]) - first + 1, dtype=bool)  # cut[i]: a word starts at first + i
    cut[0] = True
    np.equal(data[first : int(offsets[-1])], 0x20, out=cut[1:])
    cut[offsets - first] = True
    bounds = (np.flatnonzero(cut) + first).astype(np.int32)
    words = pa.StringArray.from_buffers(len(bounds) - 1, pa.py_buffer(bounds), values or pa.py_buffer(b""))
    coded = pc.dictionary_encode(words)
    dictionary, lengths = _plain(coded.dictionary)
    counts = np.diff(np.searchsorted(bounds, offsets))
    ids = coded.indices.to_numpy(zero_copy_only=False)
    return [_planes(counts, 4), _planes(ids, _id_width(len(coded.dictionary))), _planes(lengths, 4), dictionary]


def _coding(column: pa.Array, codec: pa.Codec) -> int:
    """``WORDS`` when the column's first ~``_SAMPLE_BYTES`` of text compress clearly smaller so."""
    offsets = np.frombuffer(column.buffers()[1], dtype=np.int32, count=len(column) + 1, offset=column.offset * 4)
    if offsets[-1] - offsets[0] < _MIN_CHOICE_BYTES:
        return PLAIN
    rows = max(1, int(np.searchsorted(offsets, offsets[0] + _SAMPLE_BYTES)))
    sample = column.slice(0, rows)
    plain = len(codec.compress(_plain(sample)[0], asbytes=True))
    words = sum(len(codec.compress(section, asbytes=True)) for section in _words(sample) if section)
    return WORDS if words < _WORDS_GAIN * plain else PLAIN


def _id_width(words: int) -> int:
    return 1 if words <= 1 << 8 else 2 if words <= 1 << 16 else 4


def _planes(values: np.ndarray, width: int) -> bytes:
    """``values`` as ``width``-byte little-endian numbers, byte planes apart (high planes of small
    numbers are runs of zeros)."""
    return np.ascontiguousarray(values.astype(f"<u{width}").view(np.uint8).reshape(-1, width).T).tobytes()


def _numbers(section: pa.Buffer | bytes, width: int, *, wide: bool = True) -> np.ndarray:
    """The numbers of a byte-planed section (``wide``: as int64, ready to be summed)."""
    planes = np.frombuffer(section, dtype=np.uint8).reshape(width, -1)
    numbers = np.ascontiguousarray(planes.T).view(f"<u{width}").ravel()
    return numbers.astype(np.int64) if wide else numbers


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
            position = next_magic(fd, position + 1, size_of_file, _RESYNC)
            day.damaged += position < size_of_file
            continue
        yield block
        position = block.end


def _record_at(fd: int, position: int, size_of_file: int) -> Block | None:
    magic, index_size, data_size, index_crc, data_crc = _HEAD.unpack(
        os.pread(fd, _HEAD.size, position).ljust(_HEAD.size, b"\0")
    )
    end = position + _HEAD.size + index_size + data_size
    if magic not in _VERSIONS or end > size_of_file or index_size < _SEALED_TO.size:
        return None
    index = os.pread(fd, index_size, position + _HEAD.size)
    if (index_size - _SEALED_TO.size) % ENTRY.itemsize or zlib.crc32(index) != index_crc:
        return None
    (sealed_to,) = _SEALED_TO.unpack_from(index)
    entries = np.frombuffer(index, dtype=ENTRY, offset=_SEALED_TO.size)
    return Block(position, index_size, data_size, data_crc, sealed_to, entries, _VERSIONS[magic])


def read_block(fd: int, block: Block) -> pa.Table:
    """The texts of ``block`` from the blocks file open as ``fd`` (its data's CRC checked)."""
    data = os.pread(fd, block.data_size, block.position + _HEAD.size + block.index_size)
    if len(data) != block.data_size or zlib.crc32(data) != block.data_crc:
        raise BlockError(f"the block at {block.position} is damaged")
    try:
        return _decode(data) if block.version == 2 else _decode_v1(data)
    except (pa.ArrowException, ValueError, struct.error) as exc:
        raise BlockError(f"the block at {block.position} cannot be decoded: {exc}") from exc


def _decode(data: bytes) -> pa.Table:
    rows, count = _DATA_HEAD.unpack_from(data)
    codings = data[_DATA_HEAD.size : _DATA_HEAD.size + len(COLUMNS)]
    sizes = struct.unpack_from(f"<{2 * count}I", data, _DATA_HEAD.size + len(COLUMNS))
    sections = _sections(data, _DATA_HEAD.size + len(COLUMNS) + 8 * count, sizes)
    plain = codings.count(PLAIN)
    lengths = _numbers(sections[0], 4).reshape(plain, rows) if plain else np.zeros((0, rows), dtype=np.int64)
    rest, columns, next_plain = iter(sections[1:]), [], 0
    for coding in codings:
        if coding == PLAIN:
            columns.append(_strings(lengths[next_plain], next(rest)))
            next_plain += 1
        elif coding == WORDS:
            columns.append(_joined(rows, next(rest), next(rest), next(rest), next(rest)))
        else:
            raise ValueError(f"a column of an unknown coding {coding}")
    if next(rest, None) is not None:
        raise ValueError("sections that no column reads")
    return pa.Table.from_arrays(columns, names=list(COLUMNS))


def _decode_v1(data: bytes) -> pa.Table:
    """A block of the first version: every column plain."""
    rows, *sizes = _DATA_HEAD_V1.unpack_from(data)
    sections = _sections(data, _DATA_HEAD_V1.size, sizes)
    lengths = _numbers(sections[0], 4).reshape(len(COLUMNS), rows)
    columns = [_strings(counts, values) for values, counts in zip(sections[1:], lengths, strict=True)]
    return pa.Table.from_arrays(columns, names=list(COLUMNS))


def _sections(data: bytes, position: int, sizes: tuple[int, ...] | list[int]) -> list[pa.Buffer]:
    """The sections decompressed ((compressed, raw) sizes; an empty one is not compressed)."""
    codec = pa.Codec("zstd")
    sections = []
    for packed, raw in zip(sizes[::2], sizes[1::2], strict=True):
        chunk = data[position : position + packed]
        sections.append(codec.decompress(chunk, decompressed_size=raw) if raw else pa.py_buffer(b""))
        position += packed
    return sections


def _strings(lengths: np.ndarray, values: pa.Buffer) -> pa.Array:
    """A string array of ``values`` cut at ``lengths``; ValueError when they do not fit."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] != values.size or (lengths < 0).any() or offsets[-1] > np.iinfo(np.int32).max:
        raise ValueError("lengths that do not fit the values")
    return pa.StringArray.from_buffers(len(lengths), pa.py_buffer(offsets.astype(np.int32)), values)


def _joined(rows: int, counts: pa.Buffer, ids: pa.Buffer, lengths: pa.Buffer, values: pa.Buffer) -> pa.Array:
    """A word-coded column's values: each one's words from the dictionary, back to back."""
    dictionary = _strings(_numbers(lengths, 4), values)
    words = _numbers(counts, 4)
    taken = _numbers(ids, _id_width(len(dictionary)), wide=False)
    if len(words) != rows or words.sum() != len(taken):
        raise ValueError("word counts that do not fit the word ids")
    text = dictionary.take(pa.array(taken))  # an id past the dictionary: ArrowIndexError
    bounds = np.frombuffer(text.buffers()[1], dtype=np.int32, count=len(text) + 1, offset=text.offset * 4)
    ends = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(words, out=ends[1:])
    return pa.StringArray.from_buffers(rows, pa.py_buffer(bounds[ends]), text.buffers()[2] or pa.py_buffer(b""))


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
