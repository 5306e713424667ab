"""Versions end to end: the real SDK (OpenTelemetry exporting over OTLP/HTTP) records the agent's
version from ``init(service_version=...)`` and ``run(version=...)``; a third-party resource's
``service.version`` is read too; ``/api/versions`` and ``/api/versions/compare`` answer over real
HTTP, per project, with a 422 naming each bad parameter."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agentwatch_platform.alerts.sources import FigureQuery, HttpBackend
from tests.collector.ingest_helpers import REPO, Running, kv, otlp_request, serve, settings_for
from tests.support import local_http
from tests.support.poll import wait_until

# Four runs of the process's version 1.0, then four of 2.0 named by the run, three times the tokens.
AGENT = """
import sys, agentwatch
agentwatch.init(endpoint=sys.argv[1], api_key=sys.argv[2], service_name="svc-versions", service_version="1.0",
                instrument_openai=False, export_interval_s=0.2)
for version, calls in ((None, 1), ("2.0", 3)):
    for i in range(4):
        with agentwatch.run("research", user_id=f"user-{i}", version=version) as run:
            for _ in range(calls):
                with agentwatch.step("think"):
                    with agentwatch.llm("sim-small") as call:
                        call.record_usage(input_tokens=1000 + 100 * i, output_tokens=100)
            run.set_outcome("success")
assert agentwatch.shutdown()
"""


def _get(running: Running, key: str, path: str, **params: object) -> httpx.Response:
    return local_http.get(running.url + path, params=params, headers={"Authorization": f"Bearer {key}"}, timeout=30)


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Running, str]]:
    with serve(settings_for(Path(tmp_path_factory.mktemp("versions")))) as running:
        key = running.key("versions")
        done = subprocess.run(
            [sys.executable, "-c", AGENT, running.url, key], cwd=REPO, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        wait_until(
            lambda: _get(running, key, "/api/runs", limit=50).json()["total"] >= 8, 60, "the 8 runs were not stored"
        )
        yield running, key


def test_sdk_records_the_process_and_the_run_version(collector: tuple[Running, str]) -> None:
    running, key = collector
    runs = _get(running, key, "/api/runs", limit=50).json()["items"]
    assert sorted(r["version"] for r in runs) == ["1.0"] * 4 + ["2.0"] * 4
    run = _get(running, key, f"/api/runs/{runs[0]['trace_id']}").json()
    assert run["run"]["version"] == runs[0]["version"]
    only = _get(running, key, "/api/runs", version="2.0").json()
    assert only["total"] == 4 and {r["version"] for r in only["items"]} == {"2.0"}


def test_versions_sum_to_the_runs_and_compare_flags_the_costlier_one(collector: tuple[Running, str]) -> None:
    running, key = collector
    body = _get(running, key, "/api/versions").json()
    by = {v["version"]: v for v in body["items"]}
    runs = _get(running, key, "/api/runs", limit=50).json()["items"]
    for version in ("1.0", "2.0"):
        mine = [r for r in runs if r["version"] == version]
        assert by[version]["runs"] == 4
        assert by[version]["cost_usd"] == pytest.approx(sum(r["cost_usd"] for r in mine))
        assert by[version]["tokens_per_run"] == pytest.approx(sum(r["total_tokens"] for r in mine) / 4)
        assert by[version]["success_rate"] == 1.0
    assert by["2.0"]["steps_per_run"] == 3 and by["1.0"]["steps_per_run"] == 1
    compared = _get(running, key, "/api/versions/compare", a="1.0", b="2.0").json()
    cost = next(c for c in compared["changes"] if c["metric"] == "cost_per_run")
    assert cost["significant"] and cost["test"] == "welch_t" and cost["low"] > 0
    assert cost["relative"] == pytest.approx(by["2.0"]["cost_per_run"] / by["1.0"]["cost_per_run"] - 1)


def test_a_third_party_resource_version_is_read(collector: tuple[Running, str]) -> None:
    running, key = collector
    trace = os.urandom(16)
    request = otlp_request(
        trace,
        [{"span_id": os.urandom(8), "name": "invoke_agent other", "attrs": {"gen_ai.operation.name": "invoke_agent"}}],
    )
    request.resource_spans[0].resource.attributes.append(kv("service.version", "7.3.1"))
    response = local_http.post(
        running.url + "/v1/traces",
        content=request.SerializeToString(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/x-protobuf"},
        timeout=30,
    )
    assert response.status_code == 200
    wait_until(lambda: _get(running, key, "/api/runs", version="7.3.1").json()["total"] >= 1, 60, "no run of 7.3.1")
    found = _get(running, key, "/api/runs", version="7.3.1").json()
    assert [r["trace_id"] for r in found["items"]] == [trace.hex()]


def test_versions_are_the_callers_projects_only(collector: tuple[Running, str]) -> None:
    running, _ = collector
    other = running.key("someone-else")
    assert _get(running, other, "/api/versions").json()["items"] == []
    response = _get(running, other, "/api/versions/compare", a="1.0", b="2.0")
    assert response.status_code == 422 and "no finished run" in response.json()["detail"]


@pytest.mark.parametrize(
    ("params", "names"),
    [
        ({"b": "2.0"}, "a"),
        ({"a": "1.0"}, "b"),
        ({"a": "1.0", "b": "1.0"}, "twice"),
        ({"a": "1.0", "b": "9"}, "b='9'"),
        ({"a": "1.0", "b": "2.0", "start": "yesterday"}, "start"),
        ({"a": "x" * 300, "b": "2.0"}, "a"),
    ],
)
def test_bad_parameters_are_422_naming_them(collector: tuple[Running, str], params: dict, names: str) -> None:
    running, key = collector
    response = _get(running, key, "/api/versions/compare", **params)
    assert response.status_code == 422
    assert names in str(response.json()["detail"])


def test_versions_list_rejects_a_bad_time(collector: tuple[Running, str]) -> None:
    running, key = collector
    response = _get(running, key, "/api/versions", end="soon")
    assert response.status_code == 422 and "end" in response.json()["detail"]


def test_the_alerts_http_backend_reads_the_change_of_a_release(collector: tuple[Running, str]) -> None:
    """``agentwatch alerts run`` out of process reads a version rule's figure through this API."""
    running, key = collector
    backend = HttpBackend(running.url, [key])
    try:
        values = backend.version_changes(
            "versions", FigureQuery("version_cost_per_run_change", time.time(), 3600, version="2.0")
        )
    finally:
        backend.close()
    assert list(values) == ["2.0"] and values["2.0"] is not None and values["2.0"] > 1.0  # about 3x the tokens
