"""The decoder spec: the attribute dialects, their keys and the span-kind rules, as data.

Both decoders read this module and nothing else about dialects. The Python path
(``collector.ingest.normalize``) looks attributes up in ``ATTRIBUTES`` and classifies a span with
``KIND_RULES.classify``; the native decoder (``collector.ingest.otlp.native``) derives from the
same tables the one ``DecoderSpec`` it hands to C, whose ``kind_of`` reads the rule data
(``KindRules``) rather than its own copy. Adding a dialect is an edit here (and a row in
docs/dialects.md); tests/collector/test_decoder_spec.py puts every entry of every table here
through both decoders and checks they agree (and that C reads every ``DecoderSpec`` field and
holds no copy of a table), tests/collector/test_native_decode.py does so for generated requests.

``ATTRIBUTES``: attribute -> (column, rank, converter). For a column fed by several attributes the
lowest rank present wins, so e.g. the response model beats the request model (rank -1: the
column's only source, no ranking needed). Columns starting with ``@`` are kind signals
(``SIGNALS``), consumed by the kind rules, never stored.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agentwatch import semconv as sc

from agentwatch_platform.collector.ingest import bounds

STATUS_CODES = ("unset", "ok", "error")  # OTLP's status code -> the stored name; any other code: the first
TIMEOUT_MARKER = "timeout"  # an error type holding it (any case) marks the span a timeout

# Unmapped attributes whose values are captured content: redacted like input/output text.
CONTENT_PREFIXES = (
    "gen_ai.prompt",
    "gen_ai.completion",
    "llm.input_messages",
    "llm.output_messages",
    "llm.prompts",
    "llm.completions",
    "gen_ai.system_instructions",
    "input.",
    "output.",
    "retrieval.documents",
    "exception.message",
    "traceloop.entity.input",
    "traceloop.entity.output",
)


def to_text(value: Any) -> str:
    """An attribute value as text: JSON for arrays and maps, ``repr`` for numbers, hex for bytes."""
    if type(value) is bool:
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, bytes):
        return value.hex()
    if value is None:
        return ""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def nstr(value: Any) -> str | None:
    """Text, or None when absent or empty (the native decoder does this one itself: CONV_NSTR)."""
    if value is None or value == "":
        return None
    return value if type(value) is str else to_text(value)


def _nint(value: Any) -> int | None:
    if value is None or value == "" or type(value) is bool:
        return None
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _int32(value: Any) -> int | None:
    """An Int32 column (step index): a value outside it is client nonsense, dropped, never a failed insert."""
    number = _nint(value)
    return number if number is not None and -(2**31) <= number < 2**31 else None


def _true(value: Any) -> bool | None:
    return True if value is True or value == "true" else None


def _finish_reason(value: Any) -> str | None:
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value) or None
    return nstr(value)


CAPTURED = None  # converter marker: captured content (truncated, then redacted)

ATTRIBUTES: dict[str, tuple[str, int, Callable[[Any], Any] | None]] = {}


def _map(column: str, convert: Callable[[Any], Any] | None, *keys: str) -> None:
    for rank, key in enumerate(keys):
        ATTRIBUTES[key] = (column, rank if len(keys) > 1 else -1, convert)


# Kind signals: their slots follow the row's fields, in this order (DecoderSpec.signal_count).
SIGNALS = ("@kind", "@op", "@oi", "@tl", "@llm", "@project")
_map("@kind", nstr, sc.AGENTWATCH_SPAN_KIND)
_map("@op", nstr, sc.GEN_AI_OPERATION_NAME)
_map("@oi", nstr, sc.OPENINFERENCE_SPAN_KIND)
_map("@tl", nstr, sc.TRACELOOP_SPAN_KIND)
_map("@llm", nstr, sc.LLM_REQUEST_TYPE)
_map("@project", nstr, sc.AW_PROJECT)  # the API key decides the project, never the span
_map("model", nstr, sc.GEN_AI_RESPONSE_MODEL, sc.GEN_AI_REQUEST_MODEL, sc.LLM_MODEL_NAME)
_map("provider", nstr, sc.GEN_AI_PROVIDER_NAME, sc.GEN_AI_SYSTEM, sc.LLM_PROVIDER, sc.LLM_SYSTEM)
_map(
    "input_tokens",
    bounds.tokens,
    sc.GEN_AI_USAGE_INPUT_TOKENS,
    sc.GEN_AI_USAGE_PROMPT_TOKENS,
    sc.LLM_TOKEN_COUNT_PROMPT,
    sc.LLM_USAGE_PROMPT_TOKENS,
)
_map(
    "output_tokens",
    bounds.tokens,
    sc.GEN_AI_USAGE_OUTPUT_TOKENS,
    sc.GEN_AI_USAGE_COMPLETION_TOKENS,
    sc.LLM_TOKEN_COUNT_COMPLETION,
    sc.LLM_USAGE_COMPLETION_TOKENS,
)
_map(
    "cached_tokens",
    bounds.tokens,
    sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
    sc.LLM_TOKEN_COUNT_CACHE_READ,
    "gen_ai.usage.cache_read_input_tokens",
)
_map("agent_name", nstr, sc.GEN_AI_AGENT_NAME, sc.OI_AGENT_NAME, sc.TRACELOOP_WORKFLOW_NAME)
_map("session_id", nstr, sc.GEN_AI_CONVERSATION_ID, sc.SESSION_ID)
_map("user_id", nstr, sc.USER_ID)
_map("service_version", nstr, sc.SERVICE_VERSION)  # else the resource's (Normalizer.normalize)
_map("error_type", nstr, sc.ERROR_TYPE)
_map("is_timeout", _true, sc.AW_TIMEOUT)
_map("tool_name", nstr, sc.GEN_AI_TOOL_NAME, sc.TOOL_NAME)
_map("tool_cache_hit", _true, sc.AW_TOOL_CACHE_HIT)
_map("step_index", _int32, sc.AW_STEP_INDEX)
_map("finish_reason", _finish_reason, sc.GEN_AI_RESPONSE_FINISH_REASONS)
_map("outcome", nstr, sc.AW_RUN_OUTCOME)
_map("budget_exceeded", nstr, sc.AW_BUDGET_EXCEEDED)
# The engine records the request id, a client the response id: vLLM answers with its request id,
# so both name the same call and an engine span joins its client LLM span by it.
_map("request_id", nstr, sc.GEN_AI_REQUEST_ID, sc.GEN_AI_RESPONSE_ID)
# TTFT: then, where none of these is present, openlit's and the stream events' (normalize._stream_latency).
_map(
    "ttft_s", bounds.seconds, sc.AW_TTFT, sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK, sc.GEN_AI_LATENCY_TIME_TO_FIRST_TOKEN
)
_map("tpot_s", bounds.seconds, sc.AW_TPOT)
_map("queue_s", bounds.seconds, sc.GEN_AI_LATENCY_TIME_IN_QUEUE)
_map("prefill_s", bounds.seconds, sc.GEN_AI_LATENCY_TIME_IN_MODEL_PREFILL)
_map("decode_s", bounds.seconds, sc.GEN_AI_LATENCY_TIME_IN_MODEL_DECODE)
_map("cost_usd", bounds.cost_usd, sc.AW_COST_USD)
_map("price_version", nstr, sc.AW_PRICE_VERSION)
_map("input_text", CAPTURED, sc.GEN_AI_INPUT_MESSAGES, sc.INPUT_VALUE, sc.GEN_AI_TOOL_CALL_ARGUMENTS, "gen_ai.prompt")
_map(
    "output_text",
    CAPTURED,
    sc.GEN_AI_OUTPUT_MESSAGES,
    sc.OUTPUT_VALUE,
    sc.GEN_AI_TOOL_CALL_RESULT,
    "gen_ai.completion",
)

# Rules the mapping table cannot express (docs/dialects.md). The native decoder
# declines a span that carries one of these signal values, attributes or events, so the rules
# live in ``collector.ingest.normalize`` only: a traceloop tool's name is its entity name, a
# traceloop task inside another task or tool (``traceloop.entity.path`` set) is part of that step;
# openlit's latencies count for streamed calls only; TTFT and TPOT come from OpenInference's
# first-token and traceloop's chunk events. (One more, an OpenInference AGENT run without an agent
# name is named by its span name, is mirrored in the native decoder's finish_span: SDK-style run
# spans carry it.) An ``abandoned`` outcome goes through Python too (one span per run at most): an
# older SDK's request refused before any work (``agentwatch.lever.refused``) is stored as ``refused``.
PYTHON_RULE_SIGNALS: dict[str, frozenset[str]] = {
    sc.TRACELOOP_SPAN_KIND: frozenset({"task", "tool"}),
    sc.AW_RUN_OUTCOME: frozenset({"abandoned"}),
}
PYTHON_RULE_KEYS = (sc.GEN_AI_SERVER_TIME_TO_FIRST_TOKEN, sc.GEN_AI_SERVER_TIME_PER_OUTPUT_TOKEN)
PYTHON_RULE_COLUMNS = ("decode_s", "queue_s")  # engine timings: TPOT from the decode time (Normalizer._engine)
STREAM_EVENTS = frozenset({sc.OI_FIRST_TOKEN_EVENT, sc.TRACELOOP_CHUNK_EVENT})
# A span's dialect, for the rules above: the value of the first of these signals present.
DIALECT_SIGNALS = ("@tl", "@oi")
# A run of this dialect without an agent name is named by its span (both decoders apply it).
RUN_NAMED_BY_SPAN = "AGENT"


@dataclass(frozen=True, slots=True)
class KindRules:
    """run | step | llm | tool | retrieval | other | engine, from the most specific signal present.

    In order: a declared kind (signal ``declared_signal``, ``agentwatch.span.kind``) in ``declared``; the engine's own span
    (named ``engine_name``, with a column of ``engine_when``); the first signal of ``signals``
    whose table knows its value; the ``llm_signal`` or a column of ``llm_when`` (an LLM call), a
    column of ``tool_when`` (a tool); else ``other``. A step with no parent is the run itself. The native decoder reads these fields
    (``_native.c`` ``kind_of``); it declines engine spans to the Python path.
    """

    declared: frozenset[str]
    declared_signal: str
    engine_name: str
    engine_when: tuple[str, ...]
    signals: tuple[tuple[str, Mapping[str, str]], ...]
    llm_signal: str
    llm_when: tuple[str, ...]
    tool_when: tuple[str, ...]
    names: tuple[str, str, str, str, str]  # run, step, llm, tool, other: what the native decoder returns

    def classify(self, cols: dict[str, Any], name: str, parent: str) -> str:
        """The kind of a span whose mapped columns are ``cols``; consumes their ``@`` signals
        (every one popped before any rule decides: the rest of ``cols`` builds the row)."""
        pop = cols.pop
        declared = pop(self.declared_signal, None)
        kind = None
        for signal, table in self.signals:
            value = pop(signal, None)
            if not kind and value is not None:
                kind = table.get(value)
        llm = pop(self.llm_signal, None)
        pop("@project", None)
        if declared in self.declared:
            return declared  # type: ignore[no-any-return]
        if name == self.engine_name and any(column in cols for column in self.engine_when):
            # The engine's view of a call, with or without the client's trace context: never a run,
            # never billed itself (collector.ingest.engine_join joins it to the client's LLM span).
            return sc.KIND_ENGINE
        run, step, llm_kind, tool, other = self.names
        if not kind:
            if llm is not None or any(column in cols for column in self.llm_when):
                kind = llm_kind
            elif any(column in cols for column in self.tool_when):
                kind = tool
            else:
                return other
        return run if kind == step and not parent else kind


KIND_RULES = KindRules(
    declared=frozenset(sc.SPAN_KINDS),
    declared_signal="@kind",
    engine_name=sc.VLLM_SPAN_NAME,
    engine_when=("request_id",),
    signals=(
        (
            "@op",
            {
                sc.OP_INVOKE_AGENT: sc.KIND_RUN,
                "create_agent": sc.KIND_RUN,
                sc.OP_CHAT: sc.KIND_LLM,
                sc.OP_TEXT_COMPLETION: sc.KIND_LLM,
                "generate_content": sc.KIND_LLM,
                sc.OP_EMBEDDINGS: sc.KIND_LLM,
                sc.OP_EXECUTE_TOOL: sc.KIND_TOOL,
            },
        ),
        (
            "@oi",
            {
                "LLM": sc.KIND_LLM,
                "EMBEDDING": sc.KIND_LLM,
                "TOOL": sc.KIND_TOOL,
                "RETRIEVER": sc.KIND_RETRIEVAL,
                "RERANKER": sc.KIND_RETRIEVAL,
                "AGENT": sc.KIND_RUN,
                "CHAIN": sc.KIND_STEP,
            },
        ),
        # A traceloop @agent is the agent, under a @workflow or not (its steps are its tasks); like any
        # run-kind span it is never billed, so an agent span that sums its calls' tokens counts nothing twice.
        ("@tl", {"workflow": sc.KIND_RUN, "agent": sc.KIND_RUN, "task": sc.KIND_STEP, "tool": sc.KIND_TOOL}),
    ),
    llm_signal="@llm",
    llm_when=("model",),
    tool_when=("tool_name",),
    names=(sc.KIND_RUN, sc.KIND_STEP, sc.KIND_LLM, sc.KIND_TOOL, sc.KIND_OTHER),
)


@dataclass(frozen=True, slots=True)
class DecoderSpec:
    """Everything the native decoder needs, handed to ``_native.Decoder`` whole (read by attribute,
    built once per ``Normalizer`` by ``collector.ingest.otlp.native``): the attribute table in slot
    form, the row's layout, the normaliser's callables and bounds, and the kind and dialect rules in
    slot form. The C decoder reads every field and holds no table of its own: its enums (the fields it
    fills, converter and column type codes) it exports for this spec to use
    (tests/collector/test_decoder_spec.py checks both).
    """

    attributes: dict[str, tuple[int, int, int, Any]]  # key -> (slot, rank, converter code, converter)
    defaults: tuple[Any, ...]  # one per SpanRow field
    column_types: tuple[int, ...]  # the C decoder's T_* code per SPANS_SCHEMA column
    named: tuple[int, ...]  # the slots of the fields the decoder fills itself, in its F_* order
    content_prefixes: tuple[str, ...]
    text: Callable[[Any], str]
    captured: Callable[[Any], str]
    redact: Callable[[str], str] | None
    price: Callable[..., Any] | None
    resource: Callable[[dict[str, Any]], Any]
    events: Callable[[list[dict[str, Any]], str], tuple[str, str]]
    signal_count: int  # len(SIGNALS): their slots follow the row's fields
    kinds: frozenset[str]  # KindRules.declared
    kind_declared_slot: int  # KindRules.declared_signal
    kind_signals: tuple[tuple[int, dict[str, str]], ...]  # (signal slot, table), KindRules.signals
    kind_engine_name: str
    kind_engine_slots: tuple[int, ...]
    kind_llm_slots: tuple[int, ...]
    kind_tool_slots: tuple[int, ...]
    kind_names: tuple[str, str, str, str, str]
    dialect_slots: tuple[int, ...]  # DIALECT_SIGNALS
    run_named_by_span: str  # RUN_NAMED_BY_SPAN
    decline_slots: tuple[int, ...]  # PYTHON_RULE_COLUMNS
    status_names: tuple[str, ...]  # STATUS_CODES
    timeout_marker: str  # TIMEOUT_MARKER
    max_time_ns: int  # bounds.MAX_TIME_NS: a later end declines the span
    max_len: int
    max_key_len: int
    max_attributes: int
    max_events: int
