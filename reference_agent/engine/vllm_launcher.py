"""``agentwatch engine --vllm MODEL_PATH``: start a real vLLM server wired to the collector.

It builds the ``vllm serve`` command (offline, tool calling with the hermes parser, cached-token
details in usage, OTLP/HTTP protobuf traces to the collector with the project key), starts it,
waits for ``/health`` and registers its ``/metrics`` with the collector's scraper
(``POST <collector>/api/admin/engines {"name", "url"}``, which needs a key with the ``admin``
scope: ``admin_key``, else the project key when it has that scope too; vLLM's own environment only
ever holds the project key, which needs just ``ingest``). vLLM is an optional extra (``pip install
agentwatch-platform[gpu]``); without it, or without an NVIDIA GPU, the command says so and exits
non-zero. Flag names checked against vLLM's ``vllm serve`` documentation.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import quote

import httpx

from agentwatch_api.client import ApiError, AuthError, CollectorClient, CollectorError
from agentwatch_platform.reference_agent.engine.gpu import nvml_device_count

log = logging.getLogger(__name__)


class LauncherError(RuntimeError):
    """vLLM could not be started or did not become healthy; the message says what to do."""


@dataclass(frozen=True)
class VllmLaunch:
    """What to serve and where to report it."""

    model_path: str
    host: str = "127.0.0.1"
    port: int = 8000
    served_model_name: str | None = None
    collector_url: str | None = None
    collector_key: str | None = None  # vLLM's traces: the ingest scope
    admin_key: str | None = None  # the engine's registration: the admin scope (default: collector_key)
    engine_name: str = "vllm"
    detailed_traces: bool = False
    extra_args: tuple[str, ...] = field(default_factory=tuple)

    @property
    def base_url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        return f"http://{host}:{self.port}"


def vllm_executable() -> list[str] | None:
    """How to run vLLM's CLI here, or None when vLLM is not installed."""
    found = shutil.which("vllm")
    if found:
        return [found]
    if importlib.util.find_spec("vllm") is not None:
        return [sys.executable, "-m", "vllm.entrypoints.cli.main"]
    return None


def build_command(
    launch: VllmLaunch, *, executable: list[str] | None = None, base_env: Mapping[str, str] | None = None
) -> tuple[list[str], dict[str, str]]:
    """The ``vllm serve`` argv and its environment."""
    argv = [
        *(executable or ["vllm"]),
        "serve",
        launch.model_path,
        "--host",
        launch.host,
        "--port",
        str(launch.port),
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        "hermes",
        "--enable-prompt-tokens-details",
    ]
    if launch.served_model_name:
        argv += ["--served-model-name", launch.served_model_name]
    env = dict(os.environ if base_env is None else base_env)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    if launch.collector_url:
        argv += ["--otlp-traces-endpoint", launch.collector_url.rstrip("/") + "/v1/traces"]
        env["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] = "http/protobuf"
        env.setdefault("OTEL_SERVICE_NAME", launch.engine_name)
        if launch.collector_key:
            # OTel reads header values URL-encoded: "Authorization=Bearer%20<key>"
            env["OTEL_EXPORTER_OTLP_TRACES_HEADERS"] = "Authorization=" + quote(f"Bearer {launch.collector_key}")
        if launch.detailed_traces:
            argv += ["--collect-detailed-traces", "all"]
    argv += list(launch.extra_args)
    return argv, env


def check_environment() -> list[str]:
    """The vLLM command to use; raises ``LauncherError`` saying what is missing."""
    executable = vllm_executable()
    if executable is None:
        raise LauncherError(
            "vLLM is not installed: `pip install 'agentwatch-platform[gpu]'` on a machine "
            "with an NVIDIA GPU, or use the simulated engine: `agentwatch engine --sim`"
        )
    if nvml_device_count() < 1:
        raise LauncherError(
            "no NVIDIA GPU found (NVML/nvidia-smi unavailable): vLLM needs one; "
            "use the simulated engine instead: `agentwatch engine --sim`"
        )
    return executable


def wait_for_health(
    base_url: str, *, timeout_s: float, process: subprocess.Popen[bytes] | None = None, poll_s: float = 0.5
) -> float:
    """Poll ``<base_url>/health`` until it answers 200; the seconds it took.

    Raises ``LauncherError`` when ``process`` exits first or ``timeout_s`` passes.
    """
    started = time.monotonic()
    deadline = started + timeout_s
    with httpx.Client(timeout=min(2.0, timeout_s)) as client:
        while True:
            if process is not None and process.poll() is not None:
                raise LauncherError(
                    f"vllm serve exited with code {process.returncode} before it was healthy; its output above says why"
                )
            try:
                if client.get(f"{base_url}/health").status_code == 200:
                    return time.monotonic() - started
            except httpx.HTTPError:
                pass  # not listening yet
            if time.monotonic() >= deadline:
                raise LauncherError(
                    f"vLLM did not become healthy at {base_url}/health within {timeout_s:g} s "
                    "(model still loading? raise --health-timeout)"
                )
            time.sleep(poll_s)


def register_engine(collector_url: str, *, name: str, metrics_url: str, api_key: str | None) -> bool:
    """Ask the collector to scrape ``metrics_url`` (``api_key`` needs the ``admin`` scope); False
    (logged, with what to do instead) when it refuses or is down."""
    with CollectorClient(collector_url, api_key or "", timeout_s=10.0) as client:
        try:
            client.register_engine(name, metrics_url)
        except ApiError as exc:
            hint = (
                " (registering an engine needs a key with the admin scope: $AGENTWATCH_ADMIN_KEY or --admin-key-file)"
                if isinstance(exc, AuthError)
                else ""
            )
            log.warning(
                "the collector refused to scrape %s (HTTP %d: %s)%s; or set AGENTWATCH_SCRAPE_TARGETS=%s=%s on the collector",
                metrics_url,
                exc.status,
                exc.detail[:200],
                hint,
                name,
                metrics_url,
            )
            return False
        except CollectorError as exc:
            log.warning("could not register %s with the collector at %s: %s", metrics_url, collector_url, exc)
            return False
    return True


def launch(config: VllmLaunch, *, health_timeout_s: float = 900.0) -> int:
    """Start vLLM, wait for health, register it, and run until it exits or Ctrl-C."""
    argv, env = build_command(config, executable=check_environment())
    log.info("starting: %s", " ".join(argv))
    process = subprocess.Popen(argv, env=env)
    try:
        took = wait_for_health(config.base_url, timeout_s=health_timeout_s, process=process)
        log.info("vLLM healthy at %s after %.0f s", config.base_url, took)
        if config.collector_url:
            register_engine(
                config.collector_url,
                name=config.engine_name,
                metrics_url=f"{config.base_url}/metrics",
                api_key=config.admin_key or config.collector_key,
            )
        return process.wait()
    except (LauncherError, KeyboardInterrupt):
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        raise
