"""``agentwatch.llm_attributes``: labels on the LLM spans the SDK opens inside a block, the
OpenAI instrumentation's included, against a real OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import asyncio

import agentwatch
import openai
import pytest
from agentwatch import semconv as sc

from tests.sdk.servers import FakeOpenAI
from tests.sdk.spans import Spans, init_with_memory

MESSAGES = [{"role": "user", "content": "hello"}]


@pytest.fixture
def traced() -> Spans:
    return init_with_memory(instrument_openai=True)


def _tiers(spans: Spans) -> list[object]:
    ordered = sorted(spans.kind(sc.KIND_LLM), key=lambda s: s.start_time or 0)
    return [(s.attributes or {}).get(sc.AW_MODEL_TIER) for s in ordered]


def test_openai_spans_inside_the_block_carry_its_attributes(traced: Spans, fake_openai: FakeOpenAI) -> None:
    client = openai.OpenAI(base_url=f"{fake_openai.url}/v1", api_key="sk-test", max_retries=0)
    with agentwatch.llm_attributes({"team.name": "search", "prompt.versions": [3, 4]}, model_tier="small"):
        client.chat.completions.create(model="sim-small", messages=MESSAGES)
        list(client.chat.completions.create(model="sim-small", messages=MESSAGES, stream=True))
    client.chat.completions.create(model="sim-large", messages=MESSAGES)  # after the block: unlabelled
    assert _tiers(traced) == ["small", "small", None]
    first = traced.kind(sc.KIND_LLM)[0].attributes or {}
    assert first["team.name"] == "search" and tuple(first["prompt.versions"]) == (3, 4)  # type: ignore[arg-type]


def test_blocks_nest_the_inner_value_wins_and_the_sdk_keeps_its_own_attributes(traced: Spans) -> None:
    with (
        agentwatch.llm_attributes(model_tier="large", route="default"),
        agentwatch.llm_attributes({sc.GEN_AI_REQUEST_MODEL: "forged", sc.AGENTWATCH_SPAN_KIND: "tool"}),
    ):
        with agentwatch.llm_attributes(model_tier="small"), agentwatch.llm("sim-small"):
            pass
        with agentwatch.llm("sim-large"):
            pass
    spans = sorted(traced.kind(sc.KIND_LLM), key=lambda s: s.start_time or 0)
    assert [s.attributes[sc.AW_MODEL_TIER] for s in spans] == ["small", "large"]  # type: ignore[index]
    assert [s.attributes[sc.GEN_AI_REQUEST_MODEL] for s in spans] == ["sim-small", "sim-large"]  # type: ignore[index]
    assert all(s.attributes["agentwatch.llm.route"] == "default" for s in spans)  # type: ignore[index]


def test_concurrent_tasks_keep_their_own_attributes(traced: Spans, fake_openai: FakeOpenAI) -> None:
    client = openai.AsyncOpenAI(base_url=f"{fake_openai.url}/v1", api_key="sk-test", max_retries=0)

    async def call(tier: str) -> None:
        with agentwatch.llm_attributes(model_tier=tier):
            await client.chat.completions.create(model=f"sim-{tier}", messages=MESSAGES)

    async def both() -> None:
        await asyncio.gather(call("small"), call("large"))

    asyncio.run(both())
    labels = {
        (s.attributes or {})[sc.GEN_AI_REQUEST_MODEL]: (s.attributes or {})[sc.AW_MODEL_TIER]
        for s in traced.kind(sc.KIND_LLM)
    }
    assert labels == {"sim-small": "small", "sim-large": "large"}


@pytest.mark.parametrize(
    ("args", "kwargs", "named"),
    [
        ((), {"model_tier": object()}, "agentwatch.llm.model_tier"),
        ((), {"weights": [1, "a"]}, "agentwatch.llm.weights"),
        (({"": "x"},), {}, "non-empty"),
        (({"team": None},), {}, "team"),
    ],
)
def test_a_bad_attribute_raises_value_error_naming_it(
    args: tuple[object, ...], kwargs: dict[str, object], named: str
) -> None:
    with pytest.raises(ValueError, match=named):
        with agentwatch.llm_attributes(*args, **kwargs):  # type: ignore[arg-type]
            pytest.fail("the block must not run")


def test_before_init_the_block_just_runs() -> None:
    before = agentwatch.stats()
    with agentwatch.llm_attributes(model_tier="small"), agentwatch.llm("sim-small") as call:
        call.record_usage(input_tokens=1)
    after = agentwatch.stats()
    assert (after["internal_errors"], after["spans_ended"]) == (before["internal_errors"], before["spans_ended"])
