"""Span shape of run/step/llm/tool through the real OpenTelemetry SDK."""

from __future__ import annotations

import asyncio

import agentwatch
import pytest
from agentwatch import semconv as sc
from opentelemetry.trace import StatusCode

from tests.sdk.spans import Spans, init_with_memory


def _attrs(span: object) -> dict[str, object]:
    return dict(span.attributes or {})  # type: ignore[attr-defined]


def test_run_step_llm_tool_nest_and_carry_agent_and_step_index(spans: Spans) -> None:
    @agentwatch.tool("search")
    def search(query: str) -> str:
        return query.upper()

    @agentwatch.run("researcher", user_id="u1", session_id="s1", tags=["eval"])
    def agent() -> str:
        for i in range(2):
            with agentwatch.step(f"think-{i}"):
                with agentwatch.llm(model="sim-small") as call:
                    call.record_usage(input_tokens=1000, output_tokens=200, cached_tokens=400, ttft=0.0)
                search("q")
        return "done"

    assert agent() == "done"
    run_span = spans.one("invoke_agent researcher")
    attrs = _attrs(run_span)
    assert attrs[sc.GEN_AI_OPERATION_NAME] == sc.OP_INVOKE_AGENT
    assert attrs[sc.GEN_AI_AGENT_NAME] == "researcher"
    assert attrs[sc.USER_ID] == "u1" and attrs[sc.GEN_AI_CONVERSATION_ID] == "s1"
    assert list(attrs[sc.AW_RUN_TAGS]) == ["eval"]  # type: ignore[call-overload]
    assert (attrs[sc.AW_RUN_STEPS], attrs[sc.AW_RUN_LLM_CALLS], attrs[sc.AW_RUN_TOOL_CALLS]) == (2, 2, 2)
    # sim-small: $0.10/M input, $0.40/M output, cached at half the input price
    expected_cost = 2 * (600 * 0.10 + 400 * 0.05 + 200 * 0.40) / 1e6
    assert attrs[sc.AW_RUN_COST_USD] == pytest.approx(expected_cost)
    assert attrs[sc.AW_RUN_OUTCOME] == "success"

    for kind in (sc.KIND_STEP, sc.KIND_LLM, sc.KIND_TOOL):
        children = spans.kind(kind)
        assert len(children) == 2
        assert sorted(_attrs(s)[sc.AW_STEP_INDEX] for s in children) == [0, 1]
        assert all(_attrs(s)[sc.GEN_AI_AGENT_NAME] == "researcher" for s in children)
        assert all(s.context.trace_id == run_span.context.trace_id for s in children)
    llm_span = spans.kind(sc.KIND_LLM)[0]
    assert _attrs(llm_span)[sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 400
    assert _attrs(llm_span)[sc.AW_PRICE_VERSION] == agentwatch.PriceTable().version
    step_ids = {s.context.span_id for s in spans.kind(sc.KIND_STEP)}
    assert all(s.parent.span_id in step_ids for s in spans.kind(sc.KIND_TOOL))  # type: ignore[union-attr]
    tool_span = spans.kind(sc.KIND_TOOL)[0]
    assert _attrs(tool_span)[sc.GEN_AI_OPERATION_NAME] == sc.OP_EXECUTE_TOOL
    assert _attrs(tool_span)[sc.GEN_AI_TOOL_NAME] == "search"


def test_llm_calls_outside_steps_are_steps_and_tools_join_the_latest(spans: Spans) -> None:
    with agentwatch.run("react") as run:
        for _ in range(3):
            with agentwatch.llm(model="sim-large"):
                pass
            with agentwatch.tool("fetch"):
                pass
    assert run.steps == 3
    assert [_attrs(s)[sc.AW_STEP_INDEX] for s in spans.kind(sc.KIND_LLM)] == [0, 1, 2]
    assert [_attrs(s)[sc.AW_STEP_INDEX] for s in spans.kind(sc.KIND_TOOL)] == [0, 1, 2]


def test_exception_recorded_and_reraised_unchanged(spans: Spans) -> None:
    error = KeyError("missing")

    @agentwatch.tool("lookup")
    def lookup() -> None:
        raise error

    @agentwatch.run("agent")
    def agent() -> None:
        lookup()

    with pytest.raises(KeyError) as caught:
        agent()
    assert caught.value is error
    tool_span = spans.one("execute_tool lookup")
    assert tool_span.status.status_code is StatusCode.ERROR
    assert _attrs(tool_span)[sc.ERROR_TYPE] == "KeyError"
    assert sc.AW_TIMEOUT not in _attrs(tool_span)
    event = tool_span.events[0]
    assert event.name == "exception"
    assert event.attributes["exception.type"] == "KeyError"
    assert "missing" in event.attributes["exception.message"]
    assert "lookup" in event.attributes["exception.stacktrace"]
    run_attrs = _attrs(spans.one("invoke_agent agent"))
    assert run_attrs[sc.AW_RUN_OUTCOME] == "failure"
    assert "KeyError" in run_attrs[sc.AW_RUN_OUTCOME_REASON]  # type: ignore[operator]


async def test_async_tool_timeout_is_a_timeout_not_an_error(spans: Spans) -> None:
    @agentwatch.tool("slow", timeout=0.05)
    async def slow() -> None:
        await asyncio.sleep(5)

    @agentwatch.tool("own-timeout")
    async def own() -> None:
        raise TimeoutError

    with pytest.raises(TimeoutError):
        await slow()
    with pytest.raises(asyncio.TimeoutError):
        await own()
    for name in ("execute_tool slow", "execute_tool own-timeout"):
        attrs = _attrs(spans.one(name))
        assert attrs[sc.AW_TIMEOUT] is True
        assert attrs[sc.ERROR_TYPE] == "TimeoutError"
    slow = spans.one("execute_tool slow")
    assert slow.end_time - slow.start_time < 4e9  # cut at its timeout, not after the 5 s it sleeps


async def test_async_with_tool_timeout(spans: Spans) -> None:
    with pytest.raises(TimeoutError):
        async with agentwatch.tool("block", timeout=0.05):
            await asyncio.sleep(5)
    assert _attrs(spans.one("execute_tool block"))[sc.AW_TIMEOUT] is True


def test_sync_tool_timeout_is_refused() -> None:
    with pytest.raises(ValueError, match="only async tools"):
        agentwatch.tool("x", timeout=1)(lambda: None)
    with pytest.raises(ValueError, match="only async tools"), agentwatch.tool("x", timeout=1):
        pass

    async def agen():
        yield 1

    with pytest.raises(ValueError, match="not to a generator"):
        agentwatch.tool("x", timeout=1)(agen)


async def test_async_functions_and_context_managers(spans: Spans) -> None:
    @agentwatch.tool("fetch")
    async def fetch(n: int) -> int:
        await asyncio.sleep(0)
        return n * 2

    @agentwatch.run("async-agent")
    async def agent() -> int:
        async with agentwatch.step("gather"):
            results = await asyncio.gather(fetch(1), fetch(2))
        return sum(results)

    assert await agent() == 6
    step_span = spans.one("step gather")
    tools = spans.kind(sc.KIND_TOOL)
    assert len(tools) == 2
    assert all(t.parent.span_id == step_span.context.span_id for t in tools)  # type: ignore[union-attr]
    assert _attrs(spans.one("invoke_agent async-agent"))[sc.AW_RUN_TOOL_CALLS] == 2


def test_generator_span_covers_iteration_and_is_current_only_inside(spans: Spans) -> None:
    from opentelemetry import trace

    seen_inside = []

    @agentwatch.step("produce")
    def produce():
        for i in range(3):
            seen_inside.append(trace.get_current_span().get_span_context().span_id)
            sent = yield i
            assert sent is None

    with agentwatch.run("gen-agent"):
        gen = produce()
        outside = []
        for item in gen:
            outside.append(trace.get_current_span().get_span_context().span_id)
            assert item in (0, 1, 2)
    step_span = spans.one("step produce")
    assert set(seen_inside) == {step_span.context.span_id}
    assert step_span.context.span_id not in outside
    assert step_span.status.status_code is StatusCode.UNSET


def test_generator_error_and_early_close(spans: Spans) -> None:
    @agentwatch.tool("stream")
    def stream():
        yield 1
        raise ValueError("broken stream")

    with pytest.raises(ValueError, match="broken stream"):
        list(stream())
    assert _attrs(spans.one("execute_tool stream"))[sc.ERROR_TYPE] == "ValueError"

    @agentwatch.tool("endless")
    def endless():
        while True:
            yield 1

    gen = endless()
    next(gen)
    gen.close()
    closed = spans.one("execute_tool endless")
    assert closed.end_time is not None and closed.status.status_code is StatusCode.UNSET


async def test_async_generator(spans: Spans) -> None:
    @agentwatch.step("agen")
    async def agen():
        for i in range(3):
            await asyncio.sleep(0)
            yield i

    assert [i async for i in agen()] == [0, 1, 2]
    assert spans.one("step agen").end_time is not None


def test_outcome_set_explicitly_and_budget_maps_to_abandoned(spans: Spans) -> None:
    with agentwatch.run("judge") as run:
        run.set_outcome("failure", reason="wrong answer")
    attrs = _attrs(spans.one("invoke_agent judge"))
    assert (attrs[sc.AW_RUN_OUTCOME], attrs[sc.AW_RUN_OUTCOME_REASON]) == ("failure", "wrong answer")
    assert spans.one("invoke_agent judge").status.status_code is StatusCode.UNSET
    with pytest.raises(ValueError, match="outcome must be one of"):
        run.set_outcome("meh")


def test_current_run_gives_trace_id_for_feedback(spans: Spans) -> None:
    assert agentwatch.current_run() is None

    @agentwatch.run("fb")
    def agent() -> agentwatch.Run:
        handle = agentwatch.current_run()
        assert handle is not None
        return handle

    handle = agent()
    assert handle.trace_id == format(spans.one("invoke_agent fb").context.trace_id, "032x")
    assert handle.outcome == "success"
    assert agentwatch.current_run() is None


def test_sample_rate_zero_records_nothing_but_runs_code() -> None:
    spans = init_with_memory(sample_rate=0.0)

    @agentwatch.tool("t")
    def work() -> int:
        return 7

    with agentwatch.run("unsampled") as run:
        assert work() == 7
    assert spans.all() == []
    assert run.tool_calls == 1 and len(run.trace_id) == 32


def test_sample_rate_keeps_whole_runs() -> None:
    spans = init_with_memory(sample_rate=0.5)
    for _ in range(40):
        with agentwatch.run("sampled"), agentwatch.tool("t"):
            pass
    runs = spans.kind(sc.KIND_RUN)
    tools = spans.kind(sc.KIND_TOOL)
    assert 0 < len(runs) < 40
    assert {t.context.trace_id for t in tools} == {r.context.trace_id for r in runs}


def test_without_init_code_runs_unchanged_and_budgets_apply() -> None:
    @agentwatch.tool("t")
    def work(x: int) -> int:
        return x + 1

    assert work(1) == 2
    with pytest.raises(agentwatch.BudgetExceeded), agentwatch.run("r", budget=agentwatch.Budget(max_steps=0)):
        with agentwatch.llm(model="sim-small"):
            pass


def test_decorator_keeps_metadata_and_bad_arguments_fail_clearly() -> None:
    @agentwatch.tool("t")
    def documented(x: int) -> int:
        """Doc."""
        return x

    assert documented.__name__ == "documented" and documented.__doc__ == "Doc."
    with pytest.raises(ValueError, match="non-empty string"):
        agentwatch.run("")
    with pytest.raises(ValueError, match="agentwatch.Budget"):
        agentwatch.run("r", budget={"max_steps": 1})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="record_usage"):
        with agentwatch.llm(model="m") as call:
            call.record_usage(input_tokens=-1)


