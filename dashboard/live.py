"""A run that has not finished, as the pages draw it: its open spans and its live figures.

A span is exported when it ends, so while a run runs its root span and its current step are
not stored; the spans stored under them name them as parents. ``open_spans`` stands in for
each such parent, drawn from its first child's start to now (to the run's last activity once
it is incomplete: its process is gone), so the tree nests and the waterfall grows under them.
Free of Streamlit.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from agentwatch import semconv as sc

from agentwatch_api.schemas import RunSummary, SpanOut

OPEN = "open"  # the status of a stand-in for a span that has not ended (or never did)
UNFINISHED = ("running", "incomplete")


def is_unfinished(run: RunSummary) -> bool:
    return run.status in UNFINISHED


def open_until(run: RunSummary, now: float) -> float:
    """Where an open span's bar ends: now while the run runs, its last activity once incomplete."""
    return now if run.status == "running" else run.end_time


def open_spans(spans: Sequence[SpanOut], *, until: float) -> list[SpanOut]:
    """Stand-ins for the parents that stored spans name but that are not stored (yet), each from
    its first child's start to ``until``: the run's root (named from its start marker) and the
    steps or calls under way. Empty when every parent is stored."""
    stored = {s.span_id for s in spans}
    children: dict[str, list[SpanOut]] = defaultdict(list)
    for span in spans:
        if span.parent_span_id and span.parent_span_id not in stored:
            children[span.parent_span_id].append(span)
    if not children:
        return []
    marker = next((s for s in spans if s.attributes.get(sc.AW_RUN_START) == "true"), None)
    root = marker.parent_span_id if marker is not None else _stored_root(spans)
    return [_stand_in(parent, kids, root, marker, until) for parent, kids in children.items()]


def _stored_root(spans: Sequence[SpanOut]) -> str:
    return next((s.span_id for s in spans if s.kind == sc.KIND_RUN), "")


def _stand_in(span_id: str, kids: list[SpanOut], root: str, marker: SpanOut | None, until: float) -> SpanOut:
    start = min(k.start_time for k in kids)
    end = max(until, max(k.end_time for k in kids))
    if span_id == root:
        name = marker.attributes.get(sc.AW_RUN_NAME, "run") if marker is not None else "run"
        kind, parent, step, agent = sc.KIND_RUN, "", -1, marker.agent if marker is not None else ""
    else:
        kind = sc.KIND_LLM if all(k.kind == sc.KIND_ENGINE for k in kids) else sc.KIND_STEP
        step = max((k.step_index for k in kids), default=-1)
        name = f"step {step}" if kind == sc.KIND_STEP and step >= 0 else kind
        parent, agent = (root if root != span_id else ""), kids[0].agent
    return SpanOut(
        span_id=span_id,
        parent_span_id=parent,
        name=name,
        kind=kind,
        start_time=start,
        end_time=end,
        duration_s=max(end - start, 0.0),
        status=OPEN,
        step_index=step,
        agent=agent,
        status_message="not ended: the span is exported when it ends",
    )


def with_open_spans(run: RunSummary, spans: Sequence[SpanOut], now: float) -> list[SpanOut]:
    """The run's spans, with stand-ins for its open ones while it is unfinished."""
    if not is_unfinished(run):
        return list(spans)
    return [*open_spans(spans, until=open_until(run, now)), *spans]


def elapsed_s(run: RunSummary, now: float) -> float:
    return max(now - run.start_time, 0.0)
