"""The collector application: ``create_app(settings, store=..., clock=...)``.

Collaborators are passed in (tests build the real thing on a temporary store); what has a
lifetime (spool replay, writer, gRPC server, engine scraper, then the plugins' components: the
alert evaluator) starts and stops in the lifespan, in that order and in reverse.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
from fastapi import Depends, FastAPI
from fastapi.middleware.cors import CORSMiddleware

from agentwatch_api import handshake
from agentwatch_platform.collector.api import errors, openapi
from agentwatch_platform.collector.api.body_timeout import BodyReadTimeout
from agentwatch_platform.collector.api.routers import ROUTERS
from agentwatch_platform.collector.api.security_headers import SecurityHeaders
from agentwatch_platform.collector.auth.authenticator import Authenticator
from agentwatch_platform.collector.auth.caller import authorize
from agentwatch_platform.collector.auth.keys import KeyRing
from agentwatch_platform.collector.auth.scopes import RouteScopes
from agentwatch_platform.collector.engines.gpu import GpuSampler
from agentwatch_platform.collector.engines.registry import policy_for
from agentwatch_platform.collector.engines.scraper import DEFAULT_PROJECT, ENGINE_COLUMNS, EngineScraper, parse_targets
from agentwatch_platform.collector.ingest.freshness import Freshness
from agentwatch_platform.collector.ingest.insert_hooks import insert_hooks
from agentwatch_platform.collector.ingest.normalize import Normalizer, sdk_pricer
from agentwatch_platform.collector.ingest.otlp import native
from agentwatch_platform.collector.ingest.pipeline import Ingestor
from agentwatch_platform.collector.ingest.rate_limit import RateLimiter
from agentwatch_platform.collector.ingest.redact import Redactor
from agentwatch_platform.collector.ingest.spill import Spill
from agentwatch_platform.collector.ingest.spool import Recovery, Spool
from agentwatch_platform.collector.ingest.writer import Writer
from agentwatch_platform.collector.metrics import Metrics
from agentwatch_platform.collector.plugins import Plugin
from agentwatch_platform.collector.query.fleet import FleetCounters
from agentwatch_platform.collector.roles import ENGINE_JOIN, ENGINE_SCRAPER, RETENTION, RUN_CLOSER, Roles
from agentwatch_platform.collector.settings import Settings
from agentwatch_platform.collector.state import CollectorState, collector_state
from agentwatch_platform.collector.storage.base import Store, StoreError, StoreUnavailable
from agentwatch_platform.collector.storage.deletion import journal_for, replay
from agentwatch_platform.collector.storage.lease import holder_id
from agentwatch_platform.collector.storage.maintenance import RetentionPass
from agentwatch_platform.collector.storage.model import SpanRow
from agentwatch_platform.collector.storage.run_closes import RunCloser
from agentwatch_platform.collector.storage.texts import TextSearch, TextStore

log = logging.getLogger(__name__)

_REOPEN_INTERVAL_S = 2.0


class StoreHandle:
    """The store as ``app.state.store``: opened lazily, reopened while it cannot be opened.

    A collector whose store is away still starts and accepts spans into its spool; every
    store method raises ``StoreUnavailable`` until the store can be opened.
    """

    def __init__(self, settings: Settings, store: Store | None = None) -> None:
        self.settings = settings
        self._store = store
        self._owned = store is None
        self._lock = threading.Lock()
        self._retry_at = 0.0
        self._error = ""

    def get(self) -> Store:
        store = self._store
        if store is not None:
            return store
        with self._lock:
            if self._store is None:
                self._open()
            assert self._store is not None
            return self._store

    def peek(self) -> Store | None:
        """The store if it is open, without trying to open it (for metrics read at scrape time)."""
        return self._store

    def _open(self) -> None:
        if time.monotonic() < self._retry_at:
            raise StoreUnavailable(self._error)
        from agentwatch_platform.collector.storage import open_store

        try:
            self._store = open_store(self.settings)
        except Exception as exc:  # any failure to open is "not available yet"
            self._retry_at = time.monotonic() + _REOPEN_INTERVAL_S
            self._error = f"store cannot be opened: {exc}"
            raise StoreUnavailable(self._error) from exc

    def migrate(self) -> None:
        self.get().migrate()

    @property
    def write_lock(self) -> Any:
        """The store's span-writer lease where collectors share it (``collector.storage.lease``), else None."""
        return getattr(self.get(), "write_lock", None)

    def insert_spans(self, spans: pa.Table | Sequence[SpanRow], *, dedup_token: str | None = None) -> int:
        return self.get().insert_spans(spans, dedup_token=dedup_token)

    def query(self, sql: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        return self.get().query(sql, params)

    def command(self, sql: str, params: dict[str, Any] | None = None) -> None:
        self.get().command(sql, params)

    def insert_rows(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        self.get().insert_rows(table, columns, rows)

    def read_texts(self, spans: list[dict[str, Any]], *, project: str = "", trace_id: str = "") -> None:
        self.get().read_texts(spans, project=project, trace_id=trace_id)

    def search_texts(self, project: str, start_ns: int, end_ns: int, needle: str, *, limit: int) -> TextSearch:
        return self.get().search_texts(project, start_ns, end_ns, needle, limit=limit)

    def text_store(self) -> TextStore | None:
        """The open store's text files (an embedded store's), or None: not open, or texts in the table."""
        return getattr(self._store, "texts", None)

    def hold_merges(self, hold: bool) -> None:
        if (store := self._store) is not None:  # a store not open yet merges as usual once opened
            store.hold_merges(hold)

    def backlog(self, waiting: bool) -> None:
        if (store := self._store) is not None:  # a store not open yet has no backlog to hear of
            store.backlog(waiting)

    def close(self) -> None:
        """Close the store if this handle opened it; safe to call twice."""
        with self._lock:
            store, self._store = self._store, None
        if store is not None and self._owned:
            store.close()


def create_app(
    settings: Settings,
    *,
    store: Store | None = None,
    clock: Callable[[], float] = time.time,
    plugins: Sequence[Plugin] = (),
) -> FastAPI:
    """The collector: OTLP ingestion, query API, ``/metrics``; ``store`` defaults to the configured one.

    ``plugins`` are the parts that run inside it (``collector.plugins``; the alerts)."""
    metrics = Metrics()
    handle = StoreHandle(settings, store)
    spool = Spool(
        Path(settings.data_dir) / "spool",
        max_bytes=settings.spool_max_bytes,
        on_error=lambda reason: metrics.spool_errors.inc(),
    )
    normalizer = Normalizer(
        max_attribute_length=settings.max_attribute_length,
        max_key_length=settings.max_attribute_key_length,
        max_attributes=settings.max_attributes_per_span,
        max_events=settings.max_events_per_span,
        max_event_attributes=settings.max_attributes_per_event,
        redactor=Redactor.from_setting(settings.redact_patterns),
        pricer=sdk_pricer(settings.prices_file),
    )
    ingestor = Ingestor(
        settings, normalizer=normalizer, spool=spool, metrics=metrics, clock=clock, texts=handle.text_store
    )
    keyring = KeyRing(handle)

    app = FastAPI(
        title="agentwatch collector",
        version="0.1.0",
        lifespan=_lifespan(settings, handle, ingestor, clock, plugins),
        dependencies=[Depends(authorize)],
    )  # every route's scope, from state.route_scopes (collector.auth.scopes)
    app.state = CollectorState(  # typed: collector.state lists what it holds
        settings=settings,
        store=handle,
        metrics=metrics,
        ingestor=ingestor,
        keyring=keyring,
        authenticator=Authenticator(lambda: keyring),
        rate_limiter=RateLimiter(settings.rate_limit_spans_per_s),
        route_scopes=RouteScopes.joined((plugin.name, plugin.scopes) for plugin in plugins),
        plugin_settings={plugin.name: plugin.settings for plugin in plugins},  # read now: a bad one stops the start
        scrape_policy=policy_for(settings),
        clock=clock,
        freshness=Freshness(clock=clock),
        deletion_listeners=[],
        plugin_components={},
    )
    errors.install(app)  # every error's HTTP answer; OTLP's google.rpc.Status on /v1/traces
    if settings.cors_origins:
        origins = [o.strip() for o in settings.cors_origins.split(",") if o.strip()]
        app.add_middleware(CORSMiddleware, allow_origins=origins, allow_methods=["GET", "POST"], allow_headers=["*"])
    app.add_middleware(BodyReadTimeout, timeout_s=settings.body_read_timeout_s)
    app.add_middleware(SecurityHeaders)  # outermost: the 408s above get the headers too
    for router in ROUTERS:
        app.include_router(router)
    for plugin in plugins:
        for router in plugin.routers:
            app.include_router(router)
    openapi.install(app)  # every answer documented, errors included
    if missing := collector_state(app).route_scopes.undeclared(app.routes):
        log.error(
            "routes with no scope (agentwatch_platform.collector.auth.scopes.ROUTE_SCOPES, or their plugin's) are refused to every caller: %s",
            missing,
        )
    return app


def _lifespan(
    settings: Settings, handle: StoreHandle, ingestor: Ingestor, clock: Callable[[], float], plugins: Sequence[Plugin]
) -> Callable[[FastAPI], Any]:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            stack.callback(ingestor.close)
            stack.callback(handle.close)
            stack.callback(ingestor.spool.close)
            recovery = _open_spool(ingestor.spool)
            # once-per-cluster work where other collectors may share the store (collector.roles)
            roles = Roles(
                handle.get,
                holder_id(settings.collector_id),
                ttl_s=settings.lease_ttl_s,
                shared=bool(settings.clickhouse_url),
            )
            collector_state(app).roles = roles
            available = await _open_store(handle)
            if available:  # before any span is inserted: what a crash left half deleted goes first
                await asyncio.to_thread(_replay_deletions, handle, settings)
            ingestor.metrics.store_up.set(1 if available else 0)
            _announce_decoder(settings, ingestor.metrics)
            writer = Writer(
                store=handle.get,
                spool=ingestor.spool,
                reload=ingestor.reload,
                metrics=ingestor.metrics,
                flush_rows=settings.flush_rows,
                flush_interval_s=settings.flush_interval_s,
                max_queue_spans=settings.max_queue_spans,
                max_queue_bytes=settings.max_queue_bytes,
                clock=clock,
                spill=_spill(settings),
                hooks=insert_hooks(
                    settings,
                    handle.get,
                    pricer=ingestor.normalizer.price,
                    may_bill=lambda: roles.holds(ENGINE_JOIN),
                    freshness=collector_state(app).freshness,
                    clock=clock,
                ),
            )
            writer.store_available = available  # known from the start, not only after a failed insert
            writer.replay(recovery, ingestor.spool.estimate_spans)
            await stack.enter_async_context(writer)
            ingestor.writer = writer
            stack.callback(setattr, ingestor, "writer", None)  # refuse new requests before draining
            ingestor.metrics.bind(
                queued=lambda: writer.queued_spans,
                spool_bytes=lambda: ingestor.spool.size_bytes,
                lease_overruns=lambda: _lease_overruns(handle),
                text_files=lambda: _text_files(handle),
            )
            _runtime_files(app, settings, stack)
            await _start_grpc(app, settings, stack)
            await stack.enter_async_context(roles)
            if roles.shared:  # /api/ingest sums every collector's counters (collector.query.fleet)
                collector_state(app).fleet = await stack.enter_async_context(
                    FleetCounters(handle.get, ingestor.metrics, roles.holder)
                )
            await _start_components(app, settings, handle, stack)
            for plugin in plugins:
                if (component := plugin.lifespan(app)) is not None:
                    collector_state(app).plugin_components[plugin.name] = component
                    await stack.enter_async_context(component)
            yield

    return lifespan


def _replay_deletions(handle: StoreHandle, settings: Settings) -> None:
    """Deletions a crash interrupted (``collector.storage.deletion``); a failure is retried at the next start."""
    try:
        replay(handle.get(), journal_for(settings.data_dir))
    except StoreError as exc:
        log.error("replaying interrupted deletions failed (%s); they are retried at the next start", exc)


def _lease_overruns(handle: StoreHandle) -> float:
    """Span-writer lease overruns of the open store (0 with chDB: one writer, no lease)."""
    lock = getattr(handle.peek(), "write_lock", None)
    return float(lock.overruns) if lock is not None else 0.0


def _text_files(handle: StoreHandle) -> tuple[float, float, float]:
    """Spans whose texts the open store's text files refused, day files reopened, and seals that
    failed (0 without them)."""
    texts = getattr(handle.peek(), "texts", None)
    if texts is None:
        return (0.0, 0.0, 0.0)
    return (float(texts.write_failures), float(texts.reopened), float(texts.seal_failures))


def _announce_decoder(settings: Settings, metrics: Metrics) -> None:
    """A collector without its native decoder works, at ~3x the CPU per span: said once at start."""
    metrics.native_decoder.set(1 if settings.native_decode and native.AVAILABLE else 0)
    if settings.native_decode and not native.AVAILABLE:
        log.warning(
            "the native OTLP decoder is not built (%s): decoding in Python, about 3x the CPU per span; "
            "reinstall with a C compiler and the Python headers (pip install .) to build it",
            native.NOT_BUILT,
        )


def _spill(settings: Settings) -> Spill:
    """Where the writer puts decoded spans beyond its memory bound; a previous run's files are stale."""
    spill = Spill(Path(settings.data_dir) / "spill")
    spill.clear()
    return spill


def _open_spool(spool: Spool) -> Recovery:
    try:
        return spool.open()
    except OSError as exc:
        spool.error = f"cannot open spool {spool.directory}: {exc}"
        log.error("%s; requests get 503 until it is writable", spool.error)
        return Recovery()


async def _open_store(handle: StoreHandle) -> bool:
    """Whether the store could be opened now; when not, spans wait in the spool."""
    try:
        await asyncio.to_thread(handle.get)
    except StoreError as exc:
        log.error("%s; accepting spans into the spool and retrying", exc)
        return False
    return True


def _runtime_files(app: FastAPI, settings: Settings, stack: AsyncExitStack) -> None:
    """Admin token and ``collector.json`` in the data dir, for ``agentwatch keys`` (removed at exit)."""
    data_dir = Path(settings.data_dir)
    try:
        collector_state(app).admin_token = handshake.write_admin_token(data_dir)
        runtime = handshake.write_runtime(data_dir, f"http://{_connect_host(settings.host)}:{settings.port}")
    except OSError as exc:
        log.warning(
            "cannot write runtime files in %s (%s); 'agentwatch keys' cannot reach this collector", data_dir, exc
        )
        return
    stack.callback(_remove, runtime)


def _connect_host(host: str) -> str:
    return "127.0.0.1" if host in ("0.0.0.0", "", "::") else host


def _remove(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass


async def _start_grpc(app: FastAPI, settings: Settings, stack: AsyncExitStack) -> None:
    if not settings.grpc_port:
        return
    from agentwatch_platform.collector.ingest.otlp.grpc_server import GrpcServer

    server = GrpcServer(app, host=settings.host, port=settings.grpc_port)
    await stack.enter_async_context(server)
    collector_state(app).grpc_server = server


async def _start_components(app: FastAPI, settings: Settings, handle: StoreHandle, stack: AsyncExitStack) -> None:
    """Engine scraper, run closer, retention pass and GPU sampler."""
    state = collector_state(app)
    roles = state.roles
    assert roles is not None  # the lifespan made them before the components
    state.scraper = await stack.enter_async_context(
        EngineScraper.from_settings(
            handle, settings, policy=state.scrape_policy, may_scrape=lambda: roles.holds(ENGINE_SCRAPER)
        )
    )
    await stack.enter_async_context(RunCloser(handle.get, may_close=lambda: roles.holds(RUN_CLOSER)))
    await stack.enter_async_context(
        RetentionPass(handle.get, settings.retention_days, may_run=lambda: roles.holds(RETENTION))
    )
    _start_gpu_sampler(app, settings, handle, stack)


def gpu_sampler_target(settings: Settings) -> tuple[str, str] | None:
    """(engine, project) the local GPUs are filed under, or None when sampling is off."""
    choice = settings.gpu_sampler.strip()
    if choice.lower() in ("off", "none", "0", "false"):
        return None
    if choice.lower() in ("", "auto"):
        targets = parse_targets(settings.scrape_targets)
        return (targets[0].name, targets[0].project) if targets else ("local", DEFAULT_PROJECT)
    engine, sep, project = choice.partition("@")
    if not engine or not sep or not project:
        raise ValueError(f"AGENTWATCH_GPU_SAMPLER={choice!r}: expected auto, off or ENGINE@PROJECT")
    return engine, project


def _start_gpu_sampler(app: FastAPI, settings: Settings, handle: StoreHandle, stack: AsyncExitStack) -> None:
    """GPU utilisation, memory and power into ``engine_metrics`` where NVML exists (one log line where not)."""
    target = gpu_sampler_target(settings)
    if target is None:
        return
    engine, project = target

    def sink(rows: list[tuple[str, float, str, dict[str, str], float]]) -> None:
        try:
            handle.insert_rows("engine_metrics", ENGINE_COLUMNS, [(project, *row) for row in rows])
        except StoreError as exc:
            log.warning("gpu sampler: could not store %d samples: %s", len(rows), exc)

    sampler = GpuSampler(sink, engine=engine, interval_s=max(1.0, settings.scrape_interval_s))
    if sampler.start():
        stack.callback(sampler.stop)
    collector_state(app).gpu_sampler = sampler
