"""The ingestion pipeline every transport shares: limits, decode, normalise, spool, enqueue.

HTTP (``collector.ingest.otlp.http``) and gRPC (``collector.ingest.otlp.grpc_server``) only translate their
protocol; the rules live here once. A request is answered only after its body is durable in
the spool, so an acknowledged span survives a crash. Where the store keeps captured texts in
files of its own (``collector.storage.texts``), they are written there as the request is decoded,
so they never wait in the writer's queue.
"""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa

from agentwatch_platform.collector.ingest import heap
from agentwatch_platform.collector.ingest.bounds import latest_start_ns
from agentwatch_platform.collector.ingest.normalize import Normalizer
from agentwatch_platform.collector.ingest.otlp.decode import Converted, convert, drop_repeated_spans
from agentwatch_platform.collector.ingest.otlp.errors import (
    BadRequest,
    PayloadTooLarge,
    Unavailable,
    UnsupportedMediaType,
)
from agentwatch_platform.collector.ingest.spool import Spool, SpoolError
from agentwatch_platform.collector.ingest.writer import Writer
from agentwatch_platform.collector.metrics import Metrics
from agentwatch_platform.collector.settings import Settings
from agentwatch_platform.collector.storage.columns import empty_spans_table
from agentwatch_platform.collector.storage.texts import TextStore, TextStoreError

log = logging.getLogger(__name__)

_INLINE_BYTES = 32 * 1024  # smaller bodies are decoded on the event loop; larger ones in a thread
# Every this many bodies decoded in a thread, the C heap's free pages go back to the OS
# (collector.ingest.heap): each body leaves ~1 MB of freed request, column and text buffers between
# the queue's live ones. Measured in a burst with captured text: 237-245 MB at the peak against
# 244-250 without, at ~-2 % of its spans/s; every 4th, 237-242 at ~-6 % (bench/results/scale.md).
_TRIM_EVERY_DECODES = 8
_ENCODINGS = ("", "identity", "gzip")
_MAX_GZIP_MEMBERS = 1024  # a body of many empty members costs a zlib object each


def gunzip(body: bytes, limit: int) -> bytes:
    """Decompress a gzip body, every member of it, refusing to inflate past ``limit`` bytes (gzip bombs).

    A body may be several gzip members one after the other (RFC 1952 allows it, ``cat a.gz
    b.gz`` makes one); all are read, and ``limit`` bounds what they inflate to together.
    Bytes after a member that are not a whole gzip member are refused with 400, never ignored.
    """
    parts: list[bytes] = []
    size, rest = 0, body
    while rest:
        if len(parts) == _MAX_GZIP_MEMBERS:
            raise BadRequest(f"body has more than {_MAX_GZIP_MEMBERS} gzip members; send one")
        data, rest = _gunzip_member(rest, limit - size)
        if data is None:
            raise PayloadTooLarge(f"decompressed body exceeds the limit of {limit} bytes (AGENTWATCH_MAX_BODY_BYTES)")
        parts.append(data)
        size += len(data)
    return b"".join(parts)


