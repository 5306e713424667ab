"""Normalisation of every dialect into one span row (attribute dicts in, rows out)."""

from __future__ import annotations

import json

import pytest

from agentwatch_platform.collector.ingest.normalize import (
    TRUNCATION_MARKER,
    Normalizer,
    Resource,
    normalize_span,
    sdk_pricer,
)
from agentwatch_platform.collector.ingest.redact import MASK, Redactor

PRICED = Normalizer(pricer=sdk_pricer())


def test_genai_current_names() -> None:
    row = normalize_span(
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-x",
            "gen_ai.response.model": "gpt-x-2025",
            "gen_ai.usage.input_tokens": 120,
            "gen_ai.usage.output_tokens": 30,
            "gen_ai.usage.cache_read.input_tokens": 100,
            "gen_ai.response.finish_reasons": ["stop"],
            "gen_ai.agent.name": "planner",
            "gen_ai.conversation.id": "conv-1",
            "user.id": "u1",
        },
        parent_span_id="a" * 16,
    )
    assert (row.kind, row.model, row.provider) == ("llm", "gpt-x-2025", "openai")
    assert (row.input_tokens, row.output_tokens, row.cached_tokens) == (120, 30, 100)
    assert (row.finish_reason, row.agent_name, row.session_id, row.user_id) == ("stop", "planner", "conv-1", "u1")
    assert row.attributes == {}


def test_genai_old_names() -> None:
    row = normalize_span(
        {
            "gen_ai.system": "openai",
            "gen_ai.request.model": "sim-small",
            "gen_ai.usage.prompt_tokens": 7,
            "gen_ai.usage.completion_tokens": 3,
        }
    )
    assert (row.kind, row.provider, row.input_tokens, row.output_tokens) == ("llm", "openai", 7, 3)


def test_current_name_wins_over_old_name() -> None:
    row = normalize_span(
        {
            "gen_ai.usage.prompt_tokens": 1,
            "gen_ai.usage.input_tokens": 2,
            "gen_ai.system": "old",
            "gen_ai.provider.name": "new",
        }
    )
    assert (row.input_tokens, row.provider) == (2, "new")


@pytest.mark.parametrize(
    "oi_kind, kind",
    [
        ("LLM", "llm"),
        ("TOOL", "tool"),
        ("RETRIEVER", "retrieval"),
        ("AGENT", "run"),
        ("CHAIN", "step"),
        ("EMBEDDING", "llm"),
        ("GUARDRAIL", "other"),
    ],
)
def test_openinference_kinds(oi_kind: str, kind: str) -> None:
    assert normalize_span({"openinference.span.kind": oi_kind}, parent_span_id="b" * 16).kind == kind


def test_openinference_llm_and_tool() -> None:
    row = normalize_span(
        {
            "openinference.span.kind": "LLM",
            "llm.model_name": "sim-large",
            "llm.token_count.prompt": 50,
            "llm.token_count.completion": 5,
            "llm.token_count.prompt_details.cache_read": 10,
            "llm.provider": "openai",
            "input.value": "hello",
            "output.value": "world",
            "session.id": "s9",
        }
    )
    assert (row.model, row.input_tokens, row.output_tokens, row.cached_tokens, row.provider) == (
        "sim-large",
        50,
        5,
        10,
        "openai",
    )
    assert (row.input_text, row.output_text, row.session_id) == ("hello", "world", "s9")
    tool = normalize_span({"openinference.span.kind": "TOOL", "tool.name": "search"}, parent_span_id="c" * 16)
    assert (tool.kind, tool.tool_name) == ("tool", "search")


def test_root_chain_is_the_run() -> None:
    assert normalize_span({"openinference.span.kind": "CHAIN"}).kind == "run"


@pytest.mark.parametrize("tl_kind, kind", [("workflow", "run"), ("task", "step"), ("agent", "run"), ("tool", "tool")])
def test_openllmetry_kinds(tl_kind: str, kind: str) -> None:
    assert normalize_span({"traceloop.span.kind": tl_kind}, parent_span_id="d" * 16).kind == kind


def test_openllmetry_llm_span() -> None:
    row = normalize_span(
        {
            "llm.request.type": "chat",
            "gen_ai.system": "OpenAI",
            "gen_ai.request.model": "sim-small",
            "llm.usage.prompt_tokens": 9,
            "llm.usage.completion_tokens": 4,
            "llm.usage.total_tokens": 13,
        }
    )
    assert (row.kind, row.input_tokens, row.output_tokens) == ("llm", 9, 4)
    assert row.attributes == {"llm.usage.total_tokens": "13"}


