"""The trace explorer's pure side: tree rows, step names, error text, events, chat messages, facts."""

from __future__ import annotations

import json

import pytest

from agentwatch_platform.dashboard import analysis, trace, ui
from tests.dashboard.test_analysis import react_run, span


def test_steps_are_named_by_their_step_spans() -> None:
    spans = [
        span("run", kind="run"),
        span("s0", "run", name="plan", step_index=0),
        span("s1", "run", name="search", step_index=1),
        span("l", "s1", kind="llm", step_index=1),
    ]
    names = trace.step_names(spans)
    assert names == {0: "plan", 1: "search"}
    assert (
        trace.step_label(1, names) == "1 · search"
        and trace.step_label(5, names) == "5"
        and trace.step_label(-1, names) == "–"
    )


def test_tree_rows_indent_mark_failures_and_keep_the_whole_error() -> None:
    message = "backend answered 503 after 3 retries; " + "x" * 500
    spans = react_run(3, per_step=100)
    spans[-1] = span(
        "t2",
        "s2",
        kind="tool",
        start=2.5,
        dur=0.2,
        step_index=2,
        tool_name="search",
        status="error",
        status_message=message,
        error_type="ToolFailure",
    )
    rows = trace.tree_rows(analysis.tree_order(spans), trace.step_names(spans))
    failed = next(r for r in rows if r["span_id"] == "t2")
    assert failed["span"].startswith(trace.ICONS["tool"]) and failed["span"].endswith(trace.FAILED_MARK)
    assert failed["depth"] == 2 and failed["offset"] == pytest.approx(2.5 / rows[0]["duration_s"])
    assert failed["status"] == "error" and failed["detail"] == f"ToolFailure: {message}"
    assert rows[0]["share"] == 1.0 and all(0 <= r["share"] <= 1 for r in rows)
    llm = next(r for r in rows if r["span_id"] == "l0")
    assert llm["detail"] == "sim-large · 500 in / 50 out" and llm["status"] == "ok"


def test_error_text_falls_back_to_the_exception_event() -> None:
    events = json.dumps(
        [
            {
                "name": "exception",
                "time_ns": 1_500_000_000,
                "attributes": {
                    "exception.type": "TimeoutError",
                    "exception.message": "fetch of doc 7 took longer than 2 s",
                },
            }
        ]
    )
    failed = span("t", kind="tool", start=1.0, status="error", error_type="TimeoutError", events=events)
    assert trace.error_text(failed) == "TimeoutError: fetch of doc 7 took longer than 2 s"
    (event,) = trace.parse_events(failed.events, failed.start_time)
    assert event.name == "exception" and abs(event.offset_s - 0.5) < 1e-9
    assert trace.parse_events("not json")[0].name == "(unreadable events)" and trace.parse_events("") == []


def test_captured_content_becomes_chat_messages() -> None:
    openai = json.dumps(
        [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"function": {"name": "search", "arguments": '{"q": "kv"}'}}],
            },
            {"role": "tool", "content": "3 results"},
        ]
    )
    got = [(m.role, m.text, m.tool_calls) for m in trace.messages(openai, default_role="user")]
    assert got == [
        ("system", "be brief", []),
        ("user", "hi", []),
        ("assistant", "", ['search({"q": "kv"})']),
        ("tool", "3 results", []),
    ]
    genai = json.dumps(
        [
            {
                "role": "assistant",
                "parts": [
                    {"type": "text", "content": "done"},
                    {"type": "tool_call", "name": "fetch", "arguments": {"id": 3}},
                ],
            }
        ]
    )
    (message,) = trace.messages(genai, default_role="assistant")
    assert message.text == "done" and message.tool_calls == ['fetch({"id": 3})']
    assert [(m.role, m.text) for m in trace.messages("plain words", default_role="assistant")] == [
        ("assistant", "plain words")
    ]
    assert [m.text for m in trace.messages(json.dumps({"query": "kv cache"}), default_role="tool")] == [
        '{"query": "kv cache"}'
    ]
    assert trace.messages("", default_role="user") == []


def test_llm_facts_take_engine_timings_from_the_joined_engine_span() -> None:
    llm = span(
        "l", kind="llm", input_tokens=10, output_tokens=5, cached_tokens=4, cost_usd=3e-5, ttft_s=0.2, tpot_s=0.01
    )
    engine = span("e", "l", kind="engine", queue_s=0.05, prefill_s=0.1, decode_s=0.3)
    facts = {label: value for label, value, _ in trace.facts(llm, trace.engine_child([llm, engine], llm))}
    assert (
        facts["TTFT"] == 0.2
        and facts["Cached tokens"] == 4
        and facts["Engine queue"] == 0.05
        and facts["Engine decode"] == 0.3
    )
    tool = span("t", kind="tool", tool_name="search")
    assert [label for label, _, _ in trace.facts(tool)] == ["Duration"]
    assert ("tool_name", "search") in trace.fields(tool) and not any(
        name == "cost_usd" for name, _ in trace.fields(tool)
    )


def test_a_tree_row_keeps_the_exact_duration_so_it_reads_as_its_run_does() -> None:
    """Rounded to 0.1 ms first, 0.49346 s showed as 494 ms in the tree and 493 ms in the runs list."""
    spans = [span("run", kind="run", start=0.0, dur=0.49346)]
    (row,) = trace.tree_rows(analysis.tree_order(spans), trace.step_names(spans))
    assert ui.fmt(row["duration_s"], "s") == ui.fmt(spans[0].duration_s, "s") == "493 ms"


