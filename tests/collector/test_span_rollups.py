"""The span explorer's group-bys from the per-minute rollup (``span_key_minutes``) equal the same
group-bys over every span, with the range's ends inside minutes, after late spans, a deletion and
a re-price: counts, runs and tokens exactly, cost to the float's rounding, latency percentiles
within the TDigest's error (both sides are TDigest estimates)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from agentwatch import PriceTable

from agentwatch_platform.collector.query import spans as query
from agentwatch_platform.collector.query.reprice import reprice
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.deletion import DeletionJournal, Scope, delete_data
from agentwatch_platform.collector.storage.model import SpanRow
from agentwatch_platform.collector.storage.sql import span_keys
from tests.collector.span_fixture import TOOL_FAILURE, generate

P = "roll"
T = (int(time.time()) // 3600 - 3) * 3600  # a whole hour; the runs start every 50 s from it
# Both ends inside a minute: the cut edges come from the spans, the minutes between from the rollup.
CUT = {"start": T + 17.25, "end": T + 2_500.5}
# ... and whole hours between them, read from span_key_hours (the fixture's runs fill three hours).
HOURS = {"start": T + 1_234.5, "end": T + 7_200 + 1_500.25}
FILTERS: list[dict[str, Any]] = [
    {},
    {"kind": "tool"},
    {"failed": True},
    {"model": "sim-large"},
    {"error_type": TOOL_FAILURE},
    {"error_type": f"{TOOL_FAILURE} (HTTP 503)"},
    {"status": "timeout", "agent": "writer"},
    {"version": "1.1", "name": "chat"},
    {"tool": "fetch", "failed": False},
]


def _generated() -> list[SpanRow]:
    """Runs over three hours, from T."""
    return [s for hour, seed in ((0, 7), (1, 8), (2, 9)) for s in generate(P, T + 3600 * hour, seed=seed).spans]


def _in(window: dict[str, float], spans: list[SpanRow]) -> list[SpanRow]:
    return [s for s in spans if window["start"] * 1e9 <= s.start_time_ns < window["end"] * 1e9]


def _figures(store: Store, by: str, *, rollups: bool, **kwargs: Any) -> list[tuple]:
    got = query.span_groups(store, P, by=by, sort="-spans", limit=1000, rollups=rollups, **(CUT | kwargs))
    return [
        (
            g.key,
            g.spans,
            g.failures,
            g.runs,
            g.input_tokens,
            g.output_tokens,
            pytest.approx(g.cost_usd, rel=1e-9, abs=1e-12),
            pytest.approx(g.duration_p50_s, rel=0.1, abs=0.05),
            pytest.approx(g.duration_p95_s, rel=0.1, abs=0.05),
        )
        for g in got.groups
    ]


def assert_rollups_equal_spans(
    store: Store, filters: list[dict[str, Any]] = FILTERS, window: dict[str, float] = HOURS
) -> None:
    for by in span_keys.GROUP_KEYS:
        for kwargs in filters:
            spans = _figures(store, by, rollups=False, **window, **kwargs)
            assert spans or kwargs, (by, kwargs)  # something to compare
            assert _figures(store, by, rollups=True, **window, **kwargs) == spans, (by, kwargs, window)
    for kwargs in filters:  # a list's count
        counts = [query.list_spans(store, P, **window, **kwargs, rollups=r).total for r in (True, False)]
        assert counts[0] == counts[1], (kwargs, window)


def _total_spans(store: Store) -> int:
    return sum(g.spans for g in query.span_groups(store, P, by="kind", **HOURS).groups)


def test_the_rollups_answer_the_filters_they_hold_and_no_others() -> None:
    params: dict[str, Any] = {"project": P, "start_ns": 0, "end_ns": 3600 * 10**9, "kind": "tool", "failed": True}
    assert query._rollups(dict(params)) is not None
    for extra in ({"min_duration_s": 1.0}, {"attr_key_0": "k"}, {"user_id": "u"}, {"step": "s"}, {"search": "x"}):
        assert query._rollups(params | extra) is None, extra
    assert {"user", "session", "step"}.isdisjoint(span_keys.GROUP_KEYS)


def test_a_range_is_cut_into_hours_minutes_and_edges() -> None:
    parts = query._parts(int((T + 17.25) * 1e9), int((T + 7_200 + 1_500.25) * 1e9))
    assert parts == {"lo_s": T + 60, "hi_s": T + 8_700, "lo_h": T + 3_600, "hi_h": T + 7_200}
    assert query._parts(int((T + 61.5) * 1e9), int((T + 119) * 1e9)) == {"lo_s": 0, "hi_s": 0, "lo_h": 0, "hi_h": 0}
    assert query._parts(T * 10**9, (T + 600) * 10**9) == {"lo_s": T, "hi_s": T + 600, "lo_h": 0, "hi_h": 0}


def test_rollup_groups_equal_span_groups_with_cut_edges(store: Store) -> None:
    store.insert_spans(_generated())
    store.insert_spans(generate("other", T, runs=10, seed=9).spans)  # another project: never counted
    assert_rollups_equal_spans(store)
    assert_rollups_equal_spans(store, window=CUT)
    within_a_minute = {"start": T + 61.5, "end": T + 119.0}  # no whole minute: every span from the spans
    for by in ("tool", "kind"):
        assert _figures(store, by, rollups=True, **within_a_minute) == _figures(
            store, by, rollups=False, **within_a_minute
        )


def test_late_spans_count_in_their_minutes(store: Store) -> None:
    generated = _generated()
    early, late = generated[::2], generated[1::2]  # every minute gets a second insert, later
    store.insert_spans(early)
    assert_rollups_equal_spans(store, FILTERS[:3])
    store.insert_spans(late)
    assert_rollups_equal_spans(store, FILTERS[:3])
    assert _total_spans(store) == len(_in(HOURS, generated))


def test_a_deleted_run_leaves_the_rollup(store: Store, tmp_path: Path) -> None:
    generated = _generated()
    store.insert_spans(generated)
    trace = generated[len(generated) // 2].trace_id  # a run of the whole hour, read from span_key_hours
    before = _total_spans(store)
    delete_data(store, Scope(P, "trace", trace), actor="test", journal=DeletionJournal(tmp_path / "journal"))
    gone = [s for s in _in(HOURS, generated) if s.trace_id == trace]
    assert gone and _total_spans(store) == before - len(gone)
    assert_rollups_equal_spans(store, FILTERS[:4])


def test_a_reprice_rebuilds_the_rollups_cost(store: Store) -> None:
    store.insert_spans(_generated())
    before = {g.key: g.cost_usd for g in query.span_groups(store, P, by="model", **HOURS).groups}
    prices = PriceTable({"sim-small": {"input": 100.0, "output": 200.0, "cached": 50.0}}, hosted=False)
    reprice(store, prices, since=T, project=P, now=T + 3600)
    after = {g.key: g.cost_usd for g in query.span_groups(store, P, by="model", **HOURS).groups}
    assert after["sim-small"] != pytest.approx(before["sim-small"])
    assert_rollups_equal_spans(store, [{}, {"model": "sim-small"}])
