"""The scheduler in step units: the classic batching example and its invariants."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentwatch_platform.reference_agent.engine.scheduler import Request, Scheduler, SchedulerError, block_hashes
from tests.support.examples import examples

CLASSIC = [10, 3, 8, 2, 9, 4, 7, 5]


def run_all(scheduler: Scheduler, on_step=None) -> None:
    while scheduler.has_work():
        result = scheduler.step()
        if on_step is not None:
            on_step(result)
        assert scheduler.steps < 100_000, "scheduler made no progress"


def classic(policy: str) -> Scheduler:
    scheduler = Scheduler(slots=4, kv_tokens=10_000, policy=policy)
    for index, steps in enumerate(CLASSIC):
        scheduler.add(Request(f"r{index}", prompt_tokens=1, output_tokens=steps))
    run_all(scheduler)
    return scheduler


def test_classic_example_static_takes_19_steps_at_63_percent() -> None:
    scheduler = classic("static")
    assert scheduler.steps == 19
    assert round(scheduler.utilisation * 100) == 63


def test_classic_example_continuous_takes_14_steps_at_86_percent() -> None:
    scheduler = classic("continuous")
    assert scheduler.steps == 14
    assert round(scheduler.utilisation * 100) == 86


def test_continuous_batching_leaves_no_slot_idle_while_requests_wait() -> None:
    scheduler = Scheduler(slots=3, kv_tokens=100_000, policy="continuous")
    rng = random.Random(7)
    for index in range(30):
        scheduler.add(Request(f"r{index}", prompt_tokens=rng.randint(1, 50), output_tokens=rng.randint(1, 20)))

    def check(result) -> None:
        if result.num_waiting:
            assert result.batch_size == scheduler.slots

    run_all(scheduler, check)


def test_static_batching_admits_nothing_until_the_whole_batch_ends() -> None:
    scheduler = Scheduler(slots=2, kv_tokens=100_000, policy="static")
    for index, steps in enumerate([5, 1, 2]):
        scheduler.add(Request(f"r{index}", 4, steps))
    admitted_at = {}

    def record(result) -> None:
        for request in result.admitted:
            admitted_at[request.request_id] = result.step

    run_all(scheduler, record)
    assert admitted_at == {"r0": 1, "r1": 1, "r2": 6}  # r1 ended at step 1, its slot idled until r0 ended
    assert scheduler.steps == 7


@settings(max_examples=examples(60), deadline=None)
@given(
    slots=st.integers(1, 6),
    kv_blocks=st.integers(4, 40),
    policy=st.sampled_from(["continuous", "static"]),
    sizes=st.lists(st.tuples(st.integers(1, 60), st.integers(1, 40)), min_size=1, max_size=25),
)
def test_kv_budget_is_never_exceeded_and_every_request_finishes(slots, kv_blocks, policy, sizes) -> None:
    scheduler = Scheduler(slots=slots, kv_tokens=kv_blocks * 16, policy=policy)
    requests = []
    for index, (prompt, output) in enumerate(sizes):
        request = Request(f"r{index}", prompt, output)
        try:
            scheduler.add(request)
        except SchedulerError:
            continue
        requests.append(request)

    def check(result) -> None:
        held = sum(len(r.blocks) for r in scheduler.running)
        assert held <= kv_blocks
        assert scheduler.pool.used == held  # every used block belongs to a running sequence
        assert len(scheduler.running) <= slots
        for request in scheduler.running:  # each running sequence has room for what it holds
            assert len(request.blocks) * 16 >= request.prompt_tokens + request.generated

    run_all(scheduler, check)
    assert all(r.generated == r.output_tokens and r.finished_step is not None for r in requests)


def test_preemption_happens_when_the_cache_runs_out_and_work_is_recomputed() -> None:
    scheduler = Scheduler(slots=2, kv_tokens=4 * 16, policy="continuous")  # 4 blocks
    first, second = Request("a", 16, 30), Request("b", 16, 30)  # each needs 3 blocks in the end
    scheduler.add(first)
    scheduler.add(second)
    preempted = []
    prefill = []

    def record(result) -> None:
        preempted.extend(result.preempted)
        prefill.append(result.prefill_tokens)

    run_all(scheduler, record)
    assert [r.request_id for r in preempted] == ["b"]  # the most recently admitted one goes
    assert scheduler.total_preemptions == 1
    assert second.preemptions == 1 and second.generated == 30
    assert sum(prefill) > 32  # b's prompt and its generated tokens were computed again


def test_waiting_request_is_admitted_only_when_kv_blocks_free_up() -> None:
    scheduler = Scheduler(slots=4, kv_tokens=3 * 16, policy="continuous")
    scheduler.add(Request("big", 30, 2))  # 2 blocks
    scheduler.add(Request("next", 20, 2))  # 2 blocks: must wait although slots are free
    first = scheduler.step()
    assert [r.request_id for r in first.admitted] == ["big"] and first.num_waiting == 1
    run_all(scheduler)
    assert scheduler.steps == 4


def test_prefix_cache_serves_a_shared_prompt_prefix() -> None:
    scheduler = Scheduler(slots=4, kv_tokens=1024, policy="continuous")
    shared = [f"t{i}" for i in range(64)]
    first = Request("a", 70, 2, block_hashes(shared + ["x"] * 6))
    scheduler.add(first)
    run_all(scheduler)
    second = Request("b", 80, 2, block_hashes(shared + ["y"] * 16))
    scheduler.add(second)
    result = scheduler.step()
    assert second.cached_tokens == 64
    assert (result.prefix_queries, result.prefix_hits, result.prefill_tokens) == (80, 64, 16)
    third = Request("c", 80, 2, block_hashes(["z"] * 80))
    scheduler.add(third)
    scheduler.step()
    assert third.cached_tokens == 0


def test_a_request_larger_than_the_cache_is_refused_with_a_reason() -> None:
    scheduler = Scheduler(slots=1, kv_tokens=64)
    with pytest.raises(SchedulerError, match="needs 80 tokens of KV cache; the engine has 64"):
        scheduler.add(Request("huge", 70, 10))


def test_abort_frees_the_slot_and_blocks() -> None:
    scheduler = Scheduler(slots=1, kv_tokens=64)
    scheduler.add(Request("a", 10, 50))
    scheduler.add(Request("b", 10, 1))
    scheduler.step()
    assert scheduler.abort("a")
    result = scheduler.step()
    assert [r.request_id for r in result.finished] == ["b"]
    assert not scheduler.abort("a")
