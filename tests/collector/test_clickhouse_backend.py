"""The whole collector on the ClickHouse back end (``AGENTWATCH_CLICKHOUSE_URL``): the real SDK
and OTLP exporter -> collector -> ``ClickHouseStore`` over HTTP -> query API.

The store is a ClickHouse server when ``AGENTWATCH_CLICKHOUSE_URL`` is set, otherwise the
ClickHouse HTTP interface over chDB (``tests.collector.clickhouse_http``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentwatch_platform.collector.storage.clickhouse_store import ClickHouseStore
from tests.collector.ingest_helpers import (
    agent_trace,
    run_spans,
    sdk_agent_run,
    serve,
    settings_for,
)
from tests.collector.store_fixtures import scratch_database
from tests.support import local_http


def test_sdk_run_lands_through_the_collector_on_clickhouse(clickhouse_url: str, tmp_path: Path) -> None:
    settings = settings_for(tmp_path / "data", clickhouse_url=scratch_database(clickhouse_url))
    with serve(settings) as collector:
        assert isinstance(collector.app.state.store.get(), ClickHouseStore)
        key = collector.key("alpha")  # keys live in the ClickHouse store too
        summary = sdk_agent_run(collector.url, key, "ch-agent")
        spans = {
            s["kind"]: s for s in run_spans(collector.url, key, summary["trace_id"], expect=4)
        }  # with the run-start marker
        assert (spans["llm"]["model"], spans["llm"]["input_tokens"], spans["llm"]["ttft_s"]) == (
            "sim-large",
            2000,
            0.25,
        )
        assert spans["llm"]["cost_usd"] == pytest.approx((2000 * 2.5 + 100 * 10.0) / 1e6)
        assert "ann@example.com" not in spans["llm"]["input_text"]
        assert (spans["tool"]["tool_name"], spans["tool"]["is_timeout"]) == ("fetch", True)
        assert summary["tool_failures"] == 1


def test_duplicate_delivery_changes_no_total_on_clickhouse(clickhouse_url: str, tmp_path: Path) -> None:
    settings = settings_for(tmp_path / "data", clickhouse_url=scratch_database(clickhouse_url))
    with serve(settings) as collector:
        key = collector.key("alpha")
        trace_id = os.urandom(16)
        body = agent_trace(trace_id).SerializeToString()
        headers = {"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {key}"}
        for _ in range(3):  # an exporter's retries
            assert (
                local_http.post(collector.url + "/v1/traces", content=body, headers=headers, timeout=30).status_code
                == 200
            )
            run_spans(collector.url, key, trace_id.hex(), expect=4)  # stored: the next one is another insert
        collector.stored_so_far()
        detail = local_http.get(
            f"{collector.url}/api/runs/{trace_id.hex()}", headers={"Authorization": f"Bearer {key}"}, timeout=30
        ).json()
        assert len(detail["spans"]) == 4
        assert (detail["run"]["llm_calls"], detail["run"]["input_tokens"]) == (3, 300)
