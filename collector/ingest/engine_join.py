"""One LLM call counts once: the engine's record of a call joins the client's.

An inference engine that traces (vLLM's ``llm_request`` span, the simulated engine's too) and
an instrumented client both record the same call. The normaliser makes the engine's record
kind ``engine``: never a run, never billed (``schema.BILLABLE``). What it knows that the client
does not (queue, prefill and decode time, TTFT, cached tokens) is joined into the client's LLM
span here, and a call no client recorded is billed once, by a row of its own. The join key, in
order of precedence:

1. trace context: the engine span's parent is the client's LLM span (``traceparent`` sent);
2. the id both sides record: the engine's ``gen_ai.request.id`` is the id of the response the
   client receives (``gen_ai.response.id``); both land in the ``request_id`` column;
3. otherwise the same model and token counts, the engine span inside the client span's time.

Two halves, because the two records arrive in either order, seconds apart:

- ``prepare`` (every batch, before insert). An engine span whose client span is already stored
  moves into the client's trace, under it (its own ids kept as ``agentwatch.engine.trace_id`` and
  ``agentwatch.engine.parent_span_id``), and counts what the client missed: cached tokens the
  client did not record (with the price difference they make, in its cost column) and its TTFT
  when the client had none (``agentwatch.ttft.counted``). Otherwise its facts are remembered and
  copied into the client LLM span when it arrives (an engine TTFT fills a missing client TTFT,
  marked ``agentwatch.ttft.source = engine``; cached tokens re-price the call). The engine span's
  own tokens and price stay in its ``agentwatch.engine.*`` attributes (``normalize``).
- ``reconcile`` (every few seconds, from the store, so it survives restarts and sees spans from
  any collector): an engine span still without a client LLM span ``wait_s`` after it ended is an
  engine-only call; it gets one kind-``llm`` row (``agentwatch.engine.only = true``) under the
  engine span, with the engine's tokens, cost and latencies, so totals, the TTFT quantiles and the
  engine views count it once. Its span id derives from the engine span's, so a repeat is deduplicated.
  A client span that arrives later than ``wait_s`` would count the call a second time: the wait
  (``AGENTWATCH_ENGINE_JOIN_WAIT_S``) should exceed the client's export delay.

An engine shared by projects exports with one project's key while its callers' spans are in
theirs. By trace context or request id (never by usage alone) both halves also look in the other
projects: a call is billed once, in its client's project (``_join_elsewhere``: the engine row stays
home marked ``BILLED_IN``, a copy joins the client's span), and the billing pass bills the engine's
project only for calls no project's client recorded.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from agentwatch import semconv as sc

from agentwatch_platform.collector.ingest.hooks import Batch, InsertHook
from agentwatch_platform.collector.ingest.normalize import ENGINE_PREFIX
from agentwatch_platform.collector.storage.base import Store, StoreError
from agentwatch_platform.collector.storage.model import SpanRow
from agentwatch_platform.collector.storage.sql import ingest as ingest_sql

log = logging.getLogger(__name__)

ENGINE_ONLY = "agentwatch.engine.only"
ENGINE_SPAN = "agentwatch.engine.span_id"
ENGINE_TRACE = "agentwatch.engine.trace_id"
ENGINE_PARENT = "agentwatch.engine.parent_span_id"
CLIENT_SPAN = "agentwatch.engine.client_span_id"
BILLED_IN = "agentwatch.engine.billed_in"  # on an engine row whose call another project's client recorded
ENGINE_PROJECT = "agentwatch.engine.project"  # on a call's rows: the project the engine exports to
TTFT_SOURCE = "agentwatch.ttft.source"
TTFT_COUNTED = "agentwatch.ttft.counted"
_TIMINGS = ("ttft_s", "tpot_s", "queue_s", "prefill_s", "decode_s")
_SLACK_NS = 1_000_000_000  # clocks of client and engine differ: 1 s either side of the client span
# Matching by model and token counts alone: identical prompts are common, so the engine span must
# lie inside the client span but for a quarter second (client and engine on synchronised clocks).
_USAGE_SLACK_NS = 250_000_000
_MAX_FACTS = 100_000
_FACT_TTL_S = 600.0
# Another project's client span starts at most this before its engine span: the whole installation's
# LLM spans of the window are read, at every batch (prepare) or at every pass (reconcile, wider).
_ELSEWHERE_BEFORE_NS = 120 * 10**9
_RECONCILE_ELSEWHERE_BEFORE_NS = 900 * 10**9
_ELSEWHERE_AFTER_NS = 60 * 10**9
_LOOKBACK_S = 3600.0  # at start, engine spans this old are checked again
_MAX_PER_PASS = 5000

Pricer = Callable[[str, str, int, int, int], "tuple[float, str] | None"]


@dataclass(slots=True)
class _Fact:
    """What an engine span knows about its call."""

    project: str
    trace_id: str
    span_id: str
    parent_span_id: str
    request_id: str
    model: str
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    start_ns: int
    end_ns: int
    timings: dict[str, float | None]
    seen: float

    @property
    def usage_key(self) -> tuple[str, str, int, int]:
        return (self.project, self.model, self.input_tokens, self.output_tokens)


class EngineJoin:
    """Shared by the writer's flushes (``prepare``) and its reconcile passes; thread-safe."""

    def __init__(
        self, *, wait_s: float = 30.0, pricer: Pricer | None = None, clock: Callable[[], float] = time.time
    ) -> None:
        self.wait_s = wait_s
        self._pricer = pricer
        self._clock = clock
        self._lock = threading.Lock()
        self._facts: OrderedDict[tuple[str, str], _Fact] = OrderedDict()  # (project, span id), oldest first
        # By request id and by parent span id alone: a client span of any project may claim a fact.
        self._by_request: dict[str, _Fact] = {}
        self._by_parent: dict[str, _Fact] = {}
        self._by_usage: dict[tuple[str, str, int, int], list[_Fact]] = {}
        self._started = clock()
        self._watermark_ns = int((self._started - _LOOKBACK_S) * 1e9)
        self._next_pass = self._started + wait_s
        self.billed = 0

    # --- prepare: engine facts into client LLM spans --------------------------------------------

    def prepare(self, table: pa.Table, store: Store | None = None) -> pa.Table:
        """The batch with engine spans joined to stored client spans, and engine facts copied
        into the batch's client LLM spans they belong to."""
        if not table.num_rows:
            return table
        engine = pc.equal(table.column("kind"), sc.KIND_ENGINE)
        if pc.any(engine).as_py():
            rows = _rows(table.filter(engine))
            waiting, copies = self._join_stored(store, rows) if store is not None else (rows, [])
            self._remember(waiting)
            rows.extend(copies)
            table = pa.concat_tables([table.filter(pc.invert(engine)), pa.Table.from_pylist(rows, schema=table.schema)])
        kinds = table.column("kind")
        with self._lock:
            if not self._facts:
                return table
            mask = self._candidates(table, pc.equal(kinds, sc.KIND_LLM))
        if not pc.any(mask).as_py():
            return table
        rows = _rows(table.filter(mask))
        for row in rows:
            self._enrich(row)
        return pa.concat_tables([table.filter(pc.invert(mask)), pa.Table.from_pylist(rows, schema=table.schema)])

    def _join_stored(
        self, store: Store, rows: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Join engine rows to client LLM spans already stored, in their project or another's;
        returns the rows still waiting and the copies that join other projects' calls."""
        waiting = []
        for project, group in _by_project(rows).items():
            try:
                clients = store.query(ingest_sql.CLIENT_LLM_SPANS_OF_ENGINE_ROWS, _stored_params(project, group))
            except StoreError as exc:  # the reconcile pass still counts the call once
                log.warning("engine join: looking up client spans failed: %s", exc)
                waiting.extend(group)
                continue
            by_parent = {c["span_id"]: c for c in clients}
            by_request = {c["request_id"]: c for c in clients if c["request_id"]}
            unnamed = [c for c in clients if not c["request_id"]]  # OpenInference: no response id
            for row in group:
                client = by_parent.get(row["parent_span_id"]) or (
                    by_request.get(row["request_id"]) if row["request_id"] else None
                )
                client = client or _by_usage_and_time(row, unnamed)
                if client is None:
                    waiting.append(row)
                else:
                    if client in unnamed:
                        unnamed.remove(client)
                    self._join_to(row, client)
        return self._join_elsewhere(store, waiting)

    def _join_elsewhere(
        self, store: Store, rows: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Engine rows whose call a client of another project recorded (an engine shared by projects):
        the call is billed there. The engine's row stays in its project, marked ``BILLED_IN``, and
        a copy joins the client's span in the client's project (what the engine adds to the call,
        its timings). Both rows' keys derive from the engine span's: a redelivery changes nothing."""
        waiting = [r for r in rows if not (r["parent_span_id"] or r["request_id"])]
        copies = []
        for project, group in _by_project([r for r in rows if r["parent_span_id"] or r["request_id"]]).items():
            try:
                clients = _clients_elsewhere(store, _elsewhere_params(project, group))
            except StoreError as exc:  # the reconcile pass still counts the call once
                log.warning("engine join: looking up other projects' client spans failed: %s", exc)
                waiting.extend(group)
                continue
            by_parent = {(c["trace_id"], c["span_id"]): c for c in clients}
            by_request = {c["request_id"]: c for c in clients if c["request_id"]}
            for row in group:
                client = by_parent.get((row["trace_id"], row["parent_span_id"])) or (
                    None if row["parent_span_id"] else by_request.get(row["request_id"])
                )
                if client is None:
                    waiting.append(row)
                else:
                    copies.append(self._claimed_elsewhere(row, client))
        return waiting, copies

    def _claimed_elsewhere(self, row: dict[str, Any], client: dict[str, Any]) -> dict[str, Any]:
        """Mark the engine row billed in the client's project; return its copy under the client span."""
        copy = dict(row, project=client["project"])
        self._join_to(copy, client)
        copy["attributes"] = [*copy["attributes"], (ENGINE_PROJECT, row["project"])]
        attributes = dict(row["attributes"] or [])
        attributes[CLIENT_SPAN], attributes[BILLED_IN] = client["span_id"], client["project"]
        row["attributes"] = list(attributes.items())
        return copy

    def _join_to(self, row: dict[str, Any], client: dict[str, Any]) -> None:
        """An engine row under its stored client span, counting what the client missed."""
        attributes = dict(row["attributes"] or [])
        if row["trace_id"] != client["trace_id"] or row["parent_span_id"] != client["span_id"]:
            attributes[ENGINE_TRACE], attributes[ENGINE_PARENT] = row["trace_id"], row["parent_span_id"]
            row["trace_id"], row["parent_span_id"] = client["trace_id"], client["span_id"]
        attributes[CLIENT_SPAN] = client["span_id"]
        if client["no_ttft"] and row["ttft_s"] is not None:
            attributes[TTFT_COUNTED] = "true"
        cached = _int(attributes.get(ENGINE_PREFIX + "cached_tokens"))
        if cached and not client["cached_tokens"]:
            row["cached_tokens"] = cached
            priced = self._price(
                client["model"], client["provider"], client["input_tokens"], client["output_tokens"], cached
            )
            if priced is not None and client["cost_usd"] > 0:
                row["cost_usd"] = priced[0] - client["cost_usd"]  # the discount the cached tokens make
        row["attributes"] = list(attributes.items())

    def _remember(self, rows: list[dict[str, Any]]) -> None:
        now = time.monotonic()
        with self._lock:
            for row in rows:
                fact = _fact(row, now)
                if (fact.project, fact.span_id) in self._facts:
                    continue  # a redelivery
                self._facts[(fact.project, fact.span_id)] = fact
                if fact.parent_span_id:
                    self._by_parent[fact.parent_span_id] = fact
                if fact.request_id:
                    self._by_request[fact.request_id] = fact
                if fact.model and fact.input_tokens:
                    self._by_usage.setdefault(fact.usage_key, []).append(fact)
            self._expire(now)

    def forget(self, project: str, trace_ids: list[str] | None) -> None:
        """Engine facts of deleted traces (``None``: of the whole project) are dropped, never joined later."""
        traces = None if trace_ids is None else set(trace_ids)
        with self._lock:
            for fact in [f for f in self._facts.values() if f.project == project]:
                if traces is None or fact.trace_id in traces:
                    self._forget(fact)

    def _expire(self, now: float) -> None:
        while self._facts:
            fact = next(iter(self._facts.values()))
            if len(self._facts) <= _MAX_FACTS and fact.seen >= now - _FACT_TTL_S:
                return
            self._forget(fact)

    def _candidates(self, table: pa.Table, llm: pa.Array) -> pa.Array:
        """LLM rows that may have an engine fact waiting (checked exactly in ``_enrich``)."""
        wanted = pc.is_in(table.column("request_id"), value_set=pa.array(list(self._by_request), pa.string()))
        wanted = pc.or_(
            wanted, pc.is_in(table.column("span_id"), value_set=pa.array(list(self._by_parent), pa.string()))
        )
        if self._by_usage:
            models = pa.array(sorted({k[1] for k in self._by_usage}), pa.string())
            wanted = pc.or_(wanted, pc.is_in(table.column("model"), value_set=models))
        return pc.fill_null(pc.and_(llm, wanted), False)

    def _enrich(self, row: dict[str, Any]) -> None:
        fact = self._claim(row)
        if fact is None:
            return
        attributes = dict(row["attributes"] or [])
        for name in _TIMINGS:
            if row[name] is None and fact.timings.get(name) is not None:
                row[name] = fact.timings[name]
                if name == "ttft_s":
                    attributes[TTFT_SOURCE] = "engine"
        if not row["cached_tokens"] and fact.cached_tokens:
            row["cached_tokens"] = fact.cached_tokens
            self._reprice(row)
        attributes[ENGINE_SPAN] = fact.span_id
        if fact.project != row["project"]:  # an engine shared by projects: the call is billed here
            attributes[ENGINE_PROJECT] = fact.project
        if fact.trace_id != row["trace_id"]:
            attributes[ENGINE_TRACE] = fact.trace_id
        row["attributes"] = list(attributes.items())

    def _claim(self, row: dict[str, Any]) -> _Fact | None:
        """The engine fact of this client span (removed from every index), or None. By trace
        context or request id the fact may be another project's (an engine shared by projects)."""
        with self._lock:
            fact = self._by_parent.get(row["span_id"])
            if fact is None and row["request_id"]:
                fact = self._by_request.get(row["request_id"])
            if fact is None and not row["request_id"]:
                fact = self._by_usage_match(row)
            if fact is not None:
                self._forget(fact)
            return fact

    def _by_usage_match(self, row: dict[str, Any]) -> _Fact | None:
        facts = self._by_usage.get((row["project"], row["model"], row["input_tokens"], row["output_tokens"])) or []
        start, end = _ns(row["start_time"]), _ns(row["end_time"])
        return next((f for f in facts if _inside(f.start_ns, f.end_ns, start, end, _USAGE_SLACK_NS)), None)

    def _forget(self, fact: _Fact) -> None:
        self._facts.pop((fact.project, fact.span_id), None)
        if self._by_parent.get(fact.parent_span_id) is fact:
            del self._by_parent[fact.parent_span_id]
        if self._by_request.get(fact.request_id) is fact:
            del self._by_request[fact.request_id]
        facts = self._by_usage.get(fact.usage_key)
        if facts is not None and fact in facts:
            facts.remove(fact)
            if not facts:
                del self._by_usage[fact.usage_key]

    def _reprice(self, row: dict[str, Any]) -> None:
        priced = self._price(
            row["model"], row["provider"], row["input_tokens"], row["output_tokens"], row["cached_tokens"]
        )
        if priced is not None:
            row["cost_usd"], row["price_version"] = priced

    def _price(self, model: str, provider: str, inp: int, out: int, cached: int) -> tuple[float, str] | None:
        if self._pricer is None or not model:
            return None
        try:
            return self._pricer(model, provider, inp, out, cached)
        except Exception:  # a price table bug must not lose the span
            log.exception("engine join: pricing failed for model %r", model)
            return None

    # --- reconcile: engine-only calls billed once -----------------------------------------------

    def due(self) -> float:
        """Seconds until the next reconcile pass (0: now)."""
        return max(0.0, self._next_pass - self._clock())

    def postpone(self) -> None:
        """Skip this pass (another collector holds the billing role); ask again a pass later."""
        self._next_pass = self._clock() + max(1.0, self.wait_s / 4)

    def reconcile(self, store: Store) -> int:
        """Bill the engine spans that no client LLM span joined within ``wait_s``; returns how many."""
        now = self._clock()
        self._next_pass = now + max(1.0, self.wait_s / 4)
        until_ns = int((now - self.wait_s) * 1e9)
        if until_ns <= self._watermark_ns:
            return 0
        try:
            engine = store.query(
                ingest_sql.ENGINE_SPANS_ENDED,
                {"since_ns": self._watermark_ns, "until_ns": until_ns, "limit": _MAX_PER_PASS},
            )
            bills = [_bill(e) for e in self._unmatched(store, engine)]
            if bills:
                store.insert_spans(bills)
        except StoreError as exc:
            log.warning("engine join: reconcile pass failed (%s); retried next pass", exc)
            return 0
        if len(engine) < _MAX_PER_PASS:
            self._watermark_ns = until_ns
        else:  # more than one pass can take: resume after the last one seen
            self._watermark_ns = max(_ns(e["end_time"]) for e in engine)
        self.billed += len(bills)
        return len(bills)

    def _unmatched(self, store: Store, engine: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The engine spans no client LLM span accounts for: first in their own project, then, by
        trace context or request id, in any other (an engine shared by projects)."""
        left = []
        for project, spans in _by_project(engine).items():
            clients = store.query(ingest_sql.CLIENT_LLM_SPANS_FOR_ENGINE, _client_params(project, spans))
            spans = match_engine_spans(spans, clients)
            if spans:
                params = _client_params(project, spans) | _elsewhere_window(spans, _RECONCILE_ELSEWHERE_BEFORE_NS)
                clients = store.query(ingest_sql.CLIENT_LLM_SPANS_ELSEWHERE_FOR_ENGINE, params)
                spans = match_engine_spans(spans, clients, rules=_BY_ID)
            left.extend(spans)
        return left


_Rule = Callable[[dict[str, Any], dict[str, Any]], bool]
# Which client span accounts for an engine span, in order. The first three name the call (the
# engine span id the client recorded, trace context, request id) and hold across projects.
_BY_ID: tuple[_Rule, ...] = (
    lambda e, c: c["engine_span_id"] == e["span_id"],
    lambda e, c: bool(e["parent_span_id"]) and c["trace_id"] == e["trace_id"] and c["span_id"] == e["parent_span_id"],
    lambda e, c: bool(e["request_id"]) and c["request_id"] == e["request_id"],
)
_RULES: tuple[_Rule, ...] = (
    *_BY_ID,
    lambda e, c: (
        c["trace_id"] == e["trace_id"]
        and _inside(_ns(e["start_time"]), _ns(e["end_time"]), _ns(c["start_time"]), _ns(c["end_time"]))
    ),
    lambda e, c: (
        (c["model"], c["input_tokens"], c["output_tokens"]) == (e["model"], e["input_tokens"], e["output_tokens"])
        and not c["request_id"]
        and _inside(_ns(e["start_time"]), _ns(e["end_time"]), _ns(c["start_time"]), _ns(c["end_time"]), _USAGE_SLACK_NS)
    ),
)


class EngineJoinHook(InsertHook):
    """The writer's hook: each batch joined before its insert, engine-only calls billed between
    batches (``may_bill``: whether this collector holds the engine-join role, ``collector.roles``)."""

    def __init__(self, join: EngineJoin, store: Callable[[], Store], *, may_bill: Callable[[], bool] | None = None):
        self.join = join
        self._store = store
        self._may_bill = may_bill

    def before_insert(self, batch: Batch) -> pa.Table:
        """The store may be away: the batch is joined to what this collector remembers."""
        try:
            store = self._store()
        except StoreError:
            store = None
        return self.join.prepare(batch.table, store)

    def due(self) -> float:
        return self.join.due()

    def when_idle(self) -> None:
        """Bill engine-only calls; a failure waits for the next pass."""
        if self._may_bill is not None and not self._may_bill():
            self.join.postpone()  # another collector bills engine-only calls
            return
        try:
            self.join.reconcile(self._store())
        except StoreError as exc:
            log.warning("writer: engine join pass skipped: %s", exc)

    def forget(self, project: str, trace_ids: list[str] | None) -> None:
        self.join.forget(project, trace_ids)


def match_engine_spans(
    engine: list[dict[str, Any]], clients: list[dict[str, Any]], *, rules: tuple[_Rule, ...] = _RULES
) -> list[dict[str, Any]]:
    """The engine spans no client LLM span accounts for (each client span accounts for one)."""
    free = list(clients)
    unmatched = list(engine)
    for rule in rules:
        still = []
        for e in unmatched:
            client = next((c for c in free if rule(e, c)), None)
            if client is None:
                still.append(e)
            else:
                free.remove(client)
        unmatched = still
    return unmatched


def _client_params(project: str, spans: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "project": project,
        "lo_ns": min(_ns(e["start_time"]) for e in spans) - 3600 * 10**9,
        "hi_ns": max(_ns(e["end_time"]) for e in spans) + 3600 * 10**9,
        "trace_ids": sorted({e["trace_id"] for e in spans}),
        "request_ids": sorted({e["request_id"] for e in spans if e["request_id"]}),
        "span_ids": sorted({e["span_id"] for e in spans}),
        "models": sorted({e["model"] for e in spans if e["model"]}),
    }


def _elsewhere_window(spans: list[dict[str, Any]], before_ns: int = _ELSEWHERE_BEFORE_NS) -> dict[str, int]:
    """Where another project's client span of these engine spans can start: the whole installation
    is scanned there, so the window is narrower than ``_client_params``'."""
    return {
        "lo_ns": min(_ns(e["start_time"]) for e in spans) - before_ns,
        "hi_ns": max(_ns(e["end_time"]) for e in spans) + _ELSEWHERE_AFTER_NS,
    }


def _elsewhere_params(project: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """By trace context where the engine row has one (the trace id's bloom filter skips most of
    the store), by request id only where it has none (a scan of the window's LLM spans)."""
    return {
        "project": project,
        **_elsewhere_window(rows),
        "trace_ids": sorted({r["trace_id"] for r in rows if r["parent_span_id"]}),
        "parents": sorted({r["parent_span_id"] for r in rows if r["parent_span_id"]}),
        "request_ids": sorted({r["request_id"] for r in rows if r["request_id"] and not r["parent_span_id"]}),
    }


def _clients_elsewhere(store: Store, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Other projects' client LLM spans by trace context, and by request id, each asked only if needed."""
    clients = store.query(ingest_sql.CLIENT_LLM_SPANS_ELSEWHERE_BY_TRACE, params) if params["parents"] else []
    if params["request_ids"]:
        clients += store.query(ingest_sql.CLIENT_LLM_SPANS_ELSEWHERE_BY_REQUEST, params)
    return clients


def _by_project(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row["project"], []).append(row)
    return groups


def _bill(e: dict[str, Any]) -> SpanRow:
    """The row that counts an engine-only call: kind llm, under the engine span, its figures."""
    return SpanRow(
        e["project"],
        e["trace_id"],
        billing_span_id(e["span_id"]),
        e["span_id"],
        sc.VLLM_SPAN_NAME,
        sc.KIND_LLM,
        _ns(e["start_time"]),
        _ns(e["end_time"]),
        service_name=e["service_name"],
        status_code=e["status_code"],
        error_type=e["error_type"],
        model=e["model"],
        provider=e["provider"],
        input_tokens=e["input_tokens"],
        output_tokens=e["output_tokens"],
        cached_tokens=e["cached_tokens"],
        cost_usd=e["cost_usd"],
        price_version=e["price_version"],
        ttft_s=e["ttft_s"],
        tpot_s=e["tpot_s"],
        queue_s=e["queue_s"],
        prefill_s=e["prefill_s"],
        decode_s=e["decode_s"],
        finish_reason=e["finish_reason"],
        request_id=e["request_id"],
        agent_name=e["agent_name"],
        attributes={ENGINE_ONLY: "true", ENGINE_SPAN: e["span_id"]},
    )


def billing_span_id(engine_span_id: str) -> str:
    """A span id derived from the engine span's: the same call is billed by the same row."""
    return hashlib.blake2b(f"agentwatch-engine-bill:{engine_span_id}".encode(), digest_size=8).hexdigest()


def _fact(row: dict[str, Any], now: float) -> _Fact:
    engine = dict(row["attributes"] or [])
    input_tokens, output_tokens, cached_tokens = (
        _int(engine.get(ENGINE_PREFIX + name)) for name in ("input_tokens", "output_tokens", "cached_tokens")
    )
    return _Fact(
        row["project"],
        row["trace_id"],
        row["span_id"],
        row["parent_span_id"],
        row["request_id"],
        row["model"],
        input_tokens,
        output_tokens,
        cached_tokens,
        _ns(row["start_time"]),
        _ns(row["end_time"]),
        {name: row[name] for name in _TIMINGS},
        now,
    )


def _int(text: str | None) -> int:
    try:
        return int(text or 0)
    except ValueError:
        return 0


def _by_usage_and_time(row: dict[str, Any], clients: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The client span with the engine row's model and token counts whose time holds it."""
    engine = dict(row["attributes"] or [])
    usage = (
        row["model"],
        _int(engine.get(ENGINE_PREFIX + "input_tokens")),
        _int(engine.get(ENGINE_PREFIX + "output_tokens")),
    )
    start, end = _ns(row["start_time"]), _ns(row["end_time"])
    return next(
        (
            c
            for c in clients
            if (c["model"], c["input_tokens"], c["output_tokens"]) == usage
            and _inside(start, end, c["start_time"], c["end_time"], _USAGE_SLACK_NS)
        ),
        None,
    )


def _stored_params(project: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "project": project,
        "lo_ns": min(_ns(r["start_time"]) for r in rows) - 3600 * 10**9,
        "hi_ns": max(_ns(r["end_time"]) for r in rows) + 3600 * 10**9,
        "parents": sorted({r["parent_span_id"] for r in rows if r["parent_span_id"]}),
        "request_ids": sorted({r["request_id"] for r in rows if r["request_id"]}),
        "models": sorted({r["model"] for r in rows if r["model"]}),
    }


def _inside(start: int, end: int, outer_start: int, outer_end: int, slack_ns: int = _SLACK_NS) -> bool:
    return outer_start - slack_ns <= start and end <= outer_end + slack_ns


def _rows(table: pa.Table) -> list[dict[str, Any]]:
    """The batch's rows with times as epoch nanoseconds: pyarrow turns a nanosecond timestamp into
    a Python value only through pandas, which the collector keeps out of its process
    (``collector.tuning``); ``pa.Table.from_pylist`` takes the ints back."""
    for index, field in enumerate(table.schema):
        if pa.types.is_timestamp(field.type):
            table = table.set_column(index, field.name, table.column(index).cast(pa.int64()))
    return table.to_pylist()


def _ns(value: Any) -> int:
    """Epoch nanoseconds from what Arrow (datetime/Timestamp) or a query (ns int) gives."""
    if isinstance(value, int):
        return value
    if hasattr(value, "value"):  # pandas Timestamp
        return int(value.value)
    return int(value.timestamp() * 1e9) if value is not None else 0
