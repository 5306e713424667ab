"""A live stack for the agent's tests: the real collector (chDB in a tmp dir) and the real
simulated engine, each in its own process as in the demo, with the SDK exporting to the
collector. (An engine inside the test process would add FastAPI's own OpenTelemetry server
spans to the agent's traces, since the SDK's provider becomes the global one.)"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import agentwatch
import httpx

from agentwatch_platform.reference_agent.agent import AgentConfig, ResearchAgent, RunResult, make_client
from agentwatch_platform.reference_agent.keys import project_key
from agentwatch_platform.reference_agent.levers import RateLimiter
from agentwatch_platform.reference_agent.supervisor import ProcessGroup, start_collector, start_engine
from agentwatch_platform.reference_agent.tools import Corpus, ResearchTools, ToolCache, ToolConfig
from tests.support import local_http
from tests.support.ports import free_port

ENGINE_SPEED = 40.0  # the simulated engine runs 40x faster than real time in tests


@dataclass
class LiveStack:
    collector: str
    key: str
    engine: str

    def agent(
        self,
        *,
        tools: ToolConfig | None = None,
        cache: ToolCache | None = None,
        rate_limiter: RateLimiter | None = None,
        **config: Any,
    ) -> ResearchAgent:
        client = make_client(self.engine + "/v1", "test", timeout_s=60.0, max_retries=0)
        return ResearchAgent(
            client,
            ResearchTools(Corpus.load(), tools or ToolConfig(latency_s=0.001)),
            config=AgentConfig(**config),
            cache=cache,
            rate_limiter=rate_limiter,
        )

    def get(self, path: str, **params: Any) -> httpx.Response:
        return local_http.get(
            self.collector + path, params=params, headers={"Authorization": f"Bearer {self.key}"}, timeout=10.0
        )

    def run_detail(self, result: RunResult, *, timeout_s: float = 20.0) -> dict[str, Any]:
        """``/api/runs/{trace_id}`` once the collector has stored the run span and every LLM and
        tool span the agent counted."""
        agentwatch.force_flush()
        deadline = time.monotonic() + timeout_s
        while True:
            response = self.get(f"/api/runs/{result.trace_id}")
            if response.status_code == 200 and _complete(response.json(), result):
                return response.json()
            if time.monotonic() > deadline:
                raise AssertionError(f"run {result.trace_id} not stored: {response.status_code} {response.text[:300]}")
            time.sleep(0.3)


def _complete(detail: dict[str, Any], result: RunResult) -> bool:
    kinds = [span["kind"] for span in detail["spans"]]
    return (
        detail["run"]["status"] != "running"  # the run-start marker is listed before the run's root arrives
        and kinds.count("run") == 1
        and kinds.count("llm") == result.llm_calls
        and kinds.count("tool") == result.tool_calls + (result.outcome == "success")
    )


@contextlib.contextmanager
def live_stack(data_dir: Path) -> Iterator[LiveStack]:
    group = ProcessGroup(data_dir / "logs", log=lambda line: None)
    try:
        engine = start_engine(group, port=free_port(), speed=ENGINE_SPEED)  # starts while the collector does
        collector = start_collector(
            group,
            data_dir,
            port=free_port(),
            grpc_port=0,
            env={"AGENTWATCH_FLUSH_INTERVAL_S": "0.2", "AGENTWATCH_ALERT_INTERVAL_S": "0"},
        )
        key = project_key(collector, data_dir, "agent-tests")
        group.wait_ready("engine", engine + "/v1/models")
        agentwatch.shutdown()
        agentwatch.init(endpoint=collector, api_key=key, service_name="research-agent-tests", export_interval_s=0.2)
        try:
            yield LiveStack(collector, key, engine)
        finally:
            agentwatch.shutdown()
    finally:
        group.stop()
