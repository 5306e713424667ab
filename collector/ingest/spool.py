"""The on-disk spool: a write-ahead log that makes a request durable before it is answered.

Every accepted request body is appended here and fsynced (one fsync serves every request
that arrived meanwhile: group commit) before the client gets its 2xx. The writer inserts
the rows from memory; before an insert it logs an *intent* (the batch's deduplication
token and the request sequence numbers it covers), after it a *done*. After a crash or
restart, requests without a done are replayed: an unfinished intent with its original
token, so a batch that did reach the store is ignored by the store's block deduplication
(exactly once), and the rest as fresh batches. While the store is down the spool grows up
to ``spool_max_bytes``; beyond it, or when the disk refuses writes, callers get
``Unavailable`` (a 503) and nothing crashes.

Layout: ``<dir>/<segment number>.spool`` files of records
``[body length u32][crc32 u32][kind u8][body]``.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import struct
import zlib
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agentwatch_platform.collector.ingest.otlp.errors import Unavailable

log = logging.getLogger(__name__)

_HEADER = struct.Struct("<IIB")
_DATA = struct.Struct("<QBH")  # seq, format code, project length
_KIND_DATA, _KIND_INTENT, _KIND_DONE = 1, 2, 3
_FORMATS = ("protobuf", "json")
_SUFFIX = ".spool"
_RETIRE_ACTIVE_BYTES = 1024 * 1024  # an active segment this large that owes nothing is deleted at once
RETRY_AFTER_S = 5.0


class SpoolError(Unavailable):
    """The spool cannot take this request now (full, or the disk refuses writes)."""


@dataclass(eq=False)
class _Segment:
    number: int
    path: Path
    size: int = 0
    refs: int = 0  # pending requests and unfinished intents recorded in this segment


@dataclass
class Recovery:
    """What a restart must replay: unfinished intents (token, seqs) and free pending seqs."""

    intents: list[tuple[str, list[int]]] = field(default_factory=list)
    pending: list[int] = field(default_factory=list)


class Spool:
    """Group-committed write-ahead log of export requests. All writes happen on the event loop."""

    def __init__(
        self,
        directory: Path,
        *,
        max_bytes: int,
        segment_bytes: int | None = None,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.segment_bytes = segment_bytes or max(64 * 1024, min(64 * 1024**2, max_bytes // 8))
        self._on_error = on_error or (lambda reason: None)
        self._segments: dict[int, _Segment] = {}
        self._active: _Segment | None = None
        self._retire_next = False  # retire the active segment once it owes nothing, whatever its size
        self._fd: int | None = None
        self._dirty: list[int] = []  # fds written since their last fsync (the active one included)
        self._closing: list[int] = []  # rolled-over fds, closed after their next fsync
        self._index: dict[int, tuple[_Segment, int, int]] = {}  # seq -> (segment, offset, length)
        self._intents: dict[str, tuple[_Segment, list[int]]] = {}
        self._seq = 0
        self._writes = 0
        self._synced = 0
        self._sync_task: asyncio.Future[None] | None = None
        self.error = ""  # last write error, shown in /api/ingest and logs

    # --- state -----------------------------------------------------------------------------

    @property
    def size_bytes(self) -> int:
        """Bytes on disk, every segment together (``bytes`` would shadow the type in this class)."""
        return sum(s.size for s in self._segments.values())

    @property
    def full(self) -> bool:
        return self.size_bytes >= self.max_bytes

    # --- recovery ----------------------------------------------------------------------------

    def open(self) -> Recovery:
        """Scan the segments left by a previous run; what they still owe is returned."""
        self.directory.mkdir(parents=True, exist_ok=True)
        done: set[str] = set()
        paths = sorted(self.directory.glob("*" + _SUFFIX), key=lambda p: int(p.stem))
        for i, path in enumerate(paths):
            segment = _Segment(int(path.stem), path)
            self._segments[segment.number] = segment
            self._scan(segment, done, last=i == len(paths) - 1)
        recovery = self._settle(done)
        next_number = max(self._segments, default=0) + 1
        self._roll(next_number)
        log.info(
            "spool %s: %d requests to replay (%d in unfinished batches)",
            self.directory,
            len(self._index),
            sum(len(s) for _, s in recovery.intents),
        )
        return recovery

    def _scan(self, segment: _Segment, done: set[str], *, last: bool) -> None:
        data = segment.path.read_bytes()
        offset = 0
        while offset + _HEADER.size <= len(data):
            length, crc, kind = _HEADER.unpack_from(data, offset)
            body = data[offset + _HEADER.size : offset + _HEADER.size + length]
            if len(body) != length or zlib.crc32(body) != crc:
                break
            self._load_record(segment, kind, body, offset)
            if kind == _KIND_DONE:
                done.add(body.decode())
            offset += _HEADER.size + length
        if offset < len(data):
            log.warning(
                "spool segment %s: torn or corrupt record at byte %d (never acknowledged); ignoring the rest",
                segment.path,
                offset,
            )
            if last:
                os.truncate(segment.path, offset)
        segment.size = offset

    def _load_record(self, segment: _Segment, kind: int, body: bytes, offset: int) -> None:
        if kind == _KIND_DATA:
            seq = _DATA.unpack_from(body)[0]
            self._index[seq] = (segment, offset, _HEADER.size + len(body))
            self._seq = max(self._seq, seq)
        elif kind == _KIND_INTENT:
            (n,) = struct.unpack_from("<H", body)
            token = body[2 : 2 + n].decode()
            seqs = array("Q", body[2 + n :]).tolist()
            self._intents[token] = (segment, seqs)

    def _settle(self, done: set[str]) -> Recovery:
        """Drop what finished, count references per segment, delete segments owing nothing."""
        recovery = Recovery()
        for token, (segment, seqs) in list(self._intents.items()):
            if token in done:
                del self._intents[token]
                for seq in seqs:
                    self._index.pop(seq, None)
                continue
            live = [seq for seq in seqs if seq in self._index]
            self._intents[token] = (segment, live)
            recovery.intents.append((token, live))
            segment.refs += 1
        claimed = {seq for _, seqs in recovery.intents for seq in seqs}
        for seq, (segment, _, _) in sorted(self._index.items()):
            segment.refs += 1
            if seq not in claimed:
                recovery.pending.append(seq)
        for segment in list(self._segments.values()):
            if segment.refs == 0:
                self._delete(segment)
        return recovery

    # --- writing ---------------------------------------------------------------------------

    async def append(self, project: str, fmt: str, payload: bytes) -> int:
        """Log one request and wait until it is on disk; returns its sequence number."""
        name = project.encode()
        body_len = _DATA.size + len(name) + len(payload)
        if self.size_bytes + body_len + _HEADER.size > self.max_bytes:
            raise SpoolError(
                f"spool is full ({self.size_bytes} of {self.max_bytes} bytes, AGENTWATCH_SPOOL_MAX_BYTES) while the store catches up; retry later",
                retry_after=RETRY_AFTER_S,
            )
        seq = self._seq + 1
        segment, offset = self._write(_KIND_DATA, _DATA.pack(seq, _FORMATS.index(fmt), len(name)), name, payload)
        self._seq = seq
        self._index[seq] = (segment, offset, _HEADER.size + body_len)
        segment.refs += 1
        await self._sync_through(self._writes)
        return seq

    async def begin(self, token: str, seqs: list[int]) -> None:
        """Log a batch's intent (durably) before it is inserted with ``token``."""
        if token in self._intents:
            return
        name = token.encode()
        segment, _ = self._write(_KIND_INTENT, struct.pack("<H", len(name)), name, array("Q", seqs).tobytes())
        self._intents[token] = (segment, seqs)
        segment.refs += 1
        await self._sync_through(self._writes)

    def commit(self, token: str) -> None:
        """The batch is in the store: its requests are released (no fsync needed: a lost done
        only means a replay that the store deduplicates)."""
        entry = self._intents.pop(token, None)
        if entry is None:
            return
        try:
            self._write(_KIND_DONE, token.encode())
        except SpoolError:
            log.warning("spool: could not record batch %s as done; it may be replayed (deduplicated)", token)
        intent_segment, seqs = entry
        self._release(intent_segment)
        for seq in seqs:
            located = self._index.pop(seq, None)
            if located is not None:
                self._release(located[0])

    def estimate_spans(self, seq: int) -> int:
        """A guess of a spooled request's span count from its size (no decoding)."""
        return max(1, self._index[seq][2] // 256)

    def read(self, seq: int) -> tuple[str, str, bytes]:
        """(project, format, payload) of a logged request; safe to call from a worker thread."""
        segment, offset, length = self._index[seq]
        with open(segment.path, "rb") as f:
            f.seek(offset + _HEADER.size)
            body = f.read(length - _HEADER.size)
        _, fmt, n = _DATA.unpack_from(body)
        start = _DATA.size
        return body[start : start + n].decode(), _FORMATS[fmt], body[start + n :]

    def _write(self, kind: int, *body: bytes) -> tuple[_Segment, int]:
        """One record whose body is ``body``'s parts, written as they are: a request's ~1 MB
        payload is never copied into a record (two copies a request, on the event loop's heap)."""
        if self._fd is None or self._active is None or self._active.size >= self.segment_bytes:
            self._roll(max(self._segments, default=0) + 1)
        assert self._fd is not None and self._active is not None
        segment, offset = self._active, self._active.size
        size, crc = 0, 0
        for part in body:
            size, crc = size + len(part), zlib.crc32(part, crc)
        record = (_HEADER.pack(size, crc, kind), *body)
        try:
            written = os.writev(self._fd, record)
            if written != _HEADER.size + size:
                raise OSError(f"short write ({written} of {_HEADER.size + size} bytes)")
        except OSError as exc:
            self._failed(f"write to {segment.path} failed: {exc}", truncate_to=offset)
            raise SpoolError(f"spool is not writable ({exc}); retry later", retry_after=RETRY_AFTER_S) from None
        segment.size += _HEADER.size + size
        self._writes += 1
        if self._fd not in self._dirty:
            self._dirty.append(self._fd)
        return segment, offset

    def _roll(self, number: int) -> None:
        """Start a new segment; the old fd is closed once its data is fsynced."""
        old = self._active
        if self._fd is not None:
            self._closing.append(self._fd)
        self._fd, self._active = None, None
        if old is not None and old.refs <= 0:
            self._delete(old)
        path = self.directory / f"{number:012d}{_SUFFIX}"
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        except OSError as exc:
            self._failed(f"cannot create {path}: {exc}")
            raise SpoolError(f"spool is not writable ({exc}); retry later", retry_after=RETRY_AFTER_S) from None
        self._active = self._segments[number] = _Segment(number, path)
        self.error = ""

    def _failed(self, reason: str, *, truncate_to: int | None = None) -> None:
        self.error = reason
        log.error("spool: %s; answering 503 until the disk accepts writes", reason)
        self._on_error(reason)
        if self._fd is not None and truncate_to is not None:
            try:
                os.ftruncate(self._fd, truncate_to)
                return
            except OSError:
                pass
        if self._fd is not None:  # cannot repair the tail: next write starts a new segment
            self._closing.append(self._fd)
            self._fd, self._active = None, None

    # --- group commit ------------------------------------------------------------------------

    async def _sync_through(self, writes: int) -> None:
        while self._synced < writes:
            if self._sync_task is None:
                self._sync_task = asyncio.ensure_future(self._sync())
            task = self._sync_task
            await asyncio.shield(task)

    async def _sync(self) -> None:
        target, fds, closing = self._writes, list(self._dirty), list(self._closing)
        self._dirty.clear()
        self._closing.clear()
        try:
            await asyncio.to_thread(_fsync_all, fds, closing)
        except OSError as exc:
            self._failed(f"fsync failed: {exc}")
            raise SpoolError(
                f"spool could not be made durable ({exc}); retry later", retry_after=RETRY_AFTER_S
            ) from None
        finally:
            self._sync_task = None
        self._synced = max(self._synced, target)

    # --- housekeeping --------------------------------------------------------------------------

    def retire_when_idle(self) -> None:
        """Delete every segment as soon as it owes nothing, the active one too, whatever its size:
        after a deletion of data (``collector.storage.deletion``) no request body holding it stays
        on disk longer than its spans take to be stored. On the event loop, as every write."""
        self._retire_next = True
        if self._active is not None and self._active.refs <= 0:
            self._retire_active()
            self._retire_next = False

    def _release(self, segment: _Segment) -> None:
        segment.refs -= 1
        if segment.refs > 0:
            return
        if segment is not self._active:
            self._delete(segment)
        elif segment.size >= _RETIRE_ACTIVE_BYTES or self._retire_next:
            self._retire_active()
            self._retire_next = not all(s.refs <= 0 for s in self._segments.values())

    def _retire_active(self) -> None:
        """The active segment owes nothing: drop it now rather than keep its bytes on disk until it fills."""
        segment = self._active
        if self._fd is not None:
            self._closing.append(self._fd)
        self._fd, self._active = None, None
        if segment is not None:
            self._delete(segment)

    def _delete(self, segment: _Segment) -> None:
        self._segments.pop(segment.number, None)
        try:
            segment.path.unlink(missing_ok=True)
        except OSError as exc:
            log.warning("spool: cannot delete finished segment %s: %s", segment.path, exc)

    def close(self) -> None:
        """Flush and close; safe to call twice."""
        fds = [fd for fd in (*self._dirty, *self._closing, self._fd) if fd is not None]
        self._dirty.clear()
        self._closing.clear()
        self._fd, self._active = None, None
        try:
            _fsync_all([], list(dict.fromkeys(fds)))
        except OSError as exc:
            log.error("spool: fsync at close failed: %s", exc)


def _fsync_all(fds: list[int], closing: list[int]) -> None:
    for fd in fds:
        if fd not in closing:
            _fdatasync(fd)
    for fd in closing:
        try:
            _fdatasync(fd)
        finally:
            os.close(fd)


def _fdatasync(fd: int) -> None:
    try:
        os.fdatasync(fd)
    except OSError as exc:
        if exc.errno != errno.EINVAL:  # EINVAL: a file that cannot be synced (nothing to make durable)
            raise
