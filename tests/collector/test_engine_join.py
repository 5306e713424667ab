"""One LLM call counts once: engine spans joined to client LLM spans (``collector.ingest.engine_join``).

Every combination a team runs: traceparent propagated or not, the client recording the
response id or not, the engine span arriving before or after the client's, and an engine
with no instrumented client at all. Real stores (both back ends), real inserts and queries.
"""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from agentwatch_platform.collector.ingest.engine_join import (
    ENGINE_ONLY,
    TTFT_SOURCE,
    EngineJoin,
    billing_span_id,
    match_engine_spans,
)
from agentwatch_platform.collector.ingest.normalize import Normalizer, sdk_pricer, set_engine_figures_aside
from agentwatch_platform.collector.query import overview as overview_query
from agentwatch_platform.collector.query import runs as runs_query
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.columns import spans_table
from agentwatch_platform.collector.storage.model import SpanRow
from tests.collector.factories import new_span_id, new_trace_id

P = "join"
PRICE = Normalizer(pricer=sdk_pricer()).price


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def run_with_call(
    t0: float, *, response_id: str = "", ttft: float | None = None, tokens: tuple[int, int] = (120, 30)
) -> tuple[list[SpanRow], SpanRow]:
    """A client's run: root span and one LLM call (what openai-v2 or OpenInference record)."""
    trace = new_trace_id()
    root = SpanRow(
        P, trace, new_span_id(), "", "research", "run", int(t0 * 1e9), int((t0 + 3) * 1e9), agent_name="researcher"
    )
    llm = SpanRow(
        P,
        trace,
        new_span_id(),
        root.span_id,
        "chat sim-small",
        "llm",
        int((t0 + 1) * 1e9),
        int((t0 + 2) * 1e9),
        model="sim-small",
        input_tokens=tokens[0],
        output_tokens=tokens[1],
        request_id=response_id,
        ttft_s=ttft,
        agent_name="researcher",
    )
    priced = PRICE("sim-small", "", tokens[0], tokens[1], 0)
    assert priced is not None
    llm.cost_usd, llm.price_version = priced
    return [root, llm], llm


def engine_span(call: SpanRow, *, parent: bool, request_id: str = "chatcmpl-1", cached: int = 64) -> SpanRow:
    """vLLM's ``llm_request`` for the call: in the client's trace (traceparent) or in one of its own."""
    priced = PRICE("sim-small", "", call.input_tokens, call.output_tokens, cached)
    assert priced is not None
    row = SpanRow(
        P,
        call.trace_id if parent else new_trace_id(),
        new_span_id(),
        call.span_id if parent else "",
        "llm_request",
        "engine",
        call.start_time_ns + 10_000_000,
        call.end_time_ns - 10_000_000,
        model="sim-small",
        input_tokens=call.input_tokens,
        output_tokens=call.output_tokens,
        cached_tokens=cached,
        cost_usd=priced[0],
        price_version=priced[1],
        request_id=request_id,
        ttft_s=0.042,
        queue_s=0.01,
        prefill_s=0.03,
        decode_s=0.5,
        tpot_s=0.017,
    )
    set_engine_figures_aside(row)  # as the normaliser stores an engine span
    return row


def engine_cost(cached: int = 64) -> float:
    priced = PRICE("sim-small", "", 120, 30, cached)
    assert priced is not None
    return priced[0]


def ingest(store: Store, join: EngineJoin, rows: list[SpanRow]) -> None:
    store.insert_spans(join.prepare(spans_table(rows), store))


def totals(store: Store, t0: float) -> dict[str, float | None]:
    figures = overview_query.overview(store, P, start=t0 - 60, end=t0 + 600).figures
    runs = runs_query.list_runs(store, P, start=t0 - 60, end=t0 + 600).items
    return {
        "runs": len(runs),
        "input_tokens": figures["input_tokens"].value,
        "output_tokens": figures["output_tokens"].value,
        "cost_usd": figures["cost_usd"].value,
        "ttft_p50": figures["ttft_p50"].value,
        "cached_tokens": store.query(
            "SELECT sum(cached_tokens) AS n FROM spans WHERE project = {p:String} AND kind != 'run'", {"p": P}
        )[0]["n"],
        "run_cost": runs[0].cost_usd if runs else None,
        "run_llm_calls": runs[0].llm_calls if runs else None,
    }


@pytest.fixture
def t0() -> float:
    return float(int(time.time()) - 900)


