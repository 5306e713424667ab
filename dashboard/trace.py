"""The trace explorer's pure side: the span tree's rows, step names, a span's facts, its
events and its captured prompt and completion as chat messages.

Free of Streamlit, so it is unit-tested directly; the run detail page draws what it returns.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from agentwatch import semconv as sc

from agentwatch_api.schemas import SpanOut
from agentwatch_platform.dashboard import analysis, formatting, live

# Symbols every common font has (emoji fonts are often missing on servers and in CI browsers).
ICONS = {
    sc.KIND_RUN: "◆",
    sc.KIND_STEP: "▸",
    sc.KIND_LLM: "✦",
    sc.KIND_TOOL: "⚒",
    sc.KIND_RETRIEVAL: "☰",
    sc.KIND_ENGINE: "⚙",
    sc.KIND_OTHER: "•",
}
FAILED_MARK = "✖"
OPEN_MARK = "◔ open"  # a span not ended (yet): dashboard.live's stand-in ("⏵" is in no font Debian's Chromium has)
FOLDED, UNFOLDED = "▸", "▾"  # a tree node's children hidden or shown (tables.Row.fold)


def icon(span: SpanOut) -> str:
    return ICONS.get(span.kind, ICONS[sc.KIND_OTHER])


# --- step names --------------------------------------------------------------------------


def step_names(spans: Sequence[SpanOut]) -> dict[int, str]:
    """Step index -> the step span's name (the first one, by start time, per index)."""
    names: dict[int, str] = {}
    for span in sorted(spans, key=lambda s: s.start_time):
        if span.kind == sc.KIND_STEP and span.step_index >= 0:
            names.setdefault(span.step_index, span.name)
    return names


def step_label(index: int, names: dict[int, str]) -> str:
    """``3 · search`` when the step has a name, ``3`` when not, ``–`` outside any step."""
    if index < 0:
        return "–"
    return f"{index} · {names[index]}" if index in names else str(index)


# --- the tree -----------------------------------------------------------------------------

SORTS = {"start": "start", "cost": "cost", "duration": "duration"}  # the tree's sibling orders


@dataclass(frozen=True)
class TreeItem:
    """A span as the tree shows it: its depth, how many children it shows or hides (``children``),
    whether its children are folded away, and whether it matched the filters (an ancestor kept
    only to show where a match sits is drawn dimmed)."""

    span: SpanOut
    depth: int
    children: int = 0
    collapsed: bool = False
    matched: bool = True


def tree(
    spans: Sequence[SpanOut],
    *,
    sort: str = "start",
    kinds: frozenset[str] | None = None,
    failures: bool = False,
    depth: int | None = None,
    toggled: frozenset[str] = frozenset(),
) -> list[TreeItem]:
    """The span tree depth-first, siblings in ``sort`` order (start first; cost or duration,
    highest first: a step by the cost of everything under it), as Langfuse and Phoenix draw
    theirs. Filtered by ``kinds`` and to ``failures``, a match keeps its ancestors (the path to
    it); ``depth`` folds what is deeper, and a span in ``toggled`` (the reader clicked its fold
    mark) is folded where it would be open and open where the depth folds it. Orphans become roots."""
    children = _children(spans)
    matched = {
        s.span_id for s in spans if (kinds is None or s.kind in kinds) and (not failures or analysis.is_failed(s))
    }
    kept = _with_ancestors(spans, matched) if (kinds is not None or failures) else None  # None: every span
    key = _sort_key(sort, children)
    shown: list[TreeItem] = []
    stack = [(s, 0) for s in reversed(sorted(_kept(children[""], kept), key=key))]
    while stack:
        span, level = stack.pop()
        kids = sorted(_kept(children.get(span.span_id, ()), kept), key=key)
        folded = bool(kids) and ((depth is not None and level >= depth) != (span.span_id in toggled))
        shown.append(TreeItem(span, level, len(kids), folded, span.span_id in matched))
        if not folded:
            stack.extend((c, level + 1) for c in reversed(kids))
    return shown


def _kept(spans: Sequence[SpanOut], kept: set[str] | None) -> Sequence[SpanOut]:
    """The spans a filter keeps (``kept``; None keeps all: a 10,000-span run's unfiltered tree
    skips the test)."""
    return spans if kept is None else [s for s in spans if s.span_id in kept]


