"""The collector process keeps pandas out (``collector.commands._keep_pandas_out``): pyarrow would
load it, ~30 MB of anonymous memory, only to ask whether a value is a data frame."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from agentwatch_platform.collector.commands import _PandasKeptOut
from tests.collector.ingest_helpers import CollectorProcess, run_spans, sdk_agent_run


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
        overview = httpx.get(collector.url + "/api/overview", headers={"Authorization": f"Bearer {key}"}, timeout=30)
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
        _PandasKeptOut().find_spec("pandas.core")
    assert _PandasKeptOut().find_spec("pandas_extra") is None