@pytest.mark.parametrize("parent", [True, False], ids=["traceparent", "no-traceparent"])
@pytest.mark.parametrize("engine_first", [True, False], ids=["engine-first", "client-first"])
def test_client_and_engine_count_one_call(store: Store, t0: float, parent: bool, engine_first: bool) -> None:
    clock = Clock(t0 + 5)
    join = EngineJoin(wait_s=30, pricer=PRICE, clock=clock)
    run, call = run_with_call(t0, response_id="chatcmpl-1")
    engine = engine_span(call, parent=parent)
    for rows in ([engine], run) if engine_first else (run, [engine]):
        ingest(store, join, rows)
    clock.now = t0 + 600
    assert join.reconcile(store) == 0  # the client accounts for the call: nothing billed twice
    got = totals(store, t0)
    assert (got["runs"], got["input_tokens"], got["output_tokens"], got["run_llm_calls"]) == (1, 120, 30, 1)
    # the client recorded no cached tokens: the engine's 64 count once, at the cached price
    assert got["cached_tokens"] == 64
    assert got["cost_usd"] == pytest.approx(engine_cost())
    assert got["run_cost"] == pytest.approx(got["cost_usd"])
    assert got["ttft_p50"] == pytest.approx(0.042, rel=1e-3)  # the engine's TTFT, counted once


def test_engine_facts_fill_the_client_span_that_lacks_them(store: Store, t0: float) -> None:
    join = EngineJoin(wait_s=30, pricer=PRICE, clock=Clock(t0 + 5))
    run, call = run_with_call(t0, response_id="chatcmpl-7")
    ingest(store, join, [engine_span(call, parent=False, request_id="chatcmpl-7")])
    ingest(store, join, run)
    (span,) = [s for s in runs_query.get_run(store, P, call.trace_id).spans if s.kind == "llm"]
    assert (span.ttft_s, span.queue_s, span.prefill_s, span.decode_s) == pytest.approx((0.042, 0.01, 0.03, 0.5))
    assert span.attributes[TTFT_SOURCE] == "engine"
    assert span.cached_tokens == 64  # and priced with the cache discount
    assert span.cost_usd == pytest.approx(PRICE("sim-small", "", 120, 30, 64)[0])  # type: ignore[index]
    assert totals(store, t0)["ttft_p50"] == pytest.approx(0.042, rel=1e-3)


def test_client_ttft_wins_over_the_engines(store: Store, t0: float) -> None:
    join = EngineJoin(wait_s=30, pricer=PRICE, clock=Clock(t0 + 5))
    run, call = run_with_call(t0, response_id="chatcmpl-8", ttft=0.2)
    ingest(store, join, [engine_span(call, parent=True, request_id="chatcmpl-8")])
    ingest(store, join, run)
    (span,) = [s for s in runs_query.get_run(store, P, call.trace_id).spans if s.kind == "llm"]
    assert span.ttft_s == pytest.approx(0.2) and TTFT_SOURCE not in span.attributes
    assert span.queue_s == pytest.approx(0.01)


def test_client_without_response_id_joins_by_usage_and_time(store: Store, t0: float) -> None:
    """OpenInference records no response id: same model, tokens and time window join them."""
    clock = Clock(t0 + 5)
    join = EngineJoin(wait_s=30, pricer=PRICE, clock=clock)
    run, call = run_with_call(t0, response_id="")
    ingest(store, join, [engine_span(call, parent=False, request_id="chatcmpl-9")])
    ingest(store, join, run)
    clock.now = t0 + 600
    assert join.reconcile(store) == 0
    assert totals(store, t0)["input_tokens"] == 120
    # and after a restart (nothing in memory), the store alone decides the same
    assert EngineJoin(wait_s=30, clock=Clock(t0 + 600)).reconcile(store) == 0


def test_engine_only_call_is_billed_once_and_is_no_run(store: Store, t0: float) -> None:
    clock = Clock(t0 + 5)
    join = EngineJoin(wait_s=30, pricer=PRICE, clock=clock)
    _, call = run_with_call(t0)
    engine = engine_span(call, parent=False)
    ingest(store, join, [engine])
    assert join.reconcile(store) == 0  # not yet: the client may still come
    clock.now = t0 + 600
    assert join.reconcile(store) == 1
    assert EngineJoin(wait_s=30, clock=Clock(t0 + 700)).reconcile(store) == 1  # a restart re-bills: deduplicated
    got = totals(store, t0)
    assert (got["runs"], got["input_tokens"], got["output_tokens"]) == (0, 120, 30)
    assert got["cost_usd"] == pytest.approx(engine_cost())
    assert got["ttft_p50"] == pytest.approx(0.042, rel=1e-3)
    rows = store.query("SELECT span_id, kind, attributes FROM spans WHERE project = {p:String} ORDER BY kind", {"p": P})
    assert [(r["kind"], r["span_id"]) for r in rows] == [
        ("engine", engine.span_id),
        ("llm", billing_span_id(engine.span_id)),
    ]
    assert rows[1]["attributes"][ENGINE_ONLY] == "true"


