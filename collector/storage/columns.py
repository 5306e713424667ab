"""The spans batch format from decode to insert: one Arrow table of ``SPANS_SCHEMA``.

Arrow is what chDB's ``Python()`` table function and clickhouse-connect's ``insert_arrow``
both take without a per-row conversion on their side. A decoder hands the pipeline one table
per request, and everything after it (spool replay, writer batches, deduplication) works on
columns; ``spans_table`` is the only Python loop over rows, for decoders that build ``SpanRow``s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from itertools import chain
from operator import attrgetter

import numpy as np
import pyarrow as pa

from agentwatch_platform.collector.storage.model import SpanRow

_STR = pa.string()
_MAP = pa.map_(pa.string(), pa.string())
_NS = pa.timestamp("ns")

SPAN_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(SpanRow))

_TYPES: dict[str, pa.DataType] = {
    "start_time_ns": _NS,
    "end_time_ns": _NS,
    "is_timeout": pa.bool_(),
    "tool_cache_hit": pa.bool_(),
    "input_tokens": pa.uint32(),
    "output_tokens": pa.uint32(),
    "cached_tokens": pa.uint32(),
    "cost_usd": pa.float64(),
    "ttft_s": pa.float32(),
    "tpot_s": pa.float32(),
    "queue_s": pa.float32(),
    "prefill_s": pa.float32(),
    "decode_s": pa.float32(),
    "step_index": pa.int32(),
    "attributes": _MAP,
    "resource": _MAP,
}

# Column names in the spans table (times drop their unit suffix).
COLUMN_NAMES: tuple[str, ...] = tuple(name.removesuffix("_ns") for name in SPAN_FIELDS)

SPANS_SCHEMA: pa.Schema = pa.schema(
    [(column, _TYPES.get(name, _STR)) for name, column in zip(SPAN_FIELDS, COLUMN_NAMES, strict=True)]
)
_EMPTY = SPANS_SCHEMA.empty_table()


def _map_column(values: list[dict[str, str]]) -> pa.Array:
    """Dicts as one Arrow map array, built from flat key and value lists (no per-row pairs)."""
    offsets = [0]
    total = 0
    for item in values:
        total += len(item)
        offsets.append(total)
    keys = pa.array(list(chain.from_iterable(values)), type=_STR)
    items = pa.array(list(chain.from_iterable(item.values() for item in values)), type=_STR)
    return pa.MapArray.from_arrays(pa.array(offsets, type=pa.int32()), keys, items, type=_MAP)


def _tokens_column(values: list[int]) -> pa.Array:
    """Token counts beyond UInt32 are nonsense from a client; clamp rather than fail the batch."""
    return pa.array(np.clip(np.asarray(values, dtype=np.float64), 0, 0xFFFFFFFF).astype(np.uint32))


def _column(name: str, rows: Sequence[SpanRow]) -> pa.Array:
    values = list(map(attrgetter(name), rows))
    kind = _TYPES.get(name, _STR)
    if kind is _MAP:
        return _map_column(values)
    if name.endswith("_tokens"):
        return _tokens_column(values)
    return pa.array(values, type=kind)


def spans_table(rows: Sequence[SpanRow]) -> pa.Table:
    """One ``SPANS_SCHEMA`` table of ``rows`` (one C-level pass per field)."""
    return pa.Table.from_arrays([_column(name, rows) for name in SPAN_FIELDS], schema=SPANS_SCHEMA)


def empty_spans_table() -> pa.Table:
    """A ``SPANS_SCHEMA`` table of no spans (tables are immutable: one shared instance)."""
    return _EMPTY


def table_rows(table: pa.Table) -> list[SpanRow]:
    """The ``SpanRow``s of a spans table: the inverse of ``spans_table`` (float32 columns keep their rounding)."""
    columns = [
        _values(table.column(column), _TYPES.get(name, _STR))
        for name, column in zip(SPAN_FIELDS, COLUMN_NAMES, strict=True)
    ]
    return [SpanRow(*values) for values in zip(*columns, strict=True)]


def _values(column: pa.ChunkedArray, kind: pa.DataType) -> list:
    if kind is _NS:
        return column.cast(pa.int64()).to_pylist()
    if kind is _MAP:
        return [dict(pairs or ()) for pairs in column.to_pylist()]
    return column.to_pylist()
