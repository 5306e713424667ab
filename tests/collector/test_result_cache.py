"""The chDB store's result cache: repeated reads are served from memory, every write shows at once."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentwatch_api.schemas import FeedbackIn
from agentwatch_platform.collector.query import feedback as feedback_query
from agentwatch_platform.collector.query import overview as overview_query
from agentwatch_platform.collector.query import runs as runs_query
from agentwatch_platform.collector.storage.chdb_store import ChdbStore
from agentwatch_platform.collector.storage.result_cache import ResultCache, is_read
from tests.collector.factories import agent_run

T = (int(time.time()) // 3600 - 2) * 3600


@pytest.fixture
def chdb(tmp_path: Path) -> Iterator[ChdbStore]:
    store = ChdbStore(tmp_path / "chdb")
    store.migrate()
    yield store
    store.close()


def test_fresh_spans_and_feedback_appear_after_cached_reads(chdb: ChdbStore) -> None:
    chdb.insert_spans(agent_run(start_s=T + 60, cost_per_call=0.5))
    first = overview_query.overview(chdb, "p1", start=T, end=T + 3600)
    assert overview_query.overview(chdb, "p1", start=T, end=T + 3600) == first  # served again, same figures
    assert first.figures["runs"].value == 1
    run = agent_run(start_s=T + 120)
    chdb.insert_spans(run)
    assert overview_query.overview(chdb, "p1", start=T, end=T + 3600).figures["runs"].value == 2
    assert runs_query.get_run(chdb, "p1", run[0].trace_id).feedback == []
    feedback_query.add_feedback(chdb, "p1", run[0].trace_id, FeedbackIn(score=1.0))
    assert runs_query.get_run(chdb, "p1", run[0].trace_id).run.feedback_score == 1.0


def test_cached_rows_cannot_be_changed_by_a_caller(chdb: ChdbStore) -> None:
    rows = chdb.query("SELECT 1 AS x")
    rows[0]["x"] = 99
    assert chdb.query("SELECT 1 AS x") == [{"x": 1}]


def test_a_result_computed_across_a_write_is_not_kept() -> None:
    cache = ResultCache()
    key = cache.key("SELECT 1", {})
    assert key is not None
    generation = cache.generation
    cache.invalidate()  # a write ran while the query did
    cache.put(key, [{"x": 1}], generation)
    assert cache.get(key) is None
    cache.put(key, [{"x": 2}], cache.generation)
    assert cache.get(key) == [{"x": 2}]


def test_entries_expire_and_the_cache_stays_bounded() -> None:
    cache = ResultCache(max_entries=2, max_age_s=0.05)
    keys = [cache.key(f"SELECT {i}", {"p": "v"}) for i in range(3)]
    for key in keys:
        cache.put(key, [{"i": 1}], cache.generation)
    assert cache.get(keys[0]) is None and cache.get(keys[2]) == [{"i": 1}]
    time.sleep(0.1)  # past max_age_s: the expiry is what is tested (a later check only expires more)
    assert cache.get(keys[2]) is None
    rows = ResultCache(max_rows=5)
    rows.put(keys[0], [{"i": 1}] * 3, 0)
    rows.put(keys[1], [{"i": 2}] * 3, 0)  # over the row budget: the oldest entry goes
    assert rows.get(keys[0]) is None and rows.get(keys[1]) == [{"i": 2}] * 3
    rows.put(keys[2], [{"i": 3}] * 6, 0)  # larger than the whole budget: not kept
    assert rows.get(keys[2]) is None and rows.get(keys[1]) is not None


@pytest.mark.parametrize(
    ("sql", "read"),
    [
        ("SELECT 1", True),
        ("\n  with a AS (SELECT 1) SELECT * FROM a", True),
        ("EXPLAIN SELECT 1", True),
        ("INSERT INTO t SELECT 1", False),
        ("ALTER TABLE spans UPDATE x = 1 WHERE 1", False),
        ("OPTIMIZE TABLE spans", False),
        ("SELECTED", False),
    ],
)
def test_only_reads_are_cached(sql: str, read: bool) -> None:
    assert is_read(sql) is read
    assert (ResultCache.key(sql, {}) is not None) is read


def test_system_tables_are_never_cached() -> None:
    assert ResultCache.key("SELECT count() FROM system.parts", {}) is None


def test_parameters_a_statement_does_not_use_are_not_part_of_its_key() -> None:
    sql = "SELECT {a:Int64} AS a"
    assert ResultCache.key(sql, {"a": "1", "b": "2"}) == ResultCache.key(sql, {"a": "1", "b": "3"})
    assert ResultCache.key(sql, {"a": "1"}) != ResultCache.key(sql, {"a": "2"})
