"""Exactly once by identity: a span is (project, trace_id, span_id), whatever its start time.

A redelivery dated seconds, hours or days apart from the stored copy, or rounded differently
below a microsecond, is stored once and changes no total, on both back ends, with the
in-process filter (``RecentKeys``) on or off, and after a restart (a new process, an empty
filter).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.chdb_store import ChdbStore
from agentwatch_platform.collector.storage.columns import spans_table
from agentwatch_platform.collector.storage.model import SpanRow
from tests.collector.factories import agent_run
from tests.collector.test_store import totals
from tests.support.clickhouse import REPO

NS = 1_000_000_000
SHIFTS_NS = {
    "1 ns later": 1,
    "rounded down to the microsecond": None,  # start_time - start_time % 1000
    "999 ns earlier": -999,
    "2 s later": 2 * NS,
    "3 h earlier": -3 * 3600 * NS,
    "2 days earlier": -2 * 86_400 * NS,
}


def _run(start_s: float, project: str = "p1") -> list[SpanRow]:
    """An agent run whose start times have sub-microsecond digits, as an SDK's clock gives them."""
    return [
        replace(s, start_time_ns=s.start_time_ns + 123_457, end_time_ns=s.end_time_ns + 123_457)
        for s in agent_run(project=project, start_s=start_s, steps=3)
    ]


def _shifted(rows: list[SpanRow], shift: int | None) -> list[SpanRow]:
    def moved(t: int) -> int:
        return t - t % 1000 if shift is None else t + shift

    return [replace(r, start_time_ns=moved(r.start_time_ns), end_time_ns=moved(r.end_time_ns)) for r in rows]


@pytest.mark.parametrize("shift", list(SHIFTS_NS.values()), ids=list(SHIFTS_NS))
def test_redelivery_with_another_start_time_is_stored_once(store: Store, shift: int | None) -> None:
    rows = _run(time.time() - 600)
    assert store.insert_spans(rows) == len(rows)
    before = totals(store)
    assert store.insert_spans(_shifted(rows, shift)) == 0
    assert store.insert_spans(_shifted(rows[:3], shift) + _shifted(rows[3:], shift)[::-1]) == 0  # another grouping
    assert totals(store) == before and before[0]["spans"] == len(rows)


def test_redelivery_mixed_with_new_spans_keeps_only_the_new(store: Store) -> None:
    old, new = _run(time.time() - 7200), _run(time.time() - 60)
    store.insert_spans(old)
    assert store.insert_spans(_shifted(old, 3600 * NS) + new) == len(new)
    assert totals(store)[0]["spans"] == len(old) + len(new)
    assert totals(store)[1]["runs"] == 2


def test_same_ids_in_another_project_are_another_span(store: Store) -> None:
    rows = _run(time.time() - 600)
    store.insert_spans(rows)
    assert store.insert_spans(_shifted([replace(r, project="p2") for r in rows], 5 * NS)) == len(rows)


class _CountingStore(ChdbStore):
    """A ChdbStore that counts identity look-ups."""

    lookups = 0

    def query(self, sql: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        if "trace_id IN" in sql and "span_id IN" in sql:
            self.lookups += 1
        return super().query(sql, params)


def test_filter_asks_the_store_only_about_traces_it_did_not_create(tmp_path: Path) -> None:
    store = _CountingStore(tmp_path / "chdb", recent_window_s=60)
    store.migrate()
    try:
        first, second = _run(time.time() - 300), _run(time.time() - 200)
        assert store.insert_spans(first[:5]) == 5 and store.lookups == 0  # a new trace: nothing to ask
        assert store.insert_spans(first[5:]) == len(first) - 5 and store.lookups == 0  # more of a trace it owns
        assert store.insert_spans(_shifted(first[:2], 86_400 * NS) + second) == len(second)
        assert store.lookups == 1  # only the two spans it has seen were asked about
        assert totals(store)[0]["spans"] == len(first) + len(second)
    finally:
        store.close()


def test_filter_sends_a_redelivery_of_a_trace_stored_before_it_started_to_the_store(tmp_path: Path) -> None:
    """Stored by an earlier collector days ago, re-sent dated now: the trace is known, so it is asked about."""
    rows = _run(time.time() - 2 * 86_400)
    store = ChdbStore(tmp_path / "chdb", recent_window_s=60)
    store.migrate()
    store.insert_spans(rows)
    store.close()
    store = ChdbStore(tmp_path / "chdb", recent_window_s=60)
    try:
        assert store.insert_spans(_shifted(rows, 2 * 86_400 * NS - 5 * NS)) == 0
        assert totals(store)[0]["spans"] == len(rows)
    finally:
        store.close()


def test_failed_insert_makes_the_filter_forget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = ChdbStore(tmp_path / "chdb", recent_window_s=60)
    store.migrate()
    try:
        rows = _run(time.time() - 300)
        real = store._insert_arrow

        def lands_then_fails(table: str, data: Any, **kwargs: Any) -> None:
            real(table, data, **kwargs)
            raise TimeoutError("the answer was lost, the insert was not")

        monkeypatch.setattr(store, "_insert_arrow", lands_then_fails)
        with pytest.raises(TimeoutError):
            store.insert_spans(rows)
        monkeypatch.undo()
        assert store.insert_spans(_shifted(rows, 1)) == 0
        assert totals(store)[0]["spans"] == len(rows)
    finally:
        store.close()


_RESTART_SCRIPT = """
import json, sys
from agentwatch_platform.collector.storage.chdb_store import ChdbStore
from agentwatch_platform.collector.storage.columns import spans_table, table_rows
import pyarrow.ipc as ipc

store = ChdbStore(sys.argv[1], recent_window_s=60)
store.migrate()
table = ipc.open_file(sys.argv[2]).read_all()
print(json.dumps({"stored": store.insert_spans(table)}))
store.close()
"""


def test_redelivery_after_a_restart_is_stored_once(tmp_path: Path) -> None:
    """The SIGKILL case: a new collector process, an empty filter, the exporter's retry rounded otherwise."""
    import pyarrow.ipc as ipc

    original = _run(time.time() - 120) + _run(time.time() - 60)
    redelivery = _shifted(original, None) + _run(time.time() - 30)
    outputs = []
    for rows, name in ((original, "first.arrow"), (redelivery, "second.arrow")):
        table = spans_table(rows)
        with ipc.new_file(tmp_path / name, table.schema) as writer:
            writer.write_table(table)
        script = textwrap.dedent(_RESTART_SCRIPT)
        out = subprocess.run(
            [sys.executable, "-c", script, str(tmp_path / "chdb"), str(tmp_path / name)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=REPO,
        )
        assert out.returncode == 0, out.stderr
        outputs.append(out.stdout.strip().splitlines()[-1])
    assert [json.loads(o)["stored"] for o in outputs] == [len(original), len(redelivery) - len(original)]
    store = ChdbStore(tmp_path / "chdb")
    try:
        assert totals(store)[0]["spans"] == len(redelivery)
        assert totals(store)[1]["runs"] == 3
    finally:
        store.close()
