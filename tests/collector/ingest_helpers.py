"""Helpers of the ingestion tests: a real collector (uvicorn in a thread, or a subprocess),
keys through its admin endpoint, OTLP requests built from plain data, and reads through the
query API."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from agentwatch_api.handshake import read_admin_token
from agentwatch_platform.alerts.plugin import AlertsPlugin
from agentwatch_platform.alerts.settings import AlertsSettings
from agentwatch_platform.collector.api.header_timeout import header_timeout_protocol
from agentwatch_platform.collector.app import create_app
from agentwatch_platform.collector.plugins import Plugin
from agentwatch_platform.collector.settings import Settings
from agentwatch_platform.reference_agent.supervisor import collector_command
from agentwatch_platform.reference_agent.workload import kv
from tests.support import local_http
from tests.support.ports import free_port

REPO = Path(__file__).resolve().parents[2]
BARRIER_PROJECT = "barrier"  # Running.stored_so_far's runs: a project no test reads


@dataclass
class Running:
    url: str
    settings: Settings
    app: Any = None
    grpc: str = ""
    _barrier_key: str = field(default="", repr=False)

    def key(self, project: str, scopes: list[str] | None = None) -> str:
        return create_key(self.url, self.settings.data_dir, project, scopes)

    def stored_so_far(self, timeout: float = 60.0) -> None:
        """Return once everything this collector acknowledged until now is stored: a run sent now,
        to a project of its own, is stored after it (the writer stores in the order it accepted).
        A test that checks that nothing more arrives (a duplicate, a refused request) asks this
        instead of sleeping for a while."""
        if not self._barrier_key:
            self._barrier_key = self.key(BARRIER_PROJECT)
        trace_id = os.urandom(16)
        body = agent_trace(trace_id, llm_calls=1).SerializeToString()
        headers = {"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {self._barrier_key}"}
        assert local_http.post(self.url + "/v1/traces", content=body, headers=headers, timeout=30).status_code == 200
        spans = run_spans(self.url, self._barrier_key, trace_id.hex(), expect=2, timeout=timeout)
        assert len(spans) == 2, f"the barrier run was not stored within {timeout} s"


def settings_for(data_dir: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "port": free_port(),
        "grpc_port": 0,
        "data_dir": data_dir,
        "flush_interval_s": 0.1,
    }
    values.update(overrides)
    return Settings.from_env(**values)


def alerts_plugin(*, clock: Callable[[], float] | None = None, **settings: Any) -> AlertsPlugin:
    """The alerts plugin as `agentwatch collector` loads it; its evaluator off unless asked for."""
    return AlertsPlugin(settings=AlertsSettings.from_env(**{"alert_interval_s": 0.0, **settings}), clock=clock)


@contextlib.contextmanager
def serve(settings: Settings, *, plugins: tuple[Plugin, ...] | None = None) -> Iterator[Running]:
    """``create_app(settings)`` served by uvicorn on 127.0.0.1 in a thread, until the block ends;
    with the alerts plugin inside (``alerts_plugin()`` unless ``plugins`` says), as `agentwatch collector` assembles it."""
    app = create_app(settings, plugins=(alerts_plugin(),) if plugins is None else plugins)
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=settings.port,
        log_level="warning",
        lifespan="on",
        http=header_timeout_protocol(settings.header_read_timeout_s),
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="test-collector", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("collector did not start")
        time.sleep(0.05)
    grpc = f"127.0.0.1:{settings.grpc_port}" if settings.grpc_port else ""
    try:
        yield Running(f"http://127.0.0.1:{settings.port}", settings, app, grpc)
    finally:
        server.should_exit = True
        thread.join(60)


class CollectorProcess:
    """``agentwatch collector`` as a subprocess (restarts and SIGKILL)."""

    def __init__(self, data_dir: Path, **env: str) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, "AGENTWATCH_ALERT_INTERVAL_S": "0", **env}
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = data_dir.parent / f"{data_dir.name}-collector.log"

    def start(self) -> CollectorProcess:
        cmd = collector_command(self.data_dir, port=self.port)
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(cmd, cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"collector exited: {self.log.read_text()[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if local_http.get(self.url + "/metrics", timeout=1).status_code == 200:
                    return self
            time.sleep(0.1)
        raise RuntimeError("collector did not start in 90 s")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(60)
        self.proc = None

    def key(self, project: str) -> str:
        return create_key(self.url, self.data_dir, project)


# An agent run through the real SDK and OTLP exporter: argv endpoint, key, service name. The
# key's project wins over the one the SDK is told; the prompt carries an address to redact.
_SDK_AGENT = """
import sys, agentwatch
agentwatch.init(endpoint=sys.argv[1], api_key=sys.argv[2], project="ignored", service_name=sys.argv[3], capture_content=True)
with agentwatch.run("research"):
    with agentwatch.llm("sim-large") as call:
        call.record_usage(input_tokens=2000, output_tokens=100, ttft=0.25)
        call.record_messages(input="mail me at ann@example.com", output="ok")
    try:
        with agentwatch.tool("fetch"):
            raise TimeoutError("fetch timed out")
    except TimeoutError:
        pass