def test_engine_call_inside_a_run_without_client_llm_span_counts_in_the_run(store: Store, t0: float) -> None:
    """An uninstrumented client that still propagates traceparent: the engine is the call's only record."""
    clock = Clock(t0 + 5)
    join = EngineJoin(wait_s=30, pricer=PRICE, clock=clock)
    run, call = run_with_call(t0)
    root = run[0]
    engine = replace(
        engine_span(call, parent=True),
        parent_span_id=root.span_id,
        start_time_ns=int((t0 + 4) * 1e9),
        end_time_ns=int((t0 + 5) * 1e9),
    )
    ingest(store, join, [root, engine])
    clock.now = t0 + 600
    assert join.reconcile(store) == 1
    got = totals(store, t0)
    assert (got["runs"], got["input_tokens"], got["run_llm_calls"]) == (1, 120, 1)
    assert got["run_cost"] == pytest.approx(engine_cost())


def test_matching_rules_pair_each_client_span_once() -> None:
    def e(span: str, **kw: object) -> dict:
        return {
            "span_id": span,
            "parent_span_id": "",
            "trace_id": "t-e",
            "request_id": "",
            "model": "m",
            "input_tokens": 1,
            "output_tokens": 1,
            "start_time": 2,
            "end_time": 3,
            **kw,
        }

    def c(span: str, **kw: object) -> dict:
        return {
            "span_id": span,
            "trace_id": "t-c",
            "request_id": "",
            "engine_span_id": "",
            "model": "m",
            "input_tokens": 1,
            "output_tokens": 1,
            "start_time": 1,
            "end_time": 4,
            **kw,
        }

    engines = [e("e1", request_id="r1"), e("e2", request_id="r2"), e("e3"), e("e4", model="other")]
    clients = [c("c1", request_id="r1"), c("c3")]
    left = {x["span_id"] for x in match_engine_spans(engines, clients)}
    assert "e1" not in left and "e4" in left and len(left) == 2  # c3 (no id) pairs with one of e2/e3
    # two identical engine calls, one client: one stays unmatched
    assert len(match_engine_spans([e("a"), e("b")], [c("c")])) == 1


def test_run_detail_shows_the_engine_timings_of_a_client_span_stored_first(store: Store, t0: float) -> None:
    join = EngineJoin(wait_s=30, pricer=PRICE, clock=Clock(t0 + 5))
    run, call = run_with_call(t0, response_id="chatcmpl-11")
    ingest(store, join, run)  # the client first (openai-v2 exports at once, the engine batches)
    engine = engine_span(call, parent=False, request_id="chatcmpl-11")
    ingest(store, join, [engine])
    detail = runs_query.get_run(store, P, call.trace_id)
    assert detail is not None
    (span,) = [s for s in detail.spans if s.kind == "llm"]
    (moved,) = [s for s in detail.spans if s.kind == "engine"]  # moved under the client's span
    assert moved.parent_span_id == call.span_id and moved.attributes["agentwatch.engine.trace_id"] == engine.trace_id
    assert (span.ttft_s, span.queue_s, span.decode_s) == pytest.approx((0.042, 0.01, 0.5))
    assert span.attributes[TTFT_SOURCE] == "engine"


def test_stored_client_without_response_id_joins_by_usage_and_time(store: Store, t0: float) -> None:
    """OpenInference, client first: the engine span still finds its call by model, tokens and time."""
    clock = Clock(t0 + 5)
    join = EngineJoin(wait_s=30, pricer=PRICE, clock=clock)
    run, call = run_with_call(t0, response_id="")
    ingest(store, join, run)
    ingest(store, join, [engine_span(call, parent=False, request_id="chatcmpl-12")])
    detail = runs_query.get_run(store, P, call.trace_id)
    assert detail is not None
    assert [s.kind for s in detail.spans if s.parent_span_id == call.span_id] == ["engine"]
    clock.now = t0 + 600
    assert join.reconcile(store) == 0
    assert totals(store, t0)["cached_tokens"] == 64


