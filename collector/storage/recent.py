"""Which spans are certainly new, so the store need not be asked: what this process knows.

A span's identity is (project, trace_id, span_id), whatever its start time: a redelivery
dated seconds or days apart (a clock re-read, sub-microsecond rounding) is the same span.
``SqlStore.insert_spans`` looks identities up in the store by trace id (primary key and bloom
filter, over the retention window), but nearly every span is new, and asking costs a query a
batch. So the single writer of a store (chDB) keeps, per process:

- ``traces``: a 64-bit hash of every trace id in the store within retention, read once from
  the store at the first insert, then extended by every insert (single writer only);
- ``owned``: the traces this process created (no span of them was stored when their first
  span was), for ``window_s`` after their creation, and the key hashes of every span this
  process stored in the last ``window_s`` (at least as long as the trace they belong to).

A span may skip the store look-up when its trace id has the usual form (32 lowercase hex
digits, so its hash is the one the store computes) and either its trace is not in ``traces``
(no span of the trace is stored, so neither is this one), or its trace is owned and its key
hash is not among the recent ones (every span of an owned trace was stored by this process
and is remembered). Anything else, a hash hit included, goes to the exact look-up, so a
collision can only cost a query, never drop a span. After a failed insert (whose effect is
unknown) the filter forgets everything and reads the trace ids again.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa

_M1 = np.uint64(0xBF58476D1CE4E5B9)  # splitmix64's finaliser
_M2 = np.uint64(0x94D049BB133111EB)
_TRACE_ID_CHARS, _SPAN_ID_CHARS = 32, 16


def key_hashes(spans: pa.Table) -> np.ndarray:
    """64-bit hashes of (project, trace_id, span_id), stable within this process (int64).

    Ids of the usual width are hashed from the Arrow buffers, 8 bytes at a time, onto a hash
    of the project; a row whose ids have another width gets Python's hash of its key instead.
    Either way a key always gets the same hash, whatever batch it arrives in.
    """
    if not spans.num_rows:
        return np.zeros(0, dtype=np.int64)
    project, trace, span = (spans.column(name).combine_chunks() for name in ("project", "trace_id", "span_id"))
    hashes = _project_hashes(project)
    usual = _has_width(trace, _TRACE_ID_CHARS) & _has_width(span, _SPAN_ID_CHARS)
    rows = None if usual.all() else np.flatnonzero(usual)
    for ids, width in ((trace, _TRACE_ID_CHARS), (span, _SPAN_ID_CHARS)):
        words = _words(ids, width, rows)
        for j in range(width // 8):
            if rows is None:
                hashes = _fmix(hashes ^ words[:, j])
            else:
                hashes[rows] = _fmix(hashes[rows] ^ words[:, j])
    hashes = hashes.view(np.int64)
    if rows is not None:
        odd = np.flatnonzero(~usual)
        keys = zip(*(column.take(odd).to_pylist() for column in (project, trace, span)), strict=True)
        hashes[odd] = np.fromiter(map(hash, keys), dtype=np.int64, count=len(odd))
    return hashes


def trace_hashes(spans: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """(hash, usual) per span: the first 16 hex digits of its trace id as a uint64 (the store's
    ``TRACE_HASH``), and whether the id has the usual form (32 lowercase hex digits)."""
    n = spans.num_rows
    if not n:
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=bool)
    trace = spans.column("trace_id").combine_chunks()
    usual = _has_width(trace, _TRACE_ID_CHARS)
    rows = np.flatnonzero(usual)
    if not len(rows):
        return np.zeros(n, dtype=np.uint64), usual
    offsets, data = _offsets(trace), trace.buffers()[2]
    raw = np.frombuffer(data, dtype=np.uint8)
    if len(rows) == n:  # every id 32 chars: they lie end to end in the buffer
        chars = raw[offsets[0] : offsets[0] + n * _TRACE_ID_CHARS].reshape(n, _TRACE_ID_CHARS)
    else:
        chars = raw[(offsets[rows][:, None] + np.arange(_TRACE_ID_CHARS)).ravel()].reshape(-1, _TRACE_ID_CHARS)
    nibbles = _HEX[chars]
    usual[rows] = (nibbles < 16).all(axis=1)
    pairs = (nibbles[:, 0:16:2].astype(np.uint8) << 4) | nibbles[:, 1:16:2].astype(np.uint8)
    hashes = np.zeros(n, dtype=np.uint64)
    hashes[rows] = np.ascontiguousarray(pairs).view("<u8").ravel()
    return hashes, usual


_HEX = np.full(256, 255, dtype=np.uint8)
_HEX[np.frombuffer(b"0123456789", dtype=np.uint8)] = np.arange(10)
_HEX[np.frombuffer(b"abcdef", dtype=np.uint8)] = np.arange(10, 16)


def _project_hashes(project: pa.Array) -> np.ndarray:
    encoded = project.dictionary_encode()
    per_name = np.array([hash(name) for name in encoded.dictionary.to_pylist()], dtype=np.int64).view(np.uint64)
    return per_name[encoded.indices.to_numpy(zero_copy_only=False)]


def _offsets(ids: pa.Array) -> np.ndarray:
    return np.frombuffer(ids.buffers()[1], dtype=np.int32, count=len(ids) + 1, offset=4 * ids.offset)


def _has_width(ids: pa.Array, width: int) -> np.ndarray:
    usual = np.diff(_offsets(ids)) == width
    if ids.null_count:
        usual &= ids.is_valid().to_numpy(zero_copy_only=False)
    return usual


def _words(ids: pa.Array, width: int, rows: np.ndarray | None) -> np.ndarray:
    """The ids of ``rows`` (None: all, each ``width`` bytes) as ``width / 8`` 64-bit words."""
    offsets = _offsets(ids)
    data = ids.buffers()[2]
    raw = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, dtype=np.uint8)
    if rows is None:
        chars = raw[offsets[0] : offsets[0] + width * len(ids)]
    else:
        chars = raw[(offsets[rows][:, None] + np.arange(width)).ravel()]
    return chars.view(np.uint64).reshape(-1, width // 8)


def _fmix(x: np.ndarray) -> np.ndarray:
    x = (x ^ (x >> 30)) * _M1
    x = (x ^ (x >> 27)) * _M2
    return x ^ (x >> 31)


class _HashSet:
    """A set of 64-bit hashes as sorted arrays of decreasing size, each at least twice the next
    (so a few dozen at most, and each hash is merged O(log n) times). Each part is deduplicated,
    not the parts against each other: membership does not mind a hash held twice."""

    def __init__(self, hashes: np.ndarray | None = None) -> None:
        self._parts = [_sorted_unique(hashes)] if hashes is not None and len(hashes) else []

    def add(self, hashes: np.ndarray) -> None:
        if not len(hashes):
            return
        self._parts.append(_sorted_unique(hashes))
        while len(self._parts) > 1 and 2 * len(self._parts[-1]) >= len(self._parts[-2]):
            newest = self._parts.pop()  # two sorted runs: a stable sort merges them in linear time
            self._parts[-1] = np.sort(np.concatenate((self._parts[-1], newest)), kind="stable")

    def contains(self, hashes: np.ndarray) -> np.ndarray:
        found = np.zeros(len(hashes), dtype=bool)
        for keys in self._parts:
            positions = np.minimum(np.searchsorted(keys, hashes), len(keys) - 1)
            found |= keys[positions] == hashes
        return found


def _sorted_unique(hashes: np.ndarray) -> np.ndarray:
    """``np.unique`` without its hash table (several times slower on 64-bit keys)."""
    ordered = np.sort(hashes)
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))] if len(ordered) > 1 else ordered


class _Slots:
    """Hashes filed by insert time in ``slots`` slots per window; a slot goes once wholly older."""

    def __init__(self, window_s: float, slots: int) -> None:
        self.window_s, self._slot_s = window_s, window_s / slots
        self._slots: dict[int, _HashSet] = {}

    def add(self, hashes: np.ndarray, now: float) -> None:
        if len(hashes):
            self._slots.setdefault(int(now // self._slot_s), _HashSet()).add(hashes)

    def contains(self, hashes: np.ndarray) -> np.ndarray:
        found = np.zeros(len(hashes), dtype=bool)
        for part in self._slots.values():
            found |= part.contains(hashes)
        return found

    def evict(self, now: float) -> None:
        for slot in [s for s in self._slots if (s + 1) * self._slot_s <= now - self.window_s]:
            del self._slots[slot]


class RecentKeys:
    """The stored trace ids, and the traces and keys this process stored lately (module doc)."""

    def __init__(
        self,
        window_s: float = 60.0,
        *,
        slots: int = 8,
        reload_s: float = 86_400.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.window_s = window_s
        self._clock = clock
        self._slots = slots
        self._reload_s = reload_s  # read the trace ids again now and then: the TTL drops old ones
        self._traces: _HashSet | None = None  # None: not read from the store yet
        self._loaded_at = 0.0
        self._owned = _Slots(window_s, slots)
        self._keys = _Slots(window_s, slots)

    @property
    def loaded(self) -> bool:
        """Whether the stored trace ids have been read (``load``) lately and not forgotten since."""
        return self._traces is not None and self._clock() - self._loaded_at < self._reload_s

    def load(self, stored_trace_hashes: np.ndarray) -> None:
        """The ``TRACE_HASH`` of every trace id in the store (within retention)."""
        self._traces = _HashSet(stored_trace_hashes.astype(np.uint64, copy=False))
        self._loaded_at = self._clock()

    def forget(self) -> None:
        """Drop all knowledge (after an insert whose effect on the store is unknown)."""
        self._traces = None
        self._owned = _Slots(self.window_s, self._slots)
        self._keys = _Slots(self.window_s, self._slots)

    def certainly_new(self, hashes: np.ndarray, traces: np.ndarray, usual: np.ndarray) -> np.ndarray:
        """A bool per span (key hash, trace hash, usual trace id): True where the store need not be asked."""
        if self._traces is None or not len(hashes):
            return np.zeros(len(hashes), dtype=bool)
        now = self._clock()
        self._owned.evict(now)
        self._keys.evict(now)
        unknown = ~self._traces.contains(traces)
        return usual & (unknown | (self._owned.contains(traces) & ~self._keys.contains(hashes)))

    def add(self, hashes: np.ndarray, traces: np.ndarray, usual: np.ndarray) -> None:
        """Remember stored spans (call right after the insert, under the same lock as the check)."""
        if self._traces is None or not len(hashes):
            return
        now = self._clock()
        created = usual & ~self._traces.contains(traces)
        self._owned.add(traces[created], now)
        self._keys.add(hashes, now)
        self._traces.add(traces[usual])
