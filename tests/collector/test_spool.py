"""The on-disk spool: durable before acknowledged, replayed exactly once, bounded, never crashing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentwatch_platform.collector.ingest.spool import Spool, SpoolError
from tests.collector.ingest_helpers import (
    REPO,
    CollectorProcess,
    agent_trace,
    run_spans,
    serve,
    settings_for,
)
from tests.support import local_http
from tests.support.poll import wait_until

PROTOBUF = {"Content-Type": "application/x-protobuf"}


async def test_appended_requests_are_recovered_after_restart(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=10_000_000)
    spool.open()
    seqs = [await spool.append("p", "protobuf", f"body{i}".encode()) for i in range(3)]
    spool.close()  # like a crash: nothing was committed
    again = Spool(tmp_path, max_bytes=10_000_000)
    recovery = again.open()
    assert recovery.pending == seqs and recovery.intents == []
    assert again.read(seqs[1]) == ("p", "protobuf", b"body1")


async def test_unfinished_batch_is_replayed_with_its_token_and_finished_one_is_not(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=10_000_000)
    spool.open()
    a, b, c, d = [await spool.append("p", "json", b"{}") for _ in range(4)]
    await spool.begin("epoch:1", [a, b])
    spool.commit("epoch:1")
    await spool.begin("epoch:3", [c])
    spool.close()
    recovery = Spool(tmp_path, max_bytes=10_000_000).open()
    assert recovery.intents == [("epoch:3", [c])]
    assert recovery.pending == [d]


async def test_stored_requests_leave_no_bytes_behind_in_the_active_segment(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=1_000_000_000)
    spool.open()
    body = os.urandom(300_000)
    for i in range(8):  # 2.4 MB in the active segment, each batch stored as it comes
        seq = await spool.append("p", "protobuf", body)
        await spool.begin(f"epoch:{i}", [seq])
        spool.commit(f"epoch:{i}")
    assert spool.size_bytes < 1024 * 1024 + len(body) + 1024
    pending = await spool.append("p", "protobuf", b"still owed")
    spool.close()
    recovery = Spool(tmp_path, max_bytes=1_000_000_000).open()
    assert recovery.pending == [pending] and recovery.intents == []


async def test_torn_tail_is_ignored(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=10_000_000)
    spool.open()
    seq = await spool.append("p", "protobuf", b"complete")
    spool.close()
    [segment] = tmp_path.glob("*.spool")
    with open(segment, "ab") as f:
        f.write(b"\x40\x00\x00\x00garbage")  # a record cut short by a crash
    recovery = Spool(tmp_path, max_bytes=10_000_000).open()
    assert recovery.pending == [seq]


async def test_committed_segments_are_deleted(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=1_000_000, segment_bytes=64 * 1024)
    spool.open()
    for round_ in range(5):
        seqs = [await spool.append("p", "protobuf", os.urandom(10_000)) for _ in range(10)]
        await spool.begin(f"t{round_}", seqs)
        spool.commit(f"t{round_}")
    assert spool.size_bytes < 200_000
    assert len(list(tmp_path.glob("*.spool"))) <= 2


async def test_full_spool_refuses_with_retry_after(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=50_000)
    spool.open()
    await spool.append("p", "protobuf", os.urandom(30_000))
    with pytest.raises(SpoolError) as info:
        await spool.append("p", "protobuf", os.urandom(30_000))
    assert info.value.status == 503 and info.value.retry_after and "spool is full" in info.value.message


async def test_unusable_spool_directory_refuses_without_crashing(tmp_path: Path) -> None:
    blocker = tmp_path / "spool"
    spool = Spool(blocker, max_bytes=1_000_000)
    spool.open()
    spool.close()
    for path in blocker.glob("*"):
        path.unlink()
    blocker.rmdir()
    blocker.write_text("a file where the spool directory should be")
    with pytest.raises(SpoolError) as info:
        await spool.append("p", "protobuf", b"x")
    assert info.value.status == 503 and spool.error


async def test_write_error_is_reported_and_not_fatal(tmp_path: Path) -> None:
    """A disk that refuses writes (here: /dev/full, "No space left on device")."""
    reasons: list[str] = []
    spool = Spool(tmp_path, max_bytes=1_000_000, on_error=reasons.append)
    spool.open()
    spool._fd = os.open("/dev/full", os.O_WRONLY)  # the active segment's disk is now full
    with pytest.raises(SpoolError) as info:
        await spool.append("p", "protobuf", b"payload")
    assert "No space left" in info.value.message and reasons and spool.error
    spool._fd = None
    seq = await spool.append("p", "protobuf", b"payload")  # a new segment once the disk accepts writes
    assert spool.read(seq) == ("p", "protobuf", b"payload")


@pytest.mark.slow  # a collector process killed (make test runs it, make quick not)
def test_acknowledged_spans_survive_sigkill_before_flush(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = CollectorProcess(data, AGENTWATCH_FLUSH_INTERVAL_S="3600", AGENTWATCH_FLUSH_ROWS="1000000").start()
    try:
        key = first.key("durable")
        traces = [os.urandom(16) for _ in range(5)]
        for trace_id in traces:
            response = local_http.post(
                first.url + "/v1/traces",
                content=agent_trace(trace_id).SerializeToString(),
                headers={**PROTOBUF, "Authorization": f"Bearer {key}"},
            )
            assert response.status_code == 200
    finally:
        first.kill()
    with serve(settings_for(data)) as second:  # the restart (in this process)
        for trace_id in traces:
            assert len(run_spans(second.url, key, trace_id.hex(), expect=4)) == 4
        second.stored_so_far()  # the replay is over: a duplicate would be there now
        again = local_http.get(
            f"{second.url}/api/runs/{traces[0].hex()}", headers={"Authorization": f"Bearer {key}"}
        ).json()
        assert len(again["spans"]) == 4 and again["run"]["llm_calls"] == 3


_HOLDER = """
import sys, time
from agentwatch_platform.collector.storage.chdb_store import ChdbStore
store = ChdbStore(sys.argv[1])
store.migrate()
print("holding", flush=True)
sys.stdin.read()
"""


@pytest.mark.slow  # a collector process restarted (make test runs it, make quick not)
def test_store_unavailable_spools_then_drains_exactly_once(tmp_path: Path) -> None:
    """The chDB directory is held by another process: spans wait in the spool, then land once."""
    data = tmp_path / "data"
    settings = settings_for(data, require_auth=False)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(data / "chdb")], cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"holding"
        with serve(settings) as collector:
            trace_id = os.urandom(16)
            body = agent_trace(trace_id).SerializeToString()
            for _ in range(2):  # a retry of the same request as well
                assert local_http.post(collector.url + "/v1/traces", content=body, headers=PROTOBUF).status_code == 200
            wait_until(
                lambda: local_http.get(collector.url + "/api/ingest").json()["spool_bytes"] > 0, 10.0, "nothing spooled"
            )
            assert local_http.get(collector.url + "/api/ingest").json()["store_available"] is False
            holder.communicate(b"", timeout=60)  # release the directory
            spans = run_spans(collector.url, "", trace_id.hex(), expect=4, timeout=30)
            assert len(spans) == 4
            collector.stored_so_far()  # the spool drained: a second copy would be there now
            assert len(local_http.get(f"{collector.url}/api/runs/{trace_id.hex()}").json()["spans"]) == 4
            assert local_http.get(collector.url + "/api/ingest").json()["store_available"] is True
    finally:
        holder.kill()
        holder.wait()


def test_rows_beyond_the_memory_bound_are_reread_from_the_spool(tmp_path: Path) -> None:
    settings = settings_for(tmp_path / "data", require_auth=False, max_queue_spans=4, flush_interval_s=2.0)
    with serve(settings) as collector:
        traces = [os.urandom(16) for _ in range(4)]
        for trace_id in traces:  # 4 spans each: only the first request fits in memory
            assert (
                local_http.post(
                    collector.url + "/v1/traces", content=agent_trace(trace_id).SerializeToString(), headers=PROTOBUF
                ).status_code
                == 200
            )
        for trace_id in traces:
            assert len(run_spans(collector.url, "", trace_id.hex(), expect=4)) == 4
