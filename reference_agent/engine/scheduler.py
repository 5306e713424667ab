"""The scheduler of the simulated engine, in step units: pure, deterministic, no clock.

One call to ``Scheduler.step()`` is one engine step. In it the scheduler

1. makes room for every running sequence's next token, preempting the most recently
   admitted sequence (recompute, as vLLM does) when no KV block is left;
2. unless it had to preempt, admits waiting requests (first come, first served) while a
   sequence slot is free and the KV cache has the blocks for the prompt plus the first
   token; a request whose prompt prefix is in the prefix cache reuses those blocks and only
   computes the rest;
3. "runs" the step: each admitted sequence computes its uncached prompt tokens and every
   running sequence emits one token, so a request that needs n tokens occupies its slot for
   n steps; sequences that reach their length finish and free their slot and blocks, and
   under ``continuous`` batching the freed slot is refilled at the next step.

Under ``static`` batching nothing is admitted until the whole current batch has finished
(head-of-line blocking by the longest member).

KV memory is counted in blocks of ``block_size`` tokens. Full prompt blocks are named by a
hash of the whole prefix up to and including them; when a request ends its blocks stay in
the prefix cache (evictable, least recently used first) so a later prompt with the same
prefix skips that prefill. The real-time server (``runner.py``) turns each step into a
duration with a model profile; the benchmark and the tests drive this class directly.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

Policy = Literal["continuous", "static"]
POLICIES: tuple[Policy, ...] = ("continuous", "static")
BLOCK_SIZE = 16


class SchedulerError(ValueError):
    """A request the engine can never run, or a bad scheduler setting."""


def block_hashes(pieces: Sequence[str], block_size: int = BLOCK_SIZE) -> tuple[bytes, ...]:
    """Chained hashes of the full blocks of a token sequence (a block's hash covers its whole prefix)."""
    hashes: list[bytes] = []
    previous = b""
    for start in range(0, len(pieces) - block_size + 1, block_size):
        digest = hashlib.blake2b(previous, digest_size=16)
        digest.update("\x00".join(pieces[start : start + block_size]).encode())
        previous = digest.digest()
        hashes.append(previous)
    return tuple(hashes)


@dataclass(eq=False)
class Request:
    """One sequence to generate: ``prompt_tokens`` in, exactly ``output_tokens`` out."""

    request_id: str
    prompt_tokens: int
    output_tokens: int
    prompt_block_hashes: tuple[bytes, ...] = ()
    generated: int = 0
    cached_tokens: int = 0  # prompt tokens served from the prefix cache at first admission
    preemptions: int = 0
    first_scheduled_step: int | None = None
    finished_step: int | None = None
    blocks: list[int] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.generated >= self.output_tokens


@dataclass
class StepResult:
    """What happened in one step."""

    step: int
    admitted: list[Request]
    emitted: list[Request]  # each of these produced one token (its ``generated``-th)
    finished: list[Request]
    preempted: list[Request]
    prefill_tokens: int  # prompt tokens computed in this step (not served by the prefix cache)
    prefix_queries: int  # prompt tokens looked up in the prefix cache
    prefix_hits: int  # of which found
    num_running: int
    num_waiting: int

    @property
    def batch_size(self) -> int:
        return len(self.emitted)


class BlockPool:
    """KV-cache blocks: free list, reference counts and the prefix cache (hash -> block)."""

    def __init__(self, num_blocks: int) -> None:
        self.num_blocks = num_blocks
        self._free: deque[int] = deque(range(num_blocks))  # never hashed, or evicted
        self._evictable: OrderedDict[int, None] = OrderedDict()  # cached, refcount 0, LRU first
        self._refs = [0] * num_blocks
        self._hash_of: dict[int, bytes] = {}
        self._block_of: dict[bytes, int] = {}

    @property
    def available(self) -> int:
        return len(self._free) + len(self._evictable)

    @property
    def used(self) -> int:
        return self.num_blocks - self.available

    def cached_prefix(self, hashes: Sequence[bytes]) -> list[int]:
        """Blocks of the longest cached prefix of ``hashes`` (not yet referenced)."""
        found: list[int] = []
        for block_hash in hashes:
            block = self._block_of.get(block_hash)
            if block is None:
                break
            found.append(block)
        return found

    def count_unreferenced(self, blocks: Sequence[int]) -> int:
        """How many of ``blocks`` are cached but held by nobody (taking them lowers ``available``)."""
        return sum(1 for block in blocks if self._refs[block] == 0)

    def take_cached(self, blocks: Sequence[int]) -> None:
        for block in blocks:
            self._evictable.pop(block, None)
            self._refs[block] += 1

    def allocate(self, count: int) -> list[int]:
        """``count`` fresh blocks, evicting cached ones when the free list is empty."""
        if count > self.available:
            raise SchedulerError(f"asked for {count} KV blocks, {self.available} available")
        return [self._allocate_one() for _ in range(count)]

    def _allocate_one(self) -> int:
        if self._free:
            return self._claim(self._free.popleft())
        block, _ = self._evictable.popitem(last=False)
        del self._block_of[self._hash_of.pop(block)]
        return self._claim(block)

    def _claim(self, block: int) -> int:
        self._refs[block] = 1
        return block

    def register(self, block: int, block_hash: bytes) -> None:
        """Name a computed full block so later prompts can reuse it."""
        if block_hash not in self._block_of and block not in self._hash_of:
            self._block_of[block_hash] = block
            self._hash_of[block] = block_hash

    def release(self, blocks: Sequence[int]) -> None:
        for block in blocks:
            self._refs[block] -= 1
            if self._refs[block] == 0:
                if block in self._hash_of:
                    self._evictable[block] = None
                else:
                    self._free.append(block)


class Scheduler:
    """Continuous or static batching over ``slots`` sequences and ``kv_tokens`` of KV cache."""

    def __init__(
        self,
        *,
        slots: int,
        kv_tokens: int,
        policy: Policy = "continuous",
        block_size: int = BLOCK_SIZE,
        prefix_caching: bool = True,
    ) -> None:
        if slots < 1:
            raise SchedulerError(f"slots must be >= 1, got {slots}")
        if kv_tokens < block_size:
            raise SchedulerError(f"kv_tokens must be >= one block ({block_size}), got {kv_tokens}")
        if policy not in POLICIES:
            raise SchedulerError(f"policy must be one of {POLICIES}, got {policy!r}")
        self.slots = slots
        self.policy: Policy = policy
        self.block_size = block_size
        self.prefix_caching = prefix_caching
        self.pool = BlockPool(kv_tokens // block_size)
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []  # in admission order
        self.steps = 0
        self.busy_slot_steps = 0
        self.total_preemptions = 0

    # --- public API -----------------------------------------------------------------------
    def add(self, request: Request) -> None:
        """Queue a request; raises ``SchedulerError`` if it could never fit in the KV cache."""
        if request.output_tokens < 1:
            raise SchedulerError(f"request {request.request_id}: output_tokens must be >= 1")
        needed = self._blocks_for(request.prompt_tokens + request.output_tokens)
        if needed > self.pool.num_blocks:
            raise SchedulerError(
                f"request {request.request_id} needs {request.prompt_tokens + request.output_tokens} "
                f"tokens of KV cache; the engine has {self.pool.num_blocks * self.block_size}"
            )
        self.waiting.append(request)

    def abort(self, request_id: str) -> bool:
        """Drop a request wherever it is (client went away); True if it was found."""
        for request in self.running:
            if request.request_id == request_id:
                self.running.remove(request)
                self._free(request)
                return True
        for request in self.waiting:
            if request.request_id == request_id:
                self.waiting.remove(request)
                return True
        return False

    def has_work(self) -> bool:
        return bool(self.running or self.waiting)

    @property
    def utilisation(self) -> float:
        """Busy slot-steps over all slot-steps so far."""
        return self.busy_slot_steps / (self.slots * self.steps) if self.steps else 0.0

    def step(self) -> StepResult:
        """Run one engine step (see the module docstring)."""
        self.steps += 1
        preempted = self._reserve_next_tokens()
        # as in vLLM: a step that had to preempt admits nobody (the cache is under pressure)
        admitted, queries, hits, prefill = ([], 0, 0, 0) if preempted else self._admit()
        emitted = list(self.running)
        finished = self._emit(emitted)
        self.busy_slot_steps += len(emitted)
        return StepResult(
            step=self.steps,
            admitted=admitted,
            emitted=emitted,
            finished=finished,
            preempted=preempted,
            prefill_tokens=prefill,
            prefix_queries=queries,
            prefix_hits=hits,
            num_running=len(self.running),
            num_waiting=len(self.waiting),
        )

    # --- admission ------------------------------------------------------------------------
    def _admit(self) -> tuple[list[Request], int, int, int]:
        admitted: list[Request] = []
        queries = hits = prefill = 0
        if self.policy == "static" and self.running:
            return admitted, 0, 0, 0
        while self.waiting and len(self.running) < self.slots:
            request = self.waiting[0]
            cached = self._try_allocate(request)
            if cached is None:
                break  # FCFS: the head waits for blocks, nobody overtakes it
            self.waiting.popleft()
            self.running.append(request)
            admitted.append(request)
            context = request.prompt_tokens + request.generated
            queries += request.prompt_tokens
            hits += cached
            prefill += context - cached
            if request.first_scheduled_step is None:
                request.first_scheduled_step = self.steps
                request.cached_tokens = cached
        return admitted, queries, hits, prefill

    def _try_allocate(self, request: Request) -> int | None:
        """Give ``request`` blocks for its context plus one token; the cached token count, or None."""
        hashes = request.prompt_block_hashes if self.prefix_caching else ()
        cached_blocks = self.pool.cached_prefix(hashes)
        # at least one prompt token is always computed, as in vLLM
        while cached_blocks and len(cached_blocks) * self.block_size >= request.prompt_tokens:
            cached_blocks.pop()
        needed = self._blocks_for(request.prompt_tokens + request.generated + 1)
        fresh = needed - len(cached_blocks)
        if fresh > self.pool.available - self.pool.count_unreferenced(cached_blocks):
            return None
        self.pool.take_cached(cached_blocks)
        request.blocks = cached_blocks + self.pool.allocate(fresh)
        for block, block_hash in zip(request.blocks, hashes, strict=False):
            self.pool.register(block, block_hash)
        return len(cached_blocks) * self.block_size

    # --- decoding -------------------------------------------------------------------------
    def _reserve_next_tokens(self) -> list[Request]:
        """Make sure every running sequence has a slot in the KV cache for its next token."""
        preempted: list[Request] = []
        index = 0
        while index < len(self.running):
            request = self.running[index]
            needed = self._blocks_for(request.prompt_tokens + request.generated + 1) - len(request.blocks)
            if needed <= 0:
                index += 1
                continue
            if self.pool.available >= needed:
                request.blocks.extend(self.pool.allocate(needed))
                index += 1
                continue
            victim = self.running.pop()  # the most recently admitted one
            self._preempt(victim)
            preempted.append(victim)
        return preempted

    def _preempt(self, request: Request) -> None:
        self._free(request)
        request.preemptions += 1
        self.total_preemptions += 1
        self.waiting.appendleft(request)

    def _emit(self, emitted: list[Request]) -> list[Request]:
        finished: list[Request] = []
        for request in emitted:
            request.generated += 1
            if request.finished:
                request.finished_step = self.steps
                finished.append(request)
        for request in finished:
            self.running.remove(request)
            self._free(request)
        return finished

    def _free(self, request: Request) -> None:
        self.pool.release(request.blocks)
        request.blocks = []

    def _blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)
