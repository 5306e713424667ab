"""``agentwatch agent``, ``agentwatch loadgen`` and ``agentwatch demo``.

``--api-key`` is the LLM endpoint's key (OpenAI's convention); the collector's project key is
``--collector-key`` (or ``AGENTWATCH_API_KEY``, which the SDK reads by itself).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

import agentwatch

from agentwatch_platform.reference_agent.agent import MODES, AgentConfig, ResearchAgent, RunResult, make_client
from agentwatch_platform.reference_agent.levers import DEGRADE_ACTIONS, DegradationPolicy, EngineWatch, RateLimiter
from agentwatch_platform.reference_agent.loadgen import LoadConfig, LoadSummary, Progress, generate_load
from agentwatch_platform.reference_agent.tools import Corpus, ResearchTools, ToolCache, ToolConfig

DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"
SERVICE_NAME = "research-agent"


def register(sub: argparse._SubParsersAction) -> None:
    agent = sub.add_parser("agent", help="run the research agent once and print its report")
    agent.add_argument("--question", required=True, help="the research question")
    agent.add_argument(
        "--crash-after-steps",
        type=int,
        default=None,
        metavar="N",
        help="simulate a crash: SIGKILL this process once N research steps have reached the collector",
    )
    _add_agent_arguments(agent)
    agent.set_defaults(func=run_agent_command)

    load = sub.add_parser("loadgen", help="many concurrent research-agent runs, with a summary")
    load.add_argument("--users", type=int, default=4, help="concurrent simulated users (default 4)")
    load.add_argument("--runs", type=int, default=20, help="runs in total across users (default 20)")
    load.add_argument("--think-time", type=float, default=0.0, help="seconds a user waits between runs")
    _add_agent_arguments(load)
    load.set_defaults(func=run_loadgen_command)

    from agentwatch_platform.reference_agent.demo import register_demo

    register_demo(sub)


def _add_agent_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--mode",
        choices=MODES,
        default="iterative",
        help="react: whole history every step; iterative: bounded evolving report",
    )
    parser.add_argument(
        "--base-url",
        default=os.environ.get("OPENAI_BASE_URL", DEFAULT_BASE_URL),
        help=f"OpenAI-compatible endpoint (default {DEFAULT_BASE_URL}, the simulated engine)",
    )
    parser.add_argument(
        "--api-key",
        default=os.environ.get("OPENAI_API_KEY", "none"),
        help="the LLM endpoint's API key (default $OPENAI_API_KEY)",
    )
    parser.add_argument("--model", default="sim-large", help="model for the synthesis (default sim-large)")
    parser.add_argument(
        "--small-model",
        default="sim-small",
        help="model for the easy decisions; '' sends everything to --model (default sim-small)",
    )
    parser.add_argument("--max-steps", type=int, default=12, help="step limit of a run (default 12)")
    parser.add_argument("--budget-usd", type=float, default=None, help="agentwatch.Budget max cost per run")
    parser.add_argument("--max-seconds", type=float, default=None, help="agentwatch.Budget max wall time per run")
    parser.add_argument(
        "--step-pause",
        type=float,
        default=0.0,
        help="seconds each research step waits after acting (long runs to watch live; default 0)",
    )
    parser.add_argument("--tool-latency", type=float, default=0.02, help="mean tool latency in seconds")
    parser.add_argument("--tool-failure-rate", type=float, default=0.0, help="probability a tool call fails")
    parser.add_argument("--tool-timeout-rate", type=float, default=0.0, help="probability a tool call times out")
    parser.add_argument(
        "--tool-timeout",
        type=float,
        default=1.0,
        help="seconds the agent waits for a tool call before it counts as timed out (default 1)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the tool failures and the questions")
    parser.add_argument(
        "--degrade",
        choices=DEGRADE_ACTIONS,
        default=None,
        help="degradation under pressure: small_model, cap_steps or iterative (default off)",
    )
    parser.add_argument(
        "--degrade-at",
        type=float,
        default=0.6,
        help="share of the run's --budget-usd spent that counts as pressure (default 0.6)",
    )
    parser.add_argument("--degrade-cap-steps", type=int, default=1, help="cap_steps: research steps left (default 1)")
    parser.add_argument(
        "--degrade-on-engine",
        action="store_true",
        help="degrade too when the engine is saturated (its /metrics: requests waiting, KV cache)",
    )
    parser.add_argument(
        "--rate-limit-user",
        type=_rate,
        default=None,
        metavar="RATE[/BURST]",
        help="token bucket per user: runs per second, optional burst (e.g. 0.5/2)",
    )
    parser.add_argument(
        "--rate-limit-project",
        type=_rate,
        default=None,
        metavar="RATE[/BURST]",
        help="token bucket for the whole project",
    )
    parser.add_argument(
        "--rate-limit-mode",
        choices=("queue", "reject"),
        default="queue",
        help="a run that finds a bucket empty waits (queue, at most 5 s) or is refused",
    )
    parser.add_argument("--collector", default=None, help="collector URL for the traces (default $AGENTWATCH_ENDPOINT)")
    parser.add_argument("--collector-key", default=None, help="project API key (default $AGENTWATCH_API_KEY)")
    parser.add_argument(
        "--agent-version",
        default=None,
        help="the agent's version recorded on its runs (service.version; default $AGENTWATCH_SERVICE_VERSION)",
    )


def _rate(text: str) -> tuple[float, float]:
    """``RATE`` or ``RATE/BURST`` (runs per second, and how many may come at once)."""
    rate, _, burst = text.partition("/")
    try:
        return float(rate), float(burst or 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected RATE or RATE/BURST (e.g. 0.5/2), got {text!r}") from None


def build_agent(args: argparse.Namespace, *, cache: ToolCache | None = None) -> ResearchAgent:
    """The agent the command-line arguments describe; bad values raise ``ValueError``."""
    config = AgentConfig(
        mode=args.mode,
        model=args.model,
        small_model=args.small_model or None,
        max_steps=args.max_steps,
        max_cost_usd=args.budget_usd,
        max_seconds=args.max_seconds,
        tool_timeout_s=args.tool_timeout,
        degradation=_degradation(args),
        step_pause_s=args.step_pause,
        crash_after_steps=getattr(args, "crash_after_steps", None),
    )
    tools = ResearchTools(
        Corpus.load(),
        ToolConfig(
            latency_s=args.tool_latency,
            failure_rate=args.tool_failure_rate,
            timeout_rate=args.tool_timeout_rate,
            seed=args.seed,
        ),
    )
    return ResearchAgent(
        make_client(args.base_url, args.api_key),
        tools,
        config=config,
        cache=cache,
        seed=args.seed,
        rate_limiter=_rate_limiter(args),
    )


def _degradation(args: argparse.Namespace) -> DegradationPolicy | None:
    if args.degrade is None:
        return None
    engine = (
        EngineWatch(args.base_url.removesuffix("/").removesuffix("/v1") + "/metrics")
        if args.degrade_on_engine
        else None
    )
    return DegradationPolicy(
        action=args.degrade,
        budget_share=args.degrade_at if args.budget_usd else None,
        cap_steps=args.degrade_cap_steps,
        engine=engine,
    )


def _rate_limiter(args: argparse.Namespace) -> RateLimiter | None:
    user, project = args.rate_limit_user, args.rate_limit_project
    if user is None and project is None:
        return None
    return RateLimiter(
        user_rate=user[0] if user else None,
        user_burst=user[1] if user else 1.0,
        project_rate=project[0] if project else None,
        project_burst=project[1] if project else 1.0,
        mode=args.rate_limit_mode,
    )


def _init_sdk(args: argparse.Namespace) -> None:
    agentwatch.init(
        endpoint=args.collector,
        api_key=args.collector_key,
        service_name=SERVICE_NAME,
        service_version=getattr(args, "agent_version", None),
    )


def run_agent_command(args: argparse.Namespace) -> int:
    try:
        agent = build_agent(args)
    except ValueError as exc:
        print(f"agentwatch agent: {exc}", file=sys.stderr)
        return 2
    _init_sdk(args)
    try:
        result = asyncio.run(agent.run(args.question))
    finally:
        agentwatch.shutdown()
    print(format_result(result))
    return 0 if result.outcome == "success" else 1


def format_result(result: RunResult) -> str:
    return "\n".join(
        [
            result.report or f"(no report: {result.reason})",
            "",
            f"outcome   {result.outcome} ({result.reason})",
            f"steps     {result.steps} ({result.llm_calls} LLM calls, {result.tool_calls} tool calls, "
            f"{result.tool_failures} failed, {result.cache_hits} cache hits)",
            f"tokens    {result.input_tokens} input ({result.cached_tokens} cached), {result.output_tokens} output",
            f"context   input tokens of each decision: {result.step_input_tokens}",
            f"cost      ${result.cost_usd:.6f}",
            f"duration  {result.duration_s:.2f} s",
            f"trace     {result.trace_id}",
        ]
    )


def run_loadgen_command(args: argparse.Namespace) -> int:
    try:
        load = LoadConfig(users=args.users, runs=args.runs, think_time_s=args.think_time, seed=args.seed)
        agent = build_agent(args)
    except ValueError as exc:
        print(f"agentwatch loadgen: {exc}", file=sys.stderr)
        return 2
    _init_sdk(args)
    try:
        summary: LoadSummary = asyncio.run(generate_load(agent, load, on_result=Progress(load.runs)))
    finally:
        agentwatch.shutdown()
    print(summary.format())
    return 0
