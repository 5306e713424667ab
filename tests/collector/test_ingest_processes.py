"""Decoding in worker processes (``AGENTWATCH_DECODE_PROCESSES``) stores exactly what threads store."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import httpx
import pytest

from tests.collector.ingest_helpers import agent_trace, run_spans, serve, settings_for

LLM_CALLS = 300  # a body past the inline limit (32 KiB), so it goes to a worker process


def _post(url: str, key: str, body: bytes, **headers: str) -> httpx.Response:
    headers = {"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {key}", **headers}
    return httpx.post(url + "/v1/traces", content=body, headers=headers, timeout=60)


def _run(url: str, key: str, trace_id: bytes) -> dict:
    run_spans(url, key, trace_id.hex(), expect=LLM_CALLS + 1, timeout=60)
    return httpx.get(f"{url}/api/runs/{trace_id.hex()}", headers={"Authorization": f"Bearer {key}"}, timeout=30).json()


def test_worker_processes_decode_protobuf_and_gzip_with_exact_totals(tmp_path: Path) -> None:
    settings = settings_for(tmp_path / "data", decode_processes=1)
    with serve(settings) as running:
        key = running.key("alpha")
        plain_id, gzip_id = os.urandom(16), os.urandom(16)
        body = agent_trace(plain_id, llm_calls=LLM_CALLS).SerializeToString()
        assert len(body) > 32 * 1024
        assert _post(running.url, key, body).status_code == 200
        assert _post(running.url, key, body).status_code == 200  # a retry: totals must not change
        gz = gzip.compress(agent_trace(gzip_id, llm_calls=LLM_CALLS).SerializeToString())
        assert _post(running.url, key, gz, **{"Content-Encoding": "gzip"}).status_code == 200

        bad = _post(running.url, key, b"\xff" * 40_000)  # refused in the worker, answered here
        assert bad.status_code == 400

        for trace_id in (plain_id, gzip_id):
            detail = _run(running.url, key, trace_id)
            assert len(detail["spans"]) == LLM_CALLS + 1
            run = detail["run"]
            assert run["llm_calls"] == LLM_CALLS and run["input_tokens"] == 100 * LLM_CALLS
            assert run["cost_usd"] == pytest.approx(LLM_CALLS * (100 * 0.10 + 20 * 0.40) / 1e6)
