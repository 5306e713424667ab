"""The ingestion branch of the collector's exception tree (``collector.errors``): each class
carries the HTTP status an export refused with it answers (gRPC maps it to its own codes)."""

from __future__ import annotations

from agentwatch_platform.collector.errors import CollectorError


class IngestError(CollectorError):
    """Base of every ingestion error; ``status`` is the HTTP status code to answer."""

    status = 400


class BadRequest(IngestError):
    """A body that is not a valid export request (garbage, truncated, wrong structure)."""


class Forbidden(IngestError):
    """A caller that may not export: the admin token (no project), or a key without ``ingest``."""

    status = 403


class PayloadTooLarge(IngestError):
    status = 413


class UnsupportedMediaType(IngestError):
    status = 415


class RateLimited(IngestError):
    """The key sent more spans per second than its limit allows."""

    status = 429


class Unavailable(IngestError):
    """The collector cannot make the request durable now (spool full or unwritable, shutting down)."""

    status = 503
