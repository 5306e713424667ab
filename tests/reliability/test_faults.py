"""Durability under faults, with the real ``agentwatch collector`` process: SIGKILL in the middle
of sustained ingestion, a store that cannot be reached, an unusable spool. Nothing answered 2xx
is ever lost or stored twice. (Long versions of these scenarios: ``bench/soak.py``.)"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.collector.ingest_helpers import REPO, CollectorProcess, agent_trace, captured_texts
from tests.reliability.helpers import PROTOBUF, in_process
from tests.support import local_http
from tests.support.poll import wait_until
from tests.support.ports import free_port

pytestmark = pytest.mark.slow  # collector processes killed and restarted (make test runs it, make quick not)

LLM_CALLS = 8  # spans per request: a run and 8 LLM calls of 100 input tokens each


class Exporters:
    """Several threads posting unique runs as fast as the collector answers; each records the
    runs that were answered 2xx (acknowledged) and the ones that got no answer at all."""

    def __init__(self, url: str, key: str, threads: int = 4, *, padding: int = 0) -> None:
        self.url, self.key, self.padding = url, key, padding
        self.acked: list[str] = []
        self.refused: list[tuple[int, str]] = []  # (status, Retry-After) of non-2xx answers
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._loop, daemon=True, name=f"exporter-{i}") for i in range(threads)]

    def _body(self, trace_id: bytes) -> bytes:
        request = agent_trace(trace_id, LLM_CALLS, texts=True)
        if self.padding:
            request.resource_spans[0].scope_spans[0].spans[0].attributes.add(
                key="pad", value={"string_value": "p" * self.padding}
            )
        return request.SerializeToString()

    def _loop(self) -> None:
        headers = {**PROTOBUF, "Authorization": f"Bearer {self.key}"} if self.key else PROTOBUF
        with httpx.Client(timeout=10) as client:
            while not self._stop.is_set():
                trace_id = os.urandom(16)
                try:
                    response = client.post(self.url + "/v1/traces", content=self._body(trace_id), headers=headers)
                except httpx.HTTPError:
                    time.sleep(0.05)
                    continue
                with self._lock:
                    if response.status_code == 200:
                        self.acked.append(trace_id.hex())
                    else:
                        self.refused.append((response.status_code, response.headers.get("retry-after", "")))
                if response.status_code != 200:
                    time.sleep(0.05)

    def __enter__(self) -> Exporters:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)


def _runs(url: str, key: str) -> dict[str, dict]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    found: dict[str, dict] = {}
    offset = 0
    while True:
        page = local_http.get(
            url + "/api/runs",
            params={"start": time.time() - 86_400, "limit": 500, "offset": offset},
            headers=headers,
            timeout=60,
        ).json()
        found.update({run["trace_id"]: run for run in page["items"]})
        offset += 500
        if offset >= page["total"]:
            return found


def _assert_exactly_once(url: str, key: str, acked: list[str], timeout: float = 60.0) -> dict[str, dict]:
    """Every acknowledged run is there with its exact totals (a duplicate insert would double them)."""
    deadline = time.monotonic() + timeout
    while True:
        runs = _runs(url, key)
        missing = [t for t in acked if t not in runs]
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert not missing, f"{len(missing)} of {len(acked)} acknowledged runs lost, e.g. {missing[:3]}"
    for trace_id, run in runs.items():  # unacknowledged requests in flight may land too, but only once
        assert (run["llm_calls"], run["input_tokens"]) == (LLM_CALLS, 100 * LLM_CALLS), (
            f"run {trace_id} stored more than once: {run}"
        )
    return runs


def _listening(port: int) -> set[str]:
    """The addresses a TCP port listens on, from /proc/net/tcp (IPv4) and tcp6."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                address, hex_port = local.split(":")
                if state == "0A" and int(hex_port, 16) == port:
                    found.add("127.0.0.1" if address == "0100007F" else address)
    return found


def _metric(url: str, name: str) -> float:
    text = local_http.get(url + "/metrics", timeout=10).text
    values = [
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith(name + " ") or line.startswith(name + "{")
    ]
    assert values, f"{name} not in /metrics"
    return sum(values)


