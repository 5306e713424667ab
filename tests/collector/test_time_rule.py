"""One rule for time, checked as a property: a call counts in the window (and the bucket) its
span starts in, a run where its root starts; every reader agrees on it exactly, wherever a
window's edges fall (docs/runs.md: "What a time window contains").

Generated runs land anywhere in five hours (so whole hours, minutes and cut minutes all occur);
generated windows start and end on arbitrary seconds. Costs are multiples of 2**-10, so sums are
exact in binary and the figures must be equal, not close.
"""

from __future__ import annotations

import time
import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentwatch_platform.collector.query import cost as cost_query
from agentwatch_platform.collector.query import metrics as metrics_query
from agentwatch_platform.collector.query import overview as overview_query
from agentwatch_platform.collector.query import runs as runs_query
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.model import SpanRow
from tests.collector.factories import agent_run
from tests.collector.store_fixtures import module_store  # noqa: F401
from tests.support.examples import examples

T0 = (int(time.time()) // 86_400 - 2) * 86_400 + 7 * 3600  # 07:00 UTC two days ago
SPAN_S = 5 * 3600
COSTS = (2**-10, 2**-6, 2**-3, 0.5)

run_specs = st.lists(
    st.tuples(
        st.integers(0, SPAN_S * 1000),  # start, ms after T0
        st.integers(1, 3),  # steps
        st.sampled_from(("sim-small", "sim-large")),
        st.sampled_from(COSTS),
        st.sampled_from(("u1", "u2", "")),
        st.sampled_from(("alpha", "beta")),
    ),
    min_size=1,
    max_size=10,
)
windows = st.tuples(
    st.integers(-600, SPAN_S),  # window start, s after T0
    st.integers(1, SPAN_S),  # its length, s
    st.sampled_from((None, 60, 300, 3600, 7, 90, 1800)),  # a time series' step (None: the window)
)


def _rows(project: str, specs: list[tuple[int, int, str, float, str, str]]) -> list[SpanRow]:
    from dataclasses import replace

    rows = []
    for start_ms, steps, model, cost, user, agent in specs:
        run = agent_run(project=project, agent=agent, start_s=T0 + start_ms / 1000, steps=steps, model=model)
        rows += [replace(r, cost_usd=cost if r.kind == "llm" else 0.0, user_id=user) for r in run]
    return rows


def _calls_in(rows: list[SpanRow], lo_ns: int, hi_ns: int) -> list[SpanRow]:
    return [r for r in rows if r.kind != "run" and lo_ns <= r.start_time_ns < hi_ns]


def _runs_in(rows: list[SpanRow], lo_ns: int, hi_ns: int) -> dict[str, list[SpanRow]]:
    started = {r.trace_id for r in rows if r.kind == "run" and lo_ns <= r.start_time_ns < hi_ns}
    return {t: [r for r in rows if r.trace_id == t] for t in started}


@settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(specs=run_specs, window=windows)
def test_every_reader_agrees_on_a_window(module_store: Store, specs, window) -> None:  # noqa: F811
    store = module_store
    project = f"t{uuid.uuid4().hex[:10]}"
    rows = _rows(project, specs)
    store.insert_spans(rows)
    offset, length, step = window
    start, end = float(T0 + offset), float(T0 + offset + length)
    lo_ns, hi_ns = int(start * 1e9), int(end * 1e9)
    calls, runs = _calls_in(rows, lo_ns, hi_ns), _runs_in(rows, lo_ns, hi_ns)
    cost = sum(r.cost_usd for r in calls)
    tokens_in = sum(r.input_tokens for r in calls)

    figures = overview_query.overview(store, project, start=start, end=end).figures
    assert figures["cost_usd"].value == cost
    assert figures["input_tokens"].value == tokens_in
    assert figures["runs"].value == len(runs)

    breakdown = cost_query.cost_breakdown(store, project, start=start, end=end)
    assert breakdown.total_usd == cost
    for rows_by in (breakdown.by_model, breakdown.by_agent, breakdown.by_day):
        assert sum(r.cost_usd for r in rows_by) == cost
    by_model = {r.key: r.cost_usd for r in breakdown.by_model}
    for model in ("sim-small", "sim-large"):
        assert by_model.get(model, 0.0) == sum(r.cost_usd for r in calls if r.model == model)

    series = metrics_query.timeseries_set(
        store, project, ["cost_usd", "input_tokens", "runs"], start, end, step or length
    )
    assert [sum(p.value or 0.0 for p in s.points) for s in series] == [cost, tokens_in, len(runs)]

    listed = runs_query.list_runs(store, project, start=start, end=end, limit=500)
    assert listed.total == len(runs)
    whole_runs = {t: sum(r.cost_usd for r in spans) for t, spans in runs.items()}
    assert {r.trace_id: r.cost_usd for r in listed.items} == whole_runs
    for user in ("u1", "u2"):
        mine = runs_query.list_runs(store, project, start=start, end=end, limit=500, user_id=user)
        assert sum(r.cost_usd for r in mine.items) == sum(
            c for t, c in whole_runs.items() if runs[t][0].user_id == user
        )
