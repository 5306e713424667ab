"""The load generator and the ``agentwatch agent`` / ``loadgen`` commands, against the live
simulated engine (in-process server, 40x real time)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import agentwatch
import pytest
from agentwatch.cli import main

from agentwatch_platform.reference_agent.agent import AgentConfig, ResearchAgent, RunResult, make_client
from agentwatch_platform.reference_agent.engine.server import EngineConfig, running_server
from agentwatch_platform.reference_agent.loadgen import LoadConfig, LoadSummary, generate_load, make_questions
from agentwatch_platform.reference_agent.tools import Corpus, ResearchTools, ToolConfig
from tests.support.ports import free_port

pytestmark = pytest.mark.slow  # agent runs against the live engine (make test runs it, make quick not)


@pytest.fixture(scope="module")
def engine() -> Iterator[str]:
    with running_server(EngineConfig(speed=40.0), port=free_port()) as url:
        yield url


@pytest.fixture(autouse=True)
def sdk_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """The commands call agentwatch.init(); these tests check the agent, not the export."""
    monkeypatch.setenv("AGENTWATCH_SDK_ENABLED", "false")


def _agent(engine: str, tools: ToolConfig, **config: object) -> ResearchAgent:
    client = make_client(engine + "/v1", "test", max_retries=0)
    return ResearchAgent(client, ResearchTools(Corpus.load(), tools), config=AgentConfig(**config))  # type: ignore[arg-type]


def test_questions_are_seeded() -> None:
    assert make_questions(5, seed=1) == make_questions(5, seed=1) != make_questions(5, seed=2)


def test_summary_percentiles_and_totals() -> None:
    results = [
        RunResult("q", "react", outcome="success", duration_s=d, input_tokens=10, cost_usd=0.5)
        for d in (1.0, 2.0, 3.0, 4.0)
    ] + [RunResult("q", "react", outcome="abandoned", duration_s=10.0, budget_exceeded="cost")]
    summary = LoadSummary.of(results, duration_s=5.0)
    assert (summary.runs, summary.succeeded, summary.abandoned, summary.budget_stops) == (5, 4, 1, 1)
    assert summary.runs_per_s == 1.0 and summary.latency_p50_s == 3.0
    assert 4.0 < summary.latency_p95_s <= 10.0
    assert summary.input_tokens == 40 and summary.cost_usd == pytest.approx(2.0)
    assert "budget stops    1" in summary.format()


def test_concurrent_users_with_failing_tools(engine: str) -> None:
    # concurrent runs share the seeded RNG in arrival order: rates high enough that 8 runs
    # (about 40 tool calls) see both failures and timeouts whatever the interleaving
    tools = ToolConfig(latency_s=0.005, failure_rate=0.2, timeout_rate=0.15, hang_s=2.0, seed=5)
    agent = _agent(engine, tools, mode="iterative", tool_timeout_s=0.1, backoff_s=0.005)
    summary = asyncio.run(generate_load(agent, LoadConfig(users=4, runs=8, seed=3)))
    assert summary.runs == 8 == summary.succeeded + summary.failed + summary.abandoned
    assert summary.succeeded >= 5
    assert summary.tool_failures > 0 and summary.tool_timeouts > 0
    assert summary.input_tokens == sum(r.input_tokens for r in summary.results) > 0
    assert summary.cost_usd > 0 and summary.runs_per_s > 0
    assert 0 < summary.latency_p50_s <= summary.latency_p95_s
    assert len({r.trace_id for r in summary.results}) in (1, 8)  # no SDK: no trace ids, else one per run


def test_budget_stops_are_counted(engine: str) -> None:
    # the SDK prices the calls for the budget; its spans go to a closed port and are dropped
    agentwatch.init(endpoint=f"http://127.0.0.1:{free_port()}", enabled=True, export_retries=0, shutdown_timeout_s=0.5)
    try:
        agent = _agent(engine, ToolConfig(latency_s=0.001), mode="react", small_model=None, max_cost_usd=0.001)
        summary = asyncio.run(generate_load(agent, LoadConfig(users=3, runs=3)))
    finally:
        agentwatch.shutdown()
    assert summary.budget_stops == summary.abandoned == 3


def test_duration_stops_new_runs(engine: str) -> None:
    agent = _agent(engine, ToolConfig(latency_s=0.001), mode="iterative")
    summary = asyncio.run(generate_load(agent, LoadConfig(users=2, runs=1000, duration_s=1.0)))
    assert 2 <= summary.runs < 1000


def test_given_questions_are_asked_in_turn(engine: str) -> None:
    agent = _agent(engine, ToolConfig(latency_s=0.001), mode="iterative")
    config = LoadConfig(users=3, runs=3, questions=("What is paged attention?", "What is Raft consensus?"))
    summary = asyncio.run(generate_load(agent, config))
    assert sorted(r.question for r in summary.results) == sorted([*config.questions, config.questions[0]])


def test_loadgen_command_prints_summary(engine: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "loadgen",
            "--users",
            "2",
            "--runs",
            "3",
            "--mode",
            "react",
            "--base-url",
            engine + "/v1",
            "--tool-failure-rate",
            "0.1",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "runs            3 (" in out and "run latency     p50" in out and "cost            $" in out


def test_agent_command_prints_report_and_figures(engine: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["agent", "--question", "How does prefix caching cut cost?", "--base-url", engine + "/v1"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("# Report: How does prefix caching cut cost?")
    assert "outcome   success" in out and "tokens    " in out and "cost      $" in out


def test_bad_rate_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["loadgen", "--tool-failure-rate", "2"]) == 2
    assert "failure_rate must be within [0, 1]" in capsys.readouterr().err


def test_loadgen_command_exercises_degradation_and_the_rate_limiter(
    engine: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "loadgen",
            "--users",
            "3",
            "--runs",
            "4",
            "--mode",
            "react",
            "--base-url",
            engine + "/v1",
            "--budget-usd",
            "1",
            "--degrade",
            "iterative",
            "--degrade-at",
            "0.000001",
            "--rate-limit-user",
            "0.001",
            "--rate-limit-project",
            "100/3",
            "--rate-limit-mode",
            "reject",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    # 3 users: each first run passes its user's bucket; user 0's second run is refused
    assert "runs            3 (3 success, 0 failure, 0 abandoned)" in out, out  # the refused request is no run
    assert "levers          3 runs degraded, 0 queued and 1 requests refused by the rate limiter (not runs)" in out


def test_bad_rate_limit_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["loadgen", "--rate-limit-user", "fast"])
    assert "RATE/BURST" in capsys.readouterr().err
