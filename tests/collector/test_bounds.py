"""Values from outside are bounded (``collector.ingest.bounds``): a bad field is dropped with a message
naming it and its span, never sinks that span or the others, and never reaches a total as
null, negative or infinite; times the store cannot keep are rejected, never silently lost."""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest
from agentwatch import semconv as sc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from agentwatch_platform.collector.ingest import bounds, spec
from agentwatch_platform.collector.ingest.bounds import (
    MAX_COST_USD,
    MAX_SECONDS,
    MAX_TIME_NS,
    MAX_TOKENS,
    BadValue,
    latest_start_ns,
)
from agentwatch_platform.collector.ingest.normalize import Normalizer, normalize_span, sdk_pricer
from agentwatch_platform.collector.ingest.otlp import native
from agentwatch_platform.collector.ingest.otlp.decode import JSON, PROTOBUF, Converted, convert, response_body
from agentwatch_platform.collector.query import cost as cost_query
from agentwatch_platform.collector.query import overview as overview_query
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.reference_agent.workload import otlp_json
from tests.collector.ingest_helpers import otlp_request
from tests.collector.store_fixtures import open_backend
from tests.support.examples import examples

NZ = Normalizer(pricer=sdk_pricer())
SMALL_IN, SMALL_OUT = 0.10, 0.40  # sim-small, USD per million tokens
INPUT, OUTPUT, CACHED = (
    sc.GEN_AI_USAGE_INPUT_TOKENS,
    sc.GEN_AI_USAGE_OUTPUT_TOKENS,
    sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
)
BOUNDED_KEYS = sorted(
    k
    for k, (column, _, _) in spec.ATTRIBUTES.items()
    if column
    in (
        "input_tokens",
        "output_tokens",
        "cached_tokens",
        "cost_usd",
        "ttft_s",
        "tpot_s",
        "queue_s",
        "prefill_s",
        "decode_s",
    )
)
PATHS = [
    pytest.param(fmt, use_native, id=f"{fmt}-{'native' if use_native else 'python'}")
    for fmt in (PROTOBUF, JSON)
    for use_native in (False, True)
]


# --- the converters ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, kept", [(0, 0), (838, 838), (MAX_TOKENS, MAX_TOKENS), ("12", 12), (12.7, 12), (None, None), ("", None)]
)
def test_token_counts_in_bounds_are_kept(value: Any, kept: int | None) -> None:
    assert bounds.tokens(value) == kept


@pytest.mark.parametrize(
    "value",
    [
        -1,
        -40_000_000,
        MAX_TOKENS + 1,
        10**18,
        1e18,
        2**64,
        float("nan"),
        float("inf"),
        "many",
        "1e3",
        True,
        [1],
        b"\x01",
    ],
)
def test_token_counts_out_of_bounds_are_bad_values(value: Any) -> None:
    with pytest.raises(BadValue):
        bounds.tokens(value)


@pytest.mark.parametrize(
    "value, kept",
    [(0.0, 0.0), (0.25, 0.25), (3, 3.0), ("0.5", 0.5), (MAX_SECONDS, MAX_SECONDS), (None, None), ("", None)],
)
def test_durations_in_bounds_are_kept(value: Any, kept: float | None) -> None:
    assert bounds.seconds(value) == kept


@pytest.mark.parametrize(
    "value",
    [-0.001, -1, MAX_SECONDS + 0.5, 1e308, 10**400, float("nan"), float("inf"), float("-inf"), "soon", False, {}],
)
def test_durations_out_of_bounds_are_bad_values(value: Any) -> None:
    with pytest.raises(BadValue):
        bounds.seconds(value)


@pytest.mark.parametrize(
    "value, kept", [(0.0, 0.0), (1.9e-3, 1.9e-3), (5, 5.0), ("0.01", 0.01), (MAX_COST_USD, MAX_COST_USD), (None, None)]
)
def test_costs_in_bounds_are_kept(value: Any, kept: float | None) -> None:
    assert bounds.cost_usd(value) == kept


@pytest.mark.parametrize("value", [-100.0, -1e-9, MAX_COST_USD + 0.01, 1e308, float("nan"), float("inf"), "free", True])
def test_costs_out_of_bounds_are_bad_values(value: Any) -> None:
    with pytest.raises(BadValue):
        bounds.cost_usd(value)