def _children(spans: Sequence[SpanOut]) -> dict[str, list[SpanOut]]:
    ids = {s.span_id for s in spans}
    children: dict[str, list[SpanOut]] = {"": []}
    for span in spans:
        children.setdefault(span.parent_span_id if span.parent_span_id in ids else "", []).append(span)
    return children


def _with_ancestors(spans: Sequence[SpanOut], matched: set[str]) -> set[str]:
    parent = {s.span_id: s.parent_span_id for s in spans}
    kept: set[str] = set()
    for span_id in matched:
        while span_id and span_id not in kept:
            kept.add(span_id)
            span_id = parent.get(span_id, "")
    return kept


def _sort_key(sort: str, children: dict[str, list[SpanOut]]) -> Any:
    by_start = lambda s: (s.start_time, s.span_id)  # noqa: E731
    if sort == "duration":
        return lambda s: (-s.duration_s, *by_start(s))
    if sort == "cost":
        costs = subtree_costs(children)
        return lambda s: (-costs.get(s.span_id, 0.0), *by_start(s))
    return by_start


def subtree_costs(children: dict[str, list[SpanOut]]) -> dict[str, float]:
    """Span id -> its cost and its descendants' (the collector prices each call once, on its own span)."""
    order: list[SpanOut] = []
    stack = list(children[""])
    while stack:
        span = stack.pop()
        order.append(span)
        stack.extend(children.get(span.span_id, ()))
    costs = {span.span_id: span.cost_usd or 0.0 for span in order}
    parent = {c.span_id: span.span_id for span in order for c in children.get(span.span_id, ())}
    for span in reversed(order):  # children before their parents: each adds its total to its parent's
        if (up := parent.get(span.span_id)) is not None:
            costs[up] += costs[span.span_id]
    return costs


def tree_rows(
    items: Sequence[TreeItem] | Sequence[tuple[SpanOut, int]],
    names: dict[int, str],
    spans: Sequence[SpanOut] = (),
) -> list[dict[str, Any]]:
    """One row per span in tree order: its depth, its name with its kind's icon, its timing and
    where it lies on the run's timeline (``offset`` and ``share`` of the run), the figures that
    matter for its kind, and its id. ``spans`` (the run's) give an engine row its call's tokens."""
    if not items:
        return []
    tree_items = [i if isinstance(i, TreeItem) else TreeItem(i[0], i[1]) for i in items]
    t0 = min(i.span.start_time for i in tree_items)
    total = max(max(i.span.end_time for i in tree_items) - t0, 1e-9)
    by_id = {s.span_id: s for s in spans}
    totals = subtree_costs(_children(spans)) if spans else {}
    return [_tree_row(item, t0, total, names, by_id, totals) for item in tree_items]


def _tree_row(
    item: TreeItem,
    t0: float,
    total: float,
    names: dict[int, str],
    by_id: dict[str, SpanOut],
    totals: dict[str, float],
) -> dict[str, Any]:
    span = item.span
    failed = analysis.is_failed(span)
    label = (
        f"{icon(span)} {span.name}" + (f" {FAILED_MARK}" if failed else "") + (f" {OPEN_MARK}" if is_open(span) else "")
    )
    return {
        "span": label,
        "kind": span.kind,
        "step": step_label(span.step_index, names),
        "depth": item.depth,
        "children": item.children,
        "collapsed": item.collapsed,
        "matched": item.matched,
        "start_s": span.start_time - t0,
        "duration_s": span.duration_s,  # exact, formatted once: rounded here, a run read 494 ms in its tree, 493 in the list
        "offset": min(1.0, max(0.0, (span.start_time - t0) / total)),
        "share": min(1.0, span.duration_s / total),
        "status": _status(span),
        "detail": _detail(span, by_id.get(span.parent_span_id)),
        "cost_usd": span.cost_usd or totals.get(span.span_id) or None,  # a step, the run: what is under it
        "span_id": span.span_id,
    }


def is_open(span: SpanOut) -> bool:
    return span.status == live.OPEN


def status_word(span: SpanOut) -> str:
    """``ok``, ``error``, ``timeout`` or ``open``: OpenTelemetry's ``unset`` reads as the ok it means."""
    return _status(span)


def _status(span: SpanOut) -> str:
    if is_open(span):
        return live.OPEN
    if span.is_timeout:
        return "timeout"
    return "error" if span.status == "error" else "ok"  # OpenTelemetry's unset is no error