VLLM = {
    "gen_ai.response.model": "sim-small",
    "gen_ai.request.id": "chatcmpl-9",
    "gen_ai.usage.prompt_tokens": 100,
    "gen_ai.usage.completion_tokens": 21,
    "gen_ai.latency.time_in_queue": 0.5,
    "gen_ai.latency.time_to_first_token": 0.8,
    "gen_ai.latency.time_in_model_prefill": 0.25,
    "gen_ai.latency.time_in_model_decode": 1.0,
    "gen_ai.latency.e2e": 2.0,
}


def test_vllm_server_span_is_an_engine_record_with_its_own_figures() -> None:
    row = normalize_span(VLLM, name="llm_request", parent_span_id="e" * 16, normalizer=PRICED)
    assert row.kind == "engine"  # never billed, never a run (schema.BILLABLE, schema.ROOT)
    assert (row.queue_s, row.ttft_s, row.prefill_s, row.decode_s, row.request_id) == (0.5, 0.8, 0.25, 1.0, "chatcmpl-9")
    assert row.tpot_s == pytest.approx(1.0 / 20)
    # its own figures are kept aside: its columns count only what engine_join adds to the client's
    assert (row.input_tokens, row.output_tokens, row.cost_usd) == (0, 0, 0.0)
    assert (row.attributes["agentwatch.engine.input_tokens"], row.attributes["agentwatch.engine.output_tokens"]) == (
        "100",
        "21",
    )
    assert float(row.attributes["agentwatch.engine.cost_usd"]) == pytest.approx((100 * 0.10 + 21 * 0.40) / 1e6)
    assert row.attributes["gen_ai.latency.e2e"] == "2.0"


def test_vllm_root_span_is_an_engine_record_too() -> None:
    row = normalize_span(VLLM, name="llm_request", normalizer=PRICED)
    assert (row.kind, row.input_tokens, row.attributes["agentwatch.engine.input_tokens"]) == ("engine", 0, "100")


def test_client_response_id_is_the_request_id() -> None:
    row = normalize_span(
        {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "gen_ai.response.id": "chatcmpl-9"}
    )
    assert (row.kind, row.request_id) == ("llm", "chatcmpl-9")
    assert "gen_ai.response.id" not in row.attributes


def test_agentwatch_sdk_span() -> None:
    row = normalize_span(
        {
            "agentwatch.span.kind": "run",
            "gen_ai.agent.name": "research",
            "agentwatch.run.outcome": "failure",
            "agentwatch.budget.exceeded": "cost",
            "agentwatch.project": "spoofed",
            "agentwatch.run.steps": 7,
        },
        project="real",
        status_code=2,
        status_message="budget",
    )
    assert (row.kind, row.outcome, row.budget_exceeded, row.project, row.status_code) == (
        "run",
        "failure",
        "cost",
        "real",
        "error",
    )
    assert "agentwatch.project" not in row.attributes and row.attributes["agentwatch.run.steps"] == "7"
    tool = normalize_span(
        {
            "agentwatch.span.kind": "tool",
            "gen_ai.tool.name": "fetch",
            "agentwatch.tool.cache_hit": True,
            "agentwatch.timeout": True,
            "error.type": "TimeoutError",
            "agentwatch.step.index": 3,
        }
    )
    assert (tool.tool_name, tool.tool_cache_hit, tool.is_timeout, tool.error_type, tool.step_index) == (
        "fetch",
        True,
        True,
        "TimeoutError",
        3,
    )


def test_collector_price_wins_and_unknown_model_keeps_sdk_estimate() -> None:
    priced = normalize_span(
        {"gen_ai.request.model": "sim-small", "gen_ai.usage.input_tokens": 1_000_000, "agentwatch.cost.usd": 99.0},
        normalizer=PRICED,
    )
    assert priced.cost_usd == pytest.approx(0.10) and priced.price_version
    unknown = normalize_span(
        {
            "gen_ai.request.model": "no-such-model-xyz",
            "gen_ai.usage.input_tokens": 10,
            "agentwatch.cost.usd": 0.5,
            "agentwatch.cost.price_version": "sdk-1",
        },
        normalizer=PRICED,
    )
    assert (unknown.cost_usd, unknown.price_version) == (0.5, "sdk-1")