def test_every_attribute_of_a_bounded_column_goes_through_its_bound() -> None:
    """A dialect's new attribute name for tokens, cost or a latency must use the column's bound."""
    expected = {
        "input_tokens": bounds.tokens,
        "output_tokens": bounds.tokens,
        "cached_tokens": bounds.tokens,
        "cost_usd": bounds.cost_usd,
        **dict.fromkeys(("ttft_s", "tpot_s", "queue_s", "prefill_s", "decode_s"), bounds.seconds),
    }
    for key, (column, _, convert_fn) in spec.ATTRIBUTES.items():
        if column in expected:
            assert convert_fn is expected[column], key


def test_the_latest_start_leaves_room_for_the_retention() -> None:
    assert latest_start_ns(0) == MAX_TIME_NS == 4_294_967_295 * 10**9
    assert latest_start_ns(30) == MAX_TIME_NS - 30 * 86_400 * 10**9


# --- one span ------------------------------------------------------------------------------------


def _normalized(attrs: dict[str, Any], **kwargs: Any) -> tuple[Any, list[str]]:
    warnings: list[str] = []
    row = normalize_span(
        attrs,
        span_id="00000000000000ab",
        normalizer=NZ,
        warn=lambda where, why: warnings.append(f"{where}: {why}"),
        **kwargs,
    )
    return row, warnings


def _llm(**attrs: Any) -> dict[str, Any]:
    return {sc.AGENTWATCH_SPAN_KIND: "llm", sc.GEN_AI_REQUEST_MODEL: "sim-small", **attrs}


def test_a_huge_token_count_is_dropped_and_never_priced() -> None:
    row, warnings = _normalized(_llm(**{INPUT: 10**18, OUTPUT: 20}))
    assert (row.input_tokens, row.output_tokens) == (0, 20)
    assert row.cost_usd == pytest.approx(20 * SMALL_OUT / 1e6)
    assert warnings == [
        f"span 00000000000000ab: {INPUT} = 1000000000000000000 is outside 0..100,000,000 tokens; dropped"
    ]


def test_a_negative_token_count_never_makes_a_negative_cost() -> None:
    row, warnings = _normalized(_llm(**{INPUT: -40_000_000, OUTPUT: -1, CACHED: -5}))
    assert (row.input_tokens, row.output_tokens, row.cached_tokens, row.cost_usd) == (0, 0, 0, 0.0)
    assert len(warnings) == 3 and all(key in " ".join(warnings) for key in (INPUT, OUTPUT, CACHED))


def test_an_sdk_cost_out_of_bounds_is_dropped_and_the_collector_price_stays() -> None:
    row, warnings = _normalized(
        {sc.AGENTWATCH_SPAN_KIND: "llm", sc.GEN_AI_REQUEST_MODEL: "no-such-model", sc.AW_COST_USD: 1e308}
    )
    assert row.cost_usd == 0.0 and sc.AW_COST_USD in warnings[0]
    row, _ = _normalized(_llm(**{INPUT: 100, sc.AW_COST_USD: float("nan")}))
    assert row.cost_usd == pytest.approx(100 * SMALL_IN / 1e6)


def test_negative_or_endless_latencies_are_dropped_as_not_measured() -> None:
    row, warnings = _normalized(
        _llm(**{sc.AW_TTFT: -0.3, sc.AW_TPOT: float("inf"), sc.GEN_AI_LATENCY_TIME_IN_QUEUE: 10 * MAX_SECONDS})
    )
    assert (row.ttft_s, row.tpot_s, row.queue_s) == (None, None, None)
    assert [w.split(": ")[1].split(" ")[0] for w in warnings] == [
        sc.AW_TTFT,
        sc.AW_TPOT,
        sc.GEN_AI_LATENCY_TIME_IN_QUEUE,
    ]


def test_a_bad_value_of_a_better_attribute_leaves_the_next_one() -> None:
    row, warnings = _normalized(_llm(**{sc.AW_TTFT: -1.0, sc.GEN_AI_LATENCY_TIME_TO_FIRST_TOKEN: 0.2}))
    assert row.ttft_s == 0.2 and len(warnings) == 1


