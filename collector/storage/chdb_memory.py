"""Bounds on embedded chDB's memory: its caches, its memory limit and its allocator.

chDB runs ClickHouse inside the collector process with ClickHouse's server defaults, which
assume a machine of its own: 5 GiB each for the mark, primary-index and secondary-index mark
caches, 100 MiB of query-condition cache, and a bundled jemalloc that keeps freed pages for
5 s (``dirty_decay_ms:5000``), and 16 background threads for merges, each holding blocks of
the parts it merges (text-heavy parts of spans: ~30 MB a merge, measured in a burst).
Measured (bench/results/scale.md): an insert of a 20k-span batch with captured text touches ~3x the batch's bytes and frees it; jemalloc kept those
pages, in each of its per-CPU arenas, and that retention was 150-300 MB of the collector's
peak anonymous memory in a burst, more than everything else together. jemalloc also spreads
allocations over one arena per CPU (``percpu_arena``), and pages an insert freed in one arena were
not reused by the next statement's threads on the other CPU: with one arena an 8 MB insert's peak
went from 35-60 to 30-40 MB, with no cost to insert or query times measured on 2 cores.

The caches are server settings, passed in the data path's connection string. jemalloc reads
its options (``JE_MALLOC_CONF``, the bundled library's prefixed variable) once, when the
library is loaded, so ``configure_allocator`` must run before ``chdb`` is first imported in
the process; a value the operator already set in the environment is left alone.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

log = logging.getLogger(__name__)

ALLOCATOR_ENV = "JE_MALLOC_CONF"


@dataclass(frozen=True, slots=True)
class ChdbMemory:
    """``cache_bytes`` caps each cache (0 turns them off); ``limit_bytes`` is ClickHouse's
    ``max_server_memory_usage`` (0: its default, 90 % of RAM; a statement past it fails with
    MEMORY_LIMIT_EXCEEDED instead of the process growing); ``dirty_decay_ms`` is how long
    jemalloc keeps freed pages before giving them back (chDB's own default is 5000; 0 made each
    query fault its working memory in again: 1.7x the CPU of the 24 h overview at 2M spans);
    ``arenas`` is how many arenas jemalloc spreads allocations over (0: one per CPU, ClickHouse's
    ``percpu_arena``; pages an insert frees in one arena are then not reused by the next
    statement on another CPU); ``merge_threads`` is ClickHouse's ``background_pool_size`` (0: its
    default, 16)."""

    cache_bytes: int = 64 * 1024 * 1024
    limit_bytes: int = 0
    dirty_decay_ms: int = 1000
    arenas: int = 1
    merge_threads: int = 2

    def server_settings(self) -> dict[str, int]:
        caches = ("mark_cache_size", "primary_index_cache_size", "index_mark_cache_size", "query_condition_cache_size")
        settings = dict.fromkeys(caches, self.cache_bytes)
        if self.limit_bytes:
            settings["max_server_memory_usage"] = self.limit_bytes
        if self.merge_threads:
            settings["background_pool_size"] = self.merge_threads
        return settings

    def connection_string(self, path: Path) -> str:
        """``path?setting=value&...``: how chDB takes server settings."""
        return f"{path}?{urlencode(self.server_settings())}"

    def configure_allocator(self) -> None:
        """Set chDB's jemalloc options, if chDB is not loaded yet and the operator set none."""
        if ALLOCATOR_ENV in os.environ:
            return
        if "chdb" in sys.modules:
            log.debug("chDB already loaded: allocator options %s not applied", self.allocator_options())
            return
        os.environ[ALLOCATOR_ENV] = self.allocator_options()

    def allocator_options(self) -> str:
        """``JE_MALLOC_CONF``'s value for these bounds."""
        options = f"dirty_decay_ms:{self.dirty_decay_ms}"
        if self.arenas > 0:
            options += f",percpu_arena:disabled,narenas:{self.arenas}"
        return options
