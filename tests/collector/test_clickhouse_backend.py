"""The whole collector on the ClickHouse back end (``AGENTWATCH_CLICKHOUSE_URL``): the real SDK
and OTLP exporter -> collector -> ``ClickHouseStore`` over HTTP -> query API.

The store is a ClickHouse server when ``AGENTWATCH_CLICKHOUSE_URL`` is set, otherwise the
ClickHouse HTTP interface over chDB (``tests.collector.clickhouse_http``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import clickhouse_connect
import httpx
import pytest

from collector.storage.clickhouse_store import ClickHouseStore
from tests.collector.ingest_helpers import (
    REPO,
    SDK_AGENT,
    agent_trace,
    run_spans,
    serve,
    settings_for,
)


def _database(url: str) -> str:
    """A scratch database on the server; its URL."""
    name = f"aw_e2e_{uuid.uuid4().hex[:12]}"
    admin = clickhouse_connect.get_client(dsn=url)
    admin.command(f"CREATE DATABASE {name}")
    admin.close()
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


def _runs(url: str, key: str, service: str) -> list[dict]:
    response = httpx.get(url + "/api/runs", params={"agent": "research"}, headers={"Authorization": f"Bearer {key}"}, timeout=30)
    return [r for r in response.json()["items"] if r["service"] == service]


def test_sdk_run_lands_through_the_collector_on_clickhouse(clickhouse_url: str, tmp_path: Path) -> None:
    settings = settings_for(tmp_path / "data", clickhouse_url=_database(clickhouse_url))
    with serve(settings) as collector:
        assert isinstance(collector.app.state.store.get(), ClickHouseStore)
        key = collector.key("alpha")  # keys live in the ClickHouse store too
        done = subprocess.run([sys.executable, "-c", SDK_AGENT, collector.url, key, "ch-agent"], cwd=REPO, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        deadline = time.monotonic() + 20
        while not (runs := _runs(collector.url, key, "ch-agent")) and time.monotonic() < deadline:
            time.sleep(0.2)
        [summary] = runs
        spans = {s["kind"]: s for s in run_spans(collector.url, key, summary["trace_id"], expect=3)}
        assert (spans["llm"]["model"], spans["llm"]["input_tokens"], spans["llm"]["ttft_s"]) == ("sim-large", 2000, 0.25)
        assert spans["llm"]["cost_usd"] == pytest.approx((2000 * 2.5 + 100 * 10.0) / 1e6)
        assert "ann@example.com" not in spans["llm"]["input_text"]
        assert (spans["tool"]["tool_name"], spans["tool"]["is_timeout"]) == ("fetch", True)
        assert summary["tool_failures"] == 1


def test_duplicate_delivery_changes_no_total_on_clickhouse(clickhouse_url: str, tmp_path: Path) -> None:
    settings = settings_for(tmp_path / "data", clickhouse_url=_database(clickhouse_url))
    with serve(settings) as collector:
        key = collector.key("alpha")
        trace_id = os.urandom(16)
        body = agent_trace(trace_id).SerializeToString()
        headers = {"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {key}"}
        for _ in range(3):  # an exporter's retries
            assert httpx.post(collector.url + "/v1/traces", content=body, headers=headers, timeout=30).status_code == 200
            time.sleep(0.3)  # separate inserts, not one batch
        run_spans(collector.url, key, trace_id.hex(), expect=4)
        time.sleep(0.5)
        detail = httpx.get(f"{collector.url}/api/runs/{trace_id.hex()}", headers={"Authorization": f"Bearer {key}"}, timeout=30).json()
        assert len(detail["spans"]) == 4
        assert (detail["run"]["llm_calls"], detail["run"]["input_tokens"]) == (3, 300)