def test_an_end_before_the_start_is_set_to_the_start_with_a_warning() -> None:
    row, warnings = _normalized({}, start_time_ns=2_000, end_time_ns=1_000)
    assert (row.start_time_ns, row.end_time_ns) == (2_000, 2_000)
    assert warnings == [
        "span 00000000000000ab: end time 1000 ns is before the start time 2000 ns; set to the start time"
    ]


def test_values_in_bounds_give_no_warning() -> None:
    row, warnings = _normalized(
        _llm(**{INPUT: 100, OUTPUT: 20, CACHED: 50, sc.AW_TTFT: 0.25, sc.AW_COST_USD: 0.5}),
        start_time_ns=1,
        end_time_ns=2,
    )
    assert warnings == [] and (row.input_tokens, row.ttft_s) == (100, 0.25)


# --- requests: protobuf and JSON, native and Python paths -----------------------------------------


def _hostile_request(trace_id: bytes, now: int) -> tuple[bytes, dict[str, bytes]]:
    ids = {
        name: os.urandom(8)
        for name in ("good", "huge", "negative", "sdk_cost", "ttft", "future", "late_end", "backwards")
    }
    spans = [
        {"span_id": ids["good"], "name": "good", "attrs": _llm(**{INPUT: 1000, OUTPUT: 100, sc.AW_TTFT: 0.2})},
        {"span_id": ids["huge"], "name": "huge", "attrs": _llm(**{INPUT: 10**18, OUTPUT: 10})},
        {"span_id": ids["negative"], "name": "negative", "attrs": _llm(**{INPUT: -40_000_000, OUTPUT: 10})},
        {
            "span_id": ids["sdk_cost"],
            "name": "sdk_cost",
            "attrs": {sc.AGENTWATCH_SPAN_KIND: "llm", sc.GEN_AI_REQUEST_MODEL: "own", sc.AW_COST_USD: 1e308},
        },
        {"span_id": ids["ttft"], "name": "ttft", "attrs": _llm(**{OUTPUT: 10, sc.AW_TTFT: -5.0})},
        {"span_id": ids["future"], "name": "future", "start": MAX_TIME_NS + 10**9, "end": MAX_TIME_NS + 2 * 10**9},
        {"span_id": ids["late_end"], "name": "late_end", "start": now, "end": 2**63 - 1},
        {"span_id": ids["backwards"], "name": "backwards", "start": now, "end": now - 10**9},
    ]
    return otlp_request(trace_id, spans).SerializeToString(), ids


def _convert(body: bytes, fmt: str, use_native: bool, **kwargs: Any) -> Converted:
    payload = otlp_json(body) if fmt == JSON else body
    return convert(payload, fmt, "p", NZ, max_spans=1000, native=use_native, **kwargs)


@pytest.mark.parametrize("fmt, use_native", PATHS)
def test_hostile_values_are_contained_on_every_path(fmt: str, use_native: bool) -> None:
    now = time.time_ns()
    body, ids = _hostile_request(os.urandom(16), now)
    out = _convert(body, fmt, use_native)
    rows = {r["span_id"]: r for r in out.table.to_pylist()}
    assert set(rows) == {ids[n].hex() for n in ("good", "huge", "negative", "sdk_cost", "ttft", "backwards")}
    assert out.rejected == 2 and out.warnings == 5
    good, huge, negative = rows[ids["good"].hex()], rows[ids["huge"].hex()], rows[ids["negative"].hex()]
    assert good["cost_usd"] == pytest.approx((1000 * SMALL_IN + 100 * SMALL_OUT) / 1e6)
    assert (huge["input_tokens"], negative["input_tokens"]) == (0, 0)
    assert huge["cost_usd"] == negative["cost_usd"] == pytest.approx(10 * SMALL_OUT / 1e6)
    assert rows[ids["sdk_cost"].hex()]["cost_usd"] == 0.0 and rows[ids["ttft"].hex()]["ttft_s"] is None
    backwards = rows[ids["backwards"].hex()]
    assert backwards["end_time"] == backwards["start_time"]
    cost = pc.sum(out.table["cost_usd"]).as_py()
    assert math.isfinite(cost) and cost >= 0
    message = out.error_message
    assert "span 5: start and end times" in message and "2106-02-07T06:28:15Z" in message
    assert f"span {ids['huge'].hex()}: {INPUT}" in message and "and 4 more" in message


