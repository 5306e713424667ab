"""Embedded chDB's memory bounds (collector.storage.chdb_memory): caches, limit, allocator."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentwatch_platform.collector.settings import Settings
from agentwatch_platform.collector.storage import open_store
from agentwatch_platform.collector.storage.chdb_memory import ALLOCATOR_ENV, ChdbMemory
from agentwatch_platform.collector.storage.model import SpanRow


def _server_settings(store: object) -> dict[str, int]:
    rows = store.query(  # type: ignore[attr-defined]
        "SELECT name, value FROM system.server_settings WHERE name IN "
        "('mark_cache_size', 'primary_index_cache_size', 'index_mark_cache_size', 'query_condition_cache_size', 'max_server_memory_usage', 'background_pool_size')"
    )
    return {r["name"]: int(r["value"]) for r in rows}


def test_the_store_runs_with_the_configured_caches_memory_limit_merge_threads_and_merges_spans_vertically(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("AGENTWATCH_CHDB_CACHE_BYTES", str(3 * 2**20))
    monkeypatch.setenv("AGENTWATCH_CHDB_MEMORY_LIMIT_BYTES", str(3 * 2**30))
    monkeypatch.setenv("AGENTWATCH_CHDB_MERGE_THREADS", "3")
    store = open_store(Settings.from_env(data_dir=tmp_path))
    try:
        figures = _server_settings(store)
        now = time.time_ns()
        assert store.insert_spans([SpanRow("p", "a" * 32, "b" * 16, "", "run", "run", now, now + 1)]) == 1
        spans = store.query(
            "SELECT engine_full FROM system.tables WHERE database = currentDatabase() AND name = 'spans'"
        )[0]["engine_full"]
    finally:
        store.close()
    assert figures == {
        "mark_cache_size": 3 * 2**20,
        "primary_index_cache_size": 3 * 2**20,
        "index_mark_cache_size": 3 * 2**20,
        "query_condition_cache_size": 3 * 2**20,
        "max_server_memory_usage": 3 * 2**30,
        "background_pool_size": 3,
    }
    assert "vertical_merge_algorithm_min_rows_to_activate = 1" in spans  # migration 9: merges a column at a time
    assert "purging the allocator" not in caplog.text  # chDB takes SYSTEM JEMALLOC PURGE after an insert


def test_no_memory_limit_leaves_clickhouse_its_own() -> None:
    assert "max_server_memory_usage" not in ChdbMemory().server_settings()
    assert ChdbMemory().connection_string(Path("/d")).startswith("/d?mark_cache_size=67108864&")


def test_allocator_options_are_set_before_chdb_loads_and_never_over_the_operators(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ALLOCATOR_ENV, raising=False)
    monkeypatch.delitem(sys.modules, "chdb", raising=False)
    ChdbMemory(dirty_decay_ms=250).configure_allocator()
    assert sys.modules.get("chdb") is None

    assert os.environ[ALLOCATOR_ENV] == "dirty_decay_ms:250,percpu_arena:disabled,narenas:1"
    monkeypatch.setenv(ALLOCATOR_ENV, "dirty_decay_ms:5000,narenas:1")  # the operator's own
    ChdbMemory(dirty_decay_ms=0).configure_allocator()
    assert os.environ[ALLOCATOR_ENV] == "dirty_decay_ms:5000,narenas:1"


def test_allocator_arenas_zero_leaves_jemalloc_one_arena_per_cpu() -> None:
    assert ChdbMemory(dirty_decay_ms=1000, arenas=0).allocator_options() == "dirty_decay_ms:1000"
    assert ChdbMemory(arenas=4).allocator_options() == "dirty_decay_ms:1000,percpu_arena:disabled,narenas:4"


def test_a_collector_process_loads_chdb_with_the_configured_allocator_options(tmp_path: Path) -> None:
    """The settings reach jemalloc's variable before chDB is loaded, in a process of its own
    (here chDB is loaded already), and the store works with them."""
    script = (
        "import os, time\n"
        "from agentwatch_platform.collector.settings import Settings\n"
        "from agentwatch_platform.collector.storage import open_store\n"
        "from agentwatch_platform.collector.storage.model import SpanRow\n"
        "store = open_store(Settings.from_env(data_dir=__import__('pathlib').Path(os.environ['DATA_DIR'])))\n"
        "now = time.time_ns()\n"
        "print(store.insert_spans([SpanRow('p', 'a' * 32, 'b' * 16, '', 'run', 'run', now, now + 1)]))\n"
        "print(os.environ['JE_MALLOC_CONF'])\n"
        "store.close()\n"
    )
    env = {k: v for k, v in os.environ.items() if k != ALLOCATOR_ENV}
    env |= {"DATA_DIR": str(tmp_path), "AGENTWATCH_CHDB_ALLOCATOR_ARENAS": "2", "AGENTWATCH_CHDB_DIRTY_DECAY_MS": "700"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "dirty_decay_ms:700,percpu_arena:disabled,narenas:2"]
    assert "jemalloc" not in done.stderr  # the bundled jemalloc took every option


def test_allocator_options_are_not_set_once_chdb_is_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ALLOCATOR_ENV, raising=False)
    monkeypatch.setitem(sys.modules, "chdb", sys)  # loaded: jemalloc has read its options already
    ChdbMemory(dirty_decay_ms=0).configure_allocator()

    assert ALLOCATOR_ENV not in os.environ
