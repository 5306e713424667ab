"""SpanRow lists to one columnar Arrow table: the batch format both back ends insert.

Arrow is what chDB's ``Python()`` table function and clickhouse-connect's ``insert_arrow``
both take without a per-row conversion on their side, so the only Python loop is here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from itertools import chain
from operator import attrgetter

import numpy as np
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


def _map_column(values: list[dict[str, str]]) -> pa.Array:
    """Dicts as one Arrow map array, built from flat key and value lists (no per-row pairs)."""
    offsets = [0]
    total = 0
    for item in values:
        total += len(item)
        offsets.append(total)
    keys = pa.array(list(chain.from_iterable(values)), type=_STR)
    items = pa.array(list(chain.from_iterable(item.values() for item in values)), type=_STR)
    return pa.MapArray.from_arrays(pa.array(offsets, type=pa.int32()), keys, items)


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
    """One Arrow table with the spans table's columns, in its order (one C-level pass per field)."""
    arrays = [_column(name, rows) for name in SPAN_FIELDS]
    return pa.Table.from_arrays(arrays, names=list(COLUMN_NAMES))