@pytest.mark.parametrize("fmt, use_native", PATHS)
def test_spans_whose_expiry_would_pass_2106_are_rejected(fmt: str, use_native: bool) -> None:
    """The retention TTL (start + n days) wraps past 2106: such a span would vanish after its 2xx."""
    last = latest_start_ns(30)
    body = otlp_request(
        os.urandom(16),
        [
            {"span_id": os.urandom(8), "name": "last", "start": last, "end": last},
            {"span_id": os.urandom(8), "name": "wraps", "start": last + 1, "end": last + 1},
        ],
    ).SerializeToString()
    out = _convert(body, fmt, use_native, not_after_ns=last)
    assert [r["name"] for r in out.table.to_pylist()] == ["last"]
    assert (
        out.rejected == 1
        and "span 1: span starts too late" in out.error_message
        and "AGENTWATCH_RETENTION_DAYS" in out.error_message
    )
    edge = otlp_request(
        os.urandom(16), [{"span_id": os.urandom(8), "start": MAX_TIME_NS, "end": MAX_TIME_NS}]
    ).SerializeToString()
    assert _convert(edge, fmt, use_native).spans == 1  # no retention: the last second DateTime holds


def test_a_hostile_span_is_declined_by_the_native_decoder_alone() -> None:
    """Only hostile values leave the fast path: the good spans of the request stay native."""
    if not native.AVAILABLE:
        pytest.skip("native decoder not built")
    now = time.time_ns()
    body, _ = _hostile_request(os.urandom(16), now)
    decoded = native.NativeDecoder(NZ).decode(body, "p")
    assert decoded.declined == [1, 2, 3, 4, 5, 6, 7] and decoded.table.num_rows == 1


@pytest.mark.parametrize("fmt", [PROTOBUF, JSON])
def test_dropped_fields_are_a_partial_success_warning(fmt: str) -> None:
    body = otlp_request(os.urandom(16), [{"span_id": os.urandom(8), "attrs": _llm(**{INPUT: -1})}]).SerializeToString()
    out = _convert(body, fmt, True)
    answer = response_body(out, fmt)
    if fmt == JSON:
        partial = json.loads(answer)["partialSuccess"]
        assert "rejectedSpans" not in partial and INPUT in partial["errorMessage"]
    else:
        partial = ExportTraceServiceResponse.FromString(answer).partial_success
        assert partial.rejected_spans == 0 and INPUT in partial.error_message
    clean = otlp_request(os.urandom(16), [{"span_id": os.urandom(8), "attrs": _llm(**{INPUT: 1})}]).SerializeToString()
    assert response_body(_convert(clean, fmt, True), fmt) in (b"{}", b"")


# --- properties -----------------------------------------------------------------------------------

_HOSTILE = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-5, MAX_TOKENS + 5),
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(-1.0, 2 * MAX_SECONDS),
    st.sampled_from(["12", "-3", "1e400", "nan", "", "x", "0.5"]),
    st.booleans(),
)
_TIMES = st.one_of(
    st.integers(0, 3600 * 10**9).map(lambda back: time.time_ns() - back),
    st.sampled_from([0, MAX_TIME_NS - 1, MAX_TIME_NS, MAX_TIME_NS + 1, 2**63 - 1, 2**64 - 1]),
)


@st.composite
def _hostile_spans(draw: st.DrawFn, *, recent: bool) -> list[dict[str, Any]]:
    spans = []
    for i in range(draw(st.integers(1, 6))):
        attrs = (
            _llm() if draw(st.booleans()) else {sc.AGENTWATCH_SPAN_KIND: draw(st.sampled_from(["llm", "tool", "step"]))}
        )
        attrs.update(draw(st.dictionaries(st.sampled_from(BOUNDED_KEYS), _HOSTILE, max_size=5)))
        times = st.integers(0, 3600 * 10**9).map(lambda back: time.time_ns() - back) if recent else _TIMES
        spans.append(
            {
                "span_id": (i + 1).to_bytes(8, "big"),
                "name": f"s{i}",
                "attrs": attrs,
                "start": draw(times),
                "end": draw(times),
            }
        )
    return spans


