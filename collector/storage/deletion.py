"""Deleting data: a trace, a user's or a session's runs, the runs of a time range, a whole project.

What a deletion takes is whole traces (a run is never left half-deleted): every trace with a span
of the user, the session, or starting in the range. Their spans, ``runs_agg`` rows, feedback and
captured texts go; the rollups that mix them with other traces (``span_minutes``, ``span_hours``,
``run_minutes``, ``closed_run_minutes``) are rebuilt from the remaining spans for every hour the
traces touched, so every total drops by exactly what was deleted. Alerts opened for the deleted
user or session go with their deliveries. Each deletion is recorded in ``audit_log``
(``data.delete``: who, what, how many spans and how much cost), never with the deleted content.

Crash safety: the deletion is planned first (the trace ids and hours, read while the spans are
still there) and the plan is written to a journal (``<data dir>/deletions/<id>.json``: written
to a new file, fsynced, renamed) before anything is removed. Every step is idempotent, so a
collector killed half way replays the plan at its next start (``replay``) and the result is the
same as if it had run through; the journal entry is removed last, after the audit row.

Span inserts wait while a deletion runs (``SqlStore.writes_paused``): a rollup hour is rebuilt
from the spans with no insert racing it. Spans of the deleted data that were still on their way
(in the collector's queue or spool) are kept out by a tombstone for an hour
(``collector.storage.tombstones``); spans that start after the deletion are new data.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import time
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agentwatch_platform.collector.errors import CollectorError
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.sql import closes as closes_sql
from agentwatch_platform.collector.storage.sql import delete as delete_sql
from agentwatch_platform.collector.storage.sql import span_keys as span_keys_sql
from agentwatch_platform.collector.storage.texts import FAULT_ENV as TEXTS_FAULT_ENV
from agentwatch_platform.collector.storage.tombstones import TOMBSTONE_S, Tombstone

log = logging.getLogger(__name__)

KINDS = (*delete_sql.DELETION_KINDS, "project")
AUDIT_ACTION = "data.delete"
# Trace ids per statement: a ClickHouse server takes bound values in the URL (1 MiB by default).
CHUNK = 5000
_DAY_S = 86_400
# Fault injection for the crash tests: the process kills itself (SIGKILL) at the named point.
FAULT_ENV = TEXTS_FAULT_ENV


class DeletionError(CollectorError, ValueError):
    """A deletion request that names nothing, or too much, to delete."""


@dataclass(frozen=True)
class Scope:
    """What to delete in ``project``: one trace, a user's or a session's traces, a range's, or everything."""

    project: str
    kind: str
    value: str = ""
    start: float | None = None  # epoch seconds, for ``range``
    end: float | None = None

    def __post_init__(self) -> None:
        if not self.project:
            raise DeletionError("name the project to delete from")
        if self.kind not in KINDS:
            raise DeletionError(f"unknown deletion kind {self.kind!r}; expected one of {', '.join(KINDS)}")
        if self.kind in ("trace", "user", "session") and not self.value:
            raise DeletionError(f"name the {self.kind} to delete")
        if self.kind == "range" and (self.start is None or self.end is None or self.end <= self.start):
            raise DeletionError("a time range needs a start before its end")

    @property
    def target(self) -> str:
        """What the audit log names: the kind and its value (a range as epoch seconds)."""
        if self.kind == "range":
            return f"range:{self.start:.3f}-{self.end:.3f}"
        return f"{self.kind}:{self.value}" if self.value else self.kind

    def params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"project": self.project, "value": self.value}
        if self.kind == "range":
            params |= {"start_ns": int((self.start or 0) * 1e9), "end_ns": int((self.end or 0) * 1e9)}
        return params


@dataclass
class Plan:
    """A deletion resolved against the store: what the journal holds and a replay carries out."""

    id: str
    scope: Scope
    actor: str
    requested_at: float
    traces: list[str] = field(default_factory=list)  # empty for a project: every trace of it
    hours: list[int] = field(default_factory=list)  # UTC hours (epoch s) the traces have spans in
    spans: int = 0
    cost_usd: float = 0.0

    def as_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Plan:
        data = json.loads(text)
        return cls(**{**data, "scope": Scope(**data["scope"])})


@dataclass(frozen=True)
class DeletionResult:
    id: str
    project: str
    target: str
    traces: int
    spans: int
    cost_usd: float
    texts_removed: int
    trace_ids: list[str]


