"""A live stack seeded with real reference-agent traffic, shared by the dashboard's tests.

The real collector (chDB in a tmp dir, a project key from ``agentwatch keys create``, the
engine scraped, an alert rule that fires once there is traffic), the real simulated engine
(its own spans exported to the collector) and ``agentwatch loadgen`` runs of the research
agent, each in its own process as in the demo. Started once per test session.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from agentwatch_platform.reference_agent.keys import project_key
from agentwatch_platform.reference_agent.supervisor import ProcessGroup, start_collector, start_engine
from tests.dashboard.support import PROJECT, SCREENSHOTS, SeededStack
from tests.support.ports import free_port

RUNS = {"react": 3, "iterative": 3}  # loadgen runs per agent mode
VERSIONS = {"react": "2.0", "iterative": "1.0"}  # the agent's version per mode: 2.0's ReAct context costs more
RULES = """\
version: 1
rules:
  - name: dash-traffic-seen
    description: Fires while runs arrive, resolves when they stop (the alerts page has evidence to show).
    metric: runs
    window: 6s
    condition: {kind: threshold, threshold: 0.5}
    severity: warning
    channels: [log]
  - name: dash-no-traffic
    description: Fires once a whole window passes without a run.
    metric: runs
    window: 6s
    condition: {kind: threshold, threshold: 0.5, direction: below}
    severity: info
    channels: [log]
  - name: dash-spend-seen
    description: Fires once any spend is stored (a figure of now, not of a bucket).
    metric: projected_month_cost_usd
    window: 6s
    condition: {kind: threshold, threshold: 0}
    severity: info
    channels: [log]
"""


def _loadgen(stack: SeededStack) -> None:
    """``agentwatch loadgen`` once per agent mode, side by side, each in its own process."""
    procs = []
    for seed, (mode, runs) in enumerate(RUNS.items()):
        argv = [
            sys.executable,
            "-m",
            "agentwatch",
            "loadgen",
            "--users",
            "3",
            "--runs",
            str(runs),
            "--mode",
            mode,
            "--base-url",
            stack.engine + "/v1",
            "--collector",
            stack.collector,
            "--collector-key",
            stack.key,
            "--tool-failure-rate",
            "0.15",
            "--tool-timeout-rate",
            "0.05",
            "--tool-timeout",
            "0.2",
            "--max-steps",
            "8",
            "--seed",
            str(seed),
            "--agent-version",
            VERSIONS[mode],
        ]
        procs.append((mode, subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)))
    for mode, proc in procs:
        _, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, f"loadgen {mode} failed: {err[-2000:]}"


def _wait_stored(stack: SeededStack, timeout_s: float = 120.0) -> None:
    """Until every run is stored and the alert evaluator has fired. ``dash-spend-seen`` fires at
    its first round after any cost is stored, however late the spans came: the runs rules judge
    6 s buckets, which wait for the spans still arriving (the collector's watermark), and on a
    loaded machine (load 13: two test runs beside ``stress``) that wait outgrew their window, so
    neither fired for minutes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        total = stack.get("/api/runs", limit=1)["total"]
        alerts = stack.get("/api/alerts")
        if total >= stack.runs and alerts:
            return
        time.sleep(0.5)
    raise AssertionError(
        f"stack not seeded in {timeout_s} s: {total} of {stack.runs} runs stored, {len(alerts)} alerts"
    )


def _wait_scraped(stack: SeededStack, *, after: float, timeout_s: float = 30.0) -> None:
    """Until the collector has scraped the engine after ``after`` (epoch s), so that the engine
    page's rates see the counters both before and after the traffic."""
    deadline = time.monotonic() + timeout_s
    engines: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        engines = stack.get("/api/engines")
        if any((e.get("last_scrape") or 0) > after for e in engines):
            return
        time.sleep(0.3)
    raise AssertionError(f"engine not scraped after {after} within {timeout_s} s: {engines}")


@pytest.fixture(scope="session")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeededStack]:
    root = tmp_path_factory.mktemp("dashboard-stack")
    group = ProcessGroup(root / "logs", log=lambda line: print(line, file=sys.stderr))
    rules = root / "rules.yaml"
    rules.write_text(RULES)
    try:
        data_dir = root / "data"
        engine_port = free_port()
        collector = start_collector(
            group,
            data_dir,
            port=free_port(),
            grpc_port=0,
            env={
                "AGENTWATCH_SCRAPE_TARGETS": f"sim-engine=http://127.0.0.1:{engine_port}/metrics@{PROJECT}",
                "AGENTWATCH_SCRAPE_INTERVAL_S": "1",
                "AGENTWATCH_ALERT_RULES": str(rules),
                "AGENTWATCH_ALERT_INTERVAL_S": "1",
            },
        )
        key = project_key(collector, data_dir, PROJECT)
        engine = start_engine(group, port=engine_port, speed=40.0, collector=collector, key=key)
        group.wait_ready("engine", engine + "/v1/models")
        stack = SeededStack(collector, key, engine, group, data_dir, runs=sum(RUNS.values()))
        _wait_scraped(stack, after=time.time())
        time.sleep(6)  # a whole bucket (4.5 s) of the 15-minute engine view holds the counters from before the traffic
        _loadgen(stack)
        _wait_scraped(stack, after=time.time())
        _wait_stored(stack)
        yield stack
    finally:
        group.stop()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """Name the folder of the browser tests' screenshots in every run's summary (unless a passed
    run's folders were removed: ``make test`` on tmpfs keeps only failed tests', see the Makefile)."""
    folder = config.stash.get(SCREENSHOTS, None)
    if folder is not None and folder.exists():
        terminalreporter.write_line(f"dashboard screenshots: {folder}")
