"""Hostile values through the real collector (uvicorn, chDB, query API): the response names each
bad field or time, and the project's totals stay finite, non-negative and exact for the good spans."""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any

import httpx
import pytest
from agentwatch import semconv as sc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from agentwatch_platform.collector.ingest.bounds import MAX_TIME_NS, latest_start_ns
from agentwatch_platform.reference_agent.workload import otlp_json
from tests.collector.ingest_helpers import (
    Running,
    agent_trace,
    otlp_request,
    run_spans,
    serve,
    settings_for,
)
from tests.support import local_http

GOOD_COST = 3 * (100 * 0.10 + 20 * 0.40) / 1e6  # agent_trace: three sim-small calls, 100 in / 20 out
LLM = {sc.AGENTWATCH_SPAN_KIND: "llm", sc.GEN_AI_REQUEST_MODEL: "sim-small"}

# (name, attributes or times, what the partial_success message must name, rejected)
HOSTILE: list[tuple[str, dict[str, Any], str, int]] = [
    ("huge-tokens", {"attrs": {**LLM, sc.GEN_AI_USAGE_INPUT_TOKENS: 10**18}}, sc.GEN_AI_USAGE_INPUT_TOKENS, 0),
    (
        "negative-tokens",
        {"attrs": {**LLM, sc.GEN_AI_USAGE_OUTPUT_TOKENS: -40_000_000}},
        sc.GEN_AI_USAGE_OUTPUT_TOKENS,
        0,
    ),
    (
        "sdk-cost-1",
        {"attrs": {sc.AGENTWATCH_SPAN_KIND: "llm", sc.GEN_AI_REQUEST_MODEL: "own-model", sc.AW_COST_USD: 1e308}},
        sc.AW_COST_USD,
        0,
    ),
    (
        "sdk-cost-2",
        {"attrs": {sc.AGENTWATCH_SPAN_KIND: "llm", sc.GEN_AI_REQUEST_MODEL: "own-model", sc.AW_COST_USD: 1e308}},
        sc.AW_COST_USD,
        0,
    ),
    ("negative-ttft", {"attrs": {**LLM, sc.AW_TTFT: -3.0}}, sc.AW_TTFT, 0),
    ("after-2106", {"start": MAX_TIME_NS + 10**9, "end": MAX_TIME_NS + 2 * 10**9}, "2106-02-07T06:28:15Z", 1),
    (
        "expiry-after-2106",
        {"start": latest_start_ns(30) + 10**9, "end": latest_start_ns(30) + 2 * 10**9},
        "starts too late",
        1,
    ),
]


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Running:
    with serve(settings_for(tmp_path_factory.mktemp("bounds") / "data", retention_days=30)) as running:
        yield running


def _post(collector: Running, key: str, body: bytes, content_type: str = "application/x-protobuf") -> httpx.Response:
    response = local_http.post(
        collector.url + "/v1/traces",
        content=body,
        headers={"Content-Type": content_type, "Authorization": f"Bearer {key}"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    return response


def _get(collector: Running, key: str, path: str, start: float, end: float) -> dict[str, Any]:
    response = local_http.get(
        f"{collector.url}{path}",
        params={"start": start, "end": end},
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    return response.json()


def test_hostile_values_are_named_and_never_reach_the_totals(collector: Running) -> None:
    key = collector.key("hostile")
    trace_id = os.urandom(16)
    _post(collector, key, agent_trace(trace_id).SerializeToString())
    _post(
        collector,
        key,
        otlp_request(
            trace_id, [{"span_id": os.urandom(8), "name": "timed", "attrs": {**LLM, sc.AW_TTFT: 0.25}}]
        ).SerializeToString(),
    )
    for i, (name, spec, named, rejected) in enumerate(HOSTILE):
        body = otlp_request(trace_id, [{"span_id": os.urandom(8), "name": name, **spec}]).SerializeToString()
        if i % 2:  # every other one as OTLP JSON
            partial = _post(collector, key, otlp_json(body), "application/json").json()["partialSuccess"]
            assert int(partial.get("rejectedSpans", "0")) == rejected and named in partial["errorMessage"], name
        else:
            answer = ExportTraceServiceResponse.FromString(_post(collector, key, body).content).partial_success
            assert answer.rejected_spans == rejected and named in answer.error_message, name
    kept = 5 + sum(1 for *_, rejected in HOSTILE if not rejected)
    assert len(run_spans(collector.url, key, trace_id.hex(), expect=kept)) == kept
    now = time.time()
    overview = _get(collector, key, "/api/overview", now - 3600, now + 60)["figures"]
    cost = _get(collector, key, "/api/cost", now - 3600, now + 60)
    for total in (
        overview["cost_usd"]["value"],
        overview["input_tokens"]["value"],
        overview["output_tokens"]["value"],
        cost["total_usd"],
    ):
        assert total is not None and math.isfinite(total) and total >= 0
    assert overview["cost_usd"]["value"] == pytest.approx(GOOD_COST) and cost["total_usd"] == pytest.approx(GOOD_COST)
    assert (overview["input_tokens"]["value"], overview["output_tokens"]["value"]) == (300, 60)
    assert sum(row["cost_usd"] for row in cost["by_model"]) == pytest.approx(GOOD_COST)
    assert overview["ttft_p50"]["value"] == pytest.approx(0.25)  # the negative TTFT is not a quantile's
    json.dumps(cost, allow_nan=False)  # nothing the dashboard's schema would refuse
    dropped = [
        line
        for line in local_http.get(collector.url + "/metrics").text.splitlines()
        if line.startswith("agentwatch_collector_dropped_fields_total")
    ]
    assert dropped and float(dropped[0].split()[-1]) == 5