def test_a_span_without_text_says_whether_it_was_not_captured_removed_or_damaged() -> None:
    assert trace.text_note(span("a", kind="llm", input_text="hi", text_state="captured")) is None
    assert trace.text_note(span("b", kind="llm", input_text="hi")) is None  # an older collector: no state sent
    note = trace.text_note(span("c", kind="llm")) or ""
    assert note.startswith("Not captured") and "AGENTWATCH_CAPTURE_CONTENT=true" in note  # why, and how to turn it on
    assert trace.text_note(span("s", kind="step")) is None  # a step has no prompt to miss
    assert "Removed" in (trace.text_note(span("d", kind="llm", text_state="removed")) or "")
    assert "damaged" in (trace.text_note(span("e", kind="llm", text_state="damaged")) or "")


def _costly_run() -> list:
    """A run of three steps; step 1 holds the costliest call, step 2 the longest one, an engine span under step 0's call."""
    return [
        span("run", kind="run", dur=10),
        span("s0", "run", start=0, dur=2, step_index=0),
        span("l0", "s0", kind="llm", start=0, dur=1, step_index=0, cost_usd=0.01, input_tokens=1200, output_tokens=80),
        span("e0", "l0", kind="engine", start=0.1, dur=0.8, model="sim-large", queue_s=0.2, decode_s=0.5),
        span("s1", "run", start=2, dur=2, step_index=1),
        span("l1", "s1", kind="llm", start=2, dur=1, step_index=1, cost_usd=0.50),
        span("t1", "s1", kind="tool", start=3, dur=0.5, step_index=1, tool_name="fetch", status="error"),
        span("s2", "run", start=4, dur=6, step_index=2),
        span("l2", "s2", kind="llm", start=4, dur=5.5, step_index=2, cost_usd=0.02),
    ]


def _ids(items: list[trace.TreeItem]) -> list[str]:
    return [i.span.span_id for i in items]


def test_the_tree_sorts_siblings_by_cost_of_everything_under_them_or_by_duration() -> None:
    spans = _costly_run()
    assert _ids(trace.tree(spans)) == ["run", "s0", "l0", "e0", "s1", "l1", "t1", "s2", "l2"]
    assert _ids(trace.tree(spans, sort="cost")) == ["run", "s1", "l1", "t1", "s2", "l2", "s0", "l0", "e0"]
    assert _ids(trace.tree(spans, sort="duration")) == ["run", "s2", "l2", "s0", "l0", "e0", "s1", "l1", "t1"]
    rows = trace.tree_rows(trace.tree(spans, sort="cost"), {}, spans)
    assert [r["cost_usd"] for r in rows[:3]] == [
        pytest.approx(0.53),
        pytest.approx(0.5),
        0.5,
    ]  # run, step: what is under


def test_the_tree_filters_by_kind_and_failure_keeping_the_path_to_each_match() -> None:
    spans = _costly_run()
    tools = trace.tree(spans, kinds=frozenset({"tool"}))
    assert _ids(tools) == ["run", "s1", "t1"] and [i.matched for i in tools] == [False, False, True]
    assert _ids(trace.tree(spans, failures=True)) == ["run", "s1", "t1"]
    assert _ids(trace.tree(spans, kinds=frozenset({"llm"}))) == ["run", "s0", "l0", "s1", "l1", "s2", "l2"]


def test_each_node_folds_and_unfolds_on_its_own() -> None:
    spans = _costly_run()
    folded = trace.tree(spans, toggled=frozenset({"s1"}))
    assert _ids(folded) == ["run", "s0", "l0", "e0", "s1", "s2", "l2"]
    s1 = next(i for i in folded if i.span.span_id == "s1")
    assert s1.collapsed and s1.children == 2
    shallow = trace.tree(spans, depth=1)
    assert _ids(shallow) == ["run", "s0", "s1", "s2"] and all(i.collapsed for i in shallow[1:])
    assert _ids(trace.tree(spans, depth=1, toggled=frozenset({"s2"}))) == ["run", "s0", "s1", "s2", "l2"]


def test_an_engine_row_shows_its_calls_tokens_and_its_timings() -> None:
    spans = _costly_run()
    rows = {r["span_id"]: r for r in trace.tree_rows(trace.tree(spans), {}, spans)}
    assert rows["e0"]["detail"] == "sim-large · 1,200 in / 80 out · queue 200 ms · decode 500 ms"
    assert rows["l0"]["detail"] == "1,200 in / 80 out"


@pytest.mark.browser  # fc-list, the fonts Chromium draws with: `make system-packages` installs both
def test_every_mark_the_tree_draws_is_in_a_font_debians_chromium_has() -> None:
    """ "⏵" (the open mark once) drew an empty box: no installed font has it."""
    import subprocess

    marks = {*trace.ICONS.values(), trace.FAILED_MARK, trace.OPEN_MARK[0], trace.FOLDED, trace.UNFOLDED}
    for mark in marks:
        found = subprocess.run(
            ["fc-list", f":charset={ord(mark):x}", "family"], capture_output=True, text=True, check=True
        ).stdout
        assert found.strip(), f"no installed font draws {mark!r} (U+{ord(mark):04X})"
