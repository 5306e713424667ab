"""The agent's run-level levers on their own: token buckets, the rate limiter, engine saturation
and the degradation policy (a fake clock: no sleeping, no timing)."""

from __future__ import annotations

import asyncio

import pytest

from agentwatch_platform.reference_agent.levers import (
    DegradationPolicy,
    EngineWatch,
    RateLimiter,
    TokenBucket,
    projected_cost,
)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_token_bucket_spends_its_burst_then_refills_at_its_rate() -> None:
    clock = Clock()
    bucket = TokenBucket(2.0, 3, clock=clock)
    for _ in range(3):
        assert bucket.wait_s() == 0.0
        bucket.take()
    assert bucket.wait_s() == pytest.approx(0.5)
    clock.now = 0.5
    assert bucket.wait_s() == 0.0


def test_queue_mode_delays_by_the_emptier_bucket_and_keeps_the_place() -> None:
    clock = Clock()
    limiter = RateLimiter(user_rate=1.0, user_burst=1, project_rate=4.0, project_burst=2, mode="queue", clock=clock)
    assert limiter.admit_now("a").delay_s == 0.0
    second = limiter.admit_now("a")  # user a's bucket is empty: a second to wait
    assert second.delay_s == pytest.approx(1.0) and not second.refused and "user a" in second.reason
    third = limiter.admit_now("a")  # behind the queued one
    assert third.delay_s == pytest.approx(2.0)
    assert limiter.admit_now("b").delay_s > 0  # the project's bucket (burst 2) is in debt now
    assert "project" in limiter.admit_now("c").reason


def test_reject_mode_refuses_without_taking_a_token() -> None:
    clock = Clock()
    limiter = RateLimiter(user_rate=1.0, mode="reject", clock=clock)
    assert not limiter.admit_now("a").refused
    refused = limiter.admit_now("a")
    assert refused.refused and refused.delay_s == 0.0 and "1 runs/s" in refused.reason
    clock.now = 1.0
    assert not limiter.admit_now("a").refused  # the refusal took nothing from the bucket


def test_queue_mode_refuses_past_max_wait() -> None:
    limiter = RateLimiter(project_rate=0.1, mode="queue", max_wait_s=5.0, clock=Clock())
    limiter.admit_now("a")
    assert limiter.admit_now("a").refused  # 10 s to wait > 5 s


@pytest.mark.parametrize(
    "kwargs", [{"mode": "drop"}, {"user_rate": 0.0}, {"project_rate": 1.0, "project_burst": 0.5}, {"max_wait_s": -1.0}]
)
def test_bad_limiter_settings_are_refused(kwargs: dict) -> None:
    with pytest.raises(ValueError, match="rate limiter|token bucket"):
        RateLimiter(**kwargs)


METRICS = """# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{model_name="sim-large"}} {waiting}
vllm:num_requests_waiting{{model_name="sim-small"}} 1.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{model_name="sim-large"}} {kv}
"""


def test_engine_saturation_from_waiting_requests_or_kv_cache() -> None:
    watch = EngineWatch("http://127.0.0.1:9/metrics", max_waiting=4, max_kv_usage=0.9)
    assert watch.judge(METRICS.format(waiting=2.0, kv=0.5)) is None
    assert "5 requests waiting" in (watch.judge(METRICS.format(waiting=4.0, kv=0.5)) or "")
    assert "KV cache 95%" in (watch.judge(METRICS.format(waiting=0.0, kv=0.95)) or "")


def test_unreachable_engine_is_not_saturated() -> None:
    assert asyncio.run(EngineWatch("http://127.0.0.1:9/metrics").saturation()) is None


def test_degradation_under_budget_pressure() -> None:
    policy = DegradationPolicy(action="cap_steps", budget_share=0.5)
    assert asyncio.run(policy.pressure(0.4)) is None and asyncio.run(policy.pressure(None)) is None
    assert asyncio.run(policy.pressure(0.55)) == "budget 55% spent (degrade at 50%)"
    with pytest.raises(ValueError, match="action"):
        DegradationPolicy(action="pray")  # type: ignore[arg-type]


def test_projected_cost_adds_the_latest_step_for_each_expected_step_and_the_synthesis() -> None:
    assert projected_cost(0.30, 0.05, 3, 6.0, 0.1) == pytest.approx(0.30 + 3 * 0.05 + 0.1)
    assert projected_cost(0.30, 0.05, 8, 6.0, 0.1) == pytest.approx(0.40)  # past the expectation: the synthesis only
