"""Every table of the decoder spec, entry by entry: the native decoder and the Python path agree.

``collector.ingest.spec`` is the one home of the attribute dialects, the kind rules, the status
names and the rules only the Python path applies; the C decoder gets them whole (``DecoderSpec``,
read by attribute) and the Python path reads them directly. Here every entry of every table
(each mapped attribute with values of its converter, each pair of attributes ranked for one
column, each kind signal value, each declared kind, the signals' precedence, each status code
and OTLP span kind, each content prefix, each Python-only rule) goes into a span of its own,
through both decoders, and the rows must be equal. The native decoder must take such a span
itself (a decline would hide a difference: the Python path would make both rows), except where
the entry is a Python-only rule, which it must decline. So a mapping or rule added to one side
only, or an enum changed on one side only, fails here.

The second half checks the contract itself: the C decoder reads every field of the spec, holds
none of the spec's values as a literal of its own, and exports the enums the spec is built over.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agentwatch import semconv as sc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from agentwatch_platform.collector.ingest import bounds, spec
from agentwatch_platform.collector.ingest.normalize import Normalizer, sdk_pricer
from agentwatch_platform.collector.ingest.otlp import decode, native
from agentwatch_platform.collector.ingest.otlp.decode import JSON, PROTOBUF, convert
from agentwatch_platform.collector.ingest.redact import Redactor
from agentwatch_platform.collector.storage.columns import SPAN_FIELDS
from agentwatch_platform.reference_agent.workload import otlp_json
from tests.reliability import otlp_gen as gen

pytestmark = pytest.mark.skipif(not native.AVAILABLE, reason=f"native decoder not built: {native.NOT_BUILT}")

NORMALIZERS = {
    "plain": Normalizer(),
    "priced-redacted": Normalizer(redactor=Redactor.from_setting("default"), pricer=sdk_pricer()),
}
START = 1_700_000_000 * 10**9  # fixed: the rows are compared, never the clock
PARENT = "0a" * 8
SECRET = "mail a@b.example, key sk-" + "x" * 30  # the default redactor hides both

# Values of each converter of spec.ATTRIBUTES a span may carry, in range: a new converter needs its own.
VALUES: dict[Any, list[Any]] = {
    spec.nstr: ["gpt-4o-mini", 42, 1.5, True, ["a", "b"], {"k": "v"}],
    bounds.tokens: [12, "12", 0, bounds.MAX_TOKENS],
    bounds.seconds: [0.25, 2, "0.5", 0.0],
    bounds.cost_usd: [0.5, 3, "0.001"],
    spec._true: [True, "true", False, "yes", 1],
    spec._int32: [3, "7", -1, 2**31, 2**40, "x"],
    spec._finish_reason: [["stop", "length"], "stop", [], 7],
    spec.CAPTURED: [SECRET, "x" * 40_000, {"role": "user", "content": SECRET}, 5],
}
# Values out of a converter's bound: the Python path drops them with a warning, so C declines the span.
BAD_VALUES: dict[Any, list[Any]] = {
    bounds.tokens: [-1, bounds.MAX_TOKENS + 1, "many", True],
    bounds.seconds: [-0.5, float("nan"), "soon", bounds.MAX_SECONDS * 2],
    bounds.cost_usd: [-1.0, float("inf"), "cheap"],
}


def _any(value: Any) -> AnyValue:
    return AnyValue() if value is None else gen._any(value)


def _request(
    attributes: list[tuple[str, Any]] | dict[str, Any],
    *,
    name: str = "span",
    parent: str = PARENT,
    status: tuple[int, str] = (0, ""),
    span_kind: int = 0,
    resource: dict[str, Any] | None = None,
    events: tuple[tuple[str, dict[str, Any]], ...] = (),
    end_ns: int = START + 900 * 10**6,
) -> bytes:
    """One span in one request: ``attributes`` in wire order, events as (name, attributes)."""
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    for key, value in (resource or {"service.name": "svc"}).items():
        rs.resource.attributes.append(KeyValue(key=key, value=_any(value)))
    span = rs.scope_spans.add().spans.add(
        name=name,
        trace_id=b"\xab" * 16,
        span_id=b"\x01" * 8,
        parent_span_id=bytes.fromhex(parent),
        start_time_unix_nano=START,
        end_time_unix_nano=end_ns,
        kind=span_kind,  # type: ignore[arg-type]
    )
    span.status.code, span.status.message = status  # type: ignore[assignment]
    for key, value in attributes.items() if isinstance(attributes, dict) else attributes:
        span.attributes.append(KeyValue(key=key, value=_any(value)))
    for i, (event_name, event_attributes) in enumerate(events):
        event = span.events.add(name=event_name, time_unix_nano=START + (i + 1) * 10**6)
        for key, value in event_attributes.items():
            event.attributes.append(KeyValue(key=key, value=_any(value)))
    return request.SerializeToString()


@functools.cache
def _decoder(which: str) -> native.NativeDecoder:
    return native.NativeDecoder(NORMALIZERS[which])


def _python(body: bytes, which: str, fmt: str = PROTOBUF) -> decode.Converted:
    return convert(body, fmt, "p", NORMALIZERS[which], max_spans=10, native=False)


def _same_rows(body: bytes, *, declined: bool = False) -> list[dict[str, Any]]:
    """The Python path's rows of ``body``, after checking the native decoder makes the same ones
    itself (or, ``declined``, that it declines the span, leaving it to the Python path)."""
    for which in NORMALIZERS:
        python = _python(body, which)
        decoded = _decoder(which).decode(body, "p")
        if declined:
            assert decoded.declined == [0], "the native decoder took a span whose rule lives in Python only"
            continue
        assert decoded.declined == [], "the native decoder declined a span the spec says it takes"
        assert python.rejected == 0 and decoded.table.schema == python.table.schema
        fast, slow = decoded.table.to_pylist(), python.table.to_pylist()
        for column in python.table.column_names:
            assert [r[column] for r in fast] == [r[column] for r in slow], f"{which}: column {column}"
    return python.table.to_pylist()


def _python_rule(key: str, value: Any) -> bool:
    """Whether this value of this attribute is a rule of the Python path only (spec.PYTHON_RULE_SIGNALS)."""
    return type(value) is str and value in spec.PYTHON_RULE_SIGNALS.get(key, ())


def _key_of(signal: str) -> str:
    """The attribute that carries a kind signal."""
    (key,) = [k for k, (column, _, _) in spec.ATTRIBUTES.items() if column == signal]
    return key


# --- the attribute table ---------------------------------------------------------------------------


def _attribute_cases() -> Iterator[Any]:
    for key, (column, _rank, convert_fn) in spec.ATTRIBUTES.items():
        assert convert_fn in VALUES, f"no test values for {key}'s converter {convert_fn}: add them to VALUES"
        for value in VALUES[convert_fn]:
            declined = column in spec.PYTHON_RULE_COLUMNS or _python_rule(key, value)
            yield pytest.param(key, value, declined, id=f"{key}={value!r:.20}")


@pytest.mark.parametrize(("key", "value", "declined"), list(_attribute_cases()))
def test_every_mapped_attribute_fills_its_column_the_same(key: str, value: Any, declined: bool) -> None:
    for parent in (PARENT, ""):
        _same_rows(_request({key: value}, parent=parent), declined=declined)


def _bad_value_cases() -> Iterator[Any]:
    for key, (_column, _rank, convert_fn) in spec.ATTRIBUTES.items():
        for value in BAD_VALUES.get(convert_fn, ()):
            yield pytest.param(key, value, id=f"{key}={value!r:.20}")


@pytest.mark.parametrize(("key", "value"), list(_bad_value_cases()))
def test_a_value_out_of_bounds_is_declined_to_the_python_path_which_drops_it(key: str, value: Any) -> None:
    _same_rows(_request({key: value}), declined=True)
    assert _python(_request({key: value}), "plain").messages  # the warning of partial_success


def _ranked_pairs() -> Iterator[Any]:
    by_column: dict[str, list[tuple[int, str]]] = {}
    for key, (column, rank, _convert) in spec.ATTRIBUTES.items():
        if rank >= 0 and column not in spec.PYTHON_RULE_COLUMNS:
            by_column.setdefault(column, []).append((rank, key))
    for column, keys in sorted(by_column.items()):
        for (_, better), (_, worse) in itertools.combinations(sorted(keys), 2):
            yield pytest.param(column, better, worse, id=f"{better}>{worse}")


@pytest.mark.parametrize(("column", "better", "worse"), list(_ranked_pairs()))
def test_the_better_ranked_attribute_wins_its_column_in_either_order(column: str, better: str, worse: str) -> None:
    convert_fn = spec.ATTRIBUTES[better][2]
    first, second = VALUES[convert_fn][0], VALUES[convert_fn][1]
    (alone,) = _same_rows(_request([(better, first)]))
    for pairs in ([(better, first), (worse, second)], [(worse, second), (better, first)]):
        (row,) = _same_rows(_request(pairs))
        assert row[column] == alone[column]


def test_every_semantic_convention_key_outside_the_table_is_kept_as_an_attribute_the_same() -> None:
    """A key of ``agentwatch.semconv`` that neither decoder maps: a mapping added to one side shows here."""
    python_rules = set(spec.PYTHON_RULE_KEYS)
    for key in gen.SEMCONV_KEYS:
        if key in spec.ATTRIBUTES:
            continue
        for value in ("x", 7, True):
            _same_rows(_request({key: value}), declined=key in python_rules)


@pytest.mark.parametrize("prefix", spec.CONTENT_PREFIXES)
def test_every_content_prefix_is_redacted_the_same(prefix: str) -> None:
    key = prefix + ("x" if prefix.endswith(".") else ".0.content")
    (row,) = _same_rows(_request({key: SECRET, "custom.key": SECRET}))  # the redacting normaliser's row
    attributes = dict(row["attributes"])
    assert "sk-" not in attributes[key] and "sk-" in attributes["custom.key"]


# --- the kind rules --------------------------------------------------------------------------------


def _signal_cases() -> Iterator[Any]:
    for signal, table in spec.KIND_RULES.signals:
        key = _key_of(signal)
        for value in [*table, "unknown"]:
            yield pytest.param(key, value, _python_rule(key, value), id=f"{key}={value}")


@pytest.mark.parametrize(("key", "value", "declined"), list(_signal_cases()))
def test_every_kind_signal_value_gives_the_same_kind(key: str, value: str, declined: bool) -> None:
    for parent in (PARENT, ""):
        for extra in ({}, {sc.GEN_AI_REQUEST_MODEL: "gpt-4o-mini"}, {sc.TOOL_NAME: "search"}):
            _same_rows(_request({key: value, **extra}, parent=parent), declined=declined)


def _precedence_cases() -> Iterator[Any]:
    """For each two signal tables, a value of each that gives another kind: the earlier table decides."""
    tables = [(_key_of(signal), table) for signal, table in spec.KIND_RULES.signals]
    for (first_key, first), (second_key, second) in itertools.permutations(tables, 2):
        for (v1, k1), (v2, k2) in itertools.product(first.items(), second.items()):
            if k1 != k2 and not _python_rule(first_key, v1) and not _python_rule(second_key, v2):
                yield pytest.param({first_key: v1, second_key: v2}, id=f"{first_key}={v1},{second_key}={v2}")
                break


@pytest.mark.parametrize("attributes", list(_precedence_cases()))
def test_the_signals_precedence_is_the_same(attributes: dict[str, str]) -> None:
    _same_rows(_request(attributes))


@pytest.mark.parametrize("declared", [*sorted(spec.KIND_RULES.declared), "bogus", sc.KIND_ENGINE])
def test_every_declared_kind_wins_over_the_signals_the_same(declared: str) -> None:
    key = _key_of(spec.KIND_RULES.declared_signal)
    for parent in (PARENT, ""):
        for signals in ({}, {sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT}, {sc.OPENINFERENCE_SPAN_KIND: "CHAIN"}):
            _same_rows(_request({key: declared, **signals}, parent=parent))


def test_the_columns_that_make_an_llm_or_a_tool_are_the_same() -> None:
    rules = spec.KIND_RULES
    columns = {*rules.llm_when, *rules.tool_when, rules.llm_signal}
    for column in sorted(columns):
        for key in [k for k, (c, _, _) in spec.ATTRIBUTES.items() if c == column]:
            for parent in (PARENT, ""):
                (row,) = _same_rows(_request({key: "v"}, parent=parent))
                assert row["kind"] == (sc.KIND_TOOL if column in rules.tool_when else sc.KIND_LLM)


def test_the_engine_span_is_declined_to_the_python_path_which_makes_it_engine() -> None:
    for column in spec.KIND_RULES.engine_when:
        for key in [k for k, (c, _, _) in spec.ATTRIBUTES.items() if c == column]:
            body = _request({key: "req-1"}, name=spec.KIND_RULES.engine_name)
            _same_rows(body, declined=True)
            assert _python(body, "plain").table["kind"].to_pylist() == [sc.KIND_ENGINE]
            _same_rows(_request({key: "req-1"}, name="not the engine"))


# --- the rules the table cannot express ------------------------------------------------------------


@pytest.mark.parametrize("key", spec.PYTHON_RULE_KEYS)
def test_every_python_rule_key_is_declined(key: str) -> None:
    _same_rows(_request({key: 0.2, sc.GEN_AI_REQUEST_MODEL: "m"}), declined=True)


@pytest.mark.parametrize("event", sorted(spec.STREAM_EVENTS))
def test_every_stream_event_is_declined(event: str) -> None:
    _same_rows(_request({sc.GEN_AI_REQUEST_MODEL: "m"}, events=((event, {}),)), declined=True)


def test_other_events_and_the_exception_type_are_the_same() -> None:
    for events in (
        (("log", {"k": 1}),),
        (("exception", {"exception.type": "ValueError", "exception.message": SECRET}),),
    ):
        _same_rows(_request({}, events=events))


def _dialect_cases() -> Iterator[Any]:
    named = spec.RUN_NAMED_BY_SPAN
    for signal in spec.DIALECT_SIGNALS:
        key = _key_of(signal)
        for others in (
            {},
            {sc.GEN_AI_AGENT_NAME: "researcher"},
            *({_key_of(s): "workflow"} for s in spec.DIALECT_SIGNALS),
        ):
            if key not in others:
                yield pytest.param({key: named, **others}, id=f"{key}+{','.join(others)}")


@pytest.mark.parametrize("attributes", list(_dialect_cases()))
def test_a_run_is_named_by_its_span_in_the_same_dialects(attributes: dict[str, str]) -> None:
    declined = any(_python_rule(k, v) for k, v in attributes.items())
    for parent in (PARENT, ""):
        _same_rows(_request(attributes, name="Agent.run", parent=parent), declined=declined)


def test_an_oi_agent_run_without_a_name_is_named_by_its_span() -> None:
    (row,) = _same_rows(_request({sc.OPENINFERENCE_SPAN_KIND: spec.RUN_NAMED_BY_SPAN}, name="Agent.run", parent=""))
    assert (row["kind"], row["agent_name"]) == (sc.KIND_RUN, "Agent.run")


@pytest.mark.parametrize("error_type", ["ReadTimeout", spec.TIMEOUT_MARKER.upper(), "ValueError", ""])
def test_the_timeout_marker_is_read_the_same(error_type: str) -> None:
    (row,) = _same_rows(_request({sc.ERROR_TYPE: error_type}))
    assert row["is_timeout"] == (spec.TIMEOUT_MARKER in error_type.lower())
    _same_rows(_request({}, events=(("exception", {"exception.type": error_type}),)))


def test_the_service_version_is_the_spans_else_its_resources_the_same() -> None:
    resource = {"service.name": "svc", sc.SERVICE_VERSION: "1.0"}
    for attributes in ({}, {sc.SERVICE_VERSION: "2.0"}):
        _same_rows(_request(attributes, resource=resource))


# --- the enums: status codes, OTLP span kinds, the time bound --------------------------------------


@pytest.mark.parametrize("code", range(-1, len(spec.STATUS_CODES) + 2))
def test_every_status_code_has_the_same_name(code: int) -> None:
    (row,) = _same_rows(_request({}, status=(code, "boom")))
    assert row["status_code"] == (spec.STATUS_CODES[code] if 0 <= code < len(spec.STATUS_CODES) else "unset")


@pytest.mark.parametrize("name", sorted(decode._STATUS_NAMES))
def test_every_json_status_name_is_read_natively_the_same(name: str) -> None:
    """``_json_wire.c`` re-encodes a JSON status name as its number: it must know every name the Python JSON path does."""
    doc = json.loads(otlp_json(_request({})))
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["status"] = {"code": name, "message": "m"}
    wire, count = native.json_wire(doc)  # NativeFallback here: a status name the C side does not know
    assert count == 1
    body = json.dumps(doc).encode()
    for which in NORMALIZERS:
        python = _python(body, which, JSON).table.to_pylist()
        assert _python(wire, which).table.to_pylist() == python
        assert _decoder(which).decode(wire, "p").table.to_pylist() == python
        assert python[0]["status_code"] == spec.STATUS_CODES[decode._STATUS_NAMES[name]]


@pytest.mark.parametrize("kind", sorted(Span.SpanKind.values()))
def test_every_otlp_span_kind_decodes_the_same(kind: int) -> None:
    _same_rows(_request({sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT}, span_kind=kind))


def test_the_time_bound_is_the_same() -> None:
    _same_rows(_request({}, end_ns=bounds.MAX_TIME_NS))
    body = _request({}, end_ns=bounds.MAX_TIME_NS + 1)
    _same_rows(body, declined=True)


# --- the contract: C reads the whole spec and keeps no table of its own ----------------------------


class _Reads:
    """A DecoderSpec that records which of its fields are read."""

    def __init__(self, wrapped: spec.DecoderSpec) -> None:
        self.wrapped, self.read = wrapped, set[str]()

    def __getattr__(self, name: str) -> Any:
        self.read.add(name)
        return getattr(self.wrapped, name)


def test_the_c_decoder_reads_every_field_of_the_spec() -> None:
    """A field C ignores is a table some other copy decides: every one must be read."""
    normalizer = NORMALIZERS["priced-redacted"]
    reads = _Reads(native.decoder_spec(normalizer, normalizer.resource))
    native.Decoder(reads)
    assert reads.read == {f.name for f in dataclasses.fields(spec.DecoderSpec)}


def _spec_strings() -> set[str]:
    """Every text value the spec's tables hold: attribute keys, signal values, kinds, names, markers."""
    rules = spec.KIND_RULES
    strings = {*spec.ATTRIBUTES, *spec.CONTENT_PREFIXES, *spec.STATUS_CODES, *spec.PYTHON_RULE_KEYS}
    strings |= {*spec.STREAM_EVENTS, spec.TIMEOUT_MARKER, spec.RUN_NAMED_BY_SPAN, *spec.SIGNALS}
    strings |= {*rules.declared, rules.engine_name, *rules.names, sc.KIND_ENGINE}
    for _signal, table in rules.signals:
        strings |= {*table, *table.values()}
    for values in spec.PYTHON_RULE_SIGNALS.values():
        strings |= values
    return strings