# --- the journal ---------------------------------------------------------------------------------
class DeletionJournal:
    """Plans not carried out to the end, one file each under ``directory``."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    def write(self, plan: Plan) -> None:
        """Durably, before anything is removed: a new file, fsynced, renamed, the directory fsynced."""
        self.directory.mkdir(parents=True, exist_ok=True)
        final = self.directory / f"{plan.id}.json"
        temporary = final.with_suffix(".tmp")
        with open(temporary, "w", encoding="utf-8") as file:
            file.write(plan.as_json())
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, final)
        _fsync_directory(self.directory)

    def pending(self) -> list[Plan]:
        """Plans written and not done, oldest first; an unreadable entry is logged and kept."""
        plans = []
        for path in sorted(self.directory.glob("*.json"), key=lambda p: p.stat().st_mtime):
            try:
                plans.append(Plan.from_json(path.read_text(encoding="utf-8")))
            except (OSError, ValueError, TypeError, KeyError) as exc:
                log.error("deletion journal: cannot read %s (%s); it is left for an operator", path, exc)
        return plans

    def done(self, plan_id: str) -> None:
        (self.directory / f"{plan_id}.json").unlink(missing_ok=True)
        _fsync_directory(self.directory)


def journal_for(data_dir: str | Path) -> DeletionJournal:
    return DeletionJournal(Path(data_dir) / "deletions")


# --- planning and carrying out -------------------------------------------------------------------
def delete_data(store: Store, scope: Scope, *, actor: str, journal: DeletionJournal) -> DeletionResult:
    """Plan ``scope``, journal the plan, carry it out; the figures of what was deleted."""
    plan = plan_deletion(store, scope, actor=actor)
    journal.write(plan)
    return carry_out(store, plan, journal)


def plan_deletion(store: Store, scope: Scope, *, actor: str, now: float | None = None) -> Plan:
    """Which traces and hours ``scope`` takes, with their spans and cost, read before anything goes."""
    plan = Plan(uuid.uuid4().hex, scope, actor, time.time() if now is None else now)
    if scope.kind == "project":
        _add_figures(plan, store.query(delete_sql.PROJECT_FIGURES, {"project": scope.project}))
        return plan
    plan.traces = sorted(r["trace_id"] for r in store.query(delete_sql.traces_of(scope.kind), scope.params()))
    if scope.kind == "trace" and scope.value not in plan.traces:
        plan.traces.append(scope.value)  # feedback on a trace without spans goes too
    for chunk in _chunks(plan.traces):
        _add_figures(plan, store.query(delete_sql.TRACE_FIGURES, {"project": scope.project, "traces": chunk}))
    plan.hours = sorted(set(plan.hours))
    return plan


def _add_figures(plan: Plan, rows: list[dict[str, Any]]) -> None:
    if rows:
        plan.spans += int(rows[0]["spans"] or 0)
        plan.cost_usd += float(rows[0]["cost_usd"] or 0.0)
        plan.hours.extend(int(h) for h in rows[0]["hours"] or ())


def carry_out(store: Store, plan: Plan, journal: DeletionJournal) -> DeletionResult:
    """Remove what ``plan`` names (again, after a crash: every step is idempotent), audit, close the journal entry."""
    scope = plan.scope
    with _writes_paused(store):
        _leave_tombstone(store, plan)
        _fault("planned")
        if scope.kind == "project":
            for table in delete_sql.PROJECT_TABLES:
                store.command(delete_sql.delete_project(table), {"project": scope.project})
        else:
            _delete_traces(store, plan)
        _fault("rows_deleted")
        if scope.kind != "project":
            _rebuild_hours(store, scope.project, plan.hours)
        _fault("rollups_rebuilt")
        texts = _remove_texts(store, plan)
    _fault("texts_removed")
    _audit_once(store, plan, texts)
    journal.done(plan.id)
    return DeletionResult(
        id=plan.id,
        project=scope.project,
        target=scope.target,
        traces=len(plan.traces) if scope.kind != "project" else 0,
        spans=plan.spans,
        cost_usd=plan.cost_usd,
        texts_removed=texts,
        trace_ids=plan.traces,
    )


def replay(store: Store, journal: DeletionJournal) -> list[DeletionResult]:
    """Carry out the plans a crash interrupted (at start, before spans are inserted)."""
    results = []
    for plan in journal.pending():
        log.warning("deletion %s (%s) was interrupted; carrying it out now", plan.id, plan.scope.target)
        results.append(carry_out(store, plan, journal))
    return results


def _leave_tombstone(store: Store, plan: Plan) -> None:
    """Spans of what ``plan`` deletes that are still on their way are not stored (``collector.storage.tombstones``)."""
    tombstones = getattr(store, "tombstones", None)
    if tombstones is None:
        return
    scope, before_ns = plan.scope, int(plan.requested_at * 1e9)
    column = {"user": "user_id", "session": "session_id", "project": "*"}.get(scope.kind, "")
    in_range = (int((scope.start or 0) * 1e9), int((scope.end or 0) * 1e9)) if scope.kind == "range" else None
    tombstones.add(
        Tombstone(
            scope.project,
            frozenset(plan.traces),
            column,
            scope.value,
            before_ns,
            in_range,
            time.monotonic() + TOMBSTONE_S,
        )
    )


def _delete_traces(store: Store, plan: Plan) -> None:
    scope = plan.scope
    for chunk in _chunks(plan.traces):
        params = {"project": scope.project, "traces": chunk}
        for statement in (delete_sql.DELETE_FEEDBACK, delete_sql.DELETE_RUNS, delete_sql.DELETE_SPANS):
            store.command(statement, params)
        _refresh_lease(store)
    if scope.kind in ("user", "session"):
        params = {"project": scope.project, "scope_key": scope.kind, "value": scope.value}
        store.command(delete_sql.DELETE_SCOPED_DELIVERIES, params)
        store.command(delete_sql.DELETE_SCOPED_ALERTS, params)


def _rebuild_hours(store: Store, project: str, hours: list[int]) -> None:
    """The rollups of ``hours`` from the spans and runs left; closed minutes recomputed under the closer's mark."""
    if not hours:
        return
    for chunk in _chunks(hours, size=24 * 31):  # a month of hours a statement
        params = {"project": project, "hours": chunk}
        for statement in (
            delete_sql.DROP_HOURS,
            delete_sql.DROP_MINUTES,
            delete_sql.REBUILD_MINUTES,
            *span_keys_sql.DROP_HOURS,
            span_keys_sql.REBUILD_HOURS,
            delete_sql.DROP_RUN_MINUTES,
        ):
            store.command(statement, params)
        store.command(delete_sql.REBUILD_RUN_MINUTES, params)
        _refresh_lease(store)
    closed_to = int(store.query(closes_sql.CLOSED_TO)[0]["closed_to"] or 0)
    if closed_to:  # the closer has run: its rows of these minutes would still count the deleted runs
        for day in _by_day(hours):
            minutes = [hour + 60 * m for hour in day for m in range(60)]
            store.command(closes_sql.CLOSE_MINUTES, {"project": project, "minutes": minutes, "closed_to": closed_to})


