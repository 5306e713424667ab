"""Fixtures of the client tests: one collector, one project and one simulated engine (with its
own OTLP tracing into that project, as the README sets it up) per module, and the agent
scripts of ``tests/clients/agents/`` run by the Python of the environment that holds each
client's instrumentation.

openai-v2 and OpenInference are in the main environment's dev extras. traceloop-sdk 0.45 and
openlit pin OpenTelemetry (and openlit ``openai<3``) apart from it and from each other, so each
has a virtual environment of its own that ``make test`` builds from the pinned
``requirements-*.txt`` beside this file (``make clients-venvs``).

``AGENTWATCH_CLIENTS_DUMP=DIR`` writes each scenario's outcome (the usage the client received
and every span it emitted, attributes and events) to ``DIR/<client>-<mode>.json``: what each
dialect really sends, for whoever maps it.
"""

from __future__ import annotations

import contextlib
import json
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

from tests.collector.ingest_helpers import REPO, Running, serve, settings_for
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
    engine_process: _Engine
    tmp: Path

    def get(self, path: str, **params: Any) -> Any:
        response = httpx.get(
            self.collector.url + path, params=params, headers={"Authorization": f"Bearer {self.key}"}, timeout=30
        )
        response.raise_for_status()
        return response.json()


@contextlib.contextmanager
def _env(**values: str) -> Iterator[None]:
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


class _Engine:
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
            "--api-key",
            key,
        ]
        env = {**os.environ, "OTEL_BSP_SCHEDULE_DELAY": "200"}  # the engine's batch exporter: 0.2 s, not 5 s
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"simulated engine did not start: {self.log.read_text()[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            time.sleep(0.1)

    def stop(self) -> None:
        self.proc.terminate()  # uvicorn shuts down: the tracer flushes what is left
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The collector, a project key, and the engine (started; ``scenarios`` waits for it)."""
    base = tmp_path_factory.mktemp("clients")
    with _env(AGENTWATCH_ENGINE_JOIN_WAIT_S=str(JOIN_WAIT_S)):
        settings = settings_for(base / "data")
    with serve(settings) as collector:
        key = collector.key("clients")
        engine = _Engine(collector.url, key, base / "engine.log")
        try:
            yield Stack(collector, key, engine.url + "/v1", engine, base)
        finally:
            engine.stop()


class _Script:
    """One agent script, started at once (its imports and set-up overlap the others'); its run
    begins when ``go()`` writes a line to its standard input."""

    def __init__(self, stack: Stack, client: str, mode: str) -> None:
        self.scenario = Scenario(client, mode)
        self.proc: subprocess.Popen[bytes] | None = None
        python = PYTHONS[client]
        if not python.exists():
            self.scenario.error = f"{python} is missing: `make clients-venvs` builds the client environments"
            return
        cmd = [
            str(python),
            str(AGENTS / SCRIPTS[client]),
            "--collector",
            stack.collector.url,
            "--key",
            stack.key,
            "--engine",
            stack.engine,
            "--mode",
            mode,
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACELOOP_", "OPENLIT_"))}
        self.out, self.err = stack.tmp / f"{client}-{mode}.out", stack.tmp / f"{client}-{mode}.err"
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.proc = subprocess.Popen(cmd, cwd=AGENTS, env=env, stdin=subprocess.PIPE, stdout=out, stderr=err)

    def go(self, timeout: float = 120.0) -> Scenario:
        if self.proc is None:
            return self.scenario
        assert self.proc.stdin is not None
        with contextlib.suppress(BrokenPipeError):  # a script that failed in its set-up
            self.proc.stdin.write(b"go\n")
            self.proc.stdin.close()
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            self.scenario.error = f"the agent script ran over {timeout:.0f} s"
            return self.scenario
        lines = self.out.read_text().strip().splitlines()
        if code != 0 or not lines:
            self.scenario.error = f"exit {code}: {self.err.read_text()[-3000:]}"
        else:
            self.scenario.outcome = json.loads(lines[-1])
        return self.scenario


@pytest.fixture(scope="module")
def scenarios(stack: Stack, request: pytest.FixtureRequest) -> dict[tuple[str, str], Scenario]:
    """The agent runs of the scenarios this session selected: the scripts start together, their
    runs go one after another (so their time windows do not overlap); then a wait until
    engine-only calls would have been counted."""
    wanted = {
        item.callspec.params["scenario"]
        for item in request.session.items
        if item.module is request.module and hasattr(item, "callspec") and "scenario" in item.callspec.params
    }
    scripts = {key: _Script(stack, *key) for key in SCENARIOS if key in wanted}
    stack.engine_process.wait_ready()
    done = {}
    for key, script in scripts.items():
        done[key] = script.go()
        time.sleep(0.1)  # windows apart: [start, end) of one run never meets the next
    time.sleep(SETTLE_S)
    if dump := os.environ.get("AGENTWATCH_CLIENTS_DUMP"):  # what each client sent, for whoever maps a dialect
        Path(dump).mkdir(parents=True, exist_ok=True)
        for (client, mode), scenario in done.items():
            Path(dump, f"{client}-{mode}.json").write_text(
                json.dumps(scenario.outcome or {"error": scenario.error}, indent=1)
            )
    return done


@pytest.fixture
def scenario(scenarios: dict[tuple[str, str], Scenario], request: pytest.FixtureRequest) -> Scenario:
    return scenarios[request.param]
