"""Content capture: off by default; when on, the user's hook first, then the built-in redactor."""

from __future__ import annotations

import agentwatch
import pytest
from agentwatch import semconv as sc

from tests.sdk.spans import Spans, init_with_memory


@pytest.mark.parametrize(
    ("secret", "kept"),
    [
        ("sk-proj-Abcdefghijklmnop1234567890", "key"),
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig", "Authorization"),
        ("mail jane.doe+test@example.co.uk now", "mail"),
        ("api_key=AbCdEf123456", "api_key"),
        ("ghp_abcdefghijklmnopqrstuvwxyz0123", "token"),
        ("AKIAIOSFODNN7EXAMPLE", ""),
    ],
)
def test_builtin_redactor_removes_keys_tokens_and_emails(secret: str, kept: str) -> None:
    text = f"{kept} {secret}"
    out = agentwatch.redact_text(text)
    assert secret not in out
    assert kept in out
    assert "[REDACTED]" in out or "[EMAIL]" in out


def test_plain_text_is_left_alone() -> None:
    text = "the KV cache holds 4096 tokens; see https://docs.vllm.ai/en/latest"
    assert agentwatch.redact_text(text) == text


def test_content_is_not_captured_by_default(spans: Spans) -> None:
    @agentwatch.tool("echo")
    def echo(text: str) -> str:
        return text

    with agentwatch.llm(model="sim-small") as call:
        call.record_messages(input=[{"role": "user", "content": "hi"}], output="hello")
    echo("secret stuff")
    for span in spans.all():
        keys = set(span.attributes or {})
        assert not keys & {
            sc.GEN_AI_INPUT_MESSAGES,
            sc.GEN_AI_OUTPUT_MESSAGES,
            sc.GEN_AI_TOOL_CALL_ARGUMENTS,
            sc.GEN_AI_TOOL_CALL_RESULT,
        }


def test_hook_runs_before_builtin_redaction_and_long_values_are_truncated() -> None:
    seen: list[str] = []

    def hook(text: str) -> str:
        seen.append(text)
        return text.replace("ACME", "[customer]")

    spans = init_with_memory(capture_content=True, redact=hook, max_content_chars=200)

    @agentwatch.tool("lookup")
    def lookup(name: str, email: str) -> str:
        return "x" * 1000

    lookup("ACME", email="ops@acme.example")
    attrs = spans.one("execute_tool lookup").attributes
    arguments = attrs[sc.GEN_AI_TOOL_CALL_ARGUMENTS]
    assert "[customer]" in arguments and "ACME" not in arguments
    assert "[EMAIL]" in arguments and "ops@acme.example" not in arguments
    assert "ops@acme.example" in seen[0]  # the hook saw the raw value: it ran first
    result = attrs[sc.GEN_AI_TOOL_CALL_RESULT]
    assert len(result) < 300 and result.endswith("[truncated 800 chars]")


def test_failing_hook_withholds_the_value_and_counts() -> None:
    def broken(text: str) -> str:
        raise RuntimeError("hook bug")

    spans = init_with_memory(capture_content=True, redact=broken)
    before = agentwatch.stats()["redaction_errors"]
    with agentwatch.llm(model="sim-small") as call:
        call.record_messages(input="my password is hunter2-long")
    value = spans.one("chat sim-small").attributes[sc.GEN_AI_INPUT_MESSAGES]
    assert "hunter2" not in value and "withheld" in value
    assert agentwatch.stats()["redaction_errors"] == before + 1


def test_redact_must_be_callable() -> None:
    with pytest.raises(ValueError, match="redact"):
        agentwatch.init(capture_content=True, redact="not callable")


def test_a_value_that_cannot_be_rendered_costs_only_the_attribute() -> None:
    class Unprintable:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    spans = init_with_memory(capture_content=True)
    before = agentwatch.stats()["internal_errors"]
    result = Unprintable()

    @agentwatch.tool("odd")
    def odd() -> Unprintable:
        return result

    assert odd() is result
    assert sc.GEN_AI_TOOL_CALL_RESULT not in spans.one("execute_tool odd").attributes
    assert agentwatch.stats()["internal_errors"] == before + 1
