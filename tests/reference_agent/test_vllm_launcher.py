"""The vLLM launcher: the command it builds, the health wait and the collector registration."""

from __future__ import annotations

import argparse
import http.server
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from agentwatch_platform.reference_agent.cli import register_engine as register_engine_command
from agentwatch_platform.reference_agent.engine.gpu import nvml_device_count
from agentwatch_platform.reference_agent.engine.vllm_launcher import (
    LauncherError,
    VllmLaunch,
    build_command,
    register_engine,
    wait_for_health,
)
from tests.collector.ingest_helpers import serve, settings_for
from tests.support import local_http
from tests.support.ports import free_port


class LocalServer:
    """A real HTTP server on 127.0.0.1 whose /health turns 200 after ``healthy_after_s`` (None: never)."""

    def __init__(self, healthy_after_s: float | None) -> None:
        self.started = time.monotonic()
        self.posts: list[tuple[str, dict, dict]] = []
        self.health_answers: list[int] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                healthy = healthy_after_s is not None and time.monotonic() - outer.started >= healthy_after_s
                outer.health_answers.append(200 if healthy else 503)
                self.send_response(outer.health_answers[-1])
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.posts.append((self.path, body, {k.lower(): v for k, v in self.headers.items()}))
                self.send_response(201)  # as the collector answers: a JSON object
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def server_factory() -> Iterator:
    servers: list[LocalServer] = []

    def make(healthy_after_s: float | None) -> LocalServer:
        servers.append(LocalServer(healthy_after_s))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


def test_command_serves_offline_with_tools_cached_tokens_and_otlp_to_the_collector() -> None:
    launch = VllmLaunch(
        "/models/qwen",
        port=8123,
        served_model_name="qwen-small",
        collector_url="http://127.0.0.1:4318/",
        collector_key="aw-key 1",
    )
    argv, env = build_command(launch, base_env={"PATH": "/usr/bin"})
    assert argv[:3] == ["vllm", "serve", "/models/qwen"]
    joined = " ".join(argv)
    for flag in (
        "--port 8123",
        "--served-model-name qwen-small",
        "--enable-auto-tool-choice",
        "--tool-call-parser hermes",
        "--enable-prompt-tokens-details",
        "--otlp-traces-endpoint http://127.0.0.1:4318/v1/traces",
    ):
        assert flag in joined
    assert "--collect-detailed-traces" not in argv
    assert env["HF_HUB_OFFLINE"] == "1" and env["PATH"] == "/usr/bin"
    assert env["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] == "http/protobuf"
    assert env["OTEL_EXPORTER_OTLP_TRACES_HEADERS"] == "Authorization=Bearer%20aw-key%201"


def test_command_without_collector_has_no_tracing() -> None:
    argv, env = build_command(VllmLaunch("/m", detailed_traces=True), base_env={})
    assert "--otlp-traces-endpoint" not in argv and "--collect-detailed-traces" not in argv
    assert "OTEL_EXPORTER_OTLP_TRACES_HEADERS" not in env


def test_detailed_traces_are_opt_in() -> None:
    argv, _ = build_command(VllmLaunch("/m", collector_url="http://c:4318", detailed_traces=True), base_env={})
    assert argv[argv.index("--collect-detailed-traces") + 1] == "all"


def test_health_wait_returns_once_the_server_turns_healthy(server_factory) -> None:
    server = server_factory(healthy_after_s=0.6)
    took = wait_for_health(server.url, timeout_s=10, poll_s=0.1)
    # Judged by what the server answered, not by a clock: it kept polling through the 503s
    # and stopped at the first 200 (the seconds depend on how soon the wait began).
    assert server.health_answers[-1] == 200 and server.health_answers.count(200) == 1
    assert server.health_answers.count(503) >= 1
    assert 0 < took < 10


def test_health_wait_gives_a_clear_error_when_it_never_turns_healthy(server_factory) -> None:
    server = server_factory(healthy_after_s=None)
    started = time.monotonic()
    with pytest.raises(LauncherError, match=r"did not become healthy at .*/health within 1 s"):
        wait_for_health(server.url, timeout_s=1, poll_s=0.1)
    assert time.monotonic() - started < 5


def test_health_wait_stops_when_the_process_exits_first() -> None:
    process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    with pytest.raises(LauncherError, match="exited with code 3"):
        wait_for_health(f"http://127.0.0.1:{free_port()}", timeout_s=20, process=process, poll_s=0.1)


def test_metrics_are_registered_with_the_collector(server_factory) -> None:
    collector = server_factory(healthy_after_s=0)
    assert register_engine(collector.url, name="vllm-a", metrics_url="http://127.0.0.1:8000/metrics", api_key="k1")
    path, body, headers = collector.posts[0]
    assert path == "/api/admin/engines"
    assert body == {"name": "vllm-a", "url": "http://127.0.0.1:8000/metrics"}
    assert headers["authorization"] == "Bearer k1"


def test_registration_with_a_real_collector_needs_the_admin_scope(tmp_path) -> None:
    """The project key vLLM ships its traces with (ingest) cannot register; an admin key can."""
    with serve(settings_for(tmp_path / "data")) as running:
        keyring = running.app.state.keyring
        ingest, admin = keyring.create("gpu", scopes="ingest").key, keyring.create("gpu", scopes="admin").key
        metrics_url = f"http://127.0.0.1:{free_port()}/metrics"
        assert not register_engine(running.url, name="vllm-a", metrics_url=metrics_url, api_key=ingest)
        assert register_engine(running.url, name="vllm-a", metrics_url=metrics_url, api_key=admin)
        listed = local_http.get(
            running.url + "/api/admin/engines", headers={"Authorization": f"Bearer {admin}"}, timeout=10
        ).json()
        assert [(e["engine"], e["url"]) for e in listed] == [("vllm-a", metrics_url)]


def test_registration_with_a_collector_that_is_down_returns_false() -> None:
    assert not register_engine(f"http://127.0.0.1:{free_port()}", name="x", metrics_url="http://m", api_key=None)


def test_engine_vllm_without_vllm_or_gpu_says_so_and_exits_non_zero(capsys) -> None:
    parser = argparse.ArgumentParser(prog="agentwatch")
    register_engine_command(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["engine", "--vllm", "/models/none"])
    assert args.func(args) == 2
    error = capsys.readouterr().err
    assert "vLLM is not installed" in error or "no NVIDIA GPU found" in error


class CountingNvml:
    """Stands in for the NVIDIA driver (hardware outside this machine): ``count`` GPUs."""

    def __init__(self, count: int) -> None:
        self.count, self.calls = count, []

    def nvmlInit(self) -> None:
        self.calls.append("init")

    def nvmlDeviceGetCount(self) -> int:
        self.calls.append("count")
        return self.count

    def nvmlShutdown(self) -> None:
        self.calls.append("shutdown")


def test_gpu_probe_counts_what_nvml_sees_and_shuts_nvml_down(monkeypatch) -> None:
    nvml = CountingNvml(2)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    assert nvml_device_count() == 2
    assert nvml.calls == ["init", "count", "shutdown"]


def test_gpu_probe_without_nvml_counts_none(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    assert nvml_device_count() == 0
