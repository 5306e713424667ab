"""The tokenizer and the deterministic answer policy of the simulated engine."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from agentwatch_platform.reference_agent.engine.policy import decide, docs_wanted, task_question
from agentwatch_platform.reference_agent.engine.tokenizer import count_tokens, render_prompt, tokenize

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "fetch",
            "parameters": {"type": "object", "properties": {"doc_id": {"type": "string"}}, "required": ["doc_id"]},
        },
    },
]


@given(st.text())
def test_tokens_join_back_to_the_text(text: str) -> None:
    assert "".join(tokenize(text)) == text


def test_english_prose_is_about_four_characters_a_token() -> None:
    text = "Continuous batching refills a freed sequence slot at the next engine step, " * 20
    assert 3.0 <= len(text) / count_tokens(text) <= 5.0


def test_a_growing_conversation_keeps_its_prompt_as_a_prefix() -> None:
    messages = [{"role": "user", "content": "Question: why cache prefixes?"}]
    before = tokenize(render_prompt(messages, TOOLS)[: -len("<|im_start|>assistant\n")])
    after = tokenize(render_prompt([*messages, {"role": "tool", "tool_call_id": "1", "content": "[]"}], TOOLS))
    assert after[: len(before)] == before


def _step(messages: list, call_id: str, result: str) -> dict:
    answer = decide(messages, TOOLS)
    call = answer.tool_calls[0]
    messages.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
            ],
        }
    )
    messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
    return {"name": call.name, **json.loads(call.arguments)}


def test_research_policy_searches_fetches_what_it_found_then_reports() -> None:
    question = "How does prefix caching cut the prefill cost of agent loops?"
    messages: list = [{"role": "user", "content": f"Question: {question}"}]
    first = _step(messages, "c0", json.dumps([{"id": f"doc-{i:04d}", "title": "t"} for i in range(6)]))
    assert first["name"] == "search" and "prefix" in first["query"]
    fetched = []
    for index in range(docs_wanted(question)):
        call = _step(messages, f"c{index + 1}", json.dumps({"id": f"doc-{index:04d}", "text": "Prefill dominates."}))
        fetched.append(call["doc_id"])
    assert fetched == [f"doc-{i:04d}" for i in range(docs_wanted(question))]
    report = decide(messages, TOOLS)
    assert not report.tool_calls and report.content.startswith(f"# Report: {question}")
    assert "[doc-0000]" in report.content
    assert decide(messages, TOOLS) == report  # deterministic


def test_enough_question_is_answered_from_the_documents_read() -> None:
    question = "Question: What is KV-cache preemption?"
    wanted = docs_wanted("What is KV-cache preemption?")
    ask = {"role": "user", "content": "Is the material gathered so far enough to answer the question? Reply yes or no."}
    few = [{"role": "user", "content": question}, ask]
    assert decide(few).content.startswith("no")
    cited = " ".join(f"[doc-{i}]" for i in range(wanted))
    enough = [{"role": "user", "content": f"{question}\n\nReport so far:\n{cited}"}, ask]
    assert decide(enough).content.startswith("yes")


def test_report_lengths_vary_by_task() -> None:
    lengths = {
        count_tokens(
            decide(
                [
                    {"role": "system", "content": "Write the final report."},
                    {"role": "user", "content": f"Question: topic number {i}?"},
                ]
            ).content
        )
        for i in range(8)
    }
    assert len(lengths) >= 4 and min(lengths) >= 60


def test_question_is_read_from_the_question_line() -> None:
    assert task_question([{"role": "user", "content": "Context\nQuestion: why?\nmore"}]) == "why?"


def test_plain_chat_gets_a_short_reply_marked_as_simulated() -> None:
    answer = decide([{"role": "user", "content": "hello, how are you?"}])
    assert answer.content.startswith("(simulated engine)") and not answer.tool_calls
