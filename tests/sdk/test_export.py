"""The export path against a real OTLP/HTTP receiver on 127.0.0.1, and a collector that is down."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import agentwatch
import pytest
from agentwatch import semconv as sc

from tests.sdk.servers import OtlpReceiver
from tests.support.poll import wait_until
from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]


def _delta(before: dict[str, int], name: str) -> int:
    return agentwatch.stats()[name] - before[name]


def _stats_before() -> dict[str, int]:
    """The counters to take deltas from, once the spans of earlier tests have settled: their exports
    may still be under way after their shutdown's timeout (a loaded machine), and would settle as
    this test's. Spans that never settle leave every delta alone, so the wait is bounded."""
    with contextlib.suppress(AssertionError):
        wait_until(lambda: agentwatch.stats()["spans_pending"] == 0, 20, "earlier spans still pending")
    return agentwatch.stats()


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never answers (a hung collector)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    yield sock.getsockname()[1]
    sock.close()


def test_spans_reach_the_receiver_as_otlp_protobuf_with_the_key(receiver: OtlpReceiver) -> None:
    before = _stats_before()
    agentwatch.init(
        endpoint=receiver.url, api_key="aw_test_key", project="proj-a", service_name="svc-a", instrument_openai=False
    )
    with agentwatch.run("exported"), agentwatch.tool("t"):
        pass
    assert agentwatch.force_flush(5) is True
    spans = receiver.wait_for_spans(3)
    assert {s["name"] for s in spans} == {"invoke_agent exported", "execute_tool t", sc.AW_RUN_START}
    request = receiver.requests[0]
    assert request["path"] == "/v1/traces"
    assert request["headers"]["Authorization"] == "Bearer aw_test_key"
    assert request["headers"]["Content-Type"] == "application/x-protobuf"
    resource = spans[0]["resource"]
    assert resource["service.name"] == "svc-a" and resource[sc.AW_PROJECT] == "proj-a"
    run_span = next(s for s in spans if s["name"] == "invoke_agent exported")
    assert run_span["attributes"][sc.AW_RUN_OUTCOME] == "success"
    assert _delta(before, "spans_exported") == 3  # the run, its tool and the run's start marker


def test_retries_503_with_backoff_then_delivers() -> None:
    with OtlpReceiver(statuses=[503, 503]) as receiver:
        before = _stats_before()
        agentwatch.init(endpoint=receiver.url, export_retries=3, instrument_openai=False)
        with agentwatch.tool("t"):
            pass
        assert agentwatch.force_flush(5) is True
        assert len(receiver.wait_for_spans(1)) == 1
        assert [r["status"] for r in receiver.requests] == [503, 503, 200]
        assert _delta(before, "export_retries") == 2


def test_a_rejected_batch_is_not_retried_and_is_counted() -> None:
    with OtlpReceiver(statuses=[400]) as receiver:
        before = _stats_before()
        agentwatch.init(endpoint=receiver.url, export_retries=3, instrument_openai=False)
        with agentwatch.tool("t"):
            pass
        assert agentwatch.force_flush(5) is False
        assert len(receiver.requests) == 1
        assert _delta(before, "spans_failed") == 1 and _delta(before, "export_failures") == 1


def test_collector_down_costs_the_agent_nothing_but_counted_failures(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="agentwatch")
    before = _stats_before()
    agentwatch.init(
        endpoint=f"http://127.0.0.1:{free_port()}", export_retries=1, instrument_openai=False, max_export_batch_size=10
    )

    @agentwatch.tool("work")
    def work(i: int) -> int:
        return i

    assert [work(i) for i in range(50)] == list(range(50))
    assert agentwatch.force_flush(5) is False
    assert _delta(before, "spans_failed") == 50
    assert _delta(before, "spans_exported") == 0
    warnings = [r for r in caplog.records if "could not export" in r.getMessage()]
    assert len(warnings) == 1  # five failed batches, one warning: logged, not flooding


def test_hung_collector_never_blocks_the_agent_and_full_queue_drops(silent_port: int) -> None:
    """The worker is stuck in a request that never answers; the agent keeps its pace."""
    before = _stats_before()
    agentwatch.init(
        endpoint=f"http://127.0.0.1:{silent_port}",
        export_timeout_s=1,
        max_queue_size=20,
        max_export_batch_size=10,
        instrument_openai=False,
    )
    started = time.monotonic()
    for _ in range(200):
        with agentwatch.tool("t"):
            pass
    elapsed = time.monotonic() - started
    # blocking on the hung export (1 s a time, for each of ~18 full queues) would take 18 s or more;
    # 5 s leaves a loaded machine room to create 200 spans
    assert elapsed < 5.0, "span creation waited for the exporter"
    dropped = _delta(before, "spans_dropped")
    assert dropped >= 200 - 20 - 10
    assert agentwatch.stats()["queue_size"] <= 20
    started = time.monotonic()
    agentwatch.shutdown(timeout_s=0.5)
    assert time.monotonic() - started < 2.0