def _detail(span: SpanOut, parent: SpanOut | None = None) -> str:
    """A few words a reader scans for: the error, else the model and tokens, else the tool. An
    engine span records no usage of its own where the client's span has it: it shows its call's
    tokens (so the two rows agree) and its queue, prefill and decode time."""
    if analysis.is_failed(span):
        return error_text(span)
    if span.kind == sc.KIND_ENGINE:
        return _engine_detail(span, parent)
    if span.kind == sc.KIND_LLM:
        return f"{span.model} · {span.input_tokens:,} in / {span.output_tokens:,} out".strip(" ·")
    if span.kind == sc.KIND_TOOL:
        return span.tool_name + (" (cache hit)" if span.tool_cache_hit else "")
    return ""


def _engine_detail(span: SpanOut, parent: SpanOut | None) -> str:
    usage = span
    if not (span.input_tokens or span.output_tokens) and parent is not None and parent.kind == sc.KIND_LLM:
        usage = parent
    parts = [span.model or usage.model, f"{usage.input_tokens:,} in / {usage.output_tokens:,} out"]
    timings = [(name, getattr(span, f"{name}_s")) for name in ("queue", "prefill", "decode")]
    parts += [f"{name} {formatting.fmt(value, 's')}" for name, value in timings if value is not None]
    return " · ".join(p for p in parts if p)


def error_text(span: SpanOut) -> str:
    """The error's type and its whole message, as the span recorded them."""
    kind = span.error_type or ("timeout" if span.is_timeout else "error")
    message = span.status_message or exception_message(span)
    return f"{kind}: {message}" if message else kind


def exception_message(span: SpanOut) -> str:
    for event in parse_events(span.events):
        if event.name == "exception":
            return str(event.attributes.get("exception.message", ""))
    return ""


# --- events --------------------------------------------------------------------------------


@dataclass
class Event:
    name: str
    offset_s: float | None  # seconds after the span started
    attributes: dict[str, Any] = field(default_factory=dict)


def parse_events(raw: str, start_time: float | None = None) -> list[Event]:
    """The span's events (the collector stores them as a JSON list); nothing when unreadable."""
    if not raw:
        return []
    try:
        items = json.loads(raw)
    except ValueError:
        return [Event("(unreadable events)", None, {"raw": raw[:2000]})]
    events = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        t_ns = item.get("time_ns") or 0
        offset = t_ns / 1e9 - start_time if start_time is not None and t_ns else None
        attrs = item.get("attributes")
        if not isinstance(attrs, dict):
            attrs = {}
        events.append(Event(str(item.get("name", "")), offset, attrs))
    return events


# --- captured content as chat messages -------------------------------------------------------


@dataclass
class Message:
    role: str
    text: str = ""
    tool_calls: list[str] = field(default_factory=list)  # "name(arguments)"


def messages(raw: str, *, default_role: str) -> list[Message]:
    """Captured prompt or completion as chat messages: OpenAI-style ``{role, content,
    tool_calls}`` lists, GenAI ``{role, parts}`` lists, ``{"messages": [...]}``, a choices list,
    or plain text (one message in ``default_role``)."""
    if not raw:
        return []
    try:
        value = json.loads(raw)
    except ValueError:
        return [Message(default_role, raw)]
    if isinstance(value, dict):
        value = value.get("messages") or value.get("choices") or [value]
    if not isinstance(value, list) or not all(isinstance(m, dict) for m in value):
        return [Message(default_role, value if isinstance(value, str) else raw)]
    return [_message(m, default_role) for m in value]


def _message(item: dict[str, Any], default_role: str) -> Message:
    if isinstance(item.get("message"), dict):  # an OpenAI choice
        item = item["message"]
    role = str(item.get("role") or default_role)
    text = _content_text(item.get("content"))
    calls = [_call_text(c) for c in item.get("tool_calls") or () if isinstance(c, dict)]
    for part in item.get("parts") or ():  # GenAI semantic conventions
        if not isinstance(part, dict):
            continue
        if part.get("type") == "tool_call":
            calls.append(f"{part.get('name', '')}({_json(part.get('arguments'))})")
        elif part.get("type") == "tool_call_response":
            text += _json(part.get("response", part.get("result")))
        else:
            text += str(part.get("content", part.get("text", "")))
    if not text and not calls and "content" not in item and "parts" not in item:
        text = _json(item)
    return Message(role, text, calls)


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return _json(content)


