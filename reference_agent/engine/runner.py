"""The real-time driver of the scheduler: one asyncio task per served model.

Each loop iteration runs one scheduler step, sleeps for the step's duration from the model
profile (divided by the speed factor), then hands the tokens of that step to the waiting
HTTP handlers and updates the metrics. Requests that arrive during a step are admitted at
the next one, exactly as in a real engine. Nothing here decides *what* is said (that is
``policy.py``) or *when* (that is ``scheduler.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from .metrics import ModelMetrics
from .profiles import ModelProfile
from .scheduler import Policy, Request, Scheduler, StepResult, block_hashes
from .tracing import RequestRecord

log = logging.getLogger(__name__)
_ids = itertools.count(1)


@dataclass(eq=False)
class Job:
    """One request in flight: its planned output pieces and the events of its life."""

    request: Request
    pieces: Sequence[object]  # one per output token, opaque here (the server's deltas)
    finish_reason: str
    arrival: float
    model: str = ""  # the served model's name
    params: Mapping[str, float | int | None] = field(default_factory=dict)
    carrier: Mapping[str, str] = field(default_factory=dict)  # W3C trace headers of the caller
    tokens: asyncio.Queue[object] = field(default_factory=asyncio.Queue)
    scheduled: float | None = None
    first_token: float | None = None
    last_token: float | None = None
    finished: float | None = None

    def record(self) -> RequestRecord:
        assert self.scheduled is not None and self.first_token is not None and self.finished is not None
        max_tokens = self.params.get("max_tokens")
        return RequestRecord(
            request_id=self.request.request_id,
            model=self.model,
            arrival=self.arrival,
            scheduled=self.scheduled,
            first_token=self.first_token,
            finished=self.finished,
            prompt_tokens=self.request.prompt_tokens,
            completion_tokens=self.request.output_tokens,
            max_tokens=None if max_tokens is None else int(max_tokens),
            temperature=self.params.get("temperature"),
            top_p=self.params.get("top_p"),
            finish_reason=self.finish_reason,
            cached_tokens=self.request.cached_tokens,
        )


class ModelEngine:
    """Scheduler + profile + metrics for one model, stepped in real time."""

    def __init__(
        self,
        profile: ModelProfile,
        *,
        slots: int,
        kv_tokens: int,
        policy: Policy,
        metrics: ModelMetrics,
        speed: float = 1.0,
        on_finished: Callable[[Job], None] | None = None,
    ) -> None:
        if speed <= 0:
            raise ValueError(f"speed must be > 0, got {speed}")
        self.profile = profile
        self.scheduler = Scheduler(slots=slots, kv_tokens=kv_tokens, policy=policy)
        self.metrics = metrics
        self.speed = speed
        self._on_finished = on_finished
        self._jobs: dict[str, Job] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name=f"sim-engine-{self.profile.name}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for job in self._jobs.values():
            job.tokens.put_nowait(None)

    def submit(
        self,
        prompt_pieces: Sequence[str],
        pieces: Sequence[object],
        finish_reason: str,
        *,
        params: Mapping[str, float | int | None],
        carrier: Mapping[str, str],
    ) -> Job:
        """Queue a request; raises ``SchedulerError`` when it can never fit."""
        request = Request(
            f"chatcmpl-{next(_ids)}-{int(time.time() * 1000)}",
            len(prompt_pieces),
            len(pieces),
            block_hashes(prompt_pieces, self.scheduler.block_size),
        )
        job = Job(request, pieces, finish_reason, time.time(), model=self.profile.name, params=params, carrier=carrier)
        self.scheduler.add(request)
        self._jobs[request.request_id] = job
        self._set_gauges()
        self._wake.set()
        return job

    def abort(self, job: Job) -> None:
        """Forget a request whose client went away."""
        if self._jobs.pop(job.request.request_id, None) is not None:
            self.scheduler.abort(job.request.request_id)
            self.metrics.success("abort")
            self._set_gauges()

    async def stream(self, job: Job) -> AsyncIterator[object]:
        """The job's pieces as the engine produces them."""
        while (piece := await job.tokens.get()) is not None:
            yield piece

    async def _loop(self) -> None:
        while True:
            if not self.scheduler.has_work():
                self._wake.clear()
                await self._wake.wait()
                continue
            started = time.perf_counter()
            step_start = time.time()
            result = self.scheduler.step()
            duration = self.profile.step_seconds(result.batch_size, result.prefill_tokens) / self.speed
            await asyncio.sleep(max(0.0, duration - (time.perf_counter() - started)))
            try:
                self._deliver(result, step_start, time.time())
            except Exception:  # a bug here must not stop the engine for every other request
                log.exception("simulated engine: failed to deliver step %d", result.step)

    def _deliver(self, result: StepResult, step_start: float, now: float) -> None:
        for request in result.admitted:
            job = self._jobs.get(request.request_id)
            if job is not None and job.scheduled is None:
                job.scheduled = step_start
                self.metrics.queue.observe(step_start - job.arrival)
        for request in result.emitted:
            job = self._jobs.get(request.request_id)
            if job is not None:
                self._emit(job, now)
        for request in result.finished:
            job = self._jobs.pop(request.request_id, None)
            if job is not None:
                self._finish(job, now)
        self._set_gauges()
        self._update_counters(result)

    def _emit(self, job: Job, now: float) -> None:
        if job.first_token is None:
            job.first_token = now
            self.metrics.ttft.observe(now - job.arrival)
        elif job.last_token is not None:
            self.metrics.itl.observe(now - job.last_token)
        job.last_token = now
        job.tokens.put_nowait(job.pieces[job.request.generated - 1])

    def _finish(self, job: Job, now: float) -> None:
        job.finished = now
        job.tokens.put_nowait(None)
        self.metrics.e2e.observe(now - job.arrival)
        self.metrics.success("stop" if job.finish_reason == "tool_calls" else job.finish_reason)
        if self._on_finished is not None:
            try:
                self._on_finished(job)
            except Exception:
                log.exception("simulated engine: finished-request hook failed")

    def _set_gauges(self) -> None:
        scheduler, m = self.scheduler, self.metrics
        m.running.set(len(scheduler.running))
        m.waiting.set(len(scheduler.waiting))
        m.kv_usage.set(scheduler.pool.used / scheduler.pool.num_blocks)

    def _update_counters(self, result: StepResult) -> None:
        m = self.metrics
        m.prefix_queries.inc(result.prefix_queries)
        m.prefix_hits.inc(result.prefix_hits)
        m.preemptions.inc(len(result.preempted))
        m.prompt_tokens.inc(result.prefill_tokens + result.prefix_hits)
        m.generation_tokens.inc(result.batch_size)