def _gunzip_member(body: bytes, room: int) -> tuple[bytes | None, bytes]:
    """The first gzip member of ``body`` inflated (None past ``room`` bytes), and the bytes after it."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        data = inflater.decompress(body, room + 1)
    except zlib.error as exc:
        raise BadRequest(f"body is not valid gzip: {exc}") from None
    if len(data) > room or inflater.unconsumed_tail:
        return None, b""
    if not inflater.eof:
        raise BadRequest("body is not valid gzip: it ends inside a gzip member (truncated?)")
    return data, inflater.unused_data


class Ingestor:
    """Accepts export requests for a project; ``writer`` is attached when the app starts."""

    def __init__(
        self,
        settings: Settings,
        *,
        normalizer: Normalizer,
        spool: Spool,
        metrics: Metrics,
        clock: Callable[[], float] = time.time,
        texts: Callable[[], TextStore | None] = lambda: None,
    ) -> None:
        self.settings = settings
        self._clock = clock
        self._texts = texts  # the open store's text files, if it keeps texts out of its tables
        self._texts_failing = False
        self.normalizer = normalizer
        self.spool = spool
        self.metrics = metrics
        self.writer: Writer | None = None
        self._decoded = 0  # bodies decoded in a thread (a count lost between two threads only delays a trim)
        self._pool = ThreadPoolExecutor(
            max_workers=max(1, settings.decode_threads), thread_name_prefix="agentwatch-decode"
        )

    def check_capacity(self) -> None:
        """Refuse early (before reading the body) when the request could not be made durable."""
        if self.writer is None:
            raise Unavailable("collector is starting or stopping; retry later", retry_after=1.0)
        if self.spool.full:
            raise SpoolError(
                f"spool is full ({self.spool.size_bytes} bytes, AGENTWATCH_SPOOL_MAX_BYTES) while the store catches up; retry later",
                retry_after=5.0,
            )

    async def export(self, project: str, payload: bytes, fmt: str, *, encoding: str = "") -> Converted:
        """Decode, normalise and durably accept one request body; raises ``IngestError``."""
        encoding = encoding.strip().lower()
        if encoding not in _ENCODINGS:
            raise UnsupportedMediaType(f"Content-Encoding {encoding!r} is not supported; send gzip or identity")
        if len(payload) > self.settings.max_body_bytes:
            raise PayloadTooLarge(
                f"body of {len(payload)} bytes exceeds the limit of {self.settings.max_body_bytes} bytes (AGENTWATCH_MAX_BODY_BYTES)"
            )
        if len(payload) <= _INLINE_BYTES and encoding != "gzip":
            payload, converted = payload, self._convert(payload, fmt, project)
        else:
            loop = asyncio.get_running_loop()
            payload, converted = await loop.run_in_executor(self._pool, self._decode, payload, fmt, project, encoding)
        if converted.warnings:
            self.metrics.dropped_fields.inc(converted.warnings)  # named in the response's partial_success
        if converted.spans:
            self.check_capacity()
            seq = await self.spool.append(project, fmt, payload)
            assert self.writer is not None
            self.writer.enqueue(seq, converted.table)
        return converted

    def _decode(self, payload: bytes, fmt: str, project: str, encoding: str) -> tuple[bytes, Converted]:
        if encoding == "gzip":
            payload = gunzip(payload, self.settings.max_body_bytes)
        converted = self._convert(payload, fmt, project)
        self._decoded += 1
        if self._decoded % _TRIM_EVERY_DECODES == 0:
            heap.trim()
        return payload, converted

    def _convert(self, payload: bytes, fmt: str, project: str) -> Converted:
        converted = convert(
            payload,
            fmt,
            project,
            self.normalizer,
            max_spans=self.settings.max_spans_per_request,
            not_before_ns=self._retention_start_ns(),
            not_after_ns=latest_start_ns(self.settings.retention_days),
            native=self.settings.native_decode,
            max_resource_bytes=self.settings.max_resource_bytes_per_request,
        )
        drop_repeated_spans(converted)
        converted.table = self._texts_out(converted.table)
        return converted

    def _texts_out(self, table: pa.Table) -> pa.Table:
        """The table with its captured texts written to the store's text files, where it has
        them; as it is otherwise, or when the write fails (the store's insert tries again)."""
        texts = self._texts()
        if texts is None or not table.num_rows:
            return table
        try:
            stashed = texts.stash(table)
        except TextStoreError as exc:
            if not self._texts_failing:  # once per run of failures, not once per request
                log.warning("ingest: %s; the texts stay with their spans until the insert", exc)
            self._texts_failing = True
            return table
        self._texts_failing = False
        return stashed

    def _retention_start_ns(self) -> int:
        """Spans older than this would be dropped by the retention TTL at once: 0 keeps all."""
        days = self.settings.retention_days
        return int((self._clock() - days * 86_400) * 1e9) if days > 0 else 0

    def reload(self, seq: int) -> pa.Table:
        """The spans of a spooled request (replay after a restart, or spans not kept in memory)."""
        project, fmt, payload = self.spool.read(seq)
        try:
            table = convert(
                payload,
                fmt,
                project,
                self.normalizer,
                max_spans=1 << 62,
                not_after_ns=latest_start_ns(self.settings.retention_days),
                native=self.settings.native_decode,
                max_resource_bytes=1 << 62,  # acknowledged once: never refused on replay
            ).table
            return self._texts_out(table)
        except Exception:
            log.exception("spooled request %d cannot be decoded any more; skipped", seq)
            return empty_spans_table()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
