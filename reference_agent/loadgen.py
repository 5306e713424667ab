"""The load generator: many simulated users running the research agent at once.

``N`` users share one event loop and one OpenAI client; each user runs questions one after
another (with an optional think time) until ``M`` runs are done in total. The closing summary
(runs/s, run latency p50/p95, tokens, cost, tool failures, budget stops, and the levers that
acted: degraded runs, runs the rate limiter queued or refused) is returned as a
``LoadSummary`` and printed by ``agentwatch loadgen``.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

from agentwatch_platform.reference_agent.agent import ResearchAgent, RunResult
from agentwatch_platform.reference_agent.corpus.build import TOPICS

QUESTION_TEMPLATES = (
    "How does {topic} affect the {term}?",
    "What are the failure modes of {topic} and how is the {term} involved?",
    "Compare {topic} with {other}: when does each win?",
    "What does {topic} cost in production, and how can the {term} reduce it?",
    "Which settings of {topic} matter most for the {term}?",
)


def make_questions(count: int, *, seed: int = 0) -> list[str]:
    """``count`` research questions over the corpus's topics, the same for the same seed."""
    rng = random.Random(seed)
    topics = sorted(TOPICS)
    questions = []
    for _ in range(count):
        topic = rng.choice(topics)
        _, terms, other = TOPICS[topic]
        questions.append(rng.choice(QUESTION_TEMPLATES).format(topic=topic, term=rng.choice(terms), other=other))
    return questions


@dataclass(frozen=True)
class LoadConfig:
    users: int = 4
    runs: int = 20  # in total, across all users
    think_time_s: float = 0.0
    duration_s: float | None = None  # no new run starts after this many seconds
    seed: int = 0
    questions: tuple[str, ...] = ()  # asked in turn; empty: make_questions(runs, seed)

    def __post_init__(self) -> None:
        if self.duration_s is not None and self.duration_s <= 0:
            raise ValueError(f"loadgen: duration_s must be > 0, got {self.duration_s}")
        if self.users < 1 or self.runs < 1:
            raise ValueError(f"loadgen: users and runs must be >= 1, got users={self.users} runs={self.runs}")
        if self.think_time_s < 0:
            raise ValueError(f"loadgen: think_time_s must be >= 0, got {self.think_time_s}")


@dataclass
class LoadSummary:
    """Totals of a load run, as the agents counted them."""

    runs: int
    succeeded: int
    failed: int
    abandoned: int
    duration_s: float
    runs_per_s: float
    latency_p50_s: float
    latency_p95_s: float
    input_tokens: int
    output_tokens: int
    cost_usd: float
    tool_calls: int
    tool_failures: int
    tool_timeouts: int
    cache_hits: int
    budget_stops: int
    degraded: int = 0
    rate_queued: int = 0
    rate_refused: int = 0
    results: list[RunResult] = field(default_factory=list, repr=False)

    @classmethod
    def of(cls, results: list[RunResult], duration_s: float) -> LoadSummary:
        """Runs, throughput and latency count the runs that did work: a request the rate limiter
        refused is not a run (``rate_refused`` counts it), as the collector counts it."""
        served = [r for r in results if r.outcome != "refused"]
        latencies = sorted(r.duration_s for r in served) or [0.0]
        return cls(
            runs=len(served),
            succeeded=sum(r.outcome == "success" for r in results),
            failed=sum(r.outcome == "failure" for r in results),
            abandoned=sum(r.outcome == "abandoned" for r in results),
            duration_s=duration_s,
            runs_per_s=len(served) / duration_s if duration_s > 0 else 0.0,
            latency_p50_s=_percentile(latencies, 0.50),
            latency_p95_s=_percentile(latencies, 0.95),
            input_tokens=sum(r.input_tokens for r in results),
            output_tokens=sum(r.output_tokens for r in results),
            cost_usd=sum(r.cost_usd for r in results),
            tool_calls=sum(r.tool_calls for r in results),
            tool_failures=sum(r.tool_failures for r in results),
            tool_timeouts=sum(r.tool_timeouts for r in results),
            cache_hits=sum(r.cache_hits for r in results),
            budget_stops=sum(bool(r.budget_exceeded) for r in results),
            degraded=sum(bool(r.degraded) for r in results),
            rate_queued=sum(r.rate_limit_delay_s > 0 for r in results),
            rate_refused=sum(r.rate_limited for r in results),
            results=results,
        )

    def format(self) -> str:
        return "\n".join(
            [
                f"runs            {self.runs} ({self.succeeded} success, {self.failed} failure, {self.abandoned} abandoned)",
                f"throughput      {self.runs_per_s:.2f} runs/s over {self.duration_s:.1f} s",
                f"run latency     p50 {self.latency_p50_s:.2f} s, p95 {self.latency_p95_s:.2f} s",
                f"tokens          {self.input_tokens} input, {self.output_tokens} output",
                f"cost            ${self.cost_usd:.4f}",
                f"tool calls      {self.tool_calls} ({self.tool_failures} failed, {self.tool_timeouts} timed out, "
                f"{self.cache_hits} cache hits)",
                f"budget stops    {self.budget_stops}",
                f"levers          {self.degraded} runs degraded, {self.rate_queued} queued and {self.rate_refused} "
                f"requests refused by the rate limiter (not runs)",
            ]
        )


def _percentile(ordered: list[float], q: float) -> float:
    if len(ordered) == 1:
        return ordered[0]
    return statistics.quantiles(ordered, n=100, method="inclusive")[round(q * 100) - 1]


class Progress:
    """A one-line progress bar on a terminal; plain lines every 10% elsewhere."""

    def __init__(self, total: int, *, stream: TextIO = sys.stderr, width: int = 30) -> None:
        self.total, self.done, self.failed = total, 0, 0
        self._stream, self._width = stream, width
        self._tty = stream.isatty()
        self._last_decile = -1

    def __call__(self, result: RunResult) -> None:
        self.done += 1
        self.failed += result.outcome != "success"
        if self._tty:
            filled = self._width * self.done // self.total
            end = "\n" if self.done == self.total else ""
            self._stream.write(
                f"\r[{'#' * filled}{'.' * (self._width - filled)}] {self.done}/{self.total} runs, "
                f"{self.failed} not successful{end}"
            )
        elif self.done * 10 // self.total > self._last_decile:
            self._last_decile = self.done * 10 // self.total
            self._stream.write(f"{self.done}/{self.total} runs done, {self.failed} not successful\n")
        self._stream.flush()


async def generate_load(
    agent: ResearchAgent, config: LoadConfig, *, on_result: Callable[[RunResult], None] | None = None
) -> LoadSummary:
    """Run ``config.runs`` agent runs (fewer if ``duration_s`` passes) from ``config.users`` users."""
    questions = config.questions or make_questions(config.runs, seed=config.seed)
    pending = iter(enumerate(itertools.islice(itertools.cycle(questions), config.runs)))
    results: list[RunResult] = []
    started = time.monotonic()
    deadline = started + config.duration_s if config.duration_s else float("inf")

    async def user(number: int) -> None:
        for index, question in pending:
            if time.monotonic() >= deadline:
                return
            result = await agent.run(question, user_id=f"user-{number}", session_id=f"session-{number}-{index}")
            results.append(result)
            if on_result is not None:
                on_result(result)
            if config.think_time_s:
                await asyncio.sleep(config.think_time_s)

    await asyncio.gather(*(user(n) for n in range(min(config.users, config.runs))))
    return LoadSummary.of(results, time.monotonic() - started)
