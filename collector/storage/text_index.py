"""Which blocks of captured text may hold a search's needle: a bloom filter of each block's byte
trigrams (``collector.storage.texts``: a sealed block, or a frame of the write-ahead file), so a
search decompresses the blocks that may match, not every block of its days.

Why trigrams and not words: the search is a case-insensitive *substring* match
(``pc.match_substring(ignore_case=True)``, RE2's simple case folding), and a needle's first and last
words may be parts of longer words. Every trigram of a needle is a trigram of any text that holds
it, so a block whose filter lacks one cannot match: the filter only ever rules blocks out, and the
exact match still runs on the blocks it lets through (a false positive costs time, never an answer).

Folding: texts are lowered with Arrow's ``utf8_lower`` (which maps KELVIN SIGN to ``k``) and LONG S
``ſ`` is written ``s``, the two characters outside ASCII whose case orbit under RE2 holds an ASCII
letter. Only needles of ASCII characters, 3 bytes or more, use the filters (``needle_trigrams``);
any other needle (``"ÜNÏCODE"``, ``"ab"``) scans every block, as before the filters.

Sizing: ``BITS_PER_TRIGRAM`` bits per distinct trigram of the block (a power of two between
``MIN_BITS`` and ``MAX_BITS``), ``HASHES`` positions per trigram: ~3 % false positives per trigram,
and a needle of n trigrams passes a block without them at about 0.03^n.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

BITS_PER_TRIGRAM = 8
MIN_BITS, MAX_BITS = 1 << 10, 1 << 22
_MULTIPLIERS = np.array([0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D], dtype=np.uint32)  # HASHES = 3
HASHES = len(_MULTIPLIERS)
_TRIGRAMS = 1 << 24
_MIN_LOG2, _MAX_LOG2 = MIN_BITS.bit_length() - 1, MAX_BITS.bit_length() - 1


def fold(texts: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """``texts`` lowered as the filters see them (see the module's docstring)."""
    return pc.replace_substring(pc.utf8_lower(texts), "ſ", "s")


def needle_trigrams(needle: str) -> np.ndarray | None:
    """The distinct trigram codes of ``needle`` folded, or None when the filters cannot answer
    for it (not ASCII, or shorter than 3 bytes): then every block is a candidate."""
    if not needle.isascii() or len(needle) < 3:
        return None
    return np.unique(_codes(np.frombuffer(needle.lower().encode(), dtype=np.uint8)))


def bloom_of(columns: list[pa.Array | pa.ChunkedArray]) -> bytes:
    """The filter of the texts in ``columns`` (string arrays): one byte, log2 of its bits, then the bits."""
    present = np.zeros(_TRIGRAMS, dtype=bool)
    for column in columns:
        folded = fold(column)
        chunks = folded.chunks if isinstance(folded, pa.ChunkedArray) else [folded]
        for chunk in chunks:
            present[_codes(_value_bytes(chunk))] = True
    codes = np.flatnonzero(present).astype(np.uint32)
    log2 = int(np.clip(np.ceil(np.log2(max(1, codes.size * BITS_PER_TRIGRAM))), np.log2(MIN_BITS), np.log2(MAX_BITS)))
    bits = np.zeros(1 << log2, dtype=bool)
    bits[_positions(codes, log2).ravel()] = True
    return bytes([log2]) + np.packbits(bits, bitorder="little").tobytes()


class NeedleTest:
    """Whether a block may hold every trigram of one needle (``needle_trigrams``), for each filter
    a search meets: the needle's bit positions are computed once per filter size, and a filter is
    tested byte by byte, stopping at the first bit unset (a day of 1M spans has ~300 filters; numpy
    per filter cost ~15 us each, most of an absent needle's search)."""

    def __init__(self, trigrams: np.ndarray) -> None:
        self._trigrams = trigrams
        self._checks: dict[int, tuple[tuple[int, int], ...]] = {}

    def may_hold(self, bloom: bytes | memoryview) -> bool:
        log2 = bloom[0]
        if not _MIN_LOG2 <= log2 <= _MAX_LOG2 or len(bloom) != 1 + (1 << log2) // 8:
            return True  # not a filter this module wrote: the block is scanned
        checks = self._checks.get(log2)
        if checks is None:
            positions = np.unique(_positions(self._trigrams, log2).ravel())
            checks = self._checks[log2] = tuple((1 + int(p >> 3), 1 << int(p & 7)) for p in positions)
        return all(bloom[at] & bit for at, bit in checks)


def may_hold(bloom: bytes | memoryview, trigrams: np.ndarray) -> bool:
    """Whether a block with filter ``bloom`` may hold every trigram (``needle_trigrams``)."""
    return NeedleTest(trigrams).may_hold(bloom)


def _value_bytes(chunk: pa.Array) -> np.ndarray:
    """The UTF-8 bytes of every value of a string array, back to back (a trigram across two values
    is a harmless false positive)."""
    if len(chunk) == 0:
        return np.zeros(0, dtype=np.uint8)
    offsets = np.frombuffer(chunk.buffers()[1], dtype=np.int32, count=len(chunk) + 1, offset=chunk.offset * 4)
    data = chunk.buffers()[2]
    if data is None:
        return np.zeros(0, dtype=np.uint8)
    return np.frombuffer(data, dtype=np.uint8)[offsets[0] : offsets[-1]]


def _codes(data: np.ndarray) -> np.ndarray:
    if data.size < 3:
        return np.zeros(0, dtype=np.uint32)
    wide = data.astype(np.uint32)
    return (wide[:-2] << 16) | (wide[1:-1] << 8) | wide[2:]


def _positions(codes: np.ndarray, log2: int) -> np.ndarray:
    """``HASHES`` bit positions per code (multiplicative hashing, the top ``log2`` bits)."""
    return (codes[:, None].astype(np.uint32) * _MULTIPLIERS[None, :]) >> np.uint32(32 - log2)


# --- the index file of a day file -----------------------------------------------------------------
# ``<day>.awi`` beside ``<day>.awt``: one record per sealed block and per write-ahead frame, appended
# by the searches that read it or the hourly pass (so ingest pays nothing), each ``b"AWI1" | length
# (u32) | CRC-32 (u32) | body`` with the body ``key (u64) | CRC (u32) | filter``: the key is a frame's
# offset, or a block's position with the top bit set (``texts._BLOCK_KEY``), the CRC the frame's or
# the block data's. A record counts only while what its key names still has that CRC (a frame or
# block rewritten by a deletion, a file truncated and appended to, or replaced, gets scanned again);
# a damaged record is skipped (its frame scanned): the index can make a search slower, never give
# another answer.
INDEX_SUFFIX = ".awi"
_RECORD_MAGIC = b"AWI1"
_RECORD = struct.Struct("<4sII")
_BODY = struct.Struct("<QI")


def index_record(frame_offset: int, frame_crc: int, bloom: bytes) -> bytes:
    body = _BODY.pack(frame_offset, frame_crc) + bloom
    return _RECORD.pack(_RECORD_MAGIC, len(body), zlib.crc32(body)) + body


def read_index(data: bytes) -> dict[int, tuple[int, bytes]]:
    """frame offset -> (frame CRC, filter) of every intact record of an index file's bytes (the
    last record of an offset wins); damaged stretches are skipped to the next record magic."""
    records: dict[int, tuple[int, bytes]] = {}
    position = 0
    while position + _RECORD.size <= len(data):
        magic, size, crc = _RECORD.unpack_from(data, position)
        end = position + _RECORD.size + size
        body = data[position + _RECORD.size : end]
        if magic == _RECORD_MAGIC and end <= len(data) and size >= _BODY.size and zlib.crc32(body) == crc:
            offset, frame_crc = _BODY.unpack_from(body)
            records[offset] = (frame_crc, body[_BODY.size :])
            position = end
        else:
            found = data.find(_RECORD_MAGIC, position + 1)
            position = found if found >= 0 else len(data)
    return records