def _call_text(call: dict[str, Any]) -> str:
    function = call.get("function")
    if not isinstance(function, dict):
        function = call
    return f"{function.get('name', '')}({_json(function.get('arguments', ''))})"


def _json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


# --- the span panel's facts -------------------------------------------------------------------


def facts(span: SpanOut, engine: SpanOut | None = None) -> list[tuple[str, Any, str]]:
    """(label, value, unit) of the figures worth a card for this span's kind; None is blank.
    An LLM call's engine timings are its own (copied by the collector's join) or, failing
    that, those of the engine span joined under it."""
    rows: list[tuple[str, Any, str]] = [("Duration", span.duration_s, "s")]
    if span.kind in (sc.KIND_LLM, sc.KIND_ENGINE):
        rows += [
            ("Input tokens", span.input_tokens, ""),
            ("Cached tokens", span.cached_tokens, ""),
            ("Output tokens", span.output_tokens, ""),
            ("Cost", span.cost_usd, "USD"),
            ("TTFT", span.ttft_s, "s"),
            ("TPOT", span.tpot_s, "s"),
        ]
    timings = [_either(span, engine, name) for name in ("queue_s", "prefill_s", "decode_s")]
    if any(v is not None for v in timings):
        rows += [
            ("Engine queue", timings[0], "s"),
            ("Engine prefill", timings[1], "s"),
            ("Engine decode", timings[2], "s"),
        ]
    return rows


def _either(span: SpanOut, engine: SpanOut | None, name: str) -> float | None:
    own = getattr(span, name)
    return getattr(engine, name) if own is None and engine is not None else own


_FIELDS = (
    "kind",
    "name",
    "status",
    "status_message",
    "error_type",
    "is_timeout",
    "model",
    "finish_reason",
    "tool_name",
    "tool_cache_hit",
    "step_index",
    "agent",
    "service",
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "cost_usd",
    "ttft_s",
    "tpot_s",
    "queue_s",
    "prefill_s",
    "decode_s",
    "start_time",
    "end_time",
    "duration_s",
    "span_id",
    "parent_span_id",
)
_UNSET = (None, "", -1)


def fields(span: SpanOut) -> list[tuple[str, str]]:
    """The span's stored columns that carry a value, as (name, text): every fact the collector
    read from its attributes (model, tokens, tool, error...), whole."""
    rows = []
    for name in _FIELDS:
        value = getattr(span, name)
        if (
            value in _UNSET
            or (value is False and name != "is_timeout")
            or (value == 0 and name.endswith(("tokens", "usd")))
        ):
            continue
        rows.append((name, _field_text(name, value)))
    return rows


def _field_text(name: str, value: Any) -> str:
    if name in ("start_time", "end_time"):
        return datetime.fromtimestamp(value, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    return f"{value:.9g}" if isinstance(value, float) else str(value)


# What a span without captured text shows instead (``SpanOut.text_state``): absence, removal and
# damage are three different answers to "where is the prompt?".
TEXT_NOTES = {
    "not_captured": (
        "Not captured: the agent that sent this span does not record prompts and completions (off by "
        "default, since they can hold personal data). To see them for new calls, set "
        "`AGENTWATCH_CAPTURE_CONTENT=true` in the agent's environment or call "
        "`agentwatch.init(capture_content=True)`; the `redact` hook cleans them before they leave the process."
    ),
    "removed": "Removed by retention or a deletion.",
    "damaged": "Unreadable (damaged): this text was stored, but its file is gone, torn or corrupt.",
}


def text_note(span: SpanOut) -> str | None:
    """Why the span shows no prompt or completion, or None when it shows what was captured."""
    if span.text_state == "captured" or (span.text_state == "not_captured" and (span.input_text or span.output_text)):
        return None
    if span.text_state == "not_captured" and span.kind not in (sc.KIND_LLM, sc.KIND_TOOL):
        return None  # a step or the run has no prompt to miss
    return TEXT_NOTES.get(span.text_state)


def find(spans: Sequence[SpanOut], span_id: str) -> SpanOut | None:
    return next((s for s in spans if s.span_id == span_id), None)


def engine_child(spans: Sequence[SpanOut], span: SpanOut) -> SpanOut | None:
    """The engine's own span joined under this client LLM span, if stored."""
    return next((s for s in spans if s.parent_span_id == span.span_id and analysis.is_engine_span(s)), None)
