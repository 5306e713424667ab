"""The span explorer over both back ends: filters compose, groups equal hand sums over the
generated spans, and paging covers every span of the range exactly once."""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import replace

import pytest

from agentwatch_platform.collector.query import spans as query
from agentwatch_platform.collector.query.ranges import InvalidQuery
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.model import SpanRow
from tests.collector.span_fixture import TOOL_FAILURE, Generated, generate

T = (int(time.time()) // 3600 - 3) * 3600
W = {"start": T, "end": T + 3600}
P = "sx"


@pytest.fixture(scope="module")
def spans(module_store: Store) -> Generated:
    generated = generate(P, T)
    texts = [
        replace(s, input_text="Where is the KRAKATOA eruption report?", output_text="found it") if i == 5 else s
        for i, s in enumerate(generated.spans)
    ]
    generated.spans = texts
    module_store.insert_spans(texts)
    module_store.insert_spans(generate("other", T, runs=10, seed=9).spans)  # another project: never counted
    return generated


def failed(s: SpanRow) -> bool:
    return s.status_code == "error" or s.is_timeout


def hand_error_type(s: SpanRow) -> str:
    if not failed(s):
        return ""
    if s.error_type == TOOL_FAILURE:
        return f"{TOOL_FAILURE} (HTTP 503)"
    if s.error_type or s.status_message.startswith("TimeoutError"):
        return s.error_type or "TimeoutError"
    return f"error (HTTP {s.attributes['http.status_code']})"


def hand_groups(spans: Generated, key) -> dict[str, tuple[int, int, float, int]]:
    sums: dict[str, list] = defaultdict(lambda: [0, 0, 0.0, 0])
    for s in spans.spans:
        k = key(s)
        if k is None:
            continue
        g = sums[k]
        g[0] += 1
        g[1] += failed(s)
        g[2] += s.cost_usd
        g[3] += s.input_tokens + s.output_tokens
    return {k: (n, f, pytest.approx(c), t) for k, (n, f, c, t) in sums.items()}


KEYS = {
    "tool": lambda s: s.tool_name or None,
    "error_type": lambda s: hand_error_type(s) or None,
    "model": lambda s: s.model or None,
    "kind": lambda s: s.kind,
    "agent": lambda s: s.agent_name,
    "version": lambda s: s.service_version,
    "name": lambda s: s.name,
    "status": lambda s: "timeout" if s.is_timeout else s.status_code,
}


@pytest.mark.parametrize("by", sorted(KEYS))
def test_groups_equal_hand_sums(module_store: Store, spans: Generated, by: str) -> None:
    got = query.span_groups(module_store, P, **W, by=by, limit=1000)
    assert {g.key: (g.spans, g.failures, g.cost_usd, g.total_tokens) for g in got.groups} == hand_groups(
        spans, KEYS[by]
    )
    assert got.total_groups == len(got.groups)
    assert all(g.failure_rate == pytest.approx(g.failures / g.spans) for g in got.groups)


def hand_runs(spans: Generated, key) -> dict[str, int]:
    runs: dict[str, set[str]] = defaultdict(set)
    for s in spans.spans:
        if (k := key(s)) is not None:
            runs[k].add(s.trace_id)
    return {k: len(traces) for k, traces in runs.items()}


@pytest.mark.parametrize("by", ["user", "session", "step", "tool"])
def test_groups_count_their_runs_and_span_durations(module_store: Store, spans: Generated, by: str) -> None:
    """User, session and step groups are summed per run or per step before their join: the runs and
    the duration quantiles are still over the group's own spans (as the groups read from rows)."""
    key = {
        "user": lambda s: spans.run_user[s.trace_id],
        "session": lambda s: spans.run_session[s.trace_id],
        "step": lambda s: spans.step(s) or None,
        "tool": lambda s: s.tool_name or None,
    }[by]
    got = query.span_groups(module_store, P, **W, by=by, limit=1000).groups
    assert {g.key: g.runs for g in got} == hand_runs(spans, key)
    for g in got:
        durations = sorted((s.end_time_ns - s.start_time_ns) / 1e9 for s in spans.spans if key(s) == g.key)
        low, high = durations[0] * (1 - 1e-6), durations[-1] * (1 + 1e-6)  # a TDigest keeps Float32
        assert low <= g.duration_p50_s <= g.duration_p95_s <= high


def test_user_and_session_groups_are_their_runs(module_store: Store, spans: Generated) -> None:
    users = query.span_groups(module_store, P, **W, by="user", sort="-cost_usd")
    expected = hand_groups(spans, lambda s: spans.run_user[s.trace_id])
    assert {g.key: (g.spans, g.failures, g.cost_usd, g.total_tokens) for g in users.groups} == expected
    assert [g.cost_usd for g in users.groups] == sorted((g.cost_usd for g in users.groups), reverse=True)
    assert sum(g.cost_usd for g in users.groups) == pytest.approx(sum(s.cost_usd for s in spans.spans))
    sessions = query.span_groups(module_store, P, **W, by="session", kind="tool", failed=True)
    expected = hand_groups(spans, lambda s: spans.run_session[s.trace_id] if s.kind == "tool" and failed(s) else None)
    assert {g.key: (g.spans, g.failures, g.cost_usd, g.total_tokens) for g in sessions.groups} == expected


def test_step_groups_are_the_steps_and_the_calls_under_them(module_store: Store, spans: Generated) -> None:
    got = query.span_groups(module_store, P, **W, by="step", sort="-cost_usd")
    assert {g.key: (g.spans, g.failures, g.cost_usd, g.total_tokens) for g in got.groups} == hand_groups(
        spans, lambda s: spans.step(s) or None
    )
    research = query.list_spans(module_store, P, **W, step="research", kind="llm", limit=500)
    assert {h.span_id for h in research.items} == {
        s.span_id for s in spans.spans if s.kind == "llm" and spans.step(s) == "research"
    }


def test_timeouts_without_a_message_group_as_timeout_error(module_store: Store, spans: Generated) -> None:
    got = {g.key: g for g in query.span_groups(module_store, P, **W, by="error_type").groups}
    assert got["TimeoutError"].spans == sum(1 for s in spans.spans if hand_error_type(s) == "TimeoutError")
    assert got[f"{TOOL_FAILURE} (HTTP 503)"].spans == sum(1 for s in spans.spans if s.error_type == TOOL_FAILURE)
    assert "error (HTTP 502)" in got and "" not in got
    by_base = query.list_spans(module_store, P, **W, error_type=TOOL_FAILURE, limit=500)  # the type alone matches too
    assert by_base.total == got[f"{TOOL_FAILURE} (HTTP 503)"].spans


def test_attribute_groups_read_span_then_resource_attributes(module_store: Store, spans: Generated) -> None:
    versions = query.span_groups(module_store, P, **W, by="attribute:service.version")
    assert {g.key: g.spans for g in versions.groups} == {
        v: sum(1 for s in spans.spans if s.resource.get("service.version") == v) for v in ("1.0", "1.1")
    }
    steps = query.span_groups(module_store, P, **W, by="attribute:step.kind", sort="key", limit=1)
    assert [g.key for g in steps.groups] == ["act"] and steps.total_groups == 2


FILTERS = [
    ({"kind": "tool", "failed": True}, lambda s: s.kind == "tool" and failed(s)),
    ({"tool": "fetch", "status": "timeout"}, lambda s: s.tool_name == "fetch" and s.is_timeout),
    ({"model": "sim-large", "min_cost": 0.005}, lambda s: s.model == "sim-large" and s.cost_usd >= 0.005),
    ({"agent": "writer", "max_duration_s": 1.0}, lambda s: s.agent_name == "writer" and s.duration_s <= 1.0),
    ({"min_duration_s": 2.0, "max_cost": 0.0}, lambda s: s.duration_s >= 2.0 and s.cost_usd <= 0),
    (
        {"name": "chat", "attribute": ["step.kind=plan"]},
        lambda s: s.name == "chat" and s.attributes.get("step.kind") == "plan",
    ),
    ({"attribute": ["http.status_code=502"]}, lambda s: s.attributes.get("http.status_code") == "502"),
    ({"version": "1.1", "kind": "tool"}, lambda s: s.service_version == "1.1" and s.kind == "tool"),
    ({"status": "ok"}, lambda s: s.status_code == "ok" and not s.is_timeout),
    ({"search": "answered 503"}, lambda s: "answered 503" in s.status_message),
    ({"search": "krakatoa"}, lambda s: "KRAKATOA" in s.input_text),
]


@pytest.mark.parametrize(("filters", "keep"), FILTERS)
def test_filters_compose(module_store: Store, spans: Generated, filters: dict, keep) -> None:
    page = query.list_spans(module_store, P, **W, limit=500, **filters)
    expected = {s.span_id for s in spans.spans if keep(s)}
    assert {h.span_id for h in page.items} == expected and page.total == len(expected) and expected


def test_user_and_session_filters_find_their_runs_spans(module_store: Store, spans: Generated) -> None:
    page = query.list_spans(module_store, P, **W, user_id="user-2", session_id="session-6", kind="llm", limit=500)
    expected = {
        s.span_id
        for s in spans.spans
        if s.kind == "llm" and spans.run_user[s.trace_id] == "user-2" and spans.run_session[s.trace_id] == "session-6"
    }
    assert {h.span_id for h in page.items} == expected
    assert all((h.user_id, h.session_id) == ("user-2", "session-6") for h in page.items)


@pytest.mark.parametrize("sort", ["start_time", "-duration_s", "-cost_usd", "total_tokens"])
def test_cursor_pages_cover_every_span_once(module_store: Store, spans: Generated, sort: str) -> None:
    seen: list[str] = []
    values: list[float] = []
    cursor = None
    while True:
        page = query.list_spans(module_store, P, **W, sort=sort, limit=37, cursor=cursor)
        seen += [h.span_id for h in page.items]
        values += [getattr(h, sort.lstrip("-")) for h in page.items]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert sorted(seen) == sorted(s.span_id for s in spans.spans)
    assert values == sorted(values, reverse=sort.startswith("-"))


@pytest.mark.parametrize("sort", ["-cost_usd", "total_tokens", "-start_time"])
def test_offset_pages_cover_every_span_once(module_store: Store, spans: Generated, sort: str) -> None:
    """A first or offset page is cut to the spans whose key reaches its last one first (ties at
    zero cost or tokens span many pages): still every span once, in order."""
    total = len(spans.spans)
    pages = [query.list_spans(module_store, P, **W, sort=sort, limit=50, offset=o) for o in range(0, total, 50)]
    assert sorted(h.span_id for p in pages for h in p.items) == sorted(s.span_id for s in spans.spans)
    assert {p.total for p in pages} == {total}
    field = {"-cost_usd": "cost_usd", "total_tokens": "total_tokens", "-start_time": "start_time"}[sort]
    values = [getattr(h, field) for p in pages for h in p.items]
    assert values == sorted(values, reverse=sort.startswith("-"))


def test_rows_link_to_their_runs(module_store: Store, spans: Generated) -> None:
    page = query.list_spans(module_store, P, **W, sort="-cost_usd", limit=1)
    top = max(spans.spans, key=lambda s: s.cost_usd)
    hit = page.items[0]
    assert (hit.trace_id, hit.span_id, hit.kind, hit.model, hit.cost_usd) == (
        top.trace_id,
        top.span_id,
        "llm",
        top.model,
        pytest.approx(top.cost_usd),
    )
    assert (hit.run_name, hit.user_id, hit.total_tokens) == (
        top.agent_name,
        spans.run_user[top.trace_id],
        top.input_tokens + top.output_tokens,
    )


@pytest.mark.parametrize(
    ("call", "params", "needle"),
    [
        ("list", {"sort": "colour"}, "sort must be one of"),
        ("list", {"limit": 0}, "limit"),
        ("list", {"offset": 20_000}, "cursor"),
        ("list", {"cursor": "bm90IGEgY3Vyc29y"}, "cursor"),
        ("list", {"attribute": ["no-equals-sign"]}, "key=value"),
        ("list", {"min_cost": 2.0, "max_cost": 1.0}, "min_cost"),
        ("list", {"colour": "red"}, "unknown span filter"),
        ("groups", {"by": "colour"}, "by must be one of"),
        ("groups", {"by": "attribute:"}, "needs a key"),
        ("groups", {"sort": "-colour"}, "sort must be one of"),
    ],
)
def test_bad_parameters_say_what_is_wrong(
    module_store: Store, spans: Generated, call: str, params: dict, needle: str
) -> None:
    fn = query.list_spans if call == "list" else query.span_groups
    with pytest.raises(InvalidQuery, match=needle):
        fn(module_store, P, **W, **params)
