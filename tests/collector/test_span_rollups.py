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
from agentwatch_platform.collector.storage.sql import span_keys
from tests.collector.span_fixture import TOOL_FAILURE, generate

P = "roll"
T = (int(time.time()) // 3600 - 3) * 3600  # a whole hour; the runs start every 50 s from it
# Both ends inside a minute: the cut edges come from the spans, the minutes between from the rollup.
CUT = {"start": T + 17.25, "end": T + 2_500.5}
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


def assert_rollups_equal_spans(store: Store, filters: list[dict[str, Any]] = FILTERS) -> None:
    for by in span_keys.GROUP_KEYS:
        for kwargs in filters:
            spans = _figures(store, by, rollups=False, **kwargs)
            assert spans or kwargs, (by, kwargs)  # something to compare
            assert _figures(store, by, rollups=True, **kwargs) == spans, (by, kwargs)


def _total_spans(store: Store) -> int:
    return sum(g.spans for g in query.span_groups(store, P, by="kind", **CUT).groups)


def test_the_rollup_answers_the_explorers_group_bys_and_no_others() -> None:
    params: dict[str, Any] = {"project": P, "start_ns": 0, "end_ns": 3600 * 10**9, "kind": "tool", "failed": True}
    assert query._rolled_up("tool", dict(params), "", "failures", True) is not None
    for by, extra in (("user", {}), ("step", {}), ("tool", {"min_duration_s": 1.0}), ("tool", {"attr_key_0": "k"})):
        assert query._rolled_up(by, params | extra, "", "failures", True) is None, (by, extra)


def test_rollup_groups_equal_span_groups_with_cut_edges(store: Store) -> None:
    store.insert_spans(generate(P, T).spans)
    store.insert_spans(generate("other", T, runs=10, seed=9).spans)  # another project: never counted
    assert_rollups_equal_spans(store)
    within_a_minute = {"start": T + 61.5, "end": T + 119.0}  # no whole minute: every span from the spans
    for by in ("tool", "kind"):
        assert _figures(store, by, rollups=True, **within_a_minute) == _figures(
            store, by, rollups=False, **within_a_minute
        )


def test_late_spans_count_in_their_minutes(store: Store) -> None:
    generated = generate(P, T)
    early, late = generated.spans[::2], generated.spans[1::2]  # every minute gets a second insert, later
    store.insert_spans(early)
    assert_rollups_equal_spans(store, FILTERS[:3])
    store.insert_spans(late)
    assert_rollups_equal_spans(store, FILTERS[:3])
    in_range = [s for s in generated.spans if CUT["start"] * 1e9 <= s.start_time_ns < CUT["end"] * 1e9]
    assert _total_spans(store) == len(in_range)


def test_a_deleted_run_leaves_the_rollup(store: Store, tmp_path: Path) -> None:
    generated = generate(P, T)
    store.insert_spans(generated.spans)
    trace = generated.spans[len(generated.spans) // 2].trace_id
    before = _total_spans(store)
    delete_data(store, Scope(P, "trace", trace), actor="test", journal=DeletionJournal(tmp_path / "journal"))
    gone = [
        s for s in generated.spans if s.trace_id == trace and CUT["start"] * 1e9 <= s.start_time_ns < CUT["end"] * 1e9
    ]
    assert gone and _total_spans(store) == before - len(gone)
    assert_rollups_equal_spans(store, FILTERS[:4])


def test_a_reprice_rebuilds_the_rollups_cost(store: Store) -> None:
    store.insert_spans(generate(P, T).spans)
    before = {g.key: g.cost_usd for g in query.span_groups(store, P, by="model", **CUT).groups}
    prices = PriceTable({"sim-small": {"input": 100.0, "output": 200.0, "cached": 50.0}}, hosted=False)
    reprice(store, prices, since=T, project=P, now=T + 3600)
    after = {g.key: g.cost_usd for g in query.span_groups(store, P, by="model", **CUT).groups}
    assert after["sim-small"] != pytest.approx(before["sim-small"])
    assert_rollups_equal_spans(store, [{}, {"model": "sim-small"}])