def _c_literals(path: Path) -> set[str]:
    source = re.sub(r"/\*.*?\*/", "", path.read_text(), flags=re.S)
    return set(re.findall(r'"((?:[^"\\\n]|\\.)*)"', source))


def test_the_c_decoder_holds_no_value_of_the_spec() -> None:
    """A value of the spec written into ``_native.c`` is a second copy of a table: it belongs in the spec."""
    source = Path(native.__file__).with_name("_native.c")
    assert not _c_literals(source) & _spec_strings()


def test_the_c_enums_are_the_ones_the_spec_is_built_over() -> None:
    """``NAMED_FIELDS``, ``CONVERTERS`` and ``COLUMN_TYPES`` come from C; each one is in use."""
    _native = native._native
    built = native.decoder_spec(NORMALIZERS["plain"], NORMALIZERS["plain"].resource)
    assert set(_native.NAMED_FIELDS) <= set(SPAN_FIELDS)
    assert built.named == tuple(SPAN_FIELDS.index(name) for name in _native.NAMED_FIELDS)
    assert set(built.column_types) == set(_native.COLUMN_TYPES.values())
    assert {conv for _slot, _rank, conv, _fn in built.attributes.values()} == set(_native.CONVERTERS.values())
    assert _native.SPEC_ABI == native.SPEC_CONTRACT