def _settled(before: dict[str, int]) -> dict[str, int]:
    """Deltas of the span counters since ``before``, from one snapshot."""
    now = agentwatch.stats()
    names = ("spans_ended", "spans_exported", "spans_failed", "spans_pending", "queue_size")
    return {name: now[name] - (before[name] if name != "queue_size" else 0) for name in names}


def test_spans_of_an_export_in_flight_count_as_pending(receiver: OtlpReceiver) -> None:
    """The race behind the outage test's unaccounted spans: the worker takes a batch off the queue,
    then POSTs it; until the answer those spans were neither queued nor exported nor failed, and
    a force_flush that timed out (a slow collector) left stats() short of exactly that batch."""
    agentwatch.init(endpoint=receiver.url, export_timeout_s=10, instrument_openai=False)
    before = _stats_before()
    receiver.release.clear()  # the collector holds the request: the batch stays in flight
    for _ in range(7):
        with agentwatch.tool("t"):
            pass
    assert agentwatch.force_flush(0.2) is False
    assert receiver.arrived.wait(5)
    held = _settled(before)
    assert held == {"spans_ended": 7, "spans_exported": 0, "spans_failed": 0, "spans_pending": 7, "queue_size": 0}
    receiver.release.set()
    assert agentwatch.force_flush(5) is True
    assert _settled(before) == {
        "spans_ended": 7,
        "spans_exported": 7,
        "spans_failed": 0,
        "spans_pending": 0,
        "queue_size": 0,
    }


def test_a_flush_asked_while_a_batch_is_in_flight_waits_for_the_spans_queued_after_it(receiver: OtlpReceiver) -> None:
    """The race behind the outage test's unaccounted spans: the worker took the whole queue into
    one batch and kept the (empty) list of waiting flushes by reference; a flush registered
    during that export landed in the same list and was released when the batch returned, so
    force_flush() said True while spans ended meanwhile were still queued."""
    agentwatch.init(endpoint=receiver.url, export_interval_s=0.01, export_timeout_s=10, instrument_openai=False)
    before = _stats_before()
    receiver.release.clear()
    for _ in range(2):
        with agentwatch.tool("in-flight"):
            pass
    assert receiver.arrived.wait(5)  # the worker holds those two in an export the receiver keeps open
    for _ in range(3):
        with agentwatch.tool("queued-behind"):
            pass
    flushed: list[bool] = []
    flusher = threading.Thread(target=lambda: flushed.append(agentwatch.force_flush(5)), name="test-flusher")
    flusher.start()
    time.sleep(0.2)  # the flush is registered while the first export is still open (later: a weaker case, still true)
    receiver.release.set()
    flusher.join(10)
    assert flushed == [True]
    assert len(receiver.spans) == 5, "force_flush returned before the spans queued behind the batch were sent"
    assert _settled(before) == {
        "spans_ended": 5,
        "spans_exported": 5,
        "spans_failed": 0,
        "spans_pending": 0,
        "queue_size": 0,
    }


def test_a_flush_completes_while_other_threads_keep_ending_spans(receiver: OtlpReceiver) -> None:
    """A flush waits for the spans queued before it, not for an empty queue: an agent whose
    threads never stop producing spans (the demo's load at Ctrl-C) still gets its flush."""
    agentwatch.init(endpoint=receiver.url, max_export_batch_size=4, instrument_openai=False)
    stop = threading.Event()

    def produce() -> None:
        while not stop.is_set():
            with agentwatch.tool("busy"):
                time.sleep(0.0005)

    producers = [threading.Thread(target=produce, name=f"test-producer-{i}") for i in range(3)]
    for thread in producers:
        thread.start()
    try:
        time.sleep(0.2)  # the producers under way: the flush is asked while spans keep coming
        for _ in range(3):
            with agentwatch.tool("before-flush"):
                pass
        started = time.monotonic()
        assert agentwatch.force_flush(10) is True
        took = time.monotonic() - started
        assert agentwatch.stats()["queue_size"] > 0 or receiver.spans, "the producers kept the queue busy"
    finally:
        stop.set()
        for thread in producers:
            thread.join(5)
    assert took < 5, f"the flush waited {took:.1f} s for spans ended after it"
    assert sum(1 for s in receiver.spans if s["name"] == "execute_tool before-flush") == 3