agentwatch.shutdown()
"""


def sdk_agent_run(url: str, key: str, service: str, *, timeout: float = 20.0) -> dict[str, Any]:
    """Runs ``_SDK_AGENT`` in a subprocess against the collector at ``url``; its run's summary
    from ``/api/runs`` once listed (other "research" runs may be there: this one is by service)."""
    done = subprocess.run(
        [sys.executable, "-c", _SDK_AGENT, url, key, service], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    deadline = time.monotonic() + timeout
    while True:
        runs = local_http.get(
            url + "/api/runs", params={"agent": "research"}, headers={"Authorization": f"Bearer {key}"}, timeout=30
        ).json()
        mine = [r for r in runs["items"] if r["service"] == service]
        if mine or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    [summary] = mine
    return summary


def create_key(url: str, data_dir: Path, project: str, scopes: list[str] | None = None) -> str:
    """A key of ``project`` from the collector's key admin; ``scopes`` None: ingest and read (the API's default)."""
    token = read_admin_token(Path(data_dir))
    body: dict[str, Any] = {"project": project} if scopes is None else {"project": project, "scopes": scopes}
    response = local_http.post(
        url + "/api/admin/keys", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    response.raise_for_status()
    return response.json()["key"]


def run_spans(url: str, key: str, trace_id: str, *, expect: int, timeout: float = 20.0) -> list[dict[str, Any]]:
    """The spans of one trace through the query API, once ``expect`` of them are there."""
    deadline = time.monotonic() + timeout
    spans: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        response = local_http.get(
            f"{url}/api/runs/{trace_id}", headers={"Authorization": f"Bearer {key}"} if key else {}, timeout=30
        )
        if response.status_code == 200:
            spans = response.json()["spans"]
            if len(spans) >= expect:
                return spans
        time.sleep(0.1)
    return spans


def otlp_request(
    trace_id: bytes, spans: list[dict[str, Any]], *, service: str = "test-agent"
) -> ExportTraceServiceRequest:
    """A request with one resource and scope; each span dict has span_id (bytes), name, attrs."""
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    rs.resource.attributes.append(kv("service.name", service))
    scope = rs.scope_spans.add()
    now = time.time_ns()
    for spec in spans:
        span = scope.spans.add()
        span.trace_id = trace_id
        span.span_id = spec["span_id"]
        span.parent_span_id = spec.get("parent", b"")
        span.name = spec.get("name", "span")
        span.start_time_unix_nano = spec.get("start", now - 2_000_000_000)
        span.end_time_unix_nano = spec.get("end", now - 1_000_000_000)
        span.attributes.extend(kv(k, v) for k, v in spec.get("attrs", {}).items())
    return request


def agent_trace(trace_id: bytes, llm_calls: int = 3, *, texts: bool = False) -> ExportTraceServiceRequest:
    """A run with ``llm_calls`` priced LLM calls of sim-small (100 in / 20 out tokens each); with
    ``texts``, call i captured ``prompt i of <trace id>`` and ``answer i`` (``captured_texts``)."""
    root = os.urandom(8)
    spans: list[dict[str, Any]] = [
        {
            "span_id": root,
            "name": "invoke_agent research",
            "attrs": {"agentwatch.span.kind": "run", "gen_ai.agent.name": "research"},
        }
    ]
    for i in range(llm_calls):
        spans.append(
            {
                "span_id": os.urandom(8),
                "parent": root,
                "name": "chat sim-small",
                "attrs": {
                    "agentwatch.span.kind": "llm",
                    "gen_ai.request.model": "sim-small",
                    "gen_ai.usage.input_tokens": 100,
                    "gen_ai.usage.output_tokens": 20,
                    "agentwatch.step.index": i,
                    "gen_ai.agent.name": "research",
                }
                | (
                    dict(zip(("input.value", "output.value"), captured_texts(trace_id.hex(), i), strict=True))
                    if texts
                    else {}
                ),
            }
        )
    return otlp_request(trace_id, spans)


def captured_texts(trace_id: str, step: int) -> tuple[str, str]:
    """The prompt and completion that ``agent_trace(texts=True)`` captures on its call ``step``."""
    return f"prompt {step} of {trace_id}", f"answer {step}"
