"""Fragments every resource's statements share: a project's run hours and span range, the WHERE of the filters given.

Values are always bound by ClickHouse (``{name:Type}`` placeholders), never formatted into
SQL; the only text spliced into a statement is an identifier picked from a whitelist. Times
travel as epoch seconds (``Float64``) or nanoseconds (``Int64``) and come back as epoch seconds,
so neither back end has to agree with Python on time zones.
"""

from __future__ import annotations

RUN_HOURS = """project = {project:String}
      AND hour >= toStartOfHour(fromUnixTimestamp64Nano({start_ns:Int64}))
      AND hour < fromUnixTimestamp64Nano({end_ns:Int64}) + INTERVAL 1 DAY"""


def where(fragments: dict[str, str], params: dict[str, object]) -> str:
    """``AND``-joined fragments for the filters that have a value (fragments are constants)."""
    parts = [sql for name, sql in fragments.items() if params.get(name) is not None]
    return " AND ".join(parts) if parts else "1"


SPAN_RANGE = """project = {project:String}
    AND start_time >= fromUnixTimestamp64Nano({start_ns:Int64})
    AND start_time < fromUnixTimestamp64Nano({end_ns:Int64})"""