def _assert_contained(out: Converted, sent: int) -> None:
    """Every span stored once or rejected with a message; every value stored within its bound."""
    rows = out.table.to_pylist()
    assert len(rows) + out.rejected == sent and len({r["span_id"] for r in rows}) == len(rows)
    assert bool(out.messages) == bool(out.rejected or out.warnings) and len(out.messages) == min(
        3, out.rejected + out.warnings
    )
    for row in rows:
        assert all(0 <= row[c] <= MAX_TOKENS for c in ("input_tokens", "output_tokens", "cached_tokens"))
        assert math.isfinite(row["cost_usd"]) and row["cost_usd"] >= 0
        assert all(
            row[c] is None or 0 <= row[c] <= MAX_SECONDS
            for c in ("ttft_s", "tpot_s", "queue_s", "prefill_s", "decode_s")
        )
    total = pc.sum(out.table["cost_usd"]).as_py() or 0.0
    assert math.isfinite(total) and total >= 0


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spans=_hostile_spans(recent=False), fmt=st.sampled_from([PROTOBUF, JSON]))
def test_hostile_spans_are_stored_bounded_or_rejected_the_same_on_both_paths(
    spans: list[dict[str, Any]], fmt: str
) -> None:
    body = otlp_request(os.urandom(16), spans).SerializeToString()
    python, fast = (_convert(body, fmt, use_native, not_after_ns=latest_start_ns(30)) for use_native in (False, True))
    _assert_contained(python, len(spans))
    assert (fast.rejected, fast.warnings, fast.messages) == (python.rejected, python.warnings, python.messages)
    assert fast.table.to_pylist() == python.table.to_pylist()


@pytest.fixture(scope="module")
def chdb_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    store = open_backend("chdb", Path(tmp_path_factory.mktemp("bounds")))
    yield store
    store.close()


@settings(
    max_examples=examples(12),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(spans=_hostile_spans(recent=True))
def test_no_stored_total_is_ever_null_negative_or_infinite(chdb_store: Store, spans: list[dict[str, Any]]) -> None:
    project = "b" + os.urandom(6).hex()
    out = convert(otlp_request(os.urandom(16), spans).SerializeToString(), PROTOBUF, project, NZ, max_spans=1000)
    _assert_contained(out, len(spans))
    chdb_store.insert_spans(out.table)
    now = time.time()
    figures = overview_query.overview(chdb_store, project, start=now - 2 * 3600, end=now + 60).figures
    cost = cost_query.cost_breakdown(chdb_store, project, start=now - 2 * 3600, end=now + 60)
    billable = [r for r in out.table.to_pylist() if r["kind"] not in ("run", "engine")]
    expected = sum(r["cost_usd"] for r in billable)
    for total in (figures["cost_usd"].value, cost.total_usd, figures["input_tokens"].value):
        assert total is not None and math.isfinite(total) and total >= 0
    assert cost.total_usd == pytest.approx(expected) and figures["cost_usd"].value == pytest.approx(expected)
    assert figures["input_tokens"].value == sum(r["input_tokens"] for r in billable)
    for name in ("ttft_p50", "ttft_p95", "tpot_p50"):
        value = figures[name].value
        assert value is None or 0 <= value <= MAX_SECONDS


def test_an_overlong_attribute_name_is_cut_with_a_warning_on_both_paths() -> None:
    """A 1 MiB attribute name is stored cut to 256 characters and a marker, never whole."""
    from agentwatch_platform.collector.ingest.normalize import MAX_KEY_LENGTH
    from agentwatch_platform.collector.ingest.otlp.decode import PROTOBUF, convert
    from tests.collector.ingest_helpers import otlp_request

    name = "k" * (1 << 20)
    request = otlp_request(
        os.urandom(16), [{"span_id": os.urandom(8), "name": "tool", "attrs": {name: "v", "fine": "x"}}]
    )
    for use_native in (True, False):
        out = convert(request.SerializeToString(), PROTOBUF, "p", Normalizer(), max_spans=10, native=use_native)
        (attributes,) = out.table.column("attributes").to_pylist()
        keys = sorted(k for k, _ in attributes)
        assert keys[0] == "fine" and keys[1].startswith("k" * MAX_KEY_LENGTH + "…[truncated") and len(keys[1]) < 300
        assert out.rejected == 0 and "attribute key of 1048576 characters" in out.error_message
