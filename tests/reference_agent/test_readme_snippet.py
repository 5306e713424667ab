"""The README's "Instrumenting an agent" snippet, executed exactly as printed, in its own
process, with the environment that the demo's printed ``export`` line sets, against a real
collector (chDB) and the simulated engine: its run is stored, with the streamed call's TTFT."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentwatch_platform.reference_agent.demo import export_line
from agentwatch_platform.reference_agent.keys import project_key
from agentwatch_platform.reference_agent.supervisor import ProcessGroup, start_collector, start_engine
from tests.support import local_http
from tests.support.ports import free_port

pytestmark = pytest.mark.slow  # a collector and an engine in processes (make test runs it, make quick not)

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_snippet() -> str:
    section = README.read_text().split("## Instrumenting an agent", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None, "no python block under 'Instrumenting an agent'"
    return match.group(1)


def _exported(line: str) -> dict[str, str]:
    words = shlex.split(line)
    assert words[0] == "export"
    return dict(word.split("=", 1) for word in words[1:])


def _stored_run(collector: str, key: str, agent: str, *, timeout_s: float = 30.0) -> dict:
    headers = {"Authorization": f"Bearer {key}"}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        runs = local_http.get(collector + "/api/runs", params={"agent": agent}, headers=headers, timeout=10).json()
        if runs["items"]:
            detail = local_http.get(f"{collector}/api/runs/{runs['items'][0]['trace_id']}", headers=headers, timeout=10)
            if any(span["kind"] == "llm" for span in detail.json()["spans"]):
                return detail.json()
        time.sleep(0.5)
    raise AssertionError(f"no run of agent {agent!r} stored within {timeout_s} s")


def test_readme_snippet_runs_as_printed_against_the_demo_stack(tmp_path: Path) -> None:
    group = ProcessGroup(tmp_path / "logs", log=lambda line: None)
    try:
        engine = start_engine(group, port=free_port(), speed=40.0)
        collector = start_collector(
            group,
            tmp_path,
            port=free_port(),
            grpc_port=0,
            env={"AGENTWATCH_FLUSH_INTERVAL_S": "0.2", "AGENTWATCH_ALERT_INTERVAL_S": "0"},
        )
        key = project_key(collector, tmp_path)
        group.wait_ready("engine", engine + "/v1/models")
        script = tmp_path / "researcher.py"
        script.write_text(readme_snippet())
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTWATCH_", "OPENAI_"))}
        env.update(_exported(export_line({"collector": collector, "engine": engine}, key)))
        done = subprocess.run(
            [sys.executable, str(script)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.strip(), "research() printed no answer"
        assert "Traceback" not in done.stderr and "401" not in done.stderr, done.stderr
        detail = _stored_run(collector, key, "researcher")
    finally:
        group.stop()
    assert detail["run"]["status"] == "ok" and detail["run"]["tool_calls"] == 1
    llm = [span for span in detail["spans"] if span["kind"] == "llm"]
    assert len(llm) == 1 and llm[0]["model"] == "sim-large"
    assert llm[0]["ttft_s"] is not None and 0 < llm[0]["ttft_s"] <= llm[0]["duration_s"]
    assert llm[0]["output_tokens"] > 0 and detail["run"]["cost_usd"] > 0
