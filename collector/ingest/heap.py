"""Giving the C heap's free pages back to the OS after each insert (glibc's ``malloc_trim``).

Decoded request tables and Python's ~1 MB request bodies come from glibc's malloc; once a
batch is inserted they are freed, but glibc keeps the freed pages of its heaps (only the top of
the main heap is trimmed by itself). Measured on a burst with captured text
(bench/results/scale.md): the heap held ~180 MB for 60-100 MB in use. ``malloc_trim(0)``
returns every whole free page, from every arena; it costs a walk of the free lists (~1 ms),
once a batch. A no-op where the C library is not glibc.
"""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Callable
from functools import cache

from agentwatch_platform.collector.ingest.hooks import InsertHook

log = logging.getLogger(__name__)


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim  # type: ignore[no-any-return]
    except (OSError, AttributeError):
        log.debug("not glibc: the C heap is left as it is")
        return None


def trim() -> bool:
    """Return the C heap's free pages to the OS; whether anything was given back."""
    malloc_trim = _malloc_trim()
    return bool(malloc_trim(0)) if malloc_trim is not None else False


class HeapTrim(InsertHook):
    """The writer's hook: once a batch is stored and released, its buffers' pages go back."""

    def after_release(self, *, drained: bool) -> None:
        trim()
