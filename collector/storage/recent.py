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
from collections.abc import Callable, Sequence

import numpy as np

from collector.model import SpanRow


def key_hashes(rows: Sequence[SpanRow]) -> np.ndarray:
    """64-bit hashes of (project, trace_id, span_id), stable within this process."""
    return np.fromiter((hash((r.project, r.trace_id, r.span_id)) for r in rows), dtype=np.int64, count=len(rows))


def start_times(rows: Sequence[SpanRow]) -> np.ndarray:
    return np.fromiter((r.start_time_ns for r in rows), dtype=np.int64, count=len(rows))


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
