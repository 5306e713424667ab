"""Pure computations behind the pages: span trees, context growth, engine shares, run graphs.

Kept free of Streamlit so they are unit-tested directly and stay fast on 10,000-span runs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from agentwatch import semconv as sc

from agentwatch_api.schemas import SpanOut

# --- span tree ---------------------------------------------------------------------------


def tree_order(spans: Sequence[SpanOut]) -> list[tuple[SpanOut, int]]:
    """Spans depth-first (children by start time) with their depth; orphans become roots."""
    ids = {s.span_id for s in spans}
    children: dict[str, list[SpanOut]] = defaultdict(list)
    for span in spans:
        parent = span.parent_span_id if span.parent_span_id in ids else ""
        children[parent].append(span)
    for kids in children.values():
        kids.sort(key=lambda s: (s.start_time, s.span_id))
    ordered: list[tuple[SpanOut, int]] = []
    stack = [(s, 0) for s in reversed(children[""])]
    while stack:
        span, depth = stack.pop()
        ordered.append((span, depth))
        stack.extend((c, depth + 1) for c in reversed(children.get(span.span_id, ())))
    return ordered


def is_failed(span: SpanOut) -> bool:
    return span.status == "error" or span.is_timeout


# --- per-call and per-step tables ----------------------------------------------------------


def client_llm_calls(spans: Sequence[SpanOut]) -> list[SpanOut]:
    """LLM calls made by the agent (not the engine's own spans under them), in call order."""
    by_id = {s.span_id: s for s in spans}
    calls = [s for s in spans if s.kind == sc.KIND_LLM and not is_engine_span(s) and not _under_llm(s, by_id)]
    return sorted(calls, key=lambda s: (s.step_index if s.step_index >= 0 else 1 << 30, s.start_time))


def _under_llm(span: SpanOut, by_id: dict[str, SpanOut]) -> bool:
    parent = by_id.get(span.parent_span_id)
    return parent is not None and parent.kind == sc.KIND_LLM


def is_engine_span(span: SpanOut) -> bool:
    """The engine's own record of a call (the collector makes vLLM's ``llm_request`` kind "engine")."""
    return span.kind == sc.KIND_ENGINE


def step_rows(spans: Sequence[SpanOut]) -> list[dict[str, object]]:
    """Per step: LLM and tool calls, tokens, cost, first TTFT, failures."""
    steps: dict[int, dict[str, object]] = {}
    for span in client_llm_calls(spans) + [s for s in spans if s.kind == sc.KIND_TOOL]:
        row = steps.setdefault(span.step_index, _empty_step(span.step_index))
        row["llm_calls" if span.kind == sc.KIND_LLM else "tool_calls"] += 1  # type: ignore[operator]
        row["input_tokens"] += span.input_tokens  # type: ignore[operator]
        row["output_tokens"] += span.output_tokens  # type: ignore[operator]
        row["cost_usd"] += span.cost_usd  # type: ignore[operator]
        row["failures"] += int(is_failed(span))  # type: ignore[operator]
        if span.ttft_s is not None and row["ttft_s"] is None:
            row["ttft_s"] = span.ttft_s
        if span.model and span.model not in row["models"]:  # type: ignore[operator]
            row["models"] += ("," if row["models"] else "") + span.model  # type: ignore[operator]
    return [steps[k] for k in sorted(steps)]


def _empty_step(index: int) -> dict[str, object]:
    return {
        "step": index,
        "llm_calls": 0,
        "tool_calls": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "cost_usd": 0.0,
        "ttft_s": None,
        "failures": 0,
        "models": "",
    }


# --- context growth -----------------------------------------------------------------------


@dataclass
class GrowthFit:
    """Input tokens per LLM call in call order, and whether the run's total grows linearly or quadratically.

    A ReAct run re-sends its growing history, so each call's input grows with the step and
    the run's cumulative input grows with steps squared; a bounded-context run keeps each
    call's input flat and its cumulative input linear. The fit is over the cumulative curve
    against the call's position (agents often make several calls per step).
    """

    calls: list[int]  # 0-based position of the call in the run
    steps: list[int]  # the step index of each call (-1 when the agent did not mark steps)
    input_tokens: list[int]
    cumulative: list[int]
    chosen: str  # "linear" | "quadratic" | "too few calls"
    fitted: list[float] = field(default_factory=list)
    tokens_added_per_call: float = 0.0
    coefficients: list[float] = field(default_factory=list)  # highest power first


def context_growth(spans: Sequence[SpanOut]) -> GrowthFit:
    calls = sorted(client_llm_calls(spans), key=lambda c: c.start_time)
    order, steps = list(range(len(calls))), [c.step_index for c in calls]
    tokens = [c.input_tokens for c in calls]
    cumulative = np.cumsum(tokens).tolist() if tokens else []
    if len(calls) < 3:
        return GrowthFit(order, steps, tokens, cumulative, "too few calls")
    x, y = np.asarray(order, float), np.asarray(cumulative, float)
    lin, quad = np.polyfit(x, y, 1), np.polyfit(x, y, 2)
    slope = float(np.polyfit(x, np.asarray(tokens, float), 1)[0])
    chosen, coeffs = ("quadratic", quad) if _prefers_quadratic(x, y, lin, quad) else ("linear", lin)
    return GrowthFit(order, steps, tokens, cumulative, chosen, np.polyval(coeffs, x).tolist(), slope, coeffs.tolist())


def _prefers_quadratic(x: np.ndarray, y: np.ndarray, lin: np.ndarray, quad: np.ndarray) -> bool:
    """Quadratic when it fits far better and its squared term is a real share of the rise."""
    if len(x) < 4 or quad[0] <= 0:
        return False
    rss_lin = float(np.sum((np.polyval(lin, x) - y) ** 2))
    rss_quad = float(np.sum((np.polyval(quad, x) - y) ** 2))
    rise = abs(float(y[-1] - y[0])) or 1.0
    curvature = float(quad[0]) * float(x.max() - x.min()) ** 2
    return rss_quad < 0.25 * rss_lin and curvature > 0.15 * rise


# --- engine share of each call --------------------------------------------------------------


def engine_shares(spans: Sequence[SpanOut]) -> list[dict[str, object]]:
    """Queue, prefill, decode and the rest of each LLM call, from the engine's spans."""
    by_id = {s.span_id: s for s in spans}
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    timed = [s for s in spans if any(v is not None for v in (s.queue_s, s.prefill_s, s.decode_s))]
    # A client LLM span carries the engine's timings itself when the collector joined them in;
    # an engine span under it then describes the same call: one row per call.
    for span in sorted(timed, key=lambda s: (s.kind == sc.KIND_ENGINE, s.start_time)):
        parent = by_id.get(span.parent_span_id)
        call = parent if parent is not None and parent.kind == sc.KIND_LLM else span
        if call.span_id in seen:
            continue
        seen.add(call.span_id)
        parts = {"queue_s": span.queue_s or 0.0, "prefill_s": span.prefill_s or 0.0, "decode_s": span.decode_s or 0.0}
        total = max(call.duration_s, sum(parts.values()))
        parts["other_s"] = max(0.0, total - sum(parts.values()))
        label = (
            f"step {call.step_index} · {call.model or span.model}"
            if call.step_index >= 0
            else f"{call.name} @{span.start_time:.0f}"
        )
        rows.append({"call": label, "span_id": call.span_id, "total_s": total, "start": call.start_time, **parts})
    rows.sort(key=lambda r: r["start"])
    for number, row in enumerate(rows, 1):
        del row["start"]
        row["call"] = f"{number}. {row['call']}"  # one bar per call: calls of one step are not merged
    return rows


# --- run graph ----------------------------------------------------------------------------


@dataclass
class Edge:
    calls: int = 0
    failures: int = 0
    cost_usd: float = 0.0
    tokens: int = 0


@dataclass
class RunGraph:
    nodes: dict[str, str]  # node id -> kind (agent | llm | tool)
    edges: dict[tuple[str, str], Edge]


def _is_agent_span(span: SpanOut) -> bool:
    return span.kind == sc.KIND_RUN or span.attributes.get(sc.GEN_AI_OPERATION_NAME) == sc.OP_INVOKE_AGENT


def _agent_name(span: SpanOut) -> str:
    return span.attributes.get(sc.GEN_AI_AGENT_NAME) or span.agent or span.name


def run_graph(spans: Sequence[SpanOut]) -> RunGraph:
    """Agents, models and tools as nodes; calls and hand-offs as edges, from GenAI attributes only."""
    by_id = {s.span_id: s for s in spans}
    owner: dict[str, str | None] = {}  # span id -> the agent node it belongs to
    graph = RunGraph({}, defaultdict(Edge))
    for span, _ in tree_order(spans):
        parent_owner = owner.get(span.parent_span_id, "")
        node = _graph_node(span, by_id)
        owner[span.span_id] = node if _is_agent_span(span) else parent_owner
        if node is None:
            continue
        graph.nodes.setdefault(node, node.split(":", 1)[0])
        if parent_owner and parent_owner != node:
            _add_call(graph.edges[(parent_owner, node)], span)
    graph.edges = dict(graph.edges)
    return graph


def _graph_node(span: SpanOut, by_id: dict[str, SpanOut]) -> str | None:
    op = span.attributes.get(sc.GEN_AI_OPERATION_NAME, "")
    if _is_agent_span(span):
        return f"agent:{_agent_name(span)}"
    if span.kind == sc.KIND_TOOL or op == sc.OP_EXECUTE_TOOL:
        return f"tool:{span.tool_name or span.attributes.get(sc.GEN_AI_TOOL_NAME) or span.name}"
    if (span.kind == sc.KIND_LLM or op in (sc.OP_CHAT, sc.OP_TEXT_COMPLETION)) and not _under_llm(span, by_id):
        return f"llm:{span.model or span.attributes.get(sc.GEN_AI_REQUEST_MODEL) or 'unknown model'}"
    return None


def _add_call(edge: Edge, span: SpanOut) -> None:
    edge.calls += 1
    edge.failures += int(is_failed(span))
    edge.cost_usd += span.cost_usd
    edge.tokens += span.input_tokens + span.output_tokens


# --- engine metrics ----------------------------------------------------------------------


def metric_is(metric: str, name: str) -> bool:
    """Prometheus counters may be stored with or without their ``_total`` suffix."""
    base = name.removesuffix("_total")
    return metric in (base, base + "_total")


def gauge_series(points: Iterable, names: Sequence[str], *, how: str = "sum") -> dict[float, float]:
    """One value per scrape time: the gauge summed (or averaged) over its label sets."""
    acc: dict[float, list[float]] = defaultdict(list)
    for p in points:
        if any(metric_is(p.metric, n) for n in names):
            acc[p.t].append(p.value)
    reduce = np.mean if how == "mean" else np.sum
    return {t: float(reduce(v)) for t, v in sorted(acc.items())}


def counter_rate(points: Iterable, names: Sequence[str]) -> dict[float, float]:
    """Per-second rate of a counter between scrapes, summed over label sets; resets handled."""
    per_series: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
    for p in points:
        if any(metric_is(p.metric, n) for n in names):
            per_series[tuple(sorted(p.labels.items()))].append((p.t, p.value))
    rates: dict[float, float] = defaultdict(float)
    for samples in per_series.values():
        samples.sort()
        for (t0, v0), (t1, v1) in zip(samples, samples[1:], strict=False):
            if t1 > t0:
                rates[t1] += (v1 - v0 if v1 >= v0 else v1) / (t1 - t0)
    return dict(sorted(rates.items()))


def counter_increase(points: Iterable, names: Sequence[str]) -> float:
    """Total increase of a counter over the range (sum of the per-scrape rates times their gaps)."""
    per_series: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
    for p in points:
        if any(metric_is(p.metric, n) for n in names):
            per_series[tuple(sorted(p.labels.items()))].append((p.t, p.value))
    total = 0.0
    for samples in per_series.values():
        samples.sort()
        total += sum(v1 - v0 if v1 >= v0 else v1 for (_, v0), (_, v1) in zip(samples, samples[1:], strict=False))
    return total


@dataclass
class Distribution:
    upper_bounds: list[float]  # bucket upper bounds (inf last)
    counts: list[float]  # observations per bucket (not cumulative)

    @property
    def total(self) -> float:
        return float(sum(self.counts))

    def quantile_bucket(self, q: float) -> tuple[float, float] | None:
        """The bucket (lower, upper] that holds the q-quantile, all a histogram knows of it: a point
        interpolated inside the bucket (Prometheus' histogram_quantile) would be made up, and reads
        150 ms for calls that all took 0.3 ms when the first bucket ends at 300 ms."""
        if self.total <= 0:
            return None
        target, seen, lower = q * self.total, 0.0, 0.0
        for upper, count in zip(self.upper_bounds, self.counts, strict=True):
            if count > 0 and seen + count >= target:
                return lower, upper
            seen, lower = seen + count, upper if upper != float("inf") else lower
        return lower, float("inf")


def histogram_distribution(points: Iterable, name: str) -> Distribution:
    """Observations per bucket over the range: last minus first cumulative count per ``le``."""
    per_le: dict[float, dict[tuple, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    for p in points:
        if p.metric == name + "_bucket" and "le" in p.labels:
            rest = tuple(sorted((k, v) for k, v in p.labels.items() if k != "le"))
            per_le[float(p.labels["le"])][rest].append((p.t, p.value))
    cumulative = [sum(_increase(samples) for samples in per_le[le].values()) for le in sorted(per_le)]
    counts = np.diff([0.0, *cumulative]).clip(min=0).round().tolist()  # whole requests
    return Distribution(sorted(per_le), counts)


def _increase(samples: list[tuple[float, float]]) -> float:
    """A counter's increase over its samples as Prometheus's ``increase()`` counts it across
    resets: a drop is a restart from zero, so what it counted after the restart is added,
    and nothing counted before the restart is lost."""
    samples.sort()
    if len(samples) == 1:
        return samples[0][1]
    return sum(v1 - v0 if v1 >= v0 else v1 for (_, v0), (_, v1) in zip(samples, samples[1:], strict=False))
