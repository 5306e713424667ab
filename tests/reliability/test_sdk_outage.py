"""The collector is down while an instrumented agent runs: the agent does not slow down, the
SDK retries with backoff, drops beyond its bounded buffer and counts it in ``agentwatch.stats()``,
and everything it did not drop or give up on arrives once the collector is back."""

from __future__ import annotations

import signal
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import agentwatch
import pytest

from collector.storage.chdb_store import ChdbStore
from tests.collector.ingest_helpers import CollectorProcess
from tests.conftest import free_port
from tests.reliability.helpers import wait_until

SERVICE = "reliability-outage"
QUEUE = 200
TOOLS_PER_RUN = 3


@pytest.fixture
def sdk(tmp_path: Path) -> Iterator[CollectorProcess]:
    """The SDK pointed at a port where the collector is not running yet."""
    collector = CollectorProcess(tmp_path / "data", AGENTWATCH_REQUIRE_AUTH="false", AGENTWATCH_FLUSH_INTERVAL_S="0.1")
    collector.port = free_port()
    collector.url = f"http://127.0.0.1:{collector.port}"
    agentwatch.shutdown(timeout_s=1)
    agentwatch.init(endpoint=collector.url, service_name=SERVICE, instrument_openai=False, max_queue_size=QUEUE,
                    max_export_batch_size=50, export_interval_s=0.05, export_timeout_s=0.5, export_retries=2)
    try:
        yield collector
    finally:
        agentwatch.shutdown(timeout_s=1)
        collector.kill(signal.SIGTERM)


def _agent_run() -> float:
    """One run of a tiny agent (three tool calls of 2 ms); returns its wall time."""
    started = time.perf_counter()
    with agentwatch.run("outage-agent"):
        for _ in range(TOOLS_PER_RUN):
            with agentwatch.tool("lookup"):
                time.sleep(0.002)
    return time.perf_counter() - started


def _delta(after: dict[str, int], before: dict[str, int], name: str) -> int:
    return after[name] - before[name]


def test_agent_is_unaffected_while_the_collector_is_down_and_spans_arrive_after(sdk: CollectorProcess) -> None:
    before = agentwatch.stats()
    down = [_agent_run() for _ in range(120)]  # 480 spans into a buffer of 200, nobody listening
    time.sleep(1.0)  # the exporter keeps retrying meanwhile
    during = agentwatch.stats()
    assert _delta(during, before, "spans_dropped") > 0, during
    assert _delta(during, before, "export_retries") > 0, during

    sdk.start()  # recovery
    up = [_agent_run() for _ in range(120)]
    assert statistics.median(down) <= statistics.median(up) * 1.5 + 0.005, (statistics.median(down), statistics.median(up))
    assert agentwatch.force_flush(timeout_s=30)
    after = agentwatch.stats()
    produced = 240 * (1 + TOOLS_PER_RUN)
    exported, dropped, failed = (_delta(after, before, n) for n in ("spans_exported", "spans_dropped", "spans_failed"))
    assert exported + dropped + failed == produced, f"unaccounted spans: {after}"
    assert dropped <= produced - QUEUE, "more dropped than the buffer bound explains"
    assert exported >= 120 * (1 + TOOLS_PER_RUN), "spans after recovery did not arrive"

    wait_until(lambda: _stored_status(sdk) >= exported, 30, "exported spans not stored")
    sdk.kill(signal.SIGTERM)
    assert _stored_rows() == exported  # every span the SDK counts as exported is stored, once


_data_dir: list[Path] = []


def _stored_status(collector: CollectorProcess) -> int:
    import httpx

    _data_dir[:] = [collector.data_dir]
    return int(httpx.get(collector.url + "/api/ingest", timeout=10).json()["stored_spans"])


def _stored_rows() -> int:
    store = ChdbStore(_data_dir[0] / "chdb")
    try:
        rows = store.query("SELECT count() AS n, uniqExact(span_id) AS u FROM spans WHERE service_name = {s:String}", {"s": SERVICE})
    finally:
        store.close()
    assert rows[0]["n"] == rows[0]["u"], f"duplicated spans: {rows}"
    return int(rows[0]["n"])