def _remove_texts(store: Store, plan: Plan) -> int:
    """The deleted traces' captured texts out of the store's text files (an embedded store's)."""
    texts = getattr(store, "texts", None)
    if texts is None:
        return 0  # a server keeps texts in the spans' own columns: gone with the spans
    scope = plan.scope
    if scope.kind == "project":
        return int(texts.remove(scope.project, None, None))
    days = sorted({hour // _DAY_S for hour in plan.hours})
    return int(texts.remove(scope.project, set(plan.traces), days))


def _audit_once(store: Store, plan: Plan, texts: int) -> None:
    """One ``data.delete`` row per deletion, however many times it was replayed."""
    marker = f'"deletion":"{plan.id}"'
    if int(
        store.query(delete_sql.AUDITED, {"project": plan.scope.project, "action": AUDIT_ACTION, "marker": marker})[0][
            "n"
        ]
    ):
        return
    detail = {
        "deletion": plan.id,
        "traces": len(plan.traces),
        "spans": plan.spans,
        "cost_usd": round(plan.cost_usd, 9),
        "texts": texts,
        "requested_at": plan.requested_at,
    }
    from agentwatch_platform.collector.storage.sql.admin import INSERT_AUDIT

    store.command(
        INSERT_AUDIT,
        {
            "project": plan.scope.project,
            "at_ms": int(time.time() * 1000),
            "actor": plan.actor,
            "action": AUDIT_ACTION,
            "target": plan.scope.target,
            "detail": json.dumps(detail, separators=(",", ":")),
        },
    )


def _writes_paused(store: Store) -> AbstractContextManager[None]:
    paused = getattr(store, "writes_paused", None)
    return paused() if paused is not None else nullcontext()


def _refresh_lease(store: Store) -> None:
    lock = getattr(store, "write_lock", None)
    if lock is not None:
        lock.refresh()


def _chunks(values: list[Any], *, size: int = CHUNK) -> Iterator[list[Any]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


def _by_day(hours: list[int]) -> Iterator[list[int]]:
    day: list[int] = []
    for hour in sorted(hours):
        if day and hour // _DAY_S != day[0] // _DAY_S:
            yield day
            day = []
        day.append(hour)
    if day:
        yield day


def _fault(point: str) -> None:
    """Where the crash tests stop the process: ``AGENTWATCH_FAULT_KILL_AT=<point>`` (never set in production)."""
    if os.environ.get(FAULT_ENV) == point:
        os.kill(os.getpid(), signal.SIGKILL)


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
