"""The agent's cost levers that act on whole runs: rate limiting and degradation.

- ``RateLimiter``: a token bucket per user and one per project. A request that finds a bucket
  empty waits for it (``queue``, at most ``max_wait_s``) or is refused (``reject``).
- ``DegradationPolicy``: under budget pressure (the share of the run's ``agentwatch.Budget``
  spent, from ``agentwatch.current_run().budget_used()``) or engine saturation (requests waiting,
  KV-cache use, read from the engine's Prometheus metrics by ``EngineWatch``), the run switches to
  the small model, caps its remaining steps, or moves from ReAct to the evolving-report mode.

The agent records each decision with ``agentwatch.record_lever`` so the collector can price what
it saved (see ``agentwatch/semconv.py``, ``agentwatch.lever.*``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import httpx
from prometheus_client.parser import text_string_to_metric_families

LimitMode = Literal["queue", "reject"]
DegradeAction = Literal["small_model", "cap_steps", "iterative"]
DEGRADE_ACTIONS: tuple[str, ...] = ("small_model", "cap_steps", "iterative")


class TokenBucket:
    """``rate`` tokens a second, at most ``burst`` saved up; one token per request."""

    def __init__(self, rate: float, burst: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError(f"token bucket: rate must be > 0 and burst >= 1, got rate={rate} burst={burst}")
        self.rate, self.burst, self._clock = rate, burst, clock
        self._tokens, self._at = float(burst), clock()

    def wait_s(self) -> float:
        """Seconds until a token is free (0.0: one is free now)."""
        self._refill()
        return max(0.0, (1.0 - self._tokens) / self.rate)

    def take(self) -> None:
        """Take a token, going into debt when none is free (a queued request holds its place)."""
        self._refill()
        self._tokens -= 1.0

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now


@dataclass(frozen=True)
class Admission:
    """What the limiter did to one request."""

    delay_s: float = 0.0
    refused: bool = False
    reason: str = ""


class RateLimiter:
    """Token buckets per user (``user_rate``/``user_burst``) and per project; ``None``: no limit."""

    def __init__(
        self,
        *,
        user_rate: float | None = None,
        user_burst: float = 1.0,
        project_rate: float | None = None,
        project_burst: float = 1.0,
        mode: LimitMode = "queue",
        max_wait_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if mode not in ("queue", "reject"):
            raise ValueError(f"rate limiter: mode must be queue or reject, got {mode!r}")
        if max_wait_s < 0:
            raise ValueError(f"rate limiter: max_wait_s must be >= 0, got {max_wait_s}")
        self.mode, self.max_wait_s, self._clock = mode, max_wait_s, clock
        self._user_rate, self._user_burst = user_rate, user_burst
        self._project = TokenBucket(project_rate, project_burst, clock=clock) if project_rate else None
        if user_rate is not None:
            TokenBucket(user_rate, user_burst)  # checks the arguments now, not at the first request
        self._users: dict[str, TokenBucket] = {}

    def admit_now(self, user_id: str) -> Admission:
        """Decide at once: free, delayed by ``delay_s`` (tokens taken), or refused (none taken)."""
        buckets = self._buckets(user_id)
        waits = [(bucket.wait_s(), name) for name, bucket in buckets]
        wait, which = max(waits, default=(0.0, ""))
        if wait > 0 and (self.mode == "reject" or wait > self.max_wait_s):
            return Admission(refused=True, reason=f"{which} over {self._rate_of(which):g} runs/s")
        for _, bucket in buckets:
            bucket.take()
        return Admission(delay_s=wait, reason=f"{which} over {self._rate_of(which):g} runs/s" if wait else "")

    async def admit(self, user_id: str) -> Admission:
        """``admit_now``, then wait out the delay."""
        admission = self.admit_now(user_id)
        if admission.delay_s:
            await asyncio.sleep(admission.delay_s)
        return admission

    def _buckets(self, user_id: str) -> list[tuple[str, TokenBucket]]:
        buckets = [("project", self._project)] if self._project is not None else []
        if self._user_rate is not None:
            bucket = self._users.get(user_id)
            if bucket is None:
                bucket = self._users[user_id] = TokenBucket(self._user_rate, self._user_burst, clock=self._clock)
            buckets.append((f"user {user_id or '(anonymous)'}", bucket))
        return buckets  # type: ignore[return-value]

    def _rate_of(self, which: str) -> float:
        return (self._project.rate if which == "project" and self._project else self._user_rate) or 0.0


class EngineWatch:
    """The engine's load from its Prometheus ``/metrics`` (vLLM's names), read at most every
    ``interval_s``; an engine that does not answer counts as not saturated."""

    def __init__(
        self, metrics_url: str, *, max_waiting: float = 4.0, max_kv_usage: float = 0.9, interval_s: float = 1.0
    ) -> None:
        self.metrics_url, self.max_waiting, self.max_kv_usage, self.interval_s = (
            metrics_url,
            max_waiting,
            max_kv_usage,
            interval_s,
        )
        self._read_at = -float("inf")
        self._reason: str | None = None

    async def saturation(self) -> str | None:
        """Why the engine counts as saturated now, or None."""
        if time.monotonic() - self._read_at >= self.interval_s:
            self._read_at = time.monotonic()
            with contextlib.suppress(httpx.HTTPError, ValueError):
                async with httpx.AsyncClient(timeout=2.0) as client:
                    self._reason = self.judge((await client.get(self.metrics_url)).text)
        return self._reason

    def judge(self, text: str) -> str | None:
        waiting = _gauge_sum(text, "vllm:num_requests_waiting")
        kv = _gauge_max(text, "vllm:kv_cache_usage_perc")
        if waiting >= self.max_waiting:
            return f"engine saturated: {waiting:g} requests waiting (max {self.max_waiting:g})"
        if kv >= self.max_kv_usage:
            return f"engine saturated: KV cache {kv:.0%} used (max {self.max_kv_usage:.0%})"
        return None


def _samples(text: str, name: str) -> list[float]:
    return [s.value for family in text_string_to_metric_families(text) for s in family.samples if s.name == name]


def _gauge_sum(text: str, name: str) -> float:
    return sum(_samples(text, name))


def _gauge_max(text: str, name: str) -> float:
    return max(_samples(text, name), default=0.0)


@dataclass(frozen=True)
class DegradationPolicy:
    """When a run degrades, and how; it degrades once."""

    action: DegradeAction = "small_model"
    budget_share: float | None = 0.6  # degrade once this share of the run's budget is spent
    cap_steps: int = 1  # cap_steps: research steps left after the switch
    engine: EngineWatch | None = None  # degrade too when the engine is saturated

    def __post_init__(self) -> None:
        if self.action not in DEGRADE_ACTIONS:
            raise ValueError(f"degradation: action must be one of {DEGRADE_ACTIONS}, got {self.action!r}")
        if self.budget_share is not None and not 0 < self.budget_share <= 1:
            raise ValueError(f"degradation: budget_share must be in (0, 1], got {self.budget_share}")
        if self.cap_steps < 0:
            raise ValueError(f"degradation: cap_steps must be >= 0, got {self.cap_steps}")

    async def pressure(self, budget_used: float | None) -> str | None:
        """Why the run should degrade now, or None."""
        if self.budget_share is not None and budget_used is not None and budget_used >= self.budget_share:
            return f"budget {budget_used:.0%} spent (degrade at {self.budget_share:.0%})"
        return await self.engine.saturation() if self.engine is not None else None


def projected_cost(
    cost_so_far: float, last_step_cost: float, steps_done: int, expected_steps: float, synthesis_cost: float
) -> float:
    """The run's cost if it went on as it was: its cost so far, its latest step's cost for each
    step it was expected to take still, and its synthesis."""
    return cost_so_far + max(expected_steps - steps_done, 0.0) * last_step_cost + synthesis_cost
