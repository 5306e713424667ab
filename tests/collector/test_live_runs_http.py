"""A long SDK run through a real collector: listed while it runs, its steps rising, then ok;
a run whose process is SIGKILLed mid-run becomes incomplete after the idle timeout, with its cost."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.collector.ingest_helpers import REPO, Running, serve, settings_for
from tests.support import local_http
from tests.support.poll import wait_until

pytestmark = pytest.mark.slow

STEPS = 8
IDLE_TIMEOUT_S = 10.0  # the collector's run idle timeout: far above the pause between two live steps
# A research run of STEPS steps (an LLM call and a tool call each). "live": after each step it
# prints how many are done and waits for a line on stdin, so the test sees every step listed
# while the run runs, however slowly a busy machine goes; "die" kills itself after three steps,
# as a crashed agent would, its root never ended (what ended so far exported first).
AGENT = """
import os, signal, sys, time, agentwatch
agentwatch.init(endpoint=sys.argv[1], api_key=sys.argv[2], service_name=sys.argv[3], export_interval_s=0.5)
with agentwatch.run("long-research", session_id=sys.argv[3]):
    for i in range(int(sys.argv[4])):
        with agentwatch.step(f"step {i}"):
            with agentwatch.llm("sim-small") as call:
                call.record_usage(input_tokens=1000, output_tokens=100)
            with agentwatch.tool("search"):
                time.sleep(0.2)  # the tool call takes a while, as a real one does
        if sys.argv[5] == "die" and i == 2:
            agentwatch.force_flush()
            os.kill(os.getpid(), signal.SIGKILL)
        if sys.argv[5] == "live":
            print(i + 1, flush=True)
            sys.stdin.readline()
agentwatch.shutdown()
"""


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Running, str]]:
    settings = settings_for(Path(tmp_path_factory.mktemp("live")), run_idle_timeout_s=IDLE_TIMEOUT_S)
    with serve(settings) as running:
        yield running, running.key("live")


def agent(running: Running, key: str, service: str, mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", AGENT, running.url, key, service, str(STEPS), mode],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def my_run(running: Running, key: str, service: str) -> dict | None:
    page = local_http.get(running.url + "/api/runs", headers={"Authorization": f"Bearer {key}"}, timeout=30).json()
    mine = [r for r in page["items"] if r["session_id"] == service]
    assert len(mine) <= 1
    return mine[0] if mine else None


def test_long_run_is_listed_while_running_and_finishes_ok(collector: tuple[Running, str]) -> None:
    """Each step, once done, is listed on the running run before the agent goes on: the run is
    listed while it runs, and its step count rises with it."""
    running, key = collector
    proc = agent(running, key, "svc-long", "live")
    assert proc.stdin is not None and proc.stdout is not None
    for done in range(1, STEPS + 1):
        assert int(proc.stdout.readline()) == done
        wait_until(
            lambda done=done: (
                (run := my_run(running, key, "svc-long")) is not None
                and (run["status"], run["steps"]) == ("running", done)
            ),
            60,
            f"step {done} is not listed on the running run",
        )
        proc.stdin.write("\n")
        proc.stdin.flush()
    assert proc.wait(60) == 0
    wait_until(
        lambda: (run := my_run(running, key, "svc-long")) is not None and run["status"] != "running",
        60,
        "the run is still listed as running after its agent ended",
    )
    run = my_run(running, key, "svc-long")
    assert run is not None
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
    wait_until(
        lambda: (run := my_run(running, key, "svc-killed")) is not None and run["status"] == "incomplete",
        IDLE_TIMEOUT_S + 60,
        "the killed run did not turn incomplete",
    )
    run = my_run(running, key, "svc-killed")
    assert run is not None
    assert run["steps"] == 3 and run["llm_calls"] == 3 and run["cost_usd"] > 0
    headers = {"Authorization": f"Bearer {key}"}
    overview = local_http.get(running.url + "/api/overview", headers=headers, timeout=30).json()
    assert overview["incomplete_runs"] >= 1
    listed = local_http.get(
        running.url + "/api/runs", params={"status": "incomplete"}, headers=headers, timeout=30
    ).json()["items"]
    assert run["trace_id"] in [r["trace_id"] for r in listed]


def test_the_agent_command_crashes_once_its_steps_reached_the_collector(collector: tuple[Running, str]) -> None:
    """``agentwatch agent --crash-after-steps 2`` (the demo's crashing agents): it SIGKILLs itself
    only once its two steps are stored, however slow the machine, so its run is there, running,
    with those steps, and turns incomplete."""
    from agentwatch_platform.reference_agent.agent import AGENT_NAME
    from agentwatch_platform.reference_agent.engine.server import EngineConfig, running_server
    from tests.support.ports import free_port

    running, key = collector
    with running_server(EngineConfig(speed=40.0), port=free_port()) as engine:
        argv = [sys.executable, "-m", "agentwatch", "agent", "--question", "What is paged attention?"]
        argv += ["--base-url", engine + "/v1", "--collector", running.url, "--crash-after-steps", "2"]
        env = {**os.environ, "AGENTWATCH_API_KEY": key}
        proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stdout + proc.stderr

    def crashed_run() -> dict | None:
        page = local_http.get(running.url + "/api/runs", headers={"Authorization": f"Bearer {key}"}, timeout=30)
        return next((r for r in page.json()["items"] if AGENT_NAME in r["name"]), None)

    # accepted before the crash (the SDK's flush waited for it), stored as the writer goes
    wait_until(lambda: (run := crashed_run()) is not None and run["steps"] == 2, 60, "the crashed run is not listed")
    run = crashed_run()
    assert run is not None and run["status"] in ("running", "incomplete") and run["llm_calls"] >= 2