@contextlib.contextmanager
def _collector(data: Path, **env: str) -> Iterator[CollectorProcess]:
    process = CollectorProcess(data, AGENTWATCH_FLUSH_INTERVAL_S="0.2", AGENTWATCH_RATE_LIMIT_SPANS_PER_S="0", **env)
    try:
        yield process.start()
    finally:
        process.kill(signal.SIGTERM)


@dataclass
class Killed:
    """The state after a SIGKILL in the middle of sustained ingestion, and the restarted collector."""

    collector: CollectorProcess
    key: str
    acked: list[str]
    spilled: int  # decoded requests the first collector had put on disk (beyond its queue bound) when killed
    spill_left: int  # those still on disk after the restart (a start clears them: the spool is the record)


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Killed]:
    data = tmp_path_factory.mktemp("sigkill") / "data"
    first = CollectorProcess(  # a queue bound of 4 KiB: most requests wait in the spill, decoded
        data,
        AGENTWATCH_FLUSH_INTERVAL_S="0.2",
        AGENTWATCH_RATE_LIMIT_SPANS_PER_S="0",
        AGENTWATCH_MAX_QUEUE_BYTES="4096",
    ).start()
    try:
        assert _listening(first.port) == {"127.0.0.1"}, "the collector must bind loopback only by default"
        key = first.key("durable")
        with Exporters(first.url, key, threads=4) as exporters:
            wait_until(lambda: len(exporters.acked) >= 100, 90, "exporters got too few answers")
            first.kill(signal.SIGKILL)  # mid-stream: requests in flight, a batch being inserted
            time.sleep(0.3)  # the exporters go on against the dead collector a while (their failures are not counted)
        acked = list(exporters.acked)
    finally:
        first.kill()
    spilled = len(list((data / "spill").iterdir()))
    second = CollectorProcess(data, AGENTWATCH_FLUSH_INTERVAL_S="0.2")
    second.port, second.url = first.port, first.url
    second.start()
    try:
        yield Killed(second, key, acked, spilled, len(list((data / "spill").iterdir())))
    finally:
        second.kill(signal.SIGTERM)


def test_sigkill_during_sustained_ingestion_loses_and_duplicates_no_span(killed: Killed) -> None:
    """Every span of every acknowledged request is stored after the restart, exactly once, with
    its captured texts (the embedded store's text files, written before the spans: ``collector.storage.texts``)."""
    headers = {"Authorization": f"Bearer {killed.key}"}
    for trace_id in killed.acked:
        deadline = time.monotonic() + 30
        while True:
            response = local_http.get(f"{killed.collector.url}/api/runs/{trace_id}", headers=headers, timeout=30)
            spans = response.json().get("spans", []) if response.status_code == 200 else []
            if len(spans) >= LLM_CALLS + 1 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        ids = [span["span_id"] for span in spans]
        assert len(ids) == LLM_CALLS + 1 == len(set(ids)), (
            f"run {trace_id}: {len(ids)} spans stored, {len(set(ids))} distinct"
        )
        texts = sorted((s["input_text"], s["output_text"]) for s in spans if s["kind"] == "llm")
        assert texts == sorted(captured_texts(trace_id, i) for i in range(LLM_CALLS)), f"run {trace_id}"


def test_sigkill_with_spans_spilled_to_disk_replays_them_from_the_spool(killed: Killed) -> None:
    """The decoded files beyond the queue bound are a cache: the restart drops them and replays the spool."""
    assert killed.spilled > 0
    assert killed.spill_left == 0


def test_sigkill_during_sustained_ingestion_keeps_run_totals_exact(killed: Killed) -> None:
    """The runs list (the materialized aggregates) has every acknowledged run, with exact totals."""
    _assert_exactly_once(killed.collector.url, killed.key, killed.acked, timeout=20)


