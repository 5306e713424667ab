"""``agentwatch engine``: the simulated engine (``--sim``) or a real vLLM (``--vllm MODEL_PATH``).

``register(sub)`` adds ``engine`` and then the agent's commands (``agent``, ``loadgen``,
``demo``) from ``reference_agent.commands_agent``.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import sys
from pathlib import Path

from agentwatch_platform.reference_agent.engine.profiles import PROFILES
from agentwatch_platform.reference_agent.engine.scheduler import POLICIES


def register(sub: argparse._SubParsersAction) -> None:
    """``engine`` here; ``agent``, ``loadgen`` and ``demo`` from the agent's own module, which needs
    the OpenAI client (the ``reference`` extra): without it the engine still serves (bench/batching.py
    runs on the base install) and one line names the extra."""
    register_engine(sub)
    if importlib.util.find_spec("openai") is None:
        print(
            "agentwatch: the agent, loadgen and demo commands are unavailable "
            "(the OpenAI client is not installed: pip install 'agentwatch-platform[reference]')",
            file=sys.stderr,
        )
        return
    from agentwatch_platform.reference_agent import commands_agent

    commands_agent.register(sub)


def register_engine(sub: argparse._SubParsersAction) -> None:
    engine = sub.add_parser(
        "engine",
        help="serve an LLM: the simulated engine (--sim) or vLLM (--vllm MODEL_PATH)",
        description="Serve an OpenAI-compatible LLM endpoint with vLLM's metrics and traces.",
    )
    which = engine.add_mutually_exclusive_group(required=True)
    which.add_argument("--sim", action="store_true", help="the simulated engine (CPU; a simulation, not a model)")
    which.add_argument("--vllm", metavar="MODEL_PATH", help="start `vllm serve MODEL_PATH` (needs vLLM and a GPU)")
    engine.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    engine.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    _key_arguments(
        engine,
        "api-key",
        "AGENTWATCH_API_KEY",
        "the collector's project key: ingest scope for traces, admin to register a vLLM engine",
    )
    sim = engine.add_argument_group("simulated engine")
    sim.add_argument("--policy", choices=POLICIES, default="continuous", help="batching policy (default continuous)")
    sim.add_argument("--slots", type=int, default=32, help="sequence slots per model (default 32)")
    sim.add_argument(
        "--kv-tokens", type=int, default=131072, help="KV-cache budget per model in tokens (default 131072)"
    )
    sim.add_argument("--speed", type=float, default=1.0, help="run X times faster than real time (default 1)")
    sim.add_argument("--models", default=",".join(PROFILES), help=f"served models (default {','.join(PROFILES)})")
    sim.add_argument(
        "--otlp-endpoint",
        default=None,
        help="export llm_request spans here (the collector, e.g. http://127.0.0.1:4318)",
    )
    gpu = engine.add_argument_group("vLLM")
    gpu.add_argument("--served-model-name", default=None, help="the model name clients send")
    gpu.add_argument("--collector", default=None, help="collector URL for traces and metrics registration")
    _key_arguments(
        gpu,
        "admin-key",
        "AGENTWATCH_ADMIN_KEY",
        "a key with the admin scope, to register the engine's /metrics with the collector; vLLM never sees it "
        "(else the project key)",
    )
    gpu.add_argument("--engine-name", default="vllm", help="name of this engine in the collector (default vllm)")
    gpu.add_argument("--detailed-traces", action="store_true", help="pass --collect-detailed-traces all (slower)")
    gpu.add_argument("--health-timeout", type=float, default=900.0, help="seconds to wait for /health (default 900)")
    engine.set_defaults(func=run_engine)


class _KeyOnCommandLine(argparse.Action):
    """A key given as a command-line value: refused, because ``ps`` shows every local user the
    command line of every process (and shells keep it in their history)."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: object, values: object, option: str | None = None
    ) -> None:
        parser.error(
            f"{option} would show the key to every local user in `ps`: set ${self.metavar} "
            f"or give a file holding it with {option}-file PATH"
        )


def _key_arguments(group: argparse._ActionsContainer, name: str, env: str, what: str) -> None:
    """``--NAME-file PATH`` (the key is read from the file), else ``$ENV``; ``--NAME KEY`` is refused."""
    group.add_argument(
        f"--{name}-file", metavar="PATH", default=None, help=f"{what}: a file holding it (default ${env})"
    )
    group.add_argument(f"--{name}", nargs="?", metavar=env, action=_KeyOnCommandLine, help=argparse.SUPPRESS)


def _key(path: str | None, env: str) -> str | None:
    """The key in ``path`` (surrounding whitespace dropped), else ``$env``, else None."""
    if path is None:
        return os.environ.get(env) or None
    try:
        return Path(path).read_text(encoding="utf-8").strip() or None
    except OSError as exc:
        raise SystemExit(f"agentwatch engine: cannot read the key file {path}: {exc.strerror or exc}") from exc


def run_engine(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.sim:
        return _run_sim(args)
    return _run_vllm(args)


def _run_sim(args: argparse.Namespace) -> int:
    from agentwatch_platform.reference_agent.engine.server import EngineConfig, serve

    try:
        config = EngineConfig(
            models=tuple(m.strip() for m in args.models.split(",") if m.strip()),
            policy=args.policy,
            slots=args.slots,
            kv_tokens=args.kv_tokens,
            speed=args.speed,
            otlp_endpoint=args.otlp_endpoint,
            api_key=_key(args.api_key_file, "AGENTWATCH_API_KEY"),
        )
    except (KeyError, ValueError) as exc:
        print(f"agentwatch engine: {exc}", file=sys.stderr)
        return 2
    print(f"simulated LLM engine (a simulation, not a model) on http://{args.host}:{args.port}/v1", file=sys.stderr)
    serve(config, host=args.host, port=args.port)
    return 0


def _run_vllm(args: argparse.Namespace) -> int:
    from agentwatch_platform.reference_agent.engine.vllm_launcher import LauncherError, VllmLaunch, launch

    config = VllmLaunch(
        model_path=args.vllm,
        host=args.host,
        port=args.port,
        served_model_name=args.served_model_name,
        collector_url=args.collector,
        collector_key=_key(args.api_key_file, "AGENTWATCH_API_KEY"),
        admin_key=_key(args.admin_key_file, "AGENTWATCH_ADMIN_KEY"),
        engine_name=args.engine_name,
        detailed_traces=args.detailed_traces,
    )
    try:
        return launch(config, health_timeout_s=args.health_timeout)
    except LauncherError as exc:
        print(f"agentwatch engine --vllm: {exc}", file=sys.stderr)
        return 2
