"""What-if against measurement: does ``/api/whatif`` predict what a cost policy really saves?

For each policy (routing the research steps to the small model, a step cap, the evolving report
instead of ReAct) it runs the reference agent with the policy off through ``generate_load``,
asks the collector's ``/api/whatif`` to estimate the policy over that range, runs the same
questions again with the policy on, and compares the estimated cost change with the measured
one (both from the collector's stored, priced spans). The acceptance bound is +/-15 %.

Everything runs on this machine: the collector on embedded chDB in a temporary directory and
the simulated engine (``--speed`` times real time), each in its own process, the agent in this
one, traced by the SDK. Figures go to ``bench/results/levers.{json,md}``. Run from the repository root:

    .venv/bin/python -m bench.levers                 # 3 users, 12 runs per phase
    .venv/bin/python -m bench.levers --runs 30 --users 4
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import agentwatch
import httpx

from agentwatch_platform.reference_agent.agent import AgentConfig, ResearchAgent, make_client
from agentwatch_platform.reference_agent.keys import project_key
from agentwatch_platform.reference_agent.loadgen import LoadConfig, generate_load, make_questions
from agentwatch_platform.reference_agent.supervisor import ProcessGroup, start_collector, start_engine
from agentwatch_platform.reference_agent.tools import Corpus, ResearchTools, ToolCache, ToolConfig
from bench.ports import free_port

RESULTS = Path(__file__).resolve().parent / "results"
BOUND = 0.15  # the acceptance: estimate within +/-15 % of the measured change
EXTRA_BOUNDS: list[int] = []  # --bounds: the evolving report's estimate at other bounds, printed


@dataclass(frozen=True)
class Scenario:
    name: str
    off: dict[str, Any]  # AgentConfig fields with the policy off
    on: dict[str, Any]  # ... and on
    whatif: dict[str, Any]  # /api/whatif parameters of the policy


SCENARIOS = (
    Scenario(
        "routing",
        {"mode": "iterative", "small_model": None},
        {"mode": "iterative", "small_model": "sim-small"},
        {"policy": "route", "step": "research", "model": "sim-small"},
    ),
    Scenario(
        "step cap",
        {"mode": "react", "max_steps": 12},
        {"mode": "react", "max_steps": 4},
        {"policy": "cap_steps", "cap": 4},
    ),
    Scenario("evolving report", {"mode": "react"}, {"mode": "iterative"}, {"policy": "evolving_report", "bound": 100}),
)


@dataclass
class Phase:
    start: float
    end: float
    runs: int
    cost_usd: float  # stored, as the collector priced it
    tokens: int


@dataclass
class Outcome:
    scenario: str
    off: Phase
    on: Phase
    estimate: dict[str, Any] = field(default_factory=dict)

    @property
    def measured_change(self) -> float:
        return self.on.cost_usd - self.off.cost_usd

    @property
    def error(self) -> float:
        """Relative error of the estimated change against the measured one."""
        return (self.estimate["change_usd"] - self.measured_change) / abs(self.measured_change)

    def row(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "runs_per_phase": self.off.runs,
            "cost_off_usd": self.off.cost_usd,
            "cost_on_usd": self.on.cost_usd,
            "measured_change_usd": self.measured_change,
            "estimated_change_usd": self.estimate["change_usd"],
            "uncertainty_usd": self.estimate["uncertainty_usd"],
            "estimate_base_usd": self.estimate["actual_usd"],
            "tokens_off": self.off.tokens,
            "tokens_on": self.on.tokens,
            "estimated_tokens": self.estimate["estimate_tokens"],
            "error": self.error,
            "within_bound": abs(self.error) <= BOUND,
            "whatif": self.estimate["description"],
            "estimated_change_by_bound": self.estimate["sensitivity"],
        }


class Stack:
    """Collector and simulated engine in child processes; reads through the query API."""

    def __init__(self, data_dir: Path, speed: float) -> None:
        self.group = ProcessGroup(data_dir / "logs", log=print)
        self.engine = start_engine(self.group, port=free_port(), speed=speed)
        self.collector = start_collector(
            self.group,
            data_dir,
            port=free_port(),
            grpc_port=0,
            env={"AGENTWATCH_FLUSH_INTERVAL_S": "0.2", "AGENTWATCH_ALERT_INTERVAL_S": "0"},
        )
        self.key = project_key(self.collector, data_dir, "levers-bench")
        self.group.wait_ready("engine", self.engine + "/v1/models")

    def get(self, path: str, **params: Any) -> Any:
        response = httpx.get(
            self.collector + path, params=params, headers={"Authorization": f"Bearer {self.key}"}, timeout=60
        )
        response.raise_for_status()
        return response.json()

    def stored(self, start: float, end: float, runs: int, timeout_s: float = 120.0) -> Phase:
        """The phase's runs (those that started in [start, end)) once every one is stored and
        their cost has stopped moving. (``/api/cost`` counts whole minutes; a phase is seconds.)"""
        agentwatch.force_flush()
        deadline, last = time.monotonic() + timeout_s, None
        while time.monotonic() < deadline:
            page = self.get("/api/runs", start=start, end=end, limit=500)
            figures = (
                page["total"],
                sum(r["cost_usd"] for r in page["items"]),
                sum(r["input_tokens"] + r["output_tokens"] for r in page["items"]),
            )
            if page["total"] >= runs and figures == last:
                return Phase(start, end, *figures)
            last = figures
            time.sleep(1.0)
        raise RuntimeError(f"runs of [{start}, {end}) not stored within {timeout_s} s: {last}")


def _agent(stack: Stack, config: dict[str, Any], seed: int) -> ResearchAgent:
    client = make_client(stack.engine + "/v1", "bench", timeout_s=120.0, max_retries=0)
    tools = ResearchTools(Corpus.load(), ToolConfig(latency_s=0.001, seed=seed))
    return ResearchAgent(client, tools, config=AgentConfig(**config), cache=ToolCache(), seed=seed)


def _phase(stack: Stack, config: dict[str, Any], load: LoadConfig) -> Phase:
    start = time.time()
    summary = asyncio.run(generate_load(_agent(stack, config, load.seed), load))
    end = time.time() + 0.001
    time.sleep(0.5)  # the next phase starts after this one's range ends
    return stack.stored(start, end, summary.runs)


def measure(stack: Stack, scenario: Scenario, load: LoadConfig) -> Outcome:
    off = _phase(stack, scenario.off, load)
    estimate = stack.get("/api/whatif", start=off.start, end=off.end, **scenario.whatif)
    estimate["sensitivity"] = {
        bound: stack.get("/api/whatif", start=off.start, end=off.end, **{**scenario.whatif, "bound": bound})[
            "change_usd"
        ]
        for bound in (EXTRA_BOUNDS if scenario.whatif["policy"] == "evolving_report" else ())
    }
    on = _phase(stack, scenario.on, load)
    return Outcome(scenario.name, off, on, estimate)


def report(outcomes: list[Outcome], args: argparse.Namespace, elapsed_s: float) -> dict[str, Any]:
    return {
        "benchmark": "levers",
        "machine": platform.platform(),
        "python": platform.python_version(),
        "users": args.users,
        "runs_per_phase": args.runs,
        "engine_speed": args.speed,
        "bound": BOUND,
        "seed": args.seed,
        "bounds": args.bounds,
        "elapsed_s": elapsed_s,
        "scenarios": [o.row() for o in outcomes],
        "all_within_bound": all(abs(o.error) <= BOUND for o in outcomes),
    }


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "# What-if against measurement (bench/levers.py)",
        "",
        f"{result['users']} users, {result['runs_per_phase']} runs per phase, simulated engine at {result['engine_speed']:g}x; "
        f"acceptance: the estimated cost change within +/-{result['bound']:.0%} of the measured one. "
        f"Command: `.venv/bin/python -m bench.levers --users {result['users']} --runs {result['runs_per_phase']} "
        f"--seed {result['seed']} --bounds {' '.join(map(str, result['bounds']))}`.",
        "",
        "| policy | cost off (USD) | cost on (USD) | measured change | estimated change (95 %) | error | within bound |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in result["scenarios"]:
        lines.append(
            f"| {r['whatif']} | {r['cost_off_usd']:.5f} | {r['cost_on_usd']:.5f} | {r['measured_change_usd']:+.5f} | "
            f"{r['estimated_change_usd']:+.5f} +/- {r['uncertainty_usd']:.5f} | {r['error']:+.1%} | "
            f"{'yes' if r['within_bound'] else 'NO'} |"
        )
    for r in result["scenarios"]:
        if r["estimated_change_by_bound"]:
            by_bound = ", ".join(f"{b} tokens {c:+.5f}" for b, c in r["estimated_change_by_bound"].items())
            lines += [
                "",
                f"The evolving report's estimate by its `bound` (report tokens a call carries; measured "
                f"{r['measured_change_usd']:+.5f}): {by_bound}.",
            ]
    lines += ["", f"Machine: {result['machine']}, Python {result['python']}; {result['elapsed_s']:.0f} s in all."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=3)
    parser.add_argument("--runs", type=int, default=12, help="runs per phase (two phases per policy)")
    parser.add_argument("--speed", type=float, default=40.0, help="the simulated engine's speed-up over real time")
    parser.add_argument("--only", choices=[s.name for s in SCENARIOS], default=None)
    parser.add_argument(
        "--bounds",
        type=int,
        nargs="*",
        default=[],
        help="evolving report: also print the estimate for these bounds (tokens)",
    )
    parser.add_argument("--seed", type=int, default=7, help="seed of the questions")
    parser.add_argument("--out", type=Path, default=RESULTS / "levers")
    args = parser.parse_args(argv)
    EXTRA_BOUNDS[:] = args.bounds
    load = LoadConfig(
        users=args.users, runs=args.runs, questions=tuple(make_questions(args.runs, seed=args.seed)), seed=args.seed
    )
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="aw-levers-") as tmp:
        stack = Stack(Path(tmp), args.speed)
        try:
            agentwatch.init(
                endpoint=stack.collector, api_key=stack.key, service_name="levers-bench", export_interval_s=0.2
            )
            outcomes = []
            for scenario in SCENARIOS:
                if args.only in (None, scenario.name):
                    outcomes.append(measure(stack, scenario, load))
                    print(json.dumps(outcomes[-1].row()), flush=True)
        finally:
            agentwatch.shutdown()
            stack.group.stop()
    result = report(outcomes, args, time.monotonic() - started)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(markdown(result))
    print(markdown(result))
    return 0 if result["all_within_bound"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
