"""The client tests' scenarios and stack: which clients and modes run, with which Python and
script, and the handles of the collector and the simulated engine they report to."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.collector.ingest_helpers import REPO, Running
from tests.support import local_http
from tests.support.ports import free_port

AGENTS = Path(__file__).parent / "agents"
CLIENTS = ("openai-v2", "openinference", "traceloop", "openlit")
MODES = ("plain", "traceparent")
SCENARIOS = [(client, mode) for client in CLIENTS for mode in MODES]
SCENARIO_IDS = [f"{client}-{mode}" for client, mode in SCENARIOS]
# The main environment, or the one `make clients-venvs` builds for the client.
PYTHONS = {
    "openai-v2": Path(sys.executable),
    "openinference": Path(sys.executable),
    "traceloop": REPO / ".venv-traceloop" / "bin" / "python",
    "openlit": REPO / ".venv-openlit" / "bin" / "python",
}
SCRIPTS = {client: f"agent_{client.replace('-', '_')}.py" for client in CLIENTS}
JOIN_WAIT_S = 1.5  # AGENTWATCH_ENGINE_JOIN_WAIT_S of the test collector
SETTLE_S = JOIN_WAIT_S + 3.0  # after the last scenario: engine export (0.2 s) + join wait + a writer pass
ENGINE_MODEL = "sim-large"


@dataclass
class Scenario:
    """One client's agent run in one propagation mode: what the script reported, or why it failed."""

    client: str
    mode: str
    outcome: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    answers: dict[str, Any] = field(default_factory=dict)  # query API answers, once complete

    @property
    def window(self) -> tuple[float, float]:
        return self.outcome["start"], self.outcome["end"]

    def require(self) -> dict[str, Any]:
        if self.error:
            pytest.fail(f"{self.client} agent run ({self.mode}) failed: {self.error}", pytrace=False)
        return self.outcome


@dataclass
class Stack:
    collector: Running
    key: str
    engine: str  # OpenAI base URL, …/v1
    engine_process: SimEngine
    tmp: Path

    def get(self, path: str, **params: Any) -> Any:
        response = local_http.get(
            self.collector.url + path, params=params, headers={"Authorization": f"Bearer {self.key}"}, timeout=30
        )
        response.raise_for_status()
        return response.json()


@contextlib.contextmanager
def scoped_env(**values: str) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class SimEngine:
    """``agentwatch engine --sim`` exporting its ``llm_request`` spans to the collector's project."""

    def __init__(self, collector: str, key: str, log: Path) -> None:
        self.port, self.log = free_port(), log
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [
            sys.executable,
            "-m",
            "agentwatch",
            "engine",
            "--sim",
            "--port",
            str(self.port),
            "--models",
            ENGINE_MODEL,
            "--speed",
            "5",
            "--otlp-endpoint",
            collector,
        ]
        env = {
            **os.environ,
            "OTEL_BSP_SCHEDULE_DELAY": "200",
            "AGENTWATCH_API_KEY": key,
        }  # never in argv  # the engine's batch exporter: 0.2 s, not 5 s
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"simulated engine did not start: {self.log.read_text()[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if local_http.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            time.sleep(0.1)

    def stop(self) -> None:
        self.proc.terminate()  # uvicorn shuts down: the tracer flushes what is left
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
