"""A search over captured text reads the newest texts first and stops at its limit
(``TextStore.search``), and the runs and spans lists ask for more only when their page comes back
short, saying when what they show is the newest matches only (``collector.query.text_search``).
The store is real chDB with its text files."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest

from agentwatch_platform.collector.query import runs as runs_query
from agentwatch_platform.collector.query import spans as spans_query
from agentwatch_platform.collector.query import text_search
from agentwatch_platform.collector.storage.chdb_store import ChdbStore
from agentwatch_platform.collector.storage.columns import spans_table
from agentwatch_platform.collector.storage.texts import DAY_NS, TextStore
from tests.collector.factories import agent_run

NOW_S = time.time()


def _run_with_text(start_s: float, text: str) -> list:
    """An agent run whose LLM calls' prompts hold ``text``."""
    return [
        replace(s, input_text=f"{text} (step {s.step_index})") if s.kind == "llm" else s
        for s in agent_run(start_s=start_s)
    ]


def test_a_search_reads_the_newest_day_first_and_says_when_it_stopped(tmp_path: Path) -> None:
    texts = TextStore(tmp_path / "texts", retention_days=0)
    by_day: dict[int, set[str]] = {}
    for back in (3, 2, 1, 0):  # oldest day first, as traffic arrives
        for _ in range(3):
            run = _run_with_text(NOW_S - back * 86_400 - 3_600, "a common phrase")
            texts.stash(spans_table(run))
            by_day.setdefault(back, set()).add(run[0].trace_id)
        if back:
            texts.seal(1)  # the older days' texts are in blocks, today's in write-ahead frames
    window = (int(NOW_S * 1e9) - 5 * DAY_NS, int(NOW_S * 1e9) + DAY_NS)

    newest = texts.search("p1", *window, "COMMON phrase", limit=3)
    assert set(newest.trace_ids) == by_day[0] and not newest.complete
    two_days = texts.search("p1", *window, "common phrase", limit=6)
    assert set(two_days.trace_ids) == by_day[0] | by_day[1] and not two_days.complete
    assert two_days.trace_ids[:3] != two_days.trace_ids[3:]  # today's first
    assert set(two_days.trace_ids[:3]) == by_day[0]
    everything = texts.search("p1", *window, "common phrase", limit=100)
    assert set(everything.trace_ids) == set().union(*by_day.values()) and everything.complete
    rare = texts.search("p1", *window, "no such phrase", limit=1)
    assert rare.trace_ids == [] and rare.complete


@pytest.fixture
def store(tmp_path: Path):
    store = ChdbStore(tmp_path / "chdb", result_cache_s=0)
    store.migrate()
    yield store
    store.close()


def _ten_runs(store: ChdbStore) -> list[str]:
    """Ten runs a minute apart, the newest first, each with the phrase; one also with a ticket id."""
    runs = [_run_with_text(NOW_S - 3_600 + 60 * i, "the quarterly budget") for i in range(10)]
    runs[2] = _run_with_text(NOW_S - 3_600 + 60 * 2, "the quarterly budget, ticket-4711")
    for run in runs:  # one insert a run: a frame each, written in the order the runs started
        store.insert_spans(run)
    return [run[0].trace_id for run in reversed(runs)]


def test_the_runs_list_asks_for_more_matches_only_when_its_page_is_short(
    store: ChdbStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    newest_first = _ten_runs(store)
    asked: list[int] = []
    search = store.search_texts
    monkeypatch.setattr(store, "search_texts", lambda *a, limit: asked.append(limit) or search(*a, limit=limit))
    monkeypatch.setattr(text_search, "STEPS", (2, 4, 8))
    window = {"start": NOW_S - 7_200, "end": NOW_S}

    page = runs_query.list_runs(store, "p1", **window, limit=2, search="quarterly budget")
    assert [r.trace_id for r in page.items] == newest_first[:2] and asked == [2]
    assert page.total == 2
    assert any("newest 2 runs that match" in w for w in page.warnings)

    asked.clear()
    page = runs_query.list_runs(store, "p1", **window, limit=3, search="quarterly budget")
    assert [r.trace_id for r in page.items] == newest_first[:3] and asked == [2, 4]
    assert any("newest 4 runs that match" in w for w in page.warnings)

    asked.clear()
    page = runs_query.list_runs(store, "p1", **window, limit=50, search="quarterly budget")
    assert asked == [2, 4, 8] and len(page.items) == 8  # the steps ran out: the newest 8 of 10
    assert [r.trace_id for r in page.items] == newest_first[:8]
    assert any("newest 8 runs that match" in w for w in page.warnings)

    asked.clear()
    page = runs_query.list_runs(store, "p1", **window, limit=50, search="TICKET-4711")
    assert [r.trace_id for r in page.items] == [newest_first[7]] and asked == [2]
    assert page.warnings == []  # the whole range was searched


def test_the_span_list_and_groups_say_when_their_search_stopped(
    store: ChdbStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    _ten_runs(store)
    monkeypatch.setattr(text_search, "STEPS", (2, 4, 100))
    window = {"start": NOW_S - 7_200, "end": NOW_S}

    page = spans_query.list_spans(store, "p1", **window, limit=5, search="quarterly budget")
    assert len(page.items) == 5 and {s.kind for s in page.items} == {"llm"}  # the spans whose prompts match
    assert any("newest 2 runs that match" in w for w in page.warnings)  # 3 LLM spans a run: one step was enough

    groups = spans_query.span_groups(store, "p1", **window, by="kind", search="quarterly budget")
    assert {g.key: g.spans for g in groups.groups} == {"llm": 30}  # every run's: the steps went on to the end
    assert groups.warnings == []
