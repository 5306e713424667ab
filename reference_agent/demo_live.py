"""The demo's runs to watch while they run: a long run, and agents that crash mid-run.

Beside the demo's traffic, each in its own process as a user's agent would be (``agentwatch
agent``, traced by the SDK to the demo's collector):

- a *long run* lane: one research run at a time whose steps each wait ``LONG_STEP_PAUSE_S``
  (a minute or more per run), so the dashboard's pinned running run, its rising step count
  and its open spans are there to watch throughout the demo;
- a *crash* lane: every ``CRASH_EVERY_S`` an agent is started that SIGKILLs itself once its
  first ``CRASH_AFTER_STEPS`` steps have reached the collector (``agentwatch agent
  --crash-after-steps``), mid-run whatever the machine's speed: its root span never comes, and
  the run turns ``incomplete`` once the collector's idle timeout (``idle_timeout_s``, a minute
  at most in the demo) has passed. ``Crashes`` counts them for the demo's report.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentwatch_platform.reference_agent.supervisor import ProcessGroup

LONG_STEP_PAUSE_S = 10.0
CRASH_EVERY_S = 60.0
CRASH_AFTER_STEPS = 1
IDLE_TIMEOUT_ENV = "AGENTWATCH_RUN_IDLE_TIMEOUT_S"


def idle_timeout_s(duration_s: float) -> float:
    """The demo collector's run idle timeout: a minute, less in a short demo (half its traffic),
    so that a killed run turns incomplete while the demo still runs."""
    return min(60.0, max(10.0, duration_s / 2))


@dataclass
class Crashes:
    """The agents that crashed mid-run so far, and when the last did (epoch seconds)."""

    count: int = 0
    last_at: float = 0.0


def describe(duration_s: float) -> str:
    return (
        f"live view: a long run (each step waits {LONG_STEP_PAUSE_S:.0f} s) runs throughout; every "
        f"{CRASH_EVERY_S:.0f} s an agent is SIGKILLed once its first step has reached the collector, and its run "
        f"turns incomplete after {idle_timeout_s(duration_s):.0f} s without a span ({IDLE_TIMEOUT_ENV})"
    )


def _agent_argv(engine_url: str, question: str, *, step_pause_s: float, seed: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "agentwatch",
        "agent",
        "--question",
        question,
        "--base-url",
        engine_url + "/v1",
        "--mode",
        "iterative",
        "--max-steps",
        "12",
        "--step-pause",
        f"{step_pause_s:g}",
        "--seed",
        str(seed),
    ]


async def long_and_crashing_runs(
    group: ProcessGroup,
    engine_url: str,
    collector: str,
    key: str,
    questions: Sequence[str],
    duration_s: float,
    log: Callable[[str], None],
    crashes: Crashes,
) -> None:
    """Both lanes until ``duration_s`` has passed (or the task is cancelled). A long run under
    way then goes on (the demo keeps serving) until the demo stops its children."""
    env = {  # the key not in argv: ps shows it; the prompts are the demo's own, captured as the demo's are
        "AGENTWATCH_ENDPOINT": collector,
        "AGENTWATCH_API_KEY": key,
        "AGENTWATCH_CAPTURE_CONTENT": "true",
    }
    loop = asyncio.get_running_loop()
    deadline = loop.time() + duration_s
    await asyncio.gather(
        _long_lane(group, engine_url, env, questions, deadline),
        _crash_lane(group, engine_url, env, questions, deadline, log, crashes),
    )


async def _long_lane(
    group: ProcessGroup, engine_url: str, env: dict[str, str], questions: Sequence[str], deadline: float
) -> None:
    loop = asyncio.get_running_loop()
    for n in itertools.count():
        if loop.time() >= deadline:
            return
        proc = group.start(
            f"long-run-{n}",
            _agent_argv(engine_url, questions[n % len(questions)], step_pause_s=LONG_STEP_PAUSE_S, seed=n),
            env,
        )
        while proc.poll() is None:
            await asyncio.sleep(1.0)


async def _crash_lane(
    group: ProcessGroup,
    engine_url: str,
    env: dict[str, str],
    questions: Sequence[str],
    deadline: float,
    log: Callable[[str], None],
    crashes: Crashes,
) -> None:
    loop = asyncio.get_running_loop()
    for n in itertools.count():
        started = loop.time()
        if started + CRASH_AFTER_STEPS * LONG_STEP_PAUSE_S >= deadline:
            return
        argv = _agent_argv(engine_url, questions[-1 - n % len(questions)], step_pause_s=LONG_STEP_PAUSE_S, seed=100 + n)
        proc = group.start(f"crashing-agent-{n}", [*argv, "--crash-after-steps", str(CRASH_AFTER_STEPS)], env)
        try:
            while proc.poll() is None:
                await asyncio.sleep(0.5)
        finally:
            _kill(proc)  # cancelled: the demo stops
        if proc.returncode == -signal.SIGKILL:
            crashes.count, crashes.last_at = crashes.count + 1, time.time()
            log(f"  an agent was killed mid-run (SIGKILL, pid {proc.pid}): its run turns incomplete")
        else:
            log(f"  a crashing agent ended before its crash (exit code {proc.returncode}; its log says why)")
        await asyncio.sleep(max(0.0, started + CRASH_EVERY_S - loop.time()))


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the agent and its children (its own session: the group's children start one each)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
