"""A deterministic, agent-like OTLP workload, encoded once, that any OTLP back end can ingest.

The benchmarks (``bench/``) send it, and the collector's tests decode it; it is installed with
the reference stack (which needs only the base install for it) because ``bench`` is not.

Each trace is one agent run: a run span with 20 to 60 children, LLM calls (model, token
counts, time to first token, 500 bytes of prompt and of completion text) and tool calls, a
tenth of which fail. Attributes are written in the dialects both agentwatch and Arize
Phoenix understand (OpenTelemetry GenAI conventions, agentwatch's extensions, and
OpenInference's ``openinference.span.kind``, ``llm.*`` and ``input.value``/``output.value``),
so side-by-side numbers are about the same spans with the same content.

Sizes past ``unique_spans`` reuse a pool of encoded batches, rewriting the trace ids per
pass with one byte replacement (every trace id starts with a fixed marker), so a 10M-span
run costs the sender a memory copy per batch instead of re-encoding. Span ids then repeat
across passes, which is still a distinct span to any store keyed on (trace, span).

``content=False`` leaves out all captured text (the shape the disk target is stated for).

Everything is a function of ``(spans, seed, batch_spans, end_time_ns, unique_spans, content)``: the
same arguments give the same bytes, and ``totals`` says what a correct back end must answer.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

from agentwatch import semconv as sc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

CONTENT_BYTES = 500
MIN_CHILDREN, MAX_CHILDREN = 20, 60
TOOL_ERROR_RATE = 0.1
LLM_SHARE = 0.6
MODELS = (("sim-small", 0.7), ("sim-large", 0.3))
TOOLS = ("search", "fetch", "read_file", "calculator")
AGENT_NAME = "bench-agent"
PHOENIX_PROJECT_ATTR = "openinference.project.name"
TRACE_MARKER = bytes.fromhex("a6e1b0c4d2f3")  # first 6 bytes of every trace id
_PASS_SLOT = b"\x00\x00\x00\x00"  # next 4 bytes: which pass over the pool (0 in the pool)
_WINDOW_NS = (40 * 60 - 5 * 60) * 10**9  # traces start between 40 and 5 minutes before the end
_WORDS = (
    "agent plan search result source claim evidence report draft summary context window token "
    "model latency cache retry budget step tool fetch page corpus query answer question reason "
    "observe act reflect verify cite paragraph section table figure metric trend growth cost "
    "price batch queue prefill decode stream chunk message system user assistant function call "
    "argument value error timeout limit quota server engine kernel memory bandwidth throughput "
    "the a of to and in for on with by from as is are was were be this that these those it"
).split()


@dataclass(frozen=True)
class Totals:
    """What a correct back end must answer after ingesting the whole workload."""

    spans: int
    traces: int
    llm_spans: int
    tool_spans: int
    error_spans: int
    input_tokens: int
    output_tokens: int
    content_bytes: int  # captured prompt/completion/tool text, what "same content" refers to
    start_ns: int  # earliest span start
    end_ns: int  # latest span end

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass
class _Tally:
    spans: int = 0
    traces: int = 0
    llm: int = 0
    tool: int = 0
    errors: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    content_bytes: int = 0
    start_ns: int = 2**63
    end_ns: int = 0


class Workload:
    """The batches (OTLP/HTTP protobuf request bodies) and the answers they imply."""

    def __init__(
        self,
        spans: int,
        *,
        seed: int = 7,
        batch_spans: int = 1000,
        end_time_ns: int,
        unique_spans: int = 200_000,
        project: str = "bench",
        content: bool = True,
    ) -> None:
        if spans < 1:
            raise ValueError(f"spans must be at least 1, got {spans}")
        if batch_spans < 1 or unique_spans < 1:
            raise ValueError(f"batch_spans and unique_spans must be positive, got {batch_spans}, {unique_spans}")
        self.seed = seed
        self.project = project
        pool_spans = min(spans, unique_spans)
        self.passes = -(-spans // pool_spans)  # rounds up to whole passes over the pool
        builder = _Builder(random.Random(seed), end_time_ns, project, content)
        self._pool, tally = builder.build(pool_spans, batch_spans)
        self.first_trace_id = builder.first_trace_id
        self.first_trace_spans = builder.first_trace_spans
        self.totals = _scale(tally, self.passes)

    @property
    def batch_count(self) -> int:
        return len(self._pool) * self.passes

    @property
    def request_bytes(self) -> int:
        """Bytes on the wire for the whole workload (a pass rewrites ids in place: same sizes)."""
        return sum(len(body) for body in self._pool) * self.passes

    def batches(self) -> Iterator[bytes]:
        """Every request body in order; passes after the first differ only in their trace ids."""
        for pass_no in range(self.passes):
            for body in self._pool:
                yield body if pass_no == 0 else _rewrite_pass(body, pass_no)


def otlp_json(body: bytes) -> bytes:
    """A protobuf request body as the OTLP JSON mapping sends it (what OTLP/HTTP JSON exporters,
    the JavaScript one among them, post): proto3 JSON with trace and span ids in hex."""
    import json

    from google.protobuf.json_format import MessageToDict

    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    return json.dumps(_hex_ids(MessageToDict(request))).encode()


def _hex_ids(node: object) -> object:
    """MessageToDict writes bytes fields in base64; OTLP JSON wants trace and span ids in hex."""
    import base64

    if isinstance(node, dict):
        return {
            k: base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId") else _hex_ids(v)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_hex_ids(v) for v in node]
    return node


def _rewrite_pass(body: bytes, pass_no: int) -> bytes:
    return body.replace(TRACE_MARKER + _PASS_SLOT, TRACE_MARKER + pass_no.to_bytes(4, "big"))


def _scale(t: _Tally, passes: int) -> Totals:
    return Totals(
        spans=t.spans * passes,
        traces=t.traces * passes,
        llm_spans=t.llm * passes,
        tool_spans=t.tool * passes,
        error_spans=t.errors * passes,
        input_tokens=t.input_tokens * passes,
        output_tokens=t.output_tokens * passes,
        content_bytes=t.content_bytes * passes,
        start_ns=t.start_ns,
        end_ns=t.end_ns,
    )


def kv(key: str, value: str | int | float | bool) -> KeyValue:
    """One OTLP attribute, its value typed as Python's is (the collector's tests build theirs with it too)."""
    if isinstance(value, bool):
        return KeyValue(key=key, value=AnyValue(bool_value=value))
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    if isinstance(value, float):
        return KeyValue(key=key, value=AnyValue(double_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=value))


class _Builder:
    """Generates the pool: whole traces, grouped into batches of about ``batch_spans`` spans."""

    def __init__(self, rng: random.Random, end_time_ns: int, project: str, content: bool) -> None:
        self.rng = rng
        self.content = content  # captured prompt/completion/tool text, or none at all
        self.end_ns = end_time_ns
        self.tally = _Tally()
        self.first_trace_id = ""
        self.first_trace_spans = 0
        self._id_salt = rng.getrandbits(64)
        self._resource = [
            kv("service.name", AGENT_NAME),
            kv(PHOENIX_PROJECT_ATTR, project),
            kv(sc.AW_PROJECT, project),
        ]

    def build(self, spans: int, batch_spans: int) -> tuple[list[bytes], _Tally]:
        pool: list[bytes] = []
        pending: list[Span] = []
        while self.tally.spans < spans:
            children = min(self.rng.randint(MIN_CHILDREN, MAX_CHILDREN), spans - self.tally.spans - 1)
            pending.extend(self._trace(children))
            if len(pending) >= batch_spans or self.tally.spans >= spans:
                pool.append(self._encode(pending))
                pending = []
        return pool, self.tally

    def _encode(self, spans: list[Span]) -> bytes:
        scope = ScopeSpans(scope=InstrumentationScope(name="agentwatch.bench", version="1"), spans=spans)
        request = ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[scope])])
        request.resource_spans[0].resource.attributes.extend(self._resource)
        body = request.SerializeToString(deterministic=True)
        if body.count(TRACE_MARKER + _PASS_SLOT) != len(spans):
            raise RuntimeError("trace marker collides with other bytes; pick another TRACE_MARKER")
        return body

    def _trace(self, children: int) -> list[Span]:
        t = self.tally
        trace_id = TRACE_MARKER + _PASS_SLOT + _mix(t.traces, self._id_salt, 6)
        if not self.first_trace_id:
            self.first_trace_id, self.first_trace_spans = trace_id.hex(), children + 1
        t.traces += 1
        start = self.end_ns - 5 * 60 * 10**9 - self.rng.randrange(_WINDOW_NS)
        run = self._span(trace_id, b"", "research_run", start)
        clock = start + 1_000_000
        spans = [run]
        for step in range(children):
            llm = self.rng.random() < LLM_SHARE
            child = self._llm(trace_id, run.span_id, step, clock) if llm else self._tool(trace_id, run.span_id, clock)
            clock = child.end_time_unix_nano + self.rng.randrange(1_000_000, 20_000_000)
            spans.append(child)
        question = self._text(CONTENT_BYTES) if self.content else ""
        run.end_time_unix_nano = clock
        run.attributes.extend(
            [
                kv(sc.AGENTWATCH_SPAN_KIND, sc.KIND_RUN),
                kv(sc.OPENINFERENCE_SPAN_KIND, "AGENT"),
                kv(sc.GEN_AI_OPERATION_NAME, sc.OP_INVOKE_AGENT),
                kv(sc.GEN_AI_AGENT_NAME, AGENT_NAME),
                *([kv(sc.INPUT_VALUE, question)] if self.content else []),
                kv(sc.AW_RUN_OUTCOME, "success"),
            ]
        )
        run.status.code = Status.STATUS_CODE_OK
        t.content_bytes += len(question)
        t.start_ns = min(t.start_ns, start)
        t.end_ns = max(t.end_ns, clock)
        return spans

    def _span(self, trace_id: bytes, parent: bytes, name: str, start: int) -> Span:
        self.tally.spans += 1
        span_id = _mix(self.tally.spans, self._id_salt, 8)
        kind = Span.SPAN_KIND_INTERNAL if parent else Span.SPAN_KIND_SERVER
        return Span(
            trace_id=trace_id,
            span_id=span_id,
            parent_span_id=parent,
            name=name,
            kind=kind,
            start_time_unix_nano=start,
        )

    def _llm(self, trace_id: bytes, parent: bytes, step: int, start: int) -> Span:
        rng, t = self.rng, self.tally
        model = rng.choices([m for m, _ in MODELS], weights=[w for _, w in MODELS])[0]
        input_tokens = 300 + step * rng.randint(150, 400)  # ReAct-like: context grows each step
        output_tokens = rng.randint(20, 800)
        ttft = round(rng.uniform(0.05, 1.5), 4)
        span = self._span(trace_id, parent, f"chat {model}", start)
        span.end_time_unix_nano = start + int((ttft + output_tokens * rng.uniform(0.005, 0.03)) * 1e9)
        prompt, completion = (self._text(CONTENT_BYTES), self._text(CONTENT_BYTES)) if self.content else ("", "")
        span.attributes.extend(
            [
                kv(sc.AGENTWATCH_SPAN_KIND, sc.KIND_LLM),
                kv(sc.OPENINFERENCE_SPAN_KIND, "LLM"),
                kv(sc.GEN_AI_OPERATION_NAME, sc.OP_CHAT),
                kv(sc.GEN_AI_PROVIDER_NAME, "sim"),
                kv(sc.GEN_AI_AGENT_NAME, AGENT_NAME),
                kv(sc.GEN_AI_REQUEST_MODEL, model),
                kv(sc.GEN_AI_RESPONSE_MODEL, model),
                kv(sc.LLM_MODEL_NAME, model),
                kv(sc.GEN_AI_USAGE_INPUT_TOKENS, input_tokens),
                kv(sc.GEN_AI_USAGE_OUTPUT_TOKENS, output_tokens),
                kv(sc.LLM_TOKEN_COUNT_PROMPT, input_tokens),
                kv(sc.LLM_TOKEN_COUNT_COMPLETION, output_tokens),
                kv(sc.LLM_TOKEN_COUNT_TOTAL, input_tokens + output_tokens),
                kv(sc.AW_TTFT, ttft),
                kv(sc.AW_STEP_INDEX, step),
                *([kv(sc.INPUT_VALUE, prompt), kv(sc.OUTPUT_VALUE, completion)] if self.content else []),
            ]
        )
        span.status.code = Status.STATUS_CODE_OK
        t.llm += 1
        t.input_tokens += input_tokens
        t.output_tokens += output_tokens
        t.content_bytes += len(prompt) + len(completion)
        return span

    def _tool(self, trace_id: bytes, parent: bytes, start: int) -> Span:
        rng, t = self.rng, self.tally
        tool = rng.choice(TOOLS)
        span = self._span(trace_id, parent, f"execute_tool {tool}", start)
        span.end_time_unix_nano = start + rng.randrange(5 * 10**7, 10**9)
        arguments, result = (self._text(60), self._text(200)) if self.content else ("", "")
        span.attributes.extend(
            [
                kv(sc.AGENTWATCH_SPAN_KIND, sc.KIND_TOOL),
                kv(sc.OPENINFERENCE_SPAN_KIND, "TOOL"),
                kv(sc.GEN_AI_OPERATION_NAME, sc.OP_EXECUTE_TOOL),
                kv(sc.GEN_AI_AGENT_NAME, AGENT_NAME),
                kv(sc.GEN_AI_TOOL_NAME, tool),
                kv(sc.TOOL_NAME, tool),
                *([kv(sc.INPUT_VALUE, arguments), kv(sc.OUTPUT_VALUE, result)] if self.content else []),
            ]
        )
        t.tool += 1
        t.content_bytes += len(arguments) + len(result)
        if rng.random() < TOOL_ERROR_RATE:
            _fail(span, tool)
            t.errors += 1
        else:
            span.status.code = Status.STATUS_CODE_OK
        return span

    def _text(self, nbytes: int) -> str:
        words = self.rng.choices(_WORDS, k=nbytes // 3)
        return " ".join(words)[:nbytes].ljust(nbytes, ".")


def _fail(span: Span, tool: str) -> None:
    """Mark a tool span failed the way OTel SDKs do: error status, error.type, exception event."""
    message = f"{tool} failed: upstream returned 502 (simulated)"
    span.status.code = Status.STATUS_CODE_ERROR
    span.status.message = message
    span.attributes.append(kv(sc.ERROR_TYPE, "ToolError"))
    event = span.events.add(time_unix_nano=span.end_time_unix_nano, name="exception")
    event.attributes.extend([kv("exception.type", "ToolError"), kv("exception.message", message)])


def _mix(index: int, salt: int, nbytes: int) -> bytes:
    """A distinct, never-zero, random-looking id for each index (odd multiplier: a bijection)."""
    bits = nbytes * 8
    value = (((index + 1) * 0x9E3779B97F4A7C15) ^ salt) % (1 << bits)
    return (value or 1).to_bytes(nbytes, "big")
