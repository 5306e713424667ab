"""SpanRow lists to one columnar Arrow table: the batch format both back ends insert.

Arrow is what chDB's ``Python()`` table function and clickhouse-connect's ``insert_arrow``
both take without a per-row conversion on their side, so the only Python loop is here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import fields
from operator import attrgetter

import pyarrow as pa

from collector.model import SpanRow

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


def _clamp_tokens(values: Iterable[int]) -> list[int]:
    """Token counts beyond UInt32 are nonsense from a client; clamp rather than fail the batch."""
    return [min(max(int(v), 0), 0xFFFFFFFF) for v in values]


def _column(name: str, values: tuple) -> pa.Array:
    kind = _TYPES.get(name, _STR)
    if kind is _MAP:
        return pa.array([list(v.items()) for v in values], type=_MAP)
    if name.endswith("_tokens"):
        return pa.array(_clamp_tokens(values), type=kind)
    return pa.array(values, type=kind)


def spans_table(rows: Sequence[SpanRow]) -> pa.Table:
    """One Arrow table with the spans table's columns, in its order."""
    columns = zip(*map(attrgetter(*SPAN_FIELDS), rows), strict=True) if rows else [()] * len(SPAN_FIELDS)
    arrays = [_column(name, values) for name, values in zip(SPAN_FIELDS, columns, strict=True)]
    return pa.Table.from_arrays(arrays, names=list(COLUMN_NAMES))
