"""A long SDK run through a real collector: listed while it runs, its steps rising, then ok;
a run whose process is SIGKILLed mid-run becomes incomplete after the idle timeout, with its cost."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.collector.ingest_helpers import REPO, Running, serve, settings_for

pytestmark = pytest.mark.slow

STEPS = 8
# A research run of STEPS one-second steps (an LLM call and a tool call each); "die" kills itself
# after three steps, as a crashed agent would, without flushing what is still buffered.
AGENT = """
import os, signal, sys, time, agentwatch
agentwatch.init(endpoint=sys.argv[1], api_key=sys.argv[2], service_name=sys.argv[3], export_interval_s=0.5)
with agentwatch.run("long-research", session_id=sys.argv[3]):
    print(time.time(), flush=True)  # the run has started
    for i in range(int(sys.argv[4])):
        with agentwatch.step(f"step {i}"):
            with agentwatch.llm("sim-small") as call:
                call.record_usage(input_tokens=1000, output_tokens=100)
            with agentwatch.tool("search"):
                time.sleep(1.0)
        if sys.argv[5] == "die" and i == 2:
            time.sleep(1.0)  # what ended so far is exported
            os.kill(os.getpid(), signal.SIGKILL)
agentwatch.shutdown()
"""


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Running, str]]:
    settings = settings_for(Path(tmp_path_factory.mktemp("live")), run_idle_timeout_s=4.0)
    with serve(settings) as running:
        yield running, running.key("live")


def agent(running: Running, key: str, service: str, mode: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", AGENT, running.url, key, service, str(STEPS), mode], cwd=REPO, stdout=subprocess.PIPE
    )


def my_run(running: Running, key: str, service: str) -> dict | None:
    page = httpx.get(running.url + "/api/runs", headers={"Authorization": f"Bearer {key}"}, timeout=30).json()
    mine = [r for r in page["items"] if r["session_id"] == service]
    assert len(mine) <= 1
    return mine[0] if mine else None


def test_long_run_is_listed_while_running_and_finishes_ok(collector: tuple[Running, str]) -> None:
    running, key = collector
    proc = agent(running, key, "svc-long", "live")
    assert proc.stdout is not None
    started = float(proc.stdout.readline())  # when the run started (the interpreter takes seconds to start)
    seen: list[tuple[float, str, int]] = []
    while proc.poll() is None:
        run = my_run(running, key, "svc-long")
        if run is not None:
            seen.append((time.time() - started, run["status"], run["steps"]))
        time.sleep(0.5)
    assert proc.returncode == 0
    first = next(s for s in seen if s[1] == "running")
    assert first[0] < 5.0, seen  # listed within 5 s of its start
    steps_while_running = [s[2] for s in seen if s[1] == "running"]
    assert max(steps_while_running) > min(steps_while_running), seen  # the step count rises
    deadline = time.monotonic() + 20
    while (run := my_run(running, key, "svc-long")) is None or run["status"] == "running":
        assert time.monotonic() < deadline
        time.sleep(0.3)
    assert (run["status"], run["steps"], run["llm_calls"], run["tool_calls"], run["input_tokens"]) == (
        "ok",
        STEPS,
        STEPS,
        STEPS,
        1000 * STEPS,
    )
    assert run["name"] == "invoke_agent long-research"


def test_killed_run_becomes_incomplete_with_its_cost(collector: tuple[Running, str]) -> None:
    running, key = collector
    proc = agent(running, key, "svc-killed", "die")
    assert proc.wait(60) == -signal.SIGKILL
    deadline = time.monotonic() + 30
    while (run := my_run(running, key, "svc-killed")) is None or run["status"] != "incomplete":
        assert time.monotonic() < deadline, run
        time.sleep(0.5)
    assert run["steps"] == 3 and run["llm_calls"] == 3 and run["cost_usd"] > 0
    headers = {"Authorization": f"Bearer {key}"}
    overview = httpx.get(running.url + "/api/overview", headers=headers, timeout=30).json()
    assert overview["incomplete_runs"] >= 1
    listed = httpx.get(running.url + "/api/runs", params={"status": "incomplete"}, headers=headers, timeout=30).json()[
        "items"
    ]
    assert run["trace_id"] in [r["trace_id"] for r in listed]