def test_threads_sharing_a_run_count_exactly(spans: Spans) -> None:
    import contextvars
    from concurrent.futures import ThreadPoolExecutor

    @agentwatch.tool("parallel")
    def work() -> None:
        return None

    def many() -> None:
        for _ in range(100):
            work()

    with agentwatch.run("fan-out") as run, ThreadPoolExecutor(8) as pool:
        for future in [pool.submit(contextvars.copy_context().run, many) for _ in range(8)]:
            future.result()
    assert run.tool_calls == 800
    tools = spans.kind(sc.KIND_TOOL)
    assert len(tools) == 800
    assert {t.context.trace_id for t in tools} == {spans.one("invoke_agent fan-out").context.trace_id}


def test_a_run_announces_its_start_with_a_zero_length_child_span(spans: Spans) -> None:
    """The run span is exported only when it ends: the marker lets a collector list a running run."""

    @agentwatch.run("long", user_id="u1", session_id="s1")
    def long_run() -> None:
        assert len([s for s in spans.all() if s.name == sc.AW_RUN_START]) == 1  # ended while the run runs

    long_run()
    marker, run = spans.one(sc.AW_RUN_START), spans.one("invoke_agent long")
    assert marker.parent is not None and marker.parent.span_id == run.context.span_id
    assert marker.start_time == marker.end_time
    attrs = _attrs(marker)
    assert attrs[sc.AW_RUN_NAME] == "invoke_agent long"
    assert (attrs[sc.GEN_AI_AGENT_NAME], attrs[sc.USER_ID], attrs[sc.SESSION_ID]) == ("long", "u1", "s1")