def test_partial_success_counts_the_rejected_spans_failed_and_the_rest_exported() -> None:
    with OtlpReceiver(reject=2) as receiver:
        agentwatch.init(endpoint=receiver.url, instrument_openai=False)
        before = _stats_before()
        for _ in range(5):
            with agentwatch.tool("t"):
                pass
        assert agentwatch.force_flush(5) is True
        assert _settled(before) == {
            "spans_ended": 5,
            "spans_exported": 3,
            "spans_failed": 2,
            "spans_pending": 0,
            "queue_size": 0,
        }


def test_shutdown_twice_and_force_flush_after_shutdown(receiver: OtlpReceiver) -> None:
    agentwatch.init(endpoint=receiver.url, instrument_openai=False)
    with agentwatch.tool("t"):
        pass
    assert agentwatch.shutdown() is True
    assert agentwatch.shutdown() is True
    assert agentwatch.force_flush() is True
    assert len(receiver.wait_for_spans(1)) == 1
    with agentwatch.tool("after"):  # no-op after shutdown, never an error
        pass
    agentwatch.init(endpoint=receiver.url, instrument_openai=False)  # re-init works
    with agentwatch.tool("again"):
        pass
    assert agentwatch.force_flush(5)
    assert "execute_tool again" in {s["name"] for s in receiver.wait_for_spans(2)}


def test_init_is_idempotent(receiver: OtlpReceiver) -> None:
    agentwatch.init(endpoint=receiver.url, service_name="first", instrument_openai=False)
    agentwatch.init(endpoint="http://127.0.0.1:9", service_name="second", instrument_openai=False)
    with agentwatch.tool("t"):
        pass
    assert agentwatch.force_flush(5)
    assert receiver.wait_for_spans(1)[0]["resource"]["service.name"] == "first"


def _run_script(body: str, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], float]:
    script = "import agentwatch\n" + textwrap.dedent(body)
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    return proc, time.monotonic() - started


SCRIPT = """
agentwatch.init(instrument_openai=False)
with agentwatch.run("exiting"):
    with agentwatch.tool("t"):
        pass
print("done")
"""


def test_spans_are_flushed_at_exit(receiver: OtlpReceiver) -> None:
    proc, _ = _run_script(SCRIPT, {"AGENTWATCH_ENDPOINT": receiver.url})
    assert proc.returncode == 0, proc.stderr
    assert {s["name"] for s in receiver.wait_for_spans(3)} == {
        "invoke_agent exiting",
        "execute_tool t",
        sc.AW_RUN_START,
    }


def test_exit_is_bounded_when_the_collector_hangs(silent_port: int) -> None:
    baseline, base_s = _run_script("print('done')", {})
    proc, took = _run_script(
        SCRIPT,
        {
            "AGENTWATCH_ENDPOINT": f"http://127.0.0.1:{silent_port}",
            "AGENTWATCH_SDK_SHUTDOWN_TIMEOUT_S": "1",
            "AGENTWATCH_SDK_EXPORT_TIMEOUT_S": "10",
        },
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "done", proc.stderr
    # the export's own timeout (10 s) is what an unbounded exit would wait; 7 s leaves room for a loaded
    # machine's slower start of the interpreter than the baseline's
    assert took - base_s < 7.0, f"exit took {took:.1f}s with a 1s shutdown timeout"


def _wait_child(pid: int, timeout_s: float) -> int:
    """The child's exit code; a child that hangs is killed and the test fails instead of hanging."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    raise AssertionError(f"forked child still running after {timeout_s}s")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX-only")
def test_forked_child_exports_its_own_spans_once(receiver: OtlpReceiver) -> None:
    agentwatch.init(endpoint=receiver.url, export_interval_s=30, instrument_openai=False)
    with agentwatch.tool("parent-before-fork"):
        pass
    pid = os.fork()
    if pid == 0:  # child: its queue and its counters start empty; it sends only its own span
        try:
            with agentwatch.tool("child"):
                pass
            flushed = agentwatch.force_flush(5)
            stats = agentwatch.stats()
            own = stats["spans_ended"] == stats["spans_exported"] == 1 and stats["spans_pending"] == 0
            os._exit(0 if flushed and own else 1)
        finally:
            os._exit(2)
    assert _wait_child(pid, timeout_s=15) == 0
    assert agentwatch.force_flush(5)
    names = sorted(s["name"] for s in receiver.wait_for_spans(2))
    assert names == ["execute_tool child", "execute_tool parent-before-fork"]