def test_unknown_attributes_kept_as_text() -> None:
    row = normalize_span(
        {
            "custom.int": 5,
            "custom.bool": False,
            "custom.list": ["a", 1],
            "custom.map": {"k": 1.5},
            "custom.bytes": b"\x01\xff",
        }
    )
    assert row.attributes == {
        "custom.int": "5",
        "custom.bool": "false",
        "custom.list": '["a",1]',
        "custom.map": '{"k":1.5}',
        "custom.bytes": "01ff",
    }
    assert row.kind == "other"


def test_long_values_truncated_with_marker() -> None:
    nz = Normalizer(max_attribute_length=10)
    row = normalize_span({"note": "x" * 25, "gen_ai.input.messages": "y" * 12}, name="n" * 11, normalizer=nz)
    assert row.attributes["note"] == "x" * 10 + TRUNCATION_MARKER.format(n=15)
    assert row.input_text == "y" * 10 + TRUNCATION_MARKER.format(n=2)
    assert row.name == "n" * 10 + TRUNCATION_MARKER.format(n=1)


def test_captured_content_is_redacted() -> None:
    nz = Normalizer(redactor=Redactor.from_setting("default"))
    secret = "key sk-proj-abcdefghijklmnopqrstuvwx, mail ann@example.com, card 4111 1111 1111 1111, Authorization: Bearer abc.def.ghi123"
    row = normalize_span(
        {"gen_ai.input.messages": secret, "llm.input_messages.0.message.content": secret, "plain": "ann@example.com"},
        normalizer=nz,
    )
    for text in (row.input_text, row.attributes["llm.input_messages.0.message.content"]):
        assert "sk-proj" not in text and "ann@example.com" not in text and "4111" not in text and "abc.def" not in text
        assert text.count(MASK) == 4
    assert row.attributes["plain"] == "ann@example.com"  # not content: left alone


def test_redaction_patterns_setting() -> None:
    assert Redactor.from_setting("none")("ann@example.com") == "ann@example.com"
    custom = Redactor.from_setting("default;;ticket-\\d+")
    assert custom("ticket-42 by ann@example.com") == f"{MASK} by {MASK}"
    with pytest.raises(ValueError, match="REDACT_PATTERNS"):
        Redactor.from_setting("(unclosed")


@pytest.mark.parametrize(
    "secret",
    [
        "sk-proj-abcdefghijklmnopqrstuvwx",
        "AKIAABCDEFGHIJKLMNOP",
        "ghp_" + "a1" * 18,
        "aw_0123456789ab_" + "x" * 22,
        "Bearer abcdefgh.ijk",
        "ann.lee@example.co.uk",
        "4111-1111-1111-1111",
        "4111111111111111",
    ],
)
def test_every_default_pattern_passes_its_prefilter(secret: str) -> None:
    """The cheap pre-checks (a gate character, needles, a digit count) never hide a real secret."""
    text = f"words 12 before {secret} and after"
    assert Redactor.from_setting("default")(text) == f"words 12 before {MASK} and after"


def test_short_digit_runs_are_not_card_numbers() -> None:
    text = "order 123456789012 on 2025-01-02 for 3 items"
    assert Redactor.from_setting("default")(text) == text


def test_exception_event_gives_error_type_and_events_json() -> None:
    events = [
        {
            "name": "exception",
            "time_ns": 5,
            "attributes": {
                "exception.type": "httpx.ReadTimeout",
                "exception.message": "timed out",
                "exception.stacktrace": "Traceback...",
            },
        }
    ]
    row = normalize_span({}, status_code=2, events=events)
    assert (row.error_type, row.is_timeout, row.status_code) == ("httpx.ReadTimeout", True, "error")
    assert json.loads(row.events)[0]["attributes"]["exception.stacktrace"] == "Traceback..."


def test_resource_gives_service_name() -> None:
    row = normalize_span({}, resource=Resource("svc", {"service.name": "svc", "host.name": "h"}))
    assert (row.service_name, row.resource) == ("svc", {"service.name": "svc", "host.name": "h"})


def test_bad_typed_values_do_not_fail_the_span() -> None:
    row = normalize_span(
        {
            "gen_ai.usage.input_tokens": "lots",
            "agentwatch.llm.ttft": "nan",
            "agentwatch.step.index": True,
            "gen_ai.request.model": "",
        }
    )
    assert (row.input_tokens, row.ttft_s, row.step_index, row.model) == (0, None, -1, "")
