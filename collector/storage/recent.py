"""Which spans are certainly new: hashes of the span keys this process stored lately.

Idempotency on (project, trace_id, span_id) is checked against the store before every insert,
but that look-up reads a granule per trace and grows with the table. Nearly every span is new,
and a duplicate (an exporter's retry) follows its original within seconds, so the writer keeps
the keys it stored in the last ``window_s`` and asks the store only about the rest.

A span may skip the store look-up only when all of this holds (single writer only):
- the store has been open in this process for ``window_s`` at least, so nothing stored by
  a previous process can have started within the window;
- its start time lies in the last ``window_s`` (not in the future); a key is filed under the
  later of its insert time and its start time, and a slot is dropped once those times are
  older than the window, so a key leaves only when its span can no longer skip the look-up
  (a span dated in the future by a skewed clock stays vouched for until its start time has
  aged past the window, not just its insert time);
- its key's hash is not among the recent ones (a hash hit goes to the exact look-up, so a
  collision can never drop a span).
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


def start_times(spans: pa.Table) -> np.ndarray:
    """Start times in ns since the epoch (int64)."""
    return spans.column("start_time").cast(pa.int64()).to_numpy()


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
        chars = raw[offsets[0]:offsets[0] + width * len(ids)]
    else:
        chars = raw[(offsets[rows][:, None] + np.arange(width)).ravel()]
    return chars.view(np.uint64).reshape(-1, width // 8)


def _fmix(x: np.ndarray) -> np.ndarray:
    x = (x ^ (x >> 30)) * _M1
    x = (x ^ (x >> 27)) * _M2
    return x ^ (x >> 31)


class RecentKeys:
    """Key hashes per time slot (``slots`` per window), each slot sorted on first use."""

    def __init__(self, window_s: float = 60.0, *, slots: int = 8, clock: Callable[[], float] = time.time) -> None:
        self.window_s = window_s
        self._slot_s = window_s / slots
        self._clock = clock
        self._opened = clock()
        self._slots: dict[int, list[np.ndarray]] = {}

    def certainly_new(self, hashes: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """A bool per key (with its span's start time, ns): True where the store need not be asked."""
        now = self._clock()
        if now - self._opened < self.window_s or not len(hashes):
            return np.zeros(len(hashes), dtype=bool)
        self._evict(now)
        recent = (starts >= int((now - self.window_s) * 1e9)) & (starts <= int(now * 1e9))
        return recent & ~self._seen(hashes)

    def add(self, hashes: np.ndarray, starts: np.ndarray) -> None:
        """Remember stored keys, each under the later of now and its span's start time."""
        if not len(hashes):
            return
        slots = np.maximum(starts // int(self._slot_s * 1e9), int(self._clock() // self._slot_s))
        for slot in np.unique(slots):
            self._slots.setdefault(int(slot), []).append(hashes[slots == slot])

    def _seen(self, hashes: np.ndarray) -> np.ndarray:
        seen = np.zeros(len(hashes), dtype=bool)
        for parts in self._slots.values():
            if len(parts) > 1:
                parts[:] = [np.concatenate(parts)]
            keys = parts[0] = np.sort(parts[0])
            positions = np.minimum(np.searchsorted(keys, hashes), len(keys) - 1)
            seen |= keys[positions] == hashes
        return seen

    def _evict(self, now: float) -> None:
        """Drop slots whose every insert time is older than the window."""
        for slot in [s for s in self._slots if (s + 1) * self._slot_s <= now - self.window_s]:
            del self._slots[slot]
