"""The collector's memory: it keeps pandas out of its process (``collector.tuning``:
pyarrow would load it, ~30 MB of anonymous memory, only to ask whether a value is a data frame), and
a batch over chDB's memory limit is inserted in halves (``collector.ingest.writer``)."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from agentwatch_platform.collector.tuning import PandasKeptOut
from agentwatch_platform.reference_agent.workload import Workload
from tests.collector.ingest_helpers import CollectorProcess, run_spans, sdk_agent_run
from tests.support import local_http
from tests.support.poll import wait_until


def _loads_pandas(pid: int) -> bool:
    return "/pandas/" in Path(f"/proc/{pid}/maps").read_text()


@pytest.mark.slow
def test_a_collector_stores_and_answers_without_pandas_loaded(tmp_path: Path) -> None:
    collector = CollectorProcess(tmp_path / "data").start()
    try:
        assert collector.proc is not None
        key = collector.key("memory")
        run = sdk_agent_run(collector.url, key, "no-pandas")  # the real SDK, captured prompt text
        spans = run_spans(collector.url, key, run["trace_id"], expect=3)
        llm = next(s for s in spans if s["kind"] == "llm")
        assert llm["output_text"] == "ok"
        assert llm["input_text"] and "ann@example.com" not in llm["input_text"]  # captured, redacted
        overview = local_http.get(
            collector.url + "/api/overview", headers={"Authorization": f"Bearer {key}"}, timeout=30
        )
        assert overview.status_code == 200, overview.text
        assert not _loads_pandas(collector.proc.pid)
    finally:
        collector.kill()

    allowed = CollectorProcess(tmp_path / "allowed", AGENTWATCH_COLLECTOR_PANDAS="1").start()
    try:
        assert allowed.proc is not None
        assert _loads_pandas(allowed.proc.pid)  # what the hook keeps out: pyarrow loads it at once otherwise
    finally:
        allowed.kill()


def test_the_hook_says_why_pandas_is_refused() -> None:
    with pytest.raises(ModuleNotFoundError, match="AGENTWATCH_COLLECTOR_PANDAS=1"):
        PandasKeptOut().find_spec("pandas.core")
    assert PandasKeptOut().find_spec("pandas_extra") is None


SPANS = 60_000


@pytest.mark.slow
def test_a_batch_over_the_stores_memory_limit_goes_in_halves_and_no_span_is_lost(tmp_path: Path) -> None:
    """With chDB's memory bounded (``AGENTWATCH_CHDB_MEMORY_LIMIT_BYTES``, 48 MiB), a 60k-span batch
    does not fit (its captured texts go to the store's text files, not chDB: ``collector.storage.texts``):
    retried whole, it never would, and ingestion stalled for good.
    The writer inserts it in halves until they fit; every span is stored once."""
    workload = Workload(SPANS, end_time_ns=time.time_ns(), batch_spans=1000, project="memory", content=True)
    # One request of all the spans (serialised OTLP requests concatenated are one request holding
    # them all), so the batch is the whole of it however slowly a loaded machine decodes: sent as
    # 30 requests, a pause of 50 ms between two let a quarter of them go in alone, under the limit.
    # Decoded in one piece, 30k spans sometimes fitted: 60k never do.
    body = b"".join(workload.batches())
    collector = CollectorProcess(
        tmp_path / "data",
        AGENTWATCH_CHDB_MEMORY_LIMIT_BYTES=str(48 * 2**20),
        AGENTWATCH_FLUSH_ROWS=str(SPANS),
        AGENTWATCH_MAX_SPANS_PER_REQUEST=str(SPANS),
        AGENTWATCH_MAX_BODY_BYTES=str(len(body) + 1),
        AGENTWATCH_RATE_LIMIT_SPANS_PER_S="0",
    ).start()
    try:
        key = collector.key("memory")
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/x-protobuf"}
        with httpx.Client(timeout=300) as client:
            assert client.post(collector.url + "/v1/traces", content=body, headers=headers).status_code == 200

        answers: list[str] = []  # the status endpoint's answers other than 200, for the failure message

        def stored() -> int:
            status = local_http.get(
                collector.url + "/api/ingest", headers={"Authorization": f"Bearer {key}"}, timeout=30
            )
            if status.status_code != 200:  # seen once under load (a body that was not JSON): asked again
                answers.append(f"{status.status_code} {status.text[:200]!r}")
                return -1
            return int(status.json()["stored_spans"])

        with contextlib.suppress(AssertionError):  # the assertion below says what was stored, and the answers
            wait_until(lambda: stored() >= SPANS, 300, "", interval=0.2)
        assert stored() == SPANS, answers
        log = collector.log.read_text()
        assert re.search(r"memory limit refused a batch of \d+ spans", log)  # the limit did bind
    finally:
        collector.kill()


@pytest.mark.parametrize(
    ("operator", "loaded_first", "expected"),
    [(None, False, "system"), (None, True, "system"), ("mimalloc", False, "mimalloc")],
)
def test_the_collector_allocates_arrow_buffers_through_glibc_unless_the_operator_chose(
    operator: str | None, loaded_first: bool, expected: str
) -> None:
    """pyarrow's mimalloc kept ~40-90 MB of freed buffers in a burst (bench/results/scale.md)."""
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if operator:
        env["ARROW_DEFAULT_MEMORY_POOL"] = operator
    code = (
        ("import pyarrow;" if loaded_first else "")
        + "from agentwatch_platform.collector.tuning import use_system_arrow_pool; use_system_arrow_pool();"
        "import pyarrow as pa; t = pa.concat_tables([pa.table({'a': list(range(1000))})] * 4);"
        "print(pa.default_memory_pool().backend_name, pa.default_memory_pool().bytes_allocated() > 0)"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == [expected, "True"], out.stderr


def test_the_cli_imports_no_pyarrow_before_a_command_runs() -> None:
    """So that the collector can choose pyarrow's allocator (``_use_system_arrow_pool``) before it loads."""
    code = "import sys, agentwatch.cli as cli; cli.build_parser(); print('pyarrow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split()[-1] == "False", out.stderr
