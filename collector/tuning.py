"""The collector process's tuning, in one place: the garbage collector, glibc's malloc, pyarrow's
memory pool and keeping pandas out. Why each knob is set as it is, with the figures measured
for it, is in ``bench/results/tuning.md``; the figures that still hold are in the result files
named there.

Embedded chDB's own bounds (its caches, memory limit and allocator) are the store's
(``collector.storage.chdb_memory``); giving the C heap back after each insert is the writer's
(``collector.ingest.heap``). The dashboard's process sets the same collector thresholds for its
own reasons (``dashboard.server``).

Order matters: ``before_imports`` runs before the collector's modules are imported (pyarrow
reads its pool once when first imported; they build arrays when imported), ``after_start_up``
once the app is built (what was built so far is frozen out of the collector's scans).
"""

from __future__ import annotations

import gc
import logging
import os
import sys

log = logging.getLogger(__name__)

# The cyclic collector runs 140x less often than CPython's default (700, 10, 10): decoding makes
# millions of short-lived acyclic containers a second, which refcounting frees anyway.
GC_THRESHOLDS = (100_000, 50, 100)
_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number (malloc.h)


def before_imports(*, keep_pandas_out: bool) -> None:
    """pyarrow's system pool and, unless asked otherwise, no pandas in the process."""
    if keep_pandas_out:
        _keep_pandas_out()
    use_system_arrow_pool()


def after_start_up(*, malloc_mmap_threshold_bytes: int) -> None:
    """The collector's thresholds; a fixed mmap threshold where the operator set one."""
    tune_gc()
    _tune_malloc(malloc_mmap_threshold_bytes)


def tune_gc() -> None:
    """Rarer cyclic collections; what exists now is frozen out of their scans."""
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def _tune_malloc(threshold_bytes: int) -> None:
    """A fixed mmap threshold (also turning off its growth to 32 MB after the first large free,
    which carves ~1 MB request bodies from the heap and leaves holes never given back). Off
    unless AGENTWATCH_MALLOC_MMAP_THRESHOLD_BYTES is set: its cost in ingest rate outweighed the
    memory once the writer trims the heap. A no-op where the C library is not glibc."""
    if threshold_bytes <= 0:
        return
    import ctypes

    try:
        ctypes.CDLL("libc.so.6").mallopt(_M_MMAP_THRESHOLD, threshold_bytes)
    except (OSError, AttributeError):
        log.debug("not glibc: malloc left as it is")


class PandasKeptOut:
    """An import hook refusing pandas, so that pyarrow takes it for not installed."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(
                "pandas is kept out of the collector process (AGENTWATCH_COLLECTOR_PANDAS=1 lets it in)", name=name
            )


def _keep_pandas_out() -> None:
    """pyarrow imports pandas (~30 MB of anonymous memory) the first time it builds an array from
    Python values, only to check whether they are a data frame; the collector never builds one."""
    if "pandas" not in sys.modules and not any(isinstance(f, PandasKeptOut) for f in sys.meta_path):
        sys.meta_path.insert(0, PandasKeptOut())


def use_system_arrow_pool() -> None:
    """pyarrow's default pool (mimalloc) keeps freed pages in per-thread heaps; through glibc
    they are reused and given back. pyarrow reads ARROW_DEFAULT_MEMORY_POOL once, when first
    imported, so it is set before; where pyarrow is already loaded only its Python-side pool can
    switch. An operator's ARROW_DEFAULT_MEMORY_POOL is left as it is."""
    if "ARROW_DEFAULT_MEMORY_POOL" in os.environ:
        return
    if "pyarrow" not in sys.modules:
        os.environ["ARROW_DEFAULT_MEMORY_POOL"] = "system"
        return
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())