@pytest.mark.parametrize("engine_first", [True, False], ids=["engine-first", "client-first"])
def test_run_detail_calls_add_up_to_the_run(
    store: Store, t0: float, engine_first: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """The engine's cached-token discount lands on the call's row: per-call costs and tokens sum
    to the run's exactly, no row is negative, and no false "cost total" error is logged."""
    join = EngineJoin(wait_s=30, pricer=PRICE, clock=Clock(t0 + 5))
    run, call = run_with_call(t0, response_id="chatcmpl-21")
    engine = engine_span(call, parent=True, request_id="chatcmpl-21")
    for rows in ([engine], run) if engine_first else (run, [engine]):
        ingest(store, join, rows)
    with caplog.at_level("ERROR"):
        detail = runs_query.get_run(store, P, call.trace_id)
    assert detail is not None and not [r for r in caplog.records if r.levelname == "ERROR"]
    (llm,) = [s for s in detail.spans if s.kind == "llm"]
    assert llm.cached_tokens == 64 and llm.cost_usd == engine_cost()  # the discount on the call's row
    assert all(s.cost_usd >= 0 for s in detail.spans)
    assert sum(s.cost_usd for s in detail.spans if s.kind != "run") == detail.run.cost_usd
    for name in ("input_tokens", "output_tokens", "cached_tokens"):
        assert sum(getattr(s, name) for s in detail.spans if s.kind != "run") == getattr(detail.run, name)


ENGINE_HOME, AGENTS = "engine-home", "agents"  # one engine exporting with the first project's key


def spend(store: Store) -> dict[str, float]:
    rows = store.query("SELECT toString(project) AS p, sum(cost_usd) AS c FROM spans WHERE kind != 'run' GROUP BY p")
    return {r["p"]: r["c"] for r in rows}


@pytest.mark.parametrize("link", ["traceparent", "request-id"])
@pytest.mark.parametrize("engine_first", [True, False], ids=["engine-first", "client-first"])
def test_engine_shared_by_projects_bills_each_call_once(store: Store, t0: float, link: str, engine_first: bool) -> None:
    """Project B's agent calls an engine that exports to project A: the call is billed once, in B
    (with the engine's cached-token discount and timings); A bills only the call nobody claimed."""
    clock = Clock(t0 + 5)
    join = EngineJoin(wait_s=30, pricer=PRICE, clock=clock)
    run, call = run_with_call(t0, response_id="chatcmpl-31")
    run = [replace(row, project=AGENTS) for row in run]
    engine = replace(engine_span(call, parent=link == "traceparent", request_id="chatcmpl-31"), project=ENGINE_HOME)
    _, unclaimed = run_with_call(t0 + 10)  # a call of a client that records nothing
    lonely = replace(engine_span(unclaimed, parent=False, request_id="chatcmpl-32"), project=ENGINE_HOME)
    for rows in ([engine, lonely], run) if engine_first else (run, [engine, lonely]):
        ingest(store, join, rows)
    clock.now = t0 + 600
    assert join.reconcile(store) == 1  # the unclaimed call only
    assert EngineJoin(wait_s=30, clock=Clock(t0 + 700)).reconcile(store) == 1  # after a restart: deduplicated
    got = spend(store)
    assert got[AGENTS] == pytest.approx(engine_cost(), rel=1e-12)  # B's call, at the engine's cached price
    assert got[ENGINE_HOME] == pytest.approx(engine_cost(), rel=1e-12)  # A: the unclaimed call alone
    assert sum(got.values()) == pytest.approx(2 * engine_cost(), rel=1e-12)  # every call once, installation-wide
    detail = runs_query.get_run(store, AGENTS, call.trace_id)
    assert detail is not None and detail.run.cost_usd == pytest.approx(engine_cost(), rel=1e-12)
    (llm,) = [s for s in detail.spans if s.kind == "llm"]
    assert (llm.cached_tokens, llm.queue_s) == (64, pytest.approx(0.01))
    assert llm.cost_usd == detail.run.cost_usd  # the call's row holds the call's whole cost
    home = overview_query.overview(store, ENGINE_HOME, start=t0 - 60, end=t0 + 600).figures
    assert home["input_tokens"].value == 120  # the unclaimed call's tokens, not B's call again
