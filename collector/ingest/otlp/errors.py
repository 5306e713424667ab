"""The ingestion exception tree: each error carries the HTTP status a client should see."""

from __future__ import annotations


class IngestError(Exception):
    """Base of every ingestion error; ``status`` is the HTTP status code to answer."""

    status = 400
    retry_after: float | None = None

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        if retry_after is not None:
            self.retry_after = retry_after


class BadRequest(IngestError):
    """A body that is not a valid export request (garbage, truncated, wrong structure)."""


class Unauthenticated(IngestError):
    status = 401


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