_HOLDER = """
import sys
from agentwatch_platform.collector.storage.chdb_store import ChdbStore
store = ChdbStore(sys.argv[1])
store.migrate()
print("holding", flush=True)
sys.stdin.read()
"""


@contextlib.contextmanager
def _chdb_held(data: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Another process owns the chDB directory: the collector cannot open its store."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(data / "chdb")], cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"holding"
        yield holder
    finally:
        holder.kill()
        holder.wait(30)


@pytest.mark.parametrize("outage", ["clickhouse-refuses-connections", "chdb-directory-unusable"])
def test_store_outage_spools_to_its_bound_then_503_and_everything_lands_once_after_restart(
    tmp_path: Path, outage: str
) -> None:
    data = tmp_path / "data"
    env = {"AGENTWATCH_REQUIRE_AUTH": "false", "AGENTWATCH_SPOOL_MAX_BYTES": "400000"}
    with contextlib.ExitStack() as stack:
        if outage == "clickhouse-refuses-connections":
            env["AGENTWATCH_CLICKHOUSE_URL"] = f"http://127.0.0.1:{free_port()}"  # nothing listens there
        else:
            holder = stack.enter_context(_chdb_held(data))
        down = stack.enter_context(_collector(data, **env))
        with Exporters(down.url, "", threads=2, padding=20_000) as exporters:
            wait_until(lambda: len(exporters.refused) >= 3, 60, "the collector never pushed back")
        acked = list(exporters.acked)
        assert len(acked) >= 5, "the spool accepted nothing while the store was away"
        assert {status for status, _ in exporters.refused} == {503}
        assert all(retry.isdigit() and int(retry) >= 1 for _, retry in exporters.refused)
        assert _metric(down.url, "agentwatch_collector_store_available") == 0
        assert 0 < _metric(down.url, "agentwatch_collector_spool_bytes") <= 400_000
        down.kill(signal.SIGKILL)  # the spool must survive the process, too
        if outage == "chdb-directory-unusable":
            holder.communicate(b"", timeout=60)
    env.pop("AGENTWATCH_CLICKHOUSE_URL", None)  # recovery: the store is reachable again
    with _collector(data, **env) as up:
        _assert_exactly_once(up.url, "", acked)
        wait_until(
            lambda: _metric(up.url, "agentwatch_collector_spool_bytes") < 400_000 / 4,
            30,
            "spool not released after the drain",
        )


def test_spool_directory_unusable_is_503_with_a_clear_error_and_recovers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "spool").write_text("not a directory")
    caplog.set_level(logging.ERROR)
    with in_process(data, require_auth=False) as collector:
        body = agent_trace(os.urandom(16)).SerializeToString()
        for _ in range(3):
            response = collector.client.post("/v1/traces", content=body, headers=PROTOBUF)
            assert response.status_code == 503 and int(response.headers["retry-after"]) >= 1
        assert "spool" in caplog.text and "503" in caplog.text
        metrics = collector.client.get("/metrics").text
        assert any(
            line.startswith("agentwatch_collector_spool_errors_total ") and float(line.split()[1]) >= 1
            for line in metrics.splitlines()
        ), metrics
        assert 'agentwatch_collector_requests_total{code="503",transport="http"}' in metrics
        (data / "spool").unlink()  # the disk is usable again: no restart needed
        assert collector.client.post("/v1/traces", content=body, headers=PROTOBUF).status_code == 200


def test_spool_full_is_503_with_retry_after_and_no_crash(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    with in_process(tmp_path / "data", require_auth=False, spool_max_bytes=2_000) as collector:
        big = agent_trace(os.urandom(16), llm_calls=40).SerializeToString()
        assert len(big) > 2_000
        response = collector.client.post("/v1/traces", content=big, headers=PROTOBUF)
        assert response.status_code == 503 and int(response.headers["retry-after"]) >= 1
        assert "spool is full" in caplog.text
        small = agent_trace(os.urandom(16), llm_calls=1).SerializeToString()
        assert collector.client.post("/v1/traces", content=small, headers=PROTOBUF).status_code == 200
        assert collector.client.get("/api/ingest").status_code == 200
