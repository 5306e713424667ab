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
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.clients.stack import (
    AGENTS,
    JOIN_WAIT_S,
    PYTHONS,
    SCENARIOS,
    SCRIPTS,
    SETTLE_S,
    Scenario,
    SimEngine,
    Stack,
    scoped_env,
)
from tests.collector.ingest_helpers import serve, settings_for


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The collector, a project key, and the engine (started; ``scenarios`` waits for it)."""
    base = tmp_path_factory.mktemp("clients")
    with scoped_env(AGENTWATCH_ENGINE_JOIN_WAIT_S=str(JOIN_WAIT_S)):
        settings = settings_for(base / "data")
    with serve(settings) as collector:
        key = collector.key("clients")
        engine = SimEngine(collector.url, key, base / "engine.log")
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
